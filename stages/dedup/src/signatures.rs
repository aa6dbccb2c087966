//! Phase 1: one signature file per input (`<output>/<stem>.sig`).

use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use pipeline::cli::{config_hash, sha256_hex};
use pipeline::progress::Progress;
use pipeline::runner::{begin_input, finish_input};
use pipeline::{
    DocumentSource, Error, Location, ObjectMeta, Planned, Report, Result, RunOptions, Source,
    Stats, Storage,
};

use crate::ids::IdsWriter;
use crate::minhash::MinHasher;
use crate::normalize::{normalize_into, parse_date, text_key, url_key};
use crate::runs::{Entry, Header, RunWriter, read_header};
use crate::{Config, Kind};

/// Step name in markers.
pub const STEP: &str = "dedup.signatures";
/// Drop reason of documents with nothing to sign (empty normalised text; no URL). They
/// are never duplicates and the filter keeps them; the count says how many.
pub const NOTHING_TO_SIGN: &str = "nothing_to_sign";

/// Suffix of signature files.
pub const SUFFIX: &str = ".sig";

/// The source of the signature and filter phases: they must number rows alike.
pub fn source(config: &Config) -> DocumentSource {
    DocumentSource {
        batch_rows: config.batch_docs.max(1),
        ..DocumentSource::default()
    }
}

/// The configuration hash of signatures.
pub fn hash(config: &Config) -> String {
    // Version 2: an id file beside each signature file.
    config_hash("dedup-signatures", &(config.signature_key(), 2))
}

/// Runs one task of the signature phase.
pub fn signatures(storage: &Storage, opts: &RunOptions, config: &Config) -> Result<Report> {
    config.validate()?;
    let source = source(config);
    let hash = hash(config);
    let plan = pipeline::plan(STEP, &source, &hash, storage, opts)?;
    let hasher = MinHasher::new(config.bands, config.rows, config.seed);
    pipeline::runner::process_planned(STEP, plan, opts, |p, progress| {
        sign_input(storage, opts, config, &hasher, &source, &hash, p, progress)
    })
}

/// The entries of one document: one per section, or none.
pub fn entries(
    config: &Config,
    hasher: &MinHasher,
    doc: &pipeline::Document,
    row: u32,
    scratch: &mut String,
) -> Option<Vec<Entry>> {
    match config.kind {
        Kind::Minhash => {
            normalize_into(&doc.text, scratch);
            let bands = hasher.band_hashes(scratch, config.shingles, config.ngram)?;
            Some(
                bands
                    .into_iter()
                    .map(|h| Entry {
                        key: (h as u128) << 64,
                        rank: 0,
                        row,
                    })
                    .collect(),
            )
        }
        Kind::Exact => {
            normalize_into(&doc.text, scratch);
            (!scratch.is_empty()).then(|| {
                vec![Entry {
                    key: text_key(scratch),
                    rank: 0,
                    row,
                }]
            })
        }
        Kind::Url => {
            let url = doc.url.as_deref().filter(|u| !u.trim().is_empty())?;
            // Latest first: a smaller rank is preferred. No date: after every dated copy.
            let rank = match doc.date.as_deref().and_then(parse_date) {
                Some(t) => (i64::MAX - t) as u64,
                None => u64::MAX,
            };
            Some(vec![Entry {
                key: url_key(url),
                rank,
                row,
            }])
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn sign_input(
    storage: &Storage,
    opts: &RunOptions,
    config: &Config,
    hasher: &MinHasher,
    source: &DocumentSource,
    hash: &str,
    p: &Planned,
    progress: &Progress,
) -> Result<Stats> {
    let start = Instant::now();
    let marker = begin_input(storage, &opts.output, &p.stem)?;
    let mut stats = Stats::default();
    let mut sections: Vec<Vec<Entry>> = vec![Vec::new(); config.sections()];
    let mut rows: u64 = 0;
    let mut ids = IdsWriter::default();
    for batch in source.read(storage, &p.meta, &p.relative)? {
        let batch = batch?;
        for d in &batch.docs {
            ids.push(&d.id);
        }
        batch.count_drops(&mut stats, &p.meta.location);
        if rows + batch.docs.len() as u64 > u32::MAX as u64 {
            return Err(pipeline::Error::Usage(format!(
                "{}: more than {} documents in one input; split the file",
                p.meta.location,
                u32::MAX
            )));
        }
        let first = rows as u32;
        let signed: Vec<Option<Vec<Entry>>> = batch
            .docs
            .par_iter()
            .enumerate()
            .map_init(String::new, |scratch, (i, d)| {
                entries(config, hasher, d, first + i as u32, scratch)
            })
            .collect();
        rows += batch.docs.len() as u64;
        for s in signed {
            match s {
                Some(es) => {
                    stats.keep();
                    for (section, e) in sections.iter_mut().zip(es) {
                        section.push(e);
                    }
                }
                None => stats.drop(NOTHING_TO_SIGN),
            }
        }
        progress.docs(batch.docs.len() as u64);
        pipeline::runner::crash_point();
    }
    sections.par_iter_mut().for_each(|s| s.par_sort_unstable());
    let rel = format!("{}{SUFFIX}", p.stem);
    let mut w = RunWriter::create(storage, &opts.output.join(&rel), config.kind.layout())?;
    for s in &sections {
        w.section();
        for e in s {
            w.push(e)?;
        }
    }
    stats.bytes_out = w.finish(rows)?;
    let ids = ids.finish();
    let ids_rel = format!("{}{}", p.stem, crate::ids::SUFFIX);
    let ids_loc = opts.output.join(&ids_rel);
    storage.remove_stale_temporaries(&ids_loc)?;
    storage.put(&ids_loc, &ids)?;
    stats.bytes_out += ids.len() as u64;
    stats.bytes_in = p.meta.size;
    stats.seconds = start.elapsed().as_secs_f64();
    finish_input(storage, &marker, STEP, hash, p, vec![ids_rel, rel], &stats)?;
    Ok(stats)
}

/// The signature listing every unit of a bucket run shares, below the buckets output.
pub const FILES: &str = "files.json";

/// The signature files of a run, in merge order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileList {
    pub kind: Kind,
    pub sections: usize,
    /// Address of the signature folder.
    pub signatures: String,
    pub files: Vec<FileInfo>,
    /// The index runs the buckets phase paired documents with (`--against`), in the
    /// order of their nodes ([`crate::index_node`]); not part of [`FileList::hash`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index_runs: Vec<String>,
}

/// One signature file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileInfo {
    /// The input stem (the signature file is `<stem>.sig`).
    pub stem: String,
    /// Documents (rows) of the input.
    pub documents: u64,
    /// Bytes of the signature file.
    pub size: u64,
}

impl FileList {
    /// SHA-256 of the canonical JSON of the signature listing (without the index runs:
    /// the listing's identity is its signatures).
    pub fn hash(&self) -> String {
        if self.index_runs.is_empty() {
            return sha256_hex(&self.to_json());
        }
        let listing = FileList {
            index_runs: Vec::new(),
            ..self.clone()
        };
        sha256_hex(&listing.to_json())
    }

    /// The JSON written to `files.json`.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

/// Lists and opens the signature files at `signatures`: their list and headers.
pub fn list_signatures(
    storage: &Storage,
    signatures: &Location,
    config: &Config,
) -> Result<(FileList, Vec<(ObjectMeta, Header)>)> {
    let mut metas: Vec<(String, ObjectMeta)> = storage
        .list(signatures)?
        .into_iter()
        .filter(|m| !m.relative.starts_with(['_', '.']) && !m.relative.contains("/_"))
        .filter_map(|m| {
            let stem = m.relative.strip_suffix(SUFFIX)?.to_string();
            Some((stem, m))
        })
        .collect();
    metas.sort_by(|a, b| a.0.cmp(&b.0));
    if metas.is_empty() {
        return Err(Error::Usage(format!(
            "no signature files (*{SUFFIX}) at {signatures}: run the signatures phase first"
        )));
    }
    let headers: Vec<Result<Header>> = metas
        .par_iter()
        .map(|(_, m)| read_header(storage, &m.location, m.size))
        .collect();
    let mut files = Vec::with_capacity(metas.len());
    let mut opened = Vec::with_capacity(metas.len());
    for ((stem, meta), header) in metas.into_iter().zip(headers) {
        let header = header?;
        if header.layout != config.kind.layout() || header.sections.len() != config.sections() {
            return Err(Error::Usage(format!(
                "{}: written for another configuration ({} sections, {:?}); this run wants {} {} sections",
                meta.location,
                header.sections.len(),
                header.layout,
                config.kind.name(),
                config.sections()
            )));
        }
        files.push(FileInfo {
            stem,
            documents: header.documents,
            size: meta.size,
        });
        opened.push((meta, header));
    }
    Ok((
        FileList {
            kind: config.kind,
            sections: config.sections(),
            signatures: signatures.to_string(),
            files,
            index_runs: Vec::new(),
        },
        opened,
    ))
}
