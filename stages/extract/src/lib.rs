//! Stage `extract`: WARC files on disk or S3 → clean text documents.
//!
//! The first stage of a web pipeline, and its most expensive. A [`WarcSource`] streams
//! WARC records (`.warc`, `.warc.gz` with one member per record or one member in all,
//! `.warc.zst`) through a reader that survives damage ([`gz`], [`warc`]); HTTP
//! responses with an HTML payload become documents carrying the undecoded page. Then,
//! on all cores, the URL filter ([`urlfilter`]) and the [`Extract`] stage: charset
//! ([`charset`]), a tolerant HTML parse ([`html`]) and main-text extraction
//! ([`extract`]).
//!
//! Every record read is a document, a drop under a named reason, or a record that holds
//! no page (`warcinfo`, `request`, `metadata`: counted as `warc_records_other`), and
//! every decompressed byte is in one of the stats' byte counts (see the README, "Every
//! record counted"). Drop reasons: `warc_revisit`, … (other types),
//! `http_status_not_200`, `not_html`, `no_http_headers`, `empty_record`,
//! `bad_target_uri`, `oversized_page`, `oversized_record`, `truncated_record`,
//! `bad_content_length`, `bad_warc_header`, `corrupt_compression`,
//! `truncated_compression`, `resync_skipped_record`, `url_blocklisted_domain`,
//! `url_banned_word`, `url_soft_words`, `url_banned_subword`, `undecodable_text`,
//! `too_complex`, `empty_text`. A record whose Content-Length is wrong is kept when the
//! next record's header (or, in the WARC/0.x dialect, the end of the input) shows where
//! it ends and its block is a whole HTTP message. WET `conversion` records are documents
//! of text; responses without HTTP headers are read as the page when it is HTML.

pub mod charset;
pub mod classes;
pub mod extract;
pub mod gz;
pub mod html;
pub mod http;
pub mod urlfilter;
pub mod warc;

use std::borrow::Cow;
use std::io::{BufReader, Read};

use pipeline::shard::ShardOptions;
use pipeline::{
    Column, ColumnKind, DocBatch, Document, Error, ObjectMeta, Payload, Source, Stage, Step,
    Storage, Value, Verdict,
};
use serde::{Deserialize, Serialize};

pub use urlfilter::{UrlFilter, UrlFilterConfig};

/// Configuration of the extract stage (`--config`, TOML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Value of the `dump` column (e.g. `CC-MAIN-2024-10`).
    #[serde(default)]
    pub dump: Option<String>,
    /// Pages (HTTP payloads) larger than this are dropped as `oversized_page`.
    /// 10 MiB by default.
    #[serde(default = "default_max_page_bytes")]
    pub max_page_bytes: usize,
    /// Work budget of one page, in tags and text runs parsed; a page over it is dropped
    /// as `too_complex`. Counted in parser steps rather than seconds so that the output
    /// never depends on machine load.
    #[serde(default = "default_max_tags")]
    pub max_tags: usize,
    /// A page whose decoded text is more than this share of U+FFFD replacement
    /// characters is dropped as `undecodable_text`.
    #[serde(default = "default_max_replaced")]
    pub max_replaced_share: f64,
    /// Lines of the main text whose link text is more than this share of their text
    /// are dropped (menus and tag clouds that escaped the boilerplate rules).
    #[serde(default = "default_max_link_density")]
    pub max_link_density: f64,
    /// A page whose link-heavy lines hold more than this many times the text of the
    /// rest is a link index (table of contents, index of terms): its links are kept.
    #[serde(default = "default_link_index_ratio")]
    pub link_index_ratio: f64,
    /// What doubtful parts of a page go to: `precision` (the default), `balanced` or
    /// `recall` (trafilatura's `favor_precision` / `favor_recall`; see
    /// [`extract::Favor`]).
    #[serde(default)]
    pub favor: extract::Favor,
    /// URL filtering (RefinedWeb's first step).
    #[serde(default)]
    pub url_filter: UrlFilterConfig,
    /// Row group size of the output shards, in bytes of encoded data.
    #[serde(default = "default_row_group_bytes")]
    pub row_group_bytes: usize,
}

fn default_max_page_bytes() -> usize {
    10 << 20
}

fn default_max_link_density() -> f64 {
    extract::Options::default().max_link_density
}

fn default_link_index_ratio() -> f64 {
    extract::Options::default().link_index_ratio
}

fn default_max_tags() -> usize {
    2_000_000
}

fn default_max_replaced() -> f64 {
    0.1
}

fn default_row_group_bytes() -> usize {
    ShardOptions::default().row_group_bytes
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dump: None,
            max_page_bytes: default_max_page_bytes(),
            max_tags: default_max_tags(),
            max_replaced_share: default_max_replaced(),
            max_link_density: default_max_link_density(),
            link_index_ratio: default_link_index_ratio(),
            favor: extract::Favor::default(),
            url_filter: UrlFilterConfig::default(),
            row_group_bytes: default_row_group_bytes(),
        }
    }
}

/// Room for the HTTP headers above the page-size cap when capping WARC blocks.
const HEADER_ROOM: usize = 1 << 20;

/// Reads WARC files into documents holding undecoded pages.
#[derive(Debug, Clone)]
pub struct WarcSource {
    pub dump: Option<String>,
    pub max_page_bytes: usize,
    /// Documents per batch.
    pub batch_docs: usize,
    /// Page bytes per batch (bounds memory with large pages).
    pub batch_bytes: usize,
}

impl WarcSource {
    pub fn new(config: &Config) -> Self {
        WarcSource {
            dump: config.dump.clone(),
            max_page_bytes: config.max_page_bytes,
            batch_docs: 512,
            batch_bytes: 64 << 20,
        }
    }
}

const EXTENSIONS: [&str; 3] = [".warc.gz", ".warc.zst", ".warc"];
/// WET files (`conversion` records: text a crawler extracted). Their stem keeps `.wet`,
/// so that a crawl's WARC and WET files side by side give outputs of their own.
const WET_EXTENSIONS: [&str; 3] = [".warc.wet.gz", ".warc.wet.zst", ".warc.wet"];

/// A zstd WARC may start with its dictionary in a skippable frame (the WARC zstd
/// convention); the dictionary may itself be zstd-compressed.
fn zstd_reader(mut raw: Box<dyn Read + Send>) -> std::io::Result<Box<dyn Read + Send>> {
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match raw.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    if got == 8 && head[..4] == [0x5d, 0x2a, 0x4d, 0x18] {
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as u64;
        let mut dict = Vec::new();
        raw.by_ref().take(len).read_to_end(&mut dict)?;
        if dict.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            dict = zstd::stream::decode_all(&dict[..])?;
        }
        let dec = zstd::stream::read::Decoder::with_dictionary(BufReader::new(raw), &dict)?;
        return Ok(Box::new(dec));
    }
    let chained = std::io::Cursor::new(head[..got].to_vec()).chain(raw);
    Ok(Box::new(zstd::stream::read::Decoder::new(chained)?))
}

/// Batches of documents from one WARC file.
struct WarcBatches {
    reader: warc::WarcReader<Box<dyn Read + Send>>,
    source: WarcSource,
    url: String,
    done: bool,
}

/// Why a record is not a document.
enum NotADocument {
    /// Not a page at all (`warcinfo`, `request`, `metadata`): counted apart, as
    /// `warc_records_other`, not as a dropped document.
    Other(&'static str),
    /// A page (or what should have been one) dropped, with the reason.
    Drop(&'static str),
}

/// Record types that hold no page: counted as `warc_records_other`.
const OTHER_TYPES: [&str; 3] = ["warcinfo", "request", "metadata"];

impl WarcBatches {
    /// Turns one record into a document (and whether its page came without HTTP
    /// headers), or the reason it is not one.
    fn document(&self, record: warc::Record) -> Result<(Document, bool), NotADocument> {
        use NotADocument::{Drop, Other};
        let kind = record.warc_type.as_str();
        if OTHER_TYPES.contains(&kind) {
            return Err(Other(warc::type_reason(kind)));
        }
        if !matches!(kind, "response" | "resource" | "conversion") {
            return Err(Drop(warc::type_reason(kind)));
        }
        if record.block.is_empty() {
            return Err(Drop("empty_record"));
        }
        // A target URI with a NUL or another control character is not a URL, and
        // would break whatever reads the url column as a C string or a log line.
        if record.target_uri.chars().any(char::is_control) {
            return Err(Drop("bad_target_uri"));
        }
        let mut doc = Document {
            id: record.record_id,
            url: Some(record.target_uri).filter(|u| !u.is_empty()),
            date: Some(record.date).filter(|d| !d.is_empty()),
            dump: self.source.dump.clone(),
            file_path: Some(self.url.clone()),
            ..Default::default()
        };
        if kind == "conversion" {
            // Text a crawler already extracted (a WET file): the document's text as
            // it is; it is not extracted again.
            if record.block.len() > self.source.max_page_bytes {
                return Err(Drop("oversized_page"));
            }
            let text = String::from_utf8_lossy(&record.block);
            if text.trim().is_empty() {
                return Err(Drop("empty_text"));
            }
            doc.text = text.into_owned();
            return Ok((doc, false));
        }
        // A response's block is an HTTP message; a resource's (and a response written
        // by an archiving tool without the HTTP head) is the payload itself, typed by
        // the WARC header.
        let (payload, charset, headerless) =
            match http::parse(&record.block, self.source.max_page_bytes) {
                Ok(response) if kind == "response" => {
                    if response.status != 200 {
                        return Err(Drop("http_status_not_200"));
                    }
                    if !http::is_html(&response.media_type, &response.payload) {
                        return Err(Drop("not_html"));
                    }
                    let charset = response.charset;
                    let payload = match response.payload {
                        // The body is a piece of the block: the block is cut down to it
                        // in place, not copied into a new buffer.
                        Cow::Borrowed(body) => match range_within(&record.block, body) {
                            Some(range) => {
                                let mut block = record.block;
                                block.truncate(range.end);
                                block.drain(..range.start);
                                block
                            }
                            None => body.to_vec(),
                        },
                        Cow::Owned(body) => body,
                    };
                    (payload, charset, false)
                }
                _ => {
                    let (media_type, charset) = http::split_content_type(&record.content_type);
                    if !http::is_html(&media_type, &record.block) {
                        return Err(Drop(if kind == "response" {
                            "no_http_headers"
                        } else {
                            "not_html"
                        }));
                    }
                    (record.block, charset, kind == "response")
                }
            };
        if payload.len() > self.source.max_page_bytes {
            return Err(Drop("oversized_page"));
        }
        if payload.iter().all(u8::is_ascii_whitespace) {
            return Err(Drop("empty_text"));
        }
        doc.payload = Some(Payload {
            bytes: payload,
            charset,
        });
        Ok((doc, headerless))
    }
}

impl Iterator for WarcBatches {
    type Item = pipeline::Result<DocBatch>;

    /// Every record read is a document, a dropped document or a record that holds no
    /// page (`warc_records_other`), and every decompressed byte read is in one of
    /// `warc_bytes_documents`, `warc_bytes_dropped`, `warc_bytes_other` and
    /// `resync_skipped_bytes` (see ARCHITECTURE.md, "Every record counted").
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut batch = DocBatch::default();
        let mut bytes = 0;
        let mut problems: Vec<String> = Vec::new();
        while batch.docs.len() < self.source.batch_docs && bytes < self.source.batch_bytes {
            let (consumed, tally) = (self.reader.consumed(), self.reader.tally());
            let item = self.reader.next_item();
            let after = self.reader.tally();
            let skipped = after.skipped_bytes - tally.skipped_bytes;
            let dropped = after.dropped_bytes - tally.dropped_bytes;
            // The bytes of this item: what the reader moved past, less what it counted
            // as skipped or as the rest of a dropped record.
            let span = self.reader.consumed() - consumed - skipped - dropped;
            add(&mut batch.counts, "warc_bytes", after.read - tally.read);
            add(&mut batch.counts, "resync_skipped_bytes", skipped);
            add(&mut batch.counts, "warc_bytes_dropped", dropped);
            let lost = after.skipped_records - tally.skipped_records;
            add(&mut batch.drops, "resync_skipped_record", lost);
            add(&mut batch.counts, "warc_records", lost);
            let item = match item {
                Ok(Some(item)) => item,
                Ok(None) => {
                    // Padding after the last record.
                    add(&mut batch.counts, "resync_skipped_bytes", span);
                    self.done = true;
                    break;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(Error::from_io_error("reading", &self.url, e)));
                }
            };
            match item {
                warc::Item::Skip {
                    reason,
                    detail,
                    record,
                } => {
                    if record {
                        add(&mut batch.counts, "warc_records", 1);
                        add(&mut batch.drops, reason, 1);
                        add(&mut batch.counts, "warc_bytes_dropped", span);
                    } else {
                        add(&mut batch.counts, reason, 1);
                        add(&mut batch.counts, "resync_skipped_bytes", span);
                    }
                    if problems.len() < 5 {
                        problems.push(detail);
                    }
                }
                warc::Item::Record(record) => {
                    add(&mut batch.counts, "warc_records", 1);
                    match self.document(record) {
                        Ok((doc, headerless)) => {
                            add(&mut batch.counts, "warc_bytes_documents", span);
                            if headerless {
                                add(&mut batch.counts, "kept_without_http_headers", 1);
                            }
                            bytes += doc
                                .payload
                                .as_ref()
                                .map_or(doc.text.len(), |p| p.bytes.len());
                            batch.docs.push(doc);
                        }
                        Err(NotADocument::Other(kind)) => {
                            add(&mut batch.counts, "warc_records_other", 1);
                            add(&mut batch.counts, kind, 1);
                            add(&mut batch.counts, "warc_bytes_other", span);
                        }
                        Err(NotADocument::Drop(reason)) => {
                            add(&mut batch.drops, reason, 1);
                            add(&mut batch.counts, "warc_bytes_dropped", span);
                        }
                    }
                }
            }
        }
        if !problems.is_empty() {
            batch.problem = Some(format!("{}: {}", self.url, problems.join("; ")));
        }
        if batch.docs.is_empty() && batch.drops.is_empty() && batch.counts.is_empty() {
            return None;
        }
        Some(Ok(batch))
    }
}

/// Where `inner` lies in `outer`, when it is a piece of it.
fn range_within(outer: &[u8], inner: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start.checked_add(inner.len())?;
    (end <= outer.len()).then_some(start..end)
}

/// Adds `n` to the entry `name` of a list of counts (nothing when `n` is 0).
fn add(list: &mut Vec<(&'static str, u64)>, name: &'static str, n: u64) {
    if n == 0 {
        return;
    }
    match list.iter_mut().find(|(r, _)| *r == name) {
        Some(slot) => slot.1 += n,
        None => list.push((name, n)),
    }
}

impl Source for WarcSource {
    fn stem(&self, relative: &str) -> Option<String> {
        let wet = WET_EXTENSIONS
            .iter()
            .find_map(|ext| relative.strip_suffix(ext))
            .filter(|stem| !stem.is_empty())
            .map(|stem| format!("{stem}.wet"));
        wet.or_else(|| {
            EXTENSIONS
                .iter()
                .find_map(|ext| relative.strip_suffix(ext))
                .filter(|stem| !stem.is_empty())
                .map(str::to_string)
        })
    }

    fn read(
        &self,
        storage: &Storage,
        input: &ObjectMeta,
        relative: &str,
    ) -> pipeline::Result<pipeline::source::Batches> {
        let url = input.location.to_string();
        let raw = storage.open(&input.location)?;
        let decoded: Box<dyn Read + Send> = if relative.ends_with(".gz") {
            Box::new(gz::GzMembers::new(raw))
        } else if relative.ends_with(".zst") {
            match zstd_reader(raw) {
                Ok(r) => r,
                Err(e) => return Err(Error::from_io_error("opening zstd stream", &url, e)),
            }
        } else {
            raw
        };
        Ok(Box::new(WarcBatches {
            reader: warc::WarcReader::new(decoded, self.max_page_bytes + HEADER_ROOM),
            source: self.clone(),
            url,
            done: false,
        }))
    }
}

/// The extract stage: charset, parse, main text.
#[derive(Debug, Clone)]
pub struct Extract {
    pub max_page_bytes: usize,
    pub max_tags: usize,
    pub max_replaced_share: f64,
    pub options: extract::Options,
}

impl Extract {
    pub fn new(config: &Config) -> Self {
        Extract {
            max_page_bytes: config.max_page_bytes,
            max_tags: config.max_tags,
            max_replaced_share: config.max_replaced_share,
            options: extract::Options {
                max_link_density: config.max_link_density,
                link_index_ratio: config.link_index_ratio,
                favor: config.favor,
                ..extract::Options::default()
            },
        }
    }

    /// Main text of an HTML page given as bytes: `Err` holds the drop reason.
    pub fn text_of(
        &self,
        bytes: &[u8],
        charset: Option<&str>,
        url: &str,
    ) -> Result<String, &'static str> {
        self.page_of(bytes, charset, url).map(|p| p.text)
    }

    /// Main text and title of an HTML page given as bytes: `Err` holds the drop reason.
    pub fn page_of(
        &self,
        bytes: &[u8],
        charset: Option<&str>,
        url: &str,
    ) -> Result<Extracted, &'static str> {
        if bytes.len() > self.max_page_bytes {
            return Err("oversized_page");
        }
        let decoded = charset::decode(bytes, charset, &pipeline::lists::host(url));
        let chars = decoded.text.chars().count().max(1);
        if decoded.replaced as f64 > self.max_replaced_share * chars as f64 {
            return Err("undecodable_text");
        }
        let mut page = html::parse(&decoded.text, self.max_tags);
        page.discussion = extract::discussion_url(url);
        page.front_page = extract::front_page_url(url);
        if page.over_budget {
            return Err("too_complex");
        }
        let text = extract::main_text(&page, &self.options);
        if text.trim().is_empty() {
            return Err("empty_text");
        }
        Ok(Extracted {
            text,
            title: extract::title(&page),
        })
    }
}

/// What extraction takes from a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The main text.
    pub text: String,
    /// `og:title`, else `<title>`, else the first `<h1>`.
    pub title: Option<String>,
}

/// Column of the page title.
pub const TITLE_COLUMN: &str = "title";

impl Stage for Extract {
    fn name(&self) -> &'static str {
        "extract"
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column {
            name: TITLE_COLUMN,
            kind: ColumnKind::Str,
        }]
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        let Some(payload) = doc.payload.take() else {
            // Already text (a document from elsewhere): nothing to extract.
            return if doc.text.trim().is_empty() {
                Verdict::Drop("empty_text")
            } else {
                Verdict::Keep
            };
        };
        match self.page_of(
            &payload.bytes,
            payload.charset.as_deref(),
            doc.url.as_deref().unwrap_or_default(),
        ) {
            Ok(page) => {
                doc.text = page.text;
                if let Some(title) = page.title {
                    doc.annotate(TITLE_COLUMN, Value::Str(title));
                }
                Verdict::Keep
            }
            Err(reason) => Verdict::Drop(reason),
        }
    }
}

/// The step `mill-extract` runs: URL filter, then extraction, fused.
pub fn step(storage: &Storage, config: &Config) -> pipeline::Result<Step> {
    let filter = UrlFilter::load(storage, &config.url_filter)?;
    let hash = pipeline::cli::config_hash("extract", &(config, filter.fingerprint()));
    let mut stages: Vec<Box<dyn Stage>> = Vec::new();
    if !filter.is_empty() {
        stages.push(Box::new(filter));
    }
    stages.push(Box::new(Extract::new(config)));
    Ok(Step {
        name: "extract".into(),
        stages,
        source: Box::new(WarcSource::new(config)),
        config_hash: hash,
        shard: ShardOptions {
            row_group_bytes: config.row_group_bytes,
            ..ShardOptions::default()
        },
        partition: None,
        per_input: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_of_a_buffer_is_found_where_it_lies() {
        let outer = b"HTTP/1.1 200 OK\r\n\r\n<p>body</p>".to_vec();
        let body = &outer[19..];
        assert_eq!(range_within(&outer, body), Some(19..outer.len()));
        assert_eq!(range_within(&outer, &outer[2..5]), Some(2..5));
        let elsewhere = outer.clone();
        assert_eq!(range_within(&outer, &elsewhere[19..]), None);
    }

    #[test]
    fn config_defaults() {
        let c: Config = toml::from_str("").expect("empty config");
        assert_eq!(c.max_page_bytes, 10 << 20);
        assert_eq!(c.url_filter.soft_word_threshold, 2);
        assert!(toml::from_str::<Config>("max_page = 1").is_err());
    }

    #[test]
    fn title_column() {
        let stage = Extract::new(&Config::default());
        assert_eq!(stage.columns()[0].name, TITLE_COLUMN);
        let mut doc = Document {
            payload: Some(Payload {
                bytes: b"<title>A page</title><p>Some text of the page.</p>".to_vec(),
                charset: None,
            }),
            ..Default::default()
        };
        assert_eq!(stage.process(&mut doc), Verdict::Keep);
        assert_eq!(doc.text, "Some text of the page.");
        assert_eq!(
            doc.annotations,
            vec![(TITLE_COLUMN, Value::Str("A page".into()))]
        );
    }

    #[test]
    fn stems() {
        let s = WarcSource::new(&Config::default());
        assert_eq!(s.stem("a/b.warc.gz").as_deref(), Some("a/b"));
        assert_eq!(s.stem("b.warc.zst").as_deref(), Some("b"));
        assert_eq!(s.stem("b.warc").as_deref(), Some("b"));
        assert_eq!(s.stem("b.jsonl"), None);
        assert_eq!(s.stem("c/b.warc.wet.gz").as_deref(), Some("c/b.wet"));
        assert_eq!(s.stem("b.warc.wet").as_deref(), Some("b.wet"));
        assert_eq!(s.stem("b.warc.wat.gz"), None);
    }
}
