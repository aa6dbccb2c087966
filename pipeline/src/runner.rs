//! The runner for per-document stages: list, split, skip what is done, read, run the
//! stages on all cores, write, count, mark.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use crate::document::{Column, Document};
use crate::error::{Error, Result};
use crate::marker::{Marker, REJECTED_DIR, marker_location, read_marker, write_marker};
use crate::progress::Progress;
use crate::shard::{ShardOptions, ShardWriter};
use crate::source::Source;
use crate::stats::Stats;
use crate::storage::{Location, ObjectMeta, Storage};

use crate::tasks;

/// What a stage decides for one document. A drop's reason becomes a stats key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    Drop(&'static str),
}

/// A per-document stage: it may annotate or rewrite a document, and may drop it.
pub trait Stage: Send + Sync {
    /// Name, used in logs.
    fn name(&self) -> &'static str;
    /// Typed columns this stage writes with [`Document::annotate`].
    fn columns(&self) -> Vec<Column> {
        Vec::new()
    }
    /// Looks at one document.
    fn process(&self, doc: &mut Document) -> Verdict;
    /// Values this stage records with [`Document::measure`], whose distribution the
    /// run keeps per input: a histogram in the stats, and a quantile sketch beside the
    /// marker when the measure asks for one.
    fn measures(&self) -> Vec<Measure> {
        Vec::new()
    }
    /// Whether the runner should hand this stage the documents of a batch together
    /// ([`Stage::process_batch`]): a model that batches its work (a transformer).
    fn batched(&self) -> bool {
        false
    }
    /// Looks at the documents of one batch that the stages before it kept, together,
    /// from a thread of the run's pool (it may split the work on the pool itself);
    /// returns a verdict per document, in order. Called only when
    /// [`Stage::batched`] says so.
    fn process_batch(&self, docs: &mut [&mut Document]) -> Vec<Verdict> {
        docs.iter_mut().map(|d| self.process(d)).collect()
    }
}

/// A value a stage measures on documents ([`Stage::measures`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    /// Its name, as [`Document::measure`] records it.
    pub name: &'static str,
    /// The histogram's range and bins (values outside fall in the edge bins).
    pub lo: f64,
    pub hi: f64,
    pub bins: usize,
    /// Also keep a quantile sketch of the values of the documents each input kept, in
    /// `<output>/_sketches/<stem>/<name>.kll` ([`crate::sketch::Sketch`]).
    pub sketch: bool,
}

/// Folder of the per-input quantile sketches below a step's output.
pub const SKETCH_DIR: &str = "_sketches";

/// Work that depends on which input is read and on each document's row in it (dedup's
/// filter: that input's removal list, by row). The runner binds it to each input before
/// reading; only the bound [`RowStage`] sees documents, so there is no unbound state.
pub trait InputStage: Send + Sync {
    /// Name, used in logs.
    fn name(&self) -> &'static str;
    /// Typed columns the bound stage writes with [`Document::annotate`].
    fn columns(&self) -> Vec<Column>;
    /// Loads what one input needs.
    fn bind(&self, storage: &Storage, input: &Planned) -> Result<Box<dyn RowStage>>;
}

/// An [`InputStage`] bound to one input: looks at a document knowing its row, its
/// position among the documents the source read from the input (0-based).
pub trait RowStage: Send + Sync {
    fn process(&self, doc: &mut Document, row: u64) -> Verdict;
}

/// One pass over the inputs: a chain of stages fused together.
pub struct Step {
    /// Name, recorded in markers.
    pub name: String,
    /// The stages, applied in order; the first drop wins.
    pub stages: Vec<Box<dyn Stage>>,
    /// How inputs are read.
    pub source: Box<dyn Source>,
    /// Hash of everything that changes the output; a marker with another hash is redone.
    pub config_hash: String,
    /// How output shards are written.
    pub shard: ShardOptions,
    /// Spread kept documents over output folders (`None`: one output per input).
    pub partition: Option<Partition>,
    /// Per-input work applied after `stages` (see [`InputStage`]).
    pub per_input: Option<Box<dyn InputStage>>,
}

/// How the kept documents of one input are spread over output folders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// `<output>/<language>/<stem>.parquet`, as FineWeb-2 lays out its languages;
    /// documents without a language go under `unknown`.
    Language,
}

impl Partition {
    /// The folder a document goes to: a safe path component, never hidden.
    fn key(self, doc: &Document) -> String {
        match self {
            // FineWeb-2's folders: `cmn_Hani` where the label's script is known.
            Partition::Language => match crate::languages::language_with_script(doc) {
                Some(l)
                    if !l.is_empty()
                        && !l.starts_with(['_', '.'])
                        && l.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    l
                }
                _ => "unknown".to_string(),
            },
        }
    }
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("name", &self.name)
            .field(
                "stages",
                &self
                    .stages
                    .iter()
                    .map(|s| s.name())
                    .chain(self.per_input.iter().map(|s| s.name()))
                    .collect::<Vec<_>>(),
            )
            .field("config_hash", &self.config_hash)
            .finish()
    }
}

impl Step {
    fn declared(&self) -> Vec<Column> {
        let mut cols: Vec<Column> = Vec::new();
        let per_input = self.per_input.iter().flat_map(|s| s.columns());
        for c in self
            .stages
            .iter()
            .flat_map(|s| s.columns())
            .chain(per_input)
        {
            if !cols.iter().any(|k| k.name == c.name) {
                cols.push(c);
            }
        }
        cols
    }

    /// The per-input work bound to one input.
    fn bind(&self, storage: &Storage, input: &Planned) -> Result<Option<Box<dyn RowStage>>> {
        self.per_input
            .as_ref()
            .map(|s| s.bind(storage, input))
            .transpose()
    }

    /// Runs the stages on one document, adding the nanoseconds each took to `spent`
    /// (one counter per stage, then one for the per-input stage).
    fn verdict(
        &self,
        bound: Option<&dyn RowStage>,
        doc: &mut Document,
        row: u64,
        spent: &[AtomicU64],
    ) -> Verdict {
        let verdict = self.stages_on(0..self.stages.len(), doc, spent);
        match bound {
            Some(stage) if verdict == Verdict::Keep => {
                let t = Instant::now();
                let verdict = stage.process(doc, row);
                spent[self.stages.len()]
                    .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                verdict
            }
            _ => verdict,
        }
    }

    /// Runs stages `range` on one document, one at a time (the first drop wins),
    /// adding the nanoseconds each took to its counter in `spent`.
    fn stages_on(
        &self,
        range: std::ops::Range<usize>,
        doc: &mut Document,
        spent: &[AtomicU64],
    ) -> Verdict {
        let mut t = Instant::now();
        for i in range {
            let verdict = self.stages[i].process(doc);
            let now = Instant::now();
            spent[i].fetch_add((now - t).as_nanos() as u64, Ordering::Relaxed);
            t = now;
            if verdict != Verdict::Keep {
                return verdict;
            }
        }
        Verdict::Keep
    }

    /// The verdicts on one batch of documents: stages in order (the first drop wins),
    /// each document on its own thread, except that a batched stage sees the
    /// documents still kept together; then the per-input stage.
    fn verdicts(
        &self,
        bound: Option<&dyn RowStage>,
        docs: &mut [Document],
        first_row: u64,
        spent: &[AtomicU64],
    ) -> Vec<Verdict> {
        if !self.stages.iter().any(|s| s.batched()) {
            return docs
                .par_iter_mut()
                .enumerate()
                .map(|(i, d)| self.verdict(bound, d, first_row + i as u64, spent))
                .collect();
        }
        let mut verdicts = vec![Verdict::Keep; docs.len()];
        let mut i = 0;
        while i < self.stages.len() {
            if self.stages[i].batched() {
                let start = Instant::now();
                let alive: Vec<usize> = (0..docs.len())
                    .filter(|&k| verdicts[k] == Verdict::Keep)
                    .collect();
                let mut refs: Vec<&mut Document> = docs
                    .iter_mut()
                    .zip(&verdicts)
                    .filter(|(_, v)| **v == Verdict::Keep)
                    .map(|(d, _)| d)
                    .collect();
                let out = self.stages[i].process_batch(&mut refs);
                debug_assert_eq!(out.len(), alive.len());
                for (k, v) in alive.into_iter().zip(out) {
                    verdicts[k] = v;
                }
                // The stage ran on the whole pool: its time over threads.
                let ns = start.elapsed().as_nanos() as u64 * rayon::current_num_threads() as u64;
                spent[i].fetch_add(ns, Ordering::Relaxed);
                i += 1;
                continue;
            }
            let end = (i..self.stages.len())
                .find(|&j| self.stages[j].batched())
                .unwrap_or(self.stages.len());
            docs.par_iter_mut()
                .zip(verdicts.par_iter_mut())
                .for_each(|(d, verdict)| {
                    if *verdict == Verdict::Keep {
                        *verdict = self.stages_on(i..end, d, spent);
                    }
                });
            i = end;
        }
        if let Some(stage) = bound {
            let n = self.stages.len();
            docs.par_iter_mut()
                .zip(verdicts.par_iter_mut())
                .enumerate()
                .for_each(|(k, (d, verdict))| {
                    if *verdict == Verdict::Keep {
                        let t = Instant::now();
                        *verdict = stage.process(d, first_row + k as u64);
                        spent[n].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                });
        }
        verdicts
    }

    /// Every stage's measures, each name once.
    fn measures(&self) -> Vec<Measure> {
        let mut out: Vec<Measure> = Vec::new();
        for m in self.stages.iter().flat_map(|s| s.measures()) {
            if !out.iter().any(|x| x.name == m.name) {
                out.push(m);
            }
        }
        out
    }

    /// The names of the parts [`Stats::stage_seconds`] times, in order.
    fn stage_names(&self) -> Vec<&'static str> {
        self.stages
            .iter()
            .map(|s| s.name())
            .chain(self.per_input.iter().map(|s| s.name()))
            .collect()
    }
}

/// Runtime facts of one run (from flags).
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub input: Location,
    pub output: Location,
    pub tasks: usize,
    pub task: usize,
    /// Worker threads; 0 means every core.
    pub threads: usize,
    /// Redo inputs even when their marker matches.
    pub force: bool,
    /// Print the split and what would be skipped; process nothing.
    pub dry_run: bool,
    /// Also write dropped documents, with their reason, under `_rejected/`.
    pub keep_rejected: bool,
    /// Show a progress bar / heartbeat.
    pub progress: bool,
}

impl RunOptions {
    /// Options for a one-task local run, as tests use.
    pub fn new(input: Location, output: Location) -> Self {
        RunOptions {
            input,
            output,
            tasks: 1,
            task: 0,
            threads: 0,
            force: false,
            dry_run: false,
            keep_rejected: false,
            progress: false,
        }
    }
}

impl RunOptions {
    /// How many pieces of work run at once on this run's pool, for `todo` pieces: the
    /// worker threads (every core when 0), at most `todo`, at least 1.
    pub fn concurrency(&self, todo: usize) -> usize {
        let threads = match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        threads.min(todo).max(1)
    }
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Relative paths of inputs processed in this run.
    pub processed: Vec<String>,
    /// Relative paths of inputs skipped because their marker matched.
    pub skipped: Vec<String>,
    /// Counters summed over the processed inputs.
    pub stats: Stats,
    /// Inputs of the listing refused for their names, by reason (every task counts
    /// them: each lists the same inputs).
    pub refused: BTreeMap<&'static str, u64>,
    /// Files of the listing the step does not read (`not_an_input`: a WAT file beside
    /// WARC files, a README), counted rather than ignored.
    pub not_inputs: u64,
}

/// One input of this task, with its stem (the name its outputs and marker derive from).
#[derive(Debug, Clone)]
pub struct Planned {
    pub meta: ObjectMeta,
    pub relative: String,
    pub stem: String,
}

/// What one task of a step has to do: the inputs to run and those already done.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Inputs of this task without a matching marker, in listing order.
    pub todo: Vec<Planned>,
    /// Relative paths of this task's inputs whose marker matches.
    pub skipped: Vec<String>,
    /// Inputs listed for all tasks.
    pub listed: usize,
    /// Inputs refused for their names (see [`unsafe_input_name`]), by reason.
    pub refused: BTreeMap<&'static str, u64>,
    /// Files listed that the step's source does not read (see [`Report::not_inputs`]).
    pub not_inputs: u64,
}

/// Suffix of an input list: a JSON file naming the inputs of a step instead of a
/// prefix holding them (`mill run --incremental` gives each increment one).
pub const INPUT_LIST_SUFFIX: &str = ".inputs.json";

/// An input list: the prefix the inputs lie below, and each one as it was listed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputList {
    pub base: String,
    pub inputs: Vec<ListedInput>,
}

/// One input of an [`InputList`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListedInput {
    pub relative: String,
    pub size: u64,
    pub etag: Option<String>,
}

/// The inputs at `input`: the objects below a prefix, or those an input list
/// (`*.inputs.json`) names, with the relative names, sizes and tags they were listed
/// with (so their outputs and markers are named as a listing of the prefix would).
pub fn list_inputs(storage: &Storage, input: &Location) -> Result<Vec<ObjectMeta>> {
    if !input.to_string().ends_with(INPUT_LIST_SUFFIX) {
        return storage.list(input);
    }
    let list: InputList =
        serde_json::from_slice(&storage.read(input)?).map_err(|e| Error::Input {
            url: input.to_string(),
            message: format!("not an input list: {e}"),
        })?;
    let base = Location::parse(&list.base)?;
    Ok(list
        .inputs
        .into_iter()
        .map(|i| ObjectMeta {
            location: base.join(&i.relative),
            relative: i.relative,
            size: i.size,
            etag: i.etag,
        })
        .collect())
}

/// Why an input name from a listing cannot name outputs safely, if it cannot: names
/// come from S3 listings, and a key may hold `..` or `.` segments, an empty segment
/// (a leading or doubled `/`) or control characters; any of these could put an output
/// outside the output prefix or garble a log line. Such an input is refused and
/// counted under the reason.
pub fn unsafe_input_name(relative: &str) -> Option<&'static str> {
    if relative.chars().any(char::is_control) {
        return Some("input_name_control_character");
    }
    if relative.starts_with('/') || relative.contains("//") || relative.ends_with('/') {
        return Some("input_name_empty_segment");
    }
    if relative.split('/').any(|part| part == ".." || part == ".") {
        return Some("input_name_dot_segment");
    }
    None
}

fn hidden(relative: &str) -> bool {
    relative
        .split('/')
        .any(|part| part.starts_with('_') || part.starts_with('.'))
}

/// Lists the inputs `source` reads, splits them among the tasks and checks this task's
/// markers: the planning every multi-input step shares. Prints the plan on a dry run.
pub fn plan(
    step_name: &str,
    source: &dyn Source,
    config_hash: &str,
    storage: &Storage,
    opts: &RunOptions,
) -> Result<Plan> {
    let listing = list_inputs(storage, &opts.input)?;
    let mut inputs: Vec<Planned> = Vec::new();
    let mut refused: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut not_inputs = 0u64;
    for meta in listing {
        let relative = if meta.relative.is_empty() {
            meta.location.file_name().to_string()
        } else {
            meta.relative.clone()
        };
        if let Some(reason) = unsafe_input_name(&relative) {
            tracing::warn!(
                step = %step_name,
                input = %relative.escape_debug(),
                reason,
                "input refused: its name cannot name an output below the output prefix"
            );
            *refused.entry(reason).or_default() += 1;
            continue;
        }
        if hidden(&relative) {
            continue;
        }
        if let Some(stem) = source.stem(&relative) {
            inputs.push(Planned {
                meta: ObjectMeta {
                    relative: relative.clone(),
                    ..meta
                },
                relative,
                stem,
            });
        } else {
            tracing::debug!(step = %step_name, file = %relative, "not an input of this step");
            not_inputs += 1;
        }
    }
    let mut stems: BTreeMap<&str, &str> = BTreeMap::new();
    for p in &inputs {
        if let Some(other) = stems.insert(&p.stem, &p.relative) {
            return Err(Error::Usage(format!(
                "inputs {other} and {} would both write outputs named {}: rename one",
                p.relative, p.stem
            )));
        }
    }
    if inputs.is_empty() {
        return Err(Error::Usage(format!(
            "no input files at {} (files and folders whose names start with _ or . are ignored)",
            opts.input
        )));
    }
    let metas: Vec<ObjectMeta> = inputs.iter().map(|p| p.meta.clone()).collect();
    let assignment = tasks::assignment(&metas, opts.tasks);
    let listed = inputs.len();
    let mut plan = Plan {
        listed,
        refused,
        not_inputs,
        ..Plan::default()
    };
    for (p, task) in inputs.into_iter().zip(assignment) {
        if task != opts.task {
            continue;
        }
        let done = !opts.force
            && read_marker(storage, &marker_location(&opts.output, &p.stem))?
                .is_some_and(|m| m.matches(&p.meta, config_hash));
        if done {
            plan.skipped.push(p.relative);
        } else {
            plan.todo.push(p);
        }
    }
    tracing::info!(
        step = %step_name,
        task = opts.task,
        tasks = opts.tasks,
        inputs = listed,
        todo = plan.todo.len(),
        skipped = plan.skipped.len(),
        not_inputs,
        "planned"
    );
    if opts.dry_run {
        let todo = plan.todo.iter().map(|p| (p.relative.as_str(), p.meta.size));
        print_plan(
            step_name,
            opts,
            "inputs listed",
            listed,
            todo,
            &plan.skipped,
        );
        if not_inputs > 0 {
            println!("  {not_inputs} files not an input of this step (not_an_input)");
        }
    }
    Ok(plan)
}

/// A dry run's account of one task's plan: what runs (name, bytes), what is skipped.
fn print_plan<'a>(
    step_name: &str,
    opts: &RunOptions,
    what: &str,
    listed: usize,
    todo: impl ExactSizeIterator<Item = (&'a str, u64)>,
    skipped: &[String],
) {
    println!(
        "step {step_name} task {}/{}: {listed} {what}, {} to run, {} done",
        opts.task,
        opts.tasks,
        todo.len(),
        skipped.len()
    );
    for (name, bytes) in todo {
        println!("run  {name} ({bytes} bytes)");
    }
    for s in skipped {
        println!("skip {s}");
    }
}

/// The worker pool of a run: `threads` threads, or one per core when 0.
pub fn pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tokenmill-{i}"))
        .build()
        .map_err(|e| Error::Usage(format!("starting {threads} worker threads: {e}")))
}

/// Runs one task of a step.
pub fn run(step: &Step, storage: &Storage, opts: &RunOptions) -> Result<Report> {
    let plan = plan(
        &step.name,
        step.source.as_ref(),
        &step.config_hash,
        storage,
        opts,
    )?;
    process_planned(&step.name, plan, opts, |p, progress| {
        process_input(step, storage, opts, p, progress)
    })
}

/// Runs `process` on every input of `plan` on the run's worker pool, with a progress
/// display, and sums what they report (the skipped inputs listed too). Nothing runs on
/// a dry run.
pub fn process_planned(
    step_name: &str,
    plan: Plan,
    opts: &RunOptions,
    process: impl Fn(&Planned, &Progress) -> Result<Stats> + Sync,
) -> Result<Report> {
    let mut report = Report {
        skipped: plan.skipped,
        refused: plan.refused,
        not_inputs: plan.not_inputs,
        ..Report::default()
    };
    if opts.dry_run {
        return Ok(report);
    }
    let todo = plan.todo;
    let pool = pool(opts.threads)?;
    let total_bytes = todo.iter().map(|p| p.meta.size).sum();
    let progress = Progress::start(step_name, todo.len() as u64, total_bytes, opts.progress);
    // One input per job: rayon otherwise hands each thread a run of neighbouring inputs
    // that no other thread can take from, and sorted inputs cluster their work (after
    // deduplication the first copy of a crawl holds every kept document): one thread
    // then worked through all of it while the other waited.
    let results: Vec<Result<Stats>> = pool.install(|| {
        todo.par_iter()
            .with_max_len(1)
            .map(|p| {
                let stats = process(p, &progress)?;
                progress.file_done(p.meta.size);
                Ok(stats)
            })
            .collect()
    });
    progress.finish();
    for (p, result) in todo.iter().zip(results) {
        report.stats.merge(&result?);
        report.processed.push(p.relative.clone());
    }
    Ok(report)
}

fn process_input(
    step: &Step,
    storage: &Storage,
    opts: &RunOptions,
    p: &Planned,
    progress: &Progress,
) -> Result<Stats> {
    let start = Instant::now();
    let marker_loc = begin_input(storage, &opts.output, &p.stem)?;
    let declared = step.declared();
    let mut stats = Stats::default();
    let mut outputs = Outputs {
        storage,
        output: &opts.output,
        step,
        declared: &declared,
        writers: BTreeMap::new(),
    };
    let rej_rel = format!("{REJECTED_DIR}/{}.parquet", p.stem);
    let bound = step.bind(storage, p)?;
    let mut first_row: u64 = 0;

    let spent: Vec<AtomicU64> = (0..=step.stages.len()).map(|_| AtomicU64::new(0)).collect();
    let measures = step.measures();
    let mut histograms: BTreeMap<&'static str, crate::stats::Histogram> = measures
        .iter()
        .map(|m| (m.name, crate::stats::Histogram::new(m.lo, m.hi, m.bins)))
        .collect();
    let mut sketches: BTreeMap<&'static str, crate::sketch::Sketch> = measures
        .iter()
        .filter(|m| m.sketch)
        .map(|m| {
            (
                m.name,
                crate::sketch::Sketch::new(crate::sketch::DEFAULT_K, sketch_seed(&p.stem, m.name)),
            )
        })
        .collect();
    let mut read_time = std::time::Duration::ZERO;
    let mut write_time = std::time::Duration::ZERO;
    let mut read_start = Instant::now();
    for batch in step.source.read(storage, &p.meta, &p.relative)? {
        let batch = batch?;
        read_time += read_start.elapsed();
        batch.count_drops(&mut stats, &p.meta.location);
        let mut docs = batch.docs;
        let verdicts = step.verdicts(bound.as_deref(), &mut docs, first_row, &spent);
        let write_start = Instant::now();
        first_row += docs.len() as u64;
        let carry = batch.carry.as_ref();
        // Rows per output: (output path, rows, drop reasons for rejected shards).
        let mut routes: BTreeMap<String, (Vec<u32>, Vec<&'static str>)> = BTreeMap::new();
        if step.partition.is_none() {
            routes.entry(format!("{}.parquet", p.stem)).or_default();
        }
        for (i, (doc, verdict)) in docs.iter().zip(&verdicts).enumerate() {
            for &(name, value) in &doc.measures {
                if let Some(h) = histograms.get_mut(name)
                    && !value.is_nan()
                {
                    h.add(f64::from(value));
                }
                if *verdict == Verdict::Keep
                    && let Some(s) = sketches.get_mut(name)
                {
                    s.add(value);
                }
            }
            let bucket = crate::stats::length_bucket(doc.text.len());
            *stats.length_in.entry(bucket).or_default() += 1;
            for (name, n) in &doc.counts {
                *stats.counts.entry((*name).to_string()).or_default() += n;
            }
            if let Some(language) = crate::languages::language_with_script(doc) {
                let dropped = match verdict {
                    Verdict::Keep => None,
                    Verdict::Drop(reason) => Some(*reason),
                };
                stats.languages.entry(language).or_default().add(dropped);
            }
            match verdict {
                Verdict::Keep => {
                    stats.keep();
                    *stats.length_out.entry(bucket).or_default() += 1;
                    let rel = match step.partition {
                        Some(part) => format!("{}/{}.parquet", part.key(doc), p.stem),
                        None => format!("{}.parquet", p.stem),
                    };
                    routes.entry(rel).or_default().0.push(i as u32);
                }
                Verdict::Drop(reason) => {
                    stats.drop(reason);
                    if opts.keep_rejected {
                        let route = routes.entry(rej_rel.clone()).or_default();
                        route.0.push(i as u32);
                        route.1.push(reason);
                    }
                }
            }
        }
        progress.docs(docs.len() as u64 + batch.drops.iter().map(|(_, n)| n).sum::<u64>());
        for (rel, (rows, reasons)) in &routes {
            let chosen: Vec<&Document> = rows.iter().map(|&i| &docs[i as usize]).collect();
            let rejected = *rel == rej_rel;
            let writer = outputs.writer(rel, carry.map(|c| c.schema()).as_deref(), rejected)?;
            writer.write(
                &chosen,
                carry.map(|c| (c, rows.as_slice())),
                rejected.then_some(reasons.as_slice()),
            )?;
        }
        write_time += write_start.elapsed();
        crash_point();
        read_start = Instant::now();
    }

    let write_start = Instant::now();
    if step.partition.is_none() {
        outputs.writer(&format!("{}.parquet", p.stem), None, false)?;
    }
    let mut written = Vec::new();
    for (rel, writer) in outputs.writers {
        let bytes = writer.finish()?;
        if rel != rej_rel {
            stats.bytes_out += bytes;
        }
        written.push(rel);
    }
    // The sketches, beside the marker (hidden from the next step's listing).
    for (name, sketch) in &sketches {
        let rel = format!("{SKETCH_DIR}/{}/{name}.kll", p.stem);
        let loc = opts.output.join(&rel);
        storage.remove_stale_temporaries(&loc)?;
        storage.put(&loc, &sketch.to_bytes())?;
        written.push(rel);
    }
    stats.histograms = histograms
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    write_time += write_start.elapsed();
    stats.add_stage_seconds("read", read_time.as_secs_f64());
    for (name, ns) in step.stage_names().into_iter().zip(&spent) {
        stats.add_stage_seconds(name, ns.load(Ordering::Relaxed) as f64 / 1e9);
    }
    stats.add_stage_seconds("write", write_time.as_secs_f64());
    stats.bytes_in = p.meta.size;
    stats.seconds = start.elapsed().as_secs_f64();
    debug_assert!(stats.balanced());
    finish_input(
        storage,
        &marker_loc,
        &step.name,
        &step.config_hash,
        p,
        written,
        &stats,
    )?;
    tracing::debug!(input = %p.meta.location, docs_in = stats.docs_in, docs_out = stats.docs_out, "input done");
    Ok(stats)
}

/// The seed of an input's sketch of a measure: its coin flips depend on the input and
/// the measure, not on which task or thread ran it.
fn sketch_seed(stem: &str, measure: &str) -> u64 {
    let h = crate::cli::sha256_hex(format!("{stem}\0{measure}").as_bytes());
    u64::from_str_radix(&h[..16], 16).unwrap_or(0)
}

/// Prepares the redo of one input: notes that it started (`_started/<stem>.json`, for
/// `mill status`), clears what a killed run left beside its marker and removes the
/// outputs an earlier run of it listed (another config may name other outputs). Returns the marker's address, for [`finish_input`].
pub fn begin_input(storage: &Storage, output: &Location, stem: &str) -> Result<Location> {
    let marker_loc = marker_location(output, stem);
    storage.remove_stale_temporaries(&marker_loc)?;
    crate::marker::write_started(storage, output, stem)?;
    if let Some(old) = read_marker(storage, &marker_loc)? {
        for rel in &old.outputs {
            storage.delete(&output.join(rel))?;
        }
    }
    Ok(marker_loc)
}

/// Marks one input done, last, once its `outputs` (relative to the output prefix) are
/// complete.
pub fn finish_input(
    storage: &Storage,
    marker_loc: &Location,
    step: &str,
    config_hash: &str,
    input: &Planned,
    outputs: Vec<String>,
    stats: &Stats,
) -> Result<()> {
    let marker = Marker {
        step: step.to_string(),
        input: input.meta.location.to_string(),
        input_size: input.meta.size,
        input_etag: input.meta.etag.clone(),
        source_hash: None,
        config_hash: config_hash.to_string(),
        outputs,
        stats: stats.clone(),
    };
    write_marker(storage, marker_loc, &marker)
}

/// A piece of work of a step that is not one input file: a bucket range, the clusters
/// of a batch, a section of the index, a tokenizer, an output shard. Its marker is
/// `_done/<name>.json` below the step's output, like an input's, so the same resume,
/// `--force`, `--dry-run`, task split and `mill status` apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Marker stem and the name in plans and logs: a safe file name.
    pub name: String,
    /// Bytes it reads (progress, and the marker's `input_size`).
    pub size: u64,
    /// Hash of what it reads: the unit is redone when this changes, even under the
    /// same configuration (a new listing of signature files, another tokenizer input).
    pub version: String,
}

impl Unit {
    /// A unit that reads every file below `input` (a training sample): its version is
    /// the hash of their names, sizes and ETags, its size their bytes.
    pub fn over_listing(name: &str, storage: &Storage, input: &Location) -> Result<Unit> {
        let listing: Vec<(String, u64, Option<String>)> = storage
            .list(input)?
            .into_iter()
            .map(|m| (m.relative, m.size, m.etag))
            .collect();
        Ok(Unit {
            name: name.to_string(),
            size: listing.iter().map(|l| l.1).sum(),
            version: crate::cli::config_hash("listing", &listing),
        })
    }
}

/// A step of one unit that reads every file at `opts.input` (a training run), planned,
/// run and marked like any unit (`_done/<unit>.json`; task 0 runs it). `work` returns
/// what it wants to hand back with what the unit did; the result is `None` when the
/// unit was skipped as done, or on a dry run.
pub fn run_over_listing<T: Send>(
    step_name: &str,
    unit: &str,
    config_hash: &str,
    storage: &Storage,
    opts: &RunOptions,
    work: impl Fn() -> Result<(T, UnitDone)> + Sync,
) -> Result<(Report, Option<T>)> {
    let unit = Unit::over_listing(unit, storage, &opts.input)?;
    let input = opts.input.to_string();
    run_unit(step_name, unit, config_hash, &input, storage, opts, work)
}

/// A step of one unit, planned, run and marked like any unit (task 0 runs it); `input`
/// is the address its marker names as what it read. As [`run_over_listing`], `work`'s
/// value comes back when the unit ran (`None` when skipped as done, or on a dry run).
pub fn run_unit<T: Send>(
    step_name: &str,
    unit: Unit,
    config_hash: &str,
    input: &str,
    storage: &Storage,
    opts: &RunOptions,
    work: impl Fn() -> Result<(T, UnitDone)> + Sync,
) -> Result<(Report, Option<T>)> {
    let plan = plan_units(step_name, vec![unit], config_hash, storage, opts)?;
    let result = std::sync::Mutex::new(None);
    let report = run_units(step_name, plan, config_hash, input, storage, opts, |_| {
        let (value, done) = work()?;
        if let Ok(mut slot) = result.lock() {
            *slot = Some(value);
        }
        Ok(done)
    })?;
    Ok((report, result.into_inner().unwrap_or(None)))
}

/// What one task has to do of a step made of units.
#[derive(Debug, Clone, Default)]
pub struct UnitPlan {
    /// This task's units without a matching marker, in the order given.
    pub todo: Vec<Unit>,
    /// Names of this task's units whose marker matches.
    pub skipped: Vec<String>,
    /// Units of all tasks.
    pub listed: usize,
}

/// What the work on one unit produced: its outputs (relative to the step's output)
/// and counters.
#[derive(Debug, Clone, Default)]
pub struct UnitDone {
    pub outputs: Vec<String>,
    pub stats: Stats,
}

/// Splits `units` among the tasks (unit `i` belongs to task `i mod tasks`) and checks
/// this task's markers under `opts.output`. Prints the plan on a dry run.
pub fn plan_units(
    step_name: &str,
    units: Vec<Unit>,
    config_hash: &str,
    storage: &Storage,
    opts: &RunOptions,
) -> Result<UnitPlan> {
    let mut plan = UnitPlan {
        listed: units.len(),
        ..UnitPlan::default()
    };
    let mut names = std::collections::BTreeSet::new();
    for (i, unit) in units.into_iter().enumerate() {
        if !names.insert(unit.name.clone()) {
            return Err(Error::Usage(format!(
                "step {step_name}: two units are named {}",
                unit.name
            )));
        }
        if i % opts.tasks.max(1) != opts.task {
            continue;
        }
        let done = !opts.force
            && read_marker(storage, &marker_location(&opts.output, &unit.name))?
                .is_some_and(|m| m.matches_unit(&unit.version, config_hash));
        if done {
            plan.skipped.push(unit.name);
        } else {
            plan.todo.push(unit);
        }
    }
    tracing::info!(
        step = %step_name,
        task = opts.task,
        tasks = opts.tasks,
        units = plan.listed,
        todo = plan.todo.len(),
        skipped = plan.skipped.len(),
        "planned"
    );
    if opts.dry_run {
        let todo = plan.todo.iter().map(|u| (u.name.as_str(), u.size));
        print_plan(step_name, opts, "units", plan.listed, todo, &plan.skipped);
    }
    Ok(plan)
}

/// Runs `work` on every unit of `plan` on the run's worker pool: each unit is begun
/// as an input is ([`begin_input`]: start note, the outputs of an earlier run of it
/// removed) and marked done last, with its version. Nothing runs on a dry run.
/// `input` is the address the markers name as what the step read.
pub fn run_units(
    step_name: &str,
    plan: UnitPlan,
    config_hash: &str,
    input: &str,
    storage: &Storage,
    opts: &RunOptions,
    work: impl Fn(&Unit) -> Result<UnitDone> + Sync,
) -> Result<Report> {
    let mut report = Report {
        skipped: plan.skipped,
        ..Report::default()
    };
    if opts.dry_run || plan.todo.is_empty() {
        return Ok(report);
    }
    let todo = plan.todo;
    let pool = pool(opts.threads)?;
    let total_bytes = todo.iter().map(|u| u.size).sum();
    let progress = Progress::start(step_name, todo.len() as u64, total_bytes, opts.progress);
    let results: Vec<Result<Stats>> = pool.install(|| {
        todo.par_iter()
            .with_max_len(1) // one unit per job, as in process_planned
            .map(|unit| {
                let start = Instant::now();
                let marker_loc = begin_input(storage, &opts.output, &unit.name)?;
                let UnitDone { outputs, mut stats } = work(unit)?;
                if stats.seconds == 0.0 {
                    stats.seconds = start.elapsed().as_secs_f64();
                }
                crash_point();
                let marker = Marker {
                    step: step_name.to_string(),
                    input: input.to_string(),
                    input_size: unit.size,
                    input_etag: None,
                    source_hash: Some(unit.version.clone()),
                    config_hash: config_hash.to_string(),
                    outputs,
                    stats: stats.clone(),
                };
                write_marker(storage, &marker_loc, &marker)?;
                progress.file_done(unit.size);
                Ok(stats)
            })
            .collect()
    });
    progress.finish();
    for (unit, result) in todo.iter().zip(results) {
        report.stats.merge(&result?);
        report.processed.push(unit.name.clone());
    }
    Ok(report)
}

/// The open output shards of one input, by path below the output prefix.
struct Outputs<'a> {
    storage: &'a Storage,
    output: &'a Location,
    step: &'a Step,
    declared: &'a [Column],
    writers: BTreeMap<String, ShardWriter>,
}

impl Outputs<'_> {
    /// The writer of `rel`, opened on first use (clearing what a killed run left).
    fn writer(
        &mut self,
        rel: &str,
        carry: Option<&arrow_schema::Schema>,
        rejected: bool,
    ) -> Result<&mut ShardWriter> {
        if !self.writers.contains_key(rel) {
            let loc = self.output.join(rel);
            self.storage.remove_stale_temporaries(&loc)?;
            let w = ShardWriter::new(
                self.storage.create(&loc)?,
                carry,
                self.declared,
                rejected,
                &self.step.shard,
            )?;
            self.writers.insert(rel.to_string(), w);
        }
        self.writers
            .get_mut(rel)
            .ok_or_else(|| Error::Usage(format!("output {rel} vanished")))
    }
}

/// Environment variable that makes the process abort (as abruptly as `kill -9`: no
/// destructors, no flushing) once this many batches have been written. The
/// conformance harness uses it to crash runs mid-file at chosen points.
pub const CRASH_AFTER_BATCHES: &str = "TOKENMILL_CRASH_AFTER_BATCHES";

/// Counts one written batch and aborts the process when [`CRASH_AFTER_BATCHES`] says so.
pub fn crash_point() {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    static WRITTEN: AtomicU64 = AtomicU64::new(0);
    let limit = LIMIT.get_or_init(|| {
        std::env::var(CRASH_AFTER_BATCHES)
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(limit) = limit
        && WRITTEN.fetch_add(1, Ordering::SeqCst) + 1 >= *limit
    {
        std::process::abort();
    }
}
