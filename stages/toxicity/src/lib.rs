//! Stage toxicity: adult-URL lists, bad-word lists and fastText classifiers over
//! document shards, each rule with its own drop reason; and the training of new
//! classifiers ([`train`]).
//!
//! The rules run cheapest first: URL lists (`adult_url`), word lists (`bad_words`,
//! `bad_word_ratio`), then the classifier in one of three modes:
//! - `document`: the whole text is scored; a score at or over the threshold drops it
//!   (`toxic`). dolma's taggers and threshold (0.4).
//! - `fraction`: every unit (sentence or line) is scored; the document is dropped
//!   (`toxic_fraction`) when the share of its characters in units at or over the
//!   threshold exceeds `max_toxic_fraction`.
//! - `remove`: units at or over the threshold are cut out and the rest kept; the
//!   characters removed go to `toxicity_removed_chars`; a document left empty is
//!   dropped (`toxic_all_removed`).
//!
//! The score (the highest probability of a positive label: the document's, or its
//! highest unit's) is written to `toxicity_score` on every document scored, kept or
//! not, so a later run can re-threshold without re-scoring.

pub mod normalize;
pub mod shipped;
pub mod train;
pub mod units;
pub mod words;

use pipeline::fasttext_model::Model;
use pipeline::lists::DomainSet;
use pipeline::shard::ShardOptions;
use pipeline::{
    Column, ColumnKind, Document, DocumentSource, Stage, Step, Storage, Value, Verdict,
};
use serde::{Deserialize, Serialize};

pub use normalize::Normalize;
pub use train::{QuantizeConfig, TrainConfig, TrainReport};
pub use words::{BadWords, WordRule, WordsConfig};

/// Column with the classifier score.
pub const SCORE_COLUMN: &str = "toxicity_score";
/// Column with the characters `remove` mode cut out.
pub const REMOVED_COLUMN: &str = "toxicity_removed_chars";

/// The whole configuration (TOML); every table is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub urls: Option<UrlsConfig>,
    pub words: Option<WordsConfig>,
    /// A table, or `"default"`: the shipped model with its settings ([`shipped`]).
    #[serde(deserialize_with = "classifier_setting")]
    pub classifier: Option<ClassifierConfig>,
    /// Settings of `mill-toxicity train`.
    pub train: TrainConfig,
}

/// `classifier = "default"` or a `[classifier]` table (whose errors stay the table's).
fn classifier_setting<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<ClassifierConfig>, D::Error> {
    struct Setting;
    impl<'de> serde::de::Visitor<'de> for Setting {
        type Value = ClassifierConfig;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("\"default\" or a [classifier] table")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ClassifierConfig, E> {
            if v == shipped::NAME {
                Ok(shipped::config())
            } else {
                Err(E::custom(format!(
                    "unknown classifier {v:?}: the shipped one is \"default\"; for another \
                     model give a [classifier] table with `model`"
                )))
            }
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            map: A,
        ) -> Result<ClassifierConfig, A::Error> {
            ClassifierConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_any(Setting).map(Some)
}

/// Adult-domain lists applied to the `url` column.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlsConfig {
    /// Files (one domain per line) or UT1-layout folders (e.g. `blacklists/adult`).
    #[serde(default)]
    pub lists: Vec<String>,
    /// Domains in addition to the lists.
    #[serde(default)]
    pub domains: Vec<String>,
}

/// How the classifier judges a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Document,
    Fraction,
    Remove,
}

/// The unit scored in `fraction` and `remove` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Sentences (dolma's sentence-level taggers).
    #[default]
    Sentence,
    /// Lines.
    Line,
}

/// A supervised fastText classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// The model (`.bin` or `.ftz`): a path or storage URL, or `default` for the
    /// shipped one ([`shipped`]).
    pub model: String,
    /// Expected SHA-256 of the model file, checked when given.
    #[serde(default)]
    pub model_sha256: Option<String>,
    /// Positive labels, with or without `__label__` (dolma's Jigsaw models: `toxic`;
    /// its NSFW model: `nsfw`).
    #[serde(default = "default_labels")]
    pub labels: Vec<String>,
    /// A score at or over this is toxic: 0.4, dolma's threshold.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub unit: Unit,
    /// `fraction` mode: the largest share of characters in toxic units a kept document
    /// may have. No published setting; 0.1 is ours.
    #[serde(default = "default_max_fraction")]
    pub max_toxic_fraction: f64,
    /// The form texts are scored in: the form the model was trained on. Unset: `words`
    /// for the shipped model, `raw` for others (fastText's own tools, dolma's models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize: Option<Normalize>,
}

fn default_labels() -> Vec<String> {
    vec!["toxic".into()]
}
fn default_threshold() -> f64 {
    0.4
}
fn default_max_fraction() -> f64 {
    0.1
}

/// The loaded classifier.
#[derive(Debug)]
pub struct Classifier {
    model: Model,
    labels: Vec<String>,
    threshold: f64,
    mode: Mode,
    unit: Unit,
    max_fraction: f64,
    normalize: Normalize,
}

pub use pipeline::fasttext_model::train::full_label;

impl Classifier {
    /// Loads the model; checks the settings and that the model knows the labels.
    pub fn new(storage: &Storage, config: &ClassifierConfig) -> pipeline::Result<Classifier> {
        let bad = |message: String| pipeline::Error::Config {
            url: config.model.clone(),
            message,
        };
        for (what, v) in [
            ("threshold", config.threshold),
            ("max_toxic_fraction", config.max_toxic_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(format!("{what} {v} is outside [0, 1]")));
            }
        }
        if config.labels.is_empty() {
            return Err(bad("no positive labels given".into()));
        }
        let shipped = config.model == shipped::NAME;
        let mut model = if shipped {
            shipped::load(storage, config.model_sha256.as_deref())?
        } else {
            Model::load(
                storage,
                &config.model,
                config.model_sha256.as_deref(),
                "train one with `mill-toxicity train`, give a supervised fastText model, \
                 or `default` for the shipped one",
            )?
        };
        // A softmax of few labels (the shipped model's two): scored from each row's
        // products with the output rows (`Predictor::project`), within a few 1e-6 of
        // fastText's probabilities.
        model.predictor.project();
        let known = model.predictor.labels();
        let labels: Vec<String> = config.labels.iter().map(|l| full_label(l)).collect();
        for l in &labels {
            if !known.contains(l) {
                return Err(bad(format!("the model has no label {l}; it has {known:?}")));
            }
        }
        Ok(Classifier {
            model,
            labels,
            threshold: config.threshold,
            mode: config.mode,
            unit: config.unit,
            max_fraction: config.max_toxic_fraction,
            normalize: config.normalize.unwrap_or(if shipped {
                Normalize::Words
            } else {
                Normalize::Raw
            }),
        })
    }

    /// SHA-256 of the model file.
    pub fn model_sha256(&self) -> &str {
        &self.model.sha256
    }

    /// The highest probability of a positive label for `text`.
    pub fn score(&self, text: &str) -> f64 {
        let predictor = &self.model.predictor;
        predictor
            .predict_line(&self.normalize.line(text), -1, 0.0)
            .iter()
            .filter(|(i, _)| self.labels.contains(&predictor.labels()[*i]))
            .map(|(_, p)| f64::from(*p))
            .fold(0.0, f64::max)
    }
}

impl Stage for Classifier {
    fn name(&self) -> &'static str {
        "toxicity_classifier"
    }

    fn columns(&self) -> Vec<Column> {
        let mut cols = vec![Column {
            name: SCORE_COLUMN,
            kind: ColumnKind::F64,
        }];
        if self.mode == Mode::Remove {
            cols.push(Column {
                name: REMOVED_COLUMN,
                kind: ColumnKind::I64,
            });
        }
        cols
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        if self.mode == Mode::Document {
            let score = self.score(&doc.text);
            doc.annotate(SCORE_COLUMN, Value::F64(score));
            return if score >= self.threshold {
                Verdict::Drop("toxic")
            } else {
                Verdict::Keep
            };
        }
        let spans = units::split(&doc.text, self.unit);
        let mut max = 0.0f64;
        let mut toxic: Vec<bool> = Vec::with_capacity(spans.len());
        for &(a, b) in &spans {
            let piece = &doc.text[a..b];
            let score = if piece.trim().is_empty() {
                0.0
            } else {
                self.score(piece)
            };
            max = max.max(score);
            toxic.push(score >= self.threshold);
        }
        doc.annotate(SCORE_COLUMN, Value::F64(max));
        let total = doc.text.chars().count().max(1);
        let toxic_chars: usize = spans
            .iter()
            .zip(&toxic)
            .filter(|(_, t)| **t)
            .map(|(&(a, b), _)| doc.text[a..b].chars().count())
            .sum();
        match self.mode {
            Mode::Fraction => {
                if toxic_chars as f64 / total as f64 > self.max_fraction {
                    Verdict::Drop("toxic_fraction")
                } else {
                    Verdict::Keep
                }
            }
            _ => {
                let mut kept = String::with_capacity(doc.text.len());
                for (&(a, b), t) in spans.iter().zip(&toxic) {
                    if !t {
                        kept.push_str(&doc.text[a..b]);
                    }
                }
                doc.annotate(REMOVED_COLUMN, Value::I64(toxic_chars as i64));
                if toxic_chars > 0 {
                    doc.text = kept.trim_end().to_string();
                }
                if doc.text.trim().is_empty() {
                    Verdict::Drop("toxic_all_removed")
                } else {
                    Verdict::Keep
                }
            }
        }
    }
}

/// The URL rule as a stage.
#[derive(Debug)]
pub struct AdultUrls(pub DomainSet);

impl Stage for AdultUrls {
    fn name(&self) -> &'static str {
        "adult_urls"
    }
    fn process(&self, doc: &mut Document) -> Verdict {
        match doc.url.as_deref() {
            Some(u) if self.0.covers_url(u) => Verdict::Drop("adult_url"),
            _ => Verdict::Keep,
        }
    }
}

/// The word rule as a stage.
#[derive(Debug)]
pub struct WordFilter(pub BadWords);

impl Stage for WordFilter {
    fn name(&self) -> &'static str {
        "bad_words"
    }
    fn process(&self, doc: &mut Document) -> Verdict {
        match self.0.check(&doc.text, doc.language.as_deref()) {
            Some(reason) => Verdict::Drop(reason),
            None => Verdict::Keep,
        }
    }
}

/// The step `mill-toxicity` runs: the configured rules, cheapest first.
pub fn step(storage: &Storage, config: &Config) -> pipeline::Result<Step> {
    let mut stages: Vec<Box<dyn Stage>> = Vec::new();
    let mut fingerprint: Vec<String> = Vec::new();
    if let Some(urls) = &config.urls {
        let set = DomainSet::load(storage, &urls.lists, &urls.domains)?;
        fingerprint.extend(set.sorted().into_iter().map(|d| format!("url:{d}")));
        stages.push(Box::new(AdultUrls(set)));
    }
    if let Some(words) = &config.words {
        let bad = BadWords::load(storage, words)?;
        fingerprint.extend(bad.fingerprint());
        stages.push(Box::new(WordFilter(bad)));
    }
    if let Some(c) = &config.classifier {
        let classifier = Classifier::new(storage, c)?;
        fingerprint.push(format!("model:{}", classifier.model_sha256()));
        stages.push(Box::new(classifier));
    }
    if stages.is_empty() {
        return Err(pipeline::Error::Usage(
            "nothing to do: configure [urls], [words] or [classifier]".into(),
        ));
    }
    let filter_config = (&config.urls, &config.words, &config.classifier);
    Ok(Step {
        name: "toxicity".into(),
        stages,
        source: Box::new(DocumentSource::default()),
        config_hash: pipeline::cli::config_hash("toxicity", &(filter_config, fingerprint)),
        shard: ShardOptions::default(),
        partition: None,
        per_input: None,
    })
}
