//! The `train` phase: the bundled trainer (`mill-train`) on a tokens step's shards,
//! its checkpoints in the step's output, with `[config.train]` as its run file.
//!
//! `mill` runs the `mill-train` binary (found beside `mill`, else on `PATH`) rather
//! than linking the trainer: libtorch is a multi-gigabyte dependency that the data
//! steps, and the machines that run them, do without. The trainer resumes from its
//! newest checkpoint, so a rerun continues where a stopped run left off, and a run that
//! reached its last step is skipped by its marker. `mill` hands the trainer one end of
//! a pipe on standard input: when `mill` dies, the trainer sees it close and stops.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use pipeline::marker::{Marker, marker_location, read_marker, write_marker};
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

/// Trains on the shards at `opts.input` into `opts.output` (task 0 only).
pub fn train(storage: &Storage, opts: &RunOptions, table: &toml::Value) -> Result<Report> {
    let text = toml::to_string(table).map_err(|e| Error::Config {
        url: "[config.train]".into(),
        message: e.to_string(),
    })?;
    let manifest = opts.input.join(pipeline::tokens::MANIFEST);
    let manifest_bytes = storage.read(&manifest).map_err(|e| Error::Input {
        url: manifest.to_string(),
        message: format!("the train phase reads a tokens step's output: {e}"),
    })?;
    let hash = pipeline::cli::sha256_hex(&[text.as_bytes(), &manifest_bytes].concat());
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
    let run_file = opts.output.join(RUN_FILE);
    storage.put(&run_file, text.as_bytes())?;
    let binary = trainer_binary();
    let mut command = Command::new(&binary);
    command
        .arg("--shards")
        .arg(opts.input.to_string())
        .arg("--checkpoints")
        .arg(opts.output.to_string())
        .arg("--config")
        .arg(run_file.to_string())
        .args(["--log-format", "json", "--stop-with-parent"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    // --force trains from scratch; otherwise the newest checkpoint is the start.
    if !opts.force {
        command.arg("--resume");
    }
    let mut child = command.spawn().map_err(|e| {
        Error::Usage(format!(
            "starting {} (build it with `cargo build --release -p trainer`): {e}",
            binary.display()
        ))
    })?;
    // Our end of its standard input stays open until it exits.
    let stdin = child.stdin.take();
    let status = child
        .wait()
        .map_err(|e| Error::Usage(format!("waiting for {}: {e}", binary.display())))?;
    drop(stdin);
    if !status.success() {
        return Err(Error::Usage(format!(
            "{} failed ({status}) training into {}",
            binary.display(),
            opts.output
        )));
    }
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
            stats: Default::default(),
        },
    )?;
    Ok(Report {
        processed: vec![STEM.into()],
        ..Report::default()
    })
}

/// One step record of a training run, as the report reads it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Point {
    pub step: u64,
    pub loss: f64,
    #[serde(default)]
    pub val_loss: Option<f64>,
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
