//! `mill-extract`: WARC files → main-text documents.

use clap::Parser;
use pipeline::cli::{StageArgs, run_stage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-extract",
    version,
    about = "Extract the main text of the HTML pages in WARC files (local or s3://)"
)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    run_stage(&args.stage, extract::step)?;
    Ok(())
}
