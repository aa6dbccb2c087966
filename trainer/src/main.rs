//! `mill-train`: trains the model a TOML file describes on token shards (disk or S3),
//! writing checkpoints and a JSON line of metrics per step on standard output;
//! `mill-train export` writes a checkpoint as a Hugging Face Llama folder.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::{Parser, Subcommand};
use pipeline::cli::{LogFormat, init_logging, load_toml};
use pipeline::{Location, Storage};
use trainer::data::Corpus;
use trainer::dist::{Group, TcpGroup, World};
use trainer::metrics::{Watchdog, gpu_name, peak_of};
use trainer::run::RunConfig;

#[derive(Debug, Parser)]
#[command(
    name = "mill-train",
    version,
    about = "Train a decoder on token shards",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    train: TrainArgs,
    #[arg(long, value_enum, default_value_t = LogFormat::Auto, global = true)]
    log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a checkpoint as a Hugging Face Llama folder (config.json,
    /// model.safetensors, the tokenizer).
    Export {
        /// A checkpoint (`…/step-NNNNNNNN`) or a checkpoint folder (its newest).
        checkpoint: String,
        /// The folder to write (path or s3://…).
        out: String,
        /// The tokenizer.json to ship (default: the one the shards were encoded with).
        #[arg(long)]
        tokenizer: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
struct TrainArgs {
    /// The token shards: a `mill-tokenize encode` or `merge` output (path or s3://…).
    #[arg(long, required = true)]
    shards: Option<String>,
    /// Checkpoint folder (path or s3://…).
    #[arg(long, required = true)]
    checkpoints: Option<String>,
    /// The run's TOML: preset, tables model, data, train; checkpoint_every, keep,
    /// log_every, eval_every, eval_batches.
    #[arg(long)]
    config: Option<String>,
    /// Continue from the newest checkpoint in the folder, when there is one.
    #[arg(long)]
    resume: bool,
    /// `auto` (the GPU of LOCAL_RANK when there is one), `cpu` or `cuda`.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Peak bf16 TFLOP/s of one device, for MFU (default: from the GPU's name).
    #[arg(long)]
    peak_tflops: Option<f64>,
    /// Seconds without a finished step after which the run logs, writes a note in the
    /// checkpoint folder and exits with status 3, for the scheduler to retry from the
    /// last checkpoint (0: no watchdog).
    #[arg(long, default_value_t = 1800)]
    stall_timeout: u64,
    /// libtorch's CPU threads (default: the run file's `threads`; 0 there means one
    /// per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Exit (status 4) when standard input closes: `mill` passes one end of a pipe, so
    /// that a killed `mill` does not leave a trainer running.
    #[arg(long)]
    stop_with_parent: bool,
}

/// Exit status of a run stopped by the stall watchdog.
const STALLED: i32 = 3;
/// Exit status of a run stopped because its parent went away (`--stop-with-parent`).
const ORPHANED: i32 = 4;

fn device(name: &str, world: &World) -> anyhow::Result<tch::Device> {
    Ok(match name {
        "cpu" => tch::Device::Cpu,
        "cuda" => tch::Device::Cuda(world.local_rank),
        "auto" if tch::Cuda::is_available() => tch::Device::Cuda(world.local_rank),
        "auto" => tch::Device::Cpu,
        other => anyhow::bail!("--device {other:?}: auto, cpu or cuda"),
    })
}

fn group(world: &World, device: tch::Device) -> anyhow::Result<Option<Box<dyn Group>>> {
    if world.size < 2 {
        return Ok(None);
    }
    let timeout = Duration::from_secs(600);
    if device.is_cuda() {
        #[cfg(feature = "cuda")]
        return Ok(Some(Box::new(trainer::nccl::NcclGroup::connect(
            world, timeout,
        )?)));
        #[cfg(not(feature = "cuda"))]
        anyhow::bail!(
            "{} GPU processes: gradients travel by NCCL, which this build lacks (build with --features cuda)",
            world.size
        );
    }
    Ok(Some(Box::new(TcpGroup::connect(world, timeout)?)))
}

fn train(args: TrainArgs) -> anyhow::Result<()> {
    if args.stop_with_parent {
        std::thread::Builder::new()
            .name("tokenmill-parent".into())
            .spawn(|| {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                tracing::error!("standard input closed: the parent is gone, stopping");
                std::process::exit(ORPHANED);
            })?;
    }
    let storage = Storage::new();
    let (Some(shards), Some(ckpt)) = (args.shards, args.checkpoints) else {
        anyhow::bail!("--shards and --checkpoints are required");
    };
    let run: RunConfig = load_toml(&storage, args.config.as_deref())?;
    let threads = args.threads.unwrap_or(run.threads);
    if threads > 0 {
        tch::set_num_threads(threads as i32);
    }
    let world = World::from_env()?;
    let device = device(&args.device, &world)?;
    // On the CPU the step's large tensors live in host memory: keep them mapped from
    // step to step instead of faulting them in again (see trainer::host_memory).
    if device == tch::Device::Cpu && !trainer::host_memory::keep_freed_memory() {
        tracing::debug!("the allocator keeps its defaults (not glibc)");
    }
    // From here on, a hang (an object store that stops answering, a step that never
    // ends) is a stall.
    let ckpt_dir = Location::parse(&ckpt)?;
    let done = Arc::new(AtomicU64::new(0));
    let watchdog = (args.stall_timeout > 0).then(|| {
        let (done, storage, dir, rank) =
            (done.clone(), storage.clone(), ckpt_dir.clone(), world.rank);
        Watchdog::start(Duration::from_secs(args.stall_timeout), move |since| {
            let steps = done.load(Ordering::Relaxed);
            tracing::error!(
                rank,
                steps,
                seconds = since.as_secs(),
                "no step finished: stalled, exiting"
            );
            let note = serde_json::json!({
                "rank": rank,
                "steps_done_this_run": steps,
                "seconds_without_a_step": since.as_secs(),
                "unix_time": std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
            });
            let name = format!("stalls/rank-{rank:05}-{}.json", note["unix_time"]);
            if let Err(e) = storage.put(&dir.join(&name), note.to_string().as_bytes()) {
                tracing::error!(error = %e, "writing the stall note");
            }
            std::process::exit(STALLED);
        })
    });
    let corpus = Arc::new(Corpus::open(
        &storage,
        &Location::parse(&shards)?,
        &run.data,
    )?);
    let model = run.model(corpus.manifest().vocab_size)?;
    corpus.check_model(model.vocab_size, None)?;
    let checkpoints = trainer::Checkpoints {
        storage: storage.clone(),
        dir: ckpt_dir.clone(),
        every: run.checkpoint_every,
        keep: run.keep,
        resume: args.resume,
    };
    let peak = args.peak_tflops.map(|t| t * 1e12).or_else(|| {
        let name = device
            .is_cuda()
            .then(|| gpu_name(world.local_rank))
            .flatten()?;
        peak_of(&name)
    });
    // Reference sets: every document of each, read as the training data is (same
    // sample length), checked to share its tokenizer.
    let mut eval_sets = Vec::new();
    for (name, url) in &run.eval_sets {
        let whole = trainer::data::DataConfig {
            validation_share: 0.0,
            ..run.data.clone()
        };
        let set = Corpus::open(&storage, &Location::parse(url)?, &whole)?;
        set.check_model(model.vocab_size, Some(&corpus.manifest().tokenizer_sha256))
            .map_err(|e| anyhow::anyhow!("reference set {name} ({url}): {e}"))?;
        eval_sets.push((name.clone(), Arc::new(set)));
    }
    let mut eval_tasks = Vec::new();
    for (name, url) in &run.eval_tasks {
        let set = trainer::tasks::TaskSet::read(&storage, url)?;
        let past = set
            .items
            .iter()
            .flat_map(|i| i.context.iter().chain(i.choices.iter().flatten()))
            .find(|&&t| t as usize >= model.vocab_size);
        if let Some(t) = past {
            anyhow::bail!(
                "task {name} ({url}): token {t} is past the model's vocabulary of {}",
                model.vocab_size
            );
        }
        eval_tasks.push((name.clone(), Arc::new(set)));
    }
    let options = trainer::Options {
        device,
        group: group(&world, device)?,
        eval_every: run.eval_every,
        eval_batches: run.eval_batches,
        peak_flops: peak,
        eval_sets,
        eval_tasks,
    };
    tracing::info!(
        rank = world.rank,
        world = world.size,
        device = ?device,
        parameters = model.parameters(),
        "training starts"
    );
    let bar = (world.rank == 0).then(|| {
        let bar = indicatif::ProgressBar::new(run.train.steps);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} steps {msg} [{elapsed} < {eta}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let log_every = run.log_every.max(1);
    trainer::train_with(
        corpus,
        &model,
        &run.train,
        Some(&checkpoints),
        options,
        &mut |r| {
            done.fetch_add(1, Ordering::Relaxed);
            if let Some(w) = &watchdog {
                w.beat();
            }
            if let Some(bar) = &bar {
                bar.set_position(r.step + 1);
                bar.set_message(format!("loss {:.3}", r.loss));
                if r.step % log_every == 0
                    || r.val_loss.is_some()
                    || !r.eval_losses.is_empty()
                    || !r.eval_tasks.is_empty()
                    || r.step + 1 == run.train.steps
                {
                    let mut line = serde_json::json!({
                        "step": r.step,
                        "loss": r.loss,
                        "lr": r.lr,
                        "grad_norm": r.grad_norm,
                        "tokens_per_s": r.tokens_per_s(),
                        "data_wait_s": r.data_wait,
                    });
                    if let Some(m) = r.mfu {
                        line["mfu"] = m.into();
                    }
                    if let Some(v) = r.val_loss {
                        line["val_loss"] = v.into();
                    }
                    for (name, v) in &r.eval_losses {
                        line[format!("eval_loss_{name}")] = (*v).into();
                    }
                    for (name, t) in &r.eval_tasks {
                        line[format!("acc_{name}")] = t.acc.into();
                        line[format!("acc_norm_{name}")] = t.acc_norm.into();
                    }
                    if let Some(p) = r.phases {
                        line["seconds"] = r.seconds.into();
                        line["forward_s"] = p.forward.into();
                        line["backward_s"] = p.backward.into();
                        line["optimizer_s"] = p.optimizer.into();
                    }
                    bar.suspend(|| println!("{line}"));
                }
            }
        },
    )?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Some(Command::Export {
            checkpoint,
            out,
            tokenizer,
        }) => {
            let storage = Storage::new();
            let tokenizer = tokenizer.as_deref().map(Location::parse).transpose()?;
            let done = trainer::export::export(
                &storage,
                &Location::parse(&checkpoint)?,
                &Location::parse(&out)?,
                tokenizer.as_ref(),
            )?;
            eprintln!(
                "exported {} ({} tensors{}) to {out}",
                done.checkpoint,
                done.tensors,
                if done.tokenizer {
                    ", tokenizer"
                } else {
                    ", no tokenizer"
                }
            );
            Ok(())
        }
        None => train(cli.train),
    }
}
