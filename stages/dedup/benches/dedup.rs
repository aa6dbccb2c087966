//! Kernels of the signature phase: normalisation, shingling and MinHash of one document,
//! and a document's whole signature (normalised, cut into 5-grams, hashed and signed,
//! FineWeb's 14 bands of 8) over real texts: `TOKENMILL_BENCH_TEXTS`, a JSONL of
//! `{"text": ...}` (scripts/bench-classify.sh leaves the WCXB and Dragnet texts so),
//! else the classify fixtures' texts.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dedup::Shingles;
use dedup::minhash::MinHasher;
use dedup::normalize::{normalize, normalize_into};

fn texts() -> Vec<String> {
    pipeline::testing::bench_texts(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/classify/positives.jsonl"),
    )
}

fn text() -> String {
    let words = [
        "the",
        "pipeline",
        "reads",
        "documents",
        "from",
        "storage",
        "and",
        "writes",
        "signatures",
        "per",
        "band",
        "Über",
        "straße",
        "naïve",
        "42",
        "résumé",
        "café",
        "data,",
        "quality;",
    ];
    let mut s = String::new();
    let mut x: u64 = 7;
    for _ in 0..1000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(words[(x >> 33) as usize % words.len()]);
        s.push(' ');
    }
    s
}

fn bench(c: &mut Criterion) {
    let t = text();
    let m = MinHasher::new(14, 8, 1);
    let n = normalize(&t);
    let mut g = c.benchmark_group("dedup");
    g.throughput(Throughput::Bytes(t.len() as u64));
    g.bench_function("normalize_1000_words", |b| b.iter(|| normalize(&t)));
    g.bench_function("minhash_14x8_1000_words", |b| {
        b.iter(|| m.band_hashes(&n, Shingles::Words, 5))
    });
    g.finish();

    let texts = texts();
    let mut g = c.benchmark_group("signatures");
    g.throughput(Throughput::Bytes(
        texts.iter().map(|t| t.len() as u64).sum(),
    ));
    let mut scratch = String::new();
    g.bench_function(format!("normalize {} texts", texts.len()), |b| {
        b.iter(|| {
            for t in &texts {
                normalize_into(t, &mut scratch);
            }
        })
    });
    g.bench_function(format!("sign {} texts", texts.len()), |b| {
        b.iter(|| {
            let mut signed = 0;
            for t in &texts {
                normalize_into(t, &mut scratch);
                signed += m.band_hashes(&scratch, Shingles::Words, 5).is_some() as usize;
            }
            signed
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
