//! `mill-langid`: fastText language identification over document shards.

use anyhow::Context;
use clap::Parser;
use pipeline::cli::{StageArgs, init_logging, summary};
use pipeline::{Storage, run};

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
    init_logging(args.stage.log_format);
    let storage = Storage::new();
    let config: langid::Config = args.stage.load_config(&storage)?;
    let step = langid::step(&storage, &config)?;
    let options = args.stage.options()?;
    let report = run(&step, &storage, &options)
        .with_context(|| format!("langid from {} into {}", options.input, options.output))?;
    if !options.dry_run {
        println!("{}", summary(&step.name, &report));
    }
    Ok(())
}
