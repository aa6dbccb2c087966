//! `trainer`: trains a decoder on the token shards the pipeline writes.
//!
//! Built so far: [`data`], the loader that turns `mill-tokenize` output (Megatron
//! `.bin/.idx` datasets and their manifest, on disk or S3) into training samples;
//! [`model`], a Llama-style decoder on libtorch; [`optim`], AdamW; [`schedule`], warm-up
//! and cosine decay; [`train_steps`], the loop that joins them on one process, with
//! gradient accumulation and clipping. Checkpoints, resume, export, metrics and
//! `mill-train` come next (see the README).

pub mod checkpoint;
pub mod data;
pub mod model;
pub mod optim;
pub mod run;
pub mod schedule;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tch::{Device, Tensor, nn};

use pipeline::{Error, Location, Result, Storage};

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
    /// Tokens the step trained on, and its wall time.
    pub tokens: u64,
    pub seconds: f64,
    /// Of that time, how long the step waited for data.
    pub data_wait: f64,
}

impl StepRecord {
    /// Tokens per second of the step.
    pub fn tokens_per_s(&self) -> f64 {
        self.tokens as f64 / self.seconds.max(1e-9)
    }
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

/// Trains a model of shape `model` on `corpus` on one CPU process, to step
/// `config.steps`; with `checkpoints`, writes them and (when asked) resumes from the
/// newest, so that a run stopped anywhere and resumed ends with the same weights as
/// one that never stopped. Returns a record per step run.
pub fn train_steps(
    corpus: Arc<data::Corpus>,
    model: &model::ModelConfig,
    config: &TrainConfig,
    checkpoints: Option<&Checkpoints>,
) -> Result<Vec<StepRecord>> {
    let mut records = Vec::new();
    train_with(corpus, model, config, checkpoints, &mut |r| {
        records.push(r.clone())
    })?;
    Ok(records)
}

/// [`train_steps`], handing each step's record to `on_step` as it finishes (metrics).
pub fn train_with(
    corpus: Arc<data::Corpus>,
    model: &model::ModelConfig,
    config: &TrainConfig,
    checkpoints: Option<&Checkpoints>,
    on_step: &mut dyn FnMut(&StepRecord),
) -> Result<()> {
    let (hash, hashed) = config_hash(model, config, corpus.config())?;
    tch::manual_seed(config.seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let net = model::Model::new(&vs, model)?;
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut params: Vec<Tensor> = named.iter().map(|(_, t)| t.shallow_clone()).collect();
    let mut opt = optim::AdamW::new(&params, &config.adamw)?;
    let (mut start, mut position) = (0u64, 0u64);
    if let Some(c) = checkpoints.filter(|c| c.resume)
        && let Some(loaded) = checkpoint::load_latest(&c.storage, &c.dir, &hash)?
    {
        restore(&mut params, &named, &loaded.params, "")?;
        restore(&mut opt.m, &named, &loaded.optim, "m.")?;
        restore(&mut opt.v, &named, &loaded.optim, "v.")?;
        opt.step = loaded.state.optim_step;
        (start, position) = (loaded.state.step, loaded.state.position);
    }
    let batch = config.micro_batch.max(1);
    let accumulation = config.accumulation.max(1);
    let mut loader = data::Loader::start(corpus, position, batch, 0, 1)?;
    for step in start..config.steps {
        let started = std::time::Instant::now();
        let waited = loader.waited();
        let mut tokens = 0u64;
        for p in params.iter_mut() {
            p.zero_grad();
        }
        let mut loss_sum = 0.0;
        for _ in 0..accumulation {
            let next = loader.next_batch()?;
            position = next.next_position;
            let ids: Vec<i64> = next.tokens.into_iter().map(i64::from).collect();
            tokens += ids.len() as u64;
            let samples = Tensor::f_from_slice(&ids)
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
        on_step(&StepRecord {
            step,
            loss: loss_sum / accumulation as f64,
            lr,
            grad_norm,
            tokens,
            seconds: started.elapsed().as_secs_f64(),
            data_wait: (loader.waited() - waited).as_secs_f64(),
        });
        if let Some(c) = checkpoints
            && c.every > 0
            && ((step + 1) % c.every == 0 || step + 1 == config.steps)
        {
            let state = checkpoint::State {
                step: step + 1,
                optim_step: opt.step,
                position,
                config_hash: hash.clone(),
                config: hashed.clone(),
            };
            checkpoint::save(&c.storage, &c.dir, &named, (&opt.m, &opt.v), &state, c.keep)?;
        }
    }
    Ok(())
}

/// Copies the saved tensors named `prefix + name` into `into` (in `named`'s order).
fn restore(
    into: &mut [Tensor],
    named: &[(String, Tensor)],
    saved: &[(String, Tensor)],
    prefix: &str,
) -> Result<()> {
    let _guard = tch::no_grad_guard();
    for (target, (name, _)) in into.iter_mut().zip(named) {
        let key = format!("{prefix}{name}");
        let (_, source) = saved.iter().find(|(n, _)| *n == key).ok_or_else(|| {
            Error::Usage(format!(
                "the checkpoint has no tensor {key}: another model shape"
            ))
        })?;
        if source.size() != target.size() {
            return Err(Error::Usage(format!(
                "checkpoint tensor {key} is {:?}, the model's {:?}",
                source.size(),
                target.size()
            )));
        }
        target.f_copy_(source).map_err(tch_err)?;
    }
    Ok(())
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
