//! Kernels of the signature phase: normalisation, shingling and MinHash of one document.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dedup::Shingles;
use dedup::minhash::MinHasher;
use dedup::normalize::normalize;

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
}

criterion_group!(benches, bench);
criterion_main!(benches);
