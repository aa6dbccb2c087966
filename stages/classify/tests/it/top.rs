//! keep_top: the threshold of 10^7 scores lies within 0.1% in rank of the exact
//! quantile; scoring, threshold and filter give the same bytes at 1 and 7 tasks; each
//! phase passes the conformance harness (kill and resume, threads, rerun).

use std::path::{Path, PathBuf};
use std::process::Command;

use classify::top::{THRESHOLD_FILE, filter_step, threshold_of, threshold_step};
use classify::{ClassifierConfig, Config, Kind};
use pipeline::sketch::{DEFAULT_K, Sketch};
use pipeline::testing::{Conformance, UnitConformance, check, check_units, config_file, snapshot};
use pipeline::{Location, RunOptions, Storage};

use crate::common::{models, texts};

/// The rank error of threshold `t` against the exact top `share` of sorted `all`: 0
/// when the exact quantile's position holds `t`'s value, else how far (a share of n).
fn rank_error(sorted: &[f32], share: f64, t: f32) -> f64 {
    let n = sorted.len();
    let k = (share * n as f64).ceil() as usize;
    let target = n - k;
    let below = sorted.partition_point(|&x| x < t);
    let at_or_below = sorted.partition_point(|&x| x <= t);
    let d = if target < below {
        below - target
    } else if target >= at_or_below {
        target + 1 - at_or_below
    } else {
        0
    };
    d as f64 / n as f64
}

/// Draws one score.
type Draw = Box<dyn Fn(&mut fastrand::Rng) -> f32>;

#[test]
fn ten_million_scores_give_the_threshold_within_a_thousandth_in_rank() {
    const N: usize = 10_000_000;
    const INPUTS: usize = 2000;
    let mut rng = fastrand::Rng::with_seed(45);
    let kinds: [(&str, Draw); 3] = [
        ("uniform", Box::new(|r: &mut fastrand::Rng| r.f32())),
        // fastText-like probabilities: most near 0 or 1, rounded to 1e-5 (many ties).
        (
            "fasttext",
            Box::new(|r: &mut fastrand::Rng| {
                let x = r.f32();
                let p = match r.u8(0..10) {
                    0..=5 => x.powi(8),
                    6..=8 => 1.0 - x.powi(8),
                    _ => x,
                };
                (p * 1e5).round() / 1e5
            }),
        ),
        // A regression head's outputs: normal around 2, σ 1 (Box-Muller).
        (
            "regression",
            Box::new(|r: &mut fastrand::Rng| {
                let (u, v) = (r.f64().max(1e-12), r.f64());
                (2.0 + (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
            }),
        ),
    ];
    for (name, draw) in &kinds {
        let values: Vec<f32> = (0..N).map(|_| draw(&mut rng)).collect();
        let mut merged = Sketch::new(DEFAULT_K, 1);
        for (i, chunk) in values.chunks(N / INPUTS).enumerate() {
            let mut s = Sketch::new(DEFAULT_K, i as u64);
            for &x in chunk {
                s.add(x);
            }
            // Through bytes, as the threshold unit reads them.
            merged.merge(&Sketch::from_bytes(&s.to_bytes(), "test").expect("bytes"));
        }
        assert_eq!(merged.count(), N as u64);
        let mut sorted = values;
        sorted.sort_unstable_by(f32::total_cmp);
        let bound = merged.rank_error();
        for share in [0.1, 0.01, 0.5, 0.9] {
            let t = threshold_of(&merged, share).expect("a threshold");
            let e = rank_error(&sorted, share, t);
            eprintln!(
                "{name}: keep_top {share}: threshold {t}, rank error {e:.6} (bound {bound:.6})"
            );
            assert!(e <= 0.001, "{name}: keep_top {share}: rank error {e}");
            assert!(
                e <= bound,
                "{name}: keep_top {share}: {e} over the bound {bound}"
            );
        }
        assert!(bound <= 0.001, "{name}: the bound {bound} is over 0.1%");
    }
}

/// The texts as `n` JSONL inputs (round robin, ids unique).
fn inputs(n: usize) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<String> = vec![String::new(); n];
    for (i, t) in texts().iter().enumerate() {
        files[i % n]
            .push_str(&serde_json::json!({ "id": format!("t{i:04}"), "text": t }).to_string());
        files[i % n].push('\n');
    }
    files
        .into_iter()
        .enumerate()
        .map(|(i, f)| (format!("part-{i:02}.jsonl"), f.into_bytes()))
        .collect()
}

/// A fastText classifier keeping the top 30% and a transformer one dropping the
/// highest regression outputs.
fn config() -> Config {
    let mut edu = ClassifierConfig::new(
        "edu",
        Kind::Transformer,
        &models().join("bert-regression").to_string_lossy(),
    );
    edu.max_score = Some(0.5);
    Config {
        classifiers: vec![
            ClassifierConfig {
                keep_top: Some(0.3),
                ..crate::fasttext::config("dclm")
            },
            edu,
        ],
        ..Config::default()
    }
}

fn config_path() -> PathBuf {
    let text = toml::to_string(&config()).expect("config as TOML");
    config_file(env!("CARGO_TARGET_TMPDIR"), "classify-top.toml", &text)
}

fn opts(input: &Path, output: &Path, task: usize, tasks: usize) -> RunOptions {
    let mut o = RunOptions::new(
        Location::Local(input.to_path_buf()),
        Location::Local(output.to_path_buf()),
    );
    o.task = task;
    o.tasks = tasks;
    o
}

/// Scores, thresholds and filters the inputs in `root` with `tasks` tasks.
fn run_all(root: &Path, tasks: usize) {
    let storage = Storage::new();
    let config = config();
    let (input, scored, threshold, top) = (
        root.join("in"),
        root.join("scored"),
        root.join("threshold"),
        root.join("top"),
    );
    let step = classify::step(&storage, &config).expect("scoring step");
    for task in 0..tasks {
        pipeline::run(&step, &storage, &opts(&input, &scored, task, tasks)).expect("score");
    }
    for task in 0..tasks {
        threshold_step(&storage, &opts(&scored, &threshold, task, tasks), &config)
            .expect("threshold");
    }
    let filter = filter_step(&storage, &config, &threshold.to_string_lossy()).expect("filter");
    for task in 0..tasks {
        pipeline::run(&filter, &storage, &opts(&scored, &top, task, tasks)).expect("filter");
    }
}

#[test]
fn the_output_is_the_same_at_one_and_seven_tasks() {
    // One folder for both runs: documents record the address of their input.
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("in")).expect("mkdir");
    for (name, bytes) in inputs(9) {
        std::fs::write(root.path().join("in").join(name), bytes).expect("write");
    }
    let outputs = ["scored", "threshold", "top"];
    run_all(root.path(), 7);
    let seven = snapshot(root.path());
    for o in outputs {
        std::fs::remove_dir_all(root.path().join(o)).expect("clear");
    }
    run_all(root.path(), 1);
    let one = snapshot(root.path());
    assert_eq!(
        one.keys().collect::<Vec<_>>(),
        seven.keys().collect::<Vec<_>>()
    );
    // Markers hold the ETag of their input, which the rewrite of a step's output
    // changes (a local file's ETag is its size and time): compared without it.
    let comparable = |k: &str, v: &[u8]| -> Vec<u8> {
        if !k.contains("_done/") {
            return v.to_vec();
        }
        let mut m: serde_json::Value = serde_json::from_slice(v).expect("marker");
        m["input_etag"] = serde_json::Value::Null;
        serde_json::to_vec(&m).expect("json")
    };
    for (k, v) in &one {
        let other = seven.get(k).map(|x| comparable(k, x));
        assert!(
            other.as_deref() == Some(comparable(k, v).as_slice()),
            "{k} differs between 1 and 7 tasks"
        );
    }
    let one = root;
    let (t, _) = classify::top::read_thresholds(
        &Storage::new(),
        &one.path()
            .join("threshold")
            .join(THRESHOLD_FILE)
            .to_string_lossy(),
    )
    .expect("thresholds");
    let dclm = &t.classifiers[0];
    assert_eq!((dclm.name.as_str(), dclm.keep_top), ("dclm", 0.3));
    assert_eq!(dclm.rank_error, 0.0, "a few hundred scores: exact");
    // The filter kept the top 30% of what the scoring step wrote.
    let kept: u64 =
        pipeline::marker::list_markers(&Storage::new(), &Location::Local(one.path().join("top")))
            .expect("markers")
            .iter()
            .map(|(_, m)| m.stats.docs_out)
            .sum();
    let share = kept as f64 / dclm.documents as f64;
    assert!(
        (0.3..0.35).contains(&share),
        "kept {kept} of {}",
        dclm.documents
    );
}

fn binary(extra: Vec<String>) -> impl Fn(Vec<String>) -> Command {
    move |args: Vec<String>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-classify"));
        cmd.args(&extra)
            .args(args)
            .arg("--config")
            .arg(config_path());
        cmd
    }
}

#[test]
fn scoring_conformance() {
    let mut broken = b"{\"id\": \"a\", \"text\": \"fine\"}\n".to_vec();
    broken.extend_from_slice(b"{\"id\": \"b\", \"text\": \"\xff\xfe not UTF-8\"}\n{not json\n");
    let command = binary(Vec::new());
    check(&Conformance {
        step: &|| classify::step(&Storage::new(), &config()).expect("step"),
        inputs: inputs(3),
        broken: vec![("broken.jsonl".into(), broken, "malformed_json")],
        command: Some(&command),
    });
}

/// A scored folder (the scoring step's output over three inputs), made once.
fn scored() -> PathBuf {
    pipeline::testing::shared_dir(env!("CARGO_TARGET_TMPDIR"), "classify-scored", |dir| {
        let input = dir.join("in");
        std::fs::create_dir_all(&input).expect("mkdir");
        for (name, bytes) in inputs(3) {
            std::fs::write(input.join(name), bytes).expect("write");
        }
        let storage = Storage::new();
        let step = classify::step(&storage, &config()).expect("step");
        pipeline::run(&step, &storage, &opts(&input, &dir.join("scored"), 0, 1)).expect("score");
    })
    .join("scored")
}

#[test]
fn threshold_conformance() {
    let storage = Storage::new();
    let command = binary(vec!["threshold".into()]);
    check_units(&UnitConformance {
        run: &|o| threshold_step(&storage, o, &config()),
        input: scored(),
        command: Some(&command),
        run_records: &[],
    });
}

#[test]
fn filter_conformance() {
    let storage = Storage::new();
    let threshold = tempfile::tempdir().expect("tempdir");
    threshold_step(
        &storage,
        &opts(&scored(), threshold.path(), 0, 1),
        &config(),
    )
    .expect("threshold");
    let shards: Vec<(String, Vec<u8>)> = std::fs::read_dir(scored())
        .expect("scored")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "parquet"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("shard"),
            )
        })
        .collect();
    assert_eq!(shards.len(), 3);
    let dir = threshold.path().to_string_lossy().into_owned();
    let command = binary(vec!["filter".into(), "--threshold".into(), dir.clone()]);
    check(&Conformance {
        step: &|| filter_step(&Storage::new(), &config(), &dir).expect("filter step"),
        inputs: shards,
        broken: vec![(
            "broken.parquet".into(),
            b"PAR1 not a parquet file".to_vec(),
            "corrupt_parquet",
        )],
        command: Some(&command),
    });
}
