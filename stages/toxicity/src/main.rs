//! `mill-toxicity`: adult-URL lists, bad-word lists and fastText classifiers over
//! document shards; `mill-toxicity train` fits a new classifier.
// Doc comments here are clap's --help text ([train] tables, <output> paths), not API docs.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::{Parser, Subcommand};
use pipeline::Storage;
use pipeline::cli::{StageArgs, init_logging, run_stage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-toxicity",
    version,
    about = "Drop toxic documents (URL lists, word lists, fastText classifiers); train classifiers",
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
    /// Fit a fastText classifier on labelled documents (Parquet or JSONL with `text` and
    /// a label field); writes <output>/model.bin (model.ftz when [train.quantize] is
    /// set) and <output>/train.json.
    Train {
        #[command(flatten)]
        stage: StageArgs,
    },
    /// Print what `classifier = "default"` stands for: the shipped model's settings, as
    /// a [classifier] table.
    DefaultModel,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match (args.command, args.stage) {
        (Some(Command::DefaultModel), _) => {
            let c = toxicity::shipped::config();
            println!(
                "# The shipped classifier ({}, {} bytes): `classifier = \"default\"`.\n\
                 [classifier]\nmodel = \"{}\"\nmodel_sha256 = \"{}\"\nlabels = {:?}\n\
                 threshold = {}\nmode = \"{}\"\nnormalize = \"words\"",
                toxicity::shipped::FILE,
                toxicity::shipped::BYTES.len(),
                c.model,
                toxicity::shipped::sha256(),
                c.labels,
                c.threshold,
                format!("{:?}", c.mode).to_lowercase(),
            );
        }
        (Some(Command::Train { stage }), _) => {
            init_logging(stage.log_format);
            let storage = Storage::new();
            let config: toxicity::Config = stage.load_config(&storage)?;
            let opts = stage.options()?;
            let (run, trained) = toxicity::train::train_step(&storage, &opts, &config.train)?;
            let Some(r) = trained else {
                if !opts.dry_run {
                    println!(
                        "{}",
                        pipeline::cli::summary(toxicity::train::TRAIN_STEP, &run)
                    );
                }
                return Ok(());
            };
            if r.validation_documents == 0 {
                println!(
                    "train: {} documents, none held out\n  model {}",
                    r.train_documents, r.model
                );
                return Ok(());
            }
            println!(
                "train: {} documents, {} held out; at {:.2}: precision {:.3}, recall {:.3}, F1 {:.3}\n  model {}",
                r.train_documents,
                r.validation_documents,
                r.at_threshold.threshold,
                r.at_threshold.precision,
                r.at_threshold.recall,
                r.at_threshold.f1,
                r.model
            );
            println!("  threshold  precision  recall  F1");
            for s in &r.sweep {
                println!(
                    "  {:9.1}  {:9.3}  {:6.3}  {:.3}",
                    s.threshold, s.precision, s.recall, s.f1
                );
            }
        }
        (None, Some(stage)) => {
            run_stage(&stage, toxicity::step)?;
        }
        (None, None) => anyhow::bail!("give --input and --output, or a subcommand (see --help)"),
    }
    Ok(())
}
