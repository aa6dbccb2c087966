//! Where documents come from: a [`Source`] turns one input file into batches of
//! documents. [`DocumentSource`] reads Parquet shards and JSONL; the extract stage
//! brings its own source for WARC files.

use std::sync::Arc;

use arrow_array::RecordBatch;

use crate::document::Document;
use crate::error::Result;
use crate::shard::{JsonlReader, ParquetReader};
use crate::storage::{ObjectMeta, Storage};

/// A batch of documents read from one input.
#[derive(Debug, Default)]
pub struct DocBatch {
    /// The documents, in input order.
    pub docs: Vec<Document>,
    /// Input columns no document field names, one row per document, carried to the
    /// output unchanged.
    pub carry: Option<RecordBatch>,
    /// Records of this stretch of input that could not become documents: a reason and
    /// how many records. Each record counts as one document in and one dropped.
    pub drops: Vec<(&'static str, u64)>,
    /// Details of a problem that ended the input early (logged, not fatal).
    pub problem: Option<String>,
    /// Events of this stretch of input that are not documents, by name (added to the
    /// stats' `counts`): records that are not pages, bytes read and skipped.
    pub counts: Vec<(&'static str, u64)>,
}

impl DocBatch {
    /// Counts the records of this batch that could not become documents into `stats`,
    /// and logs the problem that ended the input early, if any.
    pub fn count_drops(&self, stats: &mut crate::stats::Stats, input: &crate::storage::Location) {
        for (reason, n) in &self.drops {
            stats.drop_n(reason, *n);
        }
        for (name, n) in &self.counts {
            *stats.counts.entry((*name).to_string()).or_default() += n;
        }
        if let Some(problem) = &self.problem {
            tracing::warn!(input = %input, %problem, reasons = ?self.drops, "bad input");
        }
    }

    /// A batch saying `records` records (at least one) of the input are unreadable.
    pub fn corrupt(reason: &'static str, records: u64, detail: &str) -> Self {
        DocBatch {
            drops: vec![(reason, records.max(1))],
            problem: Some(detail.to_string()),
            ..Default::default()
        }
    }
}

/// Batches of one input; `Err` items are infrastructure failures (the task stops).
pub type Batches = Box<dyn Iterator<Item = Result<DocBatch>> + Send>;

/// Reads input files of some formats.
pub trait Source: Send + Sync {
    /// The stem that output names derive from (the relative path without format
    /// extensions), or `None` when this source does not read such a file.
    fn stem(&self, relative: &str) -> Option<String>;

    /// Opens one input as a stream of batches.
    fn read(&self, storage: &Storage, input: &ObjectMeta, relative: &str) -> Result<Batches>;
}

/// Parquet document shards and JSONL (plain, `.gz`, `.zst`).
#[derive(Debug, Clone)]
pub struct DocumentSource {
    /// Documents per batch handed to the stages.
    pub batch_rows: usize,
    /// A record larger than this, a JSONL line or a Parquet row's text, is dropped as
    /// `oversized_record` before any stage sees it: the stages hold a document whole.
    pub max_record_bytes: usize,
}

impl Default for DocumentSource {
    fn default() -> Self {
        DocumentSource {
            batch_rows: 1024,
            max_record_bytes: 64 << 20,
        }
    }
}

const PARQUET: &str = ".parquet";
const JSONL: [&str; 8] = [
    ".jsonl.gz",
    ".jsonl.zst",
    ".json.gz",
    ".json.zst",
    ".ndjson",
    ".jsonl",
    ".json",
    ".ndjson.gz",
];

impl Source for DocumentSource {
    fn stem(&self, relative: &str) -> Option<String> {
        std::iter::once(PARQUET)
            .chain(JSONL)
            .find_map(|ext| relative.strip_suffix(ext))
            .filter(|stem| !stem.is_empty())
            .map(str::to_string)
    }

    fn read(&self, storage: &Storage, input: &ObjectMeta, relative: &str) -> Result<Batches> {
        let url = input.location.to_string();
        if relative.ends_with(PARQUET) {
            return Ok(
                match ParquetReader::open(storage, input, relative, self.batch_rows)? {
                    Ok(reader) => Box::new(reader.with_max_text_bytes(self.max_record_bytes)),
                    Err(detail) => Box::new(std::iter::once(Ok(DocBatch::corrupt(
                        "corrupt_parquet",
                        1,
                        &format!("{url}: {detail}"),
                    )))),
                },
            );
        }
        let raw = storage.open(&input.location)?;
        Ok(Box::new(JsonlReader::new(
            raw,
            &url,
            relative,
            self.batch_rows,
            self.max_record_bytes,
        )))
    }
}

impl<S: Source + ?Sized> Source for Arc<S> {
    fn stem(&self, relative: &str) -> Option<String> {
        (**self).stem(relative)
    }
    fn read(&self, storage: &Storage, input: &ObjectMeta, relative: &str) -> Result<Batches> {
        (**self).read(storage, input, relative)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems() {
        let s = DocumentSource::default();
        assert_eq!(s.stem("a/b.jsonl.gz").as_deref(), Some("a/b"));
        assert_eq!(s.stem("b.parquet").as_deref(), Some("b"));
        assert_eq!(s.stem("b.json").as_deref(), Some("b"));
        assert_eq!(s.stem("b.txt"), None);
        assert_eq!(s.stem(".parquet"), None);
    }
}
