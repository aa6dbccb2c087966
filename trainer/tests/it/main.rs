//! The data loader on synthetic token shards, on disk and on the loopback S3 server;
//! training, resume, data parallelism and export (`training.rs`).

mod encoder;
mod training;

use std::sync::Arc;

use pipeline::tokens::{DatasetWriter, Dtype, MANIFEST, Manifest, ShardInfo};
use pipeline::{Location, Storage};
use trainer::data::{Corpus, DataConfig, Loader, Split, permute};

const EOD: u32 = 0;

/// Writes `docs` as shards of `per_shard` documents with a manifest below `root`.
fn write_shards(storage: &Storage, root: &Location, docs: &[Vec<u32>], per_shard: usize) {
    let mut shards = Vec::new();
    for (k, chunk) in docs.chunks(per_shard).enumerate() {
        let name = format!("part-{k:05}");
        let mut w = DatasetWriter::create(storage, &root.join(&name), Dtype::U16).expect("create");
        for d in chunk {
            w.push(d).expect("push");
        }
        let written = w.finish(storage).expect("finish");
        shards.push(ShardInfo {
            name,
            documents: written.documents,
            tokens: written.tokens,
            bytes: written.bytes,
        });
    }
    let manifest = Manifest {
        tokenizer: "fixtures/tokenizer.json".into(),
        tokenizer_sha256: "ab".repeat(32),
        vocab_size: 1000,
        dtype: Dtype::U16,
        end_of_document: "<|endoftext|>".into(),
        end_of_document_id: EOD,
        documents: docs.len() as u64,
        tokens: docs.iter().map(|d| d.len() as u64).sum(),
        shards,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("json");
    storage.put(&root.join(MANIFEST), &json).expect("manifest");
}

/// Documents of random lengths (some longer than a sample), each ending with EOD; the
/// tokens count up so that any sample can be checked against the stream.
fn documents(n: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut next = 1u32;
    (0..n)
        .map(|_| {
            let len = rng.usize(0..40);
            let mut d: Vec<u32> = (0..len)
                .map(|_| {
                    next = next % 999 + 1;
                    next
                })
                .collect();
            d.push(EOD);
            d
        })
        .collect()
}

fn config(seq_len: usize, share: f64) -> DataConfig {
    DataConfig {
        seq_len,
        seed: 5,
        validation_share: share,
        prefetch: 2,
        read_threads: 3,
        block_samples: 5,
        shuffle_blocks: 3,
        cached_blocks: 2,
    }
}

fn check_samples(storage: &Storage, root: &Location) {
    let docs = documents(300, 1);
    write_shards(storage, root, &docs, 70);
    let corpus = Corpus::open(storage, root, &config(16, 0.1)).expect("open");
    let (train, valid) = (
        corpus.documents(Split::Train),
        corpus.documents(Split::Validation),
    );
    assert_eq!(train + valid, docs.len());
    assert!((10..60).contains(&valid), "{valid} validation documents");
    // The training stream is the training documents back to back; its samples are
    // windows of 17 tokens every 16, across document boundaries, EOD kept.
    let mut stream = Vec::new();
    for split in [Split::Train, Split::Validation] {
        stream.clear();
        let total = corpus.tokens(split);
        for i in 0..corpus.samples(split) {
            let s = corpus.sample(split, i).expect("sample");
            assert_eq!(s.len(), 17);
            if i == 0 {
                stream.extend(&s);
            } else {
                assert_eq!(
                    s[0],
                    stream[stream.len() - 1],
                    "sample {i} starts where {} ended",
                    i - 1
                );
                stream.extend(&s[1..]);
            }
        }
        assert!(stream.len() as u64 <= total && total - (stream.len() as u64) < 17);
        assert!(stream.contains(&EOD));
        // Inside a document the tokens count up by one: a read at a wrong offset or a
        // document cut short would break the count.
        for w in stream.windows(2) {
            if w[0] != EOD && w[1] != EOD {
                assert_eq!(w[1], w[0] % 999 + 1, "{split:?}: {} then {}", w[0], w[1]);
            }
        }
    }
    let train_tokens: u64 = corpus.tokens(Split::Train);
    let all: u64 = docs.iter().map(|d| d.len() as u64).sum();
    assert_eq!(train_tokens + corpus.tokens(Split::Validation), all);
    let err = corpus
        .sample(Split::Train, corpus.samples(Split::Train))
        .expect_err("past the end");
    assert!(err.to_string().contains("samples"), "{err}");
}

#[test]
fn samples_cross_document_boundaries_on_disk() {
    let dir = tempfile::tempdir().expect("tmp");
    check_samples(&Storage::new(), &Location::Local(dir.path().to_path_buf()));
}

#[test]
fn samples_cross_document_boundaries_on_s3() {
    let Some((storage, _, bucket)) = pipeline::testing::s3_bucket("trainer") else {
        return;
    };
    let root = Location::parse(&format!("s3://{bucket}/tokens/")).expect("address");
    check_samples(&storage, &root);
}

#[test]
fn ranks_and_resume_read_the_same_samples_as_one_rank() {
    let dir = tempfile::tempdir().expect("tmp");
    let storage = Storage::new();
    let root = Location::Local(dir.path().to_path_buf());
    write_shards(&storage, &root, &documents(400, 2), 100);
    let corpus = Arc::new(Corpus::open(&storage, &root, &config(8, 0.05)).expect("open"));
    let n = corpus.samples(Split::Train);
    assert!(n > 100);
    // One rank, batches of 6: the shuffled order of epoch 0, then epoch 1.
    let mut one = Loader::start(corpus.clone(), 0, 6, 0, 1).expect("loader");
    let mut single = Vec::new();
    for _ in 0..((2 * n as usize) / 6 + 2) {
        single.extend(one.next_batch().expect("batch").tokens);
    }
    let expect: Vec<u32> = (0..single.len() as u64 / 9)
        .flat_map(|p| corpus.sample_at(p).expect("sample"))
        .collect();
    assert_eq!(single, expect);
    let first: Vec<u64> = (0..n).map(|i| permute(i, n, 5, 0)).collect();
    let mut sorted = first.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "a permutation");
    // Every epoch visits every sample once, tail included (n is not a multiple of 5
    // here), in an order that changes with the epoch.
    assert_ne!(n % 5, 0, "the test wants a tail");
    let epoch = |e: u64| -> Vec<u64> {
        (e * n..(e + 1) * n)
            .map(|p| corpus.locate(p).expect("locate").1)
            .collect()
    };
    for e in 0..2 {
        let mut seen = epoch(e);
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>(), "epoch {e}");
    }
    assert_ne!(epoch(0), epoch(1));
    // A group of 3 blocks of 5 samples is mixed: its first 6 positions already draw on
    // more than one block.
    let blocks: std::collections::BTreeSet<u64> = (0..6)
        .map(|p| corpus.locate(p).expect("locate").0)
        .collect();
    assert!(blocks.len() > 1, "{blocks:?}");
    for p in [0, 3, n - 1, n + 7] {
        let (block, sample) = corpus.locate(p).expect("locate");
        let tokens = corpus.read_block(block).expect("block");
        let at = ((sample - block * 5) * 8) as usize;
        assert_eq!(tokens[at..at + 9], corpus.sample_at(p).expect("sample")[..]);
    }
    // Three ranks of batch 2 cover the same positions as one rank of batch 6.
    let mut ranks: Vec<Loader> = (0..3)
        .map(|r| Loader::start(corpus.clone(), 0, 2, r, 3).expect("rank"))
        .collect();
    let mut positions_read = Vec::new();
    for _ in 0..5 {
        let mut step: Vec<Vec<u32>> = Vec::new();
        let mut next = 0;
        for r in &mut ranks {
            let b = r.next_batch().expect("batch");
            next = b.next_position;
            step.extend(b.tokens.chunks(9).map(<[u32]>::to_vec));
        }
        positions_read.push((next, step));
    }
    let mut by_one = Loader::start(corpus.clone(), 0, 6, 0, 1).expect("loader");
    for (next, mut step) in positions_read {
        let b = by_one.next_batch().expect("batch");
        assert_eq!(b.next_position, next);
        let mut whole: Vec<Vec<u32>> = b.tokens.chunks(9).map(<[u32]>::to_vec).collect();
        step.sort();
        whole.sort();
        assert_eq!(step, whole, "the ranks of a step read that step's samples");
    }
    // Resuming at a recorded position gives what the uninterrupted run read next.
    let mut run = Loader::start(corpus.clone(), 0, 6, 0, 1).expect("loader");
    let mut at = 0;
    for _ in 0..7 {
        at = run.next_batch().expect("batch").next_position;
    }
    let after = run.next_batch().expect("batch");
    let mut resumed = Loader::start(corpus, at, 6, 0, 1).expect("resume");
    assert_eq!(resumed.next_batch().expect("batch"), after);
}

#[test]
fn bad_shards_and_models_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tmp");
    let storage = Storage::new();
    let root = Location::Local(dir.path().to_path_buf());
    write_shards(&storage, &root, &documents(50, 3), 25);
    let corpus = Corpus::open(&storage, &root, &config(8, 0.0)).expect("open");
    let err = corpus
        .check_model(512, None)
        .expect_err("vocabulary too small")
        .to_string();
    assert!(err.contains("1000") && err.contains("512"), "{err}");
    let err = corpus
        .check_model(1000, Some("cd"))
        .expect_err("other tokenizer")
        .to_string();
    assert!(
        err.contains(&"ab".repeat(32)) && err.contains("cd"),
        "{err}"
    );
    corpus
        .check_model(1024, Some(&"ab".repeat(32)))
        .expect("fits");
    // A truncated .bin is named with both sizes.
    let bin = dir.path().join("part-00001.bin");
    let bytes = std::fs::read(&bin).expect("bin");
    std::fs::write(&bin, &bytes[..bytes.len() - 2]).expect("truncate");
    let err = Corpus::open(&storage, &root, &config(8, 0.0))
        .expect_err("truncated")
        .to_string();
    assert!(
        err.contains("part-00001.bin") && err.contains("truncated"),
        "{err}"
    );
    // Too few tokens for one sample.
    std::fs::write(&bin, &bytes).expect("restore");
    let small = Corpus::open(&storage, &root, &config(100_000, 0.0)).expect("open");
    let err = small.sample_at(0).expect_err("no sample").to_string();
    assert!(err.contains("not one sample"), "{err}");
}

#[test]
fn a_tiny_model_learns_the_shards() {
    let dir = tempfile::tempdir().expect("tmp");
    let (corpus, model) = phrase_corpus(dir.path(), 32);
    let train = trainer::TrainConfig {
        steps: 60,
        micro_batch: 4,
        accumulation: 2,
        schedule: trainer::schedule::Schedule {
            lr: 3e-3,
            min_lr: 3e-4,
            warmup_steps: 5,
            total_steps: 60,
        },
        ..trainer::TrainConfig::default()
    };
    let records = trainer::train_steps(corpus, &model, &train, None).expect("train");
    let losses: Vec<f64> = records.iter().map(|r| r.loss).collect();
    assert!(
        records
            .iter()
            .all(|r| r.grad_norm.is_finite() && r.grad_norm > 0.0)
    );
    assert!(records[0].lr < records[5].lr && records[59].lr < records[5].lr);
    let first: f64 = losses[..5].iter().sum::<f64>() / 5.0;
    let last: f64 = losses[losses.len() - 5..].iter().sum::<f64>() / 5.0;
    assert!(
        last < 0.7 * first,
        "loss {first:.3} -> {last:.3} falls by less than 30%"
    );
    eprintln!("tiny model: loss {first:.3} -> {last:.3} in 60 steps of 2 x 4 x 32 tokens");
}

/// Shards of documents that repeat a few phrases (below `dir`) read in samples of
/// `seq_len`, and the tiny model over them, for the training tests: a model that learns
/// anything brings the loss well down within a few dozen steps.
fn phrase_corpus(
    dir: &std::path::Path,
    seq_len: usize,
) -> (Arc<Corpus>, trainer::model::ModelConfig) {
    let storage = Storage::new();
    let root = Location::Local(dir.to_path_buf());
    if !dir.join(MANIFEST).exists() {
        let mut rng = fastrand::Rng::with_seed(9);
        let phrases: Vec<Vec<u32>> = (0..6)
            .map(|_| (0..12).map(|_| rng.u32(1..100)).collect())
            .collect();
        let docs: Vec<Vec<u32>> = (0..300)
            .map(|_| {
                let mut d: Vec<u32> = (0..4)
                    .flat_map(|_| phrases[rng.usize(..phrases.len())].clone())
                    .collect();
                d.push(EOD);
                d
            })
            .collect();
        write_shards(&storage, &root, &docs, 100);
    }
    let corpus = Arc::new(Corpus::open(&storage, &root, &config(seq_len, 0.0)).expect("open"));
    let model = trainer::model::ModelConfig {
        vocab_size: 128,
        ..trainer::model::ModelConfig::preset("tiny").expect("preset")
    };
    (corpus, model)
}

fn final_weights(dir: &std::path::Path) -> Vec<(String, tch::Tensor)> {
    let latest = std::fs::read_to_string(dir.join("latest")).expect("latest");
    let mut w = tch::Tensor::read_safetensors(dir.join(latest.trim()).join("model.safetensors"))
        .expect("weights");
    w.sort_by(|a, b| a.0.cmp(&b.0));
    w
}

#[test]
fn stopped_and_resumed_training_ends_with_identical_weights() {
    let shards = tempfile::tempdir().expect("tmp");
    let (corpus, model) = phrase_corpus(shards.path(), 16);
    let work = tempfile::tempdir().expect("tmp");
    let train = |steps| trainer::TrainConfig {
        steps,
        micro_batch: 4,
        accumulation: 2,
        schedule: trainer::schedule::Schedule {
            lr: 3e-3,
            min_lr: 3e-4,
            warmup_steps: 3,
            total_steps: 20,
        },
        ..trainer::TrainConfig::default()
    };
    let ckpt = |name: &str, resume| trainer::Checkpoints {
        storage: Storage::new(),
        dir: Location::Local(work.path().join(name)),
        every: 4,
        keep: 2,
        resume,
    };
    let straight =
        trainer::train_steps(corpus.clone(), &model, &train(20), Some(&ckpt("a", false)))
            .expect("straight");
    assert_eq!(straight.len(), 20);
    // Stop after 10 steps (the last checkpoint is at step 10), resume to 20.
    let first = trainer::train_steps(corpus.clone(), &model, &train(10), Some(&ckpt("b", true)))
        .expect("first part");
    assert_eq!(first.len(), 10);
    let rest = trainer::train_steps(corpus.clone(), &model, &train(20), Some(&ckpt("b", true)))
        .expect("resumed");
    assert_eq!(rest.first().map(|r| r.step), Some(10), "resumed at step 10");
    let losses = |r: &[trainer::StepRecord]| r.iter().map(|s| s.loss).collect::<Vec<_>>();
    assert_eq!(
        losses(&straight[10..]),
        losses(&rest),
        "the same losses after the resume"
    );
    let (a, b) = (
        final_weights(&work.path().join("a")),
        final_weights(&work.path().join("b")),
    );
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "{na} differs after the resume");
    }
    // Only the last two checkpoints stay; a checkpoint of another configuration is
    // refused by name.
    let kept: Vec<_> = std::fs::read_dir(work.path().join("a"))
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("step-"))
        .collect();
    assert_eq!(kept.len(), 2);
    let other = trainer::TrainConfig {
        seed: 2,
        ..train(24)
    };
    let err = trainer::train_steps(corpus, &model, &other, Some(&ckpt("a", true)))
        .expect_err("another configuration");
    assert!(err.to_string().contains("another folder"), "{err}");
    // An unreadable checkpoint is an error naming the file, not a fresh start.
    let latest = std::fs::read_to_string(work.path().join("b/latest")).expect("latest");
    let model_file = work
        .path()
        .join("b")
        .join(latest.trim())
        .join("model.safetensors");
    std::fs::write(&model_file, b"not tensors").expect("corrupt");
    let err = trainer::train_steps(
        phrase_corpus(shards.path(), 16).0,
        &model,
        &train(24),
        Some(&ckpt("b", true)),
    )
    .expect_err("corrupt checkpoint");
    assert!(err.to_string().contains("model.safetensors"), "{err}");
}

#[test]
fn mill_train_trains_checkpoints_and_resumes() {
    let shards = tempfile::tempdir().expect("tmp");
    phrase_corpus(shards.path(), 16);
    let work = tempfile::tempdir().expect("tmp");
    let config = |steps: u64| {
        let path = work.path().join(format!("run-{steps}.toml"));
        std::fs::write(
            &path,
            format!(
                "preset = \"tiny\"\ncheckpoint_every = 3\nkeep = 2\neval_every = 3\n[model]\nlayers = 1\n\
                 [data]\nseq_len = 16\nvalidation_share = 0.2\n\
                 [train]\nsteps = {steps}\nmicro_batch = 4\n\
                 [train.schedule]\nlr = 0.003\nmin_lr = 0.0003\nwarmup_steps = 2\ntotal_steps = 9\n"
            ),
        )
        .expect("config");
        path
    };
    let ckpt = work.path().join("ckpt");
    let run = |steps: u64, resume: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_mill-train"));
        c.arg("--shards")
            .arg(shards.path())
            .arg("--checkpoints")
            .arg(&ckpt)
            .arg("--config")
            .arg(config(steps))
            .args(["--log-format", "json"]);
        if resume {
            c.arg("--resume");
        }
        let out = c.output().expect("run mill-train");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
            .collect::<Vec<_>>()
    };
    let first = run(6, false);
    assert_eq!(first.len(), 6);
    assert!(
        first
            .iter()
            .all(|m| m["tokens_per_s"].as_f64().is_some_and(|t| t > 0.0))
    );
    assert_eq!(
        std::fs::read_to_string(ckpt.join("latest"))
            .expect("latest")
            .trim(),
        "step-00000006"
    );
    // Validation loss every third step, on the held-out documents.
    let val: Vec<bool> = first.iter().map(|m| m["val_loss"].is_f64()).collect();
    assert_eq!(val, vec![false, false, true, false, false, true]);
    assert!(
        first[2]["val_loss"]
            .as_f64()
            .is_some_and(|v| v > 0.0 && v.is_finite())
    );
    let resumed = run(9, true);
    let steps: Vec<u64> = resumed
        .iter()
        .map(|m| m["step"].as_u64().expect("step"))
        .collect();
    assert_eq!(steps, vec![6, 7, 8], "resumed where the first run stopped");
    assert_eq!(
        std::fs::read_to_string(ckpt.join("latest"))
            .expect("latest")
            .trim(),
        "step-00000009"
    );
}
