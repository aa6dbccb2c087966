//! Signature files with planted clusters, written directly (no text), so that the
//! buckets and clusters phases can be tested and measured at 10^8 documents and more,
//! against a known truth.
//!
//! Documents are numbered `0..documents`; document `d` is row `d % per_file` of input
//! `part-<d / per_file>.sig`, so its global number grows with `d`. Cluster members are
//! spread over the whole corpus by a seeded permutation; each cluster is a chain (member
//! `k` shares one band key with member `k + 1`, the band turning with `k`, so a long
//! chain crosses every band and many inputs) or a star (member 0 shares a band key with
//! every other member). All other keys are distinct. Every planted cluster is one
//! component whose keeper is its smallest document, which [`Planted::expected`] gives.

use std::ops::Range;

use rayon::prelude::*;

use pipeline::{Location, Result, Storage};

use crate::dups::{Dups, Removed};
use crate::ids::IdsWriter;
use crate::minhash::mix;
use crate::runs::{Entry, RunWriter};
use crate::signatures::SUFFIX;
use crate::{Config, global};

/// How a cluster's members share keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Chain,
    Star,
}

/// One planted cluster: members `slots` of the permutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub shape: Shape,
    pub slots: Range<u64>,
}

/// A planted corpus: its size and clusters.
#[derive(Debug, Clone)]
pub struct Planted {
    pub documents: u64,
    pub per_file: u64,
    pub bands: usize,
    pub seed: u64,
    pub clusters: Vec<Cluster>,
}

impl Planted {
    /// The standard mix for `documents` documents: a tenth of them in clusters, most of
    /// 2 to 10 members, some chains and stars of 10 to 1,000 members, and two giants
    /// (a chain and a star, each a thousandth of the corpus, at least 50 members).
    pub fn standard(documents: u64, per_file: u64, bands: usize, seed: u64) -> Planted {
        let mut clusters = Vec::new();
        let budget = documents / 10;
        let mut at = 0u64;
        let mut n = 0u64;
        let mut push = |shape: Shape, size: u64, at: &mut u64| {
            if size >= 2 && *at + size <= budget {
                clusters.push(Cluster {
                    shape,
                    slots: *at..*at + size,
                });
                *at += size;
            }
        };
        let giant = (documents / 1000).max(50);
        push(Shape::Chain, giant, &mut at);
        push(Shape::Star, giant, &mut at);
        while at < budget {
            let r = mix(seed ^ n.wrapping_mul(0x2545_f491_4f6c_dd1d));
            n += 1;
            let shape = if r & 1 == 0 {
                Shape::Chain
            } else {
                Shape::Star
            };
            let size = if (r >> 8).is_multiple_of(20) {
                10 + (r >> 16) % 991
            } else {
                2 + (r >> 16) % 9
            };
            let size = size.min(budget - at);
            if size < 2 {
                break;
            }
            push(shape, size, &mut at);
        }
        Planted {
            documents,
            per_file: per_file.max(1),
            bands: bands.max(2),
            seed,
            clusters,
        }
    }

    /// Documents in planted clusters.
    pub fn clustered(&self) -> u64 {
        self.clusters.last().map_or(0, |c| c.slots.end)
    }

    /// Inputs.
    pub fn files(&self) -> u64 {
        self.documents.div_ceil(self.per_file)
    }

    /// The document at permutation slot `i` (a seeded bijection of `0..documents`: a
    /// four-round Feistel network on the next power of four, walked until it lands
    /// inside).
    pub fn document(&self, i: u64) -> u64 {
        self.walk(i, false)
    }

    /// The permutation slot of document `d` (the inverse of [`Planted::document`]).
    pub fn slot(&self, d: u64) -> u64 {
        self.walk(d, true)
    }

    /// The Feistel network (or its inverse) applied until the value lands inside
    /// `0..documents` (cycle walking).
    fn walk(&self, mut x: u64, inverse: bool) -> u64 {
        loop {
            x = self.feistel(x, inverse);
            if x < self.documents {
                return x;
            }
        }
    }

    fn half_bits(&self) -> u32 {
        let bits = 64 - self.documents.max(2).saturating_sub(1).leading_zeros();
        bits.div_ceil(2).max(1)
    }

    fn feistel(&self, x: u64, inverse: bool) -> u64 {
        let h = self.half_bits();
        let mask = (1u64 << h) - 1;
        let (mut l, mut r) = (x >> h, x & mask);
        let round = |k: u64, v: u64| mix(self.seed ^ (k << 56) ^ v) & mask;
        if inverse {
            for k in (0..4).rev() {
                let prev_r = l;
                l = r ^ round(k, prev_r);
                r = prev_r;
            }
        } else {
            for k in 0..4 {
                let next = l ^ round(k, r);
                l = r;
                r = next;
            }
        }
        (l << h) | r
    }

    /// The cluster holding slot `i`, if any.
    fn cluster_of(&self, i: u64) -> Option<(usize, &Cluster)> {
        if i >= self.clustered() {
            return None;
        }
        let at = self.clusters.partition_point(|c| c.slots.end <= i);
        self.clusters.get(at).map(|c| (at, c))
    }

    /// The band keys of document `d`.
    pub fn keys(&self, d: u64) -> Vec<u64> {
        let b = self.bands as u64;
        // Distinct keys: the top bit set for documents' own keys, clear for shared ones.
        let own = |band: u64| mix(self.seed ^ mix(d ^ (band << 48))) | (1 << 63);
        let shared = |cluster: usize, link: u64| {
            mix(self.seed.wrapping_add(1) ^ mix((cluster as u64) << 32 ^ link)) & !(1 << 63)
        };
        let mut keys: Vec<u64> = (0..b).map(own).collect();
        let slot = self.slot(d);
        if let Some((j, c)) = self.cluster_of(slot) {
            let k = slot - c.slots.start;
            let size = c.slots.end - c.slots.start;
            match c.shape {
                Shape::Chain => {
                    if k > 0 {
                        keys[((k - 1) % b) as usize] = shared(j, k - 1);
                    }
                    if k + 1 < size {
                        keys[(k % b) as usize] = shared(j, k);
                    }
                }
                Shape::Star => {
                    if k == 0 {
                        for (band, key) in keys.iter_mut().enumerate() {
                            *key = shared(j, band as u64);
                        }
                    } else {
                        let band = (k - 1) % b;
                        keys[band as usize] = shared(j, band);
                    }
                }
            }
        }
        keys
    }

    /// Writes the signature files below `out` (`part-<n>.sig`, MinHash layout), inputs
    /// in parallel on the current thread pool; returns the bytes written.
    pub fn write(&self, storage: &Storage, out: &Location, config: &Config) -> Result<u64> {
        if config.bands != self.bands {
            return Err(pipeline::Error::Usage(format!(
                "planted corpus has {} bands, the configuration {}",
                self.bands, config.bands
            )));
        }
        let sizes: Vec<u64> = (0..self.files())
            .into_par_iter()
            .map(|f| self.write_file(storage, out, config, f))
            .collect::<Result<_>>()?;
        Ok(sizes.iter().sum())
    }

    fn write_file(
        &self,
        storage: &Storage,
        out: &Location,
        config: &Config,
        f: u64,
    ) -> Result<u64> {
        let first = f * self.per_file;
        let rows = self.per_file.min(self.documents - first);
        let mut sections: Vec<Vec<Entry>> = vec![Vec::with_capacity(rows as usize); self.bands];
        for row in 0..rows {
            for (band, key) in self.keys(first + row).into_iter().enumerate() {
                sections[band].push(Entry {
                    key: (key as u128) << 64,
                    rank: 0,
                    row: row as u32,
                });
            }
        }
        let mut ids = IdsWriter::default();
        for row in 0..rows {
            ids.push(&Self::id(first + row));
        }
        let ids = ids.finish();
        storage.put(&crate::ids::location(out, &format!("part-{f:06}")), &ids)?;
        let loc = out.join(&format!("part-{f:06}{SUFFIX}"));
        let mut w = RunWriter::create(storage, &loc, config.kind.layout())?;
        for s in &mut sections {
            s.sort_unstable();
            w.section();
            for e in s.iter() {
                w.push(e)?;
            }
        }
        Ok(w.finish(rows)? + ids.len() as u64)
    }

    /// The id of document `d`.
    pub fn id(d: u64) -> String {
        format!("planted-{d}")
    }

    /// Each cluster's keeper: its smallest document.
    pub fn keepers(&self) -> Vec<u64> {
        self.clusters
            .par_iter()
            .map(|c| c.slots.clone().map(|i| self.document(i)).min().unwrap_or(0))
            .collect()
    }

    /// The removal lists the clusters phase must write for input `f` (`keepers`: from
    /// [`Planted::keepers`]).
    pub fn expected(&self, keepers: &[u64], f: u64) -> Dups {
        let first = f * self.per_file;
        let rows = self.per_file.min(self.documents - first);
        let mut d = Dups {
            documents: rows,
            ..Dups::default()
        };
        for row in 0..rows {
            let doc = first + row;
            let Some((j, c)) = self.cluster_of(self.slot(doc)) else {
                continue;
            };
            let size = (c.slots.end - c.slots.start).min(u32::MAX as u64) as u32;
            let keeper = keepers.get(j).copied().unwrap_or(doc);
            let place = |x: u64| global((x / self.per_file) as usize, (x % self.per_file) as u32);
            if keeper == doc {
                d.keepers.push((row as u32, size));
            } else {
                d.removed.push(Removed {
                    row: row as u32,
                    size,
                    keeper: place(keeper),
                    cluster: place(keeper),
                });
                d.names.push((place(keeper), Self::id(keeper)));
            }
        }
        d.names.sort_unstable();
        d.names.dedup();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 17, 1000, 4097] {
            let p = Planted::standard(n, 100, 14, 7);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let d = p.document(i);
                assert!(!seen[d as usize], "{n}: {d} twice");
                seen[d as usize] = true;
                assert_eq!(p.slot(d), i);
            }
        }
    }

    #[test]
    fn the_standard_mix_plants_a_tenth() {
        let p = Planted::standard(100_000, 1000, 14, 1);
        assert!(p.clustered() <= 10_000 && p.clustered() > 9_000);
        let size = |c: &Cluster| c.slots.end - c.slots.start;
        assert_eq!((size(&p.clusters[0]), size(&p.clusters[1])), (100, 100));
        assert!(p.clusters.iter().all(|c| (2..=1000).contains(&size(c))));
        assert!(p.clusters.iter().any(|c| c.shape == Shape::Star));
        assert!(p.clusters.iter().any(|c| c.shape == Shape::Chain));
    }
}
