//! What every `mill-<stage>` binary shares: flags, logging, config loading, the
//! closing summary.

use std::io::IsTerminal;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::runner::{Report, RunOptions, Step, run};
use crate::storage::{Location, Storage};
use crate::tasks;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Text on a terminal, JSON lines otherwise.
    Auto,
    Text,
    Json,
}

/// The flags every stage binary takes.
#[derive(Debug, Clone, clap::Args)]
pub struct StageArgs {
    /// Input file or prefix: a path, file://… or s3://bucket/prefix.
    #[arg(long)]
    pub input: String,
    /// Output prefix: a path, file://… or s3://bucket/prefix.
    #[arg(long)]
    pub output: String,
    /// Stage configuration (TOML) at any address; defaults apply when omitted.
    #[arg(long)]
    pub config: Option<String>,
    /// Number of tasks the inputs are split among.
    #[arg(long, default_value_t = 1)]
    pub tasks: usize,
    /// This task's index (default: SLURM_ARRAY_TASK_ID, AWS_BATCH_JOB_ARRAY_INDEX,
    /// JOB_COMPLETION_INDEX, else 0).
    #[arg(long)]
    pub task: Option<usize>,
    /// Worker threads (default: every core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,
    /// Redo inputs that are already done.
    #[arg(long)]
    pub force: bool,
    /// Print this task's inputs and which would be skipped, then exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep dropped documents, with their reason, under `<output>/_rejected/`.
    #[arg(long)]
    pub keep_rejected: bool,
}

impl StageArgs {
    /// The runner options these flags describe.
    pub fn options(&self) -> Result<RunOptions> {
        Ok(RunOptions {
            input: Location::parse(&self.input)?,
            output: Location::parse(&self.output)?,
            tasks: self.tasks,
            task: tasks::task_index(self.task, self.tasks)?,
            threads: self.threads,
            force: self.force,
            dry_run: self.dry_run,
            keep_rejected: self.keep_rejected,
            progress: true,
        })
    }

    /// Loads the stage config from `--config`, or its defaults.
    pub fn load_config<C: DeserializeOwned>(&self, storage: &Storage) -> Result<C> {
        load_toml(storage, self.config.as_deref())
    }
}

/// Reads a TOML configuration from any address (`None`: the defaults, an empty table).
pub fn load_toml<C: DeserializeOwned>(storage: &Storage, url: Option<&str>) -> Result<C> {
    let text = match url {
        Some(url) => {
            let loc = Location::parse(url)?;
            let bytes = storage.read(&loc)?;
            String::from_utf8(bytes).map_err(|_| Error::Config {
                url: url.to_string(),
                message: "not UTF-8".into(),
            })?
        }
        None => String::new(),
    };
    toml::from_str(&text).map_err(|e| Error::Config {
        url: url.unwrap_or("(defaults)").to_string(),
        message: e.to_string(),
    })
}

/// Hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Sets up `tracing`: text on a terminal, JSON lines otherwise; `RUST_LOG` filters.
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // tokenizers 1.0 logs its table building at info: keep that out of stage logs.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tk_encode=warn"));
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Hash of a step's configuration: a marker written under another hash is redone.
pub fn config_hash(step: &str, config: &impl Serialize) -> String {
    let mut h = Sha256::new();
    h.update(step.as_bytes());
    h.update([0]);
    h.update(serde_json::to_vec(config).unwrap_or_default());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Counts of a record reader the summary shows: records that are not pages, pages
/// read without HTTP headers, and stretches of input that held no record.
const COUNTED_APART: &[&str] = &[
    "warc_warcinfo",
    "warc_request",
    "warc_metadata",
    "kept_without_http_headers",
    "garbage_between_records",
    "corrupt_compression",
    "resync_skipped_bytes",
];

/// The closing summary a binary prints on stdout.
pub fn summary(step: &str, report: &Report) -> String {
    let s = &report.stats;
    let mut out = format!(
        "{step}: {} inputs processed, {} skipped (done before); docs in {}, out {}, dropped {}",
        report.processed.len(),
        report.skipped.len(),
        s.docs_in,
        s.docs_out,
        s.dropped()
    );
    for (reason, n) in &s.drops {
        out.push_str(&format!("\n  drop {reason}: {n}"));
    }
    if let Some(records) = s.counts.get(crate::stats::WARC_RECORDS) {
        // A reader of records: pages are the documents in; the rest is counted apart.
        let other = s
            .counts
            .get(crate::stats::WARC_RECORDS_OTHER)
            .copied()
            .unwrap_or(0);
        out.push_str(&format!(
            "\n  records read {records}: pages {}, not pages {other}",
            s.docs_in
        ));
    }
    for name in COUNTED_APART {
        if let Some(n) = s.counts.get(*name) {
            out.push_str(&format!("\n  count {name}: {n}"));
        }
    }
    out.push_str(&format!("\n  bytes in {}, out {}", s.bytes_in, s.bytes_out));
    for (reason, n) in &report.refused {
        out.push_str(&format!("\n  input refused {reason}: {n}"));
    }
    if report.not_inputs > 0 {
        out.push_str(&format!("\n  not_an_input: {} files", report.not_inputs));
    }
    out
}

/// The body of every `mill-<stage>` binary: logging, storage, the config (`--config` or
/// defaults), the step `build` makes from it, the run, and the summary on stdout.
pub fn run_stage<C: DeserializeOwned>(
    args: &StageArgs,
    build: impl FnOnce(&Storage, &C) -> Result<Step>,
) -> Result<Report> {
    init_logging(args.log_format);
    let storage = Storage::new();
    let config: C = args.load_config(&storage)?;
    let step = build(&storage, &config)?;
    let options = args.options()?;
    let report = run(&step, &storage, &options)?;
    if !options.dry_run {
        println!("{}", summary(&step.name, &report));
    }
    Ok(report)
}
