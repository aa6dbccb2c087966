//! The removal lists of the clusters phase, read by the filter and index phases:
//! `<stem>.dups` per input,
//! ```text
//! "TMDUPS04", version u32, 0u32, documents u64, removed u64, keepers u64, names u64,
//! name bytes u64,
//! removed × (row u32, cluster size u32, keeper u64, cluster u64) (sorted by row),
//! keepers × (row u32, cluster size u32) (sorted by row),
//! names × (keeper u64, end u64) (sorted by keeper), then the names' UTF-8 bytes
//! ```
//! A removed row names its cluster's keeper by global number (see [`crate::global`]:
//! the input's position in the clusters phase's `files.json`, and the row), or the
//! node of the index run it matched ([`crate::index_node`]: its position in the
//! `index_runs` of `files.json`) when any member of the cluster matched the index of
//! an earlier run; then every member is removed. The cluster's id is its smallest
//! document of this run (the keeper when none matched the index). The names table holds the document id of
//! every keeper this input's removed rows name (from the signatures' id files; `end`
//! is where the id ends in the bytes after the table, the next starts there).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use pipeline::{Error, Location, Result, Storage};

use crate::{global, is_index, split_global};

/// Suffix of removal lists.
pub const SUFFIX: &str = ".dups";
/// The clusters phase's one unit: its marker, `_done/clusters.json` below the removal
/// lists, says they are complete (the filter and index phases read it).
pub const CLUSTERS_UNIT: &str = "clusters";
const MAGIC: &[u8; 8] = b"TMDUPS04";
const VERSION: u32 = 4;
const HEAD: usize = 56;

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
    /// Documents in the cluster (a match of the index counts as one).
    pub size: u32,
    /// The keeper's global number, or an index run's node ([`crate::is_index`]).
    pub keeper: u64,
    /// The cluster's id: its smallest document of this run (global number).
    pub cluster: u64,
}

/// The removal list of one input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dups {
    pub documents: u64,
    /// Rows to remove, sorted by row.
    pub removed: Vec<Removed>,
    /// Keepers of clusters of two or more: (row, cluster size), sorted.
    pub keepers: Vec<(u32, u32)>,
    /// The document id of each keeper that a removed row names (the index excepted),
    /// sorted by keeper.
    pub names: Vec<(u64, String)>,
}

impl Dups {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let text: usize = self.names.iter().map(|(_, n)| n.len()).sum();
        let mut b = Vec::with_capacity(
            HEAD + self.removed.len() * 24 + self.keepers.len() * 8 + self.names.len() * 16 + text,
        );
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        for v in [
            self.documents,
            self.removed.len() as u64,
            self.keepers.len() as u64,
            self.names.len() as u64,
            text as u64,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for r in &self.removed {
            b.extend_from_slice(&r.row.to_le_bytes());
            b.extend_from_slice(&r.size.to_le_bytes());
            b.extend_from_slice(&r.keeper.to_le_bytes());
            b.extend_from_slice(&r.cluster.to_le_bytes());
        }
        for (r, s) in &self.keepers {
            b.extend_from_slice(&r.to_le_bytes());
            b.extend_from_slice(&s.to_le_bytes());
        }
        let mut end = 0u64;
        for (k, n) in &self.names {
            end += n.len() as u64;
            b.extend_from_slice(&k.to_le_bytes());
            b.extend_from_slice(&end.to_le_bytes());
        }
        for (_, n) in &self.names {
            b.extend_from_slice(n.as_bytes());
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
                "no magic (lists written before version 4 name no keepers' ids or index runs: rerun the clusters phase)",
            ));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default());
        let (documents, nr, nk) = (u64_at(16), u64_at(24) as usize, u64_at(32) as usize);
        let (nn, text) = (u64_at(40) as usize, u64_at(48) as usize);
        let expected = [(nr, 24), (nk, 8), (nn, 16), (text, 1)]
            .into_iter()
            .try_fold(HEAD, |at, (n, w)| n.checked_mul(w)?.checked_add(at));
        if expected != Some(b.len()) {
            return Err(bad("length does not match its counts"));
        }
        let removed = (0..nr)
            .map(|i| {
                let o = HEAD + i * 24;
                Removed {
                    row: u32_at(o),
                    size: u32_at(o + 4),
                    keeper: u64_at(o + 8),
                    cluster: u64_at(o + 16),
                }
            })
            .collect();
        let base = HEAD + nr * 24;
        let keepers = (0..nk)
            .map(|i| (u32_at(base + i * 8), u32_at(base + i * 8 + 4)))
            .collect();
        let table = base + nk * 8;
        let blob = &b[table + nn * 16..];
        let mut start = 0usize;
        let mut names = Vec::with_capacity(nn);
        for i in 0..nn {
            let (k, end) = (u64_at(table + i * 16), u64_at(table + i * 16 + 8) as usize);
            let id = blob
                .get(start..end)
                .and_then(|t| std::str::from_utf8(t).ok())
                .ok_or_else(|| bad(&format!("name {i} is not UTF-8 within the names' bytes")))?;
            if names.last().is_some_and(|(last, _)| *last >= k) {
                return Err(bad("names are not sorted by keeper"));
            }
            names.push((k, id.to_string()));
            start = end;
        }
        Ok(Dups {
            documents,
            removed,
            keepers,
            names,
        })
    }

    /// The removed rows, sorted.
    pub fn removed_rows(&self) -> Vec<u32> {
        self.removed.iter().map(|r| r.row).collect()
    }

    /// The document id of keeper `keeper` (a global number), when a removed row names it.
    pub fn keeper_id(&self, keeper: u64) -> Option<&str> {
        self.names
            .binary_search_by_key(&keeper, |(k, _)| *k)
            .ok()
            .map(|i| self.names[i].1.as_str())
    }

    /// What the list says of `row`: removed (with its keeper), or a keeper.
    pub fn removal(&self, row: u32) -> Option<&Removed> {
        self.removed
            .binary_search_by_key(&row, |r| r.row)
            .ok()
            .map(|i| &self.removed[i])
    }
}

/// Applies the matches of the index to the removal lists of inputs `first..`: `matched`
/// maps a component's keeper (its smallest document; a document in no pair is its own
/// component) to the node of the index run it matched. Every member of such a
/// component is removed, the keeper too, with the index run as keeper, the component's
/// keeper as cluster id and the match counted in the size.
pub fn apply_index_matches(lists: &mut [Dups], first: usize, matched: &HashMap<u64, u64>) {
    if matched.is_empty() {
        return;
    }
    let mut moved = std::collections::HashSet::new();
    for (i, d) in lists.iter_mut().enumerate() {
        let f = first + i;
        for r in d.removed.iter_mut() {
            if let Some(&run) = matched.get(&r.keeper) {
                r.keeper = run;
                r.size = r.size.saturating_add(1);
            }
        }
        let mut kept = Vec::with_capacity(d.keepers.len());
        for &(row, size) in &d.keepers {
            let g = global(f, row);
            match matched.get(&g) {
                Some(&run) => {
                    moved.insert(g);
                    d.removed.push(Removed {
                        row,
                        size: size.saturating_add(1),
                        keeper: run,
                        cluster: g,
                    });
                }
                None => kept.push((row, size)),
            }
        }
        d.keepers = kept;
    }
    // Documents in no pair that matched the index: a component of one, and the match.
    let mut alone: Vec<(u64, u64)> = matched
        .iter()
        .filter(|(c, _)| {
            !moved.contains(*c)
                && split_global(**c).is_some_and(|(f, _)| f >= first && f < first + lists.len())
        })
        .map(|(c, r)| (*c, *r))
        .collect();
    alone.sort_unstable();
    for (c, run) in alone {
        if let Some((f, row)) = split_global(c) {
            lists[f - first].removed.push(Removed {
                row,
                size: 2,
                keeper: run,
                cluster: c,
            });
        }
    }
    for d in lists.iter_mut() {
        d.removed.sort_unstable();
    }
}

/// What the removal lists of inputs `first..` add to the summary: each cluster is
/// counted once, by the input of its id (a keeper's entry, or its removed smallest
/// document when it matched the index).
pub fn summarize(lists: &[Dups], first: usize) -> Summary {
    let mut s = Summary::default();
    let count = |s: &mut Summary, size: u32| {
        s.clusters += 1;
        *s.sizes.entry(size as u64).or_insert(0) += 1;
        s.largest = s.largest.max(size as u64);
    };
    for (i, d) in lists.iter().enumerate() {
        for &(_, size) in &d.keepers {
            count(&mut s, size);
        }
        for r in &d.removed {
            s.removed += 1;
            if is_index(r.keeper) {
                s.matched_index += 1;
                if r.cluster == global(first + i, r.row) {
                    count(&mut s, r.size);
                }
            }
        }
    }
    s
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
