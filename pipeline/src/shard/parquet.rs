//! Parquet shard writer and reader.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float32Builder, Float64Builder, Int64Builder, StringBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::ranged::RangedFile;
use super::{DROP_REASON, KNOWN_COLUMNS, SCHEMA_VERSION, SCHEMA_VERSION_KEY, output_schema};
use crate::document::{Column, ColumnKind, Document, Value};
use crate::error::{Error, Result};
use crate::source::DocBatch;
use crate::storage::{ObjectMeta, Storage, Writer};

/// How shards are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardOptions {
    /// A row group is closed once its encoded size passes this (pyarrow's and
    /// datatrove's files use row groups of this order).
    pub row_group_bytes: usize,
    /// zstd level; 3 is zstd's default and what FineWeb's shards use.
    pub zstd_level: i32,
}

impl Default for ShardOptions {
    fn default() -> Self {
        ShardOptions {
            row_group_bytes: 128 << 20,
            zstd_level: 3,
        }
    }
}

/// Writes documents (and carried columns) into one Parquet shard.
pub struct ShardWriter {
    writer: ArrowWriter<Writer>,
    schema: SchemaRef,
    declared: Vec<Column>,
    carried: Vec<String>,
    rows: u64,
    url: String,
}

impl std::fmt::Debug for ShardWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardWriter")
            .field("url", &self.url)
            .field("rows", &self.rows)
            .finish()
    }
}

impl ShardWriter {
    /// Starts a shard. `carry` is the schema of carried input columns; `rejected` adds
    /// the drop-reason column.
    pub fn new(
        out: Writer,
        carry: Option<&Schema>,
        declared: &[Column],
        rejected: bool,
        options: &ShardOptions,
    ) -> Result<Self> {
        let url = out.location().to_string();
        let schema = output_schema(carry, declared, rejected);
        let level = ZstdLevel::try_new(options.zstd_level).map_err(|e| Error::Parquet {
            url: url.clone(),
            message: e.to_string(),
        })?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(None)
            .set_max_row_group_bytes(Some(options.row_group_bytes.max(1)))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_VERSION_KEY.to_string(),
                SCHEMA_VERSION.to_string(),
            )]))
            .build();
        let writer =
            ArrowWriter::try_new(out, schema.clone(), Some(props)).map_err(|e| Error::Parquet {
                url: url.clone(),
                message: e.to_string(),
            })?;
        let carried = carry
            .map(|s| {
                s.fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .filter(|n| !declared.iter().any(|c| c.name == n))
                    .collect()
            })
            .unwrap_or_default();
        Ok(ShardWriter {
            writer,
            schema,
            declared: declared.to_vec(),
            carried,
            rows: 0,
            url,
        })
    }

    fn err(&self, e: impl std::fmt::Display) -> Error {
        Error::Parquet {
            url: self.url.clone(),
            message: e.to_string(),
        }
    }

    /// Appends rows: `rows[i]` is the document and its row in `carry` (if any);
    /// `reasons` fills the drop-reason column of a rejected shard.
    pub fn write(
        &mut self,
        docs: &[&Document],
        carry: Option<(&RecordBatch, &[u32])>,
        reasons: Option<&[&str]>,
    ) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        let strings = |f: &dyn Fn(&Document) -> Option<&str>| -> ArrayRef {
            let bytes: usize = docs.iter().map(|d| f(d).map_or(0, str::len)).sum();
            let mut b = StringBuilder::with_capacity(docs.len(), bytes);
            for d in docs {
                b.append_option(f(d));
            }
            Arc::new(b.finish())
        };
        columns.push(strings(&|d| Some(d.id.as_str())));
        columns.push(strings(&|d| Some(d.text.as_str())));
        columns.push(strings(&|d| d.url.as_deref()));
        columns.push(strings(&|d| d.date.as_deref()));
        columns.push(strings(&|d| d.dump.as_deref()));
        columns.push(strings(&|d| d.file_path.as_deref()));
        columns.push(strings(&|d| d.language.as_deref()));
        let mut scores = Float64Builder::with_capacity(docs.len());
        let mut counts = Int64Builder::with_capacity(docs.len());
        for d in docs {
            scores.append_option(d.language_score);
            counts.append_option(d.token_count);
        }
        columns.push(Arc::new(scores.finish()));
        columns.push(Arc::new(counts.finish()));
        if !self.carried.is_empty() {
            let Some((batch, rows)) = carry else {
                return Err(self.err("carried columns expected but none given"));
            };
            let indices = UInt32Array::from(rows.to_vec());
            for name in &self.carried {
                let col = batch
                    .column_by_name(name)
                    .ok_or_else(|| self.err(format!("carried column {name} missing")))?;
                let taken = arrow_select::take::take(col.as_ref(), &indices, None)
                    .map_err(|e| self.err(e))?;
                columns.push(taken);
            }
        }
        for c in &self.declared {
            columns.push(declared_column(c, docs));
        }
        if let Some(reasons) = reasons {
            let mut b = StringBuilder::new();
            for r in reasons {
                b.append_value(r);
            }
            columns.push(Arc::new(b.finish()));
        }
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| self.err(e))?;
        self.writer.write(&batch).map_err(|e| self.err(e))?;
        self.rows += docs.len() as u64;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the footer and makes the shard visible; returns its size in bytes.
    pub fn finish(self) -> Result<u64> {
        let url = self.url.clone();
        let out = self.writer.into_inner().map_err(|e| Error::Parquet {
            url,
            message: e.to_string(),
        })?;
        out.finish()
    }
}

fn declared_column(c: &Column, docs: &[&Document]) -> ArrayRef {
    let values = docs.iter().map(|d| d.annotation(c.name));
    match c.kind {
        ColumnKind::F64 => {
            let mut b = Float64Builder::with_capacity(docs.len());
            for v in values {
                b.append_option(match v {
                    Some(Value::F64(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        ColumnKind::F32 => {
            let mut b = Float32Builder::with_capacity(docs.len());
            for v in values {
                b.append_option(match v {
                    Some(Value::F32(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        ColumnKind::I64 => {
            let mut b = Int64Builder::with_capacity(docs.len());
            for v in values {
                b.append_option(match v {
                    Some(Value::I64(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        ColumnKind::Bool => {
            let mut b = BooleanBuilder::with_capacity(docs.len());
            for v in values {
                b.append_option(match v {
                    Some(Value::Bool(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        ColumnKind::Str => {
            let mut b = StringBuilder::new();
            for v in values {
                b.append_option(match v {
                    Some(Value::Str(x)) => Some(x.as_str()),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
    }
}

/// Reads a Parquet document shard batch by batch, one row group fetched at a time.
pub struct ParquetReader {
    file: RangedFile,
    metadata: ArrowReaderMetadata,
    url: String,
    relative: String,
    next_row_group: usize,
    current: Option<parquet::arrow::arrow_reader::ParquetRecordBatchReader>,
    row: u64,
    row_group_end: u64,
    failed: bool,
    batch_rows: usize,
    max_text_bytes: usize,
}

impl std::fmt::Debug for ParquetReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetReader")
            .field("url", &self.url)
            .finish()
    }
}

/// Whether an error chain holds a storage [`Error`] (infrastructure, not bad data).
pub(crate) fn storage_failure(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(ours) = e.downcast_ref::<Error>() {
            return Some(ours.to_string());
        }
        cur = e.source();
    }
    None
}

impl ParquetReader {
    /// Opens a shard. `Ok(Err(reason))` means the file is not a readable shard (a
    /// counted drop); `Err` means storage failed.
    pub fn open(
        storage: &Storage,
        input: &ObjectMeta,
        relative: &str,
        batch_rows: usize,
    ) -> Result<std::result::Result<Self, String>> {
        let file = RangedFile::new(storage.clone(), input.location.clone(), input.size);
        let url = input.location.to_string();
        let tail = input.size.saturating_sub(256 << 10);
        if let Err(e) = file.prefetch(tail, input.size) {
            return classify(&url, e).map(Err);
        }
        let metadata = match guarded("reading the footer", || {
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
        }) {
            Ok(m) => m,
            Err(e) => return classify(&url, e).map(Err),
        };
        file.evict();
        Ok(Ok(ParquetReader {
            file,
            metadata,
            url,
            relative: relative.to_string(),
            next_row_group: 0,
            current: None,
            row: 0,
            row_group_end: 0,
            failed: false,
            batch_rows,
            max_text_bytes: usize::MAX,
        }))
    }

    /// Drops documents whose text is longer than `bytes` as `oversized_record`, so
    /// that no stage meets a giant (the default keeps every length).
    pub fn with_max_text_bytes(mut self, bytes: usize) -> Self {
        self.max_text_bytes = bytes;
        self
    }

    fn open_row_group(
        &mut self,
        rg: usize,
    ) -> std::result::Result<(), parquet::errors::ParquetError> {
        let meta = self.metadata.metadata().row_group(rg);
        let mut start = u64::MAX;
        let mut end = 0u64;
        for col in meta.columns() {
            let (s, len) = guarded("reading column offsets", || Ok(col.byte_range()))?;
            let stop = s.checked_add(len).ok_or_else(|| {
                parquet::errors::ParquetError::General(format!(
                    "column chunk at {s} of {len} bytes runs past any file"
                ))
            })?;
            start = start.min(s);
            end = end.max(stop);
        }
        self.file.evict();
        if start < end {
            self.file.prefetch(start, end)?;
        }
        let reader = guarded("opening a row group", || {
            ParquetRecordBatchReaderBuilder::new_with_metadata(
                self.file.clone(),
                self.metadata.clone(),
            )
            .with_row_groups(vec![rg])
            .with_batch_size(self.batch_rows)
            .build()
        })?;
        self.current = Some(reader);
        Ok(())
    }

    /// A broken row group: a storage failure stops the input; bad data drops the rows
    /// of this row group not yet read (counted row for row) and reading goes on with the
    /// next row group.
    fn broken(&mut self, e: &(dyn std::error::Error + 'static)) -> Result<DocBatch> {
        self.current = None;
        if let Some(message) = storage_failure(e) {
            self.failed = true;
            return Err(Error::Input {
                url: self.url.clone(),
                message,
            });
        }
        let lost = self.row_group_end.saturating_sub(self.row);
        self.row = self.row_group_end;
        Ok(DocBatch::corrupt(
            "corrupt_parquet",
            lost,
            &format!("{}: row group {}: {e}", self.url, self.next_row_group - 1),
        ))
    }

    fn next_batch(&mut self) -> Option<Result<DocBatch>> {
        loop {
            if self.failed {
                return None;
            }
            if let Some(reader) = self.current.as_mut() {
                let next = guarded("decoding a page", || Ok(reader.next())).unwrap_or_else(|e| {
                    Some(Err(arrow_schema::ArrowError::ParquetError(e.to_string())))
                });
                match next {
                    Some(Ok(batch)) => {
                        let first_row = self.row;
                        self.row += batch.num_rows() as u64;
                        return Some(Ok(convert(
                            &batch,
                            &self.relative,
                            &self.url,
                            first_row,
                            self.max_text_bytes,
                        )));
                    }
                    Some(Err(e)) => return Some(self.broken(&e)),
                    None => {
                        self.current = None;
                        // The footer claimed more rows than the pages hold: the
                        // missing rows are lost, and counted.
                        if self.row < self.row_group_end {
                            let lost = self.row_group_end - self.row;
                            let detail = format!(
                                "{}: row group {}: the footer claims {lost} more rows than its pages hold",
                                self.url,
                                self.next_row_group - 1
                            );
                            self.row = self.row_group_end;
                            return Some(Ok(DocBatch::corrupt("corrupt_parquet", lost, &detail)));
                        }
                    }
                }
            }
            if self.next_row_group >= self.metadata.metadata().num_row_groups() {
                self.file.evict();
                return None;
            }
            let rg = self.next_row_group;
            self.next_row_group += 1;
            let rows = self.metadata.metadata().row_group(rg).num_rows().max(0) as u64;
            self.row_group_end = self.row + rows;
            if let Err(e) = self.open_row_group(rg) {
                return Some(self.broken(&e));
            }
        }
    }
}

/// Runs a call into the parquet crate, which panics on some corrupt files (a zero
/// divisor, negative column offsets, slices out of bounds; found by `mill-fuzz`): a
/// panic becomes an error, so the file or row group is counted as corrupt instead of
/// ending the process.
fn guarded<T>(
    what: &str,
    f: impl FnOnce() -> std::result::Result<T, parquet::errors::ParquetError>,
) -> std::result::Result<T, parquet::errors::ParquetError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            Err(parquet::errors::ParquetError::General(format!(
                "{what}: the decoder failed on corrupt data ({message})"
            )))
        }
    }
}

/// Some columns of a Parquet shard, every row, without the others (one ranged read of
/// the footer, then one per row group of just those columns). Columns the file lacks
/// are absent from the batches. A file that is not a readable shard is an error here:
/// the caller reads a shard a step of its own wrote.
pub fn read_columns(
    storage: &Storage,
    input: &ObjectMeta,
    names: &[&str],
) -> Result<Vec<RecordBatch>> {
    let url = input.location.to_string();
    let fail = |e: parquet::errors::ParquetError| -> Error {
        match classify(&url, e) {
            Ok(message) => Error::Parquet {
                url: url.clone(),
                message,
            },
            Err(e) => e,
        }
    };
    let file = RangedFile::new(storage.clone(), input.location.clone(), input.size);
    file.prefetch(input.size.saturating_sub(256 << 10), input.size)
        .map_err(fail)?;
    let metadata = guarded("reading the footer", || {
        ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
    })
    .map_err(fail)?;
    let schema = metadata.metadata().file_metadata().schema_descr_ptr();
    let present: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| metadata.schema().column_with_name(n).is_some())
        .collect();
    let mask = parquet::arrow::ProjectionMask::columns(&schema, present);
    let reader = guarded("opening the columns", || {
        ParquetRecordBatchReaderBuilder::new_with_metadata(file.clone(), metadata.clone())
            .with_projection(mask)
            .with_batch_size(64 * 1024)
            .build()
    })
    .map_err(fail)?;
    let mut out = Vec::new();
    for batch in reader {
        out.push(batch.map_err(|e| Error::Parquet {
            url: url.clone(),
            message: e.to_string(),
        })?);
    }
    Ok(out)
}

fn classify(url: &str, e: parquet::errors::ParquetError) -> Result<String> {
    match storage_failure(&e) {
        Some(message) => Err(Error::Input {
            url: url.to_string(),
            message,
        }),
        None => Ok(e.to_string()),
    }
}

impl Iterator for ParquetReader {
    type Item = Result<DocBatch>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}

enum Col<'a> {
    Str(Box<dyn Fn(usize) -> Option<&'a str> + 'a>),
    F64(Box<dyn Fn(usize) -> Option<f64> + 'a>),
    I64(Box<dyn Fn(usize) -> Option<i64> + 'a>),
}

fn string_col<'a>(a: &'a dyn Array) -> Option<Col<'a>> {
    let f: Box<dyn Fn(usize) -> Option<&'a str> + 'a> = match a.data_type() {
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            Box::new(move |i| s.is_valid(i).then(|| s.value(i)))
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            Box::new(move |i| s.is_valid(i).then(|| s.value(i)))
        }
        DataType::Utf8View => {
            let s = a.as_string_view();
            Box::new(move |i| s.is_valid(i).then(|| s.value(i)))
        }
        _ => return None,
    };
    Some(Col::Str(f))
}

fn column<'a>(name: &str, a: &'a dyn Array) -> Option<Col<'a>> {
    match name {
        "language_score" => match a.data_type() {
            DataType::Float64 => {
                let p = a.as_primitive::<Float64Type>();
                Some(Col::F64(Box::new(move |i| {
                    p.is_valid(i).then(|| p.value(i))
                })))
            }
            DataType::Float32 => {
                let p = a.as_primitive::<Float32Type>();
                Some(Col::F64(Box::new(move |i| {
                    p.is_valid(i).then(|| f64::from(p.value(i)))
                })))
            }
            _ => None,
        },
        "token_count" => match a.data_type() {
            DataType::Int64 => {
                let p = a.as_primitive::<Int64Type>();
                Some(Col::I64(Box::new(move |i| {
                    p.is_valid(i).then(|| p.value(i))
                })))
            }
            DataType::Int32 => {
                let p = a.as_primitive::<Int32Type>();
                Some(Col::I64(Box::new(move |i| {
                    p.is_valid(i).then(|| i64::from(p.value(i)))
                })))
            }
            _ => None,
        },
        _ => string_col(a),
    }
}

/// Turns one record batch into documents plus the carried (unknown) columns.
fn convert(
    batch: &RecordBatch,
    relative: &str,
    url: &str,
    first_row: u64,
    max_text_bytes: usize,
) -> DocBatch {
    let schema = batch.schema();
    let mut cols: Vec<Option<Col<'_>>> = Vec::with_capacity(KNOWN_COLUMNS.len());
    for name in KNOWN_COLUMNS {
        let col = match batch.column_by_name(name) {
            None => None,
            Some(a) => match column(name, a.as_ref()) {
                Some(c) => Some(c),
                None => {
                    return DocBatch::corrupt(
                        "bad_schema",
                        batch.num_rows() as u64,
                        &format!("{url}: column {name} has type {}", a.data_type()),
                    );
                }
            },
        };
        cols.push(col);
    }
    let s = |k: usize, i: usize| -> Option<&str> {
        match &cols[k] {
            Some(Col::Str(f)) => f(i),
            _ => None,
        }
    };
    // A label's script (FineWeb-2's `language_script`): carried like any other input
    // column, and also given to the stages.
    let script = batch
        .column_by_name(crate::languages::LANGUAGE_SCRIPT)
        .and_then(|a| string_col(a.as_ref()));
    let mut docs = Vec::with_capacity(batch.num_rows());
    let mut keep = Vec::with_capacity(batch.num_rows());
    let mut drops = Vec::new();
    for i in 0..batch.num_rows() {
        let Some(text) = s(1, i) else {
            drops.push(("missing_text", 1));
            keep.push(false);
            continue;
        };
        if text.len() > max_text_bytes {
            drops.push(("oversized_record", 1));
            keep.push(false);
            continue;
        }
        keep.push(true);
        let id = match s(0, i) {
            Some(id) => id.to_string(),
            None => format!("{relative}/{}", first_row + i as u64),
        };
        let language_score = match &cols[7] {
            Some(Col::F64(f)) => f(i),
            _ => None,
        };
        let token_count = match &cols[8] {
            Some(Col::I64(f)) => f(i),
            _ => None,
        };
        docs.push(Document {
            id,
            text: text.to_string(),
            url: s(2, i).map(str::to_string),
            date: s(3, i).map(str::to_string),
            dump: s(4, i).map(str::to_string),
            file_path: Some(s(5, i).map_or_else(|| url.to_string(), str::to_string)),
            language: s(6, i).map(str::to_string),
            language_score,
            token_count,
            annotations: match &script {
                Some(Col::Str(f)) => f(i)
                    .map(crate::languages::script_annotation)
                    .unwrap_or_default(),
                _ => Vec::new(),
            },
            payload: None,
            counts: Vec::new(),
            measures: Vec::new(),
        });
    }
    let rows = batch.num_rows() as u64;
    let carried: Vec<usize> = schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !KNOWN_COLUMNS.contains(&f.name().as_str()) && f.name() != DROP_REASON)
        .map(|(i, _)| i)
        .collect();
    let carry = if carried.is_empty() {
        None
    } else {
        match batch.project(&carried) {
            Ok(projected) if drops.is_empty() => Some(projected),
            Ok(projected) => {
                match arrow_select::filter::filter_record_batch(
                    &projected,
                    &BooleanArray::from(keep),
                ) {
                    Ok(filtered) => Some(filtered),
                    Err(e) => return DocBatch::corrupt("bad_schema", rows, &e.to_string()),
                }
            }
            Err(e) => return DocBatch::corrupt("bad_schema", rows, &e.to_string()),
        }
    };
    DocBatch {
        docs,
        carry,
        drops,
        problem: None,
        counts: Vec::new(),
    }
}

/// Reads every document of a shard (tests, tools); bad rows are skipped.
pub fn read_all_documents(
    storage: &Storage,
    location: &crate::storage::Location,
) -> Result<Vec<Document>> {
    let meta = storage.head(location)?.ok_or_else(|| Error::NotFound {
        url: location.to_string(),
    })?;
    let reader =
        ParquetReader::open(storage, &meta, "", 4096)?.map_err(|message| Error::Parquet {
            url: location.to_string(),
            message,
        })?;
    let mut out = Vec::new();
    for batch in reader {
        out.extend(batch?.docs);
    }
    Ok(out)
}
