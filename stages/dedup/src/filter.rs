//! Phase 4: a per-document stage that drops the rows the clusters phase listed and writes
//! `<kind>_cluster_size` on what it keeps (1 for documents in no cluster), so a later mix
//! can re-weight by it.

use pipeline::cli::config_hash;
use pipeline::shard::ShardOptions;
use pipeline::{
    Column, ColumnKind, Document, Error, Location, Planned, Result, Stage, Step, Storage, Value,
    Verdict,
};

use crate::dups::{CLUSTERS_UNIT, Dups, read_dups};
use crate::{Config, Kind};

/// Step name in markers.
pub const STEP: &str = "dedup-filter";

/// The filter: over all inputs it only binds itself to each input's removal list
/// (`dups`); bound, it drops the listed rows.
#[derive(Debug)]
pub struct DedupFilter {
    kind: Kind,
    clusters: Location,
    dups: Option<Dups>,
}

impl Stage for DedupFilter {
    fn name(&self) -> &'static str {
        "dedup-filter"
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column {
            name: self.kind.size_column(),
            kind: ColumnKind::I64,
        }]
    }

    fn process(&self, _doc: &mut Document) -> Verdict {
        // Rows are needed: the runner calls `for_input`, then `process_row` on the bound
        // stage. Reaching this means a caller skipped binding.
        Verdict::Drop("unbound_dedup_filter")
    }

    fn process_row(&self, doc: &mut Document, row: u64) -> Verdict {
        let Some(dups) = &self.dups else {
            return Verdict::Drop("unbound_dedup_filter");
        };
        let Ok(row) = u32::try_from(row) else {
            return Verdict::Drop(self.kind.reason());
        };
        if dups.removed.binary_search(&row).is_ok() {
            return Verdict::Drop(self.kind.reason());
        }
        let size = match dups.keepers.binary_search_by_key(&row, |k| k.0) {
            Ok(i) => dups.keepers[i].1 as i64,
            Err(_) => 1,
        };
        doc.annotate(self.kind.size_column(), Value::I64(size));
        Verdict::Keep
    }

    fn for_input(&self, storage: &Storage, input: &Planned) -> Result<Option<Box<dyn Stage>>> {
        Ok(Some(Box::new(DedupFilter {
            kind: self.kind,
            clusters: self.clusters.clone(),
            dups: Some(read_dups(storage, &self.clusters, &input.stem)?),
        })))
    }
}

/// The filter step over the documents the signatures were computed from.
pub fn step(storage: &Storage, config: &Config, clusters: &str) -> Result<Step> {
    let loc = Location::parse(clusters)?;
    // The removal lists' identity: a new clusters result redoes the filter.
    let marker = pipeline::marker::read_marker(
        storage,
        &pipeline::marker::marker_location(&loc, CLUSTERS_UNIT),
    )?
    .ok_or_else(|| {
        Error::Usage(format!(
            "{loc} has no finished clusters phase (no _done/clusters.json): run it first"
        ))
    })?;
    Ok(Step {
        name: STEP.into(),
        stages: vec![Box::new(DedupFilter {
            kind: config.kind,
            clusters: loc,
            dups: None,
        })],
        source: Box::new(crate::signatures::source(config)),
        config_hash: config_hash(STEP, &(config.kind, &marker.config_hash)),
        shard: ShardOptions::default(),
        partition: None,
    })
}
