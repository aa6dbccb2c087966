//! `mill-quality`: Gopher, C4 and FineWeb quality rules over document shards.

use clap::Parser;
use pipeline::cli::{StageArgs, run_stage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-quality",
    version,
    about = "Apply the Gopher, C4 and FineWeb quality rules"
)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    run_stage(&args.stage, quality::step)?;
    Ok(())
}
