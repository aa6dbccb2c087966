//! A chain of the classify stage alone with `gpus_per_node`: its transformers run on
//! the task's GPUs, in `mill-classify-gpu` (the trainer's crate, which links libtorch;
//! `mill` does not). `mill` writes `[config.classify]` to the step's run file, starts
//! the child on this task's share of the inputs, and reads back what it did. The child
//! is a stage binary like the others: it plans, resumes and marks each input itself,
//! so a rerun on CPU machines (`gpus_per_node` removed) skips what the GPUs did, and
//! the reverse: the configuration hash does not depend on where the model ran.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use pipeline::{Error, Report, Result, RunOptions, Storage};

use crate::spec::{Pipeline, StepSpec};

/// The run file the child reads: `[config.classify]`.
pub const RUN_FILE: &str = "_classify.toml";

/// `mill-classify-gpu`: beside the running executable, else on `PATH`.
pub fn binary() -> PathBuf {
    let name = format!("mill-classify-gpu{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(&name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Runs this task of the step in `mill-classify-gpu` on `gpus` GPUs.
pub fn run(
    storage: &Storage,
    p: &Pipeline,
    spec: &StepSpec,
    opts: &RunOptions,
    gpus: usize,
) -> Result<Report> {
    let table = p
        .config
        .get("classify")
        .cloned()
        .unwrap_or_else(|| toml::Value::Table(toml::map::Map::new()));
    let text = toml::to_string(&table).map_err(|e| Error::Config {
        url: "[config.classify]".into(),
        message: e.to_string(),
    })?;
    let run_file = opts.output.join(RUN_FILE);
    // Every task writes the same run file: none reads it before its own put.
    storage.put(&run_file, text.as_bytes())?;
    let report_file = tempfile::NamedTempFile::new()
        .map_err(|e| Error::Usage(format!("a temporary file for the child's report: {e}")))?;
    let binary = binary();
    let mut command = Command::new(&binary);
    command
        .arg("--input")
        .arg(opts.input.to_string())
        .arg("--output")
        .arg(opts.output.to_string())
        .arg("--config")
        .arg(run_file.to_string())
        .args(["--task", &opts.task.to_string()])
        .args(["--tasks", &opts.tasks.to_string()])
        .args(["--threads", &opts.threads.to_string()])
        .args(["--gpus", &gpus.to_string()])
        .args(["--log-format", "json"])
        .arg("--report")
        .arg(report_file.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if opts.force {
        command.arg("--force");
    }
    if opts.keep_rejected {
        command.arg("--keep-rejected");
    }
    let status = command.status().map_err(|e| {
        Error::Usage(format!(
            "starting {} for step {} (build it with `cargo build --release -p trainer`; it \
             links libtorch): {e}",
            binary.display(),
            spec.name
        ))
    })?;
    if !status.success() {
        return Err(Error::Usage(format!(
            "{} failed ({status}) on step {}",
            binary.display(),
            spec.name
        )));
    }
    let bytes = std::fs::read(report_file.path())
        .map_err(|e| Error::Usage(format!("reading the child's report: {e}")))?;
    let r: classify::RunReport = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Usage(format!("the child's report: {e}")))?;
    Ok(r.into_report())
}
