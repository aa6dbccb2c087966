//! Encoder kernel speed: bytes/s on one thread for our encoder ("native"), the 1.0
//! encoder ("fast") and the 0.22 encoder ("reference") on the same texts with the same
//! tokenizer (the encoder loaded once: warm caches after the first pass).
//!
//! By default a 4,000-entry vocabulary is trained on the fixture documents; set
//! `TOKENMILL_BENCH_TOKENIZER` (a tokenizer.json, e.g. from scripts/bench-tokenize.sh)
//! and `TOKENMILL_BENCH_DOCS` (a JSONL file with a `text` field) for real ones.
//! `cargo bench -p tokenize`. Whole-stage figures next to datatrove and Python
//! tokenizers: scripts/bench-tokenize.sh.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pipeline::{Location, Storage};
use tokenize::{Encoder, EncoderKind, TrainConfig};

fn texts(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut f: Vec<PathBuf> = std::fs::read_dir(path)
            .expect("docs dir")
            .map(|e| e.expect("entry").path())
            .collect();
        f.sort();
        f
    } else {
        vec![path.to_path_buf()]
    };
    for f in files {
        for line in std::fs::read_to_string(&f).expect("read docs").lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json line");
            if let Some(t) = v["text"].as_str().filter(|t| !t.is_empty()) {
                out.push(t.to_string());
            }
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fixtures = root.join("fixtures/tokenize/docs");
    let scratch = tempfile::tempdir().expect("tempdir");
    let tokenizer = match std::env::var("TOKENMILL_BENCH_TOKENIZER") {
        Ok(p) => PathBuf::from(p),
        Err(_) => {
            tokenize::train(
                &Storage::new(),
                &Location::Local(fixtures.clone()),
                &Location::Local(scratch.path().to_path_buf()),
                &TrainConfig {
                    vocab_size: 4000,
                    ..TrainConfig::default()
                },
            )
            .expect("train on fixtures");
            scratch.path().join("tokenizer.json")
        }
    };
    let docs = std::env::var("TOKENMILL_BENCH_DOCS").map_or(fixtures, PathBuf::from);
    let texts = texts(&docs);
    let json = std::fs::read_to_string(&tokenizer).expect("tokenizer.json");
    let bytes: u64 = texts.iter().map(|t| t.len() as u64).sum();

    let mut group = c.benchmark_group("encode");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Bytes(bytes));
    for (name, kind) in [
        ("native", EncoderKind::Native),
        ("fast_1.0rc3", EncoderKind::Fast),
        ("reference_0.22", EncoderKind::Reference),
    ] {
        let encoder = Encoder::load(&json, kind, "bench").expect("load tokenizer");
        let mut ids = Vec::new();
        group.bench_function(name, |b| {
            b.iter(|| {
                for t in &texts {
                    ids.clear();
                    encoder.encode_into(t, &mut ids).expect("encode");
                    black_box(&ids);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
