//! `mill-train`: trains the model a TOML file describes on token shards (disk or S3),
//! writing checkpoints and a JSON line of metrics per step on standard output.

use std::sync::Arc;

use clap::Parser;
use pipeline::cli::{LogFormat, init_logging, load_toml};
use pipeline::{Location, Storage};
use trainer::data::Corpus;
use trainer::run::RunConfig;

#[derive(Debug, Parser)]
#[command(
    name = "mill-train",
    version,
    about = "Train a decoder on token shards"
)]
struct Args {
    /// The token shards: a `mill-tokenize encode` or `merge` output (path or s3://…).
    #[arg(long)]
    shards: String,
    /// Checkpoint folder (path or s3://…).
    #[arg(long)]
    checkpoints: String,
    /// The run's TOML: preset, tables model, data, train; checkpoint_every, keep.
    #[arg(long)]
    config: Option<String>,
    /// Continue from the newest checkpoint in the folder, when there is one.
    #[arg(long)]
    resume: bool,
    #[arg(long, value_enum, default_value_t = LogFormat::Auto)]
    log_format: LogFormat,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.log_format);
    let storage = Storage::new();
    let run: RunConfig = load_toml(&storage, args.config.as_deref())?;
    let corpus = Arc::new(Corpus::open(
        &storage,
        &Location::parse(&args.shards)?,
        &run.data,
    )?);
    let model = run.model(corpus.manifest().vocab_size)?;
    corpus.check_model(model.vocab_size, None)?;
    let checkpoints = trainer::Checkpoints {
        storage: storage.clone(),
        dir: Location::parse(&args.checkpoints)?,
        every: run.checkpoint_every,
        keep: run.keep,
        resume: args.resume,
    };
    trainer::train_with(corpus, &model, &run.train, Some(&checkpoints), &mut |r| {
        println!(
            "{}",
            serde_json::json!({
                "step": r.step,
                "loss": r.loss,
                "lr": r.lr,
                "grad_norm": r.grad_norm,
                "tokens_per_s": r.tokens_per_s(),
                "data_wait_s": r.data_wait,
            })
        );
    })?;
    Ok(())
}
