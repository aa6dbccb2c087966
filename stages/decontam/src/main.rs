//! `mill-decontam`: drops (or cuts) documents that contain n-grams of evaluation sets;
//! `mill-decontam index` builds the n-gram index from the evaluation sets.
// Doc comments here are clap's --help text, not API docs.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::{Parser, Subcommand};
use pipeline::Storage;
use pipeline::cli::{StageArgs, init_logging, run_stage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-decontam",
    version,
    about = "Remove documents that contain n-grams of evaluation sets; build the n-gram index",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Args {
    #[command(flatten)]
    stage: Option<StageArgs>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Index the n-grams of the evaluation sets under --input (JSONL or Parquet files);
    /// writes <output>/ngrams.bin and <output>/index.json.
    Index {
        #[command(flatten)]
        stage: StageArgs,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match (args.command, args.stage) {
        (Some(Command::Index { stage }), _) => {
            init_logging(stage.log_format);
            let storage = Storage::new();
            let config: decontam::Config = stage.load_config(&storage)?;
            let opts = stage.options()?;
            let report = decontam::index_step(&storage, &opts, &config)?;
            if !opts.dry_run {
                println!("{}", pipeline::cli::summary(decontam::INDEX_STEP, &report));
            }
        }
        (None, Some(stage)) => {
            run_stage(&stage, decontam::step)?;
        }
        (None, None) => anyhow::bail!("give --input and --output, or a subcommand (see --help)"),
    }
    Ok(())
}
