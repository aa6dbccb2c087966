//! `mill-classify`: learned quality scores (fastText and transformer classifiers) over
//! document shards; `train` fits a fastText classifier; `threshold` and `filter` keep
//! the top share of a corpus.
// Doc comments here are clap's --help text, not API docs.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::{Parser, Subcommand};
use pipeline::cli::{StageArgs, init_logging, run_stage, summary};
use pipeline::{Location, Storage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-classify",
    version,
    about = "Score documents with fastText and transformer classifiers; keep the top share",
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
    /// Fit a fastText classifier on positives and negatives (Parquet or JSONL); writes
    /// <output>/model.bin (model.ftz with [train.quantize]) and <output>/train.json.
    Train {
        /// Documents of the positive label (DCLM: OpenHermes 2.5 and ELI5 answers).
        #[arg(long)]
        positives: String,
        /// Documents of the negative label (DCLM: RefinedWeb pages).
        #[arg(long)]
        negatives: String,
        /// Where the model goes.
        #[arg(long)]
        output: String,
        /// The configuration; its [train] table holds the settings.
        #[arg(long)]
        config: Option<String>,
        /// Train again even when the marker says it is done.
        #[arg(long)]
        force: bool,
    },
    /// Merge the score sketches of a scored output (--input) into the thresholds of
    /// every keep_top classifier: <output>/threshold.json.
    Threshold {
        #[command(flatten)]
        stage: StageArgs,
    },
    /// Keep the documents at or over the thresholds of a threshold output.
    Filter {
        #[command(flatten)]
        stage: StageArgs,
        /// The threshold step's output (or its threshold.json).
        #[arg(long)]
        threshold: String,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match (args.command, args.stage) {
        (
            Some(Command::Train {
                positives,
                negatives,
                output,
                config,
                force,
            }),
            _,
        ) => {
            init_logging(pipeline::cli::LogFormat::Auto);
            let storage = Storage::new();
            let config: classify::Config = pipeline::cli::load_toml(&storage, config.as_deref())?;
            let mut opts =
                pipeline::RunOptions::new(Location::parse(&positives)?, Location::parse(&output)?);
            opts.force = force;
            let (run, trained) = classify::train::train_step(
                &storage,
                &opts,
                &Location::parse(&positives)?,
                &Location::parse(&negatives)?,
                &config.train,
            )?;
            match trained {
                None => println!("{}", summary(classify::train::TRAIN_STEP, &run)),
                Some(r) => {
                    println!(
                        "train: {} documents, {} held out; at {:.2}: precision {:.3}, recall {:.3}, F1 {:.3}\n  model {} (sha256 {})",
                        r.train_documents,
                        r.validation_documents,
                        r.at_threshold.threshold,
                        r.at_threshold.precision,
                        r.at_threshold.recall,
                        r.at_threshold.f1,
                        r.model,
                        r.model_sha256
                    );
                }
            }
        }
        (Some(Command::Threshold { stage }), _) => {
            init_logging(stage.log_format);
            let storage = Storage::new();
            let config: classify::Config = stage.load_config(&storage)?;
            let report = classify::top::threshold_step(&storage, &stage.options()?, &config)?;
            println!("{}", summary(classify::top::THRESHOLD_STEP, &report));
            let loc = Location::parse(&stage.output)?.join(classify::top::THRESHOLD_FILE);
            if storage.exists(&loc)? {
                let (t, _) = classify::top::read_thresholds(&storage, &loc.to_string())?;
                for c in t.classifiers {
                    println!(
                        "  {}: keep_top {} of {} documents: threshold {} (rank error ≤ {:.5} at 99%)",
                        c.name, c.keep_top, c.documents, c.threshold, c.rank_error
                    );
                }
            }
        }
        (Some(Command::Filter { stage, threshold }), _) => {
            run_stage(&stage, |storage, config: &classify::Config| {
                classify::top::filter_step(storage, config, &threshold)
            })?;
        }
        (None, Some(stage)) => {
            run_stage(&stage, classify::step)?;
        }
        (None, None) => anyhow::bail!("give --input and --output, or a subcommand (see --help)"),
    }
    Ok(())
}
