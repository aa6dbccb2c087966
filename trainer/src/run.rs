//! What `mill-train` reads: a TOML file naming a model preset (any field overridden),
//! the data, training and checkpoint settings.

use serde::{Deserialize, Serialize};

use pipeline::{Error, Result};

use crate::TrainConfig;
use crate::data::DataConfig;
use crate::model::ModelConfig;

/// A training run's configuration (`mill-train --config`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// A model preset: `tiny`, `125m`, `350m`, `1b`, `7b`.
    pub preset: String,
    /// Fields of the preset to change (`[model]`, e.g. `layers = 4`). The vocabulary
    /// size is the shards' when not given.
    pub model: toml::Table,
    pub data: DataConfig,
    pub train: TrainConfig,
    /// Checkpoint every this many steps (and at the last).
    pub checkpoint_every: u64,
    /// Checkpoints kept.
    pub keep: usize,
    /// A JSON line of metrics every this many steps.
    pub log_every: u64,
    /// Validation loss every this many steps and at the last (0: never).
    pub eval_every: u64,
    /// Micro-batches of validation samples per evaluation and rank.
    pub eval_batches: usize,
    /// libtorch's CPU threads (0: its default, one per core). Small models on a busy
    /// machine train faster on one.
    pub threads: usize,
    /// Reference sets, by name: token shards (a tokens step's output) encoded with the
    /// training data's tokenizer, whose loss on every sample is measured at each
    /// evaluation and recorded as `eval_losses` (what `mill ablate` compares variants by).
    pub eval_sets: std::collections::BTreeMap<String, String>,
    /// Multiple-choice tasks, by name: tokenized items (JSON, `tasks::TaskSet`; `mill`
    /// writes them from a task's JSONL), scored at each evaluation as lm-eval-harness
    /// scores `acc` and `acc_norm`.
    pub eval_tasks: std::collections::BTreeMap<String, String>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            preset: "tiny".into(),
            model: toml::Table::new(),
            data: DataConfig::default(),
            train: TrainConfig::default(),
            checkpoint_every: 1000,
            keep: 3,
            log_every: 1,
            eval_every: 200,
            eval_batches: 8,
            threads: 0,
            eval_sets: std::collections::BTreeMap::new(),
            eval_tasks: std::collections::BTreeMap::new(),
        }
    }
}

impl RunConfig {
    /// The model: the preset with the overrides, and the shards' vocabulary size unless
    /// one is given.
    pub fn model(&self, shards_vocab: usize) -> Result<ModelConfig> {
        let preset = ModelConfig::preset(&self.preset)?;
        let mut value = toml::Value::try_from(&preset)
            .map_err(|e| Error::Usage(format!("model preset: {e}")))?;
        if let toml::Value::Table(table) = &mut value {
            if !self.model.contains_key("vocab_size") {
                table.insert(
                    "vocab_size".into(),
                    toml::Value::Integer(shards_vocab as i64),
                );
            }
            for (k, v) in &self.model {
                table.insert(k.clone(), v.clone());
            }
        }
        let model: ModelConfig = value
            .try_into()
            .map_err(|e: toml::de::Error| Error::Config {
                url: "[model]".into(),
                message: e.to_string(),
            })?;
        model.validate()?;
        Ok(model)
    }
}
