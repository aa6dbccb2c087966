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
//! Every record that does not become a document is counted under a named reason:
//! `warc_request`, `warc_metadata`, `warc_revisit`, `warc_warcinfo`, … (not responses),
//! `http_status_not_200`, `not_html`, `no_http_headers`, `empty_record`,
//! `bad_target_uri`, `oversized_page`, `oversized_record`, `truncated_record`,
//! `bad_content_length`, `bad_warc_header`, `garbage_between_records`, `corrupt_compression`,
//! `url_blocklisted_domain`, `url_banned_word`, `url_soft_words`, `url_banned_subword`,
//! `undecodable_text`, `too_complex`, `empty_text`. A record whose Content-Length is
//! wrong is kept when the next record's header (or, in the WARC/0.x dialect, the end
//! of the input) shows where it ends and its block is a whole HTTP message.

pub mod charset;
pub mod classes;
pub mod extract;
pub mod gz;
pub mod html;
pub mod http;
pub mod urlfilter;
pub mod warc;

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

impl WarcBatches {
    /// Turns one record into a document, or the reason it is not one.
    fn document(&self, record: warc::Record) -> Result<Document, &'static str> {
        if record.warc_type != "response" {
            return Err(warc::type_reason(&record.warc_type));
        }
        if record.block.is_empty() {
            return Err("empty_record");
        }
        // A target URI with a NUL or another control character is not a URL, and
        // would break whatever reads the url column as a C string or a log line.
        if record.target_uri.chars().any(char::is_control) {
            return Err("bad_target_uri");
        }
        let response = match http::parse(&record.block, self.source.max_page_bytes) {
            Ok(r) => r,
            Err(http::HttpError::NoHeaders) => return Err("no_http_headers"),
        };
        if response.status != 200 {
            return Err("http_status_not_200");
        }
        if !http::is_html(&response.media_type, &response.payload) {
            return Err("not_html");
        }
        if response.payload.len() > self.source.max_page_bytes {
            return Err("oversized_page");
        }
        if response.payload.iter().all(u8::is_ascii_whitespace) {
            return Err("empty_text");
        }
        let payload = Payload {
            bytes: response.payload.into_owned(),
            charset: response.charset,
        };
        Ok(Document {
            id: record.record_id,
            url: Some(record.target_uri).filter(|u| !u.is_empty()),
            date: Some(record.date).filter(|d| !d.is_empty()),
            dump: self.source.dump.clone(),
            file_path: Some(self.url.clone()),
            payload: Some(payload),
            ..Default::default()
        })
    }
}

impl Iterator for WarcBatches {
    type Item = pipeline::Result<DocBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut batch = DocBatch::default();
        let mut bytes = 0;
        let mut problems: Vec<String> = Vec::new();
        while batch.docs.len() < self.source.batch_docs && bytes < self.source.batch_bytes {
            let item = match self.reader.next_item() {
                Ok(Some(item)) => item,
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(Error::from_io_error("reading", &self.url, e)));
                }
            };
            match item {
                warc::Item::Skip { reason, detail } => {
                    add_drop(&mut batch.drops, reason);
                    if problems.len() < 5 {
                        problems.push(detail);
                    }
                }
                warc::Item::Record(record) => match self.document(record) {
                    Ok(doc) => {
                        bytes += doc.payload.as_ref().map_or(0, |p| p.bytes.len());
                        batch.docs.push(doc);
                    }
                    Err(reason) => add_drop(&mut batch.drops, reason),
                },
            }
        }
        if !problems.is_empty() {
            batch.problem = Some(format!("{}: {}", self.url, problems.join("; ")));
        }
        if batch.docs.is_empty() && batch.drops.is_empty() {
            return None;
        }
        Some(Ok(batch))
    }
}

fn add_drop(drops: &mut Vec<(&'static str, u64)>, reason: &'static str) {
    match drops.iter_mut().find(|(r, _)| *r == reason) {
        Some(slot) => slot.1 += 1,
        None => drops.push((reason, 1)),
    }
}

impl Source for WarcSource {
    fn stem(&self, relative: &str) -> Option<String> {
        EXTENSIONS
            .iter()
            .find_map(|ext| relative.strip_suffix(ext))
            .filter(|stem| !stem.is_empty())
            .map(str::to_string)
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
    }
}
