//! `mill-quality`: Gopher, C4 and FineWeb quality rules over document shards.

use anyhow::Context;
use clap::Parser;
use pipeline::cli::{StageArgs, init_logging, summary};
use pipeline::{Storage, run};

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
    init_logging(args.stage.log_format);
    let storage = Storage::new();
    let config: quality::Config = args.stage.load_config(&storage)?;
    let step = quality::step(&config);
    let options = args.stage.options()?;
    let report = run(&step, &storage, &options)
        .with_context(|| format!("quality from {} into {}", options.input, options.output))?;
    if !options.dry_run {
        println!("{}", summary(&step.name, &report));
    }
    Ok(())
}
