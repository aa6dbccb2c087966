//! Stage `quality`: the published heuristic quality rules.
//!
//! In FineWeb's order: Gopher repetition, Gopher quality, C4 (which also removes bad
//! lines), FineWeb's own rules. Each rule is a named drop reason with its published
//! threshold as the default; each family can be switched off or retuned in the config.
//! Word splitting is described in [`words`].

mod punctuation;
pub mod rules;
pub mod words;

use pipeline::shard::ShardOptions;
use pipeline::{Document, DocumentSource, Stage, Step, Verdict};
use serde::{Deserialize, Serialize};

pub use rules::{C4, FineWeb, GopherQuality, GopherRepetition};

/// Configuration of the quality stage (`--config`, TOML): one table per rule family.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub gopher_repetition: GopherRepetition,
    pub gopher_quality: GopherQuality,
    pub c4: C4,
    pub fineweb: FineWeb,
}

/// The quality stage.
#[derive(Debug, Clone)]
pub struct Quality {
    config: Config,
}

impl Quality {
    pub fn new(config: Config) -> Self {
        Quality { config }
    }

    /// The reason the first broken rule gives, after C4's line removal (which rewrites
    /// `text` in place); `None` keeps the document.
    pub fn judge(&self, text: &mut String) -> Option<&'static str> {
        let c = &self.config;
        // One word split serves every rule until C4 rewrites the text.
        let mut word_count = None;
        if c.gopher_repetition.enabled || c.gopher_quality.enabled {
            let words = words::split_words(text);
            word_count = Some(words.len());
            if c.gopher_repetition.enabled
                && let Some(reason) = c.gopher_repetition.check_words(text, &words)
            {
                return Some(reason);
            }
            if c.gopher_quality.enabled
                && let Some(reason) = c.gopher_quality.check_words(text, &words)
            {
                return Some(reason);
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
            return c.fineweb.check_words(text, word_count);
        }
        None
    }
}

impl Stage for Quality {
    fn name(&self) -> &'static str {
        "quality"
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        match self.judge(&mut doc.text) {
            Some(reason) => Verdict::Drop(reason),
            None => Verdict::Keep,
        }
    }
}

/// The step `mill-quality` runs.
pub fn step(config: &Config) -> Step {
    Step {
        name: "quality".into(),
        stages: vec![Box::new(Quality::new(config.clone()))],
        source: Box::new(DocumentSource::default()),
        config_hash: pipeline::cli::config_hash("quality", config),
        shard: ShardOptions::default(),
        partition: None,
        per_input: None,
    }
}
