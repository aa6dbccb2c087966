//! Stage `quality`: the published heuristic quality rules.
//!
//! In FineWeb's order: Gopher repetition, Gopher quality, C4 (which also removes bad
//! lines), FineWeb's own rules. Each rule is a named drop reason with its published
//! threshold as the default; each family can be switched off or retuned in the config.
//! Word splitting is described in [`words`].
//!
//! `languages = "fineweb2"` applies FineWeb-2's settings by each document's language
//! (see [`Config::languages`]); a language without settings gets the configured rules.

mod mecab;
mod punctuation;
pub mod rules;
pub mod segment;
mod thai;
mod vietnamese;
pub mod words;

use std::collections::HashMap;

use pipeline::languages::{self, Settings, Table};
use pipeline::shard::ShardOptions;
use pipeline::{Document, DocumentSource, Stage, Step, Storage, Verdict};
use serde::{Deserialize, Serialize};

pub use rules::{C4, FineWeb, GopherQuality, GopherRepetition};
pub use segment::Segmenter;

/// Configuration of the quality stage (`--config`, TOML): one table per rule family.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub gopher_repetition: GopherRepetition,
    pub gopher_quality: GopherQuality,
    pub c4: C4,
    pub fineweb: FineWeb,
    /// Per-language settings, as FineWeb-2 applies them: `"fineweb2"` (its 1,929
    /// configs, shipped with the project) or the address of a table in the same layout.
    /// A document's language (`language` and `language_script`, or a lid.176 code
    /// mapped) picks its row; the row's thresholds and stopwords replace those of the
    /// Gopher repetition, Gopher quality and FineWeb rules, with FineWeb-2's global
    /// changes (paragraph and repeated-line-character checks off, `short_line_thr`
    /// off, `char_duplicates_ratio` 0.1, no C4 rules). Unset: the rules above for
    /// every document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub languages: Option<String>,
    /// What a document whose language has no row gets, with `languages` set (counted
    /// as `quality_language_fallback`): `"rules"` (the rules above, as for English in
    /// FineWeb-2's sense: English has no FineWeb-2 config) or `"drop"` (dropped as
    /// `no_language_settings`).
    #[serde(skip_serializing_if = "Fallback::is_rules")]
    pub language_fallback: Fallback,
}

/// See [`Config::language_fallback`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    #[default]
    Rules,
    Drop,
}

impl Fallback {
    fn is_rules(&self) -> bool {
        *self == Fallback::Rules
    }
}

/// The counter of documents whose language has no row of the table.
pub const FALLBACK_COUNT: &str = "quality_language_fallback";

/// The rule families one document is judged by.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub gopher_repetition: GopherRepetition,
    pub gopher_quality: GopherQuality,
    pub c4: C4,
    pub fineweb: FineWeb,
    /// How the Gopher and FineWeb rules count words.
    pub segmenter: Segmenter,
}

impl Rules {
    fn of(c: &Config) -> Rules {
        Rules {
            gopher_repetition: c.gopher_repetition.clone(),
            gopher_quality: c.gopher_quality.clone(),
            c4: c.c4.clone(),
            fineweb: c.fineweb.clone(),
            segmenter: Segmenter::Spaced,
        }
    }

    /// FineWeb-2's rules for one language: its row over `base`, with the changes its
    /// pipeline makes to every language (`fineweb-2-pipeline.py`; the FineWeb-2 README:
    /// "we removed `short_line_thr` and changed `char_dup_ratio` from 0.01 to 0.1",
    /// paragraph checks off, no C4). A threshold datatrove reads as off (0, or -1 for
    /// the punctuation share) is off here too. Words are counted by the segmenter
    /// standing for datatrove's tokenizer of the language ([`Segmenter::for_label`]).
    pub fn fineweb2(base: &Config, s: &Settings) -> Rules {
        let off = f64::INFINITY;
        let or_off = |v: f64| if v == 0.0 { off } else { v };
        Rules {
            gopher_repetition: GopherRepetition {
                dup_para_frac: off,
                dup_para_char_frac: off,
                dup_line_frac: or_off(s.dup_line_frac),
                dup_line_char_frac: off,
                // datatrove tests the n-gram shares without a falsy check: a 0 drops any
                // repeat (two configs have one).
                top_ngram_char_frac: s.top_n_grams.to_vec(),
                dup_ngram_char_frac: s.dup_n_grams.to_vec(),
                ..base.gopher_repetition.clone()
            },
            gopher_quality: GopherQuality {
                min_avg_word_length: s.min_avg_word_length,
                max_avg_word_length: or_off(s.max_avg_word_length),
                min_alpha_words_ratio: s.min_alpha_words_ratio,
                min_stop_words: 2,
                stop_words: s.stopwords.clone(),
                ..base.gopher_quality.clone()
            },
            c4: C4 {
                enabled: false,
                ..base.c4.clone()
            },
            fineweb: FineWeb {
                line_punct_thr: s.line_punct_thr,
                short_line_thr: off,
                char_duplicates_ratio: 0.1,
                new_line_ratio: or_off(s.new_line_ratio),
                ..base.fineweb.clone()
            },
            segmenter: Segmenter::for_label(&s.label),
        }
    }
}

/// The quality stage.
#[derive(Debug, Clone)]
pub struct Quality {
    rules: Rules,
    /// With `languages`: each label's rules.
    by_language: Option<HashMap<String, Rules>>,
    fallback: Fallback,
}

impl Quality {
    /// The stage; a `languages` table at an address is read through `storage`.
    pub fn new(storage: &Storage, config: &Config) -> pipeline::Result<Self> {
        let by_language: Option<HashMap<String, Rules>> = match &config.languages {
            None => None,
            Some(spec) => {
                let table = Table::load(storage, spec)?;
                Some(
                    table
                        .iter()
                        .map(|s| (s.label.clone(), Rules::fineweb2(config, s)))
                        .collect(),
                )
            }
        };
        // A segmenter that needs a dictionary fails here, not on its first document.
        let mut segmenters: Vec<Segmenter> = Vec::new();
        for r in by_language.iter().flat_map(HashMap::values) {
            if !segmenters.contains(&r.segmenter) {
                segmenters.push(r.segmenter);
            }
        }
        for s in segmenters {
            s.ready().map_err(|message| pipeline::Error::Config {
                url: config.languages.clone().unwrap_or_default(),
                message,
            })?;
        }
        Ok(Quality {
            rules: Rules::of(config),
            by_language,
            fallback: config.language_fallback,
        })
    }

    /// The rules of a document's language, or `None` where its language has no row
    /// (and `languages` is set).
    pub fn rules_for(&self, doc: &Document) -> Option<&Rules> {
        match &self.by_language {
            None => Some(&self.rules),
            Some(by) => languages::document_label(doc).and_then(|l| by.get(&l)),
        }
    }

    /// The reason the first broken rule gives, after C4's line removal (which rewrites
    /// `text` in place); `None` keeps the document. The configured rules, whatever the
    /// document's language.
    pub fn judge(&self, text: &mut String) -> Option<&'static str> {
        Self::judge_by(&self.rules, text)
    }

    /// [`Quality::judge`] by the given rules.
    pub fn judge_by(c: &Rules, text: &mut String) -> Option<&'static str> {
        // One word split serves every rule until C4 rewrites the text.
        let mut word_count = None;
        if c.gopher_repetition.enabled || c.gopher_quality.enabled {
            let verdict = c.segmenter.with_words(text, |words| {
                word_count = Some(words.len());
                if c.gopher_repetition.enabled
                    && let Some(reason) = c.gopher_repetition.check_words(text, words)
                {
                    return Some(reason);
                }
                if c.gopher_quality.enabled {
                    return c.gopher_quality.check_words(text, words);
                }
                None
            });
            let verdict = match verdict {
                Ok(v) => v,
                Err(reason) => return Some(reason),
            };
            if verdict.is_some() {
                return verdict;
            }
        }
        if c.c4.enabled {
            match c.c4.apply(text) {
                Err(reason) => return Some(reason),
                Ok(Some(cleaned)) => {
                    *text = cleaned;
                    word_count = None;
                }
                Ok(None) => {}
            }
        }
        if c.fineweb.enabled {
            let words = match word_count {
                Some(n) => n,
                None => match c.segmenter.count(text) {
                    Ok(n) => n,
                    Err(reason) => return Some(reason),
                },
            };
            return c.fineweb.check_words(text, Some(words));
        }
        None
    }
}

impl Stage for Quality {
    fn name(&self) -> &'static str {
        "quality"
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        let rules = match self.rules_for(doc) {
            Some(rules) => rules,
            None => {
                doc.count(FALLBACK_COUNT, 1);
                match self.fallback {
                    Fallback::Rules => &self.rules,
                    Fallback::Drop => return Verdict::Drop("no_language_settings"),
                }
            }
        };
        match Self::judge_by(rules, &mut doc.text) {
            Some(reason) => Verdict::Drop(reason),
            None => Verdict::Keep,
        }
    }
}

/// The step `mill-quality` runs; reads a `languages` table given by address.
pub fn step(storage: &Storage, config: &Config) -> pipeline::Result<Step> {
    Ok(Step {
        name: "quality".into(),
        stages: vec![Box::new(Quality::new(storage, config)?)],
        source: Box::new(DocumentSource::default()),
        config_hash: pipeline::cli::config_hash("quality", config),
        shard: ShardOptions::default(),
        partition: None,
        per_input: None,
    })
}
