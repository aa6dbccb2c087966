//! The index of earlier runs, for incremental dedup (`buckets --against <index>`).
//!
//! An index is a folder: `index.json` (the signature configuration every run in it
//! shares) and, per section, one sorted run per finished batch,
//! `<index>/<section>/<run>.run`, holding the keys of the documents that batch kept
//! (a run file of [`crate::runs`] with keys only). Adding a batch appends new run files;
//! nothing is rewritten. A run's name is the start of the hash of its signature listing,
//! so redoing a batch rewrites the same names with the same bytes.

use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use pipeline::{Error, Location, Report, Result, RunOptions, Stats, Storage};

use crate::buckets::{MergeInput, Merger, chunk_bytes, list_signatures};
use crate::clusters::read_dups;
use crate::runs::{Entry, RunWriter, SectionReader};
use crate::{Config, Kind, Shingles, split_global};

/// Name of the index's configuration file.
pub const INDEX_CONFIG: &str = "index.json";
/// Step name in logs.
pub const STEP: &str = "dedup-index";

/// The part of the configuration all runs of an index share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexConfig {
    pub kind: Kind,
    pub bands: usize,
    pub rows: usize,
    pub ngram: usize,
    pub shingles: Shingles,
    pub seed: u64,
}

impl IndexConfig {
    fn of(c: &Config) -> Self {
        IndexConfig {
            kind: c.kind,
            bands: c.bands,
            rows: c.rows,
            ngram: c.ngram,
            shingles: c.shingles,
            seed: c.seed,
        }
    }
}

/// Checks that the index at `index` was built with this configuration (an index that
/// does not exist yet matches anything: the first batch has nothing to compare with).
pub fn check_index_config(storage: &Storage, index: &Location, config: &Config) -> Result<bool> {
    let loc = index.join(INDEX_CONFIG);
    if !storage.exists(&loc)? {
        tracing::warn!(index = %index, "no index yet: nothing to deduplicate against");
        return Ok(false);
    }
    let found: IndexConfig =
        serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
            url: loc.to_string(),
            message: e.to_string(),
        })?;
    if found != IndexConfig::of(config) {
        return Err(Error::Usage(format!(
            "{loc}: the index was built with {found:?}; this run uses {:?}; signatures of different settings cannot be compared",
            IndexConfig::of(config)
        )));
    }
    Ok(true)
}

/// Appends the kept documents of a finished run (signatures at `opts.input`, removal
/// lists at `clusters`) to the index at `opts.output`, one run file per section. Tasks
/// split the sections.
pub fn index(
    storage: &Storage,
    opts: &RunOptions,
    clusters: &Location,
    config: &Config,
) -> Result<Report> {
    config.validate()?;
    let index = &opts.output;
    let (list, opened) = list_signatures(storage, &opts.input, config)?;
    let files_hash = list.hash();
    let marker = pipeline::marker::read_marker(
        storage,
        &pipeline::marker::marker_location(clusters, "clusters"),
    )?
    .ok_or_else(|| {
        Error::Usage(format!(
            "{clusters} has no finished clusters phase: run it first"
        ))
    })?;
    if marker.input_etag.as_deref() != Some(files_hash.as_str()) {
        return Err(Error::Usage(format!(
            "the clusters at {clusters} were computed for other signatures than those at {}",
            opts.input
        )));
    }
    let run = files_hash[..16].to_string();
    if check_index_config(storage, index, config)? {
        // matches
    } else {
        let json = serde_json::to_vec_pretty(&IndexConfig::of(config))
            .map_err(|e| Error::Usage(e.to_string()))?;
        storage.put(&index.join(INDEX_CONFIG), &json)?;
    }
    let sections: Vec<usize> = (0..config.sections())
        .filter(|s| s % opts.tasks.max(1) == opts.task)
        .collect();
    let mut report = Report::default();
    let mut todo = Vec::new();
    for s in sections {
        let rel = run_name(s, &run);
        if !opts.force && storage.exists(&index.join(&rel))? {
            report.skipped.push(rel);
        } else {
            todo.push(s);
        }
    }
    if opts.dry_run {
        println!(
            "step {STEP}: run {run}, {} sections to write, {} done",
            todo.len(),
            report.skipped.len()
        );
        return Ok(report);
    }
    let removed: Vec<Vec<u32>> = list
        .files
        .par_iter()
        .map(|f| read_dups(storage, clusters, &f.stem).map(|d| d.removed))
        .collect::<Result<_>>()?;
    let pool = pipeline::runner::pool(opts.threads)?;
    let concurrent = pool.current_num_threads().min(todo.len()).max(1);
    let chunk = chunk_bytes(config, opened.len(), concurrent);
    let results: Vec<Result<Stats>> = pool.install(|| {
        todo.par_iter()
            .map(|&s| {
                let start = Instant::now();
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
                        file: Some(i),
                    })
                    .collect();
                let mut merger = Merger::new(inputs)?;
                let loc = index.join(&run_name(s, &run));
                let mut w = RunWriter::create(storage, &loc, config.kind.index_layout())?;
                w.section();
                let mut stats = Stats::default();
                let mut group = Vec::new();
                while merger.next_group(&mut group)? {
                    let mut kept = false;
                    for it in &group {
                        let Some((f, row)) = split_global(it.3) else {
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
                            key: group[0].0,
                            rank: 0,
                            row: 0,
                        })?;
                    }
                }
                stats.bytes_out = w.finish(0)?;
                stats.seconds = start.elapsed().as_secs_f64();
                Ok(stats)
            })
            .collect()
    });
    for (s, r) in todo.iter().zip(results) {
        report.stats.merge(&r?);
        report.processed.push(run_name(*s, &run));
    }
    Ok(report)
}

/// Address of one section's run below the index.
pub fn run_name(section: usize, run: &str) -> String {
    format!("{section:03}/{run}.run")
}
