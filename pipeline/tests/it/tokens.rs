//! Token shards written and read back with ranged reads, on local disk and on the S3
//! test server: what the trainer does without the tokenize crate.

use pipeline::tokens::{DatasetWriter, Dtype, Index, read_manifest};

use crate::s3env::backends;

#[test]
fn datasets_round_trip_with_ranged_reads() {
    let (_dir, backends) = backends("tokens");
    let mut rng = fastrand::Rng::with_seed(11);
    let docs: Vec<Vec<u32>> = (0..200)
        .map(|i| {
            (0..rng.usize(0..60))
                .map(|_| rng.u32(..50_000) + i % 2)
                .collect()
        })
        .collect();
    for (storage, root) in backends {
        for dtype in [Dtype::U16, Dtype::I32] {
            let prefix = root.join(&format!("shard-{}", dtype.code()));
            let mut w = DatasetWriter::create(&storage, &prefix, dtype).expect("create");
            for d in &docs {
                w.push(d).expect("push");
            }
            let written = w.finish(&storage).expect("finish");
            assert_eq!(written.documents, docs.len() as u64);
            let idx = Index::read(&storage, &prefix).expect("index");
            assert_eq!(idx.len(), docs.len());
            assert_eq!(
                idx.tokens(),
                docs.iter().map(|d| d.len() as u64).sum::<u64>()
            );
            for i in [0, 7, 199] {
                assert_eq!(idx.document(&storage, &prefix, i).expect("doc"), docs[i]);
            }
            for (first, end) in [(0, 200), (13, 14), (50, 120), (77, 77)] {
                let span = idx.documents(&storage, &prefix, first, end).expect("span");
                assert_eq!(span, docs[first..end], "{prefix} {first}..{end}");
            }
            let err = idx
                .documents(&storage, &prefix, 150, 201)
                .expect_err("past the end");
            assert!(err.to_string().contains("150..201"), "{err}");
        }
        assert!(read_manifest(&storage, &root).is_err(), "no manifest yet");
    }
}
