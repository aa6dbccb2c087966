//! The files of an index of earlier runs (see [`crate::index`]): `index.json`, the
//! signature configuration every run in it shares, and `<section>/<run>.run`, one
//! sorted run of keys per section and batch. The index phase writes them; the buckets
//! phase reads them (`--against`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use pipeline::{Error, Location, ObjectMeta, Result, Storage};

use crate::runs::{Header, read_header};
use crate::{Config, Kind, Shingles};

/// Name of the index's configuration file.
pub const INDEX_CONFIG: &str = "index.json";

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
    pub fn of(c: &Config) -> Self {
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

/// A run file and its header.
pub type Opened = (ObjectMeta, Header);

/// The complete index runs at `index` (present for every section): name, and one run
/// file per section.
pub fn index_runs(
    storage: &Storage,
    index: &Location,
    config: &Config,
) -> Result<Vec<(String, Vec<Opened>)>> {
    check_index_config(storage, index, config)?;
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

/// Address of one section's run below the index.
pub fn run_name(section: usize, run: &str) -> String {
    format!("{section:03}/{run}.run")
}
