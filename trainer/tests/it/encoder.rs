//! The classify stage's transformers on libtorch (f32 on the CPU here; bf16 on GPUs)
//! give the CPU encoder's scores, which equal transformers' (the classify stage's
//! tests): two random-weight models transformers makes, on the fixture sentences and
//! on texts past 512 tokens, padded in batches.

use std::path::{Path, PathBuf};
use std::process::Command;

use classify::transformer::{Model, cpu_backend};
use pipeline::Storage;
use pipeline::testing::shared_dir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn texts() -> Vec<String> {
    let mut out: Vec<String> =
        std::fs::read_to_string(root().join("fixtures/langid/sentences.txt"))
            .expect("sentences")
            .lines()
            .map(str::to_string)
            .collect();
    let all = out.join(" ");
    for k in 0..6 {
        out.push(format!("{} {}", all.repeat(k + 2), out[k]));
    }
    out.push(String::new());
    out
}

fn models() -> PathBuf {
    shared_dir(env!("CARGO_TARGET_TMPDIR"), "encoder-models", |dir| {
        let corpus = dir.join("corpus.jsonl");
        let lines: Vec<String> = texts()
            .iter()
            .map(|t| serde_json::json!({ "text": t }).to_string())
            .collect();
        std::fs::write(&corpus, lines.join("\n")).expect("corpus");
        let python = std::env::var("VIRTUAL_ENV")
            .map(|v| PathBuf::from(v).join("bin/python"))
            .unwrap_or_else(|_| PathBuf::from("python"));
        let out = Command::new(python)
            .arg(root().join("scripts/classify_reference.py"))
            .arg("models")
            .arg(dir)
            .arg(&corpus)
            .output()
            .expect("python");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    })
}

fn check(name: &str) {
    let dir = models().join(name);
    let url = dir.to_string_lossy();
    let storage = Storage::new();
    let cpu = Model::load(&storage, &url, None, &cpu_backend()).expect("cpu model");
    let torch = Model::load(
        &storage,
        &url,
        None,
        &trainer::encoder::factory(vec![tch::Device::Cpu]),
    )
    .expect("libtorch model");
    let texts = texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert!(texts.iter().any(|t| cpu.tokenize(t).len() == 512));
    let a = cpu.logits(&texts);
    let b = torch.logits(&texts);
    let mut worst = 0f32;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        for (p, q) in x.iter().zip(y) {
            worst = worst.max((p - q).abs());
            assert!(
                (p - q).abs() <= 1e-4,
                "{name}: text {i}: {p} vs libtorch's {q}"
            );
        }
    }
    eprintln!(
        "{name}: max |difference| {worst:e} over {} texts",
        texts.len()
    );
}

#[test]
fn bert_on_libtorch_equals_the_cpu_encoder() {
    check("bert-labels");
}

#[test]
fn xlmr_on_libtorch_equals_the_cpu_encoder() {
    check("xlmr-regression");
}
