//! A fleet in simulation: 10,000 tasks of one step, run in any order, a random 5% of
//! them killed mid-input (as `kill -9`) and retried.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::{mill, ok};

/// Files below `dir` (relative name → bytes), skipping start notes and task notes,
/// whose content records times and hosts.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir") {
            let p = e.expect("entry").path();
            let rel = p
                .strip_prefix(dir)
                .expect("below")
                .to_string_lossy()
                .into_owned();
            if rel.starts_with("_started") || rel.starts_with("_tasks") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

fn pipeline_file(dir: &Path, input: &Path, output: &Path, tasks: usize) -> String {
    let f = dir.join(format!("fleet-{tasks}.toml"));
    std::fs::write(
        &f,
        format!(
            "input = \"{}\"\noutput = \"{}\"\ntasks = {tasks}\nthreads = 1\n\
             [[step]]\nname = \"docs\"\nstages = [\"import\"]\n",
            input.display(),
            output.display()
        ),
    )
    .expect("pipeline");
    f.to_string_lossy().into_owned()
}

#[test]
fn ten_thousand_tasks_with_five_percent_killed_do_each_input_once() {
    const TASKS: usize = 10_000;
    const INPUTS: usize = 2_000;
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).expect("dir");
    for i in 0..INPUTS {
        let docs: String = (0..3)
            .map(|k| {
                format!(
                    "{{\"id\":\"{i}-{k}\",\"text\":\"document {k} of input {i}: some words\"}}\n"
                )
            })
            .collect();
        std::fs::write(input.join(format!("part-{i:05}.jsonl")), docs).expect("input");
    }
    // The reference: one task over everything.
    let one = dir.path().join("one");
    let f1 = pipeline_file(dir.path(), &input, &one, 1);
    ok(mill(&["run", &f1]).output().expect("run"), "one task");
    let expected = files(&one.join("docs"));
    assert_eq!(
        expected.keys().filter(|k| k.ends_with(".parquet")).count(),
        INPUTS
    );

    let fleet = dir.path().join("fleet");
    let f = pipeline_file(dir.path(), &input, &fleet, TASKS);
    let p = jobs::Pipeline::load(&pipeline::Storage::new(), &f).expect("pipeline");
    let storage = pipeline::Storage::new();
    let flags = jobs::Flags {
        threads: 1,
        force: false,
        progress: false,
    };
    let seed = std::env::var("TOKENMILL_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("task order and kills from TOKENMILL_TEST_SEED={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut order: Vec<usize> = (0..TASKS).collect();
    rng.shuffle(&mut order);
    // 5% of the tasks that have an input die mid-input, as kill -9 would (a `mill step`
    // process aborted after its first written batch), the others run in process.
    let with_input: Vec<usize> = (0..TASKS).filter(|t| *t < INPUTS).collect();
    let mut killed: Vec<usize> = with_input.clone();
    rng.shuffle(&mut killed);
    killed.truncate(TASKS * 5 / 100);
    killed.sort_unstable();
    let started = Instant::now();
    // Two workers take tasks off the shuffled queue, as an engine runs them side by side.
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&task) = order.get(k) else { return };
                    if killed.binary_search(&task).is_ok() {
                        let out = mill(&[
                            "step",
                            &f,
                            "docs",
                            "--task",
                            &task.to_string(),
                            "--tasks",
                            &TASKS.to_string(),
                        ])
                        .env(pipeline::runner::CRASH_AFTER_BATCHES, "1")
                        .output()
                        .expect("mill step");
                        assert!(!out.status.success(), "task {task} should have been killed");
                    } else {
                        jobs::run_task(&storage, &p, 0, task, TASKS, &flags).expect("task");
                    }
                }
            });
        }
    });
    // Each killed task died on its one input before the marker.
    let marked = std::fs::read_dir(fleet.join("docs/_done"))
        .expect("markers")
        .count();
    assert_eq!(
        marked,
        INPUTS - killed.len(),
        "markers after the first pass"
    );
    // The engine retries the killed tasks.
    for &task in &killed {
        let r = jobs::run_task(&storage, &p, 0, task, TASKS, &flags).expect("retry");
        assert_eq!(r.processed.len(), 1, "task {task} redoes its one input");
    }
    let took = started.elapsed();
    // Each input once: one marker and one shard each, bytes as one task's run.
    // (Markers hold timings: they are counted, the shards compared byte for byte.)
    let got = files(&fleet.join("docs"));
    assert_eq!(
        got.keys().filter(|k| k.starts_with("_done/")).count(),
        INPUTS
    );
    let shards = |m: &BTreeMap<String, Vec<u8>>| -> BTreeMap<String, Vec<u8>> {
        m.iter()
            .filter(|(k, _)| !k.starts_with("_done/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let (got, expected) = (shards(&got), shards(&expected));
    let differ: Vec<&String> = expected
        .keys()
        .chain(got.keys())
        .filter(|k| got.get(*k) != expected.get(*k))
        .take(10)
        .collect();
    assert!(
        differ.is_empty(),
        "the fleet's output differs from one task's: {differ:?}"
    );
    assert_eq!(got.len(), INPUTS, "one shard per input and nothing else");
    // A second pass of every task is a no-op.
    let again = jobs::run_task(&storage, &p, 0, order[0], TASKS, &flags).expect("rerun");
    assert!(again.processed.is_empty());
    eprintln!(
        "{TASKS} tasks over {INPUTS} inputs, {} killed and retried: {:.1} s",
        killed.len(),
        took.as_secs_f64()
    );
}
