//! `mill-tokenize`: train a BPE vocabulary, encode documents to Megatron token shards,
//! shuffle shards globally, inspect a shard.
// Doc comments here are clap's --help text ([train] tables, <output> paths), not API docs.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::{Parser, Subcommand};
use pipeline::cli::{LogFormat, StageArgs, init_logging, summary};
use pipeline::{Location, Storage};
use tokenize::merge::Phase;
use tokenize::{Config, Loaded};

#[derive(Debug, Parser)]
#[command(
    name = "mill-tokenize",
    version,
    about = "Train a byte-level BPE vocabulary and encode documents into Megatron token shards"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Train a vocabulary on a seeded sample of the document shards at --input; writes
    /// <output>/tokenizer.json and <output>/train.json.
    Train {
        #[command(flatten)]
        stage: StageArgs,
    },
    /// Encode documents into <output>/<stem>-NNNNN.bin/.idx with the end-of-document token
    /// after each document; writes <output>/manifest.json when every input is done.
    Encode {
        #[command(flatten)]
        stage: StageArgs,
        /// The tokenizer.json (overrides [encode].tokenizer).
        #[arg(long)]
        tokenizer: Option<String>,
    },
    /// Shuffle the documents of the token shards at --input into shards of about
    /// [merge].shard_tokens tokens (two phases: scatter per input, gather per output).
    Merge {
        #[command(flatten)]
        stage: StageArgs,
        #[arg(long, value_enum, default_value_t = Phase::All)]
        phase: Phase,
    },
    /// Print a token shard's counts and decode its first documents.
    Inspect {
        /// The dataset: its address without .bin/.idx.
        prefix: String,
        /// tokenizer.json to decode with (default: the one the manifest beside the shard names).
        #[arg(long)]
        tokenizer: Option<String>,
        /// Documents to decode.
        #[arg(long, default_value_t = 3)]
        show: usize,
    },
}

fn main() -> anyhow::Result<()> {
    let storage = Storage::new();
    match Args::parse().command {
        Command::Train { stage } => {
            init_logging(stage.log_format);
            let config: Config = stage.load_config(&storage)?;
            let options = stage.options()?;
            let (run, trained) = tokenize::train_step(&storage, &options, &config.train)?;
            match trained {
                Some(report) => println!(
                    "train: vocabulary {} (asked {}) from {} documents, {} bytes, in {:.1} s; peak memory {} MiB\n  {}",
                    report.vocab_size,
                    report.vocab_size_requested,
                    report.sample_documents,
                    report.sample_bytes,
                    report.seconds,
                    report
                        .peak_rss_bytes
                        .map_or("?".into(), |b| (b >> 20).to_string()),
                    report.tokenizer
                ),
                None if !options.dry_run => println!("{}", summary(tokenize::TRAIN_STEP, &run)),
                None => {}
            }
        }
        Command::Encode { stage, tokenizer } => {
            init_logging(stage.log_format);
            let config: Config = stage.load_config(&storage)?;
            let url = tokenizer
                .or(config.encode.tokenizer.clone())
                .ok_or_else(|| {
                    anyhow::anyhow!("no tokenizer: pass --tokenizer or set [encode].tokenizer")
                })?;
            let loaded = Loaded::read(
                &storage,
                &url,
                config.encode.encoder,
                &config.encode.end_of_document,
            )?;
            let options = stage.options()?;
            let report = tokenize::encode(&storage, &options, &config.encode, &loaded)?;
            if !options.dry_run {
                println!("{}", summary(tokenize::ENCODE_STEP, &report));
            }
        }
        Command::Merge { stage, phase } => {
            init_logging(stage.log_format);
            let config: Config = stage.load_config(&storage)?;
            let options = stage.options()?;
            if phase == Phase::All && options.tasks > 1 {
                anyhow::bail!(
                    "with --tasks > 1, run --phase scatter on every task, then --phase gather"
                );
            }
            if matches!(phase, Phase::Scatter | Phase::All) {
                let s = tokenize::merge::scatter(&storage, &options, &config.merge)?;
                println!(
                    "tokenize.scatter: documents {}, bytes out {}",
                    s.docs_in, s.bytes_out
                );
            }
            if matches!(phase, Phase::Gather | Phase::All) && !options.dry_run {
                let r = tokenize::merge::gather(&storage, &options, &config.merge)?;
                println!("{}", summary(tokenize::merge::GATHER_STEP, &r));
            }
        }
        Command::Inspect {
            prefix,
            tokenizer,
            show,
        } => {
            init_logging(LogFormat::Text);
            let prefix = Location::parse(&prefix)?;
            let url = match tokenizer {
                Some(u) => Some(u),
                None => manifest_tokenizer(&storage, &prefix),
            };
            let loaded = match url {
                Some(u) => Some(Loaded::read(
                    &storage,
                    &u,
                    tokenize::EncoderKind::Reference,
                    tokenize::END_OF_DOCUMENT,
                )?),
                None => None,
            };
            print!(
                "{}",
                tokenize::inspect(&storage, &prefix, loaded.as_ref(), show)?
            );
        }
    }
    Ok(())
}

/// The tokenizer named by the manifest in the folder of `prefix`, if there is one.
fn manifest_tokenizer(storage: &Storage, prefix: &Location) -> Option<String> {
    let name = prefix.file_name().to_string();
    let text = prefix.to_string();
    let parent = Location::parse(text.strip_suffix(&name)?).ok()?;
    tokenize::read_manifest(storage, &parent)
        .ok()
        .map(|m| m.tokenizer)
}
