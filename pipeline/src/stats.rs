//! Per-input and per-run counters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a stage did to some inputs. Invariant: `docs_in == docs_out + sum(drops)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stats {
    pub docs_in: u64,
    pub docs_out: u64,
    /// Dropped documents by reason.
    pub drops: BTreeMap<String, u64>,
    /// Bytes of input read (the input objects' sizes).
    pub bytes_in: u64,
    /// Bytes of output written (kept shards; rejected shards are not counted).
    pub bytes_out: u64,
    /// Wall time spent, in seconds.
    pub seconds: f64,
    /// Text lengths of the documents a stage looked at (after it ran: extracted text),
    /// as a histogram: bucket `k` counts texts of `2^(k-1)` to `2^k - 1` bytes (0: empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub length_in: BTreeMap<u8, u64>,
    /// The same for the documents it kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub length_out: BTreeMap<u8, u64>,
    /// Events stages counted without dropping a document, by name (`pii_email`: e-mail
    /// addresses replaced), over every document the stages looked at.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// Measurements of a unit, by name (the train phase's `train_loss`, `val_loss`):
    /// not summed, the later one stands.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, f64>,
    /// Seconds spent in each part of a step, summed over its threads, in the step's
    /// order: `read` (reading and decoding the input), each stage by name, `write`
    /// (the output shards). Where a step's CPU time goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stage_seconds: Vec<(String, f64)>,
    /// Histograms of the values stages measured (a classifier's score), by measure
    /// name, over every document that had one: bins the stage declared
    /// ([`crate::runner::Measure`]), summed over inputs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub histograms: BTreeMap<String, Histogram>,
    /// The documents that had a language when the step judged them, by language (its
    /// label with the script where known: `cmn_Hani`, else the code: `en`): in, kept
    /// and dropped by reason, adding up as the totals do. Empty for steps before
    /// language ID.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub languages: BTreeMap<String, LanguageStats>,
}

/// One language's share of a step's documents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanguageStats {
    pub docs_in: u64,
    pub docs_out: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub drops: BTreeMap<String, u64>,
}

impl LanguageStats {
    /// Counts one document: kept, or dropped for `reason`.
    pub fn add(&mut self, dropped: Option<&str>) {
        self.docs_in += 1;
        match dropped {
            None => self.docs_out += 1,
            Some(reason) => *self.drops.entry(reason.to_string()).or_default() += 1,
        }
    }

    fn merge(&mut self, other: &LanguageStats) {
        self.docs_in += other.docs_in;
        self.docs_out += other.docs_out;
        for (reason, n) in &other.drops {
            *self.drops.entry(reason.clone()).or_default() += n;
        }
    }
}

/// Counts in equal bins over `[lo, hi]` (values outside in the edge bins).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Histogram {
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
}

impl Histogram {
    /// An empty histogram of `bins` bins.
    pub fn new(lo: f64, hi: f64, bins: usize) -> Histogram {
        Histogram {
            lo,
            hi,
            counts: vec![0; bins.max(1)],
        }
    }

    /// Counts one value.
    pub fn add(&mut self, x: f64) {
        let i = crate::sketch::bin(x, self.lo, self.hi, self.counts.len());
        self.counts[i] += 1;
    }

    /// Values counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another histogram's counts; one of other bins replaces nothing and is
    /// kept apart (`false`).
    pub fn merge(&mut self, other: &Histogram) -> bool {
        if self.lo != other.lo || self.hi != other.hi || self.counts.len() != other.counts.len() {
            return false;
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        true
    }
}

/// Records a reader read (a count in [`Stats::counts`]).
pub const WARC_RECORDS: &str = "warc_records";
/// Records read that hold no page (`warcinfo`, `request`, `metadata`): not documents.
pub const WARC_RECORDS_OTHER: &str = "warc_records_other";
/// Decompressed bytes a reader read.
pub const WARC_BYTES: &str = "warc_bytes";

/// The histogram bucket of a text of `bytes` bytes (see [`Stats::length_in`]).
pub fn length_bucket(bytes: usize) -> u8 {
    (usize::BITS - bytes.leading_zeros()) as u8
}

impl Stats {
    /// Counts one dropped document.
    pub fn drop(&mut self, reason: &str) {
        self.drop_n(reason, 1);
    }

    /// Counts `n` dropped documents.
    pub fn drop_n(&mut self, reason: &str, n: u64) {
        self.docs_in += n;
        *self.drops.entry(reason.to_string()).or_default() += n;
    }

    /// Counts one kept document.
    pub fn keep(&mut self) {
        self.docs_in += 1;
        self.docs_out += 1;
    }

    /// Total dropped documents.
    pub fn dropped(&self) -> u64 {
        self.drops.values().sum()
    }

    /// Whether the counts add up.
    pub fn balanced(&self) -> bool {
        self.docs_in == self.docs_out + self.dropped()
    }

    /// Whether a reader of records accounted for all it read (the counts a WARC reader
    /// keeps; `Ok` when there are none): records read = documents in + records that
    /// hold no page, and decompressed bytes read = bytes of records read as documents +
    /// of dropped records + of records that hold no page + bytes skipped. `Err` says
    /// what does not add up.
    pub fn records_balanced(&self) -> Result<(), String> {
        let count = |name: &str| self.counts.get(name).copied().unwrap_or(0);
        if !self.counts.contains_key(WARC_RECORDS) && !self.counts.contains_key(WARC_BYTES) {
            return Ok(());
        }
        let other = count(WARC_RECORDS_OTHER);
        if count(WARC_RECORDS) != self.docs_in + other {
            return Err(format!(
                "{} records read, but {} documents in and {other} records that are not pages",
                count(WARC_RECORDS),
                self.docs_in
            ));
        }
        let parts = [
            "warc_bytes_documents",
            "warc_bytes_dropped",
            "warc_bytes_other",
            "resync_skipped_bytes",
        ];
        let sum: u64 = parts.iter().map(|p| count(p)).sum();
        if count(WARC_BYTES) != sum {
            return Err(format!(
                "{} bytes read, but {sum} in documents, dropped and other records and skipped ({})",
                count(WARC_BYTES),
                parts
                    .iter()
                    .map(|p| format!("{p} {}", count(p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(())
    }

    /// "records read N: pages M, not pages K" when a reader counted records: the
    /// documents in are the pages; `warcinfo`, `request` and `metadata` records are
    /// counted apart.
    pub fn records_line(&self) -> Option<String> {
        let records = self.counts.get(WARC_RECORDS)?;
        let other = self.counts.get(WARC_RECORDS_OTHER).copied().unwrap_or(0);
        Some(format!(
            "records read {records}: pages {}, not pages {other}",
            self.docs_in
        ))
    }

    /// Adds another set of counters into this one.
    pub fn merge(&mut self, other: &Stats) {
        self.docs_in += other.docs_in;
        self.docs_out += other.docs_out;
        for (reason, n) in &other.drops {
            *self.drops.entry(reason.clone()).or_default() += n;
        }
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.seconds += other.seconds;
        for (k, n) in &other.length_in {
            *self.length_in.entry(*k).or_default() += n;
        }
        for (k, n) in &other.length_out {
            *self.length_out.entry(*k).or_default() += n;
        }
        for (k, n) in &other.counts {
            *self.counts.entry(k.clone()).or_default() += n;
        }
        for (k, v) in &other.values {
            self.values.insert(k.clone(), *v);
        }
        for (name, secs) in &other.stage_seconds {
            self.add_stage_seconds(name, *secs);
        }
        for (language, l) in &other.languages {
            self.languages.entry(language.clone()).or_default().merge(l);
        }
        for (name, h) in &other.histograms {
            match self.histograms.get_mut(name) {
                Some(mine) => {
                    // Bins changed between runs: the newer ones stand.
                    if !mine.merge(h) {
                        *mine = h.clone();
                    }
                }
                None => {
                    self.histograms.insert(name.clone(), h.clone());
                }
            }
        }
    }

    /// Adds `secs` to part `name` of [`Stats::stage_seconds`].
    pub fn add_stage_seconds(&mut self, name: &str, secs: f64) {
        match self.stage_seconds.iter_mut().find(|(n, _)| n == name) {
            Some((_, total)) => *total += secs,
            None => self.stage_seconds.push((name.to_string(), secs)),
        }
    }

    /// "time: read 20%, extract 45%, … (3.1 s over threads)" when a step timed its
    /// parts: each part's share of the time in them.
    pub fn stage_time_line(&self) -> Option<String> {
        let total: f64 = self.stage_seconds.iter().map(|(_, s)| s).sum();
        if self.stage_seconds.is_empty() || total <= 0.0 {
            return None;
        }
        let parts: Vec<String> = self
            .stage_seconds
            .iter()
            .map(|(name, secs)| format!("{name} {:.1}%", 100.0 * secs / total))
            .collect();
        Some(format!(
            "time: {} ({total:.2} s over threads)",
            parts.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_buckets() {
        assert_eq!(length_bucket(0), 0);
        assert_eq!(length_bucket(1), 1);
        assert_eq!(length_bucket(1023), 10);
        assert_eq!(length_bucket(1024), 11);
    }

    #[test]
    fn counts_add_up() {
        let mut a = Stats::default();
        a.keep();
        a.drop("short");
        a.drop("short");
        let mut b = Stats::default();
        b.drop("lang");
        b.keep();
        a.merge(&b);
        assert_eq!((a.docs_in, a.docs_out, a.dropped()), (5, 2, 3));
        assert_eq!(a.drops.get("short"), Some(&2));
        assert!(a.balanced());
    }

    #[test]
    fn stage_times_add_up_in_step_order() {
        let mut a = Stats::default();
        a.add_stage_seconds("read", 1.0);
        a.add_stage_seconds("extract", 2.0);
        a.add_stage_seconds("write", 1.0);
        let mut b = Stats::default();
        b.add_stage_seconds("read", 1.0);
        b.add_stage_seconds("extract", 3.0);
        b.add_stage_seconds("write", 2.0);
        a.merge(&b);
        assert_eq!(
            a.stage_time_line().as_deref(),
            Some("time: read 20.0%, extract 50.0%, write 30.0% (10.00 s over threads)")
        );
        assert_eq!(Stats::default().stage_time_line(), None);
    }
}
