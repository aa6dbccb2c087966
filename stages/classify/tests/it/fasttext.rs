//! fastText classifiers: `mill-classify train` (DCLM's settings) is reproducible and
//! tells the fixture positives from the negatives; its scores equal fastText's own
//! `predict(k=-1)` within 1e-6 on every label.

use std::path::PathBuf;
use std::sync::OnceLock;

use classify::{ClassifierConfig, Classify, Config, Kind};
use pipeline::testing::{python_reference_with, shared_dir};
use pipeline::{Location, RunOptions, Storage};

use crate::common::{root, texts};

fn set(name: &str) -> Location {
    Location::Local(
        root()
            .join("fixtures/classify")
            .join(format!("{name}.jsonl")),
    )
}

/// DCLM's settings with a smaller hash table than its 2,000,000 buckets (an 800 MB
/// model): 50,000 buckets of word bigrams are plenty for the fixtures.
fn settings() -> classify::train::TrainConfig {
    classify::train::TrainConfig {
        bucket: 50_000,
        ..classify::train::TrainConfig::default()
    }
}

/// Trains into `dir` with [`settings`].
fn train_into(dir: &std::path::Path) -> classify::train::TrainReport {
    let opts = RunOptions::new(set("positives"), Location::Local(dir.to_path_buf()));
    classify::train::train_step(
        &Storage::new(),
        &opts,
        &set("positives"),
        &set("negatives"),
        &settings(),
    )
    .expect("train")
    .1
    .expect("it trained")
}

/// The model trained once per build of this test binary.
pub fn model() -> &'static PathBuf {
    static M: OnceLock<PathBuf> = OnceLock::new();
    M.get_or_init(|| {
        shared_dir(env!("CARGO_TARGET_TMPDIR"), "classify-fasttext", |dir| {
            train_into(dir);
        })
        .join("model.bin")
    })
}

/// A configuration of one fastText classifier on the trained model.
pub fn config(name: &str) -> ClassifierConfig {
    config_at(name, &model().to_string_lossy())
}

/// The same with the model at `url`.
pub fn config_at(name: &str, url: &str) -> ClassifierConfig {
    ClassifierConfig {
        label: Some("hq".into()),
        all_labels: true,
        ..ClassifierConfig::new(name, Kind::Fasttext, url)
    }
}

#[test]
fn training_is_reproducible_and_separates_the_sets() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let r = train_into(a.path());
    train_into(b.path());
    let bytes = |d: &std::path::Path| std::fs::read(d.join("model.bin")).expect("model");
    assert_eq!(bytes(a.path()), bytes(b.path()), "the same model bytes");
    assert_eq!(
        r.labels,
        vec![
            ("cc".to_string(), r.labels[0].1),
            ("hq".to_string(), r.labels[1].1)
        ]
    );
    assert!(r.validation_documents > 10, "{r:?}");
    assert!(r.at_threshold.f1 > 0.9, "{r:?}");
    // A rerun is skipped by its marker.
    let opts = RunOptions::new(set("positives"), Location::Local(a.path().to_path_buf()));
    let (run, trained) = classify::train::train_step(
        &Storage::new(),
        &opts,
        &set("positives"),
        &set("negatives"),
        &settings(),
    )
    .expect("rerun");
    assert!(trained.is_none() && run.skipped == vec!["train".to_string()]);
}

#[test]
fn scores_equal_fasttexts_predict() {
    let classify = Classify::new(
        &Storage::new(),
        &Config {
            classifiers: vec![config("q")],
            ..Config::default()
        },
    )
    .expect("load");
    let c = &classify.classifiers()[0];
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut input = Vec::new();
    for t in texts {
        input.extend(serde_json::json!({ "text": t }).to_string().bytes());
        input.push(b'\n');
    }
    let script = root().join("scripts/classify_fasttext_reference.py");
    let Some(out) = python_reference_with(&script, &[&model().to_string_lossy()], input) else {
        return;
    };
    let ours = c.score_texts(&refs);
    let theirs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(ours.len(), theirs.len());
    assert!(ours.len() >= 200);
    let mut worst = 0f64;
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        for (label, p) in c.labels().iter().zip(&o.all) {
            let r = t[label]
                .as_f64()
                .unwrap_or_else(|| panic!("text {i}: no {label}"));
            let d = (f64::from(*p) - r).abs();
            worst = worst.max(d);
            assert!(d <= 1e-6, "text {i}: {label} {p} vs fastText's {r}");
        }
        assert_eq!(f64::from(o.score), f64::from(o.all[1]), "the score is hq's");
    }
    eprintln!("{} texts, max |difference| {worst:e}", ours.len());
}

/// The projected predictor (one pass, logit differences) against fastText's exact
/// algorithm on the same model: lines and whole texts, every label, within 1e-6, with
/// the edge cases of fastText's reader (newlines, `</s>`, labels, NUL, nothing).
#[test]
fn the_projected_predictor_keeps_fasttexts_scores() {
    let bytes = std::fs::read(model()).expect("model");
    let exact = pipeline::fasttext_model::Predictor::from_bytes(&bytes).expect("exact");
    let mut fast = pipeline::fasttext_model::Predictor::from_bytes(&bytes).expect("fast");
    assert!(fast.project(), "a two-label softmax model is projected");
    let mut lines: Vec<String> = texts().iter().take(120).cloned().collect();
    lines.extend(
        [
            "",
            " ",
            "\n",
            "a\nb c",
            "first line\nsecond line",
            "x </s> y z",
            "</s>",
            "__label__hq many words __label__cc here",
            "nul\0inside",
            "step by step, the key idea",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let mut compared = 0;
    for line in &lines {
        for whole in [false, true] {
            for k in [1, -1] {
                let (a, b) = if whole {
                    (
                        exact.predict_text(line, k, 0.0),
                        fast.predict_text(line, k, 0.0),
                    )
                } else {
                    (
                        exact.predict_line(line, k, 0.0),
                        fast.predict_line(line, k, 0.0),
                    )
                };
                assert_eq!(
                    a.iter().map(|p| p.0).collect::<Vec<_>>(),
                    b.iter().map(|p| p.0).collect::<Vec<_>>(),
                    "{line:?} whole {whole} k {k}: labels"
                );
                for (x, y) in a.iter().zip(&b) {
                    assert!(
                        (x.1 - y.1).abs() <= 1e-6,
                        "{line:?} whole {whole}: {x:?} vs {y:?}"
                    );
                }
                compared += 1;
            }
        }
    }
    assert!(compared > 500, "{compared}");
}
