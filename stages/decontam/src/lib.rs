//! Stage `decontam`: removes training documents that contain text of evaluation sets.
//!
//! Two parts, as datatrove's `NGramsDecontIndexer` and `NGramsDecontFilter`:
//! - the `index` phase ([`index_step`]) reads evaluation sets (JSONL or Parquet files of
//!   text fields) and writes the sorted hashes of every word n-gram in them (13 words by
//!   default, as GPT-3's decontamination; datatrove's default is 12) to one index file
//!   ([`index`]);
//! - the filter ([`Decontam`], a per-document stage) loads that file once per process,
//!   shares it among the threads, and looks up every n-gram of each document. In `drop`
//!   mode (datatrove's) a document with any indexed n-gram is dropped as
//!   `contaminated`; in `cut` mode (GPT-3's) the matching spans and `cut_margin_chars`
//!   around them are cut out, pieces shorter than `min_piece_chars` are discarded, and a
//!   document left in more than `max_pieces` pieces, or with none, is dropped.
//!
//! Words are folded as [`words`] describes. Stats count the documents each evaluation
//! set caught (`contaminated_<set>`), and in `cut` mode the documents cut
//! (`decontam_cut_documents`) and the bytes removed (`decontam_cut_bytes`).

pub mod index;
pub mod words;

use std::cell::RefCell;
use std::sync::Arc;

use pipeline::shard::ShardOptions;
use pipeline::{
    Document, DocumentSource, Error, Report, Result, RunOptions, Stage, Step, Storage, Verdict,
};
use serde::{Deserialize, Serialize};

pub use index::Index;
use words::{Word, ngram_hash, words_into};

/// The drop reason of a contaminated document.
pub const REASON: &str = "contaminated";
/// Step name of the index phase.
pub const INDEX_STEP: &str = "decontam-index";

/// What the filter does with a contaminated document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Drop it (datatrove's `NGramsDecontFilter`).
    #[default]
    Drop,
    /// Cut the matching spans out (GPT-3's procedure, Brown et al. 2020, appendix C).
    Cut,
}

/// Configuration of the decontam stage (`[config.decontam]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Words per n-gram: 13, GPT-3's choice (datatrove's default is 12). The index and
    /// the filter must agree.
    pub ngram: usize,
    /// The index the filter reads: an index folder (the `decontam.index` step's output,
    /// or in a pipeline file that step's name), or its `ngrams.bin`.
    pub index: Option<String>,
    /// Fields of an evaluation record whose texts are joined, in this order, into the
    /// text that is indexed (`["question", "answer"]` also catches n-grams that span
    /// the two, as datatrove's `find_overlap_ngrams`). Empty: every string field (and
    /// list of strings) on its own.
    pub fields: Vec<String>,
    pub mode: Mode,
    /// `cut`: characters removed on each side of a matching span (GPT-3: 200).
    pub cut_margin_chars: usize,
    /// `cut`: pieces left shorter than this are discarded (GPT-3: 200).
    pub min_piece_chars: usize,
    /// `cut`: a document split into more pieces is dropped (GPT-3: 10).
    pub max_pieces: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            ngram: 13,
            index: None,
            fields: Vec::new(),
            mode: Mode::Drop,
            cut_margin_chars: 200,
            min_piece_chars: 200,
            max_pieces: 10,
        }
    }
}

impl Config {
    fn check(&self) -> Result<()> {
        if self.ngram == 0 || self.ngram > 64 {
            return Err(config_error(format!(
                "ngram = {}: give 1 to 64 words",
                self.ngram
            )));
        }
        Ok(())
    }
}

fn config_error(message: String) -> Error {
    Error::Config {
        url: "[config.decontam]".into(),
        message,
    }
}

/// The filter: a loaded index and what to do with a match.
#[derive(Debug, Clone)]
pub struct Decontam {
    index: Arc<Index>,
    config: Config,
    /// `contaminated_<set>` for each set (stats names live as long as the stage).
    set_counts: Vec<&'static str>,
}

thread_local! {
    static WORDS: RefCell<Vec<Word>> = const { RefCell::new(Vec::new()) };
}

impl Decontam {
    /// The filter over `index`; its n must be `config.ngram`.
    pub fn new(index: Arc<Index>, config: Config) -> Result<Self> {
        config.check()?;
        if index.n() != config.ngram {
            return Err(config_error(format!(
                "the index holds {}-grams, the config asks for ngram = {}",
                index.n(),
                config.ngram
            )));
        }
        // Leaked once per stage built: a handful of short names per process.
        let set_counts = index
            .names()
            .iter()
            .map(|n| &*Box::leak(format!("contaminated_{n}").into_boxed_str()))
            .collect();
        Ok(Decontam {
            index,
            config,
            set_counts,
        })
    }

    /// The first word of each n-gram of `words` found in the index, with its set.
    fn hits(&self, words: &[Word]) -> Vec<(usize, u16)> {
        let n = self.config.ngram;
        if words.len() < n {
            return Vec::new();
        }
        let mut hits = Vec::new();
        for i in 0..=words.len() - n {
            if let Some(set) = self.index.lookup(ngram_hash(&words[i..i + n])) {
                hits.push((i, set));
                if self.config.mode == Mode::Drop {
                    break;
                }
            }
        }
        hits
    }

    /// What happens to `text`: `None` keeps it as it is; `Some(None)` drops it;
    /// `Some(Some(t))` keeps `t` (cut mode). Also the sets that matched.
    pub fn judge(&self, text: &str) -> (Option<Option<String>>, Vec<u16>) {
        WORDS.with(|w| {
            let mut words = w.borrow_mut();
            words_into(text, &mut words);
            let hits = self.hits(&words);
            if hits.is_empty() {
                return (None, Vec::new());
            }
            let mut sets: Vec<u16> = hits.iter().map(|h| h.1).collect();
            sets.sort_unstable();
            sets.dedup();
            if self.config.mode == Mode::Drop {
                return (Some(None), sets);
            }
            (Some(self.cut(text, &words, &hits)), sets)
        })
    }

    /// GPT-3's cut: the spans of the hits widened by the margin, removed; the pieces
    /// between them kept when long enough.
    fn cut(&self, text: &str, words: &[Word], hits: &[(usize, u16)]) -> Option<String> {
        let n = self.config.ngram;
        let margin = self.config.cut_margin_chars;
        // Byte spans to remove, merged.
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for &(i, _) in hits {
            let start = back_chars(text, words[i].start, margin);
            let end = forward_chars(text, words[i + n - 1].end, margin);
            match spans.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => spans.push((start, end)),
            }
        }
        let mut pieces = Vec::new();
        let mut at = 0;
        for &(s, e) in spans.iter().chain([(text.len(), text.len())].iter()) {
            let piece = text[at..s].trim();
            if !piece.is_empty() {
                pieces.push(piece);
            }
            at = e;
        }
        if pieces.len() > self.config.max_pieces {
            return None;
        }
        let kept: Vec<&str> = pieces
            .into_iter()
            .filter(|p| p.chars().count() >= self.config.min_piece_chars)
            .collect();
        if kept.is_empty() {
            return None;
        }
        Some(kept.join("\n"))
    }
}

/// The byte offset `k` characters before `at` (or 0).
fn back_chars(text: &str, at: usize, k: usize) -> usize {
    text[..at]
        .char_indices()
        .rev()
        .nth(k.saturating_sub(1))
        .map_or(0, |(i, _)| if k == 0 { at } else { i })
}

/// The byte offset `k` characters after `at` (or the end).
fn forward_chars(text: &str, at: usize, k: usize) -> usize {
    text[at..]
        .char_indices()
        .nth(k)
        .map_or(text.len(), |(i, _)| at + i)
}

impl Stage for Decontam {
    fn name(&self) -> &'static str {
        "decontam"
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        let (outcome, sets) = self.judge(&doc.text);
        for s in sets {
            doc.count(self.set_counts[s as usize], 1);
        }
        match outcome {
            None => Verdict::Keep,
            Some(None) => Verdict::Drop(REASON),
            Some(Some(text)) => {
                doc.count("decontam_cut_documents", 1);
                doc.count(
                    "decontam_cut_bytes",
                    doc.text.len().saturating_sub(text.len()) as u64,
                );
                doc.text = text;
                Verdict::Keep
            }
        }
    }
}

/// The filter step `mill-decontam` runs: the index of `config.index`, loaded once.
pub fn step(storage: &Storage, config: &Config) -> Result<Step> {
    config.check()?;
    let url = config.index.as_deref().ok_or_else(|| {
        config_error("`index` is required: the folder the index phase wrote".into())
    })?;
    let index = Arc::new(Index::load(storage, url)?);
    let hash = pipeline::cli::config_hash(
        "decontam",
        &(
            config.ngram,
            config.mode,
            config.cut_margin_chars,
            config.min_piece_chars,
            config.max_pieces,
            &index.sha256,
        ),
    );
    Ok(Step {
        name: "decontam".into(),
        stages: vec![Box::new(Decontam::new(index, config.clone())?)],
        source: Box::new(DocumentSource::default()),
        config_hash: hash,
        shard: ShardOptions::default(),
        partition: None,
        per_input: None,
    })
}

/// The index phase: every evaluation file under `opts.input` into
/// `<opts.output>/ngrams.bin` and `index.json`, as one unit (task 0), redone when the
/// listing or the config changes.
pub fn index_step(storage: &Storage, opts: &RunOptions, config: &Config) -> Result<Report> {
    config.check()?;
    let hash = pipeline::cli::config_hash("decontam-index", &(config.ngram, &config.fields));
    let (report, _) =
        pipeline::runner::run_over_listing(INDEX_STEP, "index", &hash, storage, opts, || {
            let files = storage.list(&opts.input)?;
            let (index, manifest, stats) =
                index::build(storage, &files, config.ngram, &config.fields)?;
            storage.put(&opts.output.join(index::INDEX_FILE), &index.to_bytes())?;
            let json =
                serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Usage(e.to_string()))?;
            storage.put(&opts.output.join(index::MANIFEST_FILE), &json)?;
            tracing::info!(
                ngrams = manifest.ngrams,
                memory_bytes = manifest.memory_bytes,
                sets = manifest.sets.len(),
                "decontamination index written"
            );
            let outputs = vec![index::INDEX_FILE.into(), index::MANIFEST_FILE.into()];
            Ok(((), pipeline::UnitDone { outputs, stats }))
        })?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVAL: &str = "Which planet in our solar system has the longest day, measured from one sunrise to the next sunrise?";

    fn filter(mode: Mode) -> Decontam {
        let entries = words::ngram_hashes(EVAL, 13)
            .into_iter()
            .map(|h| (h, 0))
            .collect();
        let index = Index::new(13, vec!["quiz".into()], entries);
        Decontam::new(
            Arc::new(index),
            Config {
                mode,
                cut_margin_chars: 10,
                min_piece_chars: 20,
                ..Config::default()
            },
        )
        .expect("filter")
    }

    #[test]
    fn drop_mode_finds_an_eval_question_in_other_words() {
        let f = filter(Mode::Drop);
        let doc = "Quiz night! WHICH planet in our Solar System has the longest day — measured from one sunrise to the next? Answers below.";
        assert_eq!(f.judge(doc), (Some(None), vec![0]));
        assert_eq!(f.judge("Which planet has the longest day?").0, None);
    }

    #[test]
    fn cut_mode_removes_the_span_and_keeps_long_pieces() {
        let f = filter(Mode::Cut);
        let before = "This part of the page talks about the weather on Mars and why it is so cold.";
        let after = "Another long part of the page explains how the rovers keep warm at night.";
        let doc = format!("{before} {EVAL} {after}");
        let (outcome, sets) = f.judge(&doc);
        assert_eq!(sets, [0]);
        let kept = outcome.expect("contaminated").expect("pieces left");
        assert!(!kept.contains("longest day"), "{kept}");
        assert!(
            kept.starts_with("This part") && kept.ends_with("at night."),
            "{kept}"
        );
        // Nothing long enough left: dropped.
        assert_eq!(f.judge(EVAL).0, Some(None));
    }

    #[test]
    fn the_index_must_have_the_configured_n() {
        let index = Index::new(12, vec!["x".into()], vec![(1, 0)]);
        assert!(Decontam::new(Arc::new(index), Config::default()).is_err());
    }
}
