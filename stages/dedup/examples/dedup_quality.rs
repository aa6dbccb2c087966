//! Quality of MinHash detection, for `scripts/bench-dedup.sh`: for every pair of
//! documents listed in a pairs file, the true Jaccard similarity of their shingle sets
//! (our normalisation and shingles) and whether their signatures share a band (the
//! signature phase's own code). Prints a JSON object: per similarity bin, pairs,
//! detected share and the theoretical share 1 − (1 − s^r)^b averaged over the bin's
//! pairs; false positives among pairs below 0.5; each pair's Jaccard (by its second id).
//!
//! Usage: dedup_quality <docs folder (JSONL)> <pairs.jsonl> [config.toml]

use std::collections::{HashMap, HashSet};

use dedup::minhash::{MinHasher, theory};
use dedup::normalize::{for_each_shingle, normalize};
use dedup::{Config, Kind};
use pipeline::{DocumentSource, Location, Source, Storage};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 3,
        "usage: dedup_quality <docs> <pairs.jsonl> [config.toml]"
    );
    let storage = Storage::new();
    let config: Config = pipeline::cli::load_toml(&storage, args.get(3).map(String::as_str))?;
    anyhow::ensure!(
        config.kind == Kind::Minhash,
        "the quality bench measures MinHash"
    );
    let hasher = MinHasher::new(config.bands, config.rows, config.seed);
    let source = DocumentSource::default();
    let mut shingles: HashMap<String, (HashSet<u64>, Vec<u64>)> = HashMap::new();
    for meta in storage.list(&Location::parse(&args[1])?)? {
        let Some(_) = source.stem(&meta.relative) else {
            continue;
        };
        for batch in source.read(&storage, &meta, &meta.relative)? {
            for d in batch?.docs {
                let n = normalize(&d.text);
                let mut set = HashSet::new();
                for_each_shingle(&n, config.shingles, config.ngram, |h| {
                    set.insert(h);
                });
                let bands = hasher
                    .band_hashes(&n, config.shingles, config.ngram)
                    .unwrap_or_default();
                shingles.insert(d.id, (set, bands));
            }
        }
    }
    let bins = 20usize;
    let mut pairs = vec![0u64; bins];
    let mut detected = vec![0u64; bins];
    let mut expected = vec![0f64; bins];
    let (mut low_pairs, mut low_detected) = (0u64, 0u64);
    let mut per_pair = serde_json::Map::new();
    let text = std::fs::read_to_string(&args[2])?;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let (a, b) = (v["a"].as_str().unwrap_or(""), v["b"].as_str().unwrap_or(""));
        let (Some((sa, ba)), Some((sb, bb))) = (shingles.get(a), shingles.get(b)) else {
            anyhow::bail!("pair {a} {b}: document missing from {}", args[1]);
        };
        let inter = sa.intersection(sb).count() as f64;
        let union = (sa.len() + sb.len()) as f64 - inter;
        let j = if union > 0.0 { inter / union } else { 1.0 };
        let hit = ba.iter().zip(bb).any(|(x, y)| x == y);
        per_pair.insert(b.to_string(), serde_json::json!((j * 1e4).round() / 1e4));
        let bin = ((j * bins as f64) as usize).min(bins - 1);
        pairs[bin] += 1;
        detected[bin] += u64::from(hit);
        expected[bin] += theory(j, config.bands, config.rows);
        if j < 0.5 {
            low_pairs += 1;
            low_detected += u64::from(hit);
        }
    }
    let rows: Vec<serde_json::Value> = (0..bins)
        .filter(|&i| pairs[i] > 0)
        .map(|i| {
            serde_json::json!({
                "from": i as f64 / bins as f64,
                "to": (i + 1) as f64 / bins as f64,
                "pairs": pairs[i],
                "detected": detected[i] as f64 / pairs[i] as f64,
                "theory": expected[i] / pairs[i] as f64,
            })
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "bands": config.bands,
            "rows": config.rows,
            "bins": rows,
            "below_half_pairs": low_pairs,
            "below_half_detected": low_detected,
            "pair_jaccard": per_pair,
        })
    );
    Ok(())
}
