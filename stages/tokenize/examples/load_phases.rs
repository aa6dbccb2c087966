//! Where loading a `tokenizer.json` spends its time, on one thread: reading the file,
//! the `tokenizers` 0.22 reader, the 1.0 reader (its first try on the file as 0.22
//! saves it, the conversion to its own form, and the read of that form), and the
//! whole `Encoder::load`.
//!
//! Usage: `load_phases TOKENIZER.json`.
use std::time::Instant;

use tokenize::bpe::{Encoder, EncoderKind};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(args.len() == 2, "usage: load_phases TOKENIZER.json");
    let clock = Instant::now();
    let json = std::fs::read_to_string(&args[1]).expect("reading the tokenizer");
    let read = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let reference: tokenizers::Tokenizer = json.parse().expect("0.22 reads it");
    let reference_s = clock.elapsed().as_secs_f64();
    drop(reference);

    let clock = Instant::now();
    let first = tokenizers_fast::from_json(&json);
    let first_s = clock.elapsed().as_secs_f64();
    let first_ok = first.is_ok();
    drop(first);
    let clock = Instant::now();
    let canonical = tokenizers_fast::canonicalize_str(&json).expect("converts");
    let convert_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let fast = tokenizers_fast::from_json(&canonical).expect("1.0 reads the canonical form");
    let fast_s = clock.elapsed().as_secs_f64();
    drop(fast);

    // The 1.0 BPE model alone, from a vocabulary and merges already in memory.
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let vocab: std::collections::HashMap<String, u32> = value["model"]["vocab"]
        .as_object()
        .expect("vocab")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().expect("id") as u32))
        .collect();
    let merges: Vec<(String, String)> = value["model"]["merges"]
        .as_array()
        .expect("merges")
        .iter()
        .map(|m| {
            (
                m[0].as_str().expect("left").to_string(),
                m[1].as_str().expect("right").to_string(),
            )
        })
        .collect();
    let clock = Instant::now();
    let model = tokenizers_fast::models::bpe::PipelineBPE::from_config(
        tokenizers_fast::models::bpe::BpeConfig {
            vocab: vocab.into_iter().collect(),
            merges,
            byte_level: true,
            ..Default::default()
        },
    )
    .expect("builds");
    let model_s = clock.elapsed().as_secs_f64();
    drop(model);
    let clock = Instant::now();
    let parsed = tokenizers_fast::json::Json::parse(&canonical).expect("parses");
    let parse_s = clock.elapsed().as_secs_f64();
    drop(parsed);

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let clock = Instant::now();
    let encoder = pool
        .install(|| Encoder::load(&json, EncoderKind::Fast, &args[1]))
        .expect("loads");
    let load_s = clock.elapsed().as_secs_f64();
    drop(encoder);
    println!(
        "{}",
        serde_json::json!({
            "bytes": json.len(),
            "read_seconds": read,
            "reference_seconds": reference_s,
            "fast_first_try_seconds": first_s,
            "fast_first_try_ok": first_ok,
            "fast_convert_seconds": convert_s,
            "fast_canonical_seconds": fast_s,
            "encoder_load_one_thread_seconds": load_s,
            "fast_bpe_from_config_seconds": model_s,
            "fast_json_parse_seconds": parse_s,
        })
    );
}
