//! Phase 2: per band (and hash range), a k-way merge of every signature file's section
//! (and of the index runs with `--against`); equal keys become candidate pairs.
//!
//! Work units are (section, range): with `tasks` ≤ sections each task takes whole
//! sections; with more tasks each section is cut into `ranges` hash ranges (a power of
//! two, ≤ 256) by the top byte of the key. Unit `u` goes to task `u mod tasks`. Memory is
//! two read chunks per merged file, sized from `merge_memory_bytes`; nothing grows with
//! the corpus.
//!
//! Output: `<output>/files.json` (the signature files in merge order: file `i` of it has
//! global numbers `(i + 1) << 32 | row`), `<output>/<section>-<range>.pairs` (64-byte
//! header, then pairs of little-endian u64 global numbers: keeper candidate, other) and
//! `_done/<section>-<range>.json`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::Write;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use pipeline::cli::{config_hash, sha256_hex};
use pipeline::marker::{Marker, marker_location, read_marker, write_marker};
use pipeline::{Error, Location, ObjectMeta, Report, Result, RunOptions, Stats, Storage};

use crate::runs::{Entry, Header, Section, SectionReader, read_header, slots};
use crate::signatures::SUFFIX;
use crate::{Config, INDEX, Kind, global};

/// Step name in markers.
pub const STEP: &str = "dedup-buckets";
/// Drop reason counted for entries that matched an earlier entry of their unit.
pub const CANDIDATE: &str = "candidate_duplicate";
/// The signature listing every unit of a bucket run shares.
pub const FILES: &str = "files.json";
const PAIRS_MAGIC: &[u8; 8] = b"TMPAIRS1";
/// Bytes of the header of a pairs file.
pub const PAIRS_HEADER: usize = 64;

/// The signature files of a run, in merge order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileList {
    pub kind: Kind,
    pub sections: usize,
    /// Address of the signature folder.
    pub signatures: String,
    pub files: Vec<FileInfo>,
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
    /// SHA-256 of the canonical JSON.
    pub fn hash(&self) -> String {
        sha256_hex(&self.to_json())
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
        },
        opened,
    ))
}

/// Hash ranges per section for `tasks` tasks.
pub fn ranges_for(sections: usize, tasks: usize) -> usize {
    tasks
        .div_ceil(sections.max(1))
        .max(1)
        .next_power_of_two()
        .min(256)
}

/// One sorted input of a merge.
#[derive(Debug)]
pub struct MergeInput {
    pub reader: SectionReader,
    /// Global number base: `global(file, row)`, or [`INDEX`] for index runs.
    pub file: Option<usize>,
}

/// An entry with its place in the merge: index entries (class 0) sort before the
/// documents of this run (class 1) within a key.
pub type Item = (u128, u8, u64, u64);

/// A streaming k-way merge that hands out groups of equal keys.
#[derive(Debug)]
pub struct Merger {
    inputs: Vec<MergeInput>,
    heap: BinaryHeap<Reverse<(Item, usize)>>,
}

fn item(e: &Entry, file: Option<usize>) -> Item {
    match file {
        Some(f) => (e.key, 1, e.rank, global(f, e.row)),
        None => (e.key, 0, 0, INDEX),
    }
}

impl Merger {
    /// Starts a merge (reads the first entry of every input).
    pub fn new(mut inputs: Vec<MergeInput>) -> Result<Self> {
        let mut heap = BinaryHeap::with_capacity(inputs.len());
        for (i, input) in inputs.iter_mut().enumerate() {
            if let Some(e) = input.reader.next_entry()? {
                heap.push(Reverse((item(&e, input.file), i)));
            }
        }
        Ok(Merger { inputs, heap })
    }

    /// Fills `group` with the next run of equal keys, in order; false at the end.
    pub fn next_group(&mut self, group: &mut Vec<Item>) -> Result<bool> {
        group.clear();
        while let Some(Reverse((it, i))) = self.heap.peek().copied() {
            if group.first().is_some_and(|g| g.0 != it.0) {
                break;
            }
            self.heap.pop();
            group.push(it);
            let input = &mut self.inputs[i];
            if let Some(e) = input.reader.next_entry()? {
                self.heap.push(Reverse((item(&e, input.file), i)));
            }
        }
        Ok(!group.is_empty())
    }
}

/// Chunk size per merged input for `fan_in` inputs and `concurrent` merges at once.
pub fn chunk_bytes(config: &Config, fan_in: usize, concurrent: usize) -> u64 {
    let per = config.merge_memory_bytes / (2 * fan_in.max(1) * concurrent.max(1)) as u64;
    per.clamp(64 << 10, config.read_chunk_bytes.max(64 << 10))
}

/// A run file and its header.
pub type Opened = (ObjectMeta, Header);

/// The complete index runs at `index` (present for every section): name, and one run
/// file per section.
pub fn index_runs(
    storage: &Storage,
    index: &Location,
    config: &Config,
) -> Result<Vec<(String, Vec<Opened>)>> {
    crate::index::check_index_config(storage, index, config)?;
    let mut by_run: BTreeMap<String, BTreeMap<usize, ObjectMeta>> = BTreeMap::new();
    for m in storage.list(index)? {
        let Some((section, file)) = m.relative.split_once('/') else {
            continue;
        };
        let (Ok(section), Some(run)) = (section.parse::<usize>(), file.strip_suffix(".run")) else {
            continue;
        };
        by_run
            .entry(run.to_string())
            .or_default()
            .insert(section, m);
    }
    let sections = config.sections();
    let mut out = Vec::new();
    for (run, parts) in by_run {
        if parts.len() != sections || !(0..sections).all(|s| parts.contains_key(&s)) {
            tracing::warn!(index = %index, run = %run, "index run incomplete (an index task did not finish): not used");
            continue;
        }
        let mut opened = Vec::new();
        for (_, m) in parts {
            let h = read_header(storage, &m.location, m.size)?;
            if h.layout != config.kind.index_layout() || h.sections.len() != 1 {
                return Err(Error::Usage(format!(
                    "{}: not an index run of this kind",
                    m.location
                )));
            }
            opened.push((m, h));
        }
        out.push((run, opened));
    }
    Ok(out)
}

/// Runs one task of the bucket phase over the signature files at `opts.input`.
pub fn buckets(
    storage: &Storage,
    opts: &RunOptions,
    config: &Config,
    against: Option<&Location>,
) -> Result<Report> {
    config.validate()?;
    let (list, opened) = list_signatures(storage, &opts.input, config)?;
    let runs = match against {
        Some(index) => index_runs(storage, index, config)?,
        None => Vec::new(),
    };
    let sections = config.sections();
    let ranges = ranges_for(sections, opts.tasks);
    let files_hash = list.hash();
    let run_names: Vec<&str> = runs.iter().map(|(r, _)| r.as_str()).collect();
    let hash = config_hash(
        STEP,
        &(
            config.signature_key(),
            ranges,
            &files_hash,
            against.map(|a| a.to_string()),
            &run_names,
        ),
    );
    let units: Vec<(usize, usize)> = (0..sections * ranges)
        .filter(|u| u % opts.tasks.max(1) == opts.task)
        .map(|u| (u / ranges, u % ranges))
        .collect();
    let input_size: u64 = list.files.iter().map(|f| f.size).sum();
    let mut report = Report::default();
    let mut todo = Vec::new();
    for &(s, r) in &units {
        let name = unit_name(s, r);
        let done = !opts.force
            && read_marker(storage, &marker_location(&opts.output, &name))?.is_some_and(|m| {
                m.config_hash == hash && m.input_etag.as_deref() == Some(files_hash.as_str())
            });
        if done {
            report.skipped.push(name);
        } else {
            todo.push((s, r));
        }
    }
    tracing::info!(
        step = STEP,
        task = opts.task,
        tasks = opts.tasks,
        files = list.files.len(),
        ranges,
        units = units.len(),
        todo = todo.len(),
        "planned"
    );
    if opts.dry_run {
        println!(
            "step {STEP} task {}/{}: {} signature files, {} sections x {} ranges; {} units to run, {} done",
            opts.task,
            opts.tasks,
            list.files.len(),
            sections,
            ranges,
            todo.len(),
            report.skipped.len()
        );
        return Ok(report);
    }
    storage.put(&opts.output.join(FILES), &list.to_json())?;
    let pool = pipeline::runner::pool(opts.threads)?;
    let concurrent = pool.current_num_threads().min(todo.len()).max(1);
    let fan_in = opened.len() + runs.len();
    let chunk = chunk_bytes(config, fan_in, concurrent);
    let results: Vec<Result<Stats>> = pool.install(|| {
        todo.par_iter()
            .map(|&(s, r)| {
                let start = Instant::now();
                let name = unit_name(s, r);
                let marker_loc = pipeline::runner::begin_input(storage, &opts.output, &name)?;
                let mut inputs: Vec<MergeInput> = Vec::with_capacity(fan_in);
                for (_, files) in &runs {
                    let (m, h) = &files[s];
                    inputs.push(MergeInput {
                        reader: SectionReader::open(
                            storage,
                            &m.location,
                            h.layout,
                            &h.sections[0],
                            slots(r, ranges),
                            chunk,
                        ),
                        file: None,
                    });
                }
                for (i, (m, h)) in opened.iter().enumerate() {
                    inputs.push(MergeInput {
                        reader: SectionReader::open(
                            storage,
                            &m.location,
                            h.layout,
                            &h.sections[s],
                            slots(r, ranges),
                            chunk,
                        ),
                        file: Some(i),
                    });
                }
                let rel = format!("{name}.pairs");
                let (mut stats, bytes) = merge_unit(
                    storage,
                    &opts.output.join(&rel),
                    inputs,
                    (s, r, ranges),
                    &files_hash,
                    config.kind,
                )?;
                stats.bytes_in = opened
                    .iter()
                    .map(|(_, h)| section_bytes(h, s, r, ranges))
                    .sum();
                stats.bytes_out = bytes;
                stats.seconds = start.elapsed().as_secs_f64();
                pipeline::runner::crash_point();
                let marker = Marker {
                    step: STEP.into(),
                    input: opts.input.to_string(),
                    input_size,
                    input_etag: Some(files_hash.clone()),
                    config_hash: hash.clone(),
                    outputs: vec![rel],
                    stats: stats.clone(),
                };
                write_marker(storage, &marker_loc, &marker)?;
                Ok(stats)
            })
            .collect()
    });
    for ((s, r), result) in todo.iter().zip(results) {
        report.stats.merge(&result?);
        report.processed.push(unit_name(*s, *r));
    }
    Ok(report)
}

fn section_bytes(h: &Header, s: usize, r: usize, ranges: usize) -> u64 {
    let sec: &Section = &h.sections[s];
    let sl = slots(r, ranges);
    let end = if sl.end >= 256 {
        sec.count
    } else {
        sec.fences[sl.end]
    };
    (end - sec.fences[sl.start]) * h.layout.width() as u64
}

/// The name of a unit: `<section>-<range>`, zero-padded.
pub fn unit_name(section: usize, range: usize) -> String {
    format!("{section:03}-{range:03}")
}

/// Merges one unit and writes its pairs; returns the unit's counters and bytes written.
pub fn merge_unit(
    storage: &Storage,
    out: &Location,
    inputs: Vec<MergeInput>,
    (section, range, ranges): (usize, usize, usize),
    files_hash: &str,
    kind: Kind,
) -> Result<(Stats, u64)> {
    storage.remove_stale_temporaries(out)?;
    let url = out.to_string();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, storage.create(out)?);
    let mut header = Vec::with_capacity(PAIRS_HEADER);
    header.extend_from_slice(PAIRS_MAGIC);
    for v in [1u32, section as u32, range as u32, ranges as u32] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    header.extend_from_slice(&hex32(files_hash));
    header.push(kind as u8);
    header.resize(PAIRS_HEADER, 0);
    let io = |e| Error::from_io_error("writing", &url, e);
    w.write_all(&header).map_err(io)?;
    let mut stats = Stats::default();
    let mut merger = Merger::new(inputs)?;
    let mut group = Vec::new();
    let mut pair = [0u8; 16];
    while merger.next_group(&mut group)? {
        let first = group[0];
        if first.1 == 1 {
            stats.keep();
        }
        for it in &group[1..] {
            if it.1 == 0 {
                continue; // the same key in two index runs
            }
            stats.drop(CANDIDATE);
            pair[..8].copy_from_slice(&first.3.to_le_bytes());
            pair[8..].copy_from_slice(&it.3.to_le_bytes());
            w.write_all(&pair).map_err(io)?;
        }
    }
    let writer = w
        .into_inner()
        .map_err(|e| Error::from_io_error("writing", &url, e.into_error()))?;
    let bytes = writer.finish()?;
    Ok((stats, bytes))
}

fn hex32(hex: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = hex
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
    }
    out
}

/// The header of a pairs file: (section, range, ranges, files hash).
pub fn read_pairs_header(bytes: &[u8], url: &str) -> Result<(usize, usize, usize, String)> {
    let bad = |m: &str| Error::Input {
        url: url.to_string(),
        message: format!("not a pairs file: {m}"),
    };
    if bytes.len() < PAIRS_HEADER || &bytes[..8] != PAIRS_MAGIC {
        return Err(bad("no magic"));
    }
    if !(bytes.len() - PAIRS_HEADER).is_multiple_of(16) {
        return Err(bad("length is not a whole number of pairs"));
    }
    let u = |o: usize| {
        u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
    };
    let hash: String = bytes[24..56].iter().map(|b| format!("{b:02x}")).collect();
    Ok((u(12), u(16), u(20), hash))
}

/// The pairs of a pairs file (after the header).
pub fn pairs(bytes: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    bytes[PAIRS_HEADER.min(bytes.len())..]
        .chunks_exact(16)
        .map(|c| {
            let (a, b) = c.split_at(8);
            (
                u64::from_le_bytes(a.try_into().unwrap_or_default()),
                u64::from_le_bytes(b.try_into().unwrap_or_default()),
            )
        })
}
