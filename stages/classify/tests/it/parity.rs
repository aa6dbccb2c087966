//! Transformer scores equal Hugging Face transformers' (AutoModelForSequenceClassification
//! on the same weights, f32 on CPU) within 1e-4.

use classify::transformer::{Model, cpu_backend};
use pipeline::Storage;

use crate::common::{models, root, run_python, texts, texts_file, torch_python};

/// The reference's logits for every text, in order.
fn reference(model: &std::path::Path) -> Vec<Vec<f32>> {
    let out = tempfile::NamedTempFile::new().expect("temp file");
    run_python(
        &torch_python(),
        &[
            &root()
                .join("scripts/classify_reference.py")
                .to_string_lossy(),
            "score",
            &model.to_string_lossy(),
            &texts_file().to_string_lossy(),
            &out.path().to_string_lossy(),
            "--batch",
            "8",
        ],
    );
    std::fs::read_to_string(out.path())
        .expect("reference output")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            v["logits"]
                .as_array()
                .expect("logits")
                .iter()
                .map(|x| x.as_f64().expect("number") as f32)
                .collect()
        })
        .collect()
}

fn check(name: &str) {
    let dir = models().join(name);
    let model = Model::load(
        &Storage::new(),
        &dir.to_string_lossy(),
        None,
        &cpu_backend(),
    )
    .expect("load");
    assert_eq!(model.max_tokens(), 512);
    let texts: Vec<&str> = texts().iter().map(String::as_str).collect();
    let cut = texts
        .iter()
        .filter(|t| model.tokenize(t).len() == model.max_tokens())
        .count();
    assert!(cut >= 10, "{name}: only {cut} texts reach 512 tokens");
    let ours = model.logits(&texts);
    let theirs = reference(&dir);
    assert_eq!(ours.len(), theirs.len());
    let mut worst = 0f32;
    let mut failed = Vec::new();
    let mut empty = 0;
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a.len(), b.len(), "{name}: text {i}: outputs");
        // A text the tokenizer makes no token of (empty, or blank for these
        // tokenizers) is a row of padding alone in transformers' batch: its value
        // depends on the batch around it. tokenmill scores it as one padding token.
        if model.tokenize(texts[i]).is_empty() {
            empty += 1;
            continue;
        }
        for (x, y) in a.iter().zip(b) {
            let d = (x - y).abs();
            worst = worst.max(d);
            if d > 1e-4 {
                failed.push(format!(
                    "text {i} ({} tokens): {x} vs {y}",
                    model.tokenize(texts[i]).len()
                ));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{name}: {} differ from transformers:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(empty <= 10, "{name}: {empty} texts without a token");
    eprintln!(
        "{name}: {} texts ({cut} cut at 512 tokens), max |difference| {worst:e}",
        texts.len()
    );
}

#[test]
fn bert_regression_equals_transformers() {
    check("bert-regression");
}

#[test]
fn bert_two_labels_equal_transformers() {
    check("bert-labels");
}

#[test]
fn xlmr_regression_equals_transformers() {
    check("xlmr-regression");
}

#[test]
fn xlmr_two_labels_equal_transformers() {
    check("xlmr-labels");
}

#[test]
fn thread_count_does_not_change_a_score() {
    let dir = models().join("bert-labels");
    let model = Model::load(
        &Storage::new(),
        &dir.to_string_lossy(),
        None,
        &cpu_backend(),
    )
    .expect("load");
    let texts: Vec<&str> = texts().iter().map(String::as_str).collect();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool")
        .install(|| model.logits(&texts));
    let three = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .expect("pool")
        .install(|| model.logits(&texts));
    assert_eq!(one, three);
}
