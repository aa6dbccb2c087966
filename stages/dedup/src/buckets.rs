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
//! global numbers `(i + 1) << 32 | row`), `<output>/<section>-<range>.pairs` (the format
//! of [`crate::pairs`]) and `_done/<section>-<range>.json`, each unit's marker, whose
//! version is the hash of the signature listing.

use std::io::Write;

use pipeline::cli::config_hash;
use pipeline::{
    Error, Location, Report, Result, RunOptions, Stats, Storage, Unit, UnitDone, plan_units,
    run_units,
};

use crate::index_files::index_runs;
use crate::merge::{MergeInput, Merger, Origin, chunk_bytes};
use crate::pairs::{encode_header, parse_unit_name, unit_name};
use crate::runs::{Header, Section, SectionReader, slots};
use crate::signatures::{FILES, list_signatures};
use crate::{Config, Kind};

/// Step name in markers.
pub const STEP: &str = "dedup.buckets";
/// Drop reason counted for entries that matched an earlier entry of their unit.
pub const CANDIDATE: &str = "candidate_duplicate";
/// Hash ranges per section for `tasks` tasks.
pub fn ranges_for(sections: usize, tasks: usize) -> usize {
    tasks
        .div_ceil(sections.max(1))
        .max(1)
        .next_power_of_two()
        .min(256)
}

/// Runs one task of the bucket phase over the signature files at `opts.input`;
/// `against`: an index of earlier runs to deduplicate against.
pub fn buckets(
    storage: &Storage,
    opts: &RunOptions,
    config: &Config,
    against: Option<&Location>,
) -> Result<Report> {
    config.validate()?;
    let (mut list, opened) = list_signatures(storage, &opts.input, config)?;
    let runs = match against {
        Some(index) => index_runs(storage, index, config)?,
        None => Vec::new(),
    };
    // The index runs' names, in the order of their nodes, for the removal lists to name.
    list.index_runs = runs.iter().map(|(r, _)| r.clone()).collect();
    let sections = config.sections();
    let ranges = ranges_for(sections, opts.tasks);
    let files_hash = list.hash();
    let run_names: Vec<&str> = runs.iter().map(|(r, _)| r.as_str()).collect();
    // The listing hash is also each unit's version; it stays in the hash as it was
    // before units had versions, so that markers written then still match.
    let hash = config_hash(
        "dedup-buckets",
        &(
            config.signature_key(),
            ranges,
            &files_hash,
            // Against an index, version 2 of the pairs: an index run is paired with
            // the first document of a group only (a run without one keeps its hash).
            against.map(|a| format!("{a} pairs-v2")),
            &run_names,
        ),
    );
    let units: Vec<Unit> = (0..sections * ranges)
        .map(|u| {
            let (s, r) = (u / ranges, u % ranges);
            Unit {
                name: unit_name(s, r),
                size: opened
                    .iter()
                    .map(|(_, h)| section_bytes(h, s, r, ranges))
                    .sum(),
                version: files_hash.clone(),
            }
        })
        .collect();
    let plan = plan_units(STEP, units, &hash, storage, opts)?;
    if opts.dry_run {
        println!(
            "  {} signature files, {sections} sections x {ranges} ranges",
            list.files.len()
        );
    }
    if !opts.dry_run && !plan.todo.is_empty() {
        storage.put(&opts.output.join(FILES), &list.to_json())?;
    }
    let concurrent = opts.concurrency(plan.todo.len());
    let fan_in = opened.len() + runs.len();
    let chunk = chunk_bytes(config, fan_in, concurrent);
    let input = opts.input.to_string();
    run_units(STEP, plan, &hash, &input, storage, opts, |unit| {
        let (s, r) = parse_unit_name(&unit.name)?;
        let mut inputs: Vec<MergeInput> = Vec::with_capacity(fan_in);
        for (run, (_, files)) in runs.iter().enumerate() {
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
                origin: Origin::IndexRun(run as u32),
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
                origin: Origin::Input(i),
            });
        }
        let rel = format!("{}.pairs", unit.name);
        let (mut stats, bytes) = merge_unit(
            storage,
            &opts.output.join(&rel),
            inputs,
            (s, r, ranges),
            &files_hash,
            config.kind,
        )?;
        stats.bytes_in = unit.size;
        stats.bytes_out = bytes;
        Ok(UnitDone {
            outputs: vec![rel],
            stats,
        })
    })
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
    let header = encode_header(section, range, ranges, files_hash, kind);
    let io = |e| Error::from_io_error("writing", &url, e);
    w.write_all(&header).map_err(io)?;
    let mut stats = Stats::default();
    let mut merger = Merger::new(inputs)?;
    let mut group = Vec::new();
    let mut pair = [0u8; 16];
    while merger.next_group(&mut group)? {
        let first = group[0];
        if first.is_document() {
            stats.keep();
        }
        // Star pairs from the group's first entry. MinHash against an index pairs the
        // index run with the first document only and the other documents with that
        // one: a run's node then joins no clusters that only match the same run.
        let mut centre = first;
        for it in &group[1..] {
            if !it.is_document() {
                continue; // the same key in two index runs
            }
            stats.drop(CANDIDATE);
            pair[..8].copy_from_slice(&centre.global.to_le_bytes());
            pair[8..].copy_from_slice(&it.global.to_le_bytes());
            w.write_all(&pair).map_err(io)?;
            if kind == Kind::Minhash && !centre.is_document() {
                centre = *it;
            }
        }
    }
    let writer = w
        .into_inner()
        .map_err(|e| Error::from_io_error("writing", &url, e.into_error()))?;
    let bytes = writer.finish()?;
    Ok((stats, bytes))
}
