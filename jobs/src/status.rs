//! `mill status`: where a run stands, from its markers alone (disk or S3).

use std::time::{SystemTime, UNIX_EPOCH};

use pipeline::marker::list_started;
use pipeline::{DocumentSource, Location, Result, Source, Stats, Storage};

use crate::exec::PIPELINE_COPY;
use crate::spec::{Kind, Pipeline};

/// An input started without a marker whose note shows no heartbeat for this long
/// counts as stalled (its task died, or hangs): ten heartbeats.
pub const STALLED_AFTER_SECS: u64 = 600;

/// An input started and not finished.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Running {
    pub stem: String,
    /// Seconds since it started, and since its last heartbeat.
    pub started_secs_ago: u64,
    pub seen_secs_ago: u64,
    pub host: String,
}

/// Where one step stands.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StepStatus {
    pub name: String,
    pub kind: String,
    /// Inputs (or units) with a marker.
    pub done: usize,
    /// Inputs the step has (None: units, whose number the bucket run decides).
    pub total: Option<usize>,
    /// Counters summed over the markers.
    pub stats: Stats,
    /// Started without a marker.
    pub running: Vec<Running>,
    /// Files of the step's input that it does not read (`not_an_input`).
    pub not_inputs: usize,
    /// What the step did beyond documents (the train step, from its marker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Languages `mill status` lists for a step, those with the most documents first.
const STATUS_LANGUAGES: usize = 12;

impl StepStatus {
    /// Whether every input is done.
    pub fn complete(&self) -> bool {
        self.total.is_some_and(|t| t > 0 && self.done >= t)
    }
}

/// Reads the pipeline a run recorded at its root.
pub fn recorded_pipeline(storage: &Storage, run: &Location) -> Result<Pipeline> {
    let loc = run.join(PIPELINE_COPY);
    if !storage.exists(&loc)? {
        return Err(pipeline::Error::Usage(format!(
            "{run} is not a tokenmill run (no {PIPELINE_COPY}; `mill run` and `mill step` write it)"
        )));
    }
    // The run is where its copy lies (Pipeline::load); its input must resolve from here.
    let p = Pipeline::load(storage, &loc.to_string())?;
    if let Ok(pipeline::Location::Local(path)) = pipeline::Location::parse(&p.input)
        && path.is_relative()
        && !path.exists()
    {
        return Err(pipeline::Error::Usage(format!(
            "{run} records the relative input {:?}, which is not found from this folder: \
             run this from the folder the run was started in (runs recorded now keep \
             absolute addresses)",
            p.input
        )));
    }
    Ok(p)
}

/// The status of every step of the run at `run`.
pub fn status(storage: &Storage, run: &Location) -> Result<(Pipeline, Vec<StepStatus>)> {
    let p = recorded_pipeline(storage, run)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut out = Vec::new();
    for (i, spec) in p.steps.iter().enumerate() {
        let kind = spec.kind()?;
        let output = p.step_output(&spec.name)?;
        let (done, stats) = crate::exec::marker_stats(storage, &output)?;
        let mut not_inputs = 0;
        let total = match kind {
            Kind::DedupClusters
            | Kind::TokenizeTrain
            | Kind::Train
            | Kind::DecontamIndex
            | Kind::ClassifyThreshold => Some(1),
            Kind::DedupBuckets | Kind::DedupIndex | Kind::DedupSubstring => None,
            Kind::Chain
            | Kind::DedupSignatures
            | Kind::DedupFilter
            | Kind::DedupSubstringFilter
            | Kind::ClassifyFilter
            | Kind::TokenizeEncode => {
                let (inputs, others) = count_inputs(storage, &p, i)?;
                not_inputs = others;
                Some(inputs)
            }
        };
        let running = list_started(storage, &output)?
            .into_iter()
            .filter(|(stem, _)| !done.contains(stem))
            .map(|(stem, note)| Running {
                stem,
                started_secs_ago: now.saturating_sub(note.started),
                seen_secs_ago: now.saturating_sub(note.last_seen()),
                host: note.host,
            })
            .collect();
        let note = if kind == Kind::Train {
            crate::train::describe(&stats, &output)
        } else {
            None
        };
        out.push(StepStatus {
            note,
            not_inputs,
            name: spec.name.clone(),
            kind: spec
                .phase
                .clone()
                .unwrap_or_else(|| spec.stages.join(" → ")),
            done: done.len(),
            total,
            stats,
            running,
        });
    }
    Ok((p, out))
}

/// Inputs step `i` reads, and the files of its input it does not read (0, 0 when its
/// input does not exist yet). Hidden files (`_`, `.`) are neither.
fn count_inputs(storage: &Storage, p: &Pipeline, i: usize) -> Result<(usize, usize)> {
    let input = p.input_of(i)?;
    let spec = &p.steps[i];
    let warc = spec.stages.first().is_some_and(|s| s == "extract");
    let extract_source = if warc {
        Some(extract::WarcSource::new(
            &p.for_step(i).stage_config("extract")?,
        ))
    } else {
        None
    };
    let docs = DocumentSource::default();
    let source: &dyn Source = match &extract_source {
        Some(s) => s,
        None => &docs,
    };
    let from_step = (i > 0 && spec.input.is_none())
        || spec
            .input
            .as_ref()
            .is_some_and(|r| p.steps.iter().any(|s| &s.name == r));
    // An input from outside the run must be there: a missing one is an error, not
    // a step that has not started.
    if !from_step
        && let pipeline::Location::Local(path) = &input
        && !path.exists()
    {
        return Err(pipeline::Error::Usage(format!(
            "step {}: its input {input} does not exist",
            spec.name
        )));
    }
    let listing = match pipeline::runner::list_inputs(storage, &input) {
        Ok(l) => l,
        // A step before has not written its output yet: nothing to count.
        Err(pipeline::Error::NotFound { .. }) if from_step => return Ok((0, 0)),
        Err(e) => return Err(e),
    };
    let (mut inputs, mut others) = (0, 0);
    for m in &listing {
        let rel = if m.relative.is_empty() {
            m.location.file_name()
        } else {
            &m.relative
        };
        if rel.split('/').any(|part| part.starts_with(['_', '.'])) {
            continue;
        }
        if source.stem(rel).is_some() {
            inputs += 1;
        } else {
            others += 1;
        }
    }
    Ok((inputs, others))
}

/// "threshold of dclm: 0.0181 (keep_top 0.1, rank error ≤ 0.0006 at 99%)" for each
/// classifier a `classify.threshold` step set, from its marker's values.
pub fn threshold_lines(stats: &Stats) -> Vec<String> {
    stats
        .values
        .iter()
        .filter_map(|(k, t)| {
            let name = k.strip_suffix("_threshold")?;
            let share = stats.values.get(&format!("{name}_keep_top"))?;
            let error = stats
                .values
                .get(&format!("{name}_rank_error"))
                .copied()
                .unwrap_or(0.0);
            // Scores are float32: their shortest form.
            Some(format!(
                "threshold of {name}: {} (keep_top {share} of {} documents, rank error ≤ {error:.5} at 99%)",
                *t as f32,
                stats.docs_in
            ))
        })
        .collect()
}

/// Counts as a line of block characters, the highest bin full.
pub fn sparkline(counts: &[u64]) -> String {
    const BLOCKS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = counts.iter().copied().max().unwrap_or(0).max(1);
    counts
        .iter()
        .map(|&n| {
            if n == 0 {
                '·'
            } else {
                BLOCKS[(1 + (n * 7) / max).min(8) as usize]
            }
        })
        .collect()
}

/// Inputs of every step whose last heartbeat is older than `secs`: (step, input).
pub fn stalled(steps: &[StepStatus], secs: u64) -> Vec<(&str, &Running)> {
    steps
        .iter()
        .flat_map(|s| {
            s.running
                .iter()
                .filter(move |r| r.seen_secs_ago > secs)
                .map(move |r| (s.name.as_str(), r))
        })
        .collect()
}

/// The status as a text table; inputs silent for `stalled_after` seconds are stalled.
pub fn render(run: &Location, steps: &[StepStatus], stalled_after: u64) -> String {
    let mut s = format!("run {run}\n");
    s.push_str(&format!(
        "{:<14} {:<34} {:>11} {:>10} {:>10} {:>12}  state\n",
        "step", "what", "done/total", "docs in", "docs out", "bytes out"
    ));
    for st in steps {
        let total = st.total.map_or("?".to_string(), |t| t.to_string());
        let state = if !st.running.is_empty() {
            let stalled = st
                .running
                .iter()
                .filter(|r| r.seen_secs_ago > stalled_after)
                .count();
            if stalled > 0 {
                format!(
                    "{} running, {stalled} stalled or failed",
                    st.running.len() - stalled
                )
            } else {
                format!("{} running", st.running.len())
            }
        } else if st.complete() {
            "complete".to_string()
        } else if st.done == 0 {
            "not started".to_string()
        } else if st.total.is_none() {
            "units done".to_string()
        } else {
            "partial".to_string()
        };
        s.push_str(&format!(
            "{:<14} {:<34} {:>11} {:>10} {:>10} {:>12}  {state}\n",
            st.name,
            st.kind.chars().take(34).collect::<String>(),
            format!("{}/{total}", st.done),
            st.stats.docs_in,
            st.stats.docs_out,
            st.stats.bytes_out
        ));
        for (reason, n) in &st.stats.drops {
            s.push_str(&format!("{:<14}   drop {reason}: {n}\n", ""));
        }
        // By language: the ones with the most documents.
        for (language, l) in crate::report::language_rows(&st.stats, STATUS_LANGUAGES) {
            let mut line = format!(
                "{:<14}   language {language}: {} in, {} kept",
                "", l.docs_in, l.docs_out
            );
            for (reason, n) in &l.drops {
                line.push_str(&format!(", {reason} {n}"));
            }
            s.push_str(&line);
            s.push('\n');
        }
        if st.stats.languages.len() > STATUS_LANGUAGES {
            s.push_str(&format!(
                "{:<14}   {} more languages (`mill report` has {} of them)\n",
                "",
                st.stats.languages.len() - STATUS_LANGUAGES,
                crate::report::LANGUAGE_ROWS.min(st.stats.languages.len())
            ));
        }
        if let Some(line) = &st.note {
            s.push_str(&format!("{:<14}   {line}\n", ""));
        }
        if st.not_inputs > 0 {
            s.push_str(&format!(
                "{:<14}   not_an_input: {} files\n",
                "", st.not_inputs
            ));
        }
        for (what, n) in st
            .stats
            .counts
            .iter()
            .filter(|(k, _)| !k.starts_with("train_"))
        {
            s.push_str(&format!("{:<14}   counted {what}: {n}\n", ""));
        }
        for line in threshold_lines(&st.stats) {
            s.push_str(&format!("{:<14}   {line}\n", ""));
        }
        for (name, h) in &st.stats.histograms {
            s.push_str(&format!(
                "{:<14}   {name} of {} documents, {} to {}: {}\n",
                "",
                h.total(),
                h.lo,
                h.hi,
                sparkline(&h.counts)
            ));
        }
        for r in &st.running {
            let what = if r.seen_secs_ago > stalled_after {
                "stalled or failed"
            } else {
                "running"
            };
            s.push_str(&format!(
                "{:<14}   {what}: {} (started {} s ago on {}, last heartbeat {} s ago)\n",
                "", r.stem, r.started_secs_ago, r.host, r.seen_secs_ago
            ));
        }
    }
    s
}
