//! `mill submit --engine slurm` on the single-node Slurm cluster that `.ci/run` brings
//! up (scripts/slurm-up.sh): the fixture pipeline gives the shards `mill run` gives, and
//! a failed task stops its dependents until a resubmit finishes the run.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{mill, model_present, ok, outputs, pipeline_at};

/// One Slurm test at a time: they share one cluster, and one kills a node (nextest
/// runs them in the `slurm` test group; `cargo test` runs them in one process).
pub(crate) static SLURM: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether a Slurm cluster answers (`SLURM_CONF` set by scripts/slurm-up.sh); CI must
/// have one.
pub(crate) fn slurm_up() -> bool {
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
pub(crate) fn slurm_pipeline(dir: &Path, run: &Path, mill_bin: Option<&Path>) -> String {
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

/// Submits, returning (step, job ids) in order: a step past the cluster's
/// `MaxArraySize` is several arrays.
pub(crate) fn submit(f: &str) -> Vec<(String, Vec<String>)> {
    let out = ok(
        mill(&["submit", f, "--engine", "slurm"])
            .output()
            .expect("mill submit"),
        "mill submit",
    );
    assert!(out.contains("squeue -j"), "{out}");
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(s, j)| (s.to_string(), j.split(',').map(str::to_string).collect()))
        .collect()
}

/// Every array task of `ids` with its state and node, once none is pending or running.
pub(crate) fn wait_for(ids: &[(String, Vec<String>)], limit: Duration) -> Vec<(String, String)> {
    wait_for_nodes(ids, limit)
        .into_iter()
        .map(|(j, s, _)| (j, s))
        .collect()
}

/// (task, state, node) of every array task of `ids`, once none is pending or running.
pub(crate) fn wait_for_nodes(
    ids: &[(String, Vec<String>)],
    limit: Duration,
) -> Vec<(String, String, String)> {
    let list: Vec<&str> = ids
        .iter()
        .flat_map(|(_, j)| j.iter().map(String::as_str))
        .collect();
    let started = Instant::now();
    loop {
        let out = Command::new("squeue")
            .args([
                "-h",
                "-r",
                "-t",
                "all",
                "-o",
                "%i %T %N",
                "-j",
                &list.join(","),
            ])
            .output()
            .expect("squeue");
        let rows: Vec<(String, String, String)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut cols = l.split_whitespace();
                let id = cols.next()?.to_string();
                let state = cols.next()?.to_string();
                Some((id, state, cols.next().unwrap_or("").to_string()))
            })
            .collect();
        let busy = rows.iter().any(|(_, s, _)| {
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

/// States of the tasks of jobs `ids` (array tasks `id_k`, or the jobs themselves).
pub(crate) fn states_of<'a>(rows: &'a [(String, String)], ids: &[String]) -> Vec<&'a str> {
    rows.iter()
        .filter(|(j, _)| {
            ids.iter()
                .any(|id| j == id || j.starts_with(&format!("{id}_")))
        })
        .map(|(_, s)| s.as_str())
        .collect()
}

#[test]
fn an_ablation_through_slurm_gives_mill_ablates_figures() {
    let _one = SLURM.lock();
    if !slurm_up() {
        return;
    }
    // The planted contrast's ablation, one seed: by `mill ablate` here, then as Slurm
    // jobs into another run.
    let dir = tempfile::tempdir().expect("tmp");
    let file = crate::ablate::planted(dir.path());
    let text = std::fs::read_to_string(&file)
        .expect("ablation")
        .replace("seeds = [1, 2]", "seeds = [1]");
    std::fs::write(&file, &text).expect("ablation");
    let base = dir.path().join("base.toml");
    let mut base_text = std::fs::read_to_string(&base).expect("base");
    base_text.push_str(&format!(
        "\n[submit]\ncpus = 1\nmemory_mib = 1000\n[submit.slurm]\nlogs = \"{}\"\nretries = 2\n",
        dir.path().join("logs").display()
    ));
    std::fs::write(&base, base_text).expect("base");
    let here = crate::ablate::results(&file);
    let slurm_run = dir.path().join("slurm-run");
    let on_slurm = dir.path().join("slurm.toml");
    std::fs::write(
        &on_slurm,
        format!("output = \"{}\"\n{text}", slurm_run.display()),
    )
    .expect("ablation");
    let ids = submit(&on_slurm.to_string_lossy());
    assert_eq!(ids.len(), 8, "a job per step: {ids:?}");
    let rows = wait_for(&ids, Duration::from_secs(900));
    assert!(
        rows.iter().all(|(_, s)| s == "COMPLETED"),
        "every task completes: {rows:?}"
    );
    let there: serde_json::Value = serde_json::from_str(&ok(
        mill(&["report", &slurm_run.to_string_lossy(), "--json"])
            .output()
            .expect("report"),
        "report --json",
    ))
    .expect("json");
    assert_eq!(there, here, "Slurm's models differ from mill ablate's");
}

#[test]
fn slurm_runs_the_fixture_pipeline_like_mill_run() {
    let _one = SLURM.lock();
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
    // Array jobs of 3 tasks (the clusters phase too: its rounds are shared), and the
    // single-task phases as one.
    for (step, id) in &ids {
        let want = if ["tokenizer", "model"].contains(&step.as_str()) {
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
    let _one = SLURM.lock();
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
    crate::write_executable(
        &wrapper,
        &format!(
            "#!/bin/bash\nif [ \"$3\" = buckets ] && [ \"$SLURM_ARRAY_TASK_ID\" = 1 ] && [ -e {flag} ]; then\n  \
             echo attempt >> {attempts}\n  echo 'planned failure' >&2\n  exit 9\nfi\nexec {mill} \"$@\"\n",
            flag = flag.display(),
            attempts = attempts.display(),
            mill = env!("CARGO_BIN_EXE_mill"),
        ),
    );
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

/// The fixture pipeline with every engine setting given and per-step resources;
/// `text_tasks` tasks in the text step, the train step on `nodes` × `gpus` GPUs.
pub(super) fn engines_pipeline(dir: &Path, text_tasks: usize, nodes: u32, gpus: u32) -> String {
    let f = pipeline_at(dir, &dir.join("run").to_string_lossy());
    let mut text = std::fs::read_to_string(&f).expect("pipeline");
    text = text
        .replace("tasks = 1\n", "tasks = 3\n")
        .replace(
            "phase = \"dedup.clusters\"\n",
            "phase = \"dedup.clusters\"\ncpus = 2\nmemory_mib = 64000\n",
        )
        .replace(
            "name = \"text\"\n",
            &format!("name = \"text\"\ntasks = {text_tasks}\n"),
        )
        .replace(
            "phase = \"train\"\n",
            &format!(
                "phase = \"train\"\nnodes = {nodes}\ngpus_per_node = {gpus}\ncpus = 96\nmemory_mib = 1000000\n"
            ),
        );
    text.push_str(
        "\n[submit]\nmill = \"/usr/local/bin/mill\"\nenv = { AWS_REGION = \"us-east-1\" }\n\
         [submit.slurm]\npartition = \"cpu\"\naccount = \"data\"\ntime = \"12:00:00\"\nextra = [\"--qos=high\"]\n\
         max_array_size = 1001\nthrottle = 500\n\
         [submit.aws-batch]\njob_queue = \"curation\"\njob_definition = \"tokenmill:3\"\nattempts = 2\n\
         gpu_job_queue = \"p5\"\ntrainer_image = \"registry.example/tokenmill-trainer:1\"\n\
         [submit.k8s]\nimage = \"registry.example/tokenmill:1\"\nnamespace = \"data\"\n\
         trainer_image = \"registry.example/tokenmill-trainer:1\"\n\
         service_account = \"mill\"\nlimit_factor = 1.5\nparallelism = 200\n",
    );
    std::fs::write(&f, text).expect("pipeline");
    f.to_string_lossy().into_owned()
}

pub(super) fn check_schemas(dir: &Path) -> std::process::Output {
    Command::new("python3")
        .arg(crate::root().join("scripts/check_submit.py"))
        .arg(dir)
        .output()
        .expect("python3 scripts/check_submit.py")
}

/// `mill submit --dry-run --out <dir>/jobs` for every engine.
pub(super) fn dry_runs(f: &str, out: &Path) {
    for engine in ["aws-batch", "k8s", "slurm"] {
        let printed = ok(
            mill(&[
                "submit",
                f,
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
}

#[test]
fn a_crawl_sized_pipeline_fits_every_engine_and_passes_their_schemas() {
    // 5,000 text tasks, a 2-node × 8-GPU train step: the README's fleet example.
    let dir = tempfile::tempdir().expect("tmp");
    let f = engines_pipeline(dir.path(), 5000, 2, 8);
    let out = dir.path().join("jobs");
    dry_runs(&f, &out);
    // Nothing was submitted or written in the run: a dry run stores no pipeline copy.
    assert!(!dir.path().join("run").exists());
    let checked = check_schemas(&out);
    let report = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "schemas: {report}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // Batch: 8 SubmitJob requests and the train step's job definition; Kubernetes: 8
    // steps and the driver.
    assert_eq!(
        report.lines().filter(|l| l.starts_with("ok")).count(),
        18,
        "{report}"
    );
    eprintln!("{report}");
    let read = |name: &str| std::fs::read_to_string(out.join(name)).expect("job file");
    let json =
        |name: &str| -> serde_json::Value { serde_json::from_str(&read(name)).expect("json") };
    // Slurm: 5,000 tasks as 5 arrays of at most 1,001 (MaxArraySize), each with its
    // offset and the throttle.
    for k in 0..5 {
        let sbatch = read(&format!("00-text.{k}.sbatch"));
        let last = if k == 4 { 4999 - 4004 } else { 1000 };
        assert!(
            sbatch.contains(&format!("#SBATCH --array=0-{last}%500\n")),
            "{sbatch}"
        );
        assert!(
            sbatch.contains(&format!("export TOKENMILL_TASK_OFFSET={}\n", k * 1001)),
            "{sbatch}"
        );
    }
    assert!(!out.join("00-text.5.sbatch").exists());
    let sbatch = read("03-clusters.sbatch");
    for want in [
        "#SBATCH --array=0-2",
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
    let train = read("07-model.sbatch");
    for want in [
        "#SBATCH --nodes=2\n",
        "#SBATCH --ntasks-per-node=8\n",
        "#SBATCH --gpus-per-node=8\n",
        "#SBATCH --cpus-per-task=12\n",
        "srun --kill-on-bad-exit=1 --ntasks=16 --ntasks-per-node=8 /usr/local/bin/mill step",
        "MASTER_PORT",
    ] {
        assert!(train.contains(want), "{want:?} missing:\n{train}");
    }
    assert!(!train.contains("--array"), "{train}");
    // AWS Batch: 5,000 tasks fit one array; the train step is a multi-node job of
    // 2 nodes with 8 GPUs each in the trainer image, on the GPU queue.
    let text = json("00-text.json");
    assert_eq!(text["arrayProperties"]["size"], 5000);
    assert!(text.get("dependsOn").is_none());
    let clusters = json("03-clusters.json");
    assert_eq!(
        clusters["arrayProperties"]["size"], 3,
        "the pipeline's tasks"
    );
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
    let def = json("07-model.jobdef.json");
    assert_eq!(def["type"], "multinode");
    assert_eq!(def["nodeProperties"]["numNodes"], 2);
    let node = &def["nodeProperties"]["nodeRangeProperties"][0]["container"];
    assert_eq!(node["image"], "registry.example/tokenmill-trainer:1");
    assert!(
        node["resourceRequirements"]
            .as_array()
            .expect("resources")
            .contains(&serde_json::json!({"type": "GPU", "value": "8"}))
    );
    assert!(
        node["environment"]
            .as_array()
            .expect("env")
            .contains(&serde_json::json!({"name": "TOKENMILL_GPUS_PER_NODE", "value": "8"}))
    );
    let model = json("07-model.json");
    assert_eq!(model["jobDefinition"], def["jobDefinitionName"]);
    assert_eq!(model["jobQueue"], "p5");
    assert!(model.get("arrayProperties").is_none());
    // Kubernetes: suspended Indexed Jobs, no waiting init containers, a driver that
    // resumes them in order; the train step one pod per node behind a headless Service.
    let items = |name: &str| json(name)["items"].as_array().expect("items").clone();
    let text = &items("00-text.k8s.json")[0];
    assert_eq!(text["spec"]["completionMode"], "Indexed");
    assert_eq!(text["spec"]["completions"], 5000);
    assert_eq!(text["spec"]["parallelism"], 200);
    assert_eq!(text["spec"]["suspend"], true);
    assert!(!read("04-deduped.k8s.json").contains("initContainers"));
    assert!(read("04-deduped.k8s.json").contains("\"serviceAccountName\": \"mill\""));
    let train = items("07-model.k8s.json");
    let (service, job) = (&train[0], &train[1]);
    assert_eq!(service["kind"], "Service");
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(job["spec"]["completions"], 2);
    assert_eq!(job["spec"]["parallelism"], 2);
    assert_eq!(
        job["spec"]["template"]["spec"]["subdomain"],
        service["metadata"]["name"]
    );
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "8");
    assert_eq!(c["image"], "registry.example/tokenmill-trainer:1");
    let master = format!(
        "{}-0.{}",
        job["metadata"]["name"].as_str().expect("name"),
        service["metadata"]["name"].as_str().expect("name")
    );
    assert!(
        c["env"]
            .as_array()
            .expect("env")
            .contains(&serde_json::json!({"name": "MASTER_ADDR", "value": master}))
    );
    let driver = items("08-driver.k8s.json");
    let kinds: Vec<&str> = driver.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds, ["ServiceAccount", "Role", "RoleBinding", "Job"]);
    let command: Vec<&str> = driver[3]["spec"]["template"]["spec"]["containers"][0]["command"]
        .as_array()
        .expect("command")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(&command[..2], ["/usr/local/bin/mill", "drive"]);
    assert!(command.contains(&"text=run-text"), "{command:?}");
    assert!(command.contains(&"model=run-model"), "{command:?}");
    // The checks can fail: a wrong enum, an unknown field, an array past Batch's cap.
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).expect("dir");
    std::fs::write(
        bad.join("x.json"),
        read("00-text.json").replace("\"VCPU\"", "\"VCPUS\""),
    )
    .expect("bad json");
    std::fs::write(
        bad.join("y.json"),
        read("00-text.json").replace("\"size\": 5000", "\"size\": 20000"),
    )
    .expect("bad json");
    std::fs::write(
        bad.join("x.k8s.json"),
        read("00-text.k8s.json").replace(
            "\"completionMode\": \"Indexed\",",
            "\"completionMode\": \"Indexed\", \"retries\": 3,",
        ),
    )
    .expect("bad k8s");
    let checked = check_schemas(&bad);
    let report = String::from_utf8_lossy(&checked.stdout);
    assert!(!checked.status.success(), "{report}");
    assert!(
        report.contains("VCPUS") && report.contains("retries") && report.contains("20000"),
        "{report}"
    );
}

#[test]
fn steps_past_each_engines_cap_become_several_arrays() {
    let dir = tempfile::tempdir().expect("tmp");
    // 250,000 tasks: 3 Indexed Jobs on Kubernetes (100,000 a Job), and more arrays
    // than AWS Batch lets the next step depend on (20 of 10,000).
    let f = engines_pipeline(dir.path(), 250_000, 1, 1);
    let out = dir.path().join("k8s");
    ok(
        mill(&[
            "submit",
            &f,
            "--engine",
            "k8s",
            "--dry-run",
            "--out",
            &out.to_string_lossy(),
        ])
        .output()
        .expect("dry run"),
        "k8s dry run",
    );
    let list: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("00-text.k8s.json")).expect("k8s"))
            .expect("json");
    let jobs = list["items"].as_array().expect("items");
    let sizes: Vec<u64> = jobs
        .iter()
        .filter_map(|j| j["spec"]["completions"].as_u64())
        .collect();
    assert_eq!(sizes, [100_000, 100_000, 50_000]);
    let offsets: Vec<String> = jobs
        .iter()
        .map(|j| {
            j["spec"]["template"]["spec"]["containers"][0]["env"]
                .as_array()
                .expect("env")
                .iter()
                .find(|e| e["name"] == "TOKENMILL_TASK_OFFSET")
                .and_then(|e| e["value"].as_str())
                .expect("offset")
                .to_string()
        })
        .collect();
    assert_eq!(offsets, ["0", "100000", "200000"]);
    let batch = mill(&["submit", &f, "--engine", "aws-batch", "--dry-run"])
        .output()
        .expect("dry run");
    assert!(!batch.status.success());
    let err = String::from_utf8_lossy(&batch.stderr);
    assert!(
        err.contains("25 array jobs") && err.contains("200000"),
        "{err}"
    );
    // 25,000 tasks: 3 Batch arrays, each told its offset; the next step depends on all.
    let f = engines_pipeline(dir.path(), 25_000, 1, 1);
    let out = dir.path().join("batch");
    ok(
        mill(&[
            "submit",
            &f,
            "--engine",
            "aws-batch",
            "--dry-run",
            "--out",
            &out.to_string_lossy(),
        ])
        .output()
        .expect("dry run"),
        "batch dry run",
    );
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(name)).expect("file")).expect("json")
    };
    for (k, (size, offset)) in [(10_000, "0"), (10_000, "10000"), (5_000, "20000")]
        .into_iter()
        .enumerate()
    {
        let r = read(&format!("00-text.{k}.json"));
        assert_eq!(r["arrayProperties"]["size"], size);
        assert!(
            r["containerOverrides"]["environment"]
                .as_array()
                .expect("env")
                .contains(&serde_json::json!({"name": "TOKENMILL_TASK_OFFSET", "value": offset}))
        );
    }
    assert_eq!(
        read("01-signatures.json")["dependsOn"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    let checked = check_schemas(&out);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
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
