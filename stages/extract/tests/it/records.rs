//! Every record counted (the invariant of `Stats::records_balanced`, checked on every
//! run of these tests by `run_local`), and the crawl formats beyond WARC/1.x with HTTP
//! responses: the WARC/0.18 dialect with lengths that drift, responses without HTTP
//! headers, WET files, and compressed streams cut short.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::{config, docs, root, run_local, urls};

fn expected(rel: &str) -> Value {
    let text = std::fs::read_to_string(root().join("fixtures").join(rel)).expect("expected file");
    serde_json::from_str(&text).expect("expected JSON")
}

fn count(report: &pipeline::Report, name: &str) -> u64 {
    report.stats.counts.get(name).copied().unwrap_or(0)
}

fn ids(docs: &[pipeline::Document]) -> Vec<String> {
    docs.iter().map(|d| d.id.clone()).collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

/// ClueWeb09's dialect (fixtures/warc-old/make.py, `clueweb-drift`): LF WARC headers
/// before CRLF HTTP heads, Content-Length in characters and off by more each record,
/// a 74 KB page, heads with bare LF. Every response is a whole HTTP message, so all 30
/// are kept, in order; the warcinfo is counted apart.
#[test]
fn a_drifting_warc_0_18_crawl_loses_no_record() {
    let want = expected("warc-old/clueweb-drift.expected.json");
    let (out, report) = run_local(
        &root().join("fixtures/warc-old/clueweb-drift.warc.gz"),
        &config(),
    );
    let got = docs(&out.path().join("clueweb-drift.parquet"));
    assert_eq!(ids(&got), strings(&want["ids"]));
    assert_eq!(
        count(&report, "warc_records"),
        want["records"].as_u64().expect("n")
    );
    assert_eq!(count(&report, "warc_records_other"), 1);
    assert_eq!(report.stats.docs_in, 30, "{:?}", report.stats);
    assert!(report.stats.drops.is_empty(), "{:?}", report.stats.drops);
}

/// Responses whose block is the page itself (no status line, no HTTP headers): read
/// as the payload when the WARC Content-Type or the bytes say HTML, counted as
/// `kept_without_http_headers`; the two that are not HTML stay `no_http_headers`.
#[test]
fn responses_without_http_headers_are_read_as_pages() {
    let want = expected("warc-headerless/headerless.expected.json");
    let (out, report) = run_local(
        &root().join("fixtures/warc-headerless/headerless.warc.gz"),
        &config(),
    );
    let got = ids(&docs(&out.path().join("headerless.parquet")));
    let responses = want["responses"].as_array().expect("responses");
    let kept: Vec<String> = responses
        .iter()
        .filter(|r| r["expect"] == "kept")
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(got, kept);
    let dropped = responses.len() - kept.len();
    assert_eq!(
        report.stats.drops.get("no_http_headers"),
        Some(&(dropped as u64))
    );
    // The two ordinary responses are not counted as headerless.
    assert_eq!(
        count(&report, "kept_without_http_headers"),
        kept.len() as u64 - 2
    );
    assert_eq!(
        count(&report, "warc_records"),
        want["records"].as_u64().expect("n")
    );
    // The windows-1251 page is decoded by the charset its WARC header names.
    let texts: String = docs(&out.path().join("headerless.parquet"))
        .iter()
        .map(|d| d.text.clone())
        .collect();
    assert!(
        texts.chars().any(|c| ('а'..='я').contains(&c)),
        "no Cyrillic text"
    );
    assert!(
        !texts.contains('\u{fffd}'),
        "a replacement character in the texts"
    );
}

/// A WET file: each `conversion` record is a document whose text is its block, not
/// extracted again; URL, date and id from the WARC header; empty blocks dropped. Its
/// stem keeps `.wet`. A WAT file beside it is not an input of the stage.
#[test]
fn wet_conversion_records_are_documents() {
    let want = expected("wet/wet.expected.json");
    let (out, report) = run_local(&root().join("fixtures/wet/crawl.warc.wet.gz"), &config());
    let got = docs(&out.path().join("crawl.wet.parquet"));
    let conversions = want["wet"]["conversions"].as_array().expect("conversions");
    let nonempty: Vec<&Value> = conversions
        .iter()
        .filter(|c| c["nonempty"] == true)
        .collect();
    assert_eq!(
        urls(&got),
        nonempty
            .iter()
            .map(|c| c["url"].as_str().expect("url").to_string())
            .collect::<Vec<_>>()
    );
    for (doc, c) in got.iter().zip(&nonempty) {
        assert_eq!(doc.id, c["id"].as_str().expect("id"));
        assert_eq!(
            doc.text.len() as u64,
            c["bytes"].as_u64().expect("bytes"),
            "{}",
            doc.id
        );
        assert!(doc.date.is_some());
    }
    assert_eq!(report.stats.docs_in, conversions.len() as u64);
    assert_eq!(count(&report, "warc_records_other"), 1);
    let source = extract::WarcSource::new(&config());
    use pipeline::Source;
    assert_eq!(source.stem("crawl.warc.wat.gz"), None);
}

/// A gzip stream cut short: the records it decompressed whole are read, and the rest
/// is one drop, `truncated_compression` (one member in all, and one per record).
#[test]
fn a_cut_gzip_keeps_what_it_decompressed() {
    let want = expected("warc-cut/cut.expected.json");
    for name in ["single-member-cut.warc.gz", "per-record-cut.warc.gz"] {
        let facts = &want["files"][name];
        let (_, report) = run_local(&root().join("fixtures/warc-cut").join(name), &config());
        let complete = facts["complete_records"].as_u64().expect("n");
        assert_eq!(
            count(&report, "warc_records"),
            complete + 1,
            "{name}: {:?}",
            report.stats
        );
        assert_eq!(
            report.stats.drops.get("truncated_compression"),
            Some(&1),
            "{name}: {:?}",
            report.stats.drops
        );
        assert_eq!(
            count(&report, "warc_bytes"),
            facts["decompressed_bytes"].as_u64().expect("n"),
            "{name}"
        );
    }
}

/// The same for zstd, one frame per record (the WARC zstd convention): a stream cut
/// inside its last frame keeps the records of the frames before.
#[test]
fn a_cut_zstd_keeps_what_it_decompressed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = std::fs::read(root().join("fixtures/warc/crawl-plain.warc")).expect("fixture");
    let mut frames = Vec::new();
    let mut records = 0u64;
    for record in
        plain
            .split_inclusive(|&b| b == b'\n')
            .fold(Vec::<Vec<u8>>::new(), |mut acc, line| {
                if line.starts_with(b"WARC/1.") || acc.is_empty() {
                    acc.push(Vec::new());
                }
                acc.last_mut().expect("a record").extend_from_slice(line);
                acc
            })
    {
        frames.push(zstd::encode_all(&record[..], 3).expect("zstd"));
        records += 1;
    }
    let last = frames.pop().expect("frames");
    let mut bytes: Vec<u8> = frames.concat();
    bytes.extend_from_slice(&last[..last.len() / 2]);
    std::fs::write(dir.path().join("cut.warc.zst"), bytes).expect("write");
    let (_, report) = run_local(&dir.path().join("cut.warc.zst"), &config());
    assert_eq!(
        report.stats.drops.get("truncated_compression"),
        Some(&1),
        "{:?}",
        report.stats
    );
    assert_eq!(
        count(&report, "warc_records"),
        records,
        "{:?}",
        report.stats
    );
}

/// Request, metadata and warcinfo records are not pages: the funnel starts from pages.
#[test]
fn records_that_hold_no_page_are_counted_apart() {
    let (_, report) = run_local(&root().join("fixtures/warc/crawl.warc.gz"), &config());
    let other: BTreeMap<&str, u64> = ["warc_request", "warc_metadata", "warc_warcinfo"]
        .into_iter()
        .map(|k| (k, count(&report, k)))
        .collect();
    assert!(other.values().all(|&n| n > 0), "{other:?}");
    assert_eq!(
        count(&report, "warc_records_other"),
        other.values().sum::<u64>()
    );
    for k in other.keys() {
        assert!(!report.stats.drops.contains_key(*k), "{k} is a drop");
    }
    assert_eq!(
        count(&report, "warc_records"),
        report.stats.docs_in + count(&report, "warc_records_other")
    );
}

/// The invariant itself, on the reader alone: every fixture's decompressed bytes are
/// all accounted for.
#[test]
fn every_fixture_balances() {
    let mut files = Vec::new();
    for dir in ["warc", "warc-old", "warc-headerless", "wet", "warc-cut"] {
        for entry in std::fs::read_dir(root().join("fixtures").join(dir)).expect("fixtures") {
            let path = entry.expect("entry").path();
            let name = path.to_string_lossy();
            if name.ends_with(".warc.gz")
                || name.ends_with(".warc")
                || name.ends_with(".zst")
                || name.ends_with(".wet.gz")
            {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        let dir = tempfile::tempdir().expect("tempdir");
        let name = path.file_name().expect("name");
        std::fs::copy(&path, dir.path().join(name)).expect("copy");
        // run_local checks the invariant.
        let _ = run_local(Path::new(&dir.path().join(name)), &config());
    }
}
