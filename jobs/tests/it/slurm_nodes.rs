//! `mill submit --engine slurm` on the cluster `.ci/run` brings up: three `slurmd`s,
//! each in its own network namespace behind a bridge, two fake GPUs each (gres), and
//! `MaxArraySize=11` (scripts/slurm-up.sh). A step past the array cap runs as several
//! arrays; 12 tasks spread over the nodes and reach the S3 test server through the
//! bridge; a node killed mid-step loses nothing; the train step runs as 2 ranks under
//! `srun` and ends with the weights of the same 2 ranks started by `mill run`.
//!
//! These tests share one cluster and one of them kills a node: they run one at a time
//! (the `slurm` test group of .config/nextest.toml, and a lock under `cargo test`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::submit::{SLURM, slurm_pipeline, slurm_up, states_of, submit, wait_for, wait_for_nodes};
use crate::{mill, model_present, ok, outputs, root};

/// The cluster's nodes (`sinfo`).
fn nodes() -> Vec<String> {
    let out = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N"])
        .output()
        .expect("sinfo");
    let mut n: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    n.sort();
    n.dedup();
    n
}

/// The cluster's `MaxArraySize`.
fn max_array_size() -> usize {
    let out = Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .expect("scontrol");
    jobs::submit::slurm::parse_max_array_size(&String::from_utf8_lossy(&out.stdout))
        .expect("MaxArraySize")
}

/// Whether the multi-node cluster is up; CI must have it.
fn nodes_up() -> bool {
    if !model_present() || !slurm_up() {
        return false;
    }
    let n = nodes();
    let up = n.len() >= 3;
    assert!(
        up || std::env::var_os("CI").is_none(),
        "CI must bring up 3 Slurm nodes (SLURM_CI_NODES=3): {n:?}"
    );
    if !up {
        eprintln!("fewer than 3 Slurm nodes ({n:?}): test skipped");
    }
    up
}

/// The fixture pipeline cut to its text step, `tasks` tasks, into `run`.
fn text_pipeline(dir: &Path, input: &str, run: &str, tasks: usize, submit_env: &str) -> PathBuf {
    let f = crate::pipeline_at(dir, run);
    let text = std::fs::read_to_string(&f).expect("pipeline");
    let cut = text
        .find("[[step]]\nname = \"signatures\"")
        .expect("the signatures step");
    let mut text = text[..cut].replace("tasks = 1\n", &format!("tasks = {tasks}\n"));
    text = text.replace(
        "input = \"fixtures/crawl\"",
        &format!("input = \"{input}\""),
    );
    text.push_str(&format!(
        "\n[submit]\ncpus = 1\nmemory_mib = 500\n{submit_env}[submit.slurm]\nlogs = \"{}\"\nretries = 2\n",
        dir.join("logs").display()
    ));
    let path = dir.join("text.toml");
    std::fs::write(&path, text).expect("pipeline");
    path
}

/// `mill run` of the text step on the fixture crawl into `<dir>/clean`.
fn reference_text_run(dir: &Path) -> PathBuf {
    let crawl = root().join("fixtures/crawl");
    let clean = dir.join("clean");
    let f = text_pipeline(
        dir,
        &crawl.to_string_lossy(),
        &clean.to_string_lossy(),
        1,
        "",
    );
    ok(
        mill(&["run", &f.to_string_lossy()]).output().expect("run"),
        "mill run",
    );
    clean
}

/// The text step's shards: name → bytes.
fn text_shards(storage: &pipeline::Storage, run: &pipeline::Location) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = storage
        .list(&run.join("text/"))
        .expect("list")
        .into_iter()
        .filter(|o| o.relative.ends_with(".parquet") && !o.relative.contains('/'))
        .map(|o| (o.relative.clone(), storage.read(&o.location).expect("read")))
        .collect();
    out.sort();
    out
}

fn local(p: &Path) -> pipeline::Location {
    pipeline::Location::Local(p.to_path_buf())
}

#[test]
fn a_step_past_max_array_size_runs_as_several_arrays() {
    let _one = SLURM.lock();
    if !nodes_up() {
        return;
    }
    let max = max_array_size();
    assert!(
        max <= 50 || std::env::var_os("CI").is_none(),
        "CI's cluster has MaxArraySize=11, not {max}"
    );
    if max > 50 {
        eprintln!("MaxArraySize {max}: too large to test here");
        return;
    }
    let tasks = 2 * max + 3;
    let dir = tempfile::tempdir().expect("tmp");
    let crawl = root().join("fixtures/crawl");
    let clean = reference_text_run(dir.path());
    let run = dir.path().join("run");
    let f = text_pipeline(
        dir.path(),
        &crawl.to_string_lossy(),
        &run.to_string_lossy(),
        tasks,
        "",
    );
    let ids = submit(&f.to_string_lossy());
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(
        ids[0].1.len(),
        3,
        "{tasks} tasks as 3 arrays of at most {max}: {ids:?}"
    );
    let rows = wait_for(&ids, Duration::from_secs(600));
    assert_eq!(rows.len(), tasks, "{rows:?}");
    assert!(rows.iter().all(|(_, s)| s == "COMPLETED"), "{rows:?}");
    // Every task index ran once: a completion note each.
    let notes = std::fs::read_dir(run.join("text/_tasks"))
        .expect("notes")
        .count();
    assert_eq!(notes, tasks);
    let storage = pipeline::Storage::new();
    let want = text_shards(&storage, &local(&clean));
    assert!(!want.is_empty());
    assert_eq!(
        text_shards(&storage, &local(&run)),
        want,
        "shards differ from mill run's"
    );
}

#[test]
fn twelve_tasks_spread_over_the_nodes_and_reach_s3_through_the_bridge() {
    let _one = SLURM.lock();
    if !nodes_up() {
        return;
    }
    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-nodes") else {
        return;
    };
    let node_endpoint = std::env::var("TOKENMILL_TEST_S3_NODE_ENDPOINT")
        .expect("TOKENMILL_TEST_S3_NODE_ENDPOINT (scripts/s3-server.sh, with the bridge up)");
    crate::upload_crawl(&storage, &bucket);
    let dir = tempfile::tempdir().expect("tmp");
    let clean = reference_text_run(dir.path());
    let run = format!("s3://{bucket}/run");
    // The tasks run inside the nodes' namespaces: the server is the bridge's address.
    let env = format!("env = {{ AWS_ENDPOINT_URL = \"{node_endpoint}\" }}\n");
    let f = text_pipeline(dir.path(), &format!("s3://{bucket}/crawl/"), &run, 12, &env);
    let out = crate::secrets::with_fake_credentials(
        &mut mill(&["submit", &f.to_string_lossy(), "--engine", "slurm"]),
        &endpoint,
    );
    let printed = ok(out, "mill submit");
    let ids: Vec<(String, Vec<String>)> = printed
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(s, j)| (s.to_string(), j.split(',').map(str::to_string).collect()))
        .collect();
    let rows = wait_for_nodes(&ids, Duration::from_secs(600));
    assert_eq!(rows.len(), 12, "{rows:?}");
    assert!(rows.iter().all(|(_, s, _)| s == "COMPLETED"), "{rows:?}");
    let mut used: Vec<&str> = rows.iter().map(|(_, _, n)| n.as_str()).collect();
    used.sort();
    used.dedup();
    assert!(used.len() >= 2, "12 tasks on one node: {rows:?}");
    eprintln!("12 tasks ran on {used:?}");
    let want = text_shards(&pipeline::Storage::new(), &local(&clean));
    let got = text_shards(&storage, &pipeline::Location::parse(&run).expect("run"));
    assert_eq!(got, want, "shards on S3 differ from mill run's");
}

/// Runs `scripts/slurm-node.sh ACTION NODE`.
fn node(action: &str, name: &str) {
    let out = Command::new("bash")
        .arg(root().join("scripts/slurm-node.sh"))
        .args([action, name])
        .output()
        .expect("slurm-node.sh");
    assert!(
        out.status.success(),
        "slurm-node.sh {action} {name}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `node` is idle again.
fn node_idle(name: &str, limit: Duration) {
    let started = Instant::now();
    loop {
        let out = Command::new("sinfo")
            .args(["-h", "-n", name, "-o", "%T"])
            .output()
            .expect("sinfo");
        let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if state == "idle" {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "{name} is {state} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_node_killed_mid_step_loses_nothing() {
    let _one = SLURM.lock();
    if !nodes_up() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let crawl = root().join("fixtures/crawl");
    let clean = reference_text_run(d);
    // Slow tasks (a wrapper sleeps first), so that node2 dies while they run.
    let wrapper = d.join("mill-slow");
    crate::write_executable(
        &wrapper,
        &format!(
            "#!/bin/bash\nsleep 12\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_mill")
        ),
    );
    let run = d.join("run");
    let f = text_pipeline(
        d,
        &crawl.to_string_lossy(),
        &run.to_string_lossy(),
        12,
        &format!("mill = \"{}\"\n", wrapper.display()),
    );
    let ids = submit(&f.to_string_lossy());
    // Wait until node2 runs some of them, then kill it and its tasks.
    let started = Instant::now();
    loop {
        let out = Command::new("squeue")
            .args(["-h", "-t", "RUNNING", "-w", "node2", "-o", "%i"])
            .output()
            .expect("squeue");
        if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "nothing ran on node2"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(2));
    node("kill", "node2");
    let rows = wait_for(&ids, Duration::from_secs(600));
    let requeued_or_lost: Vec<&(String, String)> =
        rows.iter().filter(|(_, s)| s != "COMPLETED").collect();
    eprintln!("after killing node2: {rows:?}");
    // Slurm requeued what ran on node2 (a task's Restarts count), unless a resubmit
    // has to.
    let restarted: usize = ids[0]
        .1
        .iter()
        .map(|id| {
            let out = Command::new("scontrol")
                .args(["-o", "show", "job", id])
                .output()
                .expect("scontrol");
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| {
                    l.split_whitespace()
                        .any(|f| f.starts_with("Restarts=") && f != "Restarts=0")
                })
                .count()
        })
        .sum();
    eprintln!("tasks requeued by Slurm: {restarted}");
    assert!(
        restarted > 0 || !requeued_or_lost.is_empty(),
        "node2 ran tasks, none was requeued or lost: {rows:?}"
    );
    node("start", "node2");
    node_idle("node2", Duration::from_secs(120));
    if !requeued_or_lost.is_empty() {
        // Tasks that did not come back by themselves: a resubmit redoes what is missing.
        let again = submit(&f.to_string_lossy());
        let rows = wait_for(&again, Duration::from_secs(600));
        assert!(rows.iter().all(|(_, s)| s == "COMPLETED"), "{rows:?}");
    }
    assert_eq!(states_of(&rows, &ids[0].1).len(), 12, "{rows:?}");
    let storage = pipeline::Storage::new();
    let want = text_shards(&storage, &local(&clean));
    assert_eq!(
        text_shards(&storage, &local(&run)),
        want,
        "shards differ after a lost node"
    );
}

/// The latest checkpoint's weights of a train step's output.
fn weights(model: &Path) -> Vec<u8> {
    let latest = std::fs::read_to_string(model.join("latest")).expect("latest checkpoint");
    std::fs::read(model.join(latest.trim()).join("model.safetensors")).expect("weights")
}

#[test]
fn the_train_step_runs_two_ranks_on_a_node_with_two_gpus() {
    let _one = SLURM.lock();
    if !nodes_up() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    // The fixture pipeline with its train step on one node's 2 GPUs: 2 ranks.
    let two_ranks = |f: &Path| {
        let text = std::fs::read_to_string(f).expect("pipeline");
        let text = text.replace(
            "phase = \"train\"\n",
            "phase = \"train\"\nnodes = 1\ngpus_per_node = 2\n",
        );
        std::fs::write(f, text).expect("pipeline");
    };
    // `mill run` starts the 2 ranks itself, on this machine.
    let clean = dir.path().join("clean");
    let f = crate::pipeline_at(dir.path(), &clean.to_string_lossy());
    two_ranks(&f);
    ok(
        mill(&["run", &f.to_string_lossy()]).output().expect("run"),
        "mill run, 2 ranks",
    );
    let d = dir.path().join("slurm");
    std::fs::create_dir_all(&d).expect("dir");
    let run = d.join("run");
    let f = slurm_pipeline(&d, &run, None);
    two_ranks(Path::new(&f));
    let ids = submit(&f);
    let rows = wait_for(&ids, Duration::from_secs(900));
    assert!(rows.iter().all(|(_, s)| s == "COMPLETED"), "{rows:?}");
    // One job of 2 tasks on one node (not an array).
    let model_job = &ids.iter().find(|(s, _)| s == "model").expect("model").1;
    assert_eq!(states_of(&rows, model_job), ["COMPLETED"], "{rows:?}");
    assert_eq!(
        outputs(&run),
        outputs(&clean),
        "shards differ from mill run's"
    );
    assert_eq!(
        weights(&run.join("model")),
        weights(&clean.join("model")),
        "the 2 ranks under srun end with other weights than the 2 ranks of mill run"
    );
    // Two ranks trained, not one: a step is 2 × micro_batch 8 × 64 tokens.
    for model in [run.join("model"), clean.join("model")] {
        let metrics = std::fs::read_dir(model.join("metrics")).expect("metrics");
        let first = metrics
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
            .find(|l| !l.trim().is_empty())
            .expect("a step record");
        let record: serde_json::Value = serde_json::from_str(&first).expect("json");
        assert_eq!(record["tokens"], 2 * 8 * 64, "{first}");
    }
}
