//! `mill-dedup`: MinHash, exact-text and URL deduplication in four phases; exact-substring
//! dedup in two.
// Doc comments here are clap's --help text (<output> paths), not API docs.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::{Parser, Subcommand};
use pipeline::cli::{StageArgs, init_logging, summary};
use pipeline::{Location, Storage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-dedup",
    version,
    about = "Deduplicate documents: MinHash near-duplicates, identical texts, repeated URLs"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Phase 1: one signature file per input document shard (<output>/<stem>.sig).
    Signatures {
        #[command(flatten)]
        stage: StageArgs,
    },
    /// Phase 2: --input is the signature folder; per band and hash range, merge all
    /// signature files and write candidate pairs (<output>/<band>-<range>.pairs).
    Buckets {
        #[command(flatten)]
        stage: StageArgs,
        /// An index of earlier runs (`mill-dedup index`): documents matching it are removed.
        #[arg(long)]
        against: Option<String>,
    },
    /// Phase 3: --input is the pairs folder; union-find in one unit (task 0), or in
    /// rounds of units all tasks share past clusters_memory_bytes; one keeper per
    /// cluster, removal lists (<output>/<stem>.dups) and summary.json.
    Clusters {
        #[command(flatten)]
        stage: StageArgs,
    },
    /// Phase 4: --input is the same documents the signatures came from; drops what the
    /// removal lists name and writes <kind>_cluster_size on the rest.
    Filter {
        #[command(flatten)]
        stage: StageArgs,
        /// The clusters phase's output.
        #[arg(long)]
        clusters: String,
    },
    /// Exact-substring dedup, phase 1: the inputs (documents) in partitions of
    /// [substring] partition_bytes; spans of min_tokens or more that occur earlier are
    /// listed per input (<output>/<stem>.cuts).
    Substring {
        #[command(flatten)]
        stage: StageArgs,
    },
    /// Exact-substring dedup, phase 2: --input is the same documents; cuts what the
    /// substring phase listed, drops documents left too short (substring_dup).
    SubstringFilter {
        #[command(flatten)]
        stage: StageArgs,
        /// The substring phase's output.
        #[arg(long)]
        cuts: String,
    },
    /// Append the documents a finished run kept to an index (--output), for later
    /// `buckets --against`; --input is the signature folder.
    Index {
        #[command(flatten)]
        stage: StageArgs,
        /// The clusters phase's output of the same run.
        #[arg(long)]
        clusters: String,
    },
}

fn main() -> anyhow::Result<()> {
    let storage = Storage::new();
    match Args::parse().command {
        Command::Signatures { stage } => {
            init_logging(stage.log_format);
            let config: dedup::Config = stage.load_config(&storage)?;
            let opts = stage.options()?;
            let report = dedup::signatures::signatures(&storage, &opts, &config)?;
            if !opts.dry_run {
                println!("{}", summary(dedup::signatures::STEP, &report));
            }
        }
        Command::Buckets { stage, against } => {
            init_logging(stage.log_format);
            let config: dedup::Config = stage.load_config(&storage)?;
            let opts = stage.options()?;
            let against = against.as_deref().map(Location::parse).transpose()?;
            let report = dedup::buckets::buckets(&storage, &opts, &config, against.as_ref())?;
            if !opts.dry_run {
                println!("{}", summary(dedup::buckets::STEP, &report));
            }
        }
        Command::Clusters { stage } => {
            dedup::components::one_allocator_arena();
            init_logging(stage.log_format);
            let config: dedup::Config = stage.load_config(&storage)?;
            let opts = stage.options()?;
            let report = dedup::clusters::clusters(&storage, &opts, &config)?;
            if !opts.dry_run {
                println!(
                    "{}: task {} of {}: {:.1} s of units, {} bytes written",
                    dedup::clusters::STEP,
                    opts.task,
                    opts.tasks,
                    report.stats.seconds,
                    report.stats.bytes_out
                );
            }
            if !opts.dry_run && opts.task == 0 {
                let s = dedup::clusters::read_summary(&storage, &opts.output)?;
                println!(
                    "{}: {} ({} files, {} documents, {} pairs): {} clusters, largest {}, {} documents to remove ({} matched the index)",
                    dedup::clusters::STEP,
                    if report.processed.is_empty() {
                        "already done"
                    } else {
                        "done"
                    },
                    s.files,
                    s.documents,
                    s.pairs,
                    s.clusters,
                    s.largest,
                    s.removed,
                    s.matched_index
                );
            }
        }
        Command::Filter { stage, clusters } => {
            pipeline::cli::run_stage(&stage, |storage, config: &dedup::Config| {
                dedup::filter::step(storage, config, &clusters)
            })?;
        }
        Command::Substring { stage } => {
            init_logging(stage.log_format);
            let config: dedup::Config = stage.load_config(&storage)?;
            let opts = stage.options()?;
            let report = dedup::substring::substring(&storage, &opts, &config.substring)?;
            if !opts.dry_run {
                println!("{}", summary(dedup::substring::STEP, &report));
            }
        }
        Command::SubstringFilter { stage, cuts } => {
            pipeline::cli::run_stage(&stage, |storage, config: &dedup::Config| {
                dedup::substring::filter_step(storage, &config.substring, &cuts)
            })?;
        }
        Command::Index { stage, clusters } => {
            init_logging(stage.log_format);
            let config: dedup::Config = stage.load_config(&storage)?;
            let opts = stage.options()?;
            let report =
                dedup::index::index(&storage, &opts, &config, &Location::parse(&clusters)?)?;
            if !opts.dry_run {
                println!("{}", summary(dedup::index::STEP, &report));
            }
        }
    }
    Ok(())
}
