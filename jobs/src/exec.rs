//! Running steps: one task of one step (`mill step`, what a fleet array job runs), or
//! every step in order on this machine (`mill run`).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use pipeline::cli::config_hash;
use pipeline::marker::list_markers;
use pipeline::{Error, Location, Report, Result, RunOptions, Stats, Step, Storage};

use crate::spec::{Kind, Pipeline, StepSpec};

/// Name of the copy of the pipeline file a run keeps at its root.
pub const PIPELINE_COPY: &str = "_pipeline.toml";
/// Lease of the run lock `mill run` holds (renewed every third of it while it runs).
pub const RUN_LEASE_SECS: u64 = 120;

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// Worker threads per task (0: the pipeline's setting, then every core).
    pub threads: usize,
    /// Redo inputs that are done.
    pub force: bool,
    /// Show progress bars.
    pub progress: bool,
}

/// Writes the pipeline beside its outputs (for `mill status`, `mill report` and the
/// fleet's tasks), its relative local addresses made absolute against this folder.
pub fn record_pipeline(storage: &Storage, p: &Pipeline) -> Result<()> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::Usage(format!("the current folder: {e}")))?;
    let text = toml::to_string(&p.with_absolute_addresses(&cwd))
        .map_err(|e| Error::Usage(format!("serialising the pipeline: {e}")))?;
    let loc = p.run_location()?.join(PIPELINE_COPY);
    if storage.exists(&loc)? && storage.read(&loc)? == text.as_bytes() {
        return Ok(());
    }
    storage.put(&loc, text.as_bytes())
}

/// Several per-document steps fused into one pass: the first one's source, every
/// stage in order, one configuration hash over all of them.
pub fn fuse(name: &str, steps: Vec<Step>) -> Result<Step> {
    let mut iter = steps.into_iter();
    let first = iter
        .next()
        .ok_or_else(|| Error::Usage(format!("step {name}: no stages")))?;
    if first.per_input.is_some() {
        return Err(Error::Usage(format!(
            "step {name}: {} works per input and cannot be fused",
            first.name
        )));
    }
    let mut hashes = vec![first.config_hash.clone()];
    let mut fused = Step {
        name: name.to_string(),
        config_hash: String::new(),
        ..first
    };
    for s in iter {
        if s.per_input.is_some() {
            return Err(Error::Usage(format!(
                "step {name}: {} works per input and cannot be fused",
                s.name
            )));
        }
        if s.shard != fused.shard {
            return Err(Error::Usage(format!(
                "step {name}: stage {} writes shards with {:?}, the chain before it with {:?}; fused stages write one set of shards, so they must agree",
                s.name, s.shard, fused.shard
            )));
        }
        hashes.push(s.config_hash);
        fused.stages.extend(s.stages);
        fused.partition = fused.partition.or(s.partition);
    }
    fused.config_hash = config_hash(name, &hashes);
    Ok(fused)
}

pub(crate) fn chain(storage: &Storage, p: &Pipeline, spec: &StepSpec) -> Result<Step> {
    let mut steps = Vec::new();
    for name in &spec.stages {
        let stage = crate::stages::chain_stage(name)
            .ok_or_else(|| Error::Usage(format!("step {}: unknown stage {name}", spec.name)))?;
        steps.push((stage.build)(storage, p)?);
    }
    fuse(&spec.name, steps)
}

/// The address of the tokenizer a tokenize.encode step uses.
fn tokenizer_url(p: &Pipeline, spec: &StepSpec, config: &tokenize::Config) -> Result<String> {
    match spec.tokenizer.as_deref() {
        Some(r) if p.steps.iter().any(|s| s.name == r) => {
            Ok(p.step_output(r)?.join(tokenize::TOKENIZER_FILE).to_string())
        }
        Some(url) => Ok(url.to_string()),
        None => config.encode.tokenizer.clone().ok_or_else(|| {
            Error::Usage(format!(
                "step {}: name the train step or a tokenizer.json in `tokenizer`",
                spec.name
            ))
        }),
    }
}

/// Runs task `task` of `tasks` of step `i`.
pub fn run_task(
    storage: &Storage,
    p: &Pipeline,
    i: usize,
    task: usize,
    tasks: usize,
    flags: &Flags,
) -> Result<Report> {
    // The step's own settings over the pipeline's.
    let view = p.for_step(i);
    let p: &Pipeline = &view;
    let spec = &p.steps[i];
    let kind = spec.kind()?;
    let opts = RunOptions {
        input: p.input_of(i)?,
        output: p.step_output(&spec.name)?,
        tasks,
        task,
        threads: if flags.threads > 0 {
            flags.threads
        } else {
            p.threads
        },
        force: flags.force,
        dry_run: false,
        keep_rejected: spec.keep_rejected,
        progress: flags.progress,
    };
    if kind.single_task() && task != 0 {
        return Ok(Report::default());
    }
    let needs = |field: &Option<String>, what: &str| -> Result<Location> {
        let r = field
            .as_deref()
            .ok_or_else(|| Error::Usage(format!("step {}: `{what}` is required", spec.name)))?;
        p.resolve(r)
    };
    match kind {
        Kind::Chain if spec.classify_on_gpus() => crate::classify_gpu::run(
            storage,
            p,
            spec,
            &opts,
            spec.gpus_per_node.unwrap_or(1) as usize,
        ),
        Kind::Chain => pipeline::run(&chain(storage, p, spec)?, storage, &opts),
        Kind::ClassifyThreshold => {
            classify::top::threshold_step(storage, &opts, &p.stage_config("classify")?)
        }
        Kind::ClassifyFilter => {
            let thresholds = needs(&spec.threshold, "threshold")?;
            let step = classify::top::filter_step(
                storage,
                &p.stage_config("classify")?,
                &thresholds.to_string(),
            )?;
            pipeline::run(&step, storage, &opts)
        }
        Kind::DedupSignatures => {
            dedup::signatures::signatures(storage, &opts, &p.stage_config("dedup")?)
        }
        Kind::DedupBuckets => {
            let against = spec.against.as_deref().map(|r| p.resolve(r)).transpose()?;
            dedup::buckets::buckets(storage, &opts, &p.stage_config("dedup")?, against.as_ref())
        }
        Kind::DedupClusters => dedup::clusters::clusters(storage, &opts, &p.stage_config("dedup")?),
        Kind::DedupFilter => {
            let clusters = needs(&spec.clusters, "clusters")?;
            let step =
                dedup::filter::step(storage, &p.stage_config("dedup")?, &clusters.to_string())?;
            pipeline::run(&step, storage, &opts)
        }
        Kind::DedupIndex => {
            let clusters = needs(&spec.clusters, "clusters")?;
            dedup::index::index(storage, &opts, &p.stage_config("dedup")?, &clusters)
        }
        Kind::DedupSubstring => dedup::substring::substring(
            storage,
            &opts,
            &p.stage_config::<dedup::Config>("dedup")?.substring,
        ),
        Kind::DedupSubstringFilter => {
            let cuts = needs(&spec.clusters, "clusters")?;
            let step = dedup::substring::filter_step(
                storage,
                &p.stage_config::<dedup::Config>("dedup")?.substring,
                &cuts.to_string(),
            )?;
            pipeline::run(&step, storage, &opts)
        }
        Kind::TokenizeTrain => Ok(tokenize::train_step(
            storage,
            &opts,
            &p.stage_config::<tokenize::Config>("tokenize")?.train,
        )?
        .0),
        Kind::TokenizeEncode => {
            let config: tokenize::Config = p.stage_config("tokenize")?;
            let url = tokenizer_url(p, spec, &config)?;
            let loaded = tokenize::Loaded::read(
                storage,
                &url,
                config.encode.encoder,
                &config.encode.end_of_document,
            )?;
            tokenize::encode(storage, &opts, &config.encode, &loaded)
        }
        Kind::DecontamIndex => {
            decontam::index_step(storage, &opts, &crate::stages::decontam_config(p)?)
        }
        Kind::Train => {
            let mut table = p
                .config
                .get("train")
                .cloned()
                .unwrap_or_else(|| toml::Value::Table(toml::map::Map::new()));
            // A reference set named by a step is that step's token shards.
            if let Some(sets) = table
                .get_mut("eval_sets")
                .and_then(toml::Value::as_table_mut)
            {
                for (_, url) in sets.iter_mut() {
                    if let Some(name) = url.as_str()
                        && p.steps.iter().any(|s| s.name == name)
                    {
                        *url = toml::Value::String(p.step_output(name)?.to_string());
                    }
                }
            }
            crate::train::train(
                storage,
                &opts,
                &table,
                spec.gpus_per_node.unwrap_or(1) as usize,
            )
        }
    }
}

/// One step's line of the closing summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StepSummary {
    pub name: String,
    pub kind: String,
    /// Inputs (or units) processed in this run, and skipped as done.
    pub processed: usize,
    pub skipped: usize,
    /// Counters of every marker of the step (this run and earlier ones).
    pub stats: Stats,
    /// Documents read by the inputs processed in this run (for the rate).
    #[serde(default)]
    pub run_docs: u64,
    /// Tokens written (tokenize.encode).
    pub tokens: Option<u64>,
    /// Wall time of this run.
    pub seconds: f64,
    /// Inputs refused for their names, by reason (as every task lists the same
    /// inputs, the first task's count).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub refused: std::collections::BTreeMap<String, u64>,
    /// Files of the step's input that it does not read (`not_an_input`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_inputs: u64,
    /// What the step did beyond documents (the train step: steps, tokens, losses,
    /// checkpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The stems with a marker below a step's output, and their counters summed.
pub fn marker_stats(
    storage: &Storage,
    output: &Location,
) -> Result<(std::collections::BTreeSet<String>, Stats)> {
    let mut stats = Stats::default();
    let mut stems = std::collections::BTreeSet::new();
    for (stem, m) in list_markers(storage, output)? {
        stats.merge(&m.stats);
        stems.insert(stem);
    }
    Ok((stems, stats))
}

/// Runs the steps of `p` in order on this machine, each as `tasks` tasks one after
/// another; `from` starts at a step, `only` runs one.
pub fn run(
    storage: &Storage,
    p: &Pipeline,
    from: Option<&str>,
    only: Option<&str>,
    tasks: Option<usize>,
    flags: &Flags,
) -> Result<Vec<StepSummary>> {
    // One `mill run` per run at a time (cron, timers): a second one is refused while
    // the first holds the lock; a dead holder's lock expires with its lease.
    let _lock = pipeline::lock::acquire(
        storage,
        &p.run_location()?,
        "mill run",
        std::time::Duration::from_secs(RUN_LEASE_SECS),
    )?;
    record_pipeline(storage, p)?;
    let start = match (from, only) {
        (Some(f), _) => p.step(f)?.0,
        (_, Some(o)) => p.step(o)?.0,
        _ => 0,
    };
    let end = match only {
        Some(o) => p.step(o)?.0 + 1,
        None => p.steps.len(),
    };
    let mut out = Vec::new();
    for i in start..end {
        let spec = &p.steps[i];
        let n = p.tasks_of(i, tasks);
        let t0 = Instant::now();
        let mut summary = StepSummary {
            name: spec.name.clone(),
            kind: spec
                .phase
                .clone()
                .unwrap_or_else(|| spec.stages.join(" → ")),
            ..StepSummary::default()
        };
        tracing::info!(step = %spec.name, tasks = n, "step starts");
        for task in 0..n {
            let r = run_task(storage, p, i, task, n, flags)?;
            if task == 0 {
                summary.refused = r.refused.iter().map(|(k, v)| (k.to_string(), *v)).collect();
                summary.not_inputs = r.not_inputs;
            }
            summary.processed += r.processed.len();
            summary.skipped += r.skipped.len();
            summary.run_docs += r.stats.docs_in;
        }
        summary.seconds = t0.elapsed().as_secs_f64();
        let output = p.step_output(&spec.name)?;
        summary.stats = marker_stats(storage, &output)?.1;
        if spec.kind()? == Kind::TokenizeEncode {
            summary.tokens = tokenize::read_manifest(storage, &output)
                .ok()
                .map(|m| m.tokens);
        }
        if spec.kind()? == Kind::Train {
            summary.tokens = summary.stats.counts.get("train_tokens").copied();
            summary.note = crate::train::describe(&summary.stats, &output);
        }
        out.push(summary);
    }
    Ok(out)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The closing summary table.
pub fn summary_table(steps: &[StepSummary]) -> String {
    let mut s = format!(
        "{:<14} {:<34} {:>7} {:>9} {:>9} {:>10} {:>8} {:>10}\n",
        "step", "what", "inputs", "docs in", "docs out", "tokens", "wall s", "docs/s"
    );
    for st in steps {
        let tokens = st.tokens.map_or("-".to_string(), |t| t.to_string());
        // This run's documents over this run's time: inputs done earlier count in
        // neither.
        let rate = if st.processed > 0 && st.seconds > 0.0 {
            format!("{:.0}", st.run_docs as f64 / st.seconds)
        } else {
            "done".to_string()
        };
        s.push_str(&format!(
            "{:<14} {:<34} {:>7} {:>9} {:>9} {:>10} {:>8.1} {:>10}\n",
            st.name,
            truncate(&st.kind, 34),
            format!("{}+{}", st.processed, st.skipped),
            st.stats.docs_in,
            st.stats.docs_out,
            tokens,
            st.seconds,
            rate
        ));
        if let Some(line) = st.stats.records_line() {
            s.push_str(&format!("{:<14}   {line}\n", ""));
        }
        if let Some(line) = st.stats.stage_time_line() {
            s.push_str(&format!("{:<14}   {line}\n", ""));
        }
        for (reason, n) in &st.stats.drops {
            s.push_str(&format!("{:<14}   drop {reason}: {n}\n", ""));
        }
        for (reason, n) in &st.refused {
            s.push_str(&format!("{:<14}   input refused {reason}: {n}\n", ""));
        }
        if st.not_inputs > 0 {
            s.push_str(&format!(
                "{:<14}   not_an_input: {} files\n",
                "", st.not_inputs
            ));
        }
        if let Some(note) = &st.note {
            s.push_str(&format!("{:<14}   {note}\n", ""));
        }
    }
    s.push_str("inputs: processed in this run + skipped as done; docs: every input of the step, this run and earlier; docs/s: this run's inputs only\n");
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_refuses_stages_that_write_shards_differently() {
        let step = |name: &str, zstd_level: i32| Step {
            name: name.into(),
            shard: pipeline::shard::ShardOptions {
                zstd_level,
                ..Default::default()
            },
            ..quality::step(&Storage::new(), &quality::Config::default()).expect("quality step")
        };
        let same = fuse("text", vec![step("a", 3), step("b", 3)]).expect("same options fuse");
        assert_eq!(same.stages.len(), 2);
        let err = fuse("text", vec![step("a", 3), step("b", 9)]).expect_err("must refuse");
        assert!(err.to_string().contains("must agree"), "{err}");
    }

    #[test]
    fn rate_counts_only_this_runs_inputs() {
        // 1,000 documents in the markers, 100 of them read by this run in 2 s.
        let step = StepSummary {
            name: "text".into(),
            kind: "extract".into(),
            processed: 1,
            skipped: 9,
            stats: Stats {
                docs_in: 1000,
                ..Stats::default()
            },
            run_docs: 100,
            seconds: 2.0,
            ..StepSummary::default()
        };
        let table = summary_table(&[step]);
        let row = table.lines().nth(1).expect("a row");
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[2], "1+9", "{row}");
        assert_eq!(cols.last(), Some(&"50"), "{row}");
        // Everything skipped: no rate.
        let done = StepSummary {
            processed: 0,
            ..StepSummary::default()
        };
        assert!(
            summary_table(&[done])
                .lines()
                .nth(1)
                .expect("row")
                .ends_with("done")
        );
    }
}
