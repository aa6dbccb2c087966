//! `trainer`: trains a decoder on the token shards the pipeline writes.
//!
//! Built so far: [`data`], the loader that turns `mill-tokenize` output (Megatron
//! `.bin/.idx` datasets and their manifest, on disk or S3) into training samples;
//! [`model`], a Llama-style decoder on libtorch; [`optim`], AdamW; [`train_steps`], the
//! loop that joins them on one process. Checkpoints, resume, export, metrics and
//! `mill-train` come next (see the README).

pub mod data;
pub mod model;
pub mod optim;

use std::sync::Arc;

use tch::{Device, Tensor, nn};

use pipeline::{Error, Result};

/// Trains `model` from `corpus` for `steps` steps of `batch` samples at a constant
/// learning rate, from a seeded initialisation, on the CPU; returns the loss of each
/// step.
pub fn train_steps(
    corpus: Arc<data::Corpus>,
    model: &model::ModelConfig,
    seed: i64,
    steps: usize,
    batch: usize,
    lr: f64,
) -> Result<Vec<f64>> {
    let tch_err = |e: tch::TchError| Error::Usage(format!("libtorch: {e}"));
    tch::manual_seed(seed);
    let vs = nn::VarStore::new(Device::Cpu);
    let net = model::Model::new(&vs, model)?;
    let mut params = vs.trainable_variables();
    let mut opt = optim::AdamW::new(&params, &optim::AdamWConfig::default())?;
    let mut loader = data::Loader::start(corpus, 0, batch, 0, 1)?;
    let mut losses = Vec::with_capacity(steps);
    for _ in 0..steps {
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
        for p in params.iter_mut() {
            p.zero_grad();
        }
        let loss = net.loss(&samples)?;
        loss.f_backward().map_err(tch_err)?;
        opt.update(&mut params, lr)?;
        losses.push(loss.f_double_value(&[]).map_err(tch_err)?);
    }
    Ok(losses)
}
