//! The removal lists of the clusters phase, read by the filter and index phases:
//! `<stem>.dups` per input,
//! ```text
//! "TMDUPS02", version u32, 0u32, documents u64, removed u64, keepers u64,
//! removed × (row u32, cluster size u32, keeper u64) (sorted by row),
//! keepers × (row u32, cluster size u32) (sorted by row)
//! ```
//! A removed row names its cluster's keeper by global number (see [`crate::global`]:
//! the input's position in the clusters phase's `files.json`, and the row), or
//! [`crate::INDEX`] when the cluster matched the index of an earlier run; the keeper's
//! global number is also the cluster's id.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use pipeline::{Error, Location, Result, Storage};

/// Suffix of removal lists.
pub const SUFFIX: &str = ".dups";
/// The clusters phase's one unit: its marker, `_done/clusters.json` below the removal
/// lists, says they are complete (the filter and index phases read it).
pub const CLUSTERS_UNIT: &str = "clusters";
const MAGIC: &[u8; 8] = b"TMDUPS02";
const HEAD: usize = 40;

/// What the clusters phase found (`summary.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub kind: String,
    pub files: usize,
    pub documents: u64,
    /// Candidate pairs read.
    pub pairs: u64,
    /// Clusters of two documents or more (an index entry counts as a member).
    pub clusters: u64,
    /// Documents to remove.
    pub removed: u64,
    /// Of those, documents removed because they match the index of an earlier run.
    pub matched_index: u64,
    /// Size of the largest cluster.
    pub largest: u64,
    /// Cluster size → number of clusters of that size (sizes ≥ 2).
    pub sizes: BTreeMap<u64, u64>,
}

/// One removed row: its cluster's size and keeper.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Removed {
    pub row: u32,
    /// Documents in the cluster (an index entry counts as one).
    pub size: u32,
    /// The keeper's global number ([`crate::INDEX`]: an earlier run's document).
    pub keeper: u64,
}

/// The removal list of one input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dups {
    pub documents: u64,
    /// Rows to remove, sorted by row.
    pub removed: Vec<Removed>,
    /// Keepers of clusters of two or more: (row, cluster size), sorted.
    pub keepers: Vec<(u32, u32)>,
}

impl Dups {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEAD + self.removed.len() * 16 + self.keepers.len() * 8);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        for v in [
            self.documents,
            self.removed.len() as u64,
            self.keepers.len() as u64,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for r in &self.removed {
            b.extend_from_slice(&r.row.to_le_bytes());
            b.extend_from_slice(&r.size.to_le_bytes());
            b.extend_from_slice(&r.keeper.to_le_bytes());
        }
        for (r, s) in &self.keepers {
            b.extend_from_slice(&r.to_le_bytes());
            b.extend_from_slice(&s.to_le_bytes());
        }
        b
    }

    /// Parses a removal list.
    pub fn decode(b: &[u8], url: &str) -> Result<Dups> {
        let bad = |m: &str| Error::Input {
            url: url.to_string(),
            message: format!("not a removal list: {m}"),
        };
        if b.len() < HEAD || &b[..8] != MAGIC {
            return Err(bad(
                "no magic (lists written before version 2 name no keepers: rerun the clusters phase)",
            ));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default());
        let (documents, nr, nk) = (u64_at(16), u64_at(24) as usize, u64_at(32) as usize);
        let expected = nr
            .checked_mul(16)
            .and_then(|r| nk.checked_mul(8).and_then(|k| r.checked_add(k)))
            .and_then(|n| n.checked_add(HEAD));
        if expected != Some(b.len()) {
            return Err(bad("length does not match its counts"));
        }
        let removed = (0..nr)
            .map(|i| {
                let o = HEAD + i * 16;
                Removed {
                    row: u32_at(o),
                    size: u32_at(o + 4),
                    keeper: u64_at(o + 8),
                }
            })
            .collect();
        let base = HEAD + nr * 16;
        let keepers = (0..nk)
            .map(|i| (u32_at(base + i * 8), u32_at(base + i * 8 + 4)))
            .collect();
        Ok(Dups {
            documents,
            removed,
            keepers,
        })
    }

    /// The removed rows, sorted.
    pub fn removed_rows(&self) -> Vec<u32> {
        self.removed.iter().map(|r| r.row).collect()
    }

    /// What the list says of `row`: removed (with its keeper), or a keeper.
    pub fn removal(&self, row: u32) -> Option<&Removed> {
        self.removed
            .binary_search_by_key(&row, |r| r.row)
            .ok()
            .map(|i| &self.removed[i])
    }
}

/// Reads the removal list of one input stem.
pub fn read_dups(storage: &Storage, clusters: &Location, stem: &str) -> Result<Dups> {
    let loc = clusters.join(&format!("{stem}{SUFFIX}"));
    if !storage.exists(&loc)? {
        return Err(Error::Usage(format!(
            "no removal list {loc}: the clusters phase did not see input {stem} (run signatures, buckets and clusters over the same input first)"
        )));
    }
    Dups::decode(&storage.read(&loc)?, &loc.to_string())
}
