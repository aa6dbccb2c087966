//! Random token shards for speed checks (trainer/gpu-check.sh): documents of random
//! length with ids uniform over the vocabulary, in the layout `mill-tokenize encode`
//! writes (Megatron `.bin/.idx` datasets and `manifest.json`).
//!
//! `cargo run --release -p trainer --example synthetic_shards -- OUT TOKENS [VOCAB] [SHARDS]`

use pipeline::tokens::{DatasetWriter, Dtype, MANIFEST, Manifest, ShardInfo};
use pipeline::{Location, Storage};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: synthetic_shards OUT TOKENS [VOCAB=256000] [SHARDS=4]";
    let out = Location::parse(args.first().ok_or_else(|| anyhow::anyhow!(usage))?)?;
    let tokens: u64 = args.get(1).ok_or_else(|| anyhow::anyhow!(usage))?.parse()?;
    let vocab: u32 = args.get(2).map_or(Ok(256_000), |v| v.parse())?;
    let shards: u64 = args.get(3).map_or(Ok(4), |v| v.parse())?;
    let storage = Storage::new();
    let dtype = Dtype::for_vocab(vocab as usize);
    let mut rng = fastrand::Rng::with_seed(7);
    let mut infos = Vec::new();
    let (mut documents, mut total) = (0u64, 0u64);
    for k in 0..shards.max(1) {
        let name = format!("part-{k:05}");
        let mut w = DatasetWriter::create(&storage, &out.join(&name), dtype)?;
        let mut written = 0u64;
        while written < tokens / shards.max(1) {
            let len = rng.usize(50..4000);
            let mut doc: Vec<u32> = (0..len).map(|_| rng.u32(1..vocab)).collect();
            doc.push(0);
            written += doc.len() as u64;
            w.push(&doc)?;
        }
        let done = w.finish(&storage)?;
        documents += done.documents;
        total += done.tokens;
        infos.push(ShardInfo {
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
        dtype,
        end_of_document: "<|endoftext|>".into(),
        end_of_document_id: 0,
        documents,
        tokens: total,
        shards: infos,
    };
    storage.put(&out.join(MANIFEST), &serde_json::to_vec_pretty(&manifest)?)?;
    eprintln!("{total} tokens in {documents} documents, vocabulary {vocab}: {out}");
    Ok(())
}
