//! MinHash signatures and their band hashes.
//!
//! Each shingle is hashed once with xxh3-64 (fixed seed); permutation `i` of the
//! `bands × rows` is the multiply-shift hash `((a_i · x + b_i) mod 2^64) >> 32` with
//! `a_i` odd, its parameters drawn from a SplitMix64 stream started at a fixed seed. The
//! minimum over a document's shingles is kept per permutation (32 bits); band `k` is the
//! xxh3-64 of its `rows` minima (seed `k`). Two documents with Jaccard similarity `s`
//! share at least one band with probability `1 − (1 − s^rows)^bands` (the bench measures
//! how closely we follow that).

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::normalize::{Shingles, for_each_shingle};

/// The permutations of one configuration.
#[derive(Debug, Clone)]
pub struct MinHasher {
    bands: usize,
    rows: usize,
    a: Aligned,
    b: Aligned,
}

/// 64-bit numbers starting on a 64-byte boundary, so that no vector load of them spans
/// two cache lines (the minima's loop loads them for every shingle; unaligned, it ran
/// 40% slower in one build).
#[derive(Debug)]
struct Aligned {
    buf: Vec<u64>,
    len: usize,
}

impl Aligned {
    fn new(values: &[u64]) -> Aligned {
        let mut aligned = Aligned {
            buf: vec![0; values.len() + 7],
            len: values.len(),
        };
        let skip = aligned.skip();
        aligned.buf[skip..skip + values.len()].copy_from_slice(values);
        aligned
    }

    /// Numbers before the first 64-byte boundary of the buffer.
    fn skip(&self) -> usize {
        (self.buf.as_ptr() as usize).wrapping_neg() % 64 / 8
    }

    fn get(&self) -> &[u64] {
        let skip = self.skip();
        &self.buf[skip..skip + self.len]
    }
}

impl Clone for Aligned {
    // A copy lies elsewhere: its numbers are placed for its own boundary.
    fn clone(&self) -> Aligned {
        Aligned::new(self.get())
    }
}

/// One step of a SplitMix64 stream at `state`.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fixed mix of one number: the first SplitMix64 output of the stream at `x`.
pub(crate) fn mix(x: u64) -> u64 {
    let mut state = x;
    splitmix64(&mut state)
}

impl MinHasher {
    /// `bands × rows` permutations drawn from `seed`.
    pub fn new(bands: usize, rows: usize, seed: u64) -> Self {
        let n = bands * rows;
        let mut state = seed;
        let mut a = Vec::with_capacity(n);
        let mut b = Vec::with_capacity(n);
        for _ in 0..n {
            a.push(splitmix64(&mut state) | 1);
            b.push(splitmix64(&mut state));
        }
        MinHasher {
            bands,
            rows,
            a: Aligned::new(&a),
            b: Aligned::new(&b),
        }
    }

    /// Number of bands.
    pub fn bands(&self) -> usize {
        self.bands
    }

    /// The per-permutation minima of a set of shingle hashes (all `u32::MAX` for none).
    /// The same numbers on every CPU; where it has AVX-512 or AVX2 the loop runs on
    /// their vector units (the permutations of one shingle side by side).
    pub fn minima(&self, shingles: &[u64]) -> Vec<u32> {
        let (a, b) = (self.a.get(), self.b.get());
        let mut mins = vec![u32::MAX; a.len()];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
            {
                #[allow(unsafe_code)]
                // SAFETY: the CPU has the features the function is compiled for.
                unsafe {
                    minima_avx512(a, b, shingles, &mut mins)
                };
                return mins;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                #[allow(unsafe_code)]
                // SAFETY: the CPU has the features the function is compiled for.
                unsafe {
                    minima_avx2(a, b, shingles, &mut mins)
                };
                return mins;
            }
        }
        minima_into(a, b, shingles, &mut mins);
        mins
    }

    /// Band hashes of a normalised text, or `None` when it has no shingle.
    pub fn band_hashes(&self, normalized: &str, kind: Shingles, ngram: usize) -> Option<Vec<u64>> {
        let mut hashes = Vec::new();
        for_each_shingle(normalized, kind, ngram, |h| hashes.push(h));
        if hashes.is_empty() {
            return None;
        }
        // Repeated shingles are kept: a minimum is the same over a set and over any
        // list of its members, so leaving them costs less than sorting them out.
        Some(self.bands_of(&self.minima(&hashes)))
    }

    /// Band hashes of per-permutation minima.
    pub fn bands_of(&self, mins: &[u32]) -> Vec<u64> {
        let mut bytes = Vec::with_capacity(self.rows * 4);
        (0..self.bands)
            .map(|k| {
                bytes.clear();
                for m in &mins[k * self.rows..(k + 1) * self.rows] {
                    bytes.extend_from_slice(&m.to_le_bytes());
                }
                xxh3_64_with_seed(&bytes, k as u64)
            })
            .collect()
    }
}

/// Lowers `mins[i]` to permutation `i`'s hash of each shingle: `((a_i · x + b_i) mod
/// 2^64) >> 32`. Inlined into the feature-specific copies below, which the compiler
/// vectorises for their instruction sets.
#[inline(always)]
fn minima_into(a: &[u64], b: &[u64], shingles: &[u64], mins: &mut [u32]) {
    let n = mins.len().min(a.len()).min(b.len());
    let (a, b, mins) = (&a[..n], &b[..n], &mut mins[..n]);
    for &x in shingles {
        for i in 0..n {
            let h = (a[i].wrapping_mul(x).wrapping_add(b[i]) >> 32) as u32;
            mins[i] = mins[i].min(h);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn minima_avx512(a: &[u64], b: &[u64], shingles: &[u64], mins: &mut [u32]) {
    minima_into(a, b, shingles, mins)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn minima_avx2(a: &[u64], b: &[u64], shingles: &[u64], mins: &mut [u32]) {
    minima_into(a, b, shingles, mins)
}

/// The probability that two documents of Jaccard similarity `s` share a band.
pub fn theory(s: f64, bands: usize, rows: usize) -> f64 {
    1.0 - (1.0 - s.powi(rows as i32)).powi(bands as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::normalize;

    #[test]
    fn identical_texts_share_every_band_and_unrelated_ones_none() {
        let m = MinHasher::new(14, 8, 1);
        let t = normalize(
            "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat",
        );
        let a = m.band_hashes(&t, Shingles::Words, 5).expect("bands");
        let b = m.band_hashes(&t, Shingles::Words, 5).expect("bands");
        assert_eq!(a, b);
        assert_eq!(a.len(), 14);
        let u = normalize(
            "Completely different words about databases indexes transactions and locks in storage engines",
        );
        let c = m.band_hashes(&u, Shingles::Words, 5).expect("bands");
        assert!(a.iter().zip(&c).all(|(x, y)| x != y));
        assert!(m.band_hashes("", Shingles::Words, 5).is_none());
    }

    #[test]
    fn collision_rate_of_minima_estimates_jaccard() {
        // Two sets with Jaccard 0.5: the share of equal minima must be near 0.5.
        let m = MinHasher::new(64, 8, 7);
        let a: Vec<u64> = (0..3000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let b: Vec<u64> = (1000..4000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let (ma, mb) = (m.minima(&a), m.minima(&b));
        let equal = ma.iter().zip(&mb).filter(|(x, y)| x == y).count() as f64 / ma.len() as f64;
        assert!((equal - 0.5).abs() < 0.08, "estimated {equal}");
    }

    #[test]
    fn every_instruction_set_gives_the_same_minima() {
        let m = MinHasher::new(14, 8, 3);
        let xs: Vec<u64> = (0..1000u64).map(|i| mix(i ^ 0x55)).collect();
        let (a, b) = (m.a.get(), m.b.get());
        // Each permutation's minimum, one at a time.
        let plain: Vec<u32> = (0..112)
            .map(|i| {
                xs.iter()
                    .map(|&x| (a[i].wrapping_mul(x).wrapping_add(b[i]) >> 32) as u32)
                    .min()
                    .unwrap_or(u32::MAX)
            })
            .collect();
        let mut portable = vec![u32::MAX; 112];
        minima_into(a, b, &xs, &mut portable);
        assert_eq!(portable, plain);
        assert_eq!(m.minima(&xs), portable);

        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut v = vec![u32::MAX; 112];
                #[allow(unsafe_code)]
                // SAFETY: checked just above.
                unsafe {
                    minima_avx2(a, b, &xs, &mut v)
                };
                assert_eq!(v, portable);
            }
        }
    }

    /// Repeated shingles leave the bands as they are: the minima over a list are those
    /// over its set.
    #[test]
    fn repeated_shingles_give_the_bands_of_their_set() {
        let m = MinHasher::new(14, 8, 5);
        let t = normalize("one two three four five six one two three four five six seven");
        let mut set = Vec::new();
        for_each_shingle(&t, Shingles::Words, 5, |h| set.push(h));
        let listed = set.len();
        set.sort_unstable();
        set.dedup();
        assert!(set.len() < listed, "the text repeats a shingle");
        assert_eq!(
            m.band_hashes(&t, Shingles::Words, 5),
            Some(m.bands_of(&m.minima(&set)))
        );
    }

    #[test]
    fn theory_curve() {
        assert!((theory(1.0, 14, 8) - 1.0).abs() < 1e-12);
        assert!(theory(0.0, 14, 8).abs() < 1e-12);
        let mid = theory(0.72, 14, 8);
        assert!(mid > 0.45 && mid < 0.65, "{mid}");
    }
}
