//! A task's load of its tokenizer, our encoder against `tokenizers` 1.0, in one run:
//! `Loaded::read` (the file read, its SHA-256, the encoder built, the end-of-document
//! id looked up) on a pool of one thread, the two kinds alternating for ROUNDS rounds.
//! With a JSONL sample, both then encode its texts ROUNDS times, alternating, with one
//! encoder each (warm caches after the first round), and the ids are compared.
//!
//! Usage: `load_compare TOKENIZER.json ROUNDS [SAMPLE.jsonl]`. Prints one JSON line.
use std::time::Instant;

use pipeline::Storage;
use tokenize::{EncoderKind, Loaded};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(
        args.len() == 3 || args.len() == 4,
        "usage: load_compare TOKENIZER.json ROUNDS [SAMPLE.jsonl]"
    );
    let url = &args[1];
    let rounds: usize = args[2].parse().expect("ROUNDS");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let storage = Storage::new();
    let load = |kind| {
        pool.install(|| {
            let clock = Instant::now();
            let loaded =
                Loaded::read(&storage, url, kind, tokenize::END_OF_DOCUMENT).expect("loads");
            (clock.elapsed().as_secs_f64(), loaded)
        })
    };
    // NATIVE_ONLY=1 (for a profile of our load) skips the 1.0 loads.
    let native_only = std::env::var_os("NATIVE_ONLY").is_some();
    let (mut fast, mut native) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        if !native_only {
            fast.push(load(EncoderKind::Fast).0);
        }
        native.push(load(EncoderKind::Native).0);
    }
    if native_only {
        println!("{native:?}");
        return;
    }
    let mut result = serde_json::json!({
        "tokenizer_bytes": std::fs::metadata(url).expect("tokenizer").len(),
        "fast_load_seconds": fast,
        "native_load_seconds": native,
        "fast_load_median": median(fast.clone()),
        "native_load_median": median(native.clone()),
    });
    if let Some(sample) = args.get(3) {
        let texts: Vec<String> = std::fs::read_to_string(sample)
            .expect("sample")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
                v["text"].as_str().expect("text").to_string()
            })
            .collect();
        let bytes: usize = texts.iter().map(String::len).sum();
        // Each ROUNDS times, alternating, on an encoder loaded once; the median.
        let (fast_enc, native_enc) = (load(EncoderKind::Fast).1, load(EncoderKind::Native).1);
        let encode = |loaded: &Loaded| {
            let clock = Instant::now();
            let mut ids = Vec::new();
            for t in &texts {
                loaded.encoder.encode_into(t, &mut ids).expect("encodes");
            }
            (clock.elapsed().as_secs_f64(), ids)
        };
        let (mut fs, mut ns) = (Vec::new(), Vec::new());
        let (mut fast_ids, mut native_ids) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (f, ids) = encode(&fast_enc);
            fs.push(f);
            fast_ids = ids;
            let (n, ids) = encode(&native_enc);
            ns.push(n);
            native_ids = ids;
        }
        result["sample_documents"] = texts.len().into();
        result["sample_bytes"] = bytes.into();
        result["tokens"] = native_ids.len().into();
        result["ids_identical"] = (fast_ids == native_ids).into();
        result["fast_encode_seconds"] = median(fs).into();
        result["native_encode_seconds"] = median(ns).into();
    }
    println!("{result}");
}
