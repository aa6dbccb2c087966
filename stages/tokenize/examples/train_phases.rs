//! Where BPE training spends its time, on a pool of the given threads: our trainer's
//! phases (counting words; learning, before the first merge and in all) and the whole
//! of it, then the `tokenizers` 0.22 trainer on the same texts, and whether the two
//! `tokenizer.json` files are identical. The settings are `tokenize::TrainConfig`'s
//! defaults with the given vocabulary size.
//!
//! Usage: `train_phases DOCS.jsonl THREADS VOCAB_SIZE [ours]`, one JSON string (a
//! document's text) per line; `ours` leaves out the 0.22 trainer.
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokenize::trainer::{LearnConfig, count_words, learn};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(
        args.len() == 4 || args.len() == 5 && args[4] == "ours",
        "usage: train_phases DOCS.jsonl THREADS VOCAB_SIZE [ours]"
    );
    let with_reference = args.len() == 4;
    let threads: usize = args[2].parse().expect("THREADS");
    let vocab: usize = args[3].parse().expect("VOCAB_SIZE");
    let texts: Vec<String> = std::fs::read_to_string(&args[1])
        .expect("reading DOCS.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<String>(l).expect("a JSON string per line"))
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("starting the pool");
    let config = tokenize::TrainConfig {
        vocab_size: vocab,
        ..Default::default()
    };
    pool.install(|| {
        let t0 = Instant::now();
        let words = count_words(texts.iter().cloned()).expect("counting words");
        let t1 = Instant::now();
        // The bytes and the specials only: stops before its first merge.
        let floor = 256 + config.special_tokens.len();
        let mut sizes = LearnConfig {
            vocab_size: floor,
            min_frequency: config.min_frequency,
            special_tokens: &config.special_tokens,
            max_token_length: config.max_token_length,
        };
        learn(&words, &sizes);
        let t2 = Instant::now();
        sizes.vocab_size = vocab;
        let learned = learn(&words, &sizes);
        let t3 = Instant::now();
        println!(
            "threads {threads}, vocab_size {vocab}, {} words: count {:.3} s, before the first merge {:.3} s, learn {:.3} s, {} merges",
            words.len(),
            (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64(),
            (t3 - t2).as_secs_f64(),
            learned.merges.len()
        );
        if !with_reference {
            return;
        }
        let failed = Arc::new(Mutex::new(None));
        let t0 = Instant::now();
        let ours = tokenize::bpe::train(&config, texts.iter().cloned(), &failed).expect("ours");
        let t1 = Instant::now();
        let reference = tokenize::bpe::train_reference(&config, texts.iter().cloned(), &failed)
            .expect("reference");
        let t2 = Instant::now();
        println!(
            "whole training: ours {:.3} s, tokenizers 0.22 {:.3} s; tokenizer.json {}",
            (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64(),
            if ours.json == reference.json {
                "identical"
            } else {
                "DIFFERENT"
            }
        );
        if ours.json != reference.json {
            std::fs::write("ours.json", &ours.json).expect("writing ours.json");
            std::fs::write("reference.json", &reference.json).expect("writing reference.json");
        }
    });
}
