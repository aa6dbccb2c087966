//! langid speed: documents/s on one core for the stage, next to the raw prediction rate
//! of the same fastText model on the same texts (target: stage ≥ 0.9× raw).
//!
//! Needs lid.176.ftz (scripts/fetch-models.sh). `cargo bench -p langid`.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use langid::{Config, LangId};
use pipeline::{Document, Stage, Storage};

/// Documents of 3 to 12 sentences of one language each, from the fixture sentences.
fn documents() -> Vec<Document> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text =
        std::fs::read_to_string(root.join("fixtures/langid/sentences.txt")).expect("sentences");
    let sentences: Vec<&str> = text.lines().collect();
    let mut rng = fastrand::Rng::with_seed(11);
    (0..3000)
        .map(|i| {
            let pair = rng.usize(..sentences.len() / 2) * 2;
            let n = rng.usize(3..13);
            let body: Vec<&str> = (0..n).map(|_| sentences[pair + rng.usize(..2)]).collect();
            Document::new(i.to_string(), body.join("\n"))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let model = langid::default_model_path();
    if !model.is_file() {
        eprintln!(
            "{} missing (run {}): langid bench skipped",
            model.display(),
            langid::SETUP_COMMAND
        );
        return;
    }
    let model = model.display().to_string();
    let docs = documents();
    let mut raw = fasttext::FastText::new();
    raw.load_model(&model).expect("load model");
    let prepared: Vec<String> = docs
        .iter()
        .map(|d| format!("{}\n", d.text.replace('\n', " ")))
        .collect();
    let stage = LangId::new(
        &Storage::new(),
        &Config {
            model: model.clone(),
            languages: vec!["en".into(), "de".into()],
            ..Config::default()
        },
    )
    .expect("stage");

    let mut group = c.benchmark_group("langid");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(docs.len() as u64));
    group.bench_function("raw_fasttext_predict_k1", |b| {
        b.iter(|| {
            for text in &prepared {
                black_box(raw.predict(text, 1, 0.0).expect("predict"));
            }
        })
    });
    let mut work = docs.clone();
    group.bench_function("stage_process", |b| {
        b.iter(|| {
            for doc in work.iter_mut() {
                black_box(stage.process(doc));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
