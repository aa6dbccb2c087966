//! `mill submit`: a pipeline as array jobs per step on a batch engine, each step
//! starting when the one before has finished.
//!
//! Every task runs `mill step <output>/_pipeline.toml <step> --tasks N` (the run's copy
//! of its pipeline, stored first, so all tasks run the same file) and finds its index in
//! the engine's array variable plus `TOKENMILL_TASK_OFFSET`: every engine caps an
//! array's size, so a step of many tasks is several arrays, each told the index of its
//! first task ([`arrays`]). Retries are safe: an input whose marker exists is skipped,
//! so a retried or resubmitted task redoes only what is missing.
//!
//! The engines, one module each, write typed values:
//! - [`slurm`]: sbatch scripts, arrays within the cluster's `MaxArraySize`, each step
//!   `afterok` on every array of the step before; the train step as one job of
//!   `nodes` × `gpus_per_node` ranks started by `srun`; a classify step on GPUs as
//!   arrays whose tasks each ask for `gpus_per_node` GPUs.
//! - [`batch`]: AWS Batch `SubmitJob` requests (arrays of at most 10,000), `dependsOn`
//!   every job of the step before; the train step as a multi-node parallel job
//!   (`RegisterJobDefinition` with `nodeProperties`, GPUs as resources).
//! - [`k8s`]: Kubernetes Indexed Jobs (at most 100,000 indexes each), created
//!   suspended; a driver Job ([`drive`], `mill drive`) resumes each step's Jobs when the
//!   step before has completed, so no pod of a step exists, holding cores, before it can
//!   run. The train step is an Indexed Job of one pod per node behind a headless
//!   Service.
//!
//! No step's task i depends on task i of the step before alone (a task's inputs are a
//! split of the whole listing of the previous output), so the one-to-one dependencies
//! (Slurm's `aftercorr`, Batch's `N_TO_N`) are not used.

pub mod batch;
pub mod drive;
pub mod k8s;
pub mod slurm;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use pipeline::{Error, Location, Result, Storage};

use crate::exec::PIPELINE_COPY;
use crate::spec::Pipeline;

/// The batch engines `mill submit` speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Slurm,
    AwsBatch,
    K8s,
}

/// `[submit]`: settings common to the engines, and one table per engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubmitConfig {
    /// The `mill` a task runs: on Slurm, this `mill`'s absolute path by default (a
    /// cluster's shared file system); in containers, `mill` on the image's `PATH`.
    pub mill: Option<String>,
    /// CPUs per task (a step's `cpus` overrides it).
    pub cpus: u32,
    /// Memory per task in MiB (a step's `memory_mib` overrides it).
    pub memory_mib: u64,
    /// Variables set in every task (e.g. `AWS_REGION`).
    pub env: BTreeMap<String, String>,
    pub slurm: slurm::SlurmConfig,
    #[serde(rename = "aws-batch")]
    pub aws_batch: batch::BatchConfig,
    pub k8s: k8s::K8sConfig,
}

impl Default for SubmitConfig {
    fn default() -> Self {
        SubmitConfig {
            mill: None,
            cpus: 4,
            memory_mib: 8192,
            env: BTreeMap::new(),
            slurm: slurm::SlurmConfig::default(),
            aws_batch: batch::BatchConfig::default(),
            k8s: k8s::K8sConfig::default(),
        }
    }
}

/// One array of a step: tasks `offset .. offset + size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Array {
    pub offset: usize,
    pub size: usize,
}

/// `tasks` split into arrays of at most `max` tasks, in order.
pub fn arrays(tasks: usize, max: usize) -> Vec<Array> {
    let max = max.max(1);
    (0..tasks.max(1))
        .step_by(max)
        .map(|offset| Array {
            offset,
            size: max.min(tasks.max(1) - offset),
        })
        .collect()
}

/// GPU training settings of a train step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpus {
    pub nodes: u32,
    /// Ranks per node; GPUs are asked for only when the step names `gpus_per_node`.
    pub per_node: u32,
    pub gpus: bool,
}

/// One step as the engines see it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepJob {
    pub step: String,
    pub tasks: usize,
    pub cpus: u32,
    pub memory_mib: u64,
    /// The `mill step` command line.
    pub command: Vec<String>,
    /// A train step's machines and GPUs (`nodes`, `gpus_per_node`), when it names them.
    pub gpus: Option<Gpus>,
    /// GPUs of each task of an array (a classify step on GPUs: `gpus_per_node`); its
    /// tasks run the trainer's image, which holds `mill-classify-gpu` and libtorch.
    pub task_gpus: Option<u32>,
}

/// The run's steps as jobs, in order.
pub fn step_jobs(p: &Pipeline, config: &SubmitConfig, mill: &str) -> Result<Vec<StepJob>> {
    let url = pipeline_url(p)?;
    p.steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let tasks = if s.kind()?.single_task() {
                1
            } else {
                p.tasks_of(i, None)
            };
            let classify_gpus = s.classify_on_gpus();
            let gpus =
                (!classify_gpus && (s.nodes.is_some() || s.gpus_per_node.is_some())).then(|| {
                    Gpus {
                        nodes: s.nodes.unwrap_or(1),
                        per_node: s.gpus_per_node.unwrap_or(1),
                        gpus: s.gpus_per_node.is_some(),
                    }
                });
            Ok(StepJob {
                step: s.name.clone(),
                tasks,
                cpus: s.cpus.unwrap_or(config.cpus).max(1),
                memory_mib: s.memory_mib.unwrap_or(config.memory_mib).max(1),
                command: vec![
                    mill.to_string(),
                    "step".into(),
                    url.clone(),
                    s.name.clone(),
                    "--tasks".into(),
                    tasks.to_string(),
                ],
                gpus,
                task_gpus: classify_gpus.then(|| s.gpus_per_node.unwrap_or(1)),
            })
        })
        .collect()
}

/// Where the tasks read the pipeline: the run's copy.
pub fn pipeline_url(p: &Pipeline) -> Result<String> {
    Ok(p.run_location()?.join(PIPELINE_COPY).to_string())
}

/// A short name for the run: the last segment of its output.
pub fn run_name(p: &Pipeline) -> String {
    let name = p
        .output
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("run")
        .to_string();
    if name.is_empty() { "run".into() } else { name }
}

/// `s` kept to `[a-z0-9-]` (Kubernetes names, AWS Batch names), at most `max` long.
pub fn dns_name(s: &str, max: usize) -> String {
    let mut out: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    out.truncate(max);
    let out = out.trim_matches('-').to_string();
    if out.is_empty() { "x".into() } else { out }
}

/// The name of array `k` of a step's `count` arrays: `base`, then `base-1`, `base-2`…
pub fn array_name(base: &str, k: usize, count: usize, max: usize) -> String {
    if count <= 1 {
        return dns_name(base, max);
    }
    let suffix = format!("-{k}");
    format!(
        "{}{suffix}",
        dns_name(base, max.saturating_sub(suffix.len()))
    )
}

/// One file of what `mill submit` writes: its name and text.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFile {
    pub name: String,
    pub text: String,
}

/// What `mill submit` made for one step (or the Kubernetes driver): its files, and
/// the engine's job ids once submitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    pub step: String,
    pub files: Vec<JobFile>,
    pub job_ids: Vec<String>,
}

/// Builds every step's jobs for `engine`; with `submit`, also submits them in order
/// (each step after the one before) and records the ids. Slurm submits through
/// `sbatch`, AWS Batch through the `aws` command line, Kubernetes through `kubectl`.
pub fn submit(
    storage: &Storage,
    p: &Pipeline,
    engine: Engine,
    submit: bool,
) -> Result<Vec<Submitted>> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::Usage(format!("the current folder: {e}")))?;
    // Tasks run elsewhere (other folders, containers): every address they get is
    // absolute.
    let p = &p.with_absolute_addresses(&cwd);
    let config = &p.submit;
    let mill = match (&config.mill, engine) {
        (Some(m), _) => m.clone(),
        (None, Engine::Slurm) => std::env::current_exe()
            .map_err(|e| Error::Usage(format!("the path of mill: {e}")))?
            .to_string_lossy()
            .into_owned(),
        (None, _) => "mill".into(),
    };
    if submit {
        // Tasks read the run's copy of the pipeline: it exists before any task starts.
        crate::exec::record_pipeline(storage, p)?;
    }
    let jobs = step_jobs(p, config, &mill)?;
    match engine {
        Engine::Slurm => slurm::submit(p, config, &jobs, &cwd, submit),
        Engine::AwsBatch => batch::submit(p, config, &jobs, submit),
        Engine::K8s => k8s::submit(p, config, &jobs, submit),
    }
}

/// Runs `program args…` with `text` in a temporary file named `file_name` (its path
/// takes the place of `{}` in `args`), returning standard output.
pub(crate) fn run_with_file(
    program: &str,
    args: &[String],
    file_name: &str,
    text: &str,
) -> Result<String> {
    let dir = tempfile::tempdir().map_err(|e| Error::Usage(format!("a temporary folder: {e}")))?;
    let file = dir.path().join(file_name);
    std::fs::write(&file, text)
        .map_err(|e| Error::Usage(format!("writing {}: {e}", file.display())))?;
    let path = file.to_string_lossy().into_owned();
    let args: Vec<String> = args.iter().map(|a| a.replace("{}", &path)).collect();
    let out = std::process::Command::new(program)
        .args(&args)
        .output()
        .map_err(|e| Error::Usage(format!("running {program}: {e}")))?;
    if !out.status.success() {
        return Err(Error::Usage(format!(
            "{program} refused {file_name} ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Pretty JSON of a typed value, ending in a newline.
pub(crate) fn json_text<T: Serialize>(value: &T, what: &str) -> Result<String> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| Error::Usage(format!("serialising {what}: {e}")))
}

/// How to watch submitted jobs, per engine.
pub fn watch_hint(engine: Engine, p: &Pipeline, ids: &[String]) -> String {
    let run = &p.output;
    match engine {
        Engine::Slurm => format!(
            "watch: squeue -j {}   progress: mill status {run}",
            ids.join(",")
        ),
        Engine::AwsBatch => format!(
            "watch: aws batch describe-jobs --jobs {}   progress: mill status {run}",
            ids.join(" ")
        ),
        Engine::K8s => format!(
            "watch: kubectl get jobs -n {} -l tokenmill/run={}   progress: mill status {run}",
            p.submit.k8s.namespace,
            dns_name(&run_name(p), 63)
        ),
    }
}

/// The note a task writes when it finishes: `<step output>/_tasks/task-IIIII-of-NNNNN.json`.
pub fn task_note(output: &Location, task: usize, tasks: usize) -> Location {
    output.join(&format!("_tasks/task-{task:05}-of-{tasks:05}.json"))
}

/// Records that task `task` of `tasks` finished.
pub fn write_task_note(
    storage: &Storage,
    output: &Location,
    task: usize,
    tasks: usize,
) -> Result<()> {
    let note = serde_json::json!({
        "task": task,
        "tasks": tasks,
        // Slurm's node name first: nodes may share a host name (containers, namespaces).
        "host": std::env::var("SLURMD_NODENAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_default(),
        "finished": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    });
    storage.put(&task_note(output, task, tasks), note.to_string().as_bytes())
}

/// Tasks of `tasks` that wrote their note below `output`.
pub fn finished_tasks(storage: &Storage, output: &Location, tasks: usize) -> Result<usize> {
    let suffix = format!("-of-{tasks:05}.json");
    Ok(storage
        .list(&output.join("_tasks/"))?
        .into_iter()
        .filter(|m| m.relative.starts_with("task-") && m.relative.ends_with(&suffix))
        .count())
}

/// Waits until every task of step `step` (run as `tasks` tasks) finished, polling
/// every `poll`; an error after `timeout`.
pub fn wait(
    storage: &Storage,
    p: &Pipeline,
    step: &str,
    tasks: usize,
    timeout: Duration,
    poll: Duration,
) -> Result<()> {
    p.step(step)?;
    let output = p.step_output(step)?;
    let started = Instant::now();
    loop {
        let done = finished_tasks(storage, &output, tasks)?;
        if done >= tasks {
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(Error::Usage(format!(
                "step {step}: {done} of {tasks} tasks finished after {} s",
                timeout.as_secs()
            )));
        }
        std::thread::sleep(poll);
    }
}

/// Slurm's log folder: the setting, else `slurm-logs` where `mill submit` runs.
pub(crate) fn logs_dir(configured: Option<&str>, cwd: &Path) -> String {
    configured
        .map(str::to_string)
        .unwrap_or_else(|| cwd.join("slurm-logs").to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_cover_every_task_once_within_the_cap() {
        assert_eq!(
            arrays(25, 11),
            vec![
                Array {
                    offset: 0,
                    size: 11
                },
                Array {
                    offset: 11,
                    size: 11
                },
                Array {
                    offset: 22,
                    size: 3
                }
            ]
        );
        assert_eq!(arrays(5000, 1001).len(), 5);
        assert_eq!(
            arrays(10_000, 10_000),
            vec![Array {
                offset: 0,
                size: 10_000
            }]
        );
        assert_eq!(arrays(1, 11), vec![Array { offset: 0, size: 1 }]);
        for (tasks, max) in [(1, 1), (7, 3), (1001, 1000), (250_000, 100_000)] {
            let a = arrays(tasks, max);
            assert!(a.iter().all(|x| x.size >= 1 && x.size <= max));
            assert_eq!(a.iter().map(|x| x.size).sum::<usize>(), tasks);
            assert!(a.windows(2).all(|w| w[0].offset + w[0].size == w[1].offset));
        }
    }

    #[test]
    fn names_fit_the_engines_rules() {
        assert_eq!(dns_name("Run_2024.text", 63), "run-2024-text");
        assert_eq!(dns_name("--x--", 63), "x");
        assert_eq!(dns_name(&"a".repeat(80), 63).len(), 63);
        assert_eq!(array_name("run-text", 0, 1, 63), "run-text");
        assert_eq!(array_name("run-text", 2, 3, 63), "run-text-2");
        assert_eq!(array_name(&"a".repeat(80), 12, 13, 63).len(), 63);
    }
}
