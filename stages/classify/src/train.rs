//! `mill-classify train`: fits a fastText quality classifier on positives and
//! negatives (Parquet or JSONL), as DCLM fitted `fasttext-oh-eli5` (OpenHermes 2.5 and
//! ELI5 answers, `hq`, against RefinedWeb pages, `cc`). The training the classifying
//! stages share ([`pipeline::fasttext_model::train`]) does the work.
//!
//! The two sets are mixed in an order that depends only on the documents' ids (a
//! seeded hash), a deterministic share is held out for the report, and fastText trains
//! on one thread: the same documents and settings give the same model bytes.

use pipeline::fasttext_model::train::{self as shared, Evaluation, Example, Labels, Settings};
use pipeline::{Location, Result, Storage};
use serde::{Deserialize, Serialize};

use crate::TextForm;

pub use shared::{QuantizeConfig, TrainReport};

/// `[train]`: DCLM's settings by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// The label of the positives: DCLM's `hq`.
    pub positive_label: String,
    /// The label of the negatives: DCLM's `cc`.
    pub negative_label: String,
    /// The form texts are trained in (the classifier must score the same form):
    /// DCLM's, newlines to spaces.
    pub text: TextForm,
    /// Share of documents held out for the report.
    pub validation_share: f64,
    /// Threshold the report's precision, recall and F1 are computed at.
    pub threshold: f64,
    /// Seeds the held-out split and the order of the examples.
    pub seed: u64,
    /// fastText's settings: DCLM's `train_fasttext_classifier.py` defaults (fastText's:
    /// `lr 0.1`, `dim 100`, `epoch 5`, `minCount 1`, `bucket 2000000`, no character
    /// n-grams), with word bigrams (`wordNgrams 2`), as the released model's name says
    /// (`openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin`).
    pub epoch: i32,
    pub lr: f64,
    pub word_ngrams: i32,
    pub dim: i32,
    pub bucket: i32,
    pub min_count: i32,
    pub minn: i32,
    pub maxn: i32,
    /// Training threads (1: a reproducible model).
    pub threads: i32,
    /// Quantise the model (a `.ftz` file a fraction of the size).
    pub quantize: Option<QuantizeConfig>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            positive_label: "hq".into(),
            negative_label: "cc".into(),
            text: TextForm::Lines,
            validation_share: 0.1,
            threshold: 0.5,
            seed: 0,
            epoch: 5,
            lr: 0.1,
            word_ngrams: 2,
            dim: 100,
            bucket: 2_000_000,
            min_count: 1,
            minn: 0,
            maxn: 0,
            threads: 1,
            quantize: None,
        }
    }
}

impl TrainConfig {
    fn settings(&self) -> Settings {
        Settings {
            epoch: self.epoch,
            lr: self.lr,
            word_ngrams: self.word_ngrams,
            dim: self.dim,
            bucket: self.bucket,
            min_count: self.min_count,
            minn: self.minn,
            maxn: self.maxn,
            threads: self.threads,
            quantize: self.quantize.clone(),
        }
    }
}

/// fastText's input line for a text in `form` (one trailing newline).
pub fn line(form: TextForm, text: &str) -> String {
    pipeline::fasttext_model::prepare(&form.apply(text))
}

/// The examples of both sets, mixed by a seeded hash of their ids (ties: positives
/// first, then listing order).
pub fn examples(
    storage: &Storage,
    positives: &Location,
    negatives: &Location,
    config: &TrainConfig,
) -> Result<Vec<Example>> {
    let mut all: Vec<(usize, Example)> = Vec::new();
    for (set, label) in [
        (positives, &config.positive_label),
        (negatives, &config.negative_label),
    ] {
        for ex in shared::read_examples(storage, set, Labels::All(label))? {
            all.push((all.len(), ex));
        }
    }
    let mut keyed: Vec<([u8; 32], usize, Example)> = all
        .into_iter()
        .map(|(i, ex)| (shared::shuffle_key(config.seed, &ex.id), i, ex))
        .collect();
    keyed.sort_by_key(|a| (a.0, a.1));
    Ok(keyed.into_iter().map(|(_, _, ex)| ex).collect())
}

/// Step name of `train` in its marker.
pub const TRAIN_STEP: &str = "classify.train";

/// Trains on `positives` and `negatives` into `opts.output` as a resumable step of one
/// unit: skipped when its marker names the same settings and the same listings of both
/// sets. Returns the run's report and, when it trained, what training reported.
pub fn train_step(
    storage: &Storage,
    opts: &pipeline::RunOptions,
    positives: &Location,
    negatives: &Location,
    config: &TrainConfig,
) -> Result<(pipeline::Report, Option<TrainReport>)> {
    // The unit reads both sets: redone when either listing changes.
    let (pos, neg) = (
        pipeline::Unit::over_listing("train", storage, positives)?,
        pipeline::Unit::over_listing("train", storage, negatives)?,
    );
    let unit = pipeline::Unit {
        name: "train".into(),
        size: pos.size + neg.size,
        version: pipeline::cli::config_hash("sets", &(pos.version, neg.version)),
    };
    let hash = pipeline::cli::config_hash(TRAIN_STEP, config);
    let input = format!("{positives} {negatives}");
    pipeline::run_unit(TRAIN_STEP, unit, &hash, &input, storage, opts, || {
        let examples = examples(storage, positives, negatives, config)?;
        let r = shared::train(
            storage,
            &examples,
            |t| line(config.text, t),
            &opts.output,
            &config.settings(),
            &Evaluation {
                positive: vec![config.positive_label.clone()],
                threshold: config.threshold,
                validation_share: config.validation_share,
                seed: config.seed,
            },
        )?;
        let documents = examples.len() as u64;
        let stats = pipeline::Stats {
            docs_in: documents,
            docs_out: documents,
            ..pipeline::Stats::default()
        };
        let outputs = vec![
            shared::model_file(&config.settings()).into(),
            shared::REPORT_FILE.into(),
        ];
        Ok((r, pipeline::UnitDone { outputs, stats }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_dclms() {
        let c = TrainConfig::default();
        assert_eq!(
            (
                c.lr,
                c.dim,
                c.epoch,
                c.min_count,
                c.word_ngrams,
                c.bucket,
                c.threads
            ),
            (0.1, 100, 5, 1, 2, 2_000_000, 1)
        );
        assert_eq!(
            (c.positive_label.as_str(), c.negative_label.as_str()),
            ("hq", "cc")
        );
    }
}
