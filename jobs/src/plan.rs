//! `mill plan`: the cost of a run, measured on the user's own input. A sample of the
//! first step's input files runs through every step on this machine (the train phase
//! excepted: it wants GPUs), each step timed in CPU seconds; the figures are then
//! scaled to the whole input by bytes (work, documents, output, tokens) and by files
//! (requests), and priced for a fleet.
//!
//! Each step's CPU time is split in two: the work its inputs cost (scaled with the
//! input) and what a task pays once (loading models, planning, listing), counted once per
//! task. For a per-document step the work is the time its runner measured in reading,
//! in its stages and in writing ([`pipeline::Stats::stage_seconds`]); the rest is the
//! task's. Other phases count all their time as work.

use std::io::Write as _;

use serde::Serialize;

use pipeline::runner::{INPUT_LIST_SUFFIX, InputList, ListedInput, list_inputs};
use pipeline::{Error, Location, Result, Storage};

use crate::exec::Flags;
use crate::spec::{Kind, Pipeline};

/// What to project for.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Input files to run (spread evenly over the listing).
    pub sample: usize,
    /// Cores of the fleet, for the wall time.
    pub cores: u64,
    /// Cores per machine: tasks are sized to an hour of one machine.
    pub cores_per_node: u64,
    /// Price of one machine-hour.
    pub price: f64,
    /// Worker threads for the sample run (0: every core).
    pub threads: usize,
    /// Where the sample run writes (a scratch folder, removed after).
    pub scratch: std::path::PathBuf,
}

/// One step, measured on the sample and projected.
#[derive(Debug, Clone, Serialize)]
pub struct StepPlan {
    pub name: String,
    pub what: String,
    /// On the sample: documents in and out, CPU seconds of its work and of its task.
    pub sample_docs_in: u64,
    pub sample_docs_out: u64,
    pub sample_work_cpu_s: f64,
    pub sample_task_cpu_s: f64,
    /// Projected to the whole input.
    pub docs_in: f64,
    pub docs_out: f64,
    pub core_seconds: f64,
    pub tasks: u64,
    pub wall_seconds: f64,
    pub output_bytes: f64,
    pub tokens: Option<f64>,
    /// Objects written (PUT, one request each unless multipart) and inputs read (GET).
    pub put_requests: f64,
    pub get_requests: f64,
}

/// The plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub input_files: u64,
    pub input_bytes: u64,
    pub sample_files: u64,
    pub sample_bytes: u64,
    /// Whole input over sample, in bytes.
    pub scale: f64,
    pub steps: Vec<StepPlan>,
    /// Steps not run on the sample (the train phase).
    pub not_projected: Vec<String>,
    pub core_hours: f64,
    pub wall_hours: f64,
    pub machine_hours: f64,
    pub cost: f64,
    pub tokens: Option<f64>,
    /// The dedup clusters phase's memory, low and high estimate in bytes (docs/scale.md
    /// section 8: 37–68 bytes per document into dedup), when the pipeline dedups.
    pub clusters_memory_bytes: Option<(f64, f64)>,
    pub cores: u64,
    pub cores_per_node: u64,
    pub price: f64,
}

/// Memory of the clusters phase per document into dedup, low and high (docs/scale.md,
/// section 8: 22–41 GB at 600 M documents).
const CLUSTERS_BYTES_PER_DOC: (f64, f64) = (37.0, 68.0);

/// A task is sized to this much of one machine's time.
const TASK_SECONDS: f64 = 3600.0;

/// CPU seconds of this process so far, every thread's (`CLOCK_PROCESS_CPUTIME_ID`).
fn cpu_seconds() -> f64 {
    cpu_time::ProcessTime::now().as_duration().as_secs_f64()
}

/// Runs the sample and projects it.
pub fn plan(storage: &Storage, p: &Pipeline, opts: &PlanOptions) -> Result<Plan> {
    if opts.sample == 0 {
        return Err(Error::Usage("--sample: at least 1 input file".into()));
    }
    let input = Location::parse(&p.input)?;
    let listing = list_inputs(storage, &input)?;
    let first = p
        .steps
        .first()
        .ok_or_else(|| Error::Usage("the pipeline has no step".into()))?;
    // The first step's own rule for what is an input (a chain's source), else every
    // file that is not hidden.
    let source = match first.kind()? {
        Kind::Chain => Some(crate::exec::chain(storage, &p.for_step(0), first)?.source),
        _ => None,
    };
    let inputs: Vec<_> = listing
        .into_iter()
        .filter(|m| {
            let rel = if m.relative.is_empty() {
                m.location.file_name().to_string()
            } else {
                m.relative.clone()
            };
            !rel.split('/').any(|s| s.starts_with(['_', '.']))
                && pipeline::runner::unsafe_input_name(&rel).is_none()
                && source.as_ref().is_none_or(|s| s.stem(&rel).is_some())
        })
        .collect();
    if inputs.is_empty() {
        return Err(Error::Usage(format!("no input files at {input}")));
    }
    let n = opts.sample.min(inputs.len());
    // The middle of each of n equal slices of the listing.
    let picked: Vec<_> = (0..n)
        .map(|k| &inputs[((2 * k + 1) * inputs.len() / (2 * n)).min(inputs.len() - 1)])
        .collect();
    let input_bytes: u64 = inputs.iter().map(|m| m.size).sum();
    let sample_bytes: u64 = picked.iter().map(|m| m.size).sum::<u64>().max(1);
    let scale = input_bytes as f64 / sample_bytes as f64;
    let file_scale = inputs.len() as f64 / n as f64;

    // The sample as an input list below the input's prefix, and a scratch run.
    std::fs::create_dir_all(&opts.scratch)
        .map_err(|e| Error::Usage(format!("{}: {e}", opts.scratch.display())))?;
    let list = InputList {
        base: input.to_string(),
        inputs: picked
            .iter()
            .map(|m| ListedInput {
                relative: m.relative.clone(),
                size: m.size,
                etag: m.etag.clone(),
            })
            .collect(),
    };
    let list_path = opts.scratch.join(format!("sample{INPUT_LIST_SUFFIX}"));
    let mut f = std::fs::File::create(&list_path)
        .map_err(|e| Error::Usage(format!("{}: {e}", list_path.display())))?;
    f.write_all(
        serde_json::to_string(&list)
            .map_err(|e| Error::Usage(e.to_string()))?
            .as_bytes(),
    )
    .map_err(|e| Error::Usage(format!("{}: {e}", list_path.display())))?;
    let mut sample = p.clone();
    sample.input = list_path.to_string_lossy().into_owned();
    sample.output = opts.scratch.join("run").to_string_lossy().into_owned();
    sample.tasks = 1;
    let flags = Flags {
        threads: opts.threads,
        force: true,
        progress: false,
    };

    let mut steps = Vec::new();
    let mut not_projected = Vec::new();
    let mut read_files = inputs.len() as f64;
    for spec in &p.steps {
        let kind = spec.kind()?;
        if kind == Kind::Train {
            not_projected.push(spec.name.clone());
            continue;
        }
        let before = cpu_seconds();
        let summary = crate::exec::run(storage, &sample, None, Some(&spec.name), None, &flags)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Usage(format!("step {} did not run", spec.name)))?;
        let cpu = cpu_seconds() - before;
        let stats = &summary.stats;
        let timed: f64 = stats.stage_seconds.iter().map(|(_, s)| s).sum();
        let (work, task) = if timed > 0.0 {
            // The runner's timers are wall time over threads; the CPU time bounds them.
            let work = timed.min(cpu);
            (work, cpu - work)
        } else {
            (cpu, 0.0)
        };
        // Steps that write per input file write more files with more input; the
        // units of the other phases (bands × ranges, the clusters units, one
        // tokenizer) do not grow with it.
        let per_input = matches!(
            kind,
            Kind::Chain
                | Kind::DedupSignatures
                | Kind::DedupFilter
                | Kind::DedupSubstring
                | Kind::DedupSubstringFilter
                | Kind::ClassifyFilter
                | Kind::TokenizeEncode
        );
        let files_scale = if per_input { file_scale } else { 1.0 };
        let output = sample.step_output(&spec.name)?;
        let written = storage.list(&output)?;
        let out_bytes: u64 = written.iter().map(|m| m.size).sum();
        // Tokenizer training reads a sample of fixed size, whatever the input.
        let step_scale = if kind == Kind::TokenizeTrain {
            1.0
        } else {
            scale
        };
        let tasks_by_time =
            (work * step_scale / (TASK_SECONDS * opts.cores_per_node as f64)).ceil();
        let tasks = if kind.single_task() {
            1
        } else {
            (tasks_by_time as u64).clamp(1, (read_files.ceil() as u64).max(1))
        };
        let core_seconds = work * step_scale + task * tasks as f64;
        let cores_used = (tasks * opts.cores_per_node).min(opts.cores).max(1);
        steps.push(StepPlan {
            name: spec.name.clone(),
            what: summary.kind.clone(),
            sample_docs_in: stats.docs_in,
            sample_docs_out: stats.docs_out,
            sample_work_cpu_s: work,
            sample_task_cpu_s: task,
            docs_in: stats.docs_in as f64 * scale,
            docs_out: stats.docs_out as f64 * scale,
            core_seconds,
            tasks,
            wall_seconds: core_seconds / cores_used as f64,
            output_bytes: out_bytes as f64 * scale,
            tokens: summary.tokens.map(|t| t as f64 * scale),
            put_requests: written.len() as f64 * files_scale,
            get_requests: read_files,
        });
        // The next step reads what this one wrote (not its markers and notes).
        let data_files = written
            .iter()
            .filter(|m| !m.relative.split('/').any(|s| s.starts_with(['_', '.'])))
            .count();
        read_files = data_files as f64 * files_scale;
    }
    let _ = std::fs::remove_dir_all(&opts.scratch);
    let core_hours = steps.iter().map(|s| s.core_seconds).sum::<f64>() / 3600.0;
    let machine_hours = core_hours / opts.cores_per_node as f64;
    let dedup_docs = p
        .steps
        .iter()
        .position(|s| s.phase.as_deref() == Some("dedup.signatures"))
        .and_then(|i| {
            let name = &p.steps[i].name;
            steps.iter().find(|s| &s.name == name).map(|s| s.docs_in)
        });
    Ok(Plan {
        input_files: inputs.len() as u64,
        input_bytes,
        sample_files: n as u64,
        sample_bytes,
        scale,
        tokens: steps.iter().rev().find_map(|s| s.tokens),
        wall_hours: steps.iter().map(|s| s.wall_seconds).sum::<f64>() / 3600.0,
        steps,
        not_projected,
        core_hours,
        machine_hours,
        cost: machine_hours * opts.price,
        clusters_memory_bytes: dedup_docs
            .map(|d| (d * CLUSTERS_BYTES_PER_DOC.0, d * CLUSTERS_BYTES_PER_DOC.1)),
        cores: opts.cores,
        cores_per_node: opts.cores_per_node,
        price: opts.price,
    })
}

fn si(x: f64) -> String {
    let (v, unit) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(d, _)| x.abs() >= *d)
        .map_or((x, ""), |(d, u)| (x / d, u));
    if unit.is_empty() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}{unit}")
    }
}

/// Three significant digits, however small or large (a fixture's core-hours and a
/// crawl's).
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// The plan as a table.
pub fn table(plan: &Plan) -> String {
    let mut s = format!(
        "sample: {} of {} input files ({} of {} bytes); figures scaled ×{:.1} by bytes\n",
        plan.sample_files,
        plan.input_files,
        si(plan.sample_bytes as f64),
        si(plan.input_bytes as f64),
        plan.scale
    );
    s.push_str(&format!(
        "{:<14} {:>9} {:>9} {:>10} {:>6} {:>9} {:>10} {:>9} {:>9} {:>9}\n",
        "step",
        "docs in",
        "docs out",
        "core-s",
        "tasks",
        "wall s",
        "out bytes",
        "tokens",
        "PUT",
        "GET"
    ));
    for st in &plan.steps {
        s.push_str(&format!(
            "{:<14} {:>9} {:>9} {:>10} {:>6} {:>9} {:>10} {:>9} {:>9} {:>9}\n",
            st.name,
            si(st.docs_in),
            si(st.docs_out),
            sig(st.core_seconds),
            st.tasks,
            sig(st.wall_seconds),
            si(st.output_bytes),
            st.tokens.map_or("-".into(), si),
            si(st.put_requests),
            si(st.get_requests),
        ));
    }
    s.push_str(&format!(
        "total: {} core-hours; {} h of wall time on {} cores; {} machine-hours of {} cores, {} at {:.2} per machine-hour\n",
        sig(plan.core_hours),
        sig(plan.wall_hours),
        plan.cores,
        sig(plan.machine_hours),
        plan.cores_per_node,
        sig(plan.cost),
        plan.price
    ));
    if let Some(t) = plan.tokens {
        s.push_str(&format!("tokens: {}\n", si(t)));
    }
    if let Some((lo, hi)) = plan.clusters_memory_bytes {
        s.push_str(&format!(
            "dedup clusters phase memory in one unit: {}–{} bytes (37–68 bytes per document into dedup, docs/scale.md); past clusters_memory_bytes it runs in rounds of units, each within that setting\n",
            si(lo),
            si(hi)
        ));
    }
    for name in &plan.not_projected {
        s.push_str(&format!(
            "{name}: not run on the sample (the train phase needs GPUs)\n"
        ));
    }
    s.push_str("core-hours: the sample's measured CPU time scaled by bytes, plus each task's own start; tasks sized to an hour of one machine\n");
    s
}
