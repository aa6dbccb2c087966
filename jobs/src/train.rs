//! The `train` phase: the bundled trainer (`mill-train`) on a tokens step's shards,
//! its checkpoints in the step's output, with `[config.train]` as its run file.
//!
//! `mill` runs the `mill-train` binary (found beside `mill`, else on `PATH`) rather
//! than linking the trainer: libtorch is a multi-gigabyte dependency that the data
//! steps, and the machines that run them, do without. The trainer resumes from its
//! newest checkpoint, so a rerun continues where a stopped run left off, and a run that
//! reached its last step is skipped by its marker. `mill` hands the trainer one end of
//! a pipe on standard input: when `mill` dies, the trainer sees it close and stops.
//!
//! Ranks: under `srun` or torchrun this process is one rank and runs one trainer with
//! the launcher's variables; elsewhere ([`pipeline::world::Node`]: an AWS Batch node, a
//! Kubernetes pod, or this machine under `mill run`) it starts one trainer per GPU of
//! the node, each told its rank, and stops them all when one fails. Only rank 0's
//! process writes the step's marker and task note.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use pipeline::marker::{Marker, marker_location, read_marker, write_marker};
use pipeline::world::{Node, World};
use pipeline::{Error, Location, Report, Result, RunOptions, Storage};

/// The run file `mill-train` gets, written in the step's output.
pub const RUN_FILE: &str = "_train.toml";
/// The marker's stem.
const STEM: &str = "train";

/// `mill-train`: beside the running executable, else on `PATH`.
pub fn trainer_binary() -> PathBuf {
    let name = format!("mill-train{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(&name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Trains on the shards at `opts.input` into `opts.output` (task 0 only), as every
/// rank this process is responsible for.
/// `gpus_per_node` is the step's setting: the ranks `mill` starts on this machine
/// unless a launcher (`srun`, torchrun) started this process as one rank.
pub fn train(
    storage: &Storage,
    opts: &RunOptions,
    table: &toml::Value,
    gpus_per_node: usize,
) -> Result<Report> {
    let manifest = opts.input.join(pipeline::tokens::MANIFEST);
    let manifest_bytes = storage.read(&manifest).map_err(|e| Error::Input {
        url: manifest.to_string(),
        message: format!("the train phase reads a tokens step's output: {e}"),
    })?;
    // Multiple-choice tasks go to the trainer tokenized, with the shards' tokenizer
    // (named by the manifest, hashed with it): the run file names the tokenized copies.
    let mut table = table.clone();
    let tasks = task_files(storage, opts, &mut table)?;
    let table = &table;
    let text = toml::to_string(table).map_err(|e| Error::Config {
        url: "[config.train]".into(),
        message: e.to_string(),
    })?;
    // The reference sets' shards count as input too: encoded again, they are measured
    // again.
    let mut hashed = [text.as_bytes(), &manifest_bytes].concat();
    if let Some(sets) = table.get("eval_sets").and_then(toml::Value::as_table) {
        for (name, url) in sets {
            let url = url.as_str().ok_or_else(|| Error::Config {
                url: "[config.train]".into(),
                message: format!("eval_sets.{name}: give the address of token shards"),
            })?;
            let m = Location::parse(url)?.join(pipeline::tokens::MANIFEST);
            hashed.extend(storage.read(&m).map_err(|e| Error::Input {
                url: m.to_string(),
                message: format!("reference set {name}: {e}"),
            })?);
        }
    }
    for task in &tasks {
        hashed.extend(&task.source);
    }
    let hash = pipeline::cli::sha256_hex(&hashed);
    let marker_loc = marker_location(&opts.output, STEM);
    if !opts.force && read_marker(storage, &marker_loc)?.is_some_and(|m| m.config_hash == hash) {
        return Ok(Report {
            skipped: vec![STEM.into()],
            ..Report::default()
        });
    }
    if opts.dry_run {
        tracing::info!(output = %opts.output, "would train");
        return Ok(Report::default());
    }
    write_tokenized(storage, opts, &tasks)?;
    let run_file = opts.output.join(RUN_FILE);
    // Every rank's process writes the same run file: none reads it before its own put.
    storage.put(&run_file, text.as_bytes())?;
    let launch = Launch::from_env(gpus_per_node)?;
    let binary = trainer_binary();
    let ranks = launch.ranks()?;
    let mut children = Vec::with_capacity(ranks.len());
    for vars in &ranks {
        let mut command = Command::new(&binary);
        command
            .arg("--shards")
            .arg(opts.input.to_string())
            .arg("--checkpoints")
            .arg(opts.output.to_string())
            .arg("--config")
            .arg(run_file.to_string())
            .args(["--log-format", "json", "--stop-with-parent"])
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        // --force trains from scratch; otherwise the newest checkpoint is the start.
        if !opts.force {
            command.arg("--resume");
        }
        match command.spawn() {
            Ok(child) => children.push(child),
            Err(e) => {
                stop_all(&mut children);
                return Err(Error::Usage(format!(
                    "starting {} (build it with `cargo build --release -p trainer`): {e}",
                    binary.display()
                )));
            }
        }
    }
    if let Err(e) = wait_all(&mut children, &binary) {
        return Err(Error::Usage(format!("{e} training into {}", opts.output)));
    }
    if !launch.leader() {
        // Rank 0's process records the step.
        return Ok(Report::default());
    }
    let stats = trained(storage, &opts.output)?;
    write_marker(
        storage,
        &marker_loc,
        &Marker {
            step: STEM.into(),
            input: manifest.to_string(),
            input_size: manifest_bytes.len() as u64,
            input_etag: None,
            source_hash: None,
            config_hash: hash,
            outputs: Vec::new(),
            stats: stats.clone(),
        },
    )?;
    Ok(Report {
        processed: vec![STEM.into()],
        stats,
        ..Report::default()
    })
}

/// A multiple-choice task of the run file: its JSONL's bytes, and where its tokenized
/// copy goes (`<output>/_tasks/<name>.json`).
struct TaskFile {
    name: String,
    url: String,
    source: Vec<u8>,
    tokenized: Location,
}

/// The run file's `eval_tasks` (name → a task's JSONL), each read once, and the run
/// file changed to name their tokenized copies.
fn task_files(
    storage: &Storage,
    opts: &RunOptions,
    table: &mut toml::Value,
) -> Result<Vec<TaskFile>> {
    let Some(tasks) = table
        .get_mut("eval_tasks")
        .and_then(toml::Value::as_table_mut)
    else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, url) in tasks.iter_mut() {
        let source = url.as_str().ok_or_else(|| Error::Config {
            url: "[config.train]".into(),
            message: format!("eval_tasks.{name}: give the address of a task's JSONL"),
        })?;
        let file = TaskFile {
            name: name.clone(),
            url: source.to_string(),
            source: storage.read(&Location::parse(source)?)?,
            tokenized: opts.output.join(&format!("_tasks/{name}.json")),
        };
        *url = toml::Value::String(file.tokenized.to_string());
        out.push(file);
    }
    Ok(out)
}

/// Writes each task tokenized with the tokenizer of the shards at `opts.input` (the
/// trainer's `tasks::TaskSet`), loading it only when there are tasks.
fn write_tokenized(storage: &Storage, opts: &RunOptions, tasks: &[TaskFile]) -> Result<()> {
    if tasks.is_empty() {
        return Ok(());
    }
    let manifest = pipeline::tokens::read_manifest(storage, &opts.input)?;
    let loaded = tokenize::Loaded::read(
        storage,
        &manifest.tokenizer,
        tokenize::EncoderKind::default(),
        &manifest.end_of_document,
    )?;
    let encode = |text: &str| -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        loaded
            .encoder
            .encode_into(text, &mut ids)
            .map_err(|e| Error::Usage(format!("encoding a task with {}: {e}", loaded.url)))?;
        Ok(ids)
    };
    for task in tasks {
        let items = crate::tasks::parse(&task.url, &task.source)?;
        let tokenized = crate::tasks::tokenize(&items, &encode, loaded.eod)?;
        let bytes = serde_json::to_vec(&serde_json::json!({ "items": tokenized }))
            .map_err(|e| Error::Usage(format!("task {}: {e}", task.name)))?;
        storage.put(&task.tokenized, &bytes)?;
    }
    Ok(())
}

/// Before a task's name in a train step's values: its last accuracies.
pub const TASK_ACC: &str = "task_acc.";
pub const TASK_ACC_NORM: &str = "task_acc_norm.";

/// Before a reference set's name in a train step's values: its last loss.
pub const EVAL_LOSS: &str = "eval_loss.";

/// What a training run did, from its step records up to its newest checkpoint: counts
/// `train_steps`, `train_tokens`; values `train_loss` (the
/// last step's), `val_loss` (the last evaluated) and `eval_loss.<set>` (each reference
/// set's, the last evaluated).
pub fn trained(storage: &Storage, output: &Location) -> Result<pipeline::Stats> {
    let curve = loss_curve(storage, output)?;
    let mut stats = pipeline::Stats::default();
    let Some(last) = curve.last() else {
        return Ok(stats);
    };
    stats.counts.insert("train_steps".into(), last.step + 1);
    stats
        .counts
        .insert("train_tokens".into(), curve.iter().map(|p| p.tokens).sum());
    stats.values.insert("train_loss".into(), last.loss);
    if let Some(v) = curve.iter().rev().find_map(|p| p.val_loss) {
        stats.values.insert("val_loss".into(), v);
    }
    if let Some(p) = curve.iter().rev().find(|p| !p.eval_losses.is_empty()) {
        for (name, v) in &p.eval_losses {
            stats.values.insert(format!("{EVAL_LOSS}{name}"), *v);
        }
    }
    if let Some(p) = curve.iter().rev().find(|p| !p.eval_tasks.is_empty()) {
        for (name, t) in &p.eval_tasks {
            stats.values.insert(format!("{TASK_ACC}{name}"), t.acc);
            stats
                .values
                .insert(format!("{TASK_ACC_NORM}{name}"), t.acc_norm);
        }
    }
    Ok(stats)
}

/// The line that says what a train step did, from its counters (`None` before it
/// trained): steps, tokens, the final and validation losses, the checkpoint.
pub fn describe(stats: &pipeline::Stats, output: &Location) -> Option<String> {
    let steps = *stats.counts.get("train_steps")?;
    let tokens = stats.counts.get("train_tokens").copied().unwrap_or(0);
    let mut line = format!("trained {steps} steps, {tokens} tokens");
    if let Some(l) = stats.values.get("train_loss") {
        line.push_str(&format!(", loss {l:.4}"));
    }
    if let Some(v) = stats.values.get("val_loss") {
        line.push_str(&format!(", validation loss {v:.4}"));
    }
    // The last checkpoint is the last step's (the curve stops at `latest`).
    line.push_str(&format!(
        ", checkpoint {}",
        output.join(&format!("step-{steps:08}/"))
    ));
    Some(line)
}

/// How this process takes part in a training job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// A launcher started this process as one rank (its variables are inherited).
    Rank(World),
    /// This process starts the ranks of its node.
    Node(Node),
}

impl Launch {
    /// From the environment; `gpus_per_node` is the step's setting.
    pub fn from_env(gpus_per_node: usize) -> Result<Launch> {
        let world = World::from_env()?;
        if world.size > 1 {
            return Ok(Launch::Rank(world));
        }
        Ok(match Node::from_env(gpus_per_node)? {
            Some(node) => Launch::Node(node),
            None => Launch::Rank(world),
        })
    }

    /// Whether this process speaks for the job (rank 0 is among its ranks).
    pub fn leader(&self) -> bool {
        match self {
            Launch::Rank(w) => w.rank == 0,
            Launch::Node(n) => n.index == 0,
        }
    }

    /// The variables of each trainer to start: none to add for a launched rank or a
    /// single process. One node alone with several GPUs and no `MASTER_PORT` meets on a
    /// free loopback port (runs side by side on one machine must not collide).
    pub fn ranks(&self) -> Result<Vec<Vec<(&'static str, String)>>> {
        match self {
            Launch::Rank(_) => Ok(vec![Vec::new()]),
            Launch::Node(n) if n.size() == 1 => Ok(vec![Vec::new()]),
            Launch::Node(n) => {
                let mut n = n.clone();
                if n.nodes == 1 && std::env::var_os("MASTER_PORT").is_none() {
                    n.master_port = std::net::TcpListener::bind("127.0.0.1:0")
                        .and_then(|l| l.local_addr())
                        .map_err(|e| Error::Usage(format!("a free port for the ranks: {e}")))?
                        .port();
                }
                Ok(n.ranks().iter().map(World::vars).collect())
            }
        }
    }
}

/// Whether this process is a training rank other than the job's first (it writes no
/// marker or task note).
pub fn follower(gpus_per_node: usize) -> Result<bool> {
    Ok(!Launch::from_env(gpus_per_node)?.leader())
}

fn stop_all(children: &mut [std::process::Child]) {
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Waits for every trainer; the first failure stops the others (they would wait on
/// the failed rank forever).
fn wait_all(children: &mut [std::process::Child], binary: &std::path::Path) -> Result<()> {
    let mut running = children.len();
    let mut done = vec![false; children.len()];
    while running > 0 {
        for (rank, c) in children.iter_mut().enumerate() {
            if done[rank] {
                continue;
            }
            let status = c
                .try_wait()
                .map_err(|e| Error::Usage(format!("waiting for {}: {e}", binary.display())))?;
            if let Some(status) = status {
                done[rank] = true;
                running -= 1;
                if !status.success() {
                    stop_all(children);
                    return Err(Error::Usage(format!(
                        "{} (local rank {rank}) failed ({status})",
                        binary.display()
                    )));
                }
            }
        }
        if running > 0 {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    Ok(())
}

/// A task's accuracies at one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct TaskScore {
    pub acc: f64,
    pub acc_norm: f64,
}

/// One step record of a training run, as the report reads it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Point {
    pub step: u64,
    pub loss: f64,
    #[serde(default)]
    pub val_loss: Option<f64>,
    /// Loss on each reference set (`eval_sets`), on the steps that evaluate.
    #[serde(default)]
    pub eval_losses: std::collections::BTreeMap<String, f64>,
    /// Accuracies on each multiple-choice task (`eval_tasks`), on the steps that
    /// evaluate.
    #[serde(default)]
    pub eval_tasks: std::collections::BTreeMap<String, TaskScore>,
    /// Tokens the step trained on.
    #[serde(default)]
    pub tokens: u64,
}

/// The loss curve of the run whose checkpoints are at `output`: the records of
/// `metrics/step-NNNNNNNN.jsonl` up to the newest complete checkpoint (`latest`).
pub fn loss_curve(storage: &Storage, output: &Location) -> Result<Vec<Point>> {
    let latest = output.join("latest");
    if !storage.exists(&latest)? {
        return Ok(Vec::new());
    }
    let newest = String::from_utf8_lossy(&storage.read(&latest)?)
        .trim()
        .to_string();
    let mut files: Vec<_> = storage
        .list(&output.join("metrics/"))?
        .into_iter()
        .filter(|m| {
            m.relative
                .strip_suffix(".jsonl")
                .is_some_and(|stem| stem <= newest.as_str())
        })
        .collect();
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    let mut points: Vec<Point> = Vec::new();
    for f in files {
        for (n, line) in String::from_utf8_lossy(&storage.read(&f.location)?)
            .lines()
            .enumerate()
        {
            if line.trim().is_empty() {
                continue;
            }
            let p: Point = serde_json::from_str(line).map_err(|e| Error::Input {
                url: f.location.to_string(),
                message: format!("line {}: {e}", n + 1),
            })?;
            if points.last().is_none_or(|l| l.step < p.step) {
                points.push(p);
            }
        }
    }
    Ok(points)
}
