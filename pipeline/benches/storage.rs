//! Storage throughput: streaming write and read of one large object, on local disk and
//! (when `TOKENMILL_TEST_S3_ENDPOINT` names an S3-compatible server) on S3.
//!
//! `cargo bench -p pipeline --bench storage`; scripts/bench-storage.sh starts the
//! loopback server and runs this.

use std::hint::black_box;
use std::io::{Read, Write};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pipeline::storage::{Location, S3Options, Storage};

const OBJECT_BYTES: usize = 64 << 20;

fn payload() -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(1);
    (0..OBJECT_BYTES).map(|_| rng.u8(..)).collect()
}

fn write_object(storage: &Storage, loc: &Location, data: &[u8]) {
    let mut w = storage.create(loc).expect("create");
    for chunk in data.chunks(1 << 20) {
        w.write_all(chunk).expect("write");
    }
    w.finish().expect("finish");
}

fn read_object(storage: &Storage, loc: &Location) -> usize {
    let mut r = storage.open(loc).expect("open");
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        let n = r.read(&mut buf).expect("read");
        if n == 0 {
            return total;
        }
        total += n;
    }
}

fn backends(dir: &std::path::Path) -> Vec<(&'static str, Storage, Location)> {
    let mut out = vec![("disk", Storage::new(), Location::Local(dir.join("bench")))];
    match std::env::var("TOKENMILL_TEST_S3_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => {
            let storage = Storage::with_options(S3Options {
                endpoint: Some(endpoint),
                ..S3Options::default()
            });
            let root = Location::parse(&format!("s3://tm-bench-{}/", std::process::id()))
                .expect("bucket address");
            storage.create_bucket(&root).expect("create bench bucket");
            out.push(("s3-loopback", storage, root));
        }
        _ => eprintln!("TOKENMILL_TEST_S3_ENDPOINT unset: S3 storage benchmark skipped"),
    }
    out
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = payload();
    let mut group = c.benchmark_group("storage");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Bytes(OBJECT_BYTES as u64));
    for (name, storage, root) in backends(dir.path()) {
        let loc = root.join("object.bin");
        group.bench_function(format!("write_64MiB/{name}"), |b| {
            b.iter(|| write_object(&storage, &loc, black_box(&data)))
        });
        write_object(&storage, &loc, &data);
        group.bench_function(format!("read_64MiB/{name}"), |b| {
            b.iter(|| assert_eq!(read_object(&storage, &loc), OBJECT_BYTES))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
