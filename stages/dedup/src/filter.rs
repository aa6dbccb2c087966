//! Phase 4: a per-document stage that drops the rows the clusters phase listed and writes
//! `<kind>_cluster_size` on what it keeps (1 for documents in no cluster), so a later mix
//! can re-weight by it.

use pipeline::cli::config_hash;
use pipeline::shard::ShardOptions;
use pipeline::{
    Column, ColumnKind, Document, Error, InputStage, Location, Planned, Result, RowStage, Step,
    Storage, Value, Verdict,
};

use crate::dups::{CLUSTERS_UNIT, Dups, read_dups};
use crate::{Config, Kind};

/// Step name in markers.
pub const STEP: &str = "dedup.filter";

/// The filter over all inputs: binds each input to its removal list.
#[derive(Debug)]
pub struct DedupFilter {
    kind: Kind,
    clusters: Location,
}

/// The filter bound to one input: drops the listed rows, writes the cluster size of
/// the rest.
#[derive(Debug)]
pub struct BoundFilter {
    kind: Kind,
    dups: Dups,
}

impl InputStage for DedupFilter {
    fn name(&self) -> &'static str {
        STEP
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column {
            name: self.kind.size_column(),
            kind: ColumnKind::I64,
        }]
    }

    fn bind(&self, storage: &Storage, input: &Planned) -> Result<Box<dyn RowStage>> {
        Ok(Box::new(BoundFilter {
            kind: self.kind,
            dups: read_dups(storage, &self.clusters, &input.stem)?,
        }))
    }
}

impl RowStage for BoundFilter {
    fn process(&self, doc: &mut Document, row: u64) -> Verdict {
        // The signatures phase refuses inputs with rows past u32: none is listed.
        let listed = u32::try_from(row).ok();
        if listed.is_some_and(|r| self.dups.removed.binary_search(&r).is_ok()) {
            return Verdict::Drop(self.kind.reason());
        }
        let size = listed
            .and_then(|r| self.dups.keepers.binary_search_by_key(&r, |k| k.0).ok())
            .map_or(1, |i| self.dups.keepers[i].1 as i64);
        doc.annotate(self.kind.size_column(), Value::I64(size));
        Verdict::Keep
    }
}

/// The filter step over the documents the signatures were computed from.
pub fn step(storage: &Storage, config: &Config, clusters: &str) -> Result<Step> {
    config.validate()?;
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
        stages: Vec::new(),
        per_input: Some(Box::new(DedupFilter {
            kind: config.kind,
            clusters: loc,
        })),
        source: Box::new(crate::signatures::source(config)),
        config_hash: config_hash("dedup-filter", &(config.kind, &marker.config_hash)),
        shard: ShardOptions::default(),
        partition: None,
    })
}
