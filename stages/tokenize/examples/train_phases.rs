//! Where the `tokenizers` trainer spends its time: counting words (`feed`), everything
//! before the first merge (a vocabulary of the specials and bytes only) and the whole
//! training, each timed on its own on a pool of the given threads, with the pre-tokeniser
//! and trainer settings of `tokenize::bpe::train`.
//!
//! Usage: `train_phases DOCS.jsonl THREADS VOCAB_SIZE`, one JSON string (a document's
//! text) per line.
use std::time::Instant;

use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, PreTokenizer, PreTokenizerWrapper, SplitDelimiterBehavior, Trainer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(
        args.len() == 4,
        "usage: train_phases DOCS.jsonl THREADS VOCAB_SIZE"
    );
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
    pool.install(|| {
        let split = Split::new(
            SplitPattern::Regex(tokenize::bpe::O200K_PATTERN.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .expect("compiling the o200k pattern");
        let pre = PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Split(split),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, false)),
        ]));
        let specials = tokenize::TrainConfig::default().special_tokens;
        // The bytes and the specials only: the trainer stops before its first merge.
        for v in [256 + specials.len(), vocab] {
            let mut trainer = BpeTrainerBuilder::new()
                .vocab_size(v)
                .min_frequency(2)
                .special_tokens(
                    specials
                        .iter()
                        .map(|t| AddedToken::from(t.clone(), true))
                        .collect(),
                )
                .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
                .show_progress(false)
                .build();
            let t0 = Instant::now();
            trainer
                .feed(texts.iter(), |s| {
                    let mut p = tokenizers::PreTokenizedString::from(s);
                    pre.pre_tokenize(&mut p)?;
                    Ok(p.get_splits(
                        tokenizers::OffsetReferential::Original,
                        tokenizers::OffsetType::Byte,
                    )
                    .into_iter()
                    .map(|(s, _, _)| s.to_owned())
                    .collect())
                })
                .expect("feeding the trainer");
            let t1 = Instant::now();
            let mut bpe = BPE::default();
            trainer.train(&mut bpe).expect("training");
            let t2 = Instant::now();
            println!(
                "threads {threads}, vocab_size {v}: feed {:.3} s, train {:.3} s, vocabulary {}",
                (t1 - t0).as_secs_f64(),
                (t2 - t1).as_secs_f64(),
                bpe.get_vocab().len()
            );
        }
    });
}
