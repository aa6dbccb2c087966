//! `mill-import`: JSONL or Parquet documents in, tokenmill Parquet shards out.

use anyhow::Context;
use clap::Parser;
use pipeline::cli::{StageArgs, init_logging, summary};
use pipeline::{Storage, run};

#[derive(Debug, Parser)]
#[command(
    name = "mill-import",
    version,
    about = "Import JSONL or Parquet documents into tokenmill shards"
)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.stage.log_format);
    let storage = Storage::new();
    let config: import::Config = args.stage.load_config(&storage)?;
    let step = import::step(&config);
    let options = args.stage.options()?;
    let report = run(&step, &storage, &options)
        .with_context(|| format!("import from {} into {}", options.input, options.output))?;
    if !options.dry_run {
        println!("{}", summary(&step.name, &report));
    }
    Ok(())
}
