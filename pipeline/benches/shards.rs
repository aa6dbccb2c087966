//! Parquet shard throughput: documents written to and read from a zstd shard on disk,
//! measured in bytes of document text.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pipeline::shard::{ShardOptions, ShardWriter, read_all_documents};
use pipeline::{Document, Location, Storage};

const WORDS: [&str; 16] = [
    "the",
    "corpus",
    "river",
    "library",
    "Stadt",
    "Bibliothek",
    "maison",
    "ciudad",
    "图书馆",
    "データ",
    "مكتبة",
    "ספרייה",
    "город",
    "पुस्तकालय",
    "and",
    "of",
];

fn documents(n: usize) -> Vec<Document> {
    let mut rng = fastrand::Rng::with_seed(3);
    (0..n)
        .map(|i| {
            let words: Vec<&str> = (0..rng.usize(100..700))
                .map(|_| WORDS[rng.usize(..WORDS.len())])
                .collect();
            Document {
                url: Some(format!("https://site{}.example/page/{i}", rng.u16(..))),
                date: Some("2024-03-02T07:14:55Z".into()),
                dump: Some("CC-MAIN-2024-10".into()),
                file_path: Some("s3://bucket/crawl/file.warc.gz".into()),
                ..Document::new(format!("<urn:uuid:{i:032x}>"), words.join(" "))
            }
        })
        .collect()
}

fn write(storage: &Storage, loc: &Location, docs: &[Document]) {
    let mut w = ShardWriter::new(
        storage.create(loc).expect("create"),
        None,
        &[],
        false,
        &ShardOptions::default(),
    )
    .expect("writer");
    let refs: Vec<&Document> = docs.iter().collect();
    for chunk in refs.chunks(1024) {
        w.write(chunk, None, None).expect("write");
    }
    w.finish().expect("finish");
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Storage::new();
    let loc = Location::Local(dir.path().join("shard.parquet"));
    let docs = documents(20_000);
    let text_bytes: usize = docs.iter().map(|d| d.text.len()).sum();
    let mut group = c.benchmark_group("shards");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Bytes(text_bytes as u64));
    group.bench_function("write_parquet_zstd", |b| {
        b.iter(|| write(&storage, &loc, black_box(&docs)))
    });
    write(&storage, &loc, &docs);
    group.bench_function("read_parquet_zstd", |b| {
        b.iter(|| {
            assert_eq!(
                read_all_documents(&storage, &loc).expect("read").len(),
                docs.len()
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
