//! Phase 3: one task turns all candidate pairs into removal lists.
//!
//! MinHash: union-find over the pairs (union by smaller global number, path halving), so
//! a cluster's keeper is its first document in input order, or the index when any member
//! matched an earlier run. Exact and URL: the groups are already complete (one key, one
//! unit), so the first of each pair is the keeper and the second is removed.
//!
//! Output, for every signature file: `<output>/<stem>.dups`
//! ```text
//! "TMDUPS01", version u32, 0u32, documents u64, removed u64, keepers u64,
//! removed rows u32 × removed (sorted), then (row u32, cluster size u32) × keepers (sorted)
//! ```
//! plus `summary.json` (cluster-size histogram) and `_done/clusters.json`.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use pipeline::cli::config_hash;
use pipeline::marker::{Marker, read_marker, write_marker};
use pipeline::{Error, Location, Result, Stats, Storage};

use crate::buckets::{FILES, FileList, PAIRS_HEADER, read_pairs_header, unit_name};
use crate::{Config, INDEX, Kind, split_global};

/// Step name in markers.
pub const STEP: &str = "dedup-clusters";
/// Suffix of removal lists.
pub const SUFFIX: &str = ".dups";
/// Name of the summary.
pub const SUMMARY: &str = "summary.json";
const MAGIC: &[u8; 8] = b"TMDUPS01";
const MARKER_STEM: &str = "clusters";

/// What the clusters phase found.
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

/// Union-find over global numbers, by smaller root.
#[derive(Debug, Default)]
pub struct UnionFind {
    parent: HashMap<u64, u64>,
}

impl UnionFind {
    /// The root of `x` (path halving).
    pub fn find(&mut self, mut x: u64) -> u64 {
        loop {
            let p = *self.parent.get(&x).unwrap_or(&x);
            if p == x {
                return x;
            }
            let gp = *self.parent.get(&p).unwrap_or(&p);
            self.parent.insert(x, gp);
            x = gp;
        }
    }

    /// Joins the sets of `a` and `b`; the smaller root becomes the root of both.
    pub fn union(&mut self, a: u64, b: u64) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            self.parent.entry(a).or_insert(a);
            return;
        }
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent.insert(hi, lo);
        self.parent.entry(lo).or_insert(lo);
    }

    /// Every element seen, with its root.
    pub fn members(&mut self) -> Vec<(u64, u64)> {
        let mut keys: Vec<u64> = self.parent.keys().copied().collect();
        keys.sort_unstable();
        keys.into_iter().map(|k| (k, self.find(k))).collect()
    }
}

/// Runs the clusters phase: the pairs at `buckets` → removal lists at `output`.
pub fn clusters(
    storage: &Storage,
    buckets: &Location,
    output: &Location,
    config: &Config,
    force: bool,
) -> Result<(Summary, bool)> {
    let start = Instant::now();
    let list: FileList =
        serde_json::from_slice(&storage.read(&buckets.join(FILES))?).map_err(|e| Error::Input {
            url: buckets.join(FILES).to_string(),
            message: e.to_string(),
        })?;
    if list.kind != config.kind {
        return Err(Error::Usage(format!(
            "{buckets} holds {} pairs; this run is configured for {}",
            list.kind.name(),
            config.kind.name()
        )));
    }
    let files_hash = list.hash();
    // Every unit of one bucket run must be there, for one listing of signatures.
    let mut found: BTreeMap<(usize, usize), (pipeline::ObjectMeta, usize)> = BTreeMap::new();
    for m in storage.list(buckets)? {
        let Some(name) = m.relative.strip_suffix(".pairs") else {
            continue;
        };
        if name.contains('/') {
            continue;
        }
        let head = storage.read_range(&m.location, 0, PAIRS_HEADER.min(m.size as usize) as u64)?;
        let mut probe = head.to_vec();
        probe.truncate(PAIRS_HEADER);
        // The length check of read_pairs_header needs the whole file: check the header only.
        let (s, r, ranges, hash) = read_pairs_header(&probe, &m.location.to_string())?;
        if hash != files_hash {
            return Err(Error::Usage(format!(
                "{}: written for another listing of signatures than {buckets}/{FILES}; rerun the buckets phase",
                m.location
            )));
        }
        if name != unit_name(s, r) {
            return Err(Error::Input {
                url: m.location.to_string(),
                message: format!("named {name} but holds unit {}", unit_name(s, r)),
            });
        }
        found.insert((s, r), (m, ranges));
    }
    let ranges: Vec<usize> = found.values().map(|(_, r)| *r).collect();
    let Some(&r0) = ranges.first() else {
        return Err(Error::Usage(format!(
            "no pairs files at {buckets}: run the buckets phase first"
        )));
    };
    if ranges.iter().any(|&r| r != r0) {
        return Err(Error::Usage(format!(
            "{buckets} mixes bucket runs with different range counts: clear it and rerun the buckets phase"
        )));
    }
    let mut missing = Vec::new();
    for s in 0..list.sections {
        for r in 0..r0 {
            if !found.contains_key(&(s, r)) {
                missing.push(unit_name(s, r));
            }
        }
    }
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "buckets phase incomplete at {buckets}: units {} missing (are all bucket tasks finished?)",
            missing.join(", ")
        )));
    }
    let inputs: Vec<(String, u64, Option<String>)> = found
        .values()
        .map(|(m, _)| (m.relative.clone(), m.size, m.etag.clone()))
        .collect();
    let hash = config_hash(STEP, &(config.kind, &files_hash, &inputs));
    let marker_loc = pipeline::marker::marker_location(output, MARKER_STEM);
    if !force
        && let Some(m) = read_marker(storage, &marker_loc)?
        && m.config_hash == hash
    {
        let summary = read_summary(storage, output)?;
        return Ok((summary, false));
    }
    pipeline::runner::begin_input(storage, output, MARKER_STEM)?;

    let mut summary = Summary {
        kind: config.kind.name().into(),
        files: list.files.len(),
        documents: list.files.iter().map(|f| f.documents).sum(),
        ..Summary::default()
    };
    let mut per_file: Vec<Dups> = list
        .files
        .iter()
        .map(|f| Dups {
            documents: f.documents,
            ..Dups::default()
        })
        .collect();
    let check = |g: u64, url: &Location| -> Result<Option<(usize, u32)>> {
        match split_global(g) {
            None => Ok(None),
            Some((f, row)) if f < list.files.len() && (row as u64) < list.files[f].documents => {
                Ok(Some((f, row)))
            }
            Some(_) => Err(Error::Input {
                url: url.to_string(),
                message: format!("pair names document {g:#x}, which no signature file holds"),
            }),
        }
    };
    let mut uf = UnionFind::default();
    let mut direct: HashMap<u64, u64> = HashMap::new();
    let mut input_bytes = 0;
    for (m, _) in found.values() {
        input_bytes += m.size;
        let mut r = BufReader::with_capacity(4 << 20, storage.open(&m.location)?);
        let mut header = [0u8; PAIRS_HEADER];
        r.read_exact(&mut header)
            .map_err(|e| Error::from_io_error("reading", &m.location, e))?;
        let mut pair = [0u8; 16];
        loop {
            match r.read_exact(&mut pair) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(Error::from_io_error("reading", &m.location, e)),
            }
            let a = u64::from_le_bytes(pair[..8].try_into().unwrap_or_default());
            let b = u64::from_le_bytes(pair[8..].try_into().unwrap_or_default());
            check(a, &m.location)?;
            check(b, &m.location)?;
            summary.pairs += 1;
            match config.kind {
                Kind::Minhash => uf.union(a, b),
                Kind::Exact | Kind::Url => {
                    *direct.entry(a).or_insert(1) += 1;
                    if let Some((f, row)) = split_global(b) {
                        per_file[f].removed.push(row);
                    }
                    if a == INDEX {
                        summary.matched_index += 1;
                    }
                }
            }
        }
    }
    let mut sizes: HashMap<u64, u64> = HashMap::new();
    match config.kind {
        Kind::Minhash => {
            for (x, root) in uf.members() {
                *sizes.entry(root).or_insert(0) += 1;
                if x != root
                    && let Some((f, row)) = split_global(x)
                {
                    per_file[f].removed.push(row);
                    if root == INDEX {
                        summary.matched_index += 1;
                    }
                }
            }
        }
        Kind::Exact | Kind::Url => sizes = direct,
    }
    for (root, size) in &sizes {
        summary.clusters += 1;
        *summary.sizes.entry(*size).or_insert(0) += 1;
        summary.largest = summary.largest.max(*size);
        if let Some((f, row)) = split_global(*root) {
            per_file[f]
                .keepers
                .push((row, (*size).min(u32::MAX as u64) as u32));
        }
    }
    let mut outputs = Vec::new();
    for (f, d) in list.files.iter().zip(per_file.iter_mut()) {
        d.removed.sort_unstable();
        d.removed.dedup();
        d.keepers.sort_unstable();
        summary.removed += d.removed.len() as u64;
        let rel = format!("{}{SUFFIX}", f.stem);
        storage.put(&output.join(&rel), &d.encode())?;
        outputs.push(rel);
    }
    let json = serde_json::to_vec_pretty(&summary).map_err(|e| Error::Usage(e.to_string()))?;
    storage.put(&output.join(SUMMARY), &json)?;
    outputs.push(SUMMARY.into());
    let mut stats = Stats {
        docs_in: summary.documents,
        docs_out: summary.documents - summary.removed,
        ..Stats::default()
    };
    if summary.removed > 0 {
        stats
            .drops
            .insert(config.kind.reason().into(), summary.removed);
    }
    stats.bytes_in = input_bytes;
    stats.seconds = start.elapsed().as_secs_f64();
    pipeline::runner::crash_point();
    let marker = Marker {
        step: STEP.into(),
        input: buckets.to_string(),
        input_size: input_bytes,
        input_etag: Some(files_hash),
        config_hash: hash,
        outputs,
        stats,
    };
    write_marker(storage, &marker_loc, &marker)?;
    Ok((summary, true))
}

/// Reads `summary.json` of a finished clusters phase.
pub fn read_summary(storage: &Storage, output: &Location) -> Result<Summary> {
    let loc = output.join(SUMMARY);
    serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
        url: loc.to_string(),
        message: e.to_string(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_find_keeps_the_smallest() {
        let mut uf = UnionFind::default();
        uf.union(5, 9);
        uf.union(9, 3);
        uf.union(20, 21);
        uf.union(21, 5);
        uf.union(40, 41);
        assert_eq!(uf.find(21), 3);
        assert_eq!(uf.find(9), 3);
        assert_eq!(uf.find(41), 40);
        let m = uf.members();
        assert_eq!(m.len(), 7);
        assert_eq!(m.iter().filter(|(x, r)| x == r).count(), 2);
    }

    #[test]
    fn dups_round_trip() {
        let d = Dups {
            documents: 10,
            removed: vec![1, 4, 7],
            keepers: vec![(0, 3), (2, 2)],
        };
        assert_eq!(Dups::decode(&d.encode(), "x").expect("decode"), d);
        assert!(Dups::decode(&d.encode()[..30], "x").is_err());
    }
}
