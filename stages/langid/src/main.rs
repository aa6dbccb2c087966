//! `mill-langid`: fastText language identification over document shards.

use clap::Parser;
use pipeline::cli::{StageArgs, run_stage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-langid",
    version,
    about = "Identify document languages with fastText and keep the wanted ones"
)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    run_stage(&args.stage, langid::step)?;
    Ok(())
}
