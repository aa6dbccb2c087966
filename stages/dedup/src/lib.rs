//! Stage dedup: MinHash near-duplicates, identical texts and repeated URLs, found across
//! the whole corpus in four phases that each fan out over tasks:
//!
//! 1. [`signatures`]: per input file, one sorted run file (`<stem>.sig`) with a section
//!    per band (MinHash) or one section of keys (exact text, URL); see [`runs`].
//! 2. [`buckets`]: per band and hash range, a streaming k-way merge of that section of
//!    every signature file (and of an earlier run's index with `--against`); equal keys
//!    become candidate pairs (`pairs/<section>-<range>.pairs`).
//! 3. [`clusters`]: union-find over all pairs in one unit (MinHash) or the groups as
//!    they are (exact, URL); one keeper per cluster; `<stem>.dups` per input lists the
//!    rows to remove with their keeper and cluster size, and the keepers' cluster
//!    sizes. MinHash pairs past `clusters_memory_bytes` go through [`components`]:
//!    rounds of units over node partitions, shared by any number of tasks, each unit
//!    bounded in memory, with the same bytes out.
//! 4. [`filter`]: a per-document stage that drops the listed rows (`minhash_dup`,
//!    `exact_dup`, `url_dup`) and writes `<kind>_cluster_size` on what it keeps.
//!
//! [`index`] appends the kept documents' keys of a finished run to an index, as new
//! sorted runs, so a later batch can be deduplicated against it (`buckets --against`).
//!
//! Keeper rules: MinHash and exact keep the first document in input order (inputs
//! sorted by path, rows in file order); URL dedup keeps the latest `date` (ties: input
//! order); a document matching an index entry is always removed (earlier runs win).

// The phases. Each reads what an earlier one wrote through the format modules below
// (the signature listing lives with `signatures`); no phase imports a later one.
pub mod buckets;
pub mod clusters;
pub mod components;
pub mod filter;
pub mod index;
pub mod signatures;
pub mod substring;
// The file formats and shared machinery.
pub mod dups;
pub mod ids;
pub mod index_files;
pub mod merge;
pub mod minhash;
pub mod normalize;
pub mod pairs;
pub mod planted;
pub mod runs;

use serde::{Deserialize, Serialize};

pub use normalize::Shingles;
use runs::Layout;

/// What counts as a duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Near-duplicates: MinHash LSH over shingles of the normalised text.
    Minhash,
    /// Identical normalised text (128-bit xxh3).
    Exact,
    /// The same normalised URL (128-bit xxh3); the latest `date` is kept.
    Url,
}

impl Kind {
    /// Name used in drop reasons, columns and file headers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Minhash => "minhash",
            Kind::Exact => "exact",
            Kind::Url => "url",
        }
    }

    /// The drop reason of a removed document.
    pub fn reason(self) -> &'static str {
        match self {
            Kind::Minhash => "minhash_dup",
            Kind::Exact => "exact_dup",
            Kind::Url => "url_dup",
        }
    }

    /// The column the filter writes on kept documents.
    pub fn size_column(self) -> &'static str {
        match self {
            Kind::Minhash => "minhash_cluster_size",
            Kind::Exact => "exact_cluster_size",
            Kind::Url => "url_cluster_size",
        }
    }

    /// Layout of signature entries.
    pub fn layout(self) -> Layout {
        match self {
            Kind::Minhash => Layout {
                key_bytes: 8,
                rank: false,
                row: true,
            },
            Kind::Exact => Layout {
                key_bytes: 16,
                rank: false,
                row: true,
            },
            Kind::Url => Layout {
                key_bytes: 16,
                rank: true,
                row: true,
            },
        }
    }

    /// Layout of index runs: keys only.
    pub fn index_layout(self) -> Layout {
        Layout {
            rank: false,
            row: false,
            ..self.layout()
        }
    }
}

/// Configuration of all phases (one TOML file serves them all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// What counts as a duplicate.
    pub kind: Kind,
    /// MinHash bands: 14 (FineWeb: 14 buckets × 8 hashes, a 0.75 Jaccard threshold region).
    pub bands: usize,
    /// MinHash rows per band: 8 (FineWeb).
    pub rows: usize,
    /// Shingle length: 5 words (FineWeb, RefinedWeb).
    pub ngram: usize,
    /// Words, or characters for scripts written without spaces.
    pub shingles: Shingles,
    /// Seed of the permutations; signatures of runs to compare must share it.
    pub seed: u64,
    /// Documents per batch when reading inputs.
    pub batch_docs: usize,
    /// Largest ranged read of the merge phases (S3: large requests, never one per record).
    pub read_chunk_bytes: u64,
    /// Memory the read buffers of one merge may use in all (two chunks per input).
    pub merge_memory_bytes: u64,
    /// Memory of one unit of the clusters phase (MinHash). Pairs whose union-find fits
    /// it ([`components::UNION_FIND_BYTES_PER_PAIR`] each) are clustered by one unit;
    /// more run in rounds of units over partitions of the nodes (see [`components`]),
    /// each unit within it, whatever the corpus. A task runs up to `threads` units at
    /// once.
    pub clusters_memory_bytes: u64,
    /// Exact-substring dedup (`dedup.substring`, `dedup.substring_filter`).
    pub substring: substring::SubstringConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            kind: Kind::Minhash,
            bands: 14,
            rows: 8,
            ngram: 5,
            shingles: Shingles::Words,
            seed: 1,
            batch_docs: 4096,
            read_chunk_bytes: 16 << 20,
            merge_memory_bytes: 1 << 30,
            clusters_memory_bytes: 4 << 30,
            substring: substring::SubstringConfig::default(),
        }
    }
}

impl Config {
    /// Sections per signature file.
    pub fn sections(&self) -> usize {
        match self.kind {
            Kind::Minhash => self.bands,
            Kind::Exact | Kind::Url => 1,
        }
    }

    /// What changes signatures: their configuration hash.
    pub fn signature_key(&self) -> impl Serialize + '_ {
        (
            self.kind,
            self.bands,
            self.rows,
            self.ngram,
            self.shingles,
            self.seed,
        )
    }

    /// Checks the numbers.
    pub fn validate(&self) -> pipeline::Result<()> {
        let bad = |m: String| Err(pipeline::Error::Usage(m));
        if self.kind == Kind::Minhash && (self.bands == 0 || self.rows == 0 || self.bands > 255) {
            return bad(format!(
                "dedup: bands ({}) must be 1..=255 and rows ({}) at least 1",
                self.bands, self.rows
            ));
        }
        if self.ngram == 0 {
            return bad("dedup: ngram must be at least 1".into());
        }
        if self.clusters_memory_bytes < 64 << 10 {
            return bad(format!(
                "dedup: clusters_memory_bytes ({}) must be at least 64 KiB",
                self.clusters_memory_bytes
            ));
        }
        Ok(())
    }
}

/// The global number of a document: its input's position in the sorted signature
/// listing plus one, then its row. Numbers below 2³² are the index of earlier runs:
/// [`index_node`] of each run.
pub fn global(file: usize, row: u32) -> u64 {
    ((file as u64 + 1) << 32) | row as u64
}

/// The input position and row of a global number (`None` for the index).
pub fn split_global(g: u64) -> Option<(usize, u32)> {
    let file = g >> 32;
    (file > 0).then(|| ((file - 1) as usize, g as u32))
}

/// The node of run `r` of the index of earlier runs (runs in name order): what a
/// document that matches an index entry of that run is paired with.
pub fn index_node(r: u32) -> u64 {
    r as u64
}

/// Whether a global number is an index run's node (not a document of this run).
pub fn is_index(g: u64) -> bool {
    g >> 32 == 0
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    /// The modules of this crate each module names (`crate::<module>`), from the sources.
    fn imports() -> BTreeMap<String, BTreeSet<String>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).expect("src") {
            let path = entry.expect("entry").path();
            let stem = path
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .to_string();
            if stem != "lib" && stem != "main" {
                files.insert(stem, std::fs::read_to_string(&path).expect("source"));
            }
        }
        let modules: BTreeSet<String> = files.keys().cloned().collect();
        files
            .iter()
            .map(|(name, text)| {
                let used = modules
                    .iter()
                    .filter(|m| *m != name)
                    .filter(|m| {
                        text.contains(&format!("crate::{m}::"))
                            || text.contains(&format!("crate::{m}}}"))
                            || text.contains(&format!("crate::{m};"))
                    })
                    .cloned()
                    .collect();
                (name.clone(), used)
            })
            .collect()
    }

    #[test]
    fn no_module_imports_one_that_imports_it_back() {
        let graph = imports();
        assert!(
            graph["clusters"].contains("pairs"),
            "the scan finds imports"
        );
        // Depth-first search from every module: reaching it again is a circle.
        for start in graph.keys() {
            let mut stack: Vec<Vec<&str>> = vec![vec![start.as_str()]];
            while let Some(path) = stack.pop() {
                let last = path[path.len() - 1];
                for next in &graph[last] {
                    assert!(
                        next != start,
                        "import circle: {} -> {next}",
                        path.join(" -> ")
                    );
                    if !path.contains(&next.as_str()) {
                        let mut longer = path.clone();
                        longer.push(next);
                        stack.push(longer);
                    }
                }
            }
        }
    }
}
