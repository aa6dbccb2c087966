//! `trainer`: trains a decoder on the token shards the pipeline writes.
//!
//! Built so far: [`data`], the loader that turns `mill-tokenize` output (Megatron
//! `.bin/.idx` datasets and their manifest, on disk or S3) into training samples;
//! [`model`], a Llama-style decoder on libtorch; [`optim`], AdamW; [`schedule`], warm-up
//! and cosine decay; [`train_steps`], the loop that joins them on one process, with
//! gradient accumulation and clipping. Checkpoints, resume, export, metrics and
//! `mill-train` come next (see the README).

pub mod data;
pub mod model;
pub mod optim;
pub mod schedule;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tch::{Device, Tensor, nn};

use pipeline::{Error, Result};

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
    /// `micro_batch × accumulation × world` samples).
    pub accumulation: usize,
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
}

fn tch_err(e: tch::TchError) -> Error {
    Error::Usage(format!("libtorch: {e}"))
}

/// Global L2 norm of the gradients; when over `max`, the gradients are scaled to it.
pub fn clip_grad_norm(params: &[Tensor], max: f64) -> Result<f64> {
    let _guard = tch::no_grad_guard();
    let mut sum = 0.0;
    for p in params {
        let g = p.grad();
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
        for p in params {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.f_mul_scalar_(scale).map_err(tch_err)?;
            }
        }
    }
    Ok(norm)
}

/// Trains a model of shape `model` on `corpus` on one CPU process; returns a record per
/// step.
pub fn train_steps(
    corpus: Arc<data::Corpus>,
    model: &model::ModelConfig,
    config: &TrainConfig,
) -> Result<Vec<StepRecord>> {
    tch::manual_seed(config.seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let net = model::Model::new(&vs, model)?;
    let mut params = vs.trainable_variables();
    let mut opt = optim::AdamW::new(&params, &config.adamw)?;
    let batch = config.micro_batch.max(1);
    let accumulation = config.accumulation.max(1);
    let mut loader = data::Loader::start(corpus, 0, batch, 0, 1)?;
    let mut records = Vec::with_capacity(config.steps as usize);
    for step in 0..config.steps {
        for p in params.iter_mut() {
            p.zero_grad();
        }
        let mut loss_sum = 0.0;
        for _ in 0..accumulation {
            let tokens: Vec<i64> = loader
                .next_batch()?
                .tokens
                .into_iter()
                .map(i64::from)
                .collect();
            let samples = Tensor::f_from_slice(&tokens)
                .map_err(tch_err)?
                .f_view([batch as i64, -1])
                .map_err(tch_err)?;
            let loss = net.loss(&samples)?;
            loss_sum += loss.f_double_value(&[]).map_err(tch_err)?;
            loss.f_div_scalar(accumulation as f64)
                .map_err(tch_err)?
                .f_backward()
                .map_err(tch_err)?;
        }
        let grad_norm = clip_grad_norm(&params, config.max_grad_norm)?;
        let lr = config.schedule.lr_at(step);
        opt.update(&mut params, lr)?;
        records.push(StepRecord {
            step,
            loss: loss_sum / accumulation as f64,
            lr,
            grad_norm,
        });
    }
    Ok(records)
}

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
        let params = vs.trainable_variables();
        let before = clip_grad_norm(&params, 1.0)?;
        assert!((before - 3.0 * 8f64.sqrt()).abs() < 1e-4, "{before}");
        let after = clip_grad_norm(&params, 1.0)?;
        assert!((after - 1.0).abs() < 1e-4, "{after}");
        // Under the limit nothing changes.
        assert!((clip_grad_norm(&params, 10.0)? - after).abs() < 1e-9);
        Ok(())
    }
}
