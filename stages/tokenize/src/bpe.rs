//! The tokenizer: a byte-level BPE trained as HuggingFace `tokenizers` 0.22 trains it
//! (by our parallel trainer, [`crate::trainer`], held to the 0.22 trainer byte for byte)
//! and saved by 0.22, and the encoder that turns text into ids.
//!
//! Pre-tokenisation is the o200k split (GPT-4o, also Llama 4 and gpt-oss): letter runs
//! with case-aware boundaries and an optional leading non-letter (so ` the`, `(foo`
//! and `_bar` are single pre-tokens, as code wants), digits in groups of at most
//! three, punctuation runs with their trailing newlines, and whitespace runs kept
//! apart from the next word except for one space. Every Unicode script is covered by
//! `\p{L}`/`\p{M}`; scripts without spaces (CJK, Thai) become long letter runs that the
//! BPE merges split. Then GPT-2's byte-to-unicode mapping, so any byte string has a
//! spelling and no text is ever unknown. No normaliser: decode(encode(text)) == text,
//! byte for byte.
//!
//! Encoding goes through our own encoder ([`crate::native`], "native"), which reads the
//! vocabulary and merges of the same `tokenizer.json` in a sixteenth of the time the
//! `tokenizers` 1.0 reader takes (stages/tokenize/README.md). The `tokenizers` 1.0 release candidate ("fast") and the
//! 0.22 encoder ("reference") stay available; the tests prove the three agree.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, OffsetReferential, OffsetType,
    PostProcessorWrapper, PreTokenizer, PreTokenizerWrapper, SplitDelimiterBehavior, TokenizerImpl,
};

use pipeline::{Error, Result};

use crate::native::Native;
use crate::trainer;

/// The o200k pre-tokenisation pattern, exactly as GPT-4o's `tokenizer.json` spells it
/// (the fast encoder recognises this spelling and runs a compiled grammar for it).
pub const O200K_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Code points that the `tokenizers` 1.0 grammar and the 0.22 regex split differently
/// under [`O200K_PATTERN`], as inclusive ranges: letters of Unicode 16 and 17 that the
/// 0.22 regex engine (Oniguruma) does not know yet (CJK extension J, Tulu-Tigalari,
/// Garay, …), and `ſ`, which the 0.22 regex takes as the `s` of `'s`. The test
/// `splits_differ_exactly_on_these_code_points` splits every code point in several
/// contexts with both and fails when this list is not exactly where they differ.
pub const SPLIT_DIFFERS: [(u32, u32); 28] = [
    (0x017F, 0x017F),
    (0x088F, 0x088F),
    (0x0C5C, 0x0C5C),
    (0x0CDC, 0x0CDC),
    (0x1ACF, 0x1ADD),
    (0x1AE0, 0x1AEB),
    (0xA7CE, 0xA7CF),
    (0xA7D2, 0xA7D2),
    (0xA7D4, 0xA7D4),
    (0xA7F1, 0xA7F1),
    (0x10940, 0x10959),
    (0x10EC5, 0x10EC7),
    (0x10EFA, 0x10EFB),
    (0x11B60, 0x11B67),
    (0x11DB0, 0x11DDB),
    (0x11DE0, 0x11DE9),
    (0x16EA0, 0x16EB8),
    (0x16EBB, 0x16ED3),
    (0x16FF2, 0x16FF6),
    (0x187F8, 0x187FF),
    (0x18D09, 0x18D1E),
    (0x18D80, 0x18DF2),
    (0x1E6C0, 0x1E6DE),
    (0x1E6E0, 0x1E6F5),
    (0x1E6FE, 0x1E6FF),
    (0x2B73A, 0x2B73F),
    (0x2CEA2, 0x2CEAD),
    (0x323B0, 0x33479),
];

/// Whether `text` holds a code point of [`SPLIT_DIFFERS`]: such texts are split by
/// the 0.22 regex, in training and in encoding, so that the tokenizer and its ids stay
/// those of `tokenizers` 0.22 and Python.
pub fn splits_differ(text: &str) -> bool {
    // U+017F, the first listed, and everything after it start with a byte of 0xC5 or
    // more; such a byte always starts a character. Only those are decoded.
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(skip) = bytes[at..].iter().position(|&b| b >= 0xC5) {
        let Some(c) = text[at + skip..].chars().next() else {
            return false;
        };
        let code = c as u32;
        let i = SPLIT_DIFFERS.partition_point(|&(_, hi)| hi < code);
        if i < SPLIT_DIFFERS.len() && SPLIT_DIFFERS[i].0 <= code {
            return true;
        }
        at += skip + c.len_utf8();
    }
    false
}

/// The o200k split of the 0.22 regex.
pub(crate) fn reference_split() -> Result<Split> {
    Split::new(
        SplitPattern::Regex(O200K_PATTERN.to_string()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(tk_err("compiling the o200k pattern"))
}

/// Where the 0.22 regex cuts `text`, as byte ranges.
pub(crate) fn reference_cuts(split: &Split, text: &str) -> Result<Vec<(usize, usize)>> {
    let mut pre = tokenizers::PreTokenizedString::from(text);
    split
        .pre_tokenize(&mut pre)
        .map_err(tk_err("pre-tokenising a document"))?;
    Ok(pre
        .get_splits(OffsetReferential::Original, OffsetType::Byte)
        .into_iter()
        .map(|(_, cut, _)| cut)
        .collect())
}

/// The o200k split through the 1.0 encoder's compiled grammar.
pub(crate) fn fast_split() -> Result<tokenizers_fast::pre_tokenizers::split::Split> {
    let split = tokenizers_fast::pre_tokenizers::split::Split::native(
        tokenizers_fast::pre_tokenizers::split::SplitPattern::Regex(O200K_PATTERN.to_string()),
        tokenizers_fast::SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| Error::Usage(format!("building the o200k pre-tokeniser: {e}")))?;
    if split.grammar().is_none() {
        return Err(Error::Usage(
            "the tokenizers 1.0 encoder has no compiled grammar for the o200k pattern".into(),
        ));
    }
    Ok(split)
}

/// The end-of-document token placed after every document.
pub const END_OF_DOCUMENT: &str = "<|endoftext|>";

type Trainable = TokenizerImpl<
    ModelWrapper,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// How the vocabulary is trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Entries in the vocabulary, special tokens and the 256 byte tokens included.
    /// Default 256,000: AI21's Jurassic-1 vocabulary size.
    pub vocab_size: usize,
    /// A pair must occur this often to be merged (HuggingFace's trainers and
    /// GPT-NeoX's 50k tokenizer use 2).
    pub min_frequency: u64,
    /// Bytes of document text to train on. Shards are taken in a seeded order until
    /// the sample holds this much.
    pub sample_bytes: u64,
    /// Seed of the shard order.
    pub seed: u64,
    /// Special tokens, given ids 0, 1, … in this order; the first is the
    /// end-of-document token.
    pub special_tokens: Vec<String>,
    /// Longest token in characters (none: no limit, as GPT-2 and Llama 3 were trained).
    pub max_token_length: Option<usize>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            vocab_size: 256_000,
            min_frequency: 2,
            sample_bytes: 1 << 30,
            seed: 0,
            special_tokens: vec![
                END_OF_DOCUMENT.to_string(),
                "<|padding|>".to_string(),
                "<|begin_of_text|>".to_string(),
            ],
            max_token_length: None,
        }
    }
}

impl TrainConfig {
    /// Checks what the trainer would otherwise reject late or silently.
    pub fn validate(&self) -> Result<()> {
        let floor = 256 + self.special_tokens.len();
        if self.vocab_size < floor {
            return Err(Error::Usage(format!(
                "vocab_size {} is below the 256 byte tokens plus {} special tokens",
                self.vocab_size,
                self.special_tokens.len()
            )));
        }
        if self.special_tokens.is_empty() {
            return Err(Error::Usage(
                "special_tokens must name at least the end-of-document token".into(),
            ));
        }
        Ok(())
    }
}

fn tk_err(what: &str) -> impl Fn(tokenizers::Error) -> Error + '_ {
    move |e| Error::Usage(format!("{what}: {e}"))
}

/// An untrained tokenizer with our pre-tokeniser and decoder.
fn untrained() -> Result<Trainable> {
    let split = reference_split()?;
    let pre = Sequence::new(vec![
        PreTokenizerWrapper::Split(split),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, false)),
    ]);
    let mut tok = Trainable::new(ModelWrapper::BPE(BPE::default()));
    tok.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(pre)));
    tok.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::default())));
    Ok(tok)
}

/// What training produced.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The `tokenizer.json` text.
    pub json: String,
    /// Entries in the vocabulary (special tokens included).
    pub vocab_size: usize,
}

fn stopped_early(failed: &Arc<Mutex<Option<Error>>>) -> Result<()> {
    match failed
        .lock()
        .map_err(|_| Error::Usage("reader poisoned".into()))?
        .take()
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn special_tokens(config: &TrainConfig) -> Vec<AddedToken> {
    config
        .special_tokens
        .iter()
        .map(|t| AddedToken::from(t.clone(), true))
        .collect()
}

/// The `tokenizer.json` of a trained tokenizer.
fn trained(tok: &Trainable) -> Result<Trained> {
    let json = tok
        .to_string(true)
        .map_err(tk_err("serialising tokenizer.json"))?;
    Ok(Trained {
        vocab_size: tok.get_vocab_size(true),
        json,
    })
}

/// Trains on `texts` with our trainer ([`crate::trainer`]): the tokenizer
/// [`train_reference`] makes, on every thread of the pool. The iterator may stop early
/// by storing an error in `failed`.
pub fn train<I>(
    config: &TrainConfig,
    texts: I,
    failed: &Arc<Mutex<Option<Error>>>,
) -> Result<Trained>
where
    I: Iterator<Item = String> + Send,
{
    train_from(config, &trainer::IterBatches::new(texts), failed)
}

/// [`train`] on texts the counting threads take in batches (the sample's reader
/// decodes shards on those threads); the batches may stop early by storing an error in
/// `failed`.
pub fn train_from<B: trainer::TextBatches + ?Sized>(
    config: &TrainConfig,
    batches: &B,
    failed: &Arc<Mutex<Option<Error>>>,
) -> Result<Trained> {
    config.validate()?;
    let start = std::time::Instant::now();
    let words = trainer::count_batches(batches)?;
    stopped_early(failed)?;
    tracing::info!(
        words = words.len(),
        seconds = start.elapsed().as_secs_f64(),
        "words counted"
    );
    let start = std::time::Instant::now();
    let learned = trainer::learn(
        &words,
        &trainer::LearnConfig {
            vocab_size: config.vocab_size,
            min_frequency: config.min_frequency,
            special_tokens: &config.special_tokens,
            max_token_length: config.max_token_length,
        },
    );
    drop(words);
    tracing::info!(
        merges = learned.merges.len(),
        seconds = start.elapsed().as_secs_f64(),
        "merges learned"
    );
    let merges: Vec<(String, String)> = learned
        .merges
        .iter()
        .map(|&(a, b)| {
            (
                learned.tokens[a as usize].clone(),
                learned.tokens[b as usize].clone(),
            )
        })
        .collect();
    let vocab: Vocab = learned
        .tokens
        .into_iter()
        .enumerate()
        .map(|(id, token)| (token, id as u32))
        .collect();
    let model = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(tk_err("building the trained BPE"))?;
    let mut tok = untrained()?;
    tok.with_model(ModelWrapper::BPE(model));
    tok.add_special_tokens(&special_tokens(config));
    trained(&tok)
}

/// Trains on `texts` with the `tokenizers` 0.22 trainer, the reference [`train`] is
/// held to. The iterator may stop early by storing an error in `failed`.
pub fn train_reference<I>(
    config: &TrainConfig,
    texts: I,
    failed: &Arc<Mutex<Option<Error>>>,
) -> Result<Trained>
where
    I: Iterator<Item = String> + Send,
{
    config.validate()?;
    let trainer = BpeTrainerBuilder::new()
        .vocab_size(config.vocab_size)
        .min_frequency(config.min_frequency)
        .special_tokens(special_tokens(config))
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .max_token_length(config.max_token_length)
        .show_progress(false)
        .build();
    let mut tok = untrained()?;
    let mut trainer = tokenizers::models::TrainerWrapper::BpeTrainer(trainer);
    let result = tok.train(&mut trainer, texts);
    stopped_early(failed)?;
    result.map_err(tk_err("training the BPE"))?;
    trained(&tok)
}

/// Which implementation encodes. All three give the same ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderKind {
    /// Ours ([`crate::native`]): loads in a sixteenth of the time `tokenizers` 1.0 takes
    /// and, with warm caches, encodes as fast. A `tokenizer.json` it does not take (not laid out as this stage
    /// trains them) is encoded by `tokenizers` 1.0 instead, with a warning.
    #[default]
    Native,
    /// `tokenizers` 1.0 (release candidate).
    Fast,
    /// `tokenizers` 0.22, the release that trained the vocabulary.
    Reference,
}

/// A loaded tokenizer that turns text into ids and back: ours, or `tokenizers` (1.0
/// encoding when chosen, 0.22 for the rest: the texts the 1.0 split cuts differently,
/// decoding and questions about the vocabulary).
pub struct Encoder {
    engine: Engine,
}

enum Engine {
    Native(Box<Native>),
    Tokenizers {
        fast: Option<tokenizers_fast::pipeline::PipelineTokenizer>,
        reference: Box<tokenizers::Tokenizer>,
    },
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let engine = match &self.engine {
            Engine::Native(_) => "native",
            Engine::Tokenizers { fast: Some(_), .. } => "fast",
            Engine::Tokenizers { fast: None, .. } => "reference",
        };
        f.debug_struct("Encoder").field("engine", &engine).finish()
    }
}

/// The 1.0 reader's tokenizer. Files written by older releases are upgraded to the
/// canonical form the 1.0 reader takes.
fn load_fast(
    json: &str,
) -> std::result::Result<tokenizers_fast::pipeline::PipelineTokenizer, String> {
    match tokenizers_fast::from_json(json) {
        Ok(t) => Ok(t),
        Err(first) => {
            let canonical =
                tokenizers_fast::canonicalize_str(json).map_err(|_| first.to_string())?;
            tokenizers_fast::from_json(&canonical).map_err(|e| e.to_string())
        }
    }
}

fn load_reference(json: &str) -> std::result::Result<tokenizers::Tokenizer, String> {
    let mut reference: tokenizers::Tokenizer =
        json.parse().map_err(|e: tokenizers::Error| e.to_string())?;
    reference.set_encode_special_tokens(true);
    Ok(reference)
}

impl Encoder {
    /// Loads a `tokenizer.json` (`url` names it in errors).
    pub fn load(json: &str, kind: EncoderKind, url: &str) -> Result<Encoder> {
        let bad = |e: String| Error::Config {
            url: url.to_string(),
            message: format!("not a usable tokenizer.json: {e}"),
        };
        let kind = match kind {
            EncoderKind::Native => match Native::from_json(json) {
                Ok(native) => {
                    return Ok(Encoder {
                        engine: Engine::Native(Box::new(native)),
                    });
                }
                Err(why) => {
                    tracing::warn!(
                        tokenizer = url,
                        "not laid out as mill-tokenize trains them ({why}): encoding with tokenizers 1.0"
                    );
                    EncoderKind::Fast
                }
            },
            other => other,
        };
        // The two readers each parse the whole file (10 MB at 256,000 entries, about 0.7
        // and 1.4 s of CPU here): side by side when the pool has two threads.
        let (reference, fast) = rayon::join(
            || load_reference(json).map_err(bad),
            || -> Result<Option<tokenizers_fast::pipeline::PipelineTokenizer>> {
                match kind {
                    EncoderKind::Fast => load_fast(json).map(Some).map_err(bad),
                    _ => Ok(None),
                }
            },
        );
        Ok(Encoder {
            engine: Engine::Tokenizers {
                fast: fast?,
                reference: Box::new(reference?),
            },
        })
    }

    /// Appends the ids of `text` to `out`. A special token's spelling inside a
    /// document is encoded as text, never as the special token.
    /// A text holding a code point of [`SPLIT_DIFFERS`] is cut as 0.22 cuts it.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> std::result::Result<(), String> {
        match &self.engine {
            Engine::Native(native) => native.encode_into(text, out),
            Engine::Tokenizers {
                fast: Some(tok), ..
            } if !splits_differ(text) => {
                let options = tokenizers_fast::pipeline::EncodeOptions {
                    add_special_tokens: false,
                    encode_special_tokens: true,
                    ..Default::default()
                };
                let mut ids = Vec::with_capacity(text.len() / 3);
                tok.encode_into(text, &options, &mut ids)
                    .map_err(|e| e.to_string())?;
                out.extend_from_slice(tokenizers_fast::pipeline::PipelineToken::cast_slice(&ids));
                Ok(())
            }
            Engine::Tokenizers { reference, .. } => {
                let enc = reference.encode(text, false).map_err(|e| e.to_string())?;
                out.extend_from_slice(enc.get_ids());
                Ok(())
            }
        }
    }

    /// The text of `ids` (special tokens included; ids outside the vocabulary are
    /// skipped, as `tokenizers` skips them).
    pub fn decode(&self, ids: &[u32]) -> std::result::Result<String, String> {
        match &self.engine {
            Engine::Native(native) => Ok(native.decode(ids)),
            Engine::Tokenizers { reference, .. } => {
                reference.decode(ids, false).map_err(|e| e.to_string())
            }
        }
    }

    /// The id of a token, if the vocabulary has it.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        match &self.engine {
            Engine::Native(native) => native.token_id(token),
            Engine::Tokenizers { reference, .. } => reference.token_to_id(token),
        }
    }

    /// Entries in the vocabulary, special tokens included.
    pub fn vocab_size(&self) -> usize {
        match &self.engine {
            Engine::Native(native) => native.vocab_size(),
            Engine::Tokenizers { reference, .. } => reference.get_vocab_size(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;
    use tokenizers_fast::pipeline::{PreTokenizer as _, PreTokenizerScratch};

    #[test]
    fn splits_differ_exactly_on_these_code_points() {
        let reference = reference_split().expect("0.22 split");
        let fast = fast_split().expect("1.0 split");
        // Each code point between letters of each case, digits, punctuation, spaces,
        // newlines, an apostrophe, a combining mark and itself.
        let contexts = [
            "a{}a",
            "A{}A",
            "A{}a",
            "a{}A",
            " {}a",
            " {}A",
            "1{}1",
            "{}{}{}{}",
            ".{}.",
            "\n{}\n",
            " {} ",
            "a'{}",
            "a'{}a",
            "{}'s",
            "{}\t",
            "x{}1",
            "(a{}",
            " {}{}.",
            "ab{}cd",
            "AB{}CD",
            "\u{301}{}",
            "{}\u{301}",
            "{}  x",
            "{}\r\n",
        ];
        let differ: Vec<u32> = (0u32..=0x10FFFF)
            .into_par_iter()
            .filter_map(char::from_u32)
            .map_init(
                || (PreTokenizerScratch::default(), Vec::new()),
                |(scratch, spans), c| {
                    let one = c.to_string();
                    let differs = contexts.iter().any(|context| {
                        let text = context.replace("{}", &one);
                        spans.clear();
                        fast.pre_tokenize(&text, scratch, spans).expect("1.0 split");
                        let cuts: Vec<(usize, usize)> = spans
                            .iter()
                            .map(|s| (s.start as usize, s.end as usize))
                            .collect();
                        cuts != reference_cuts(&reference, &text).expect("0.22 split")
                    });
                    (c as u32, differs)
                },
            )
            .filter(|&(_, differs)| differs)
            .map(|(c, _)| c)
            .collect();
        let listed: Vec<u32> = SPLIT_DIFFERS.iter().flat_map(|&(a, b)| a..=b).collect();
        assert_eq!(
            differ, listed,
            "SPLIT_DIFFERS is not where the two splits differ"
        );
        for c in listed.iter().filter_map(|&c| char::from_u32(c)) {
            assert!(splits_differ(&format!("a {c} b")), "{:#x}", c as u32);
        }
        assert!(!splits_differ("plain ascii: it's"));
        assert!(!splits_differ("Ça s'écrit; 東京; \u{17e}\u{180}"));
    }
}
