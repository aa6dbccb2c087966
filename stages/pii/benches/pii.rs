//! Kernel speed on one thread: finding and replacing personal data, with the defaults
//! and with every kind on. Documents: `TOKENMILL_BENCH_PII_DOCS` (JSONL with a `text`
//! field, e.g. real web text), else the tricky fixture and the quality fixture's
//! sentences. `cargo bench -p pii`. The whole stage beside datatrove:
//! scripts/bench-pii.sh.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pii::{Config, Pii};

fn texts() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let jsonl = match std::env::var("TOKENMILL_BENCH_PII_DOCS") {
        Ok(path) => std::fs::read_to_string(path).expect("TOKENMILL_BENCH_PII_DOCS"),
        Err(_) => std::fs::read_to_string(root.join("fixtures/pii/tricky.jsonl")).expect("fixture"),
    };
    let mut texts: Vec<String> = jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            v["text"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    if std::env::var_os("TOKENMILL_BENCH_PII_DOCS").is_none() {
        let prose =
            std::fs::read_to_string(root.join("fixtures/quality/sentences.txt")).expect("fixture");
        texts.extend(std::iter::repeat_n(prose, 20));
    }
    texts
}

fn bench(c: &mut Criterion) {
    let texts = texts();
    let bytes: usize = texts.iter().map(String::len).sum();
    let mut group = c.benchmark_group("pii");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes(bytes as u64));
    for (name, config) in [
        ("defaults", Config::default()),
        (
            "every kind",
            Config {
                credit_cards: true,
                ibans: true,
                ..Config::default()
            },
        ),
    ] {
        let pii = Pii::new(config).expect("config");
        group.bench_function(name, |b| {
            b.iter(|| {
                for t in &texts {
                    black_box(pii.redact(black_box(t)));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
