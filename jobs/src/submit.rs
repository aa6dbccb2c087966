//! `mill submit`: a pipeline as one array job per step on a batch engine, each step
//! depending on the one before.
//!
//! Every task runs `mill step <output>/_pipeline.toml <step> --tasks N` (the run's copy
//! of its pipeline, stored first, so all tasks run the same file) and finds its index in
//! the engine's array variable. Retries are safe: an input whose marker exists is
//! skipped, so a retried or resubmitted task redoes only what is missing.
//!
//! - Slurm: an sbatch script per step (`--array=0-(N-1)`), submitted with
//!   `--dependency=afterok:<previous>` and `--kill-on-invalid-dep=yes`, so that a failed
//!   step cancels its dependents instead of leaving them pending. Retries happen inside
//!   the script (a task that fails is rerun, `retries` times), since Slurm requeues only
//!   on node failure.
//! - AWS Batch: a `SubmitJob` request per step (an array job of N when N ≥ 2), with
//!   `dependsOn` the whole previous job and a retry strategy.
//! - Kubernetes: an Indexed Job per step (`completionMode: Indexed`, the index in
//!   `JOB_COMPLETION_INDEX`, `backoffLimitPerIndex`), all created at once; each but the
//!   first has an init container running `mill wait` on the previous step, which returns
//!   when every task of it has written its completion note (`_tasks/`), so ordering needs
//!   no controller and `mill submit` does not have to stay up.
//!
//! No step's task i depends on task i of the step before alone (a task's inputs are a
//! split of the whole listing of the previous output), so the one-to-one dependencies
//! (Slurm's `aftercorr`, Batch's `N_TO_N`) are not used.

use std::collections::BTreeMap;
use std::fmt::Write as _;
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
    pub slurm: SlurmConfig,
    #[serde(rename = "aws-batch")]
    pub aws_batch: BatchConfig,
    pub k8s: K8sConfig,
}

impl Default for SubmitConfig {
    fn default() -> Self {
        SubmitConfig {
            mill: None,
            cpus: 4,
            memory_mib: 8192,
            env: BTreeMap::new(),
            slurm: SlurmConfig::default(),
            aws_batch: BatchConfig::default(),
            k8s: K8sConfig::default(),
        }
    }
}

/// `[submit.slurm]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlurmConfig {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// `--time`, e.g. `"12:00:00"`.
    pub time: Option<String>,
    /// Extra `#SBATCH` lines, e.g. `"--qos=high"`.
    pub extra: Vec<String>,
    /// Times a failed task is rerun inside its job.
    pub retries: u32,
    /// Folder of the tasks' logs (`%x-%A_%a.out`); default `slurm-logs` in the folder
    /// `mill submit` runs in.
    pub logs: Option<String>,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            partition: None,
            account: None,
            time: None,
            extra: Vec::new(),
            retries: 2,
            logs: None,
        }
    }
}

/// `[submit.aws-batch]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchConfig {
    pub job_queue: String,
    /// A job definition (name, `name:revision` or ARN) whose image holds `mill`.
    pub job_definition: String,
    /// Attempts per task (1 to 10).
    pub attempts: u32,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            job_queue: "tokenmill".into(),
            job_definition: "tokenmill".into(),
            attempts: 3,
        }
    }
}

/// `[submit.k8s]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct K8sConfig {
    /// An image with `mill` on its `PATH`.
    pub image: String,
    pub namespace: String,
    pub service_account: Option<String>,
    /// Limits as multiples of the requests (1.0: limits equal requests).
    pub limit_factor: f64,
    /// Pods run at once per step (default: every task).
    pub parallelism: Option<u32>,
    /// Retries of each index.
    pub backoff_limit_per_index: u32,
    /// How long a step's pods wait for the step before (`mill wait --timeout`).
    pub wait_timeout_s: u64,
}

impl Default for K8sConfig {
    fn default() -> Self {
        K8sConfig {
            image: "tokenmill:latest".into(),
            namespace: "default".into(),
            service_account: None,
            limit_factor: 1.0,
            parallelism: None,
            backoff_limit_per_index: 2,
            wait_timeout_s: 7 * 24 * 3600,
        }
    }
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
fn dns_name(s: &str, max: usize) -> String {
    let mut out: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    out.truncate(max);
    let out = out.trim_matches('-').to_string();
    if out.is_empty() { "x".into() } else { out }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The sbatch script of one step.
pub fn slurm_script(p: &Pipeline, config: &SubmitConfig, job: &StepJob, cwd: &Path) -> String {
    let s = &config.slurm;
    let logs = s
        .logs
        .clone()
        .unwrap_or_else(|| cwd.join("slurm-logs").to_string_lossy().into_owned());
    let mut out = String::from("#!/bin/bash\n");
    let mut line = |l: String| {
        let _ = writeln!(out, "#SBATCH {l}");
    };
    line(format!(
        "--job-name={}",
        shell_quote(&format!("{}.{}", run_name(p), job.step))
    ));
    line(format!("--array=0-{}", job.tasks.saturating_sub(1)));
    line("--ntasks=1".into());
    line(format!("--cpus-per-task={}", job.cpus));
    line(format!("--mem={}M", job.memory_mib));
    if let Some(t) = &s.time {
        line(format!("--time={}", shell_quote(t)));
    }
    if let Some(x) = &s.partition {
        line(format!("--partition={}", shell_quote(x)));
    }
    if let Some(x) = &s.account {
        line(format!("--account={}", shell_quote(x)));
    }
    line(format!(
        "--output={}",
        shell_quote(&format!("{logs}/%x-%A_%a.out"))
    ));
    line(format!("--chdir={}", shell_quote(&cwd.to_string_lossy())));
    line("--kill-on-invalid-dep=yes".into());
    for x in &s.extra {
        line(x.trim().trim_start_matches("#SBATCH").trim().to_string());
    }
    let _ = writeln!(
        out,
        "# tokenmill run {}, step {}, tasks: {} (this task's index: SLURM_ARRAY_TASK_ID).",
        p.output, job.step, job.tasks
    );
    for (k, v) in &config.env {
        let _ = writeln!(out, "export {}={}", k, shell_quote(v));
    }
    let command: Vec<String> = job.command.iter().map(|c| shell_quote(c)).collect();
    let _ = write!(
        out,
        "# A failed task is rerun here {retries} times: inputs it finished are skipped by\n\
         # their markers, so a rerun redoes only what is missing.\n\
         status=1\n\
         for attempt in $(seq 0 {retries}); do\n  \
           {cmd} && exit 0\n  \
           status=$?\n  \
           echo \"tokenmill: task $SLURM_ARRAY_TASK_ID attempt $attempt failed (status $status)\" >&2\n\
         done\n\
         exit $status\n",
        retries = s.retries,
        cmd = command.join(" ")
    );
    out
}

/// The `SubmitJob` request of one step; `depends_on` is the previous job's id.
pub fn batch_request(
    p: &Pipeline,
    config: &SubmitConfig,
    job: &StepJob,
    depends_on: Option<&str>,
) -> serde_json::Value {
    let b = &config.aws_batch;
    let mut env: Vec<serde_json::Value> = config
        .env
        .iter()
        .map(|(k, v)| serde_json::json!({"name": k, "value": v}))
        .collect();
    env.sort_by_key(|v| v["name"].as_str().map(str::to_string));
    let mut req = serde_json::json!({
        "jobName": dns_name(&format!("{}-{}", run_name(p), job.step), 128),
        "jobQueue": b.job_queue,
        "jobDefinition": b.job_definition,
        "containerOverrides": {
            "command": job.command,
            "resourceRequirements": [
                {"type": "VCPU", "value": job.cpus.to_string()},
                {"type": "MEMORY", "value": job.memory_mib.to_string()},
            ],
            "environment": env,
        },
        "retryStrategy": {"attempts": b.attempts.clamp(1, 10)},
        "propagateTags": true,
        "tags": {"tokenmill-run": run_name(p), "tokenmill-step": job.step},
    });
    if job.tasks >= 2 {
        req["arrayProperties"] = serde_json::json!({"size": job.tasks});
    }
    if let Some(id) = depends_on {
        req["dependsOn"] = serde_json::json!([{"jobId": id}]);
    }
    req
}

/// The Indexed Job of one step (as a JSON value; printed as YAML).
pub fn k8s_job(
    p: &Pipeline,
    config: &SubmitConfig,
    job: &StepJob,
    previous: Option<&StepJob>,
) -> Result<serde_json::Value> {
    let k = &config.k8s;
    let name = dns_name(&format!("{}-{}", run_name(p), job.step), 63);
    let labels = serde_json::json!({
        "app.kubernetes.io/name": "tokenmill",
        "tokenmill/run": dns_name(&run_name(p), 63),
        "tokenmill/step": dns_name(&job.step, 63),
    });
    let resources = |factor: f64| {
        serde_json::json!({
            "cpu": format!("{}m", (job.cpus as f64 * 1000.0 * factor).round() as u64),
            "memory": format!("{}Mi", (job.memory_mib as f64 * factor).round() as u64),
        })
    };
    let env: Vec<serde_json::Value> = config
        .env
        .iter()
        .map(|(k, v)| serde_json::json!({"name": k, "value": v}))
        .collect();
    let mut pod = serde_json::json!({
        "restartPolicy": "Never",
        "containers": [{
            "name": "task",
            "image": k.image,
            "command": job.command,
            "env": env,
            "resources": {"requests": resources(1.0), "limits": resources(k.limit_factor.max(1.0))},
        }],
    });
    if let Some(sa) = &k.service_account {
        pod["serviceAccountName"] = sa.clone().into();
    }
    if let Some(prev) = previous {
        let mill = job
            .command
            .first()
            .cloned()
            .unwrap_or_else(|| "mill".into());
        pod["initContainers"] = serde_json::json!([{
            "name": dns_name(&format!("wait-{}", prev.step), 63),
            "image": k.image,
            "command": [mill, "wait", pipeline_url(p)?, prev.step, "--tasks",
                        prev.tasks.to_string(), "--timeout", k.wait_timeout_s.to_string()],
            "env": env,
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                          "limits": {"cpu": "500m", "memory": "512Mi"}},
        }]);
    }
    let parallelism = k
        .parallelism
        .map_or(job.tasks, |n| (n as usize).clamp(1, job.tasks));
    Ok(serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": k.namespace, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": job.tasks,
            "parallelism": parallelism,
            "backoffLimitPerIndex": k.backoff_limit_per_index,
            "maxFailedIndexes": 0,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }))
}

/// A JSON value as YAML (block style; strings quoted when YAML could read them as
/// something else).
pub fn to_yaml(v: &serde_json::Value) -> String {
    fn scalar(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::String(s) => {
                let plain = !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
                    && !s.starts_with(['-', '.'])
                    && s.parse::<f64>().is_err()
                    && !matches!(
                        s.to_ascii_lowercase().as_str(),
                        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "~"
                    );
                if plain {
                    s.clone()
                } else {
                    serde_json::to_string(s).unwrap_or_default()
                }
            }
            other => other.to_string(),
        }
    }
    fn walk(v: &serde_json::Value, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match v {
            serde_json::Value::Object(map) => {
                for (k, val) in map {
                    match val {
                        serde_json::Value::Object(m) if !m.is_empty() => {
                            let _ = writeln!(out, "{pad}{}:", scalar(&k.clone().into()));
                            walk(val, indent + 2, out);
                        }
                        serde_json::Value::Array(a) if !a.is_empty() => {
                            let _ = writeln!(out, "{pad}{}:", scalar(&k.clone().into()));
                            walk(val, indent, out);
                        }
                        serde_json::Value::Object(_) => {
                            let _ = writeln!(out, "{pad}{}: {{}}", scalar(&k.clone().into()));
                        }
                        serde_json::Value::Array(_) => {
                            let _ = writeln!(out, "{pad}{}: []", scalar(&k.clone().into()));
                        }
                        _ => {
                            let _ = writeln!(
                                out,
                                "{pad}{}: {}",
                                scalar(&k.clone().into()),
                                scalar(val)
                            );
                        }
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    match item {
                        serde_json::Value::Object(m) if !m.is_empty() => {
                            let mut inner = String::new();
                            walk(item, indent + 2, &mut inner);
                            let body = inner.trim_start_matches(' ');
                            let _ = write!(out, "{pad}- {body}");
                        }
                        _ => {
                            let _ = writeln!(out, "{pad}- {}", scalar(item));
                        }
                    }
                }
            }
            other => {
                let _ = writeln!(out, "{pad}{}", scalar(other));
            }
        }
    }
    let mut out = String::new();
    walk(v, 0, &mut out);
    out
}

/// What `mill submit` made: per step, the file name and its text, and the job id once
/// submitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    pub step: String,
    pub file: String,
    pub text: String,
    pub job_id: Option<String>,
}

/// Builds every step's job for `engine`; with `submit`, also submits them in order
/// (each depending on the one before) and records the ids. Slurm submits through
/// `sbatch`, AWS Batch through the `aws` command line, Kubernetes through `kubectl`.
pub fn submit(
    storage: &Storage,
    p: &Pipeline,
    engine: Engine,
    submit: bool,
) -> Result<Vec<Submitted>> {
    let config = &p.submit;
    let cwd =
        std::env::current_dir().map_err(|e| Error::Usage(format!("the current folder: {e}")))?;
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
    let mut out: Vec<Submitted> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let previous = out.last().and_then(|s| s.job_id.clone());
        let (file, text) = match engine {
            Engine::Slurm => (
                format!("{:02}-{}.sbatch", i, job.step),
                slurm_script(p, config, job, &cwd),
            ),
            Engine::AwsBatch => {
                let dep = if i == 0 {
                    None
                } else {
                    Some(
                        previous
                            .clone()
                            .unwrap_or_else(|| format!("<job id of step {}>", jobs[i - 1].step)),
                    )
                };
                let req = batch_request(p, config, job, dep.as_deref());
                (
                    format!("{:02}-{}.json", i, job.step),
                    serde_json::to_string_pretty(&req).unwrap_or_default() + "\n",
                )
            }
            Engine::K8s => {
                let prev = i.checked_sub(1).map(|j| &jobs[j]);
                (
                    format!("{:02}-{}.yaml", i, job.step),
                    to_yaml(&k8s_job(p, config, job, prev)?),
                )
            }
        };
        let job_id = if submit {
            Some(run_engine(
                engine,
                &text,
                previous.as_deref(),
                config,
                &cwd,
            )?)
        } else {
            None
        };
        if let Some(id) = &job_id {
            tracing::info!(step = %job.step, job = %id, tasks = job.tasks, "submitted");
        }
        out.push(Submitted {
            step: job.step.clone(),
            file,
            text,
            job_id,
        });
    }
    Ok(out)
}

fn run_engine(
    engine: Engine,
    text: &str,
    previous: Option<&str>,
    config: &SubmitConfig,
    cwd: &Path,
) -> Result<String> {
    let dir = tempfile::tempdir().map_err(|e| Error::Usage(format!("a temporary folder: {e}")))?;
    let file = dir.path().join("job");
    std::fs::write(&file, text)
        .map_err(|e| Error::Usage(format!("writing {}: {e}", file.display())))?;
    let (program, args): (&str, Vec<String>) = match engine {
        Engine::Slurm => {
            if let Some(logs) = &config.slurm.logs {
                let _ = std::fs::create_dir_all(logs);
            } else {
                let _ = std::fs::create_dir_all(cwd.join("slurm-logs"));
            }
            let mut a = vec!["--parsable".to_string()];
            if let Some(prev) = previous {
                a.push(format!("--dependency=afterok:{prev}"));
            }
            a.push(file.to_string_lossy().into_owned());
            ("sbatch", a)
        }
        Engine::AwsBatch => (
            "aws",
            vec![
                "batch".into(),
                "submit-job".into(),
                "--output".into(),
                "json".into(),
                "--cli-input-json".into(),
                format!("file://{}", file.display()),
            ],
        ),
        Engine::K8s => (
            "kubectl",
            vec![
                "create".into(),
                "-o".into(),
                "jsonpath={.metadata.name}".into(),
                "-f".into(),
                file.to_string_lossy().into_owned(),
            ],
        ),
    };
    let out = std::process::Command::new(program)
        .args(&args)
        .output()
        .map_err(|e| Error::Usage(format!("running {program}: {e}")))?;
    if !out.status.success() {
        return Err(Error::Usage(format!(
            "{program} refused the job ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(match engine {
        Engine::Slurm => stdout.split(';').next().unwrap_or("").to_string(),
        Engine::AwsBatch => serde_json::from_str::<serde_json::Value>(&stdout)
            .ok()
            .and_then(|v| v["jobId"].as_str().map(str::to_string))
            .ok_or_else(|| Error::Usage(format!("aws batch submit-job answered {stdout:?}")))?,
        Engine::K8s => stdout,
    })
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
        "host": std::env::var("HOSTNAME").unwrap_or_default(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_quotes_what_yaml_would_misread() {
        let v = serde_json::json!({
            "a": "plain-name", "b": "true", "c": "8", "d": "has space", "e": 3,
            "f": [{"x": "1m", "z": ["p", "q"]}], "g": {}, "h": [],
        });
        let y = to_yaml(&v);
        assert!(y.contains("a: plain-name\n"), "{y}");
        assert!(y.contains("b: \"true\"\n"), "{y}");
        assert!(y.contains("c: \"8\"\n"), "{y}");
        assert!(y.contains("d: \"has space\"\n"), "{y}");
        assert!(y.contains("e: 3\n"), "{y}");
        assert!(y.contains("f:\n- x: 1m\n  z:\n  - p\n  - q\n"), "{y}");
        // YAML 1.1 reads a bare y as true.
        assert!(to_yaml(&serde_json::json!({"y": 1})).starts_with("\"y\": 1"));
        assert!(y.contains("g: {}\n") && y.contains("h: []\n"), "{y}");
    }

    #[test]
    fn names_fit_the_engines_rules() {
        assert_eq!(dns_name("Run_2024.text", 63), "run-2024-text");
        assert_eq!(dns_name("--x--", 63), "x");
        assert_eq!(dns_name(&"a".repeat(80), 63).len(), 63);
        assert_eq!(shell_quote("/a/b-c.toml"), "/a/b-c.toml");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
