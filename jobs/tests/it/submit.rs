//! `mill submit --engine slurm` on the single-node Slurm cluster that `.ci/run` brings
//! up (scripts/slurm-up.sh): the fixture pipeline gives the shards `mill run` gives, and
//! a failed task stops its dependents until a resubmit finishes the run.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{mill, model_present, ok, outputs, pipeline_at};

/// Whether a Slurm cluster answers (`SLURM_CONF` set by scripts/slurm-up.sh); CI must
/// have one.
fn slurm_up() -> bool {
    let up = std::env::var_os("SLURM_CONF").is_some()
        && Command::new("sinfo")
            .arg("-h")
            .output()
            .is_ok_and(|o| o.status.success());
    assert!(
        up || std::env::var_os("CI").is_none(),
        "CI must bring up Slurm (eval \"$(bash scripts/slurm-up.sh)\")"
    );
    if !up {
        eprintln!("no Slurm cluster: test skipped (eval \"$(bash scripts/slurm-up.sh)\")");
    }
    up
}

/// The fixture pipeline as 3 tasks per step, small tasks for a small cluster, task logs
/// in `dir/logs`, and the `mill` a task runs (default: this build's).
fn slurm_pipeline(dir: &Path, run: &Path, mill_bin: Option<&Path>) -> String {
    let f = pipeline_at(dir, &run.to_string_lossy());
    let mut text = std::fs::read_to_string(&f).expect("pipeline");
    text = text.replace("tasks = 1\n", "tasks = 3\n");
    let mill_line = mill_bin
        .map(|m| format!("mill = \"{}\"\n", m.display()))
        .unwrap_or_default();
    text.push_str(&format!(
        "\n[submit]\n{mill_line}cpus = 1\nmemory_mib = 1000\n[submit.slurm]\nlogs = \"{}\"\nretries = 2\n",
        dir.join("logs").display()
    ));
    std::fs::write(&f, text).expect("pipeline");
    f.to_string_lossy().into_owned()
}

/// Submits, returning (step, job id) in order.
fn submit(f: &str) -> Vec<(String, String)> {
    let out = ok(
        mill(&["submit", f, "--engine", "slurm"])
            .output()
            .expect("mill submit"),
        "mill submit",
    );
    assert!(out.contains("squeue -j"), "{out}");
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(s, j)| (s.to_string(), j.to_string()))
        .collect()
}

/// Every array task of `ids` with its state, once none is pending or running.
fn wait_for(ids: &[(String, String)], limit: Duration) -> Vec<(String, String)> {
    let list: Vec<&str> = ids.iter().map(|(_, j)| j.as_str()).collect();
    let started = Instant::now();
    loop {
        let out = Command::new("squeue")
            .args([
                "-h",
                "-r",
                "-t",
                "all",
                "-o",
                "%i %T",
                "-j",
                &list.join(","),
            ])
            .output()
            .expect("squeue");
        let rows: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.trim().to_string()))
            .collect();
        let busy = rows.iter().any(|(_, s)| {
            matches!(
                s.as_str(),
                "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING"
            )
        });
        if !rows.is_empty() && !busy {
            return rows;
        }
        assert!(
            started.elapsed() < limit,
            "Slurm jobs still busy after {limit:?}: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// States of the tasks of job `id` (array tasks `id_k`, or the job itself).
fn states_of<'a>(rows: &'a [(String, String)], id: &str) -> Vec<&'a str> {
    rows.iter()
        .filter(|(j, _)| j == id || j.starts_with(&format!("{id}_")))
        .map(|(_, s)| s.as_str())
        .collect()
}

#[test]
fn slurm_runs_the_fixture_pipeline_like_mill_run() {
    if !model_present() || !slurm_up() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let clean = crate::reference_run(dir.path(), "clean");
    let d = dir.path().join("slurm");
    std::fs::create_dir_all(&d).expect("dir");
    let run = d.join("run");
    let f = slurm_pipeline(&d, &run, None);
    let started = Instant::now();
    let ids = submit(&f);
    assert_eq!(ids.len(), 8, "a job per step: {ids:?}");
    let rows = wait_for(&ids, Duration::from_secs(900));
    let took = started.elapsed();
    assert!(
        rows.iter().all(|(_, s)| s == "COMPLETED"),
        "every task completes: {rows:?}"
    );
    // Array jobs of 3 tasks, and the single-task phases as one.
    for (step, id) in &ids {
        let want = if ["clusters", "tokenizer", "model"].contains(&step.as_str()) {
            1
        } else {
            3
        };
        assert_eq!(states_of(&rows, id).len(), want, "step {step}: {rows:?}");
    }
    assert_eq!(
        outputs(&run),
        outputs(&clean),
        "Slurm's shards differ from mill run's"
    );
    let status = ok(
        mill(&["status", &run.to_string_lossy()])
            .output()
            .expect("status"),
        "status",
    );
    assert!(status.contains("complete"), "{status}");
    eprintln!(
        "fixture pipeline through Slurm: {} s from submit to the last task",
        took.as_secs()
    );
}

#[test]
fn a_failed_slurm_task_stops_its_dependents_and_a_resubmit_finishes() {
    if !model_present() || !slurm_up() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let clean = crate::reference_run(dir.path(), "clean");
    let d = dir.path().join("slurm");
    std::fs::create_dir_all(&d).expect("dir");
    // A `mill` that fails task 1 of the buckets step while the flag file exists.
    let flag = d.join("fail-buckets");
    std::fs::write(&flag, "").expect("flag");
    let attempts = d.join("attempts");
    let wrapper = d.join("mill-failing");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\nif [ \"$3\" = buckets ] && [ \"$SLURM_ARRAY_TASK_ID\" = 1 ] && [ -e {flag} ]; then\n  \
             echo attempt >> {attempts}\n  echo 'planned failure' >&2\n  exit 9\nfi\nexec {mill} \"$@\"\n",
            flag = flag.display(),
            attempts = attempts.display(),
            mill = env!("CARGO_BIN_EXE_mill"),
        ),
    )
    .expect("wrapper");
    let chmod = Command::new("chmod")
        .arg("+x")
        .arg(&wrapper)
        .status()
        .expect("chmod");
    assert!(chmod.success());
    let run = d.join("run");
    let f = slurm_pipeline(&d, &run, Some(&wrapper));
    let ids = submit(&f);
    let rows = wait_for(&ids, Duration::from_secs(900));
    let id = |step: &str| {
        ids.iter()
            .find(|(s, _)| s == step)
            .map(|(_, j)| j.clone())
            .expect("step")
    };
    let buckets = states_of(&rows, &id("buckets"));
    assert_eq!(
        buckets.iter().filter(|s| **s == "FAILED").count(),
        1,
        "{rows:?}"
    );
    for step in ["text", "signatures"] {
        assert!(
            states_of(&rows, &id(step))
                .iter()
                .all(|s| *s == "COMPLETED"),
            "{step}: {rows:?}"
        );
    }
    // The dependents never ran: cancelled, no task notes, no markers.
    for step in ["clusters", "deduped", "tokenizer", "tokens", "model"] {
        let states = states_of(&rows, &id(step));
        assert!(
            !states.is_empty() && states.iter().all(|s| *s == "CANCELLED"),
            "{step} should be cancelled: {rows:?}"
        );
        assert!(!run.join(step).join("_tasks").exists(), "{step} ran");
        assert!(!run.join(step).join("_done").exists(), "{step} ran");
    }
    // The task was tried 1 + 2 retries times inside its job.
    let tried = std::fs::read_to_string(&attempts).expect("attempts");
    assert_eq!(tried.lines().count(), 3, "attempts: {tried}");
    // Fixed: a plain resubmit redoes what is missing and finishes the run.
    std::fs::remove_file(&flag).expect("unflag");
    let again = submit(&f);
    let rows = wait_for(&again, Duration::from_secs(900));
    assert!(rows.iter().all(|(_, s)| s == "COMPLETED"), "{rows:?}");
    assert_eq!(
        outputs(&run),
        outputs(&clean),
        "after the resubmit, shards differ from mill run's"
    );
}

/// The fixture pipeline with every engine setting given and per-step resources.
fn engines_pipeline(dir: &Path) -> String {
    let f = pipeline_at(dir, &dir.join("run").to_string_lossy());
    let mut text = std::fs::read_to_string(&f).expect("pipeline");
    text = text.replace("tasks = 1\n", "tasks = 3\n").replace(
        "phase = \"dedup.clusters\"\n",
        "phase = \"dedup.clusters\"\ncpus = 2\nmemory_mib = 64000\n",
    );
    text.push_str(
        "\n[submit]\nmill = \"/usr/local/bin/mill\"\nenv = { AWS_REGION = \"us-east-1\" }\n\
         [submit.slurm]\npartition = \"cpu\"\naccount = \"data\"\ntime = \"12:00:00\"\nextra = [\"--qos=high\"]\n\
         [submit.aws-batch]\njob_queue = \"curation\"\njob_definition = \"tokenmill:3\"\nattempts = 2\n\
         [submit.k8s]\nimage = \"registry.example/tokenmill:1\"\nnamespace = \"data\"\n\
         service_account = \"mill\"\nlimit_factor = 1.5\nparallelism = 2\n",
    );
    std::fs::write(&f, text).expect("pipeline");
    f.to_string_lossy().into_owned()
}

fn check_schemas(dir: &Path) -> std::process::Output {
    Command::new("python3")
        .arg(crate::root().join("scripts/check_submit.py"))
        .arg(dir)
        .output()
        .expect("python3 scripts/check_submit.py")
}

#[test]
fn batch_requests_and_kubernetes_jobs_pass_their_schemas() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = engines_pipeline(dir.path());
    let out = dir.path().join("jobs");
    for engine in ["aws-batch", "k8s", "slurm"] {
        let printed = ok(
            mill(&[
                "submit",
                &f,
                "--engine",
                engine,
                "--dry-run",
                "--out",
                &out.to_string_lossy(),
            ])
            .output()
            .expect("dry run"),
            "mill submit --dry-run",
        );
        assert!(printed.contains("# ---- step model"), "{printed}");
    }
    // Nothing was submitted or written in the run: a dry run stores no pipeline copy.
    assert!(!dir.path().join("run").exists());
    let checked = check_schemas(&out);
    let report = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "schemas: {report}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert_eq!(
        report.lines().filter(|l| l.starts_with("ok")).count(),
        16,
        "{report}"
    );
    eprintln!("{report}");
    let read = |name: &str| std::fs::read_to_string(out.join(name)).expect("job file");
    // AWS Batch: arrays of 3, the previous job as dependency, the clusters' memory.
    let text: serde_json::Value = serde_json::from_str(&read("00-text.json")).expect("json");
    assert_eq!(text["arrayProperties"]["size"], 3);
    assert!(text.get("dependsOn").is_none());
    let clusters: serde_json::Value =
        serde_json::from_str(&read("03-clusters.json")).expect("json");
    assert!(clusters.get("arrayProperties").is_none(), "one task");
    assert_eq!(
        clusters["dependsOn"][0]["jobId"],
        "<job id of step buckets>"
    );
    assert_eq!(
        clusters["containerOverrides"]["resourceRequirements"][1],
        serde_json::json!({"type": "MEMORY", "value": "64000"})
    );
    assert_eq!(
        clusters["containerOverrides"]["command"][0],
        "/usr/local/bin/mill"
    );
    // Kubernetes: Indexed Jobs, each after the first waiting for the step before.
    let k8s = read("04-deduped.yaml");
    for want in [
        "completionMode: Indexed",
        "completions: 3",
        "parallelism: 2",
        "backoffLimitPerIndex: 2",
        "- wait\n",
        "- clusters\n",
        "serviceAccountName: mill",
    ] {
        assert!(k8s.contains(want), "{want:?} missing:\n{k8s}");
    }
    assert!(!read("00-text.yaml").contains("initContainers"));
    // Slurm: the settings as #SBATCH lines.
    let sbatch = read("03-clusters.sbatch");
    for want in [
        "#SBATCH --array=0-0",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem=64000M",
        "#SBATCH --partition=cpu",
        "#SBATCH --account=data",
        "#SBATCH --time=12:00:00",
        "#SBATCH --qos=high",
        "#SBATCH --kill-on-invalid-dep=yes",
        "export AWS_REGION=us-east-1",
    ] {
        assert!(sbatch.contains(want), "{want:?} missing:\n{sbatch}");
    }
    // The checks can fail: a wrong enum and an unknown field are caught by name.
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).expect("dir");
    std::fs::write(
        bad.join("x.json"),
        read("00-text.json").replace("\"VCPU\"", "\"VCPUS\""),
    )
    .expect("bad json");
    std::fs::write(
        bad.join("x.yaml"),
        read("00-text.yaml").replace(
            "completionMode: Indexed",
            "completionMode: Indexed\n  retries: 3",
        ),
    )
    .expect("bad yaml");
    let checked = check_schemas(&bad);
    let report = String::from_utf8_lossy(&checked.stdout);
    assert!(!checked.status.success(), "{report}");
    assert!(
        report.contains("VCPUS") && report.contains("retries"),
        "{report}"
    );
}

#[test]
fn scheduling_examples_pass_their_checks() {
    let examples = crate::root().join("jobs/examples");
    let checked = check_schemas(&examples);
    let report = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    for kind in [
        "crontab(5)",
        "systemd timer",
        "systemd service",
        "Kubernetes",
        "EventBridge PutRule",
        "EventBridge PutTargets",
    ] {
        assert!(report.contains(kind), "no {kind} example checked: {report}");
    }
    // Every example runs an increment, with the flags mill has.
    for f in [
        "tokenmill.crontab",
        "tokenmill-cron.service",
        "tokenmill-cronjob.yaml",
        "eventbridge-targets.events.json",
    ] {
        let text = std::fs::read_to_string(examples.join(f)).expect("example");
        assert!(text.contains("--incremental"), "{f}");
    }
    let help = ok(
        mill(&["run", "--help"]).output().expect("help"),
        "mill run --help",
    );
    assert!(help.contains("--incremental"));
    // The checks can fail: a minute of 61, a timer with no calendar, an unknown state.
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("x.crontab"),
        "61 * * * * mill run p.toml --incremental\n",
    )
    .expect("bad");
    std::fs::write(
        dir.path().join("x.timer"),
        "[Unit]\nDescription=x\n[Timer]\nUnit=x.service\n[Install]\nWantedBy=timers.target\n",
    )
    .expect("bad");
    std::fs::write(
        dir.path().join("x.events.json"),
        "{\"Name\": \"x\", \"ScheduleExpression\": \"rate(1 hour)\", \"State\": \"ON\"}",
    )
    .expect("bad");
    let checked = check_schemas(dir.path());
    let report = String::from_utf8_lossy(&checked.stdout);
    assert!(!checked.status.success());
    assert_eq!(
        report.lines().filter(|l| l.starts_with("FAIL")).count(),
        3,
        "{report}"
    );
}
