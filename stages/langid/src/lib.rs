//! Stage `langid`: fastText language identification, as FineWeb and RefinedWeb do it.
//!
//! Each document's text, newlines turned to spaces (FineWeb's preparation), goes through
//! a fastText language model (lid.176 by default; any fastText `.bin`/`.ftz` language
//! model such as GlotLID works). The top label and its probability fill `language` and
//! `language_score`. The keep rule is datatrove's `LanguageFilter`: with a list of
//! languages, keep a document when one of them scores above its threshold; without a
//! list, keep it when the top language does.
//!
//! FineWeb-2's form is one setting away: `labels = "iso639-3"` writes `language` as an
//! ISO 639-3 code and its script to `language_script` (`cmn`, `Hani`), splitting a
//! GlotLID-style label as datatrove does and mapping lid.176's codes through the
//! documented table `pipeline/data/lid176-labels.tsv`; `min_score_table = "fineweb2"`
//! takes each language's threshold from FineWeb-2's configs.

mod model;

use std::collections::BTreeMap;

use std::sync::Arc;

use pipeline::languages::{self, LANGUAGE_SCRIPT, Table};
use pipeline::shard::ShardOptions;
use pipeline::{
    Column, ColumnKind, Document, DocumentSource, Stage, Step, Storage, Value, Verdict,
};
use serde::{Deserialize, Serialize};

pub use model::{LID176_FTZ_SHA256, Model, SETUP_COMMAND};

/// Prefix of fastText labels.
const LABEL_PREFIX: &str = "__label__";

/// Where scripts/fetch-models.sh caches lid.176.ftz: `models/lid.176.ftz` in the
/// cache directory ([`pipeline::cache`]), whatever the working directory.
pub fn default_model_path() -> std::path::PathBuf {
    pipeline::cache::model_path("lid.176.ftz")
}

/// Configuration of the langid stage (`--config`, TOML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The fastText model: a path or storage URL.
    #[serde(default = "default_model")]
    pub model: String,
    /// Expected SHA-256 of the model file, checked when it loads.
    #[serde(default)]
    pub model_sha256: Option<String>,
    /// Languages to keep, as the model labels them (`en`, `de`, …); empty keeps every
    /// language that clears the threshold.
    #[serde(default)]
    pub languages: Vec<String>,
    /// Minimum score, exclusive. 0.65 is FineWeb's and RefinedWeb's threshold
    /// (datatrove `LanguageFilter(language_threshold=0.65)`).
    #[serde(default = "default_min_score")]
    pub min_score: f64,
    /// Per-language thresholds that replace `min_score` (FineWeb-2 tunes them per
    /// language).
    #[serde(default)]
    pub min_score_by_language: BTreeMap<String, f64>,
    /// Per-language thresholds from a table of language settings, under
    /// `min_score_by_language` and over `min_score`: `"fineweb2"` (FineWeb-2's
    /// `language_score` of each language, shipped with the project) or the address of
    /// a table in the same layout. Looked up by the label in FineWeb-2's form (lid.176's
    /// codes mapped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score_table: Option<String>,
    /// How labels are written: `"model"` (as the model gives them: lid.176's `zh`,
    /// GlotLID's `cmn_Hani`) or `"iso639-3"` (FineWeb-2's columns: `language = "cmn"`
    /// and `language_script = "Hani"`).
    #[serde(default, skip_serializing_if = "Labels::is_model")]
    pub labels: Labels,
    /// Write kept documents under `<output>/<language>/…`, as FineWeb-2 lays them out.
    #[serde(default)]
    pub split_by_language: bool,
}

/// How the langid stage writes a document's label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Labels {
    /// The model's label as it is.
    #[default]
    #[serde(rename = "model")]
    Model,
    /// An ISO 639-3 code in `language` and an ISO 15924 script in `language_script`.
    #[serde(rename = "iso639-3")]
    Iso639_3,
}

impl Labels {
    fn is_model(&self) -> bool {
        *self == Labels::Model
    }
}

fn default_model() -> String {
    default_model_path().display().to_string()
}

fn default_min_score() -> f64 {
    0.65
}

impl Default for Config {
    fn default() -> Self {
        Config {
            model: default_model(),
            model_sha256: None,
            languages: Vec::new(),
            min_score: default_min_score(),
            min_score_by_language: BTreeMap::new(),
            min_score_table: None,
            labels: Labels::Model,
            split_by_language: false,
        }
    }
}

/// The langid stage: a loaded model and the keep rule.
#[derive(Debug)]
pub struct LangId {
    model: Model,
    languages: Vec<String>,
    min_score: f64,
    overrides: BTreeMap<String, f64>,
    /// Per-language thresholds by FineWeb-2 label (`min_score_table`).
    table: Option<Arc<Table>>,
    labels: Labels,
    /// Whether the top label alone decides (every threshold ≥ 0.5: no second label can
    /// clear it, since probabilities sum to at most 1).
    top_only: bool,
    /// Lowest threshold among the languages that can be kept.
    floor: f64,
}

/// One prediction: label without `__label__`, probability.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub label: String,
    pub score: f32,
}

impl LangId {
    /// Loads the model and validates the rule.
    pub fn new(storage: &Storage, config: &Config) -> pipeline::Result<Self> {
        for (what, v) in std::iter::once(("min_score", config.min_score)).chain(
            config
                .min_score_by_language
                .values()
                .map(|v| ("min_score_by_language", *v)),
        ) {
            if !(0.0..=1.0).contains(&v) {
                return Err(pipeline::Error::Config {
                    url: config.model.clone(),
                    message: format!("{what} {v} is outside [0, 1]"),
                });
            }
        }
        let table = config
            .min_score_table
            .as_deref()
            .map(|spec| Table::load(storage, spec))
            .transpose()?;
        let model = model::load(storage, &config.model, config.model_sha256.as_deref())?;
        let mut stage = LangId {
            model,
            languages: config.languages.clone(),
            min_score: config.min_score,
            overrides: config.min_score_by_language.clone(),
            table,
            labels: config.labels,
            top_only: true,
            floor: 1.0,
        };
        let thresholds: Vec<f64> = if config.languages.is_empty() {
            std::iter::once(config.min_score)
                .chain(config.min_score_by_language.values().copied())
                .chain(
                    stage
                        .table
                        .iter()
                        .flat_map(|t| t.iter().map(|s| s.language_score)),
                )
                .collect()
        } else {
            config
                .languages
                .iter()
                .map(|l| stage.threshold(l))
                .collect()
        };
        stage.floor = thresholds.iter().copied().fold(1.0, f64::min);
        stage.top_only = stage.floor >= 0.5;
        Ok(stage)
    }

    /// The SHA-256 of the loaded model.
    pub fn model_sha256(&self) -> &str {
        &self.model.sha256
    }

    /// The `k` best labels of `text` with probability at least `threshold` (FineWeb's
    /// preparation: newlines are spaces).
    pub fn predict(&self, text: &str, k: i32, threshold: f32) -> Vec<Prediction> {
        let predictor = &self.model.predictor;
        predictor
            .predict_text(text, k, threshold)
            .into_iter()
            .map(|(i, score)| {
                let label = &predictor.labels()[i];
                Prediction {
                    label: label
                        .strip_prefix(LABEL_PREFIX)
                        .unwrap_or(label)
                        .to_string(),
                    score,
                }
            })
            .collect()
    }

    /// The threshold of a model label: `min_score_by_language`, else the table's (by
    /// FineWeb-2 label), else `min_score`.
    fn threshold(&self, lang: &str) -> f64 {
        if let Some(&t) = self.overrides.get(lang) {
            return t;
        }
        self.table
            .as_ref()
            .and_then(|t| {
                let label = if languages::is_label(lang) {
                    Some(lang)
                } else {
                    languages::lid176_label(lang)
                };
                t.get(label?)
            })
            .map_or(self.min_score, |s| s.language_score)
    }

    /// Whether a model label is among `languages` (by the model's label, or by its
    /// FineWeb-2 form when lid.176's codes are mapped).
    fn wanted(&self, lang: &str) -> bool {
        self.languages.is_empty()
            || self.languages.iter().any(|l| l == lang)
            || (self.labels == Labels::Iso639_3
                && languages::lid176_label(lang)
                    .is_some_and(|full| self.languages.iter().any(|l| l == full)))
    }
}

impl Stage for LangId {
    fn name(&self) -> &'static str {
        "langid"
    }

    fn columns(&self) -> Vec<Column> {
        match self.labels {
            Labels::Model => Vec::new(),
            Labels::Iso639_3 => vec![Column {
                name: LANGUAGE_SCRIPT,
                kind: ColumnKind::Str,
            }],
        }
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        let top = self.predict(&doc.text, 1, 0.0);
        let Some(best) = top.into_iter().next() else {
            return Verdict::Drop("no_language");
        };
        let score = f64::from(best.score);
        let top_wanted = self.wanted(&best.label);
        let top_clears = score > self.threshold(&best.label);
        match self.labels {
            Labels::Model => doc.language = Some(best.label),
            Labels::Iso639_3 => {
                let (language, script) = languages::split_label(&best.label, true);
                doc.language = Some(language);
                if let Some(script) = script {
                    doc.annotate(LANGUAGE_SCRIPT, Value::Str(script));
                }
            }
        }
        doc.language_score = Some(score);
        let keep = if self.top_only || self.languages.is_empty() {
            top_wanted && top_clears
        } else {
            // A threshold under 0.5 lets a second label qualify: look at every label
            // that scores at least the lowest threshold.
            self.predict(&doc.text, -1, self.floor as f32)
                .iter()
                .any(|p| self.wanted(&p.label) && f64::from(p.score) > self.threshold(&p.label))
        };
        match (keep, top_wanted) {
            (true, _) => Verdict::Keep,
            (false, true) => Verdict::Drop("low_language_score"),
            (false, false) => Verdict::Drop("unwanted_language"),
        }
    }
}

/// The step `mill-langid` runs; loads the model.
pub fn step(storage: &Storage, config: &Config) -> pipeline::Result<Step> {
    let stage = LangId::new(storage, config)?;
    let hash = pipeline::cli::config_hash("langid", &(config, stage.model_sha256()));
    Ok(Step {
        name: "langid".into(),
        stages: vec![Box::new(stage)],
        source: Box::new(DocumentSource::default()),
        config_hash: hash,
        shard: ShardOptions::default(),
        partition: config
            .split_by_language
            .then_some(pipeline::Partition::Language),
        per_input: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline::fasttext_model::prepare;

    #[test]
    fn prepares_text_like_fineweb() {
        assert_eq!(prepare("a\nb\n"), "a b \n");
        assert_eq!(prepare("nul\0byte"), "nul byte\n");
    }

    #[test]
    fn config_defaults_are_fineweb() {
        let c: Config = toml::from_str("").expect("empty config");
        assert_eq!(c.min_score, 0.65);
        assert!(c.languages.is_empty());
        assert!(toml::from_str::<Config>("min_scor = 0.5").is_err());
    }
}
