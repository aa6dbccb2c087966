//! JSONL documents (plain, `.gz`, `.zst`), as FineWeb, dolma and datatrove write them.
//!
//! Known fields (`id`, `text`, `url`, `date`, `dump`, `file_path`, `language`,
//! `language_score`, `token_count`) are read from the top level or, datatrove style,
//! from a `metadata` object. Every other field is kept: together they become one JSON
//! object in the `metadata` column, so nothing a user brought is lost.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::builder::StringBuilder;
use arrow_schema::{DataType, Field, Schema};
use serde_json::{Map, Value as Json};

use crate::document::Document;
use crate::error::{Error, Result};
use crate::source::DocBatch;

/// Column holding the fields of a JSONL record that are not document columns.
pub const METADATA_COLUMN: &str = "metadata";

/// Streams documents from a JSONL file in batches.
pub struct JsonlReader {
    input: Box<dyn BufRead + Send>,
    url: String,
    relative: String,
    line_no: u64,
    done: bool,
    batch_rows: usize,
    max_line_bytes: usize,
    line: Vec<u8>,
}

impl std::fmt::Debug for JsonlReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlReader")
            .field("url", &self.url)
            .finish()
    }
}

enum Line {
    Complete,
    TooLong,
    Eof,
}

impl JsonlReader {
    /// Wraps a raw stream; `relative` names the input in generated ids, and the file
    /// name's extension picks the decompressor.
    pub fn new(
        raw: Box<dyn Read + Send>,
        url: &str,
        relative: &str,
        batch_rows: usize,
        max_line_bytes: usize,
    ) -> Self {
        let decoded: Box<dyn Read + Send> = if url.ends_with(".gz") {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
                1 << 20,
                raw,
            )))
        } else if url.ends_with(".zst") {
            match zstd::stream::read::Decoder::new(raw) {
                Ok(d) => Box::new(d),
                Err(e) => Box::new(FailingReader(Some(e))),
            }
        } else {
            raw
        };
        JsonlReader {
            input: Box::new(BufReader::with_capacity(1 << 20, decoded)),
            url: url.to_string(),
            relative: relative.to_string(),
            line_no: 0,
            done: false,
            batch_rows,
            max_line_bytes,
            line: Vec::new(),
        }
    }

    /// Reads one line into `self.line`, refusing to hold more than the cap.
    fn read_line(&mut self) -> io::Result<Line> {
        self.line.clear();
        let mut too_long = false;
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Ok(if too_long {
                    Line::TooLong
                } else if self.line.is_empty() {
                    Line::Eof
                } else {
                    Line::Complete
                });
            }
            let (chunk, found) = match memchr(buf) {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if !too_long {
                if self.line.len() + chunk.len() > self.max_line_bytes {
                    too_long = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            let used = found.unwrap_or(buf.len());
            self.input.consume(used);
            if found.is_some() {
                return Ok(if too_long {
                    Line::TooLong
                } else {
                    Line::Complete
                });
            }
        }
    }

    fn next_batch(&mut self) -> Option<Result<DocBatch>> {
        if self.done {
            return None;
        }
        let mut docs = Vec::new();
        let mut metadata: Vec<Option<String>> = Vec::new();
        let mut drops = Vec::new();
        let mut problem = None;
        while docs.len() < self.batch_rows {
            let status = match self.read_line() {
                Ok(s) => s,
                Err(e) => {
                    self.done = true;
                    if let Some(err) = Error::from_io(&e) {
                        return Some(Err(Error::Input {
                            url: self.url.clone(),
                            message: err.to_string(),
                        }));
                    }
                    let reason = if e.kind() == io::ErrorKind::UnexpectedEof {
                        "truncated_input"
                    } else {
                        "corrupt_compression"
                    };
                    drops.push((reason, 1));
                    problem = Some(format!("{} after line {}: {e}", self.url, self.line_no));
                    break;
                }
            };
            self.line_no += 1;
            match status {
                Line::Eof => {
                    self.done = true;
                    break;
                }
                Line::TooLong => drops.push(("oversized_record", 1)),
                Line::Complete => {
                    if self.line.iter().all(u8::is_ascii_whitespace) {
                        self.line_no -= 1;
                        continue;
                    }
                    match parse(&self.line, &self.relative, self.line_no - 1) {
                        Ok((mut doc, meta)) => {
                            if doc.file_path.is_none() {
                                doc.file_path = Some(self.url.clone());
                            }
                            docs.push(doc);
                            metadata.push(meta);
                        }
                        Err(reason) => drops.push((reason, 1)),
                    }
                }
            }
        }
        if docs.is_empty() && drops.is_empty() {
            return None;
        }
        let carry = match metadata_batch(&metadata) {
            Ok(b) => Some(b),
            Err(message) => {
                return Some(Err(Error::Input {
                    url: self.url.clone(),
                    message,
                }));
            }
        };
        Some(Ok(DocBatch {
            docs,
            carry,
            drops,
            problem,
            counts: Vec::new(),
        }))
    }
}

impl Iterator for JsonlReader {
    type Item = Result<DocBatch>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

struct FailingReader(Option<io::Error>);

impl Read for FailingReader {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(self
            .0
            .take()
            .unwrap_or_else(|| io::Error::other("stream failed")))
    }
}

/// The schema of the carried `metadata` column.
pub(crate) fn metadata_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![Field::new(
        METADATA_COLUMN,
        DataType::Utf8,
        true,
    )]))
}

fn metadata_batch(metadata: &[Option<String>]) -> std::result::Result<RecordBatch, String> {
    let mut b = StringBuilder::new();
    for m in metadata {
        b.append_option(m.as_deref());
    }
    RecordBatch::try_new(metadata_schema(), vec![Arc::new(b.finish())]).map_err(|e| e.to_string())
}

/// Parses one line: the document and the JSON of its other fields, or a drop reason.
fn parse(
    line: &[u8],
    relative: &str,
    index: u64,
) -> std::result::Result<(Document, Option<String>), &'static str> {
    let text = std::str::from_utf8(line).map_err(|_| "invalid_utf8")?;
    let Ok(Json::Object(mut record)) = serde_json::from_str::<Json>(text) else {
        return Err("malformed_json");
    };
    let mut nested = match record.remove(METADATA_COLUMN) {
        Some(Json::Object(m)) => m,
        Some(other) => {
            record.insert(METADATA_COLUMN.to_string(), other);
            Map::new()
        }
        None => Map::new(),
    };
    // A label's script (FineWeb-2's `language_script`) stays in `metadata` and is
    // also given to the stages.
    let script = record
        .get(crate::languages::LANGUAGE_SCRIPT)
        .or_else(|| nested.get(crate::languages::LANGUAGE_SCRIPT))
        .and_then(Json::as_str)
        .map(crate::languages::script_annotation)
        .unwrap_or_default();
    let mut take = |key: &str| record.remove(key).or_else(|| nested.remove(key));
    let Some(Json::String(body)) = take("text") else {
        return Err("missing_text");
    };
    let string = |v: Option<Json>| match v {
        Some(Json::String(s)) => Some(s),
        Some(Json::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let id = string(take("id")).unwrap_or_else(|| format!("{relative}/{index}"));
    let doc = Document {
        id,
        text: body,
        url: string(take("url")),
        date: string(take("date")),
        dump: string(take("dump")),
        file_path: string(take("file_path")),
        language: string(take("language")),
        language_score: take("language_score").and_then(|v| v.as_f64()),
        token_count: take("token_count").and_then(|v| v.as_i64()),
        annotations: script,
        payload: None,
        counts: Vec::new(),
        measures: Vec::new(),
    };
    for (k, v) in nested {
        record.entry(k).or_insert(v);
    }
    let meta = (!record.is_empty()).then(|| Json::Object(record).to_string());
    Ok((doc, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_script_is_kept_and_given_to_the_stages() {
        let line = br#"{"text":"x","language":"cmn","metadata":{"language_script":"Hani"}}"#;
        let (doc, meta) = parse(line, "f", 0).expect("parses");
        assert_eq!(
            doc.annotation(crate::languages::LANGUAGE_SCRIPT),
            Some(&crate::document::Value::Str("Hani".into()))
        );
        assert_eq!(meta.as_deref(), Some(r#"{"language_script":"Hani"}"#));
    }

    fn check(line: &str, expected: std::result::Result<(&str, &str, Option<&str>), &str>) {
        let got = parse(line.as_bytes(), "f", 7);
        match (got, expected) {
            (Ok((doc, meta)), Ok((id, text, m))) => {
                assert_eq!(
                    (doc.id.as_str(), doc.text.as_str(), meta.as_deref()),
                    (id, text, m)
                );
            }
            (Err(r), Err(e)) => assert_eq!(r, e),
            (got, expected) => panic!("{line}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn parses_lines() {
        check(r#"{"id":"a","text":"hi"}"#, Ok(("a", "hi", None)));
        check(r#"{"text":"hi"}"#, Ok(("f/7", "hi", None)));
        check(
            r#"{"text":"hi","source":"cc"}"#,
            Ok(("f/7", "hi", Some(r#"{"source":"cc"}"#))),
        );
        check(
            r#"{"text":"hi","metadata":{"url":"u","x":1}}"#,
            Ok(("f/7", "hi", Some(r#"{"x":1}"#))),
        );
        check(r#"{"id":"a"}"#, Err("missing_text"));
        check(r#"{"text":5}"#, Err("missing_text"));
        check(r#"{"text":"#, Err("malformed_json"));
        check("[1,2]", Err("malformed_json"));
    }

    #[test]
    fn rejects_invalid_utf8() {
        assert_eq!(
            parse(b"{\"text\":\"\xff\"}", "f", 0).err(),
            Some("invalid_utf8")
        );
    }
}
