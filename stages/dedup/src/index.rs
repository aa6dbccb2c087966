//! The index of earlier runs, for incremental dedup (`buckets --against <index>`).
//!
//! An index is a folder: `index.json` (the signature configuration every run in it
//! shares) and, per section, one sorted run per finished batch,
//! `<index>/<section>/<run>.run`, holding the keys of the documents that batch kept
//! (a run file of [`crate::runs`] with keys only). Adding a batch appends new run files;
//! nothing is rewritten. A run's name is the start of the hash of its signature listing,
//! so redoing a batch rewrites the same names with the same bytes.

use rayon::prelude::*;

use pipeline::cli::config_hash;
use pipeline::marker::{Marker, marker_location, read_marker};
use pipeline::{
    Error, Location, Report, Result, RunOptions, Stats, Storage, Unit, UnitDone, plan_units,
    run_units,
};

use crate::dups::{CLUSTERS_UNIT, read_dups};
use crate::index_files::{INDEX_CONFIG, IndexConfig, check_index_config, run_name};
use crate::merge::{MergeInput, Merger, Origin, chunk_bytes};
use crate::runs::{Entry, RunWriter, SectionReader};
use crate::signatures::list_signatures;
use crate::{Config, split_global};

/// Step name in markers.
pub const STEP: &str = "dedup.index";

/// Appends the kept documents of a finished run (signatures at `opts.input`, removal
/// lists at `clusters`) to the index at `opts.output`, one run file per section. The
/// units are the sections (`<section>-<run>`); tasks split them.
pub fn index(
    storage: &Storage,
    opts: &RunOptions,
    config: &Config,
    clusters: &Location,
) -> Result<Report> {
    config.validate()?;
    let index = &opts.output;
    let (list, opened) = list_signatures(storage, &opts.input, config)?;
    let files_hash = list.hash();
    let marker = clusters_marker(storage, clusters)?;
    if marker
        .source_hash
        .as_deref()
        .or(marker.input_etag.as_deref())
        != Some(files_hash.as_str())
    {
        return Err(Error::Usage(format!(
            "the clusters at {clusters} were computed for other signatures than those at {}",
            opts.input
        )));
    }
    let run = files_hash[..16].to_string();
    let hash = config_hash("dedup-index", &config.signature_key());
    // What a section's run holds depends on the signatures and the removal lists.
    let version = config_hash("dedup-index", &(&files_hash, &marker.config_hash));
    let units: Vec<Unit> = (0..config.sections())
        .map(|s| Unit {
            name: format!("{s:03}-{run}"),
            size: opened.iter().map(|(_, h)| h.sections[s].count).sum(),
            version: version.clone(),
        })
        .collect();
    let plan = plan_units(STEP, units, &hash, storage, opts)?;
    if opts.dry_run || plan.todo.is_empty() {
        return run_units(STEP, plan, &hash, "", storage, opts, |_| {
            Ok(UnitDone::default())
        });
    }
    if !check_index_config(storage, index, config)? {
        let json = serde_json::to_vec_pretty(&IndexConfig::of(config))
            .map_err(|e| Error::Usage(e.to_string()))?;
        storage.put(&index.join(INDEX_CONFIG), &json)?;
    }
    let removed: Vec<Vec<u32>> = list
        .files
        .par_iter()
        .map(|f| read_dups(storage, clusters, &f.stem).map(|d| d.removed_rows()))
        .collect::<Result<_>>()?;
    let chunk = chunk_bytes(config, opened.len(), opts.concurrency(plan.todo.len()));
    let input = opts.input.to_string();
    run_units(STEP, plan, &hash, &input, storage, opts, |unit| {
        let s: usize = unit
            .name
            .split_once('-')
            .and_then(|(s, _)| s.parse().ok())
            .ok_or_else(|| Error::Usage(format!("{:?} is not an index unit", unit.name)))?;
        let inputs = opened
            .iter()
            .enumerate()
            .map(|(i, (m, h))| MergeInput {
                reader: SectionReader::open(
                    storage,
                    &m.location,
                    h.layout,
                    &h.sections[s],
                    0..256,
                    chunk,
                ),
                origin: Origin::Input(i),
            })
            .collect();
        let mut merger = Merger::new(inputs)?;
        let rel = run_name(s, &run);
        let mut w = RunWriter::create(storage, &index.join(&rel), config.kind.index_layout())?;
        w.section();
        let mut stats = Stats::default();
        let mut group = Vec::new();
        while merger.next_group(&mut group)? {
            let mut kept = false;
            for it in &group {
                let Some((f, row)) = split_global(it.global) else {
                    continue;
                };
                if removed[f].binary_search(&row).is_ok() {
                    stats.drop(config.kind.reason());
                } else {
                    stats.keep();
                    kept = true;
                }
            }
            if kept {
                w.push(&Entry {
                    key: group[0].key,
                    rank: 0,
                    row: 0,
                })?;
            }
        }
        stats.bytes_out = w.finish(0)?;
        Ok(UnitDone {
            outputs: vec![rel],
            stats,
        })
    })
}

/// The marker of a finished clusters phase.
fn clusters_marker(storage: &Storage, clusters: &Location) -> Result<Marker> {
    read_marker(storage, &marker_location(clusters, CLUSTERS_UNIT))?.ok_or_else(|| {
        Error::Usage(format!(
            "{clusters} has no finished clusters phase: run it first"
        ))
    })
}
