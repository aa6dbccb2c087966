//! Phase 4: a per-document stage that drops the rows the clusters phase listed and writes
//! `<kind>_cluster_size` on what it keeps (1 for documents in no cluster), so a later mix
//! can re-weight by it. A dropped document (kept under `_rejected/` with
//! `keep_rejected`) names what it matched: `<kind>_keeper_id` (the keeper's document
//! id), `<kind>_keeper_input` (the keeper's input, or `index:<run>` when the cluster
//! matched that run of the index of earlier runs), `<kind>_keeper_row` (its row there),
//! `<kind>_cluster_id` (the global number of the cluster's smallest document of this
//! run) and `<kind>_cluster_size`.

use pipeline::cli::config_hash;
use pipeline::shard::ShardOptions;
use pipeline::{
    Column, ColumnKind, Document, Error, InputStage, Location, Planned, Result, RowStage, Step,
    Storage, Value, Verdict,
};

use std::sync::Arc;

use crate::dups::{CLUSTERS_UNIT, Dups, read_dups};
use crate::signatures::{FILES, FileList};
use crate::{Config, Kind, split_global};

/// What `<kind>_keeper_input` says of a keeper from the index of an earlier run:
/// `index:<run>`, the name of the index run the cluster matched.
pub const INDEX_INPUT: &str = "index:";

/// Step name in markers.
pub const STEP: &str = "dedup.filter";

/// The filter over all inputs: binds each input to its removal list.
#[derive(Debug)]
pub struct DedupFilter {
    kind: Kind,
    clusters: Location,
    /// Input stems in the order of global numbers (the clusters phase's `files.json`).
    stems: Arc<Vec<String>>,
    /// Index run names in the order of their nodes.
    index_runs: Arc<Vec<String>>,
}

/// The filter bound to one input: drops the listed rows, writes the cluster size of
/// the rest.
#[derive(Debug)]
pub struct BoundFilter {
    kind: Kind,
    dups: Dups,
    stems: Arc<Vec<String>>,
    index_runs: Arc<Vec<String>>,
}

/// Names of the columns a dropped document gets: the keeper's input, row and document
/// id, and the cluster id.
fn keeper_columns(kind: Kind) -> [&'static str; 4] {
    match kind {
        Kind::Minhash => [
            "minhash_keeper_input",
            "minhash_keeper_row",
            "minhash_keeper_id",
            "minhash_cluster_id",
        ],
        Kind::Exact => [
            "exact_keeper_input",
            "exact_keeper_row",
            "exact_keeper_id",
            "exact_cluster_id",
        ],
        Kind::Url => [
            "url_keeper_input",
            "url_keeper_row",
            "url_keeper_id",
            "url_cluster_id",
        ],
    }
}

impl InputStage for DedupFilter {
    fn name(&self) -> &'static str {
        STEP
    }

    fn columns(&self) -> Vec<Column> {
        let [input, row, doc_id, id] = keeper_columns(self.kind);
        vec![
            Column {
                name: self.kind.size_column(),
                kind: ColumnKind::I64,
            },
            Column {
                name: input,
                kind: ColumnKind::Str,
            },
            Column {
                name: row,
                kind: ColumnKind::I64,
            },
            Column {
                name: doc_id,
                kind: ColumnKind::Str,
            },
            Column {
                name: id,
                kind: ColumnKind::I64,
            },
        ]
    }

    fn bind(&self, storage: &Storage, input: &Planned) -> Result<Box<dyn RowStage>> {
        Ok(Box::new(BoundFilter {
            kind: self.kind,
            dups: read_dups(storage, &self.clusters, &input.stem)?,
            stems: self.stems.clone(),
            index_runs: self.index_runs.clone(),
        }))
    }
}

impl RowStage for BoundFilter {
    fn process(&self, doc: &mut Document, row: u64) -> Verdict {
        // The signatures phase refuses inputs with rows past u32: none is listed.
        let listed = u32::try_from(row).ok();
        if let Some(removed) = listed.and_then(|r| self.dups.removal(r)) {
            let [input, row, doc_id, id] = keeper_columns(self.kind);
            match split_global(removed.keeper) {
                Some((f, keeper_row)) => {
                    let stem = self.stems.get(f).map_or("", |s| s.as_str());
                    doc.annotate(input, Value::Str(stem.to_string()));
                    doc.annotate(row, Value::I64(keeper_row as i64));
                    if let Some(k) = self.dups.keeper_id(removed.keeper) {
                        doc.annotate(doc_id, Value::Str(k.to_string()));
                    }
                }
                None => {
                    let run = self
                        .index_runs
                        .get(removed.keeper as usize)
                        .map_or("", |s| s.as_str());
                    doc.annotate(input, Value::Str(format!("{INDEX_INPUT}{run}")));
                }
            }
            doc.annotate(id, Value::I64(removed.cluster as i64));
            doc.annotate(self.kind.size_column(), Value::I64(removed.size as i64));
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
    let files = loc.join(FILES);
    let list: FileList =
        serde_json::from_slice(&storage.read(&files)?).map_err(|e| Error::Input {
            url: files.to_string(),
            message: e.to_string(),
        })?;
    let stems = Arc::new(list.files.into_iter().map(|f| f.stem).collect());
    let index_runs = Arc::new(list.index_runs);
    Ok(Step {
        name: STEP.into(),
        stages: Vec::new(),
        per_input: Some(Box::new(DedupFilter {
            kind: config.kind,
            clusters: loc,
            stems,
            index_runs,
        })),
        source: Box::new(crate::signatures::source(config)),
        config_hash: config_hash("dedup-filter", &(config.kind, &marker.config_hash)),
        shard: ShardOptions::default(),
        partition: None,
    })
}
