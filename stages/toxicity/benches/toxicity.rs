//! Kernel speed on one thread: the word-list matcher, the classifier (document and
//! fraction modes) and the `words` input form on the fixture documents, with a model
//! trained on the labelled fixtures. `cargo bench -p toxicity`. Whole-stage documents/s,
//! alone and fused after extract → langid → quality: scripts/bench-filters.sh.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pipeline::{Document, Location, Storage};

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fx = |rel: &str| root.join("fixtures/toxicity").join(rel);
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Storage::new();
    toxicity::train::train(
        &storage,
        &Location::Local(fx("labelled")),
        &Location::Local(dir.path().to_path_buf()),
        &toxicity::TrainConfig::default(),
    )
    .expect("train");
    let docs: Vec<Document> = std::fs::read_to_string(fx("labelled/train.jsonl"))
        .expect("fixture")
        .lines()
        .chain(
            std::fs::read_to_string(root.join("fixtures/docs/web-multilingual.jsonl"))
                .expect("fixture")
                .lines(),
        )
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            Document::new(
                v["id"].as_str().unwrap_or_default(),
                v["text"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let model = dir.path().join("model.bin").display().to_string();
    let mut group = c.benchmark_group("toxicity");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(docs.len() as u64));
    for (name, config) in [
        (
            "words",
            format!(
                "[words]\nlists = {{ default = {:?} }}\n",
                fx("words/en.txt").display().to_string()
            ),
        ),
        (
            "classifier_document",
            format!("[classifier]\nmodel = {model:?}\n"),
        ),
        (
            "classifier_fraction",
            format!("[classifier]\nmodel = {model:?}\nmode = \"fraction\"\n"),
        ),
    ] {
        let config: toxicity::Config = toml::from_str(&config).expect("config");
        let step = toxicity::step(&storage, &config).expect("step");
        let mut work = docs.clone();
        group.bench_function(name, |b| {
            b.iter(|| {
                for d in work.iter_mut() {
                    for s in &step.stages {
                        black_box(s.process(d));
                    }
                }
            })
        });
    }
    group.bench_function("normalize_words", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(toxicity::normalize::Normalize::Words.line(&d.text));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
