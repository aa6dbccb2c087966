//! Two copies of one task at once (an engine retrying a task that is still running),
//! and two task counts writing one output: the outputs and markers equal one run's.

use std::collections::BTreeMap;
use std::path::Path;

use pipeline::{Location, Storage};

/// A pipeline of one import step over `inputs` JSONL files, at `root` (disk or S3).
fn setup(storage: &Storage, root: &Location, inputs: usize) -> (jobs::Pipeline, jobs::Pipeline) {
    let input = root.join("in/");
    for i in 0..inputs {
        let docs: String = (0..40)
            .map(|k| format!("{{\"id\":\"{i}-{k}\",\"text\":\"line {k} of input {i}, with some words to store\"}}\n"))
            .collect();
        storage
            .put(&input.join(&format!("part-{i:04}.jsonl")), docs.as_bytes())
            .expect("input");
    }
    let pipeline = |out: &str| {
        jobs::Pipeline::parse(&format!(
            "input = \"{input}\"\noutput = \"{}\"\ntasks = 1\nthreads = 1\n[[step]]\nname = \"docs\"\nstages = [\"import\"]\n",
            root.join(out)
        ))
        .expect("pipeline")
    };
    (pipeline("one"), pipeline("twice"))
}

/// Objects below `prefix`: relative name → bytes; markers reduced to what they say about
/// the input and the outputs (their timings differ from run to run).
fn contents(storage: &Storage, prefix: &Location) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for m in storage.list(prefix).expect("list") {
        if m.relative.starts_with("_started/") || m.relative.starts_with("_tasks/") {
            continue;
        }
        let bytes = storage.read(&m.location).expect("read");
        let bytes = if m.relative.starts_with("_done/") {
            let v: serde_json::Value = serde_json::from_slice(&bytes).expect("marker");
            serde_json::to_vec(&(
                &v["input"],
                &v["input_size"],
                &v["config_hash"],
                &v["outputs"],
                &v["stats"]["docs_out"],
                &v["stats"]["bytes_out"],
            ))
            .expect("json")
        } else {
            bytes
        };
        out.insert(m.relative, bytes);
    }
    out
}

/// One run of the step into `one`, then `concurrent` (several tasks at once) into
/// `twice`: the same shards, and markers that say the same.
fn compare(
    storage: &Storage,
    root: &Location,
    concurrent: impl Fn(&jobs::Pipeline, &jobs::Flags) + Sync,
) {
    const INPUTS: usize = 60;
    let (one, twice) = setup(storage, root, INPUTS);
    let flags = jobs::Flags {
        threads: 1,
        force: false,
        progress: false,
    };
    jobs::run_task(storage, &one, 0, 0, 1, &flags).expect("one run");
    concurrent(&twice, &flags);
    let expected = contents(storage, &one.step_output("docs").expect("out"));
    assert_eq!(
        expected.keys().filter(|k| k.ends_with(".parquet")).count(),
        INPUTS
    );
    let got = contents(storage, &twice.step_output("docs").expect("out"));
    let differ: Vec<&String> = expected
        .keys()
        .chain(got.keys())
        .filter(|k| got.get(*k) != expected.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "concurrent tasks differ from one run: {differ:?}"
    );
}

fn check(storage: &Storage, root: &Location) {
    // The same task twice at once (an engine retrying a task still running).
    compare(storage, &root.join("same/"), |p, flags| {
        std::thread::scope(|s| {
            let a = s.spawn(|| jobs::run_task(storage, p, 0, 0, 1, flags));
            let b = s.spawn(|| jobs::run_task(storage, p, 0, 0, 1, flags));
            for h in [a, b] {
                h.join().expect("thread").expect("copy");
            }
        });
    });
    // A user who changed --tasks while a run was going: 1 task and 3 tasks at once.
    compare(storage, &root.join("counts/"), |p, flags| {
        std::thread::scope(|s| {
            let whole = s.spawn(|| jobs::run_task(storage, p, 0, 0, 1, flags));
            let parts: Vec<_> = (0..3)
                .map(|t| s.spawn(move || jobs::run_task(storage, p, 0, t, 3, flags)))
                .collect();
            whole.join().expect("thread").expect("1 task");
            for h in parts {
                h.join().expect("thread").expect("3 tasks");
            }
        });
    });
}

#[test]
fn two_copies_of_a_task_at_once_on_disk() {
    let dir = tempfile::tempdir().expect("tmp");
    check(
        &Storage::new(),
        &Location::Local(Path::new(dir.path()).to_path_buf()),
    );
}

#[test]
fn two_copies_of_a_task_at_once_on_s3() {
    let Some((storage, _, bucket)) = pipeline::testing::s3_bucket("copies") else {
        return;
    };
    check(
        &storage,
        &Location::parse(&format!("s3://{bucket}/")).expect("address"),
    );
}
