//! The fuzz targets: every parser of bytes that come from outside, each with the
//! fixtures it starts from, the tokens of its format, its caps and its contract.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use extract::warc::{Item, WarcReader};
use pipeline::{Location, ObjectMeta, Source, Storage};

use crate::Outcome;

/// One parser under fuzzing.
#[derive(Debug)]
pub struct Target {
    pub name: &'static str,
    pub about: &'static str,
    /// The inputs mutation starts from (fixtures of the format).
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Tokens of the format, inserted or written over by the mutator.
    pub dictionary: &'static [&'static [u8]],
    /// Runs the parser on one input: the label it was parsed or counted under, or
    /// what broke.
    pub run: fn(&[u8]) -> Outcome,
    /// Cap on the peak of live heap bytes while one input runs.
    pub memory_cap: usize,
    /// Bound on one input's time (generous: CI machines are shared and slow).
    pub time_bound: Duration,
    /// Longest input made.
    pub max_input: usize,
}

/// The fixtures folder of the repository.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(rel)).unwrap_or_default()
}

fn files(dir: &str, ext: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures().join(dir))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

/// The decompressed bytes of a fixture `.warc.gz` (damaged members skipped).
fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut r = extract::gz::GzMembers::new(bytes);
    let mut out = Vec::new();
    let mut buf = vec![0; 64 << 10];
    for _ in 0..100_000 {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if extract::gz::Gap::from_io(&e).is_some() => {}
            Err(_) => break,
        }
    }
    out
}

fn warc_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![read("warc/crawl-plain.warc")];
    seeds.push(gunzip(&read("warc/broken.warc.gz")));
    seeds.push(gunzip(&read("warc-old/clueweb-style.warc.gz")));
    seeds.retain(|s| !s.is_empty());
    seeds
}

/// The blocks of the fixture WARC records.
fn blocks() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for warc in warc_seeds() {
        for item in WarcReader::new(&warc[..], 1 << 20).flatten() {
            if let Item::Record(r) = item {
                out.push(r.block);
            }
        }
    }
    out
}

fn payloads() -> Vec<Vec<u8>> {
    let mut out = files("pages", ".html");
    for block in blocks() {
        if let Ok(r) = extract::http::parse(&block, 1 << 20) {
            out.push(r.payload.into_owned());
        }
    }
    out
}

const WARC_TOKENS: &[&[u8]] = &[
    b"WARC/1.0\r\n",
    b"WARC/1.1\r\n",
    b"\nWARC/0.18\n",
    b"WARC-Type: response\r\n",
    b"WARC-Type: warcinfo\r\n",
    b"Content-Length: ",
    b"Content-Length: 99999999999\r\n",
    b"Content-Length: -1\r\n",
    b"WARC-Target-URI: ",
    b"\r\n\r\n",
    b"\n\n",
    b"\r\n",
    b"HTTP/1.1 200 OK\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Type: text/html; charset=",
];

const HTTP_TOKENS: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.0 404\r\n",
    b"Content-Type: text/html; charset=",
    b"Content-Type: application/xhtml+xml\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"\r\n\r\n",
    b"\n\n",
    b"0\r\n\r\n",
    b"ffffffffffffffff\r\n",
    b"Content-Encoding: gzip\r\n",
];

const HTML_TOKENS: &[&[u8]] = &[
    b"<table><tr><td>",
    b"</td></tr></table>",
    b"<p>",
    b"</p>",
    b"<div class=\"content\">",
    b"<nav>",
    b"<script>",
    b"</script>",
    b"<!--",
    b"-->",
    b"<![CDATA[",
    b"&#x1F600;",
    b"&#99999999999;",
    b"&amp;",
    b"&",
    b"<meta charset=\"shift_jis\">",
    b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=koi8-r\">",
    b"<pre>",
    b"<br>",
    b"<frameset><frame src=x></frameset>",
    b"<noframes>",
    b"<h1>",
    b"<li>",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xe2\x80",
];

const JSONL_TOKENS: &[&[u8]] = &[
    b"{\"text\": \"",
    b"\"id\": ",
    b"\"url\": null",
    b"\\u0000",
    b"\\ud800",
    b"\"}\n",
    b"\n",
    b"[",
    b"{",
    b"1e999999",
    b"\"metadata\": {\"a\": [1, 2, {\"b\": null}]}",
];

const PARQUET_TOKENS: &[&[u8]] = &[
    b"PAR1",
    b"\xff\xff\xff\x7f",
    b"\x00\x00\x00\x00",
    b"\x15\x00",
    b"\x19\x1c",
    b"\x16\x80\x80\x80\x80\x80\x80\x80\x80\x01",
];

const INDEX_TOKENS: &[&[u8]] = &[
    b"MMIDIDX\x00\x00",
    b"\x01\x00\x00\x00\x00\x00\x00\x00",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x08",
    b"\x04",
];

const TOML_TOKENS: &[&[u8]] = &[
    b"[[step]]\n",
    b"name = \"x\"\n",
    b"stages = [\"extract\", \"langid\"]\n",
    b"phase = \"dedup.signatures\"\n",
    b"tasks = 0\n",
    b"tasks = 18446744073709551615\n",
    b"input = \"s3://b/../k\"\n",
    b"[config.extract]\n",
    b"[config.quality]\n",
    b"max_page_bytes = -1\n",
    b"threshold = nan\n",
    b"\"\"\"",
    b"= inf\n",
    b"[submit.slurm]\n",
];

/// The folder for inputs that must be files, once made.
static SCRATCH: OnceLock<PathBuf> = OnceLock::new();

/// A folder for inputs that must be files (the Parquet and JSONL readers), kept for
/// the process's life: [`remove_scratch`] removes it (a `TempDir` in a `static` would
/// never be dropped, and so never removed).
fn scratch() -> &'static Path {
    SCRATCH.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("mill-fuzz-")
            .tempdir()
            .expect("a temporary folder for fuzz inputs")
            .keep()
    })
}

/// Removes the folder of file inputs, if a target made it; call it once the targets
/// have run (it is not made again in this process).
pub fn remove_scratch() {
    if let Some(dir) = SCRATCH.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Every target.
pub fn targets() -> Vec<Target> {
    let mib = 1 << 20;
    let secs = Duration::from_secs;
    vec![
        Target {
            name: "gzip",
            about: "the gzip member reader (extract::gz), over the fixture .warc.gz files",
            seeds: || {
                let mut s = files("warc", ".warc.gz");
                s.push(read("warc-old/clueweb-style.warc.gz"));
                s
            },
            dictionary: &[
                b"\x1f\x8b\x08\x00",
                b"\x1f\x8b\x08\x1f",
                b"\xff\xff\xff\xff",
                b"\x00\x00\xff\xff",
            ],
            run: gzip,
            memory_cap: 96 * mib,
            time_bound: secs(10),
            max_input: 256 << 10,
        },
        Target {
            name: "warc",
            about: "the WARC record reader (extract::warc), over the fixture crawls",
            seeds: warc_seeds,
            dictionary: WARC_TOKENS,
            run: warc,
            memory_cap: 64 * mib,
            time_bound: secs(10),
            max_input: 256 << 10,
        },
        Target {
            name: "http",
            about: "the HTTP response head parser and dechunker (extract::http)",
            seeds: blocks,
            dictionary: HTTP_TOKENS,
            run: http,
            memory_cap: 32 * mib,
            time_bound: secs(5),
            max_input: 128 << 10,
        },
        Target {
            name: "charset",
            about: "charset detection and decoding (extract::charset)",
            seeds: payloads,
            dictionary: HTML_TOKENS,
            run: charset,
            memory_cap: 32 * mib,
            time_bound: secs(5),
            max_input: 128 << 10,
        },
        Target {
            name: "html",
            about: "the HTML tokenizer and main-text extractor (Extract::page_of)",
            seeds: payloads,
            dictionary: HTML_TOKENS,
            run: html,
            memory_cap: 96 * mib,
            time_bound: secs(10),
            max_input: 256 << 10,
        },
        Target {
            name: "jsonl",
            about: "the JSONL document reader (pipeline::DocumentSource)",
            seeds: || files("docs", ".jsonl"),
            dictionary: JSONL_TOKENS,
            run: |input| documents(input, "in.jsonl"),
            memory_cap: 64 * mib,
            time_bound: secs(10),
            max_input: 128 << 10,
        },
        Target {
            name: "parquet",
            about: "the Parquet shard reader (pipeline::DocumentSource): footers, row groups, pages",
            seeds: parquet_seeds,
            dictionary: PARQUET_TOKENS,
            run: |input| documents(input, "in.parquet"),
            memory_cap: 128 * mib,
            time_bound: secs(10),
            max_input: 256 << 10,
        },
        Target {
            name: "idx",
            about: "the Megatron .idx parser (pipeline::tokens::Index)",
            seeds: index_seeds,
            dictionary: INDEX_TOKENS,
            run: index,
            memory_cap: 64 * mib,
            time_bound: secs(5),
            max_input: 64 << 10,
        },
        Target {
            name: "sketch",
            about: "the per-input quantile sketches keep_top merges (pipeline::sketch::Sketch::from_bytes)",
            seeds: sketch_seeds,
            dictionary: &[
                b"TMKLL\x001\n",
                b"\xff\xff\xff\xff",
                b"\x00\x00\xc0\x7f",
                b"\x40\x00\x00\x00",
            ],
            run: sketch,
            memory_cap: 64 * mib,
            time_bound: secs(5),
            max_input: 64 << 10,
        },
        Target {
            name: "model-config",
            about: "a transformer classifier's config.json (classify::transformer::ModelConfig::parse)",
            seeds: model_config_seeds,
            dictionary: &[
                b"\"architectures\"",
                b"BertForSequenceClassification",
                b"XLMRobertaForSequenceClassification",
                b"\"id2label\"",
                b"\"problem_type\"",
                b"\"regression\"",
                b"\"hidden_size\"",
                b"\"num_attention_heads\"",
                b"18446744073709551615",
            ],
            run: model_config,
            memory_cap: 32 * mib,
            time_bound: secs(5),
            max_input: 16 << 10,
        },
        Target {
            name: "config",
            about: "pipeline files and the stage configs in them (jobs::Pipeline::parse)",
            seeds: config_seeds,
            dictionary: TOML_TOKENS,
            run: config,
            memory_cap: 32 * mib,
            time_bound: secs(5),
            max_input: 64 << 10,
        },
    ]
}

fn gzip(input: &[u8]) -> Outcome {
    let mut r = extract::gz::GzMembers::new(input);
    let mut buf = vec![0; 64 << 10];
    let (mut total, mut gaps) = (0usize, 0usize);
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n;
                if total > 32 << 20 {
                    return Ok("inflates past 32 MiB (read stopped)".into());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if extract::gz::Gap::from_io(&e).is_some() => {
                gaps += 1;
                if gaps > input.len() + 1 {
                    return Err("gaps reported without progress".into());
                }
            }
            Err(e) => return Ok(format!("error {:?}", e.kind())),
        }
    }
    Ok(if gaps > 0 { "gaps skipped" } else { "whole" }.into())
}

fn warc(input: &[u8]) -> Outcome {
    let mut r = WarcReader::new(input, 1 << 20);
    let mut reasons = BTreeSet::new();
    let mut items = 0usize;
    loop {
        match r.next_item() {
            Ok(None) => break,
            Ok(Some(Item::Record(_))) => {}
            Ok(Some(Item::Skip { reason, .. })) => {
                reasons.insert(reason);
            }
            Err(e) => return Err(format!("an I/O error from bytes in memory: {e}")),
        }
        items += 1;
        if items > input.len() + 2 {
            return Err("more items than input bytes: the reader does not advance".into());
        }
    }
    let tally = r.tally();
    if tally.read != input.len() as u64 || r.consumed() != tally.read {
        return Err(format!(
            "{} input bytes, {} read, {} passed: bytes unaccounted for",
            input.len(),
            tally.read,
            r.consumed()
        ));
    }
    // The same input through the source: every record and byte in the stats.
    let stats = warc_stats(input)?;
    if let Err(e) = stats.records_balanced() {
        return Err(format!("records or bytes lost: {e}"));
    }
    Ok(if reasons.is_empty() {
        "records".into()
    } else {
        reasons.into_iter().collect::<Vec<_>>().join(",")
    })
}

/// The stats of reading `input` as a `.warc` file with the extract stage's source.
fn warc_stats(input: &[u8]) -> Result<pipeline::Stats, String> {
    let path = scratch().join("in.warc");
    std::fs::write(&path, input).map_err(|e| format!("writing the input: {e}"))?;
    let meta = ObjectMeta {
        location: Location::Local(path),
        relative: "in.warc".to_string(),
        size: input.len() as u64,
        etag: None,
    };
    let config = extract::Config {
        max_page_bytes: 1 << 20,
        ..extract::Config::default()
    };
    let source = extract::WarcSource::new(&config);
    let batches = source
        .read(&Storage::new(), &meta, "in.warc")
        .map_err(|e| format!("opening: {e}"))?;
    let mut stats = pipeline::Stats::default();
    for batch in batches {
        let batch = batch.map_err(|e| format!("an error from bytes on disk: {e}"))?;
        batch.count_drops(&mut stats, &meta.location);
        for _ in &batch.docs {
            stats.keep();
        }
    }
    Ok(stats)
}

fn http(input: &[u8]) -> Outcome {
    match extract::http::parse(input, 1 << 20) {
        Ok(r) => {
            let html = extract::http::is_html(&r.media_type, &r.payload);
            Ok(format!("status {}xx html {html}", r.status / 100))
        }
        Err(extract::http::HttpError::NoHeaders) => Ok("no_http_headers".into()),
    }
}

fn charset(input: &[u8]) -> Outcome {
    let declared = [
        "utf-8",
        "iso-8859-1",
        "shift_jis",
        "x-no-such",
        "utf-16le",
        "",
    ];
    let http = input
        .first()
        .map(|b| declared[*b as usize % declared.len()]);
    let d = extract::charset::decode(input, http.filter(|s| !s.is_empty()), "fuzz.example");
    if d.replaced > d.text.chars().count() {
        return Err("more replacement characters than characters".into());
    }
    Ok(format!("{} from {}", d.encoding.name(), d.source))
}

fn html(input: &[u8]) -> Outcome {
    static STAGE: OnceLock<extract::Extract> = OnceLock::new();
    let stage = STAGE.get_or_init(|| extract::Extract::new(&extract::Config::default()));
    match stage.page_of(input, None, "https://fuzz.example/page") {
        Ok(page) if page.text.is_empty() => Err("a kept page with no text".into()),
        Ok(page) if page.text.contains('\0') => Err("NUL in the text".into()),
        Ok(_) => Ok("text".into()),
        Err(reason) => Ok(reason.into()),
    }
}

/// Reads `input` as a document file named `name` through the stages' source: every
/// record a document or a counted drop, or one clear error.
fn documents(input: &[u8], name: &str) -> Outcome {
    let path = scratch().join(name);
    std::fs::write(&path, input).map_err(|e| format!("writing the input: {e}"))?;
    let meta = ObjectMeta {
        location: Location::Local(path),
        relative: name.to_string(),
        size: input.len() as u64,
        etag: None,
    };
    let source = pipeline::DocumentSource::default();
    let batches = match source.read(&Storage::new(), &meta, name) {
        Ok(b) => b,
        Err(e) => return Ok(format!("error at open: {}", kind(&e.to_string()))),
    };
    let mut reasons = BTreeSet::new();
    let mut docs = 0usize;
    for (i, batch) in batches.enumerate() {
        match batch {
            Ok(b) => {
                docs += b.docs.len();
                reasons.extend(b.drops.iter().map(|(r, _)| *r));
            }
            Err(e) => {
                reasons.insert("error");
                let _ = kind(&e.to_string());
                break;
            }
        }
        if i > input.len() + 2 {
            return Err("more batches than input bytes".into());
        }
    }
    Ok(if reasons.is_empty() {
        format!("documents ({})", if docs > 0 { "some" } else { "none" })
    } else {
        reasons.into_iter().collect::<Vec<_>>().join(",")
    })
}

/// The first words of an error message (a label, not the whole message).
fn kind(message: &str) -> String {
    message
        .split(':')
        .next()
        .unwrap_or("")
        .chars()
        .take(40)
        .collect()
}

fn parquet_seeds() -> Vec<Vec<u8>> {
    // The documents of the JSONL fixtures, written as a shard by the import stage.
    let dir = scratch().join("seed");
    let out = scratch().join("seed-out");
    let _ = std::fs::create_dir_all(&dir);
    for (i, f) in files("docs", ".jsonl").iter().enumerate() {
        let _ = std::fs::write(dir.join(format!("d{i}.jsonl")), f);
    }
    let step = import::step(&import::Config::default());
    let opts = pipeline::RunOptions::new(Location::Local(dir), Location::Local(out.clone()));
    if let Err(e) = pipeline::run(&step, &Storage::new(), &opts) {
        eprintln!("no Parquet seeds: {e}");
    }
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&out)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
                .filter_map(|p| std::fs::read(p).ok())
                .collect()
        })
        .unwrap_or_default();
    seeds.sort();
    seeds
}

fn index_seeds() -> Vec<Vec<u8>> {
    use pipeline::tokens::{Dtype, index_bytes};
    vec![
        index_bytes(Dtype::for_vocab(256_000), &[3, 0, 70_000, 5]),
        index_bytes(Dtype::for_vocab(50_000), &[1, 2, 3]),
        index_bytes(Dtype::for_vocab(256_000), &[]),
    ]
}

fn index(input: &[u8]) -> Outcome {
    match pipeline::tokens::Index::parse(input, "fuzz.idx") {
        Ok(ix) => {
            if ix.pointers.len() != ix.lengths.len() {
                return Err("pointers and lengths differ in number".into());
            }
            let _ = ix.tokens();
            Ok("parsed".into())
        }
        Err(_) => Ok("refused".into()),
    }
}

fn sketch_seeds() -> Vec<Vec<u8>> {
    [(0usize, 64u32), (10, 64), (5000, 64), (300, 8)]
        .iter()
        .map(|&(n, k)| {
            let mut s = pipeline::sketch::Sketch::new(k, n as u64);
            for i in 0..n {
                s.add((i * 7919 % 1000) as f32 / 1000.0);
            }
            s.to_bytes()
        })
        .collect()
}

/// A sketch is read or refused; one read answers its queries and merges.
fn sketch(input: &[u8]) -> Outcome {
    match pipeline::sketch::Sketch::from_bytes(input, "in.kll") {
        Err(_) => Ok("refused".into()),
        Ok(s) => {
            let _ = (
                s.quantile(0.5),
                s.rank(0.5),
                s.rank_error(),
                s.histogram(0.0, 1.0, 20),
            );
            let mut m = pipeline::sketch::Sketch::new(64, 1);
            m.merge(&s);
            m.merge(&s);
            if m.count() != s.count().saturating_mul(2) {
                return Err(format!(
                    "merging twice counts {} of {}",
                    m.count(),
                    s.count()
                ));
            }
            Ok("read".into())
        }
    }
}

fn model_config_seeds() -> Vec<Vec<u8>> {
    vec![
        br#"{"architectures":["BertForSequenceClassification"],"hidden_size":768,"num_attention_heads":12,"num_hidden_layers":12,"intermediate_size":3072,"vocab_size":30522,"max_position_embeddings":512,"id2label":{"0":"LABEL_0"},"problem_type":"regression"}"#.to_vec(),
        br#"{"architectures":["XLMRobertaForSequenceClassification"],"model_type":"xlm-roberta","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":16,"vocab_size":10,"max_position_embeddings":514,"pad_token_id":1,"type_vocab_size":1,"id2label":{"0":"a","1":"b"}}"#.to_vec(),
    ]
}

fn model_config(input: &[u8]) -> Outcome {
    match classify::transformer::ModelConfig::parse(input, "config.json") {
        Ok(c) if c.labels.is_empty() => Err("a config without labels was taken".into()),
        Ok(_) => Ok("parsed".into()),
        Err(_) => Ok("refused".into()),
    }
}

fn config_seeds() -> Vec<Vec<u8>> {
    let pipeline = read("pipeline.toml");
    let mut seeds = vec![pipeline.clone()];
    for stage in ["extract", "import", "tokenize"] {
        let table = String::from_utf8_lossy(&read(&format!("{stage}.toml"))).into_owned();
        let mut s = String::from_utf8_lossy(&pipeline).into_owned();
        if !s.contains(&format!("[config.{stage}]")) {
            s.push_str(&format!("\n[config.{stage}]\n{table}"));
            seeds.push(s.into_bytes());
        }
    }
    seeds
}

fn config(input: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(input) else {
        return Ok("not UTF-8".into());
    };
    Ok(match jobs::Pipeline::parse(text) {
        Ok(_) => "pipeline".into(),
        Err(_) => "refused".into(),
    })
}
