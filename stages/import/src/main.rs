//! `mill-import`: JSONL or Parquet documents in, tokenmill Parquet shards out.

use clap::Parser;
use pipeline::cli::{StageArgs, run_stage};

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
    run_stage(&args.stage, |_, config| Ok(import::step(config)))?;
    Ok(())
}
