//! The signature kernel on real texts, for `scripts/bench-minhash.sh`: writes each
//! text's normalised form (JSONL, `{"text": ...}`, the input's order) so that another
//! tool can be given the same 5-grams, then times, on the calling thread, the cut and
//! signature of those normalised texts (what rensa's `RMinHash` does with 5-grams cut
//! for it, plus the cutting) and the whole kernel from the raw text (normalise, cut,
//! sign). The settings are the signature phase's defaults (FineWeb's 14 bands of 8,
//! 5-word shingles). Prints a JSON object: documents, and the fastest of the rounds'
//! seconds for each part.
//!
//! Usage: dedup_sign_texts <texts.jsonl> <normalized.jsonl> [rounds, default 5]

use std::io::Write;
use std::time::Instant;

use dedup::Config;
use dedup::minhash::MinHasher;
use dedup::normalize::normalize_into;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 3,
        "usage: dedup_sign_texts <texts.jsonl> <normalized.jsonl> [rounds]"
    );
    let rounds: usize = match args.get(3) {
        Some(r) => r.parse()?,
        None => 5,
    };
    let texts = pipeline::testing::jsonl_texts(std::path::Path::new(&args[1]));
    let config = Config::default();
    let hasher = MinHasher::new(config.bands, config.rows, config.seed);
    let mut normalized = Vec::with_capacity(texts.len());
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[2])?);
    for t in &texts {
        let mut n = String::new();
        normalize_into(t, &mut n);
        serde_json::to_writer(&mut out, &serde_json::json!({ "text": n }))?;
        out.write_all(b"\n")?;
        normalized.push(n);
    }
    out.flush()?;
    let best = |f: &mut dyn FnMut() -> usize| {
        let mut best = f64::INFINITY;
        let mut signed = 0;
        for _ in 0..rounds.max(1) {
            let start = Instant::now();
            signed = f();
            best = best.min(start.elapsed().as_secs_f64());
        }
        (best, signed)
    };
    let (cut_and_sign, signed) = best(&mut || {
        normalized
            .iter()
            .filter_map(|n| hasher.band_hashes(n, config.shingles, config.ngram))
            .count()
    });
    let mut scratch = String::new();
    let (whole, _) = best(&mut || {
        texts
            .iter()
            .filter_map(|t| {
                normalize_into(t, &mut scratch);
                hasher.band_hashes(&scratch, config.shingles, config.ngram)
            })
            .count()
    });
    println!(
        "{}",
        serde_json::json!({
            "documents": texts.len(),
            "signed": signed,
            "cut_and_sign_seconds": cut_and_sign,
            "normalize_cut_and_sign_seconds": whole,
        })
    );
    Ok(())
}
