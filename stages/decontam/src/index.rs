//! The n-gram index: the sorted hashes of every n-gram of the evaluation sets, each with
//! the set it came from, in one file (`ngrams.bin`) beside a JSON description
//! (`index.json`). Built once by the `decontam.index` phase, loaded once per process and
//! shared by every thread of the filter.
//!
//! `ngrams.bin`, little-endian: `TMDCNT01`, n (u32), the number of sets (u32), the
//! number of n-grams (u64), each set's name (u16 length + UTF-8), the hashes (u64,
//! ascending, no repeats), then each hash's set (u16). 10 bytes per n-gram; a table of
//! 65,537 offsets by the hash's top 16 bits narrows each lookup to a few entries.

use std::collections::BTreeMap;
use std::io::Read;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use pipeline::{Error, Location, ObjectMeta, Result, Stats, Storage};
use serde::{Deserialize, Serialize};

use crate::words::ngram_hashes;

/// The index file in an index folder.
pub const INDEX_FILE: &str = "ngrams.bin";
/// Its description, beside it.
pub const MANIFEST_FILE: &str = "index.json";
const MAGIC: &[u8; 8] = b"TMDCNT01";
/// Eval files larger than this are refused (they are read whole).
const MAX_EVAL_FILE: u64 = 4 << 30;

/// A loaded index.
#[derive(Debug, Clone)]
pub struct Index {
    n: usize,
    names: Vec<String>,
    hashes: Vec<u64>,
    sets: Vec<u16>,
    /// `table[p]..table[p + 1]`: the entries whose top 16 bits are `p`.
    table: Vec<u32>,
    /// SHA-256 of the file (the filter's config hash counts the content).
    pub sha256: String,
}

impl Index {
    /// An index of `entries` (hash, set), sorted here; a hash in several sets keeps
    /// the first set.
    pub fn new(n: usize, names: Vec<String>, mut entries: Vec<(u64, u16)>) -> Index {
        entries.sort_unstable();
        entries.dedup_by_key(|e| e.0);
        let (hashes, sets) = entries.into_iter().unzip();
        let mut index = Index {
            n,
            names,
            hashes,
            sets,
            table: Vec::new(),
            sha256: String::new(),
        };
        index.build_table();
        index.sha256 = pipeline::cli::sha256_hex(&index.to_bytes());
        index
    }

    fn build_table(&mut self) {
        let mut table = vec![0u32; (1 << 16) + 1];
        for h in &self.hashes {
            table[(h >> 48) as usize + 1] += 1;
        }
        for p in 1..table.len() {
            table[p] += table[p - 1];
        }
        self.table = table;
    }

    /// n-gram length.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of n-grams.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The evaluation sets' names, by set number.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The set an n-gram hash belongs to.
    #[inline]
    pub fn lookup(&self, hash: u64) -> Option<u16> {
        let p = (hash >> 48) as usize;
        let (lo, hi) = (self.table[p] as usize, self.table[p + 1] as usize);
        let slice = &self.hashes[lo..hi];
        slice.binary_search(&hash).ok().map(|k| self.sets[lo + k])
    }

    /// Bytes in memory (hashes, sets and the table).
    pub fn memory_bytes(&self) -> usize {
        self.hashes.len() * 10 + self.table.len() * 4
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.hashes.len() * 10);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.n as u32).to_le_bytes());
        out.extend_from_slice(&(self.names.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.hashes.len() as u64).to_le_bytes());
        for name in &self.names {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
        }
        for h in &self.hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
        for s in &self.sets {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// Reads an index file; `url` names it in errors.
    pub fn from_bytes(bytes: &[u8], url: &str) -> Result<Index> {
        let bad = |m: &str| Error::Config {
            url: url.to_string(),
            message: format!("not a decontamination index: {m}"),
        };
        let mut r = bytes;
        let mut take = |k: usize| -> Result<&[u8]> {
            if r.len() < k {
                return Err(bad("truncated"));
            }
            let (a, b) = r.split_at(k);
            r = b;
            Ok(a)
        };
        if take(8)? != MAGIC {
            return Err(bad("wrong magic"));
        }
        let u32_at = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let n = u32_at(take(4)?) as usize;
        let set_count = u32_at(take(4)?) as usize;
        let mut c = [0u8; 8];
        c.copy_from_slice(take(8)?);
        let count = u64::from_le_bytes(c);
        let mut names = Vec::new();
        for _ in 0..set_count.min(u16::MAX as usize + 1) {
            let l = take(2)?;
            let len = u16::from_le_bytes([l[0], l[1]]) as usize;
            let name =
                std::str::from_utf8(take(len)?).map_err(|_| bad("a set name is not UTF-8"))?;
            names.push(name.to_string());
        }
        let count = usize::try_from(count).map_err(|_| bad("count"))?;
        if r.len() != count.checked_mul(10).ok_or_else(|| bad("count"))? {
            return Err(bad("size does not match the count"));
        }
        let (hb, sb) = r.split_at(count * 8);
        let hashes: Vec<u64> = hb
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect();
        let sets: Vec<u16> = sb
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        if hashes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad("hashes not sorted"));
        }
        if sets.iter().any(|s| *s as usize >= names.len()) {
            return Err(bad("a set number without a name"));
        }
        if n == 0 {
            return Err(bad("n is 0"));
        }
        let mut index = Index {
            n,
            names,
            hashes,
            sets,
            table: Vec::new(),
            sha256: pipeline::cli::sha256_hex(bytes),
        };
        index.build_table();
        Ok(index)
    }

    /// Loads the index of the folder `folder` (or the file itself, when it names one).
    pub fn load(storage: &Storage, folder: &str) -> Result<Index> {
        let loc = Location::parse(folder)?;
        let file = if folder.ends_with(".bin") {
            loc
        } else {
            loc.join(INDEX_FILE)
        };
        let bytes = storage.read(&file)?;
        Index::from_bytes(&bytes, &file.to_string())
    }
}

/// What `index.json` says of an index.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub n: usize,
    /// Distinct n-grams in the index.
    pub ngrams: usize,
    /// Bytes the loaded index takes.
    pub memory_bytes: usize,
    pub sets: Vec<SetSummary>,
}

/// One evaluation set of an index.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SetSummary {
    pub name: String,
    pub file: String,
    pub records: u64,
    /// Records that gave at least one n-gram.
    pub indexed: u64,
    /// Records with fewer than n words in every text.
    pub too_short: u64,
    /// n-grams it gave (before removing repeats).
    pub ngrams: u64,
}

/// Builds the index of every evaluation file in `files`: the texts of each record are
/// its `fields` joined in that order (an empty list: each string field on its own).
/// Returns the index, its description and counters (records in, indexed, dropped with
/// a reason).
pub fn build(
    storage: &Storage,
    files: &[ObjectMeta],
    n: usize,
    fields: &[String],
) -> Result<(Index, Manifest, Stats)> {
    let mut entries: Vec<(u64, u16)> = Vec::new();
    let mut names = Vec::new();
    let mut summaries = Vec::new();
    let mut stats = Stats::default();
    let mut files: Vec<&ObjectMeta> = files
        .iter()
        .filter(|m| {
            !m.relative
                .split('/')
                .any(|s| s.starts_with('_') || s.starts_with('.'))
        })
        .collect();
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    if files.len() > u16::MAX as usize {
        return Err(Error::Usage(format!(
            "{} evaluation files: at most {} per index",
            files.len(),
            u16::MAX
        )));
    }
    for meta in files {
        let url = meta.location.to_string();
        if meta.size > MAX_EVAL_FILE {
            return Err(Error::Input {
                url,
                message: format!(
                    "{} bytes: evaluation files are read whole, at most 4 GiB",
                    meta.size
                ),
            });
        }
        let set = names.len() as u16;
        let name = set_name(&meta.relative);
        let mut summary = SetSummary {
            name: name.clone(),
            file: meta.relative.clone(),
            ..SetSummary::default()
        };
        let bytes = storage.read(&meta.location)?;
        // A record's texts, or why it has none.
        let mut add = |texts: std::result::Result<Vec<String>, &str>, stats: &mut Stats| {
            summary.records += 1;
            let texts = match texts {
                Ok(t) => t,
                Err(reason) => {
                    stats.drop(reason);
                    return;
                }
            };
            if texts.is_empty() {
                stats.drop("no_text");
                return;
            }
            let mut any = false;
            for t in &texts {
                let hs = ngram_hashes(t, n);
                any |= !hs.is_empty();
                summary.ngrams += hs.len() as u64;
                entries.extend(hs.into_iter().map(|h| (h, set)));
            }
            if any {
                summary.indexed += 1;
                stats.keep();
            } else {
                summary.too_short += 1;
                stats.drop("too_short");
            }
        };
        let rel = meta.relative.as_str();
        if rel.ends_with(".parquet") {
            for batch in parquet_batches(bytes, &url)? {
                for texts in batch_texts(&batch, fields) {
                    add(Ok(texts), &mut stats);
                }
            }
        } else if let Some(kind) = jsonl_kind(rel) {
            let text = decompress(bytes, kind, &url)?;
            for line in text.split(|b| *b == b'\n') {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match serde_json::from_slice::<serde_json::Value>(line) {
                    Ok(v) => add(Ok(json_texts(&v, fields)), &mut stats),
                    Err(_) => add(Err("malformed_json"), &mut stats),
                }
            }
        } else {
            return Err(Error::Input {
                url,
                message: "an evaluation set is JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet"
                    .into(),
            });
        }
        stats.bytes_in += meta.size;
        names.push(name);
        summaries.push(summary);
    }
    let index = Index::new(n, names, entries);
    let manifest = Manifest {
        n,
        ngrams: index.len(),
        memory_bytes: index.memory_bytes(),
        sets: summaries,
    };
    Ok((index, manifest, stats))
}

/// A set's name: its file's path without the extension, `/` written `_`.
fn set_name(relative: &str) -> String {
    let stem = relative
        .trim_end_matches(".gz")
        .trim_end_matches(".zst")
        .trim_end_matches(".jsonl")
        .trim_end_matches(".parquet");
    stem.replace('/', "_")
}

#[derive(Debug, Clone, Copy)]
enum Compression {
    Plain,
    Gzip,
    Zstd,
}

fn jsonl_kind(rel: &str) -> Option<Compression> {
    if rel.ends_with(".jsonl") {
        Some(Compression::Plain)
    } else if rel.ends_with(".jsonl.gz") {
        Some(Compression::Gzip)
    } else if rel.ends_with(".jsonl.zst") {
        Some(Compression::Zstd)
    } else {
        None
    }
}

fn decompress(bytes: Vec<u8>, kind: Compression, url: &str) -> Result<Vec<u8>> {
    let cap = MAX_EVAL_FILE;
    let mut out = Vec::new();
    let r: std::io::Result<u64> = match kind {
        Compression::Plain => return Ok(bytes),
        Compression::Gzip => flate2::read::MultiGzDecoder::new(&bytes[..])
            .take(cap + 1)
            .read_to_end(&mut out)
            .map(|n| n as u64),
        Compression::Zstd => zstd::stream::read::Decoder::new(&bytes[..])
            .and_then(|d| d.take(cap + 1).read_to_end(&mut out))
            .map(|n| n as u64),
    };
    match r {
        Ok(n) if n > cap => Err(Error::Input {
            url: url.to_string(),
            message: "more than 4 GiB decompressed".into(),
        }),
        Ok(_) => Ok(out),
        Err(e) => Err(Error::Input {
            url: url.to_string(),
            message: format!("corrupt compression: {e}"),
        }),
    }
}

/// The texts of one JSON record.
fn json_texts(v: &serde_json::Value, fields: &[String]) -> Vec<String> {
    fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    let Some(obj) = v.as_object() else {
        return Vec::new();
    };
    if fields.is_empty() {
        // serde_json's map is sorted by key: the order does not depend on the file.
        let mut out = Vec::new();
        for value in obj.values() {
            strings(value, &mut out);
        }
        return out;
    }
    let mut parts = Vec::new();
    for f in fields {
        if let Some(value) = obj.get(f) {
            strings(value, &mut parts);
        }
    }
    if parts.is_empty() {
        Vec::new()
    } else {
        vec![parts.join(" ")]
    }
}

fn parquet_batches(bytes: Vec<u8>, url: &str) -> Result<Vec<RecordBatch>> {
    let bad = |e: String| Error::Input {
        url: url.to_string(),
        message: format!("unreadable Parquet: {e}"),
    };
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(bytes),
    )
    .map_err(|e| bad(e.to_string()))?;
    let reader = builder.build().map_err(|e| bad(e.to_string()))?;
    reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))
}

/// The strings of row `row` of a string or list-of-strings column.
fn cell_strings(col: &ArrayRef, row: usize, out: &mut Vec<String>) {
    if col.is_null(row) {
        return;
    }
    match col.data_type() {
        DataType::Utf8 => out.push(col.as_string::<i32>().value(row).to_string()),
        DataType::LargeUtf8 => out.push(col.as_string::<i64>().value(row).to_string()),
        DataType::Utf8View => out.push(col.as_string_view().value(row).to_string()),
        DataType::List(_) => {
            let inner = col.as_list::<i32>().value(row);
            (0..inner.len()).for_each(|k| cell_strings(&inner, k, out));
        }
        DataType::LargeList(_) => {
            let inner = col.as_list::<i64>().value(row);
            (0..inner.len()).for_each(|k| cell_strings(&inner, k, out));
        }
        _ => {}
    }
}

/// The texts of each row of a batch.
fn batch_texts(batch: &RecordBatch, fields: &[String]) -> Vec<Vec<String>> {
    let schema = batch.schema();
    let mut columns: BTreeMap<&str, &ArrayRef> = BTreeMap::new();
    for (f, col) in schema.fields().iter().zip(batch.columns()) {
        columns.insert(f.name().as_str(), col);
    }
    (0..batch.num_rows())
        .map(|row| {
            if fields.is_empty() {
                let mut out = Vec::new();
                for col in columns.values() {
                    cell_strings(col, row, &mut out);
                }
                out
            } else {
                let mut parts = Vec::new();
                for f in fields {
                    if let Some(col) = columns.get(f.as_str()) {
                        cell_strings(col, row, &mut parts);
                    }
                }
                if parts.is_empty() {
                    Vec::new()
                } else {
                    vec![parts.join(" ")]
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trip_and_lookup() {
        let entries: Vec<(u64, u16)> = (0..10_000u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), (i % 3) as u16))
            .chain([(5u64.wrapping_mul(0x9e37_79b9_7f4a_7c15), 0)])
            .collect();
        let names = vec!["a".into(), "b".into(), "c".into()];
        let index = Index::new(13, names, entries);
        assert_eq!(index.len(), 10_000);
        let bytes = index.to_bytes();
        let back = Index::from_bytes(&bytes, "mem").expect("read");
        assert_eq!(back.sha256, index.sha256);
        for i in (0..10_000u64).filter(|i| *i != 5) {
            assert_eq!(
                back.lookup(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                Some((i % 3) as u16)
            );
        }
        assert_eq!(back.lookup(12345), None);
        // A repeated hash keeps its first (lowest) set.
        assert_eq!(
            back.lookup(5u64.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            Some(0)
        );
        assert!(Index::from_bytes(&bytes[..bytes.len() - 1], "mem").is_err());
        let mut unsorted = bytes.clone();
        let at = bytes.len() - 10_000 * 10;
        unsorted[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Index::from_bytes(&unsorted, "mem").is_err());
    }

    #[test]
    fn record_texts() {
        let v: serde_json::Value = serde_json::json!({
            "question": "q text", "choices": ["a", "b"], "answer": "b", "id": 7
        });
        assert_eq!(json_texts(&v, &[]), ["b", "a", "b", "q text"]);
        assert_eq!(
            json_texts(&v, &["question".into(), "choices".into()]),
            ["q text a b"]
        );
        assert!(json_texts(&v, &["missing".into()]).is_empty());
    }
}
