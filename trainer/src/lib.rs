//! `trainer`: trains a decoder on the token shards the pipeline writes.
//!
//! [`data`], the loader that turns `mill-tokenize` output (Megatron `.bin/.idx` datasets
//! and their manifest, on disk or S3) into training samples; [`model`], a Llama-style
//! decoder on libtorch; [`optim`], fused AdamW over flat buffers; [`schedule`], warm-up
//! and cosine decay; the loop that joins them, with gradient accumulation, clipping and
//! data parallelism ([`dist`]); [`checkpoint`] and bit-identical resume; [`export`] to
//! transformers; [`metrics`]; [`host_memory`], the allocator's settings on the CPU. The
//! `mill-train` binary drives it (see the README). [`encoder`] runs the classify
//! stage's transformers on libtorch, for `mill-classify-gpu`.

pub mod checkpoint;
pub mod data;
pub mod dist;
pub mod encoder;
pub mod export;
pub mod host_memory;
pub mod metrics;
pub mod model;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)]
pub mod nccl;
pub mod optim;
pub mod run;
pub mod schedule;
pub mod tasks;
mod train;

use serde::{Deserialize, Serialize};
use tch::Tensor;
#[cfg(test)]
use tch::{Device, nn};

use pipeline::{Error, Location, Result, Storage};

/// The arithmetic of the forward and backward passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// bf16 on a GPU, f32 on the CPU.
    #[default]
    Auto,
    Fp32,
    /// bf16 weights and activations; the optimiser keeps f32 master weights and
    /// moments, and the loss is computed in f32.
    Bf16,
}

impl Precision {
    /// Whether compute is bf16 on `device`.
    pub fn is_bf16(self, device: tch::Device) -> bool {
        match self {
            Precision::Auto => device.is_cuda(),
            Precision::Fp32 => false,
            Precision::Bf16 => true,
        }
    }
}

/// How [`train_steps`] trains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Seed of the initialisation.
    pub seed: i64,
    pub steps: u64,
    /// Samples per micro-batch.
    pub micro_batch: usize,
    /// Micro-batches whose gradients add up to one step (the global batch is
    /// `micro_batch × accumulation × world` samples). Ignored when
    /// `global_batch_tokens` is set.
    pub accumulation: usize,
    /// The global batch in tokens (0: use `accumulation`): the accumulation is this
    /// over `micro_batch × seq_len × world`, which must divide it.
    pub global_batch_tokens: u64,
    pub precision: Precision,
    pub schedule: schedule::Schedule,
    /// Gradients are scaled down when their global norm exceeds this: 1.0 (Llama).
    pub max_grad_norm: f64,
    pub adamw: optim::AdamWConfig,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            seed: 1,
            steps: 100,
            micro_batch: 8,
            accumulation: 1,
            global_batch_tokens: 0,
            precision: Precision::Auto,
            schedule: schedule::Schedule::default(),
            max_grad_norm: 1.0,
            adamw: optim::AdamWConfig::default(),
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u64,
    /// Mean loss over the step's micro-batches.
    pub loss: f64,
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Tokens the step trained on, and its wall time.
    pub tokens: u64,
    pub seconds: f64,
    /// Of that time, how long the step waited for data.
    pub data_wait: f64,
    /// Model FLOPs utilisation, when the device's peak is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfu: Option<f64>,
    /// Mean loss on the validation split, on the steps that evaluate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_loss: Option<f64>,
    /// Mean loss on each reference set (`eval_sets`), on the steps that evaluate.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub eval_losses: std::collections::BTreeMap<String, f64>,
    /// Accuracies on each multiple-choice task (`eval_tasks`), on the steps that
    /// evaluate.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub eval_tasks: std::collections::BTreeMap<String, tasks::TaskScore>,
    /// Of the step's time, seconds in the forward passes, the backward passes and the
    /// optimiser (gradient exchange, clipping, update, copy to the compute weights).
    /// On CPU only: on a GPU the host's clock sees kernel launches, not their work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
}

/// Where a step's time went (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    pub forward: f64,
    pub backward: f64,
    pub optimizer: f64,
}

impl StepRecord {
    /// Tokens per second of the step.
    pub fn tokens_per_s(&self) -> f64 {
        self.tokens as f64 / self.seconds.max(1e-9)
    }
}

pub(crate) fn tch_err(e: tch::TchError) -> Error {
    Error::Usage(format!("libtorch: {e}"))
}

/// Global L2 norm of the gradients; when over `max`, the gradients are scaled to it.
pub fn clip_grad_norm(grads: &[Tensor], max: f64) -> Result<f64> {
    let _guard = tch::no_grad_guard();
    let mut sum = 0.0;
    for g in grads {
        if g.defined() {
            let n = g
                .f_norm()
                .map_err(tch_err)?
                .f_double_value(&[])
                .map_err(tch_err)?;
            sum += n * n;
        }
    }
    let norm = sum.sqrt();
    if max > 0.0 && norm > max {
        let scale = max / (norm + 1e-6);
        for g in grads {
            if g.defined() {
                let _ = g.shallow_clone().f_mul_scalar_(scale).map_err(tch_err)?;
            }
        }
    }
    Ok(norm)
}

/// Where checkpoints go, how often, how many stay, and whether to resume from the
/// newest.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    pub storage: Storage,
    pub dir: Location,
    /// Every this many steps, and at the last step.
    pub every: u64,
    pub keep: usize,
    pub resume: bool,
}

/// The hash of what a resume must not change (the step count may), and that
/// configuration as JSON.
pub fn config_hash(
    model: &model::ModelConfig,
    config: &TrainConfig,
    data: &data::DataConfig,
) -> Result<(String, serde_json::Value)> {
    let fixed = TrainConfig {
        steps: 0,
        ..config.clone()
    };
    let value = serde_json::json!({ "model": model, "train": fixed, "data": data });
    let bytes = serde_json::to_vec(&value)
        .map_err(|e| Error::Usage(format!("serialising the configuration: {e}")))?;
    Ok((pipeline::cli::sha256_hex(&bytes), value))
}

pub use train::{Options, train_steps, train_with};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_scales_the_global_norm_down_to_the_limit() -> Result<()> {
        let vs = nn::VarStore::new(Device::Cpu);
        let a = vs.root().var("a", &[4], nn::Init::Const(1.0));
        let b = vs.root().var("b", &[2, 2], nn::Init::Const(1.0));
        // Gradients 3 everywhere: a global norm of 3 * sqrt(8).
        let loss = (a.f_sum(tch::Kind::Float).map_err(tch_err)?
            + b.f_sum(tch::Kind::Float).map_err(tch_err)?)
            * 3.0;
        loss.f_backward().map_err(tch_err)?;
        let params: Vec<Tensor> = vs.trainable_variables().iter().map(|p| p.grad()).collect();
        let before = clip_grad_norm(&params, 1.0)?;
        assert!((before - 3.0 * 8f64.sqrt()).abs() < 1e-4, "{before}");
        let after = clip_grad_norm(&params, 1.0)?;
        assert!((after - 1.0).abs() < 1e-4, "{after}");
        // Under the limit nothing changes.
        assert!((clip_grad_norm(&params, 10.0)? - after).abs() < 1e-9);
        Ok(())
    }
}
