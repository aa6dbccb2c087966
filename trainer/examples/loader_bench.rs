//! Loader-only benchmark: how many tokens per second one process's data loader
//! streams from token shards (disk or S3), with nothing else running.
//!
//! `loader_bench write PREFIX TOKENS [SHARD_MIB] [VOCAB]` writes synthetic shards (random
//! ids below VOCAB, default 256,000, documents of 200 to 4,000 tokens, int32 as a 256k
//! vocabulary needs, objects of SHARD_MIB, default 256) and a manifest at PREFIX
//! (trainer/gpu-check.sh and scripts/bench-trainer-cpu.sh train on them too); `loader_bench read PREFIX [SEQ_LEN] [BATCH] [SECONDS]` reads shuffled
//! batches for SECONDS and prints tokens/s and the time spent waiting for data.
//! `scripts/bench-loader.sh` runs both against local disk and the loopback S3 server.

use std::sync::Arc;
use std::time::Instant;

use pipeline::tokens::{DatasetWriter, Dtype, MANIFEST, Manifest, ShardInfo};
use pipeline::{Location, Storage};
use trainer::data::{Corpus, DataConfig, Loader};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.to_string());
    let storage = Storage::new();
    let prefix = Location::parse(&arg(1, ""))?;
    match arg(0, "").as_str() {
        "write" => {
            let tokens: u64 = arg(2, "50000000").parse()?;
            let shard_mib: u64 = arg(3, "256").parse()?;
            let vocab: u32 = arg(4, "256000").parse()?;
            write(&storage, &prefix, tokens, shard_mib, vocab.max(2))
        }
        "read" => {
            let config = DataConfig {
                seq_len: arg(2, "2048").parse()?,
                ..DataConfig::default()
            };
            let batch: usize = arg(3, "32").parse()?;
            let seconds: f64 = arg(4, "10").parse()?;
            let corpus = Arc::new(Corpus::open(&storage, &prefix, &config)?);
            let mut loader = Loader::start(corpus, 0, batch, 0, 1)?;
            let start = Instant::now();
            let mut tokens = 0u64;
            while start.elapsed().as_secs_f64() < seconds {
                tokens += loader.next_batch()?.tokens.len() as u64;
            }
            let took = start.elapsed().as_secs_f64();
            println!(
                "{{\"prefix\": \"{prefix}\", \"seq_len\": {}, \"batch\": {batch}, \"tokens_per_s\": {:.0}, \"waited_share\": {:.3}}}",
                config.seq_len,
                tokens as f64 / took,
                loader.waited().as_secs_f64() / took
            );
            Ok(())
        }
        _ => anyhow::bail!(
            "usage: loader_bench write PREFIX TOKENS [SHARD_MIB] [VOCAB] | read PREFIX [SEQ_LEN] [BATCH] [SECONDS]"
        ),
    }
}

fn write(
    storage: &Storage,
    prefix: &Location,
    tokens: u64,
    shard_mib: u64,
    vocab: u32,
) -> anyhow::Result<()> {
    let mut rng = fastrand::Rng::with_seed(1);
    let (mut shards, mut written, mut documents) = (Vec::new(), 0u64, 0u64);
    while written < tokens {
        let name = format!("synthetic-{:05}", shards.len());
        let mut w = DatasetWriter::create(storage, &prefix.join(&name), Dtype::I32)?;
        while w.bin_bytes() < shard_mib.max(1) << 20 && written < tokens {
            let doc: Vec<u32> = (0..rng.u32(200..4000)).map(|_| rng.u32(1..vocab)).collect();
            written += doc.len() as u64;
            w.push(&doc)?;
        }
        let done = w.finish(storage)?;
        documents += done.documents;
        shards.push(ShardInfo {
            name,
            documents: done.documents,
            tokens: done.tokens,
            bytes: done.bytes,
        });
    }
    let manifest = Manifest {
        tokenizer: "synthetic".into(),
        tokenizer_sha256: "0".repeat(64),
        vocab_size: vocab as usize,
        dtype: Dtype::I32,
        end_of_document: "<|endoftext|>".into(),
        end_of_document_id: 0,
        documents,
        tokens: written,
        shards,
    };
    storage.put(
        &prefix.join(MANIFEST),
        &serde_json::to_vec_pretty(&manifest)?,
    )?;
    println!("wrote {written} tokens in {documents} documents at {prefix}");
    Ok(())
}
