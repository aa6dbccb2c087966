//! A mergeable quantile summary of many values: a KLL sketch (Karnin, Lang and Liberty,
//! "Optimal Quantile Approximation in Streams", FOCS 2016) with its coin flips drawn
//! from a seeded generator, so that the same values added in the same order, and the
//! same sketches merged in the same order, give the same bytes.
//!
//! Level `h` holds values of weight `2^h`. When the sketch holds more than its
//! capacity, the lowest level over its own capacity is sorted and compacted: every
//! other value (the odd or the even ones, by a coin) moves up a level with twice the
//! weight. One compaction of weight `w` moves the estimated rank of any value by 0 or
//! ±`w`, with equal chance of either sign, so the error of a rank is a sum of
//! independent bounded terms; the sketch keeps `Σ w²` over every compaction it and the
//! sketches merged into it did, and [`Sketch::rank_error`] is Hoeffding's bound at 99%
//! confidence, `sqrt(2 ln(2/0.01) Σ w²) / n`. A sketch that never compacted is exact.

use crate::error::{Error, Result};

/// Capacity of the top level: the largest sketch holds about `3 k` values (12 KB per
/// 1,000 values of `k`), and at `k = 4096` the rank error bound of 10^7 values is
/// about 0.02% (tested).
pub const DEFAULT_K: u32 = 4096;
/// Ratio of a level's capacity to the level above it (KLL's `c`).
const SHRINK: f64 = 2.0 / 3.0;
/// The smallest capacity of a level.
const MIN_LEVEL: usize = 8;
/// `2 ln(2 / δ)` for δ = 0.01: Hoeffding's bound at 99% confidence.
const HOEFFDING_99: f64 = 10.596_634_733_096_073;
const MAGIC: &[u8; 8] = b"TMKLL\x001\n";

/// A quantile sketch of `f32` values (NaN is not a value: [`Sketch::add`] counts it
/// apart).
#[derive(Debug, Clone, PartialEq)]
pub struct Sketch {
    k: u32,
    /// Values added (the total weight).
    n: u64,
    /// NaN values seen (not in the sketch).
    nan: u64,
    /// Σ w² over every compaction.
    variance: f64,
    /// State of the coin flips (splitmix64).
    state: u64,
    min: f32,
    max: f32,
    levels: Vec<Vec<f32>>,
}

impl Sketch {
    /// An empty sketch whose coin flips start from `seed`.
    pub fn new(k: u32, seed: u64) -> Sketch {
        Sketch {
            k: k.max(MIN_LEVEL as u32),
            n: 0,
            nan: 0,
            variance: 0.0,
            state: seed,
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            levels: vec![Vec::new()],
        }
    }

    /// Values added (NaN not counted).
    pub fn count(&self) -> u64 {
        self.n
    }

    /// NaN values offered to [`Sketch::add`].
    pub fn nan_count(&self) -> u64 {
        self.nan
    }

    /// The smallest and largest value added, if any.
    pub fn range(&self) -> Option<(f32, f32)> {
        (self.n > 0).then_some((self.min, self.max))
    }

    /// Adds one value.
    pub fn add(&mut self, x: f32) {
        if x.is_nan() {
            self.nan += 1;
            return;
        }
        self.n += 1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        self.levels[0].push(x);
        self.compress();
    }

    /// Adds another sketch's values (its compactions' error included).
    pub fn merge(&mut self, other: &Sketch) {
        if other.n == 0 && other.nan == 0 {
            return;
        }
        while self.levels.len() < other.levels.len() {
            self.levels.push(Vec::new());
        }
        for (mine, theirs) in self.levels.iter_mut().zip(&other.levels) {
            mine.extend_from_slice(theirs);
        }
        self.n += other.n;
        self.nan += other.nan;
        self.variance += other.variance;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.compress();
    }

    fn capacity(&self, level: usize) -> usize {
        let depth = self.levels.len() - 1 - level;
        ((f64::from(self.k) * SHRINK.powi(depth as i32)).ceil() as usize).max(MIN_LEVEL)
    }

    fn held(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    fn total_capacity(&self) -> usize {
        (0..self.levels.len()).map(|h| self.capacity(h)).sum()
    }

    fn coin(&mut self) -> usize {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) & 1) as usize
    }

    fn compress(&mut self) {
        while self.held() > self.total_capacity() {
            let Some(h) =
                (0..self.levels.len()).find(|&h| self.levels[h].len() >= self.capacity(h))
            else {
                return;
            };
            if h + 1 == self.levels.len() {
                self.levels.push(Vec::new());
            }
            let offset = self.coin();
            let mut level = std::mem::take(&mut self.levels[h]);
            level.sort_unstable_by(f32::total_cmp);
            // An odd value out stays at its level; the rest pair up.
            let keep = if level.len() % 2 == 1 {
                level.pop()
            } else {
                None
            };
            let promoted: Vec<f32> = level.iter().skip(offset).step_by(2).copied().collect();
            self.levels[h + 1].extend(promoted);
            self.levels[h].extend(keep);
            let w = (1u64 << h) as f64;
            self.variance += w * w;
        }
    }

    /// The values held, with their weights, sorted by value.
    fn weighted(&self) -> Vec<(f32, u64)> {
        let mut all: Vec<(f32, u64)> = self
            .levels
            .iter()
            .enumerate()
            .flat_map(|(h, l)| l.iter().map(move |&x| (x, 1u64 << h)))
            .collect();
        all.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        all
    }

    /// The value at normalised rank `q` in `[0, 1]`: the smallest value with at least
    /// `q n` values (by the sketch's weights) at or below it. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f32> {
        let target = (q.clamp(0.0, 1.0) * self.n as f64).ceil().max(1.0) as u64;
        self.at_rank(target)
    }

    /// The `r`-th smallest value (1-based, by the sketch's weights): the smallest
    /// value with at least `r` values at or below it. `None` when empty.
    pub fn at_rank(&self, r: u64) -> Option<f32> {
        if self.n == 0 {
            return None;
        }
        let target = r.clamp(1, self.n);
        let mut seen = 0u64;
        let all = self.weighted();
        for &(x, w) in &all {
            seen += w;
            if seen >= target {
                return Some(x);
            }
        }
        all.last().map(|p| p.0)
    }

    /// The estimated share of values below `x`.
    pub fn rank(&self, x: f32) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let below: u64 = self
            .weighted()
            .iter()
            .take_while(|p| p.0 < x)
            .map(|p| p.1)
            .sum();
        below as f64 / self.n as f64
    }

    /// Counts of values in `bins` equal bins over `[lo, hi]` (values outside fall in
    /// the first or last bin), by the sketch's weights.
    pub fn histogram(&self, lo: f64, hi: f64, bins: usize) -> Vec<u64> {
        let bins = bins.max(1);
        let mut out = vec![0u64; bins];
        for (h, level) in self.levels.iter().enumerate() {
            for &x in level {
                out[bin(f64::from(x), lo, hi, bins)] += 1u64 << h;
            }
        }
        out
    }

    /// Hoeffding's bound at 99% confidence on the error of a normalised rank (0 for a
    /// sketch that never compacted: its ranks are exact).
    pub fn rank_error(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        (HOEFFDING_99 * self.variance).sqrt() / self.n as f64
    }

    /// The sketch as bytes (little endian): magic, `k`, `n`, NaNs, `Σ w²`, state,
    /// min, max, levels, then each level's length and values.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 4 * self.held());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.k.to_le_bytes());
        out.extend_from_slice(&self.n.to_le_bytes());
        out.extend_from_slice(&self.nan.to_le_bytes());
        out.extend_from_slice(&self.variance.to_le_bytes());
        out.extend_from_slice(&self.state.to_le_bytes());
        out.extend_from_slice(&self.min.to_le_bytes());
        out.extend_from_slice(&self.max.to_le_bytes());
        out.extend_from_slice(&(self.levels.len() as u32).to_le_bytes());
        for l in &self.levels {
            out.extend_from_slice(&(l.len() as u32).to_le_bytes());
            for x in l {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        out
    }

    /// Reads [`Sketch::to_bytes`]'s form; `url` names the file in errors.
    pub fn from_bytes(bytes: &[u8], url: &str) -> Result<Sketch> {
        let bad = |m: &str| Error::Input {
            url: url.to_string(),
            message: format!("not a quantile sketch: {m}"),
        };
        let mut r = Reader { bytes, at: 0 };
        if r.take(MAGIC.len()).ok_or_else(|| bad("too short"))? != MAGIC {
            return Err(bad("wrong magic"));
        }
        let mut u32_ = || r.array::<4>().map(u32::from_le_bytes);
        let k = u32_().ok_or_else(|| bad("truncated"))?;
        let n = r.array::<8>().map(u64::from_le_bytes);
        let nan = r.array::<8>().map(u64::from_le_bytes);
        let variance = r.array::<8>().map(f64::from_le_bytes);
        let state = r.array::<8>().map(u64::from_le_bytes);
        let min = r.array::<4>().map(f32::from_le_bytes);
        let max = r.array::<4>().map(f32::from_le_bytes);
        let levels = r.array::<4>().map(u32::from_le_bytes);
        let (Some(n), Some(nan), Some(variance), Some(state), Some(min), Some(max), Some(levels)) =
            (n, nan, variance, state, min, max, levels)
        else {
            return Err(bad("truncated header"));
        };
        if levels == 0 || levels > 64 {
            return Err(bad("bad level count"));
        }
        let mut sketch = Sketch {
            k,
            n,
            nan,
            variance,
            state,
            min,
            max,
            levels: Vec::with_capacity(levels as usize),
        };
        let mut weight = 0u128;
        for h in 0..levels as usize {
            let len = r
                .array::<4>()
                .map(u32::from_le_bytes)
                .ok_or_else(|| bad("truncated level"))? as usize;
            let raw = r.take(len * 4).ok_or_else(|| bad("truncated level"))?;
            let level: Vec<f32> = raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            weight += (len as u128) << h;
            sketch.levels.push(level);
        }
        if r.at != bytes.len() {
            return Err(bad("trailing bytes"));
        }
        if weight != u128::from(n) {
            return Err(bad("weights do not add up to the count"));
        }
        Ok(sketch)
    }
}

/// The bin of `x` among `bins` equal bins over `[lo, hi]`, values outside in the edge
/// bins.
pub fn bin(x: f64, lo: f64, hi: f64, bins: usize) -> usize {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || x.is_nan() {
        return 0;
    }
    let i = ((x - lo) / (hi - lo) * bins as f64).floor();
    (i.max(0.0) as usize).min(bins - 1)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n).map(|_| rng.f32()).collect()
    }

    #[test]
    fn small_sketches_are_exact() {
        let mut s = Sketch::new(64, 1);
        for i in 0..100 {
            s.add(i as f32);
        }
        s.add(f32::NAN);
        assert_eq!((s.count(), s.nan_count()), (100, 1));
        assert!(s.held() <= s.total_capacity());
        // 100 values in a sketch of k = 64 compacted; its bound says how far off.
        let q = s.quantile(0.5).expect("a value");
        assert!(
            (q - 49.0).abs() <= (s.rank_error() * 100.0) as f32 + 1.0,
            "{q}"
        );
        let mut exact = Sketch::new(4096, 1);
        for i in 0..100 {
            exact.add(i as f32);
        }
        assert_eq!(exact.rank_error(), 0.0);
        assert_eq!(exact.quantile(0.5), Some(49.0));
        assert_eq!(exact.quantile(0.9), Some(89.0));
        assert_eq!(exact.quantile(1.0), Some(99.0));
        assert_eq!(exact.rank(50.0), 0.5);
        assert_eq!(exact.histogram(0.0, 100.0, 4), vec![25, 25, 25, 25]);
    }

    #[test]
    fn bytes_round_trip_and_refuse_damage() {
        let mut s = Sketch::new(32, 7);
        for x in values(1000, 3) {
            s.add(x);
        }
        let bytes = s.to_bytes();
        assert_eq!(Sketch::from_bytes(&bytes, "x").expect("read"), s);
        assert!(Sketch::from_bytes(&bytes[..bytes.len() - 1], "x").is_err());
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(Sketch::from_bytes(&extra, "x").is_err());
        assert!(Sketch::from_bytes(b"nonsense", "x").is_err());
    }

    #[test]
    fn merging_in_the_same_order_gives_the_same_bytes() {
        let parts: Vec<Sketch> = (0..10)
            .map(|i| {
                let mut s = Sketch::new(64, i);
                for x in values(500 + i as usize * 37, i) {
                    s.add(x);
                }
                s
            })
            .collect();
        let merged = |order: &[usize]| {
            let mut m = Sketch::new(64, 99);
            for &i in order {
                m.merge(&parts[i]);
            }
            m
        };
        let order: Vec<usize> = (0..10).collect();
        assert_eq!(merged(&order).to_bytes(), merged(&order).to_bytes());
        assert_eq!(
            merged(&order).count(),
            parts.iter().map(Sketch::count).sum::<u64>()
        );
    }

    #[test]
    fn bins_clamp() {
        assert_eq!(bin(-1.0, 0.0, 1.0, 10), 0);
        assert_eq!(bin(0.05, 0.0, 1.0, 10), 0);
        assert_eq!(bin(0.95, 0.0, 1.0, 10), 9);
        assert_eq!(bin(1.0, 0.0, 1.0, 10), 9);
        assert_eq!(bin(7.0, 0.0, 1.0, 10), 9);
    }
}
