//! The training loop: one process (CPU or one GPU), or one rank of several joined by a
//! [`Group`]; micro-batches accumulate to the step's batch, gradients are averaged
//! across ranks, clipped and applied by AdamW to f32 master weights; checkpoints,
//! validation loss and MFU on the way.

use std::sync::Arc;
use std::time::Instant;

use tch::{Device, Kind, Tensor, nn};

use pipeline::{Error, Result};

use crate::data::{self, Corpus, Split};
use crate::dist::{Group, World};
use crate::{
    Checkpoints, StepRecord, TrainConfig, checkpoint, clip_grad_norm, config_hash, model, optim,
    tch_err,
};

/// How a run executes: what does not change its numbers on the CPU, so a resume may
/// change it.
pub struct Options {
    pub device: Device,
    /// The other ranks; `None` for one process.
    pub group: Option<Box<dyn Group>>,
    /// Validation loss every this many steps, and at the last (0: never).
    pub eval_every: u64,
    /// Micro-batches of validation samples per evaluation, per rank.
    pub eval_batches: usize,
    /// Peak FLOP/s of one device, for MFU.
    pub peak_flops: Option<f64>,
    /// Reference sets, by name: their loss on every sample of each at every
    /// evaluation (token shards of the training data's tokenizer, nothing held out).
    pub eval_sets: Vec<(String, Arc<Corpus>)>,
    /// Multiple-choice tasks, by name, scored at every evaluation; each choice's
    /// log-likelihood goes to `<checkpoints>/eval/<task>-step-NNNNNNNN.json`.
    pub eval_tasks: Vec<(String, Arc<crate::tasks::TaskSet>)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            device: Device::Cpu,
            group: None,
            eval_every: 0,
            eval_batches: 4,
            peak_flops: None,
            eval_sets: Vec::new(),
            eval_tasks: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("device", &self.device)
            .field("world", &self.group.as_ref().map(|g| g.world().clone()))
            .field("eval_every", &self.eval_every)
            .field("eval_batches", &self.eval_batches)
            .field("peak_flops", &self.peak_flops)
            .field(
                "eval_sets",
                &self.eval_sets.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field(
                "eval_tasks",
                &self.eval_tasks.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Trains on one CPU process to step `config.steps` (see [`train_with`]) and returns a
/// record per step run.
pub fn train_steps(
    corpus: Arc<Corpus>,
    model: &model::ModelConfig,
    config: &TrainConfig,
    checkpoints: Option<&Checkpoints>,
) -> Result<Vec<StepRecord>> {
    let mut records = Vec::new();
    train_with(
        corpus,
        model,
        config,
        checkpoints,
        Options::default(),
        &mut |r| records.push(r.clone()),
    )?;
    Ok(records)
}

/// The seed libtorch's generator gets before step `step`: a function of the run's seed
/// and the step alone, so the generator's state at any step is the same whether the run
/// stopped before it or not.
pub fn step_seed(seed: i64, step: u64) -> i64 {
    let mut x = (seed as u64) ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((x ^ (x >> 31)) >> 1) as i64
}

/// libtorch's generator is one per process: runs in one process (tests, several
/// models) take turns seeding it and drawing from it.
static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn seeded<T>(seed: i64, f: impl FnOnce() -> T) -> T {
    let _turn = GENERATOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    tch::manual_seed(seed);
    f()
}

/// Micro-batches per step: `global_batch_tokens` over what one micro-batch of every
/// rank holds, or `accumulation`.
pub fn accumulation(config: &TrainConfig, seq_len: usize, world: usize) -> Result<usize> {
    if config.global_batch_tokens == 0 {
        return Ok(config.accumulation.max(1));
    }
    let per = (config.micro_batch.max(1) * seq_len * world) as u64;
    if per == 0 || !config.global_batch_tokens.is_multiple_of(per) {
        return Err(Error::Usage(format!(
            "global_batch_tokens {} is not a multiple of micro_batch {} × seq_len {seq_len} × {world} ranks = {per}",
            config.global_batch_tokens, config.micro_batch
        )));
    }
    Ok((config.global_batch_tokens / per) as usize)
}

/// Samples `[n, seq + 1]` (int64, on `device`) from tokens back to back.
fn samples(tokens: Vec<u32>, n: usize, device: Device) -> Result<Tensor> {
    let ids: Vec<i64> = tokens.into_iter().map(i64::from).collect();
    Tensor::f_from_slice(&ids)
        .map_err(tch_err)?
        .f_view([n as i64, -1])
        .map_err(tch_err)?
        .f_to_device(device)
        .map_err(tch_err)
}

/// Mean loss over this rank's share of the first validation samples, averaged over the
/// ranks; `None` when the split is empty.
fn validation_loss(
    corpus: &Corpus,
    net: &model::Model,
    options: &mut Options,
    world: &World,
    micro: usize,
) -> Result<Option<f64>> {
    let available = corpus.samples(Split::Validation);
    let want = (options.eval_batches.max(1) * micro * world.size) as u64;
    let total = available.min(want);
    if total < world.size as u64 {
        return Ok(None);
    }
    let (sum, count) = rank_loss(corpus, Split::Validation, total, net, options, world, micro)?;
    let mut mean = vec![Tensor::from_slice(&[(sum / count.max(1) as f64) as f32])];
    if let Some(g) = options.group.as_mut() {
        g.all_reduce_mean(&mut mean)?;
    }
    Ok(Some(mean[0].f_double_value(&[0]).map_err(tch_err)?))
}

/// This rank's summed loss over its share of the first `total` samples of a split
/// (every `world.size`-th from its rank), and how many samples that is.
fn rank_loss(
    corpus: &Corpus,
    split: Split,
    total: u64,
    net: &model::Model,
    options: &Options,
    world: &World,
    micro: usize,
) -> Result<(f64, usize)> {
    let mine: Vec<u64> = (world.rank as u64..total).step_by(world.size).collect();
    let _guard = tch::no_grad_guard();
    let (mut sum, mut count) = (0.0, 0usize);
    for chunk in mine.chunks(micro.max(1)) {
        let mut tokens = Vec::new();
        for &i in chunk {
            tokens.extend(corpus.sample(split, i)?);
        }
        let loss = net.loss(&samples(tokens, chunk.len(), options.device)?)?;
        sum += loss.f_double_value(&[]).map_err(tch_err)? * chunk.len() as f64;
        count += chunk.len();
    }
    Ok((sum, count))
}

/// The mean loss of each reference set over every one of its samples (all ranks'
/// sums and counts exchanged, so that the mean is over samples whatever the ranks).
fn eval_set_losses(
    net: &model::Model,
    options: &mut Options,
    world: &World,
    micro: usize,
) -> Result<std::collections::BTreeMap<String, f64>> {
    let sets = options.eval_sets.clone();
    let mut out = std::collections::BTreeMap::new();
    for (name, corpus) in &sets {
        let total = corpus.samples(Split::Train);
        let (sum, count) = rank_loss(corpus, Split::Train, total, net, options, world, micro)?;
        let (s, c) = match options.group.as_mut() {
            None => (sum, count as f64),
            Some(g) => {
                // The exchange carries f32 (as the gradients).
                let mut exchanged = vec![Tensor::from_slice(&[sum as f32, count as f32])];
                g.all_reduce_mean(&mut exchanged)?;
                (
                    exchanged[0].f_double_value(&[0]).map_err(tch_err)?,
                    exchanged[0].f_double_value(&[1]).map_err(tch_err)?,
                )
            }
        };
        if c > 0.0 {
            out.insert(name.clone(), s / c);
        }
    }
    Ok(out)
}

/// Trains a model of shape `model` on `corpus` to step `config.steps`. With
/// `checkpoints`, rank 0 writes them, and (when asked) every rank resumes from the
/// newest, so that a run stopped anywhere and resumed ends with the same weights as one
/// that never stopped. Each step's record goes to `on_step` as it finishes.
pub fn train_with(
    corpus: Arc<Corpus>,
    model: &model::ModelConfig,
    config: &TrainConfig,
    checkpoints: Option<&Checkpoints>,
    mut options: Options,
    on_step: &mut dyn FnMut(&StepRecord),
) -> Result<()> {
    let world = options
        .group
        .as_ref()
        .map(|g| g.world().clone())
        .unwrap_or_else(World::single);
    let device = options.device;
    let seq_len = corpus.config().seq_len;
    let (hash, hashed) = config_hash(model, config, corpus.config())?;
    let bf16 = config.precision.is_bf16(device);
    let vs = nn::VarStore::new(device);
    let net = seeded(config.seed, || model::Model::new(&vs, model))?;
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    // f32 master weights in one flat buffer (matrices first: optim::Layout), `masters`
    // their per-parameter views. The parameters themselves are views of it (f32), or
    // of one flat bf16 copy of it, refreshed by one copy after each update.
    let layout = optim::Layout::of(named.iter().map(|(_, t)| t.size()).collect());
    let originals: Vec<Tensor> = named.iter().map(|(_, t)| t.shallow_clone()).collect();
    let master = optim::Flat::copy_of(&originals, &layout, Kind::Float)?;
    let mut masters: Vec<Tensor> = master.views.iter().map(Tensor::shallow_clone).collect();
    let compute = if bf16 {
        Some(Tensor::f_zeros([layout.total], (Kind::BFloat16, device)).map_err(tch_err)?)
    } else {
        None
    };
    let params: Vec<Tensor> = named.iter().map(|(_, t)| t.shallow_clone()).collect();
    {
        let _guard = tch::no_grad_guard();
        let target = compute.as_ref().unwrap_or(&master.flat);
        for (p, view) in params.iter().zip(optim::views(target, &layout)?) {
            p.shallow_clone().set_data(&view);
        }
    }
    let sync_params = || -> Result<()> {
        if let Some(c) = &compute {
            let _guard = tch::no_grad_guard();
            c.shallow_clone().f_copy_(&master.flat).map_err(tch_err)?;
        }
        Ok(())
    };
    sync_params()?;
    let mut opt = optim::AdamW::new(&masters, &config.adamw)?;
    // The step's gradient in the optimiser's layout, kept from step to step.
    let grad = Tensor::f_zeros([layout.total], (Kind::Float, device)).map_err(tch_err)?;
    let (mut start, mut position) = (0u64, 0u64);
    if let Some(c) = checkpoints.filter(|c| c.resume)
        && let Some(loaded) = checkpoint::load_latest(&c.storage, &c.dir, &hash)?
    {
        restore(&mut masters, &named, &loaded.params, "")?;
        restore(&mut opt.m, &named, &loaded.optim, "m.")?;
        restore(&mut opt.v, &named, &loaded.optim, "v.")?;
        opt.step = loaded.state.optim_step;
        (start, position) = (loaded.state.step, loaded.state.position);
        sync_params()?;
    }
    let micro = config.micro_batch.max(1);
    let accumulation = accumulation(config, seq_len, world.size)?;
    let flops_per_token = model.flops_per_token(seq_len);
    let mut loader = data::Loader::start(corpus.clone(), position, micro, world.rank, world.size)?;
    let mut unsaved: Vec<StepRecord> = Vec::new();
    for step in start..config.steps {
        let started = Instant::now();
        let waited = loader.waited();
        // The loop draws no random numbers today (no dropout); were it to, each step's
        // draws would depend on (seed, step) alone.
        seeded(step_seed(config.seed, step), || ());
        let mut loss_sum = 0.0;
        let mut phases = crate::Phases::default();
        for micro_batch in 0..accumulation {
            let next = loader.next_batch()?;
            position = next.next_position;
            let t = Instant::now();
            let loss = net.loss(&samples(next.tokens, micro, device)?)?;
            loss_sum += loss.f_double_value(&[]).map_err(tch_err)?;
            phases.forward += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let scaled = loss.f_div_scalar(accumulation as f64).map_err(tch_err)?;
            // The gradients returned, not accumulated into each parameter's `.grad`
            // (which would be zeroed, then added to, every step), and gathered into the
            // flat f32 gradient in the optimiser's layout (bf16 ones upcast).
            let grads =
                Tensor::f_run_backward(&[&scaled], &params, false, false).map_err(tch_err)?;
            let grads = if bf16 {
                grads
                    .iter()
                    .map(|g| g.f_to_kind(Kind::Float).map_err(tch_err))
                    .collect::<Result<Vec<_>>>()?
            } else {
                grads
            };
            if micro_batch == 0 {
                optim::flatten_into(&grads, &opt.layout, &grad)?;
            } else {
                let _ = grad
                    .shallow_clone()
                    .f_add_(&optim::flatten(&grads, &opt.layout)?)
                    .map_err(tch_err)?;
            }
            phases.backward += t.elapsed().as_secs_f64();
        }
        let optimizer_started = Instant::now();
        // The step's loss rides along with the gradient, so that one exchange averages
        // both over the ranks (in place).
        let mut exchanged = vec![
            grad.shallow_clone(),
            Tensor::from_slice(&[(loss_sum / accumulation as f64) as f32])
                .f_to_device(device)
                .map_err(tch_err)?,
        ];
        if let Some(g) = options.group.as_mut() {
            g.all_reduce_mean(&mut exchanged)?;
        }
        let loss = exchanged[1].f_double_value(&[0]).map_err(tch_err)?;
        let grad_norm = clip_grad_norm(std::slice::from_ref(&grad), config.max_grad_norm)?;
        let lr = config.schedule.lr_at(step);
        opt.update(&master.flat, &grad, lr)?;
        sync_params()?;
        phases.optimizer = optimizer_started.elapsed().as_secs_f64();
        let last = step + 1 == config.steps;
        let evaluate = options.eval_every > 0 && ((step + 1) % options.eval_every == 0 || last);
        let (val_loss, eval_losses) = if evaluate {
            (
                validation_loss(&corpus, &net, &mut options, &world, micro)?,
                eval_set_losses(&net, &mut options, &world, micro)?,
            )
        } else {
            (None, std::collections::BTreeMap::new())
        };
        let mut eval_tasks = std::collections::BTreeMap::new();
        if evaluate {
            for (name, set) in &options.eval_tasks {
                let (score, lls) = crate::tasks::score(&net, set, device)?;
                eval_tasks.insert(name.clone(), score);
                if let Some(c) = checkpoints
                    && world.rank == 0
                {
                    let file = c
                        .dir
                        .join(&format!("eval/{name}-step-{:08}.json", step + 1));
                    let json = serde_json::json!({"step": step + 1, "loglikelihoods": lls});
                    c.storage.put(&file, json.to_string().as_bytes())?;
                }
            }
        }
        if let Device::Cuda(index) = device {
            tch::Cuda::synchronize(index as i64);
        }
        let seconds = started.elapsed().as_secs_f64();
        let tokens = (accumulation * micro * seq_len * world.size) as u64;
        let record = StepRecord {
            step,
            loss,
            lr,
            grad_norm,
            tokens,
            seconds,
            data_wait: (loader.waited() - waited).as_secs_f64(),
            mfu: options.peak_flops.map(|peak| {
                tokens as f64 * flops_per_token / seconds.max(1e-9) / (peak * world.size as f64)
            }),
            val_loss,
            eval_losses,
            eval_tasks,
            phases: (device == Device::Cpu).then_some(phases),
        };
        on_step(&record);
        unsaved.push(record);
        if let Some(c) = checkpoints
            && world.rank == 0
            && c.every > 0
            && ((step + 1) % c.every == 0 || last)
        {
            let state = checkpoint::State {
                step: step + 1,
                optim_step: opt.step,
                position,
                rng_seed: step_seed(config.seed, step + 1),
                config_hash: hash.clone(),
                config: hashed.clone(),
                tokenizer: Some(checkpoint::TokenizerRef::of(corpus.manifest())),
            };
            let saved: Vec<(String, Tensor)> = named
                .iter()
                .zip(&masters)
                .map(|((n, _), m)| (n.clone(), m.shallow_clone()))
                .collect();
            checkpoint::save(
                &c.storage,
                &c.dir,
                &saved,
                (&opt.m, &opt.v),
                &state,
                &unsaved,
                c.keep,
            )?;
            unsaved.clear();
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
