//! Stage tokenize: train a byte-level BPE vocabulary on a sample of the corpus
//! ([`train`]), encode documents into Megatron token shards ([`encode`]), optionally
//! shuffle documents globally into fixed-size shards ([`merge`]), and look inside a
//! shard ([`inspect`]).
//!
//! The shard format (Megatron `.bin/.idx`, the manifest) lives in `pipeline::tokens`, so
//! that the trainer reads shards without this crate.
//!
//! Layout of an encode output prefix:
//!
//! ```text
//! <output>/<stem>-00000.bin, .idx   Megatron indexed dataset per input, rolled over
//!                                   at `shard_bytes`
//! <output>/documents/<stem>.parquet the input documents with `token_count` (on request)
//! <output>/_shards/<stem>.json      documents, tokens and bytes of each shard
//! <output>/_done/<stem>.json        the resume marker
//! <output>/manifest.json            tokenizer hash, shards and totals, written once
//!                                   every input is done
//! ```

pub mod bpe;
pub mod merge;
pub mod native;
pub mod trainer;

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use pipeline::cli::config_hash;
use pipeline::marker::{Marker, list_markers};
use pipeline::progress::Progress;
use pipeline::shard::{ShardOptions, ShardWriter};
use pipeline::source::Batches;
use pipeline::{
    Document, DocumentSource, Error, Location, ObjectMeta, Planned, Report, Result, RunOptions,
    Source, Stats, Storage,
};

pub use bpe::{END_OF_DOCUMENT, Encoder, EncoderKind, TrainConfig};
pub use merge::MergeConfig;
pub use pipeline::tokens::{
    DatasetWriter, Dtype, Index, MANIFEST, Manifest, ShardInfo, read_manifest, with_extension,
};

/// The whole stage configuration (TOML): one table per subcommand.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub train: TrainConfig,
    pub encode: EncodeConfig,
    pub merge: MergeConfig,
}

/// How documents become token shards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncodeConfig {
    /// Address of the `tokenizer.json` (the `--tokenizer` flag overrides it).
    pub tokenizer: Option<String>,
    /// Which implementation encodes (both give the same ids).
    pub encoder: EncoderKind,
    /// A shard's `.bin` is closed before it would grow past this many bytes (1 GiB;
    /// a single longer document gets a shard of its own).
    pub shard_bytes: u64,
    /// The token appended after every document.
    pub end_of_document: String,
    /// Also write the documents with their `token_count` under `documents/`.
    pub token_counts: bool,
    /// Documents read and encoded together.
    pub batch_docs: usize,
}

impl Default for EncodeConfig {
    fn default() -> Self {
        EncodeConfig {
            tokenizer: None,
            encoder: EncoderKind::Native,
            shard_bytes: 1 << 30,
            end_of_document: END_OF_DOCUMENT.to_string(),
            token_counts: false,
            batch_docs: 1024,
        }
    }
}

/// Drop reason of a document with no text.
pub const EMPTY_TEXT: &str = "empty_text";
/// Drop reason of a document the tokenizer could not encode.
pub const ENCODE_FAILED: &str = "encode_failed";
/// Folder of per-input shard lists.
pub const SHARDS_DIR: &str = "_shards";

pub use pipeline::cli::sha256_hex;

// ---------------------------------------------------------------------------------
// train

/// What a training run did; also written as `train.json` beside the tokenizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    pub tokenizer: String,
    pub tokenizer_sha256: String,
    pub vocab_size_requested: usize,
    pub vocab_size: usize,
    pub sample_documents: u64,
    pub sample_bytes: u64,
    /// Shards the sample was drawn from, in the order read.
    pub sample_shards: Vec<String>,
    pub seconds: f64,
    /// Peak resident memory of the process (Linux `VmHWM`), when known.
    pub peak_rss_bytes: Option<u64>,
}

/// Peak resident set size of this process, from `/proc/self/status`.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Input shards in the seeded sample order: by SHA-256 of the seed and the path, so
/// the order is fixed for a seed and does not favour any part of the listing.
fn sample_order(storage: &Storage, input: &Location, seed: u64) -> Result<Vec<ObjectMeta>> {
    let source = DocumentSource::default();
    let mut shards: Vec<(String, ObjectMeta)> = storage
        .list(input)?
        .into_iter()
        .filter(|m| {
            let rel = if m.relative.is_empty() {
                m.location.file_name()
            } else {
                &m.relative
            };
            !rel.split('/').any(|p| p.starts_with(['_', '.'])) && source.stem(rel).is_some()
        })
        .map(|m| {
            let key = sha256_hex(format!("{seed}\0{}", m.relative).as_bytes());
            (key, m)
        })
        .collect();
    if shards.is_empty() {
        return Err(Error::Usage(format!("no document shards at {input}")));
    }
    shards.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(shards.into_iter().map(|(_, m)| m).collect())
}

/// Trains a vocabulary on a sample of the documents at `input` and writes
/// `<output>/tokenizer.json` and `<output>/train.json`.
pub fn train(
    storage: &Storage,
    input: &Location,
    output: &Location,
    config: &TrainConfig,
) -> Result<TrainReport> {
    config.validate()?;
    let start = Instant::now();
    let shards = sample_order(storage, input, config.seed)?;
    let failed: Arc<Mutex<Option<Error>>> = Arc::new(Mutex::new(None));
    let sample = Sample::new(
        storage,
        shards,
        config.sample_bytes,
        rayon::current_num_threads(),
        Arc::clone(&failed),
    );
    tracing::info!(input = %input, sample_bytes = config.sample_bytes, vocab_size = config.vocab_size, "training");
    let trained = bpe::train_from(config, &sample, &failed)?;
    let taken = sample.taken();
    let tokenizer_loc = output.join("tokenizer.json");
    storage.remove_stale_temporaries(&tokenizer_loc)?;
    storage.put(&tokenizer_loc, trained.json.as_bytes())?;
    let report = TrainReport {
        tokenizer: tokenizer_loc.to_string(),
        tokenizer_sha256: sha256_hex(trained.json.as_bytes()),
        vocab_size_requested: config.vocab_size,
        vocab_size: trained.vocab_size,
        sample_documents: taken.docs,
        sample_bytes: taken.bytes,
        sample_shards: taken.shards,
        seconds: start.elapsed().as_secs_f64(),
        peak_rss_bytes: peak_rss_bytes(),
    };
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| Error::Usage(format!("serialising the training report: {e}")))?;
    storage.remove_stale_temporaries(&output.join("train.json"))?;
    storage.put(&output.join("train.json"), &json)?;
    Ok(report)
}

/// Decoded text the sample may hold ahead of the counters, per thread.
const AHEAD_BYTES: usize = 4 << 20;

fn text_bytes(texts: &[String]) -> u64 {
    texts.iter().map(|t| t.len() as u64).sum()
}

/// What the sample took: documents, text bytes and shards, in sample order.
#[derive(Debug, Default)]
struct Taken {
    docs: u64,
    bytes: u64,
    shards: Vec<String>,
}

/// The texts of the sample: the shards in sample order, document by document, until
/// the byte budget is spent (the document that reaches it included). The counting
/// threads decode the shards themselves, 128 documents at a time, whichever thread is
/// free: first the shard the sample is in, then, while less than [`AHEAD_BYTES`] per
/// thread waits to be counted, the shards after it (one batch each, up to four per
/// thread open). Texts of later shards wait until the sample reaches them, so what is
/// taken, and any error met, is what reading the shards one after another gives.
/// (Read by one thread at a time, as before, each shard's decoding left the other
/// threads waiting.)
struct Sample<'a> {
    storage: &'a Storage,
    source: DocumentSource,
    /// Open shards at most, and decoded bytes held ahead of the counters.
    max_open: usize,
    ahead_bytes: u64,
    budget: u64,
    failed: Arc<Mutex<Option<Error>>>,
    state: Mutex<SampleState>,
    changed: Condvar,
}

#[derive(Default)]
struct SampleState {
    /// Shards not opened yet, in sample order.
    pending: VecDeque<ObjectMeta>,
    /// Open shards in sample order; the first is the one the sample is in.
    open: VecDeque<OpenShard>,
    /// Shards opened so far.
    opened: u64,
    /// Bytes of text decoded and not yet taken.
    ready_bytes: u64,
    taken: Taken,
    stopped: bool,
}

struct OpenShard {
    /// Its place in the sample order.
    seq: u64,
    relative: String,
    /// `None` while a thread opens or decodes it, and once it is read to the end.
    batches: Option<Batches>,
    ended: bool,
    /// Decoded texts in batches for the counters, in shard order.
    ready: VecDeque<Vec<String>>,
    /// What ended the shard early, met after the texts in `ready`.
    error: Option<Error>,
    /// Whether the sample has reached this shard (it is then listed as used).
    entered: bool,
}

/// A thread's turn at reading: open the next shard, or decode the next batch of an
/// open one (each named by its place in the sample order).
enum Read {
    Open(u64, ObjectMeta, String),
    Decode(u64, Batches),
}

impl<'a> Sample<'a> {
    fn new(
        storage: &'a Storage,
        shards: Vec<ObjectMeta>,
        budget: u64,
        threads: usize,
        failed: Arc<Mutex<Option<Error>>>,
    ) -> Self {
        Sample {
            storage,
            source: DocumentSource {
                batch_rows: 128,
                ..DocumentSource::default()
            },
            max_open: 4 * threads.max(1) + 2,
            ahead_bytes: (threads.max(1) * AHEAD_BYTES) as u64,
            budget,
            failed,
            state: Mutex::new(SampleState {
                pending: shards.into(),
                stopped: budget == 0,
                ..SampleState::default()
            }),
            changed: Condvar::new(),
        }
    }

    fn taken(&self) -> Taken {
        self.state
            .lock()
            .map(|mut s| std::mem::take(&mut s.taken))
            .unwrap_or_default()
    }

    fn fail(&self, state: &mut SampleState, e: Error) {
        if let Ok(mut slot) = self.failed.lock() {
            slot.get_or_insert(e);
        }
        state.stopped = true;
        state.open.clear();
        state.pending.clear();
    }

    /// Takes the texts of `batch` that fit the budget, in order.
    fn take(&self, state: &mut SampleState, mut batch: Vec<String>) -> Vec<String> {
        let taken = &mut state.taken;
        let mut keep = 0;
        for text in &batch {
            keep += 1;
            let before = taken.bytes;
            taken.docs += 1;
            taken.bytes += text.len() as u64;
            if taken.bytes >> 26 > before >> 26 {
                tracing::info!(sampled_mb = taken.bytes >> 20, "sampling");
            }
            if taken.bytes >= self.budget {
                state.stopped = true;
                break;
            }
        }
        batch.truncate(keep);
        batch
    }

    /// The reading a thread can do now, if any: the shard the sample is in first, then
    /// the ones after it, then opening the next shard.
    fn next_read(&self, state: &mut SampleState) -> Option<Read> {
        let ahead_full = state.ready_bytes >= self.ahead_bytes;
        if let Some(k) = state
            .open
            .iter()
            .position(|s| s.batches.is_some() && s.ready.is_empty())
            && (k == 0 || !ahead_full)
            && let Some(batches) = state.open[k].batches.take()
        {
            return Some(Read::Decode(state.open[k].seq, batches));
        }
        if !ahead_full
            && state.open.len() < self.max_open
            && let Some(meta) = state.pending.pop_front()
        {
            let relative = if meta.relative.is_empty() {
                meta.location.file_name().to_string()
            } else {
                meta.relative.clone()
            };
            state.opened += 1;
            state.open.push_back(OpenShard {
                seq: state.opened,
                relative: relative.clone(),
                batches: None,
                ended: false,
                ready: VecDeque::new(),
                error: None,
                entered: false,
            });
            return Some(Read::Open(state.opened, meta, relative));
        }
        None
    }

    /// Does one read outside the lock and files its result under the shard it read.
    fn read<'s>(
        &'s self,
        state: std::sync::MutexGuard<'s, SampleState>,
        read: Read,
    ) -> Option<std::sync::MutexGuard<'s, SampleState>> {
        drop(state);
        let (seq, outcome) = match read {
            Read::Open(seq, meta, relative) => {
                let opened = self.source.read(self.storage, &meta, &relative);
                (seq, opened.map(|b| (Some(b), Vec::new())))
            }
            Read::Decode(seq, mut batches) => {
                let outcome = match batches.next() {
                    Some(Ok(batch)) => Ok((
                        Some(batches),
                        trainer::batch_texts(batch.docs.into_iter().map(|d| d.text)),
                    )),
                    Some(Err(e)) => Err(e),
                    None => Ok((None, Vec::new())),
                };
                (seq, outcome)
            }
        };
        let mut state = self.state.lock().ok()?;
        // A failure or the budget may have emptied the queue meanwhile.
        let filed = &mut *state;
        if let Some(shard) = filed.open.iter_mut().find(|s| s.seq == seq) {
            match outcome {
                Ok((batches, texts)) => {
                    shard.ended = batches.is_none();
                    shard.batches = batches;
                    filed.ready_bytes += texts.iter().map(|t| text_bytes(t)).sum::<u64>();
                    shard.ready.extend(texts);
                }
                Err(e) => {
                    shard.ended = true;
                    shard.error = Some(e);
                }
            }
        }
        self.changed.notify_all();
        Some(state)
    }
}

impl trainer::TextBatches for Sample<'_> {
    fn next_batch(&self) -> Option<Vec<String>> {
        let mut state = self.state.lock().ok()?;
        loop {
            if state.stopped {
                return None;
            }
            if let Some(front) = state.open.front_mut() {
                if !front.entered {
                    front.entered = true;
                    let relative = front.relative.clone();
                    state.taken.shards.push(relative);
                    continue;
                }
                // Reading ahead first, while this shard has texts for the others.
                if !front.ready.is_empty()
                    && let Some(read) = self.next_read(&mut state)
                {
                    state = self.read(state, read)?;
                    continue;
                }
                let Some(front) = state.open.front_mut() else {
                    continue;
                };
                if let Some(batch) = front.ready.pop_front() {
                    state.ready_bytes -= text_bytes(&batch);
                    let batch = self.take(&mut state, batch);
                    if !batch.is_empty() {
                        return Some(batch);
                    }
                    continue;
                }
                if front.ended {
                    if let Some(e) = front.error.take() {
                        self.fail(&mut state, e);
                        return None;
                    }
                    state.open.pop_front();
                    continue;
                }
            } else if state.pending.is_empty() {
                return None;
            }
            match self.next_read(&mut state) {
                Some(read) => state = self.read(state, read)?,
                None => state = self.changed.wait(state).ok()?,
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// encode

/// A loaded tokenizer with what the encoder needs to know of it.
#[derive(Debug)]
pub struct Loaded {
    pub url: String,
    pub sha256: String,
    pub encoder: Encoder,
    pub eod: u32,
    pub dtype: Dtype,
}

impl Loaded {
    /// Reads and loads the tokenizer at `url`: a `tokenizer.json`, or the folder
    /// `train` wrote it to.
    pub fn read(storage: &Storage, url: &str, kind: EncoderKind, eod_token: &str) -> Result<Self> {
        let mut loc = Location::parse(url)?;
        let inner = loc.join(TOKENIZER_FILE);
        if !url.ends_with(".json") && storage.exists(&inner)? {
            loc = inner;
        }
        let url = &loc.to_string();
        let bytes = storage.read(&loc)?;
        let json = std::str::from_utf8(&bytes).map_err(|_| Error::Config {
            url: url.to_string(),
            message: "tokenizer.json is not UTF-8".into(),
        })?;
        let encoder = Encoder::load(json, kind, url)?;
        let eod = encoder.token_id(eod_token).ok_or_else(|| Error::Config {
            url: url.to_string(),
            message: format!("the vocabulary has no end-of-document token {eod_token:?}"),
        })?;
        let dtype = Dtype::for_vocab(encoder.vocab_size());
        Ok(Loaded {
            url: url.to_string(),
            sha256: sha256_hex(&bytes),
            encoder,
            eod,
            dtype,
        })
    }
}

/// The file `train` writes the tokenizer to, below its output.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// Step names in markers and logs: the phase names of the pipeline file. (The
/// configuration hashes keep the keys they were first written with, so that markers
/// written before the names were unified stay valid.)
pub const ENCODE_STEP: &str = "tokenize.encode";
/// Step name of `train` in its marker.
pub const TRAIN_STEP: &str = "tokenize.train";
/// The unit `train` is: its marker is `<output>/_done/train.json`.
pub const TRAIN_UNIT: &str = "train";

/// `train` as a resumable step of one unit: skipped when its marker names the same
/// configuration and the same listing of `opts.input`; `--force`, `--dry-run` and
/// the task split (task 0 trains) apply as to any step. Returns the run's report and,
/// when it trained, what training reported.
pub fn train_step(
    storage: &Storage,
    opts: &RunOptions,
    config: &TrainConfig,
) -> Result<(Report, Option<TrainReport>)> {
    config.validate()?;
    let hash = config_hash("tokenize-train", config);
    pipeline::runner::run_over_listing(TRAIN_STEP, TRAIN_UNIT, &hash, storage, opts, || {
        let r = train(storage, &opts.input, &opts.output, config)?;
        let stats = Stats {
            docs_in: r.sample_documents,
            docs_out: r.sample_documents,
            bytes_in: r.sample_bytes,
            ..Stats::default()
        };
        let outputs = vec![TOKENIZER_FILE.into(), "train.json".into()];
        Ok((r, pipeline::UnitDone { outputs, stats }))
    })
}

/// The name of shard `k` of an input.
pub fn shard_name(stem: &str, k: usize) -> String {
    format!("{stem}-{k:05}")
}

/// Encodes one task's share of the documents at `opts.input` into token shards.
pub fn encode(
    storage: &Storage,
    opts: &RunOptions,
    config: &EncodeConfig,
    tokenizer: &Loaded,
) -> Result<Report> {
    let source = DocumentSource {
        batch_rows: config.batch_docs.max(1),
        ..DocumentSource::default()
    };
    let hash = encode_hash(config, tokenizer);
    let plan = pipeline::plan(ENCODE_STEP, &source, &hash, storage, opts)?;
    let listed = plan.listed;
    let report = pipeline::runner::process_planned(ENCODE_STEP, plan, opts, |p, progress| {
        encode_input(
            storage, opts, config, tokenizer, &source, &hash, p, progress,
        )
    })?;
    if opts.dry_run {
        return Ok(report);
    }
    write_manifest_if_complete(storage, &opts.output, &hash, listed, config, tokenizer)?;
    Ok(report)
}

fn encode_hash(config: &EncodeConfig, tokenizer: &Loaded) -> String {
    // The tokenizer counts by content, not by address; the encoder choice gives the
    // same ids and so does not count.
    let key = (
        &tokenizer.sha256,
        config.shard_bytes,
        &config.end_of_document,
        config.token_counts,
    );
    config_hash("tokenize-encode", &key)
}

#[allow(clippy::too_many_arguments)]
fn encode_input(
    storage: &Storage,
    opts: &RunOptions,
    config: &EncodeConfig,
    tokenizer: &Loaded,
    source: &DocumentSource,
    hash: &str,
    p: &Planned,
    progress: &Progress,
) -> Result<Stats> {
    let start = Instant::now();
    let marker_loc = pipeline::runner::begin_input(storage, &opts.output, &p.stem)?;
    let mut stats = Stats::default();
    let mut shards: Vec<ShardInfo> = Vec::new();
    let mut current: Option<DatasetWriter> = None;
    let docs_rel = format!("documents/{}.parquet", p.stem);
    let mut docs_writer: Option<ShardWriter> = None;
    let max_bin = config.shard_bytes.max(1);
    let width = tokenizer.dtype.size() as u64;

    for batch in source.read(storage, &p.meta, &p.relative)? {
        let batch = batch?;
        batch.count_drops(&mut stats, &p.meta.location);
        let mut docs = batch.docs;
        let encoded: Vec<std::result::Result<Vec<u32>, &'static str>> = docs
            .par_iter()
            .map(|d| {
                if d.text.is_empty() {
                    return Err(EMPTY_TEXT);
                }
                let mut ids = Vec::with_capacity(d.text.len() / 3 + 1);
                match tokenizer.encoder.encode_into(&d.text, &mut ids) {
                    Ok(()) => {
                        ids.push(tokenizer.eod);
                        Ok(ids)
                    }
                    Err(e) => {
                        tracing::warn!(input = %p.meta.location, id = %d.id, error = %e, "encoding failed");
                        Err(ENCODE_FAILED)
                    }
                }
            })
            .collect();
        let mut kept_rows: Vec<u32> = Vec::new();
        for (i, (doc, ids)) in docs.iter_mut().zip(encoded).enumerate() {
            let ids = match ids {
                Ok(ids) => ids,
                Err(reason) => {
                    stats.drop(reason);
                    continue;
                }
            };
            let bytes = ids.len() as u64 * width;
            if let Some(w) = current.as_ref()
                && w.bin_bytes() > 0
                && w.bin_bytes() + bytes > max_bin
                && let Some(w) = current.take()
            {
                close_shard(storage, w, &p.stem, shards.len(), &mut shards)?;
            }
            let w = match current.as_mut() {
                Some(w) => w,
                None => current.insert(DatasetWriter::create(
                    storage,
                    &opts.output.join(&shard_name(&p.stem, shards.len())),
                    tokenizer.dtype,
                )?),
            };
            w.push(&ids)?;
            doc.token_count = Some(ids.len() as i64);
            stats.keep();
            kept_rows.push(i as u32);
        }
        if config.token_counts {
            let carry = batch.carry.as_ref();
            let writer = match docs_writer.as_mut() {
                Some(w) => w,
                None => {
                    let loc = opts.output.join(&docs_rel);
                    storage.remove_stale_temporaries(&loc)?;
                    docs_writer.insert(ShardWriter::new(
                        storage.create(&loc)?,
                        carry.map(|c| c.schema()).as_deref(),
                        &[],
                        false,
                        &ShardOptions::default(),
                    )?)
                }
            };
            let chosen: Vec<&Document> = kept_rows.iter().map(|&i| &docs[i as usize]).collect();
            writer.write(&chosen, carry.map(|c| (c, kept_rows.as_slice())), None)?;
        }
        progress.docs(docs.len() as u64 + batch.drops.iter().map(|(_, n)| n).sum::<u64>());
        pipeline::runner::crash_point();
    }
    if let Some(w) = current.take() {
        close_shard(storage, w, &p.stem, shards.len(), &mut shards)?;
    }
    // A killed run under another configuration may have left more shards: remove them.
    let mut k = shards.len();
    loop {
        let prefix = opts.output.join(&shard_name(&p.stem, k));
        let idx = with_extension(&prefix, "idx");
        let bin = with_extension(&prefix, "bin");
        if !storage.exists(&idx)? && !storage.exists(&bin)? {
            break;
        }
        storage.delete(&idx)?;
        storage.delete(&bin)?;
        k += 1;
    }
    let mut outputs: Vec<String> = Vec::new();
    for s in &shards {
        stats.bytes_out += s.bytes;
        outputs.push(format!("{}.bin", s.name));
        outputs.push(format!("{}.idx", s.name));
    }
    if config.token_counts {
        if docs_writer.is_none() {
            let loc = opts.output.join(&docs_rel);
            storage.remove_stale_temporaries(&loc)?;
            docs_writer = Some(ShardWriter::new(
                storage.create(&loc)?,
                None,
                &[],
                false,
                &ShardOptions::default(),
            )?);
        }
        if let Some(w) = docs_writer {
            w.finish()?;
        }
        outputs.push(docs_rel);
    }
    let shards_rel = format!("{SHARDS_DIR}/{}.json", p.stem);
    let json = serde_json::to_vec_pretty(&shards)
        .map_err(|e| Error::Usage(format!("serialising shard list: {e}")))?;
    storage.remove_stale_temporaries(&opts.output.join(&shards_rel))?;
    storage.put(&opts.output.join(&shards_rel), &json)?;
    outputs.push(shards_rel);
    stats.bytes_in = p.meta.size;
    stats.seconds = start.elapsed().as_secs_f64();
    pipeline::runner::finish_input(storage, &marker_loc, ENCODE_STEP, hash, p, outputs, &stats)?;
    Ok(stats)
}

fn close_shard(
    storage: &Storage,
    w: DatasetWriter,
    stem: &str,
    k: usize,
    shards: &mut Vec<ShardInfo>,
) -> Result<()> {
    let written = w.finish(storage)?;
    shards.push(ShardInfo {
        name: shard_name(stem, k),
        documents: written.documents,
        tokens: written.tokens,
        bytes: written.bytes,
    });
    Ok(())
}

/// Writes `<output>/manifest.json` when every listed input has a marker of this
/// configuration. Each task tries after its own inputs; the last one to finish sees
/// them all.
fn write_manifest_if_complete(
    storage: &Storage,
    output: &Location,
    hash: &str,
    listed: usize,
    config: &EncodeConfig,
    tokenizer: &Loaded,
) -> Result<()> {
    let markers: Vec<(String, Marker)> = list_markers(storage, output)?
        .into_iter()
        .filter(|(_, m)| m.config_hash == hash)
        .collect();
    if markers.len() < listed {
        tracing::info!(
            done = markers.len(),
            listed,
            "manifest waits for the other tasks"
        );
        return Ok(());
    }
    let mut shards = Vec::new();
    for (stem, _) in &markers {
        let loc = output.join(&format!("{SHARDS_DIR}/{stem}.json"));
        let list: Vec<ShardInfo> =
            serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
                url: loc.to_string(),
                message: format!("unreadable shard list: {e}"),
            })?;
        shards.extend(list);
    }
    shards.sort_by(|a, b| a.name.cmp(&b.name));
    let manifest = Manifest {
        tokenizer: tokenizer.url.clone(),
        tokenizer_sha256: tokenizer.sha256.clone(),
        vocab_size: tokenizer.encoder.vocab_size(),
        dtype: tokenizer.dtype,
        end_of_document: config.end_of_document.clone(),
        end_of_document_id: tokenizer.eod,
        documents: shards.iter().map(|s| s.documents).sum(),
        tokens: shards.iter().map(|s| s.tokens).sum(),
        shards,
    };
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| Error::Usage(format!("serialising the manifest: {e}")))?;
    storage.put(&output.join(MANIFEST), &json)
}

// ---------------------------------------------------------------------------------
// inspect

/// A human summary of the dataset at `prefix` (address without `.bin`/`.idx`), with
/// the first `show` documents decoded when a tokenizer is given.
pub fn inspect(
    storage: &Storage,
    prefix: &Location,
    tokenizer: Option<&Loaded>,
    show: usize,
) -> Result<String> {
    let idx = Index::read(storage, prefix)?;
    let bin = with_extension(prefix, "bin");
    let bin_size = storage
        .head(&bin)?
        .map(|m| m.size)
        .ok_or_else(|| Error::NotFound {
            url: bin.to_string(),
        })?;
    let tokens = idx.tokens();
    let expected = tokens * idx.dtype.size() as u64;
    let mut out = format!(
        "{prefix}\n  dtype {:?}, documents {}, tokens {}, .bin {} bytes{}\n",
        idx.dtype,
        idx.len(),
        tokens,
        bin_size,
        if expected == bin_size {
            String::new()
        } else {
            format!(" (the index accounts for {expected}: MISMATCH)")
        }
    );
    if let (Some(min), Some(max)) = (idx.lengths.iter().min(), idx.lengths.iter().max()) {
        out.push_str(&format!(
            "  tokens per document: min {min}, mean {:.1}, max {max}\n",
            tokens as f64 / idx.len() as f64
        ));
    }
    if let Some(t) = tokenizer {
        for i in 0..show.min(idx.len()) {
            let ids = idx.document(storage, prefix, i)?;
            let text = t
                .encoder
                .decode(&ids)
                .map_err(|e| Error::Usage(format!("decoding document {i} of {prefix}: {e}")))?;
            let mut shown: String = text.chars().take(400).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            out.push_str(&format!("  [{i}] {} tokens: {:?}\n", ids.len(), shown));
        }
    }
    Ok(out)
}
