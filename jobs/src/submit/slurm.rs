//! Slurm: an sbatch script per array of a step, submitted with
//! `--dependency=afterok:<every array of the step before>` and `--kill-on-invalid-dep=yes`,
//! so that a failed step cancels its dependents instead of leaving them pending.
//! Retries happen inside the script (a task that fails is rerun `retries` times), since
//! Slurm requeues only on node failure.
//!
//! Arrays: a cluster refuses an array index at or past its `MaxArraySize` (1001 by
//! default), read from `scontrol show config` when submitting; `[submit.slurm]
//! max_array_size` overrides it (and serves dry runs on a machine without Slurm).
//! `throttle` adds `%N`: at most N tasks of an array at once.
//!
//! A train step that names `nodes` or `gpus_per_node` is one job of `nodes` ×
//! `gpus_per_node` tasks, `--gpus-per-node` (or `--gres=gpu:N`) GPUs on each node, and
//! `srun` starts one `mill step` per rank: each rank's trainer reads `SLURM_PROCID`,
//! `SLURM_NTASKS`, `SLURM_LOCALID` and meets rank 0 on the first host of the job's node
//! list ([`pipeline::world`]), at a port derived from the job id.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use pipeline::{Error, Result};

use super::{Array, JobFile, StepJob, SubmitConfig, Submitted, arrays, run_name, run_with_file};
use crate::spec::Pipeline;

/// Slurm's `MaxArraySize` when nothing says otherwise.
pub const DEFAULT_MAX_ARRAY_SIZE: usize = 1001;

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
    /// Tasks per array at most (default: the cluster's `MaxArraySize`).
    pub max_array_size: Option<usize>,
    /// Tasks of one array running at once at most (`--array=0-N%throttle`).
    pub throttle: Option<u32>,
    /// Ask for a train step's GPUs as `--gres=gpu:N` instead of `--gpus-per-node=N`
    /// (clusters that predate `--gpus-per-node`).
    pub gres: bool,
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
            max_array_size: None,
            throttle: None,
            gres: false,
        }
    }
}

pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `MaxArraySize` from a `scontrol show config` listing.
pub fn parse_max_array_size(config: &str) -> Option<usize> {
    config.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "MaxArraySize").then(|| v.trim().parse().ok())?
    })
}

/// The largest array this submission may use: the setting, else the cluster's
/// `MaxArraySize`, else (a dry run without Slurm) Slurm's default.
pub fn max_array_size(config: &SlurmConfig, submitting: bool) -> Result<usize> {
    if let Some(n) = config.max_array_size {
        return Ok(n.max(1));
    }
    let out = std::process::Command::new("scontrol")
        .args(["show", "config"])
        .output();
    match out {
        Ok(o) if o.status.success() => parse_max_array_size(&String::from_utf8_lossy(&o.stdout))
            .map(|n| n.max(1))
            .ok_or_else(|| Error::Usage("scontrol show config gave no MaxArraySize".into())),
        _ if !submitting => Ok(DEFAULT_MAX_ARRAY_SIZE),
        Ok(o) => Err(Error::Usage(format!(
            "scontrol show config failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
        Err(e) => Err(Error::Usage(format!(
            "running scontrol to read MaxArraySize (or set [submit.slurm] max_array_size): {e}"
        ))),
    }
}

/// The sbatch script of one array of a step, or of the whole train step.
pub fn script(
    p: &Pipeline,
    config: &SubmitConfig,
    job: &StepJob,
    array: Array,
    cwd: &Path,
) -> String {
    let s = &config.slurm;
    let logs = super::logs_dir(s.logs.as_deref(), cwd);
    let mut out = String::from("#!/bin/bash\n");
    let mut line = |l: String| {
        let _ = writeln!(out, "#SBATCH {l}");
    };
    line(format!(
        "--job-name={}",
        shell_quote(&format!("{}.{}", run_name(p), job.step))
    ));
    match job.gpus {
        None => {
            let throttle = s
                .throttle
                .map(|t| format!("%{}", t.max(1)))
                .unwrap_or_default();
            line(format!(
                "--array=0-{}{throttle}",
                array.size.saturating_sub(1)
            ));
            line("--ntasks=1".into());
            if let Some(g) = job.task_gpus {
                if s.gres {
                    line(format!("--gres=gpu:{g}"));
                } else {
                    line(format!("--gpus-per-node={g}"));
                }
            }
        }
        Some(g) => {
            line(format!("--nodes={}", g.nodes));
            line(format!("--ntasks-per-node={}", g.per_node));
            if g.gpus && s.gres {
                line(format!("--gres=gpu:{}", g.per_node));
            } else if g.gpus {
                line(format!("--gpus-per-node={}", g.per_node));
            }
        }
    }
    // A train step's cpus and memory are per node, as on the other engines.
    let per_task = match job.gpus {
        Some(g) => (job.cpus / g.per_node.max(1)).max(1),
        None => job.cpus,
    };
    line(format!("--cpus-per-task={per_task}"));
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
    let pattern = if job.gpus.is_some() {
        "%x-%j.out"
    } else {
        "%x-%A_%a.out"
    };
    line(format!(
        "--output={}",
        shell_quote(&format!("{logs}/{pattern}"))
    ));
    line(format!("--chdir={}", shell_quote(&cwd.to_string_lossy())));
    line("--kill-on-invalid-dep=yes".into());
    for x in &s.extra {
        line(x.trim().trim_start_matches("#SBATCH").trim().to_string());
    }
    for (k, v) in &config.env {
        let _ = writeln!(out, "export {}={}", k, shell_quote(v));
    }
    let command: Vec<String> = job.command.iter().map(|c| shell_quote(c)).collect();
    let command = match job.gpus {
        None => {
            let _ = writeln!(
                out,
                "# tokenmill run {}, step {}: tasks {}..{} of {} (a task's index: \
                 TOKENMILL_TASK_OFFSET + SLURM_ARRAY_TASK_ID).\n\
                 export {}={}",
                p.output,
                job.step,
                array.offset,
                array.offset + array.size - 1,
                job.tasks,
                pipeline::tasks::TASK_OFFSET_VAR,
                array.offset
            );
            command.join(" ")
        }
        Some(g) => {
            let _ = writeln!(
                out,
                "# tokenmill run {}, step {}: {} ranks, {} per node; srun starts one each\n\
                 # (rank: SLURM_PROCID; rank 0's host: the first of the job's nodes).\n\
                 export MASTER_PORT=${{MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}}",
                p.output,
                job.step,
                g.nodes * g.per_node,
                g.per_node
            );
            format!(
                "srun --kill-on-bad-exit=1 --ntasks={} --ntasks-per-node={} {}",
                g.nodes * g.per_node,
                g.per_node,
                command.join(" ")
            )
        }
    };
    let _ = write!(
        out,
        "# A failed task is rerun here {retries} times: inputs it finished are skipped by\n\
         # their markers, so a rerun redoes only what is missing.\n\
         status=1\n\
         for attempt in $(seq 0 {retries}); do\n  \
           {command} && exit 0\n  \
           status=$?\n  \
           echo \"tokenmill: task ${{SLURM_ARRAY_TASK_ID:-0}} attempt $attempt failed (status $status)\" >&2\n\
         done\n\
         exit $status\n",
        retries = s.retries,
    );
    out
}

/// Every step's scripts; submitted in order with `sbatch` when `submit`.
pub fn submit(
    p: &Pipeline,
    config: &SubmitConfig,
    jobs: &[StepJob],
    cwd: &Path,
    submit: bool,
) -> Result<Vec<Submitted>> {
    let max = max_array_size(&config.slurm, submit)?;
    if submit {
        let logs = super::logs_dir(config.slurm.logs.as_deref(), cwd);
        std::fs::create_dir_all(&logs)
            .map_err(|e| Error::Usage(format!("creating the log folder {logs}: {e}")))?;
    }
    let mut out: Vec<Submitted> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let parts = if job.gpus.is_some() {
            vec![Array { offset: 0, size: 1 }]
        } else {
            arrays(job.tasks, max)
        };
        let files: Vec<JobFile> = parts
            .iter()
            .enumerate()
            .map(|(k, a)| JobFile {
                name: if parts.len() == 1 {
                    format!("{i:02}-{}.sbatch", job.step)
                } else {
                    format!("{i:02}-{}.{k}.sbatch", job.step)
                },
                text: script(p, config, job, *a, cwd),
            })
            .collect();
        let mut job_ids = Vec::new();
        if submit {
            let previous = out.last().map(|s| s.job_ids.join(":"));
            for f in &files {
                let mut args = vec!["--parsable".to_string()];
                if let Some(prev) = previous.as_deref().filter(|p| !p.is_empty()) {
                    args.push(format!("--dependency=afterok:{prev}"));
                }
                args.push("{}".into());
                let id = run_with_file("sbatch", &args, &f.name, &f.text)?;
                let id = id.split(';').next().unwrap_or("").to_string();
                tracing::info!(step = %job.step, job = %id, file = %f.name, "submitted");
                job_ids.push(id);
            }
        }
        out.push(Submitted {
            step: job.step.clone(),
            files,
            job_ids,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_array_size_from_scontrol() {
        let listing = "MaxArraySize            = 11\nMaxJobCount             = 10000\n";
        assert_eq!(parse_max_array_size(listing), Some(11));
        assert_eq!(parse_max_array_size("MaxJobCount = 3\n"), None);
        let set = SlurmConfig {
            max_array_size: Some(500),
            ..SlurmConfig::default()
        };
        assert_eq!(max_array_size(&set, true).ok(), Some(500));
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/a/b-c.toml"), "/a/b-c.toml");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
