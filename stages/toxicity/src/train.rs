//! `mill-toxicity train`: fits a supervised fastText classifier on labelled documents
//! (Parquet or JSONL with `text` and a label field) and reports how it does on a
//! held-out share, through the training every classifying stage shares
//! ([`pipeline::fasttext_model::train`]): a deterministic held-out split, the
//! documents in listing order, one training thread by default (a reproducible model).

use pipeline::fasttext_model::train::{self as shared, Evaluation, Labels, Settings};
use pipeline::{Location, Result, Storage};
use serde::{Deserialize, Serialize};

use crate::normalize::Normalize;

pub use shared::{QuantizeConfig, Scores, TrainReport};

/// Training settings (`[train]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// The field holding each document's label (a Parquet column, or a JSONL field).
    pub label_field: String,
    /// Labels that count as positive in the report.
    pub positive: Vec<String>,
    /// Threshold the report's precision, recall and F1 are computed at (dolma's 0.4).
    pub threshold: f64,
    /// Share of documents held out for validation.
    pub validation_share: f64,
    pub seed: u64,
    /// fastText settings, as fastText's text-classification tutorial tunes them
    /// (`-lr 1.0 -epoch 25 -wordNgrams 2 -bucket 200000 -dim 50`); minimum count 1.
    pub epoch: i32,
    pub lr: f64,
    pub word_ngrams: i32,
    pub dim: i32,
    pub bucket: i32,
    pub min_count: i32,
    /// Character n-grams of words, from `minn` to `maxn` characters (0, 0: none, as
    /// the tutorial): they give misspelt and disguised words a vector.
    pub minn: i32,
    pub maxn: i32,
    /// Training threads (1: a reproducible model).
    pub threads: i32,
    /// The form the texts are trained on (the classifier must score the same form).
    pub normalize: Normalize,
    /// Quantise the model (fastText's `quantize`): a `.ftz` file a fraction of the size.
    pub quantize: Option<QuantizeConfig>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            label_field: "label".into(),
            positive: vec!["toxic".into()],
            threshold: 0.4,
            validation_share: 0.1,
            seed: 0,
            epoch: 25,
            lr: 1.0,
            word_ngrams: 2,
            dim: 50,
            bucket: 200_000,
            min_count: 1,
            minn: 0,
            maxn: 0,
            threads: 1,
            normalize: Normalize::Raw,
            quantize: None,
        }
    }
}

impl TrainConfig {
    /// fastText's settings.
    pub fn settings(&self) -> Settings {
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

/// Trains on the labelled documents at `input`; writes `<output>/model.bin` and
/// `<output>/train.json`.
pub fn train(
    storage: &Storage,
    input: &Location,
    output: &Location,
    config: &TrainConfig,
) -> Result<TrainReport> {
    let examples = shared::read_examples(storage, input, Labels::Field(&config.label_field))?;
    shared::train(
        storage,
        &examples,
        |t| config.normalize.line(t),
        output,
        &config.settings(),
        &Evaluation {
            positive: config.positive.clone(),
            threshold: config.threshold,
            validation_share: config.validation_share,
            seed: config.seed,
        },
    )
}

pub use shared::{MODEL_FILE, QUANTIZED_MODEL_FILE, REPORT_FILE};

/// The file `train` writes the model to with `config`.
pub fn model_file(config: &TrainConfig) -> &'static str {
    shared::model_file(&config.settings())
}
/// Step name of `train` in its marker.
pub const TRAIN_STEP: &str = "toxicity.train";
/// The unit `train` is: its marker is `<output>/_done/train.json`.
pub const TRAIN_UNIT: &str = "train";

/// [`train`] as a resumable step of one unit: skipped when its marker names the same
/// configuration and the same listing of `opts.input`; `--force`, `--dry-run` and the
/// task split (task 0 trains) apply as to any step. Returns the run's report and, when
/// it trained, what training reported.
pub fn train_step(
    storage: &Storage,
    opts: &pipeline::RunOptions,
    config: &TrainConfig,
) -> Result<(pipeline::Report, Option<TrainReport>)> {
    let hash = pipeline::cli::config_hash(TRAIN_STEP, config);
    pipeline::runner::run_over_listing(TRAIN_STEP, TRAIN_UNIT, &hash, storage, opts, || {
        let r = train(storage, &opts.input, &opts.output, config)?;
        let documents = (r.train_documents + r.validation_documents) as u64;
        let stats = pipeline::Stats {
            docs_in: documents,
            docs_out: documents,
            ..pipeline::Stats::default()
        };
        let outputs = vec![model_file(config).into(), REPORT_FILE.into()];
        Ok((r, pipeline::UnitDone { outputs, stats }))
    })
}
