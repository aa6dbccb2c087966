//! The removal lists of the clusters phase, read by the filter and index phases:
//! `<stem>.dups` per input,
//! ```text
//! "TMDUPS01", version u32, 0u32, documents u64, removed u64, keepers u64,
//! removed rows u32 × removed (sorted), then (row u32, cluster size u32) × keepers (sorted)
//! ```

use pipeline::{Error, Location, Result, Storage};

/// Suffix of removal lists.
pub const SUFFIX: &str = ".dups";
/// The clusters phase's one unit: its marker, `_done/clusters.json` below the removal
/// lists, says they are complete (the filter and index phases read it).
pub const CLUSTERS_UNIT: &str = "clusters";
const MAGIC: &[u8; 8] = b"TMDUPS01";

/// The removal list of one input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dups {
    pub documents: u64,
    /// Rows to remove, sorted.
    pub removed: Vec<u32>,
    /// Keepers of clusters of two or more: (row, cluster size), sorted.
    pub keepers: Vec<(u32, u32)>,
}

impl Dups {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(40 + self.removed.len() * 4 + self.keepers.len() * 8);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        for v in [
            self.documents,
            self.removed.len() as u64,
            self.keepers.len() as u64,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for r in &self.removed {
            b.extend_from_slice(&r.to_le_bytes());
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
        if b.len() < 40 || &b[..8] != MAGIC {
            return Err(bad("no magic"));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default());
        let (documents, nr, nk) = (u64_at(16), u64_at(24) as usize, u64_at(32) as usize);
        if b.len() != 40 + nr * 4 + nk * 8 {
            return Err(bad("length does not match its counts"));
        }
        let removed = (0..nr).map(|i| u32_at(40 + i * 4)).collect();
        let base = 40 + nr * 4;
        let keepers = (0..nk)
            .map(|i| (u32_at(base + i * 8), u32_at(base + i * 8 + 4)))
            .collect();
        Ok(Dups {
            documents,
            removed,
            keepers,
        })
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
