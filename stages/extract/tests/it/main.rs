//! Integration tests of `mill-extract`: conformance, golden output on the WARC
//! fixtures, every robustness case, and a run from and to the loopback S3 server.

mod bombs;
mod records;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use extract::Config;
use pipeline::shard::read_all_documents;
use pipeline::testing::{Conformance, check, config_file};
use pipeline::{Document, Location, RunOptions, Storage, run};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/warc").join(name)).expect("fixture")
}

fn config() -> Config {
    let text = std::fs::read_to_string(root().join("fixtures/extract.toml")).expect("config");
    let mut c: Config = toml::from_str(&text).expect("parse config");
    c.url_filter.blocklists = vec![
        root()
            .join("fixtures/warc/blocklist")
            .to_string_lossy()
            .into_owned(),
    ];
    c
}

fn binary(args: Vec<String>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-extract"));
    cmd.current_dir(root());
    cmd.args(args);
    // The same config as the in-process runs (absolute list paths), so markers match.
    let text = toml::to_string(&config()).expect("config as TOML");
    let path = config_file(env!("CARGO_TARGET_TMPDIR"), "extract-it.toml", &text);
    cmd.arg("--config").arg(path);
    cmd
}

#[test]
fn conformance() {
    let crawl = fixture("crawl.warc.gz");
    let many: Vec<u8> = (0..40).flat_map(|_| crawl.iter().copied()).collect();
    let cfg = config();
    check(&Conformance {
        step: &|| extract::step(&Storage::new(), &cfg).expect("step"),
        inputs: vec![
            ("crawl.warc.gz".into(), crawl.clone()),
            ("plain.warc".into(), fixture("crawl-plain.warc")),
            (
                "single.warc.gz".into(),
                fixture("crawl-single-member.warc.gz"),
            ),
            ("zstd.warc.zst".into(), fixture("crawl-zstd.warc.zst")),
            ("many.warc.gz".into(), many),
        ],
        broken: vec![(
            "broken.warc.gz".into(),
            fixture("broken.warc.gz"),
            "corrupt_compression",
        )],
        command: Some(&binary),
    });
}

/// Runs the library on `input` (a file or folder) into a fresh folder.
fn run_local(input: &Path, cfg: &Config) -> (tempfile::TempDir, pipeline::Report) {
    let out = tempfile::tempdir().expect("tempdir");
    let step = extract::step(&Storage::new(), cfg).expect("step");
    let mut opts = RunOptions::new(
        Location::Local(input.to_path_buf()),
        Location::Local(out.path().to_path_buf()),
    );
    opts.threads = 2;
    let report = run(&step, &Storage::new(), &opts).expect("run");
    if let Err(e) = report.stats.records_balanced() {
        panic!("{}: records or bytes unaccounted for: {e}", input.display());
    }
    (out, report)
}

fn docs(path: &Path) -> Vec<Document> {
    read_all_documents(&Storage::new(), &Location::Local(path.to_path_buf())).expect("read output")
}

fn urls(docs: &[Document]) -> Vec<String> {
    docs.iter().filter_map(|d| d.url.clone()).collect()
}

/// Compares with a golden file under fixtures/expected (`TOKENMILL_BLESS=1` rewrites it).
fn golden(name: &str, got: &str) {
    pipeline::testing::golden(&root().join("fixtures/expected").join(name), got);
}

fn golden_lines(docs: &[Document]) -> String {
    docs.iter()
        .map(|d| {
            serde_json::json!({
                "id": d.id, "url": d.url, "date": d.date, "dump": d.dump, "text": d.text,
            })
            .to_string()
                + "\n"
        })
        .collect()
}

#[test]
fn golden_run_on_fixtures() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = binary(vec![
        "--input".into(),
        "fixtures/warc".into(),
        "--output".into(),
        out.path().to_string_lossy().into_owned(),
        "--log-format".into(),
        "json".into(),
    ])
    .output()
    .expect("run mill-extract");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: String = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.contains("bytes in"))
        .map(|l| format!("{l}\n"))
        .collect();
    golden("extract-summary.txt", &summary);
    for stem in ["crawl", "broken"] {
        let got = docs(&out.path().join(format!("{stem}.parquet")));
        golden(&format!("extract-{stem}.jsonl"), &golden_lines(&got));
    }
    // Every document has the FineWeb columns.
    for d in docs(&out.path().join("crawl.parquet")) {
        assert!(d.id.starts_with("<urn:uuid:"), "{}", d.id);
        assert_eq!(d.dump.as_deref(), Some("FIXTURE-2024-10"));
        assert_eq!(d.date.as_deref(), Some("2024-03-01T12:00:00Z"));
        assert!(
            d.file_path
                .as_deref()
                .is_some_and(|p| p.ends_with("crawl.warc.gz"))
        );
    }
}

#[test]
fn pages_in_every_language_lose_their_boilerplate() {
    let (out, _) = run_local(&root().join("fixtures/warc/crawl.warc.gz"), &config());
    let got = docs(&out.path().join("crawl.parquet"));
    let by_url: BTreeMap<String, String> = got
        .iter()
        .map(|d| (d.url.clone().unwrap_or_default(), d.text.clone()))
        .collect();
    for (lang, needle) in [
        ("en", "Fishermen push their boats"),
        ("de", "Die alte Stadt am Fluss erwacht langsam."),
        ("fr", "Les pêcheurs poussent leurs bateaux"),
        ("es", "Los pescadores empujan sus barcas"),
        ("ru", "Рыбаки сталкивают лодки"),
        ("zh", "渔民们就把船推进了灰色的河水里"),
        ("ja", "漁師たちは灰色の水に舟を押し出す"),
        ("ar", "يدفع الصيادون قواربهم"),
        ("he", "הדייגים דוחפים את סירותיהם"),
        ("hi", "मछुआरे अपनी नावें"),
        ("ko", "어부들은 배를 회색 물로 밀어낸다"),
    ] {
        let text = &by_url[&format!("https://news.example.{lang}/river-town")];
        assert!(text.contains(needle), "{lang}: {text}");
        for boiler in [
            "cookies",
            "Most read",
            "Great article",
            "All rights reserved",
            "Sport",
            "Tweet",
            "dataLayer",
            "font-family",
        ] {
            assert!(!text.contains(boiler), "{lang}: {boiler:?} left in {text}");
        }
        // Paragraphs stay on their own lines: title, paragraphs, one list item.
        let paragraphs = if matches!(lang, "en" | "de") { 6 } else { 3 };
        assert_eq!(text.lines().count(), paragraphs + 2, "{lang}: {text}");
    }
}

#[test]
fn charsets_declared_detected_and_mislabelled() {
    let (out, report) = run_local(&root().join("fixtures/warc/crawl.warc.gz"), &config());
    let got = docs(&out.path().join("crawl.parquet"));
    let text = |url: &str| {
        got.iter()
            .find(|d| d.url.as_deref() == Some(url))
            .map(|d| d.text.clone())
            .unwrap_or_else(|| panic!("{url} missing"))
    };
    assert!(text("https://latin1.example.fr/page").contains("Les pêcheurs poussent"));
    assert!(text("https://sjis.example.jp/page").contains("川沿いの古い町"));
    assert!(text("https://cp1251.example.ru/page").contains("Старый город на реке"));
    // A few invalid bytes in a UTF-8 page: replaced, the page kept.
    let bad = text("https://bytes.example.com/page");
    assert!(bad.contains("gr\u{FFFD}y water"), "{bad}");
    assert_eq!(report.stats.drops.get("url_blocklisted_domain"), Some(&1));
    assert_eq!(report.stats.drops.get("http_status_not_200"), Some(&1));
    assert_eq!(report.stats.drops.get("not_html"), Some(&1));
    assert_eq!(report.stats.drops.get("warc_revisit"), Some(&1));
    assert_eq!(report.stats.drops.get("empty_text"), Some(&1));
}

#[test]
fn broken_records_are_counted_and_their_neighbours_kept() {
    let (out, report) = run_local(&root().join("fixtures/warc/broken.warc.gz"), &config());
    let got = urls(&docs(&out.path().join("broken.parquet")));
    let want: Vec<String> = [
        "https://good.example.en/before-truncation",
        "https://good.example.fr/after-truncation",
        // Its Content-Length is half the record: the next record's header shows where
        // it ends, and the block is a whole HTTP message, so it is kept.
        "https://good.example.es/wrong-length",
        "https://good.example.ru/after-wrong-length",
        "https://good.example.ko/between-garbage",
        "https://good.example.zh/after-garbage",
        "https://good.example.ar/last",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
    let d = &report.stats.drops;
    let counts = &report.stats.counts;
    // One record is lost to damage: the member cut short. The inflater runs on into
    // the next member's bytes and stops at a back-reference before the start of the
    // output (zlib-rs; the earlier backend took it and then failed the CRC, and the
    // record read as ending before its Content-Length).
    // The raw bytes between two members and the garbage inside one hold no record:
    // they are counted, with their bytes, but are not dropped documents.
    let lost =
        d.get("corrupt_compression").unwrap_or(&0) + d.get("bad_content_length").unwrap_or(&0);
    assert_eq!(lost, 1, "{d:?}");
    assert_eq!(counts.get("corrupt_compression"), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get("garbage_between_records"),
        Some(&1),
        "{counts:?}"
    );
    assert!(
        counts.get("resync_skipped_bytes").is_some_and(|&n| n > 0),
        "{counts:?}"
    );
    assert_eq!(d.get("empty_record"), Some(&1), "{d:?}");
    assert_eq!(d.get("no_http_headers"), Some(&1), "{d:?}");
    assert!(report.stats.balanced());
}

fn record(id: &str, uri: &str, block: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{id}>\r\nWARC-Date: 2024-03-01T12:00:00Z\r\nWARC-Target-URI: {uri}\r\nContent-Type: application/http; msgtype=response\r\nContent-Length: {}\r\n\r\n",
        block.len()
    )
    .into_bytes();
    out.extend_from_slice(block);
    out.extend_from_slice(b"\r\n\r\n");
    out
}

fn http(body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    w.write_all(bytes).expect("gzip");
    w.finish().expect("gzip")
}

/// A WARC of one huge page between two small ones, one gzip member per record.
fn sandwich(dir: &Path, name: &str, huge: &[u8]) -> PathBuf {
    let small = http(b"<html><body><p>A small page with a sentence.</p></body></html>");
    let mut file = gz(&record("1", "https://a.example/1", &small));
    file.extend(gz(&record("2", "https://a.example/huge", &http(huge))));
    file.extend(gz(&record("3", "https://a.example/3", &small)));
    let path = dir.join(name);
    std::fs::write(&path, file).expect("write warc");
    path
}

#[test]
fn a_50_mib_single_line_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut page = b"<html><body><p>".to_vec();
    while page.len() < 50 << 20 {
        page.extend_from_slice(b"one long line of words <b>without</b> any newline &amp; ");
    }
    page.extend_from_slice(b"</p></body></html>");
    let input = sandwich(dir.path(), "huge.warc.gz", &page);

    // Over the default cap of 10 MiB: dropped with a reason, neighbours kept.
    let (out, report) = run_local(&input, &config());
    assert_eq!(report.stats.drops.get("oversized_record"), Some(&1));
    assert_eq!(urls(&docs(&out.path().join("huge.parquet"))).len(), 2);

    // With the cap raised the page is parsed and extracted, as one line.
    let cfg = Config {
        max_page_bytes: 64 << 20,
        ..config()
    };
    let (out, report) = run_local(&input, &cfg);
    assert_eq!(report.stats.docs_out, 3, "{:?}", report.stats);
    let got = docs(&out.path().join("huge.parquet"));
    assert!(got[1].text.len() > 40 << 20);
    assert_eq!(got[1].text.lines().count(), 1);
}

#[test]
fn a_page_with_100k_open_tags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut page = b"<html><body>".to_vec();
    for i in 0..100_000 {
        page.extend_from_slice(if i % 2 == 0 { b"<div>" } else { b"<span>" });
    }
    page.extend_from_slice(b"<p>Deep inside the nesting there is a sentence.</p>");
    let input = sandwich(dir.path(), "deep.warc.gz", &page);
    let (out, report) = run_local(&input, &config());
    assert_eq!(report.stats.docs_out, 3, "{:?}", report.stats);
    let got = docs(&out.path().join("deep.parquet"));
    assert_eq!(got[1].text, "Deep inside the nesting there is a sentence.");

    // A tight work budget drops it as too complex instead.
    let cfg = Config {
        max_tags: 50_000,
        ..config()
    };
    let (_, report) = run_local(&input, &cfg);
    assert_eq!(report.stats.drops.get("too_complex"), Some(&1));
}

/// A crawl in the WARC/0.18 dialect (fixtures/warc-old/make.py): LF line ends, one
/// LF between records, lengths that count CRs that are not there, characters instead
/// of bytes, or run past the end. Every whole page is kept; the one response whose
/// HTTP head never ends is counted.
#[test]
fn warc_0_18_records_with_wrong_lengths_are_kept() {
    let input = root().join("fixtures/warc-old/clueweb-style.warc.gz");
    let (out, report) = run_local(&input, &config());
    let got = docs(&out.path().join("clueweb-style.parquet"));
    let want: Vec<String> = ["en", "de", "fr", "ja", "ar", "ru", "es"]
        .iter()
        .map(|l| format!("http://old.example.{l}/river-town"))
        .chain(["http://old.example.zh/last".to_string()])
        .collect();
    assert_eq!(urls(&got), want);
    let d = &report.stats.drops;
    assert_eq!(d.get("bad_content_length"), Some(&1), "{d:?}");
    assert_eq!(d.values().sum::<u64>(), 1, "{d:?}");
    assert_eq!(report.stats.counts.get("warc_warcinfo"), Some(&1));
    assert!(report.stats.balanced());
    // Each page's text is whole: its last paragraph is there.
    for doc in &got {
        assert!(
            doc.text.lines().count() >= 3,
            "{}: {:?}",
            doc.url.as_deref().unwrap_or(""),
            doc.text
        );
    }
}

/// Target URIs from outside: one with a NUL byte is dropped as `bad_target_uri`; one
/// of 100 KB makes a WARC header over the 64 KiB cap, dropped as `bad_warc_header`;
/// one of 16 KB is stored whole. The records around them are kept.
#[test]
fn hostile_target_uris() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = http(b"<p>A fine page with enough text to keep.</p>");
    let long_16k = format!("https://a.example/{}", "x".repeat(16 << 10));
    let mut file = record("1", "https://a.example/nul\0byte", &page);
    file.extend(record(
        "2",
        &format!("https://a.example/{}", "y".repeat(100 << 10)),
        &page,
    ));
    file.extend(record("3", &long_16k, &page));
    file.extend(record("4", "https://a.example/ok", &page));
    std::fs::write(dir.path().join("u.warc"), file).expect("write");
    let (out, report) = run_local(&dir.path().join("u.warc"), &config());
    let d = &report.stats.drops;
    assert_eq!(d.get("bad_target_uri"), Some(&1), "{d:?}");
    assert_eq!(d.get("bad_warc_header"), Some(&1), "{d:?}");
    assert!(report.stats.balanced());
    assert_eq!(
        urls(&docs(&out.path().join("u.parquet"))),
        vec![long_16k, "https://a.example/ok".to_string()]
    );
}

#[test]
fn zero_length_and_headerless_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut file = record("1", "https://a.example/zero", b"");
    file.extend(record(
        "2",
        "https://a.example/raw",
        b"<html><p>no headers</p>",
    ));
    file.extend(record(
        "3",
        "https://a.example/ok",
        &http(b"<p>A fine page with text.</p>"),
    ));
    std::fs::write(dir.path().join("z.warc"), file).expect("write");
    let (out, report) = run_local(&dir.path().join("z.warc"), &config());
    assert_eq!(report.stats.drops.get("empty_record"), Some(&1));
    assert_eq!(report.stats.drops.get("no_http_headers"), Some(&1));
    assert_eq!(
        urls(&docs(&out.path().join("z.parquet"))),
        vec!["https://a.example/ok"]
    );
}

/// `mill-extract` from `s3://<bucket>/crawl/` to `s3://<bucket>/text/`.
fn extract_on_s3(endpoint: &str, bucket: &str) -> std::process::Output {
    binary(vec![
        "--input".into(),
        format!("s3://{bucket}/crawl/"),
        "--output".into(),
        format!("s3://{bucket}/text/"),
        "--log-format".into(),
        "json".into(),
    ])
    .env("AWS_ENDPOINT_URL", endpoint)
    .output()
    .expect("run mill-extract")
}

#[test]
fn extraction_from_and_to_s3() {
    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-extract") else {
        return;
    };
    let base = Location::parse(&format!("s3://{bucket}/")).expect("address");
    for name in ["crawl.warc.gz", "broken.warc.gz"] {
        storage
            .put(&base.join(&format!("crawl/{name}")), &fixture(name))
            .expect("upload");
    }
    let output = extract_on_s3(&endpoint, &bucket);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let local_dir = tempfile::tempdir().expect("tempdir");
    for name in ["crawl.warc.gz", "broken.warc.gz"] {
        std::fs::write(local_dir.path().join(name), fixture(name)).expect("copy");
    }
    let (local, _) = run_local(local_dir.path(), &config());
    for stem in ["crawl", "broken"] {
        let remote = read_all_documents(&storage, &base.join(&format!("text/{stem}.parquet")))
            .expect("read S3 output");
        let here = docs(&local.path().join(format!("{stem}.parquet")));
        let texts = |d: &[Document]| -> Vec<(String, String)> {
            d.iter().map(|d| (d.id.clone(), d.text.clone())).collect()
        };
        assert_eq!(texts(&remote), texts(&here), "{stem}");
        assert!(!remote.is_empty());
    }
    assert!(
        storage
            .exists(&base.join("text/_done/crawl.json"))
            .expect("marker")
    );
}

/// A small tmpfs mounted for a test (CI runs as root); unmounted on drop. `None`
/// (test skipped) where mounting is not allowed, except under CI.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok || std::env::var_os("CI").is_none(),
            "CI must be able to mount a tmpfs"
        );
        if !ok {
            eprintln!("cannot mount a tmpfs here (not root?): test skipped");
        }
        ok.then_some(Tmpfs(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn remount(&self, options: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(self.path())
            .status()
            .expect("mount");
        assert!(status.success(), "remount {options}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// The stage's run into `output` as the binary, with its stdout and stderr.
fn extract_into(input: &Path, output: &Path) -> std::process::Output {
    binary(vec![
        "--input".into(),
        input.to_string_lossy().into_owned(),
        "--output".into(),
        output.to_string_lossy().into_owned(),
        "--threads".into(),
        "1".into(),
        "--log-format".into(),
        "json".into(),
    ])
    .output()
    .expect("run mill-extract")
}

/// The files of an output folder that a reader sees: outputs and markers, not the
/// hidden temporaries or the start notes.
fn visible(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    pipeline::testing::snapshot(dir)
        .into_iter()
        .filter(|(k, _)| !k.split('/').any(|p| p.starts_with('.')))
        .collect()
}

/// Disk full, then a read-only output: the run fails at once with an error naming the
/// output and the cause; no output of the failed input is visible and it has no
/// marker; a rerun with room gives the output of a clean run, byte for byte.
#[test]
fn disk_full_and_read_only_output() {
    let Some(fs) = Tmpfs::mount("20m") else {
        return;
    };
    let inputs = tempfile::tempdir().expect("tempdir");
    let crawl = fixture("crawl.warc.gz");
    let many: Vec<u8> = (0..40).flat_map(|_| crawl.iter().copied()).collect();
    for i in 0..6 {
        std::fs::write(inputs.path().join(format!("c{i}.warc.gz")), &many).expect("write");
    }
    let clean = tempfile::tempdir().expect("tempdir");
    let out = extract_into(inputs.path(), clean.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = visible(clean.path());
    let per_input = want
        .iter()
        .filter(|(k, _)| k.ends_with(".parquet"))
        .map(|(_, v)| v.len())
        .max()
        .expect("an output");

    // Leave room for about two and a half inputs' outputs.
    let ballast = fs.path().join("ballast");
    let output = fs.path().join("out");
    let rerun_equals_clean = |what: &str| {
        let out = extract_into(inputs.path(), &output);
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(visible(&output) == want, "{what} differs from a clean run");
    };
    let total = 20 << 20;
    let room = per_input * 5 / 2 + (64 << 10);
    std::fs::write(&ballast, vec![0u8; total - room]).expect("ballast");
    let out = extract_into(inputs.path(), &output);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a full disk went unnoticed");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(
        stderr.contains(&*output.to_string_lossy()),
        "the error names the output: {stderr}"
    );
    let partial = visible(&output);
    for (name, bytes) in &partial {
        assert_eq!(
            want.get(name),
            Some(bytes),
            "{name}: partial or different output visible"
        );
    }
    let stems = |m: &BTreeMap<String, Vec<u8>>, dir: &str, ext: &str| -> Vec<String> {
        m.keys()
            .filter_map(|k| k.strip_prefix(dir)?.strip_suffix(ext).map(str::to_string))
            .collect()
    };
    // A marker only for inputs whose output is whole, and not all of them made it.
    assert_eq!(
        stems(&partial, "_done/", ".json"),
        stems(&partial, "", ".parquet")
    );
    assert!(
        stems(&partial, "_done/", ".json").len() < 6,
        "{:?}",
        partial.keys()
    );

    std::fs::remove_file(&ballast).expect("remove ballast");
    rerun_equals_clean("the rerun with room");

    // Read-only: the same promises, and a rerun after remounting read-write.
    std::fs::remove_dir_all(&output).expect("clear");
    std::fs::create_dir_all(&output).expect("output folder");
    fs.remount("ro");
    let out = extract_into(inputs.path(), &output);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(stderr.contains(&*output.to_string_lossy()), "{stderr}");
    assert!(
        !stderr.to_ascii_lowercase().contains("retry"),
        "retried: {stderr}"
    );
    fs.remount("rw");
    assert!(visible(&output).is_empty());
    rerun_equals_clean("the rerun after read-only");
}

/// Keys under the input prefix that could name an output outside the output prefix
/// (`..` and `.` segments, a doubled `/`) or garble a log line (a control character)
/// are refused, counted by reason and logged; nothing is written outside the output.
#[test]
fn unsafe_input_keys_are_refused_and_counted() {
    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-extract-keys") else {
        return;
    };
    let base = Location::parse(&format!("s3://{bucket}/")).expect("address");
    let keys = [
        "crawl/ok.warc.gz",
        "crawl/../evil.warc.gz",
        "crawl/sub/./dot.warc.gz",
        "crawl//lead.warc.gz",
        "crawl/bell\u{7}.warc.gz",
    ];
    for key in keys {
        storage
            .put(&base.join(key), &fixture("crawl.warc.gz"))
            .expect("upload");
    }
    let before: Vec<String> = storage
        .list(&base)
        .expect("list")
        .into_iter()
        .map(|m| m.relative)
        .collect();
    assert_eq!(
        before.len(),
        keys.len(),
        "the server keeps every key as given: {before:?}"
    );
    let output = extract_on_s3(&endpoint, &bucket);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for line in [
        "input refused input_name_control_character: 1",
        "input refused input_name_dot_segment: 2",
        "input refused input_name_empty_segment: 1",
    ] {
        assert!(stdout.contains(line), "{line} missing from:\n{stdout}");
    }
    assert!(stdout.contains("1 inputs processed"), "{stdout}");
    // Each refusal is logged with its reason and the name escaped on one line.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("input refused"))
        .collect();
    assert_eq!(warnings.len(), 4, "{stderr}");
    assert!(
        warnings.iter().any(|l| l.contains("bell\\\\u{7}")),
        "{warnings:?}"
    );
    // Nothing new outside text/, and text/ holds only what ok.warc.gz made.
    let after: Vec<String> = storage
        .list(&base)
        .expect("list")
        .into_iter()
        .map(|m| m.relative)
        .filter(|k| !before.contains(k))
        .collect();
    assert!(!after.is_empty());
    for key in &after {
        assert!(key.starts_with("text/"), "{key} written outside the output");
        assert!(!key.contains(".."), "{key}");
        assert!(
            key.contains("ok")
                || key.starts_with("text/_stats")
                || key.starts_with("text/_started"),
            "{key} comes from a refused input"
        );
    }
}

/// Title and text of a page fixture (`fixtures/pages/<name>.html`), through the stage's
/// own entry point; compared with `fixtures/expected/pages/<name>.txt`.
fn page_fixture(name: &str) -> String {
    let path = root().join(format!("fixtures/pages/{name}.html"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let stage = extract::Extract::new(&Config::default());
    let page = stage
        .page_of(&bytes, None, &format!("https://{name}.example/"))
        .unwrap_or_else(|reason| panic!("{name}: dropped as {reason}"));
    let got = format!(
        "title: {}\n\n{}\n",
        page.title.as_deref().unwrap_or("-"),
        page.text
    );
    golden(&format!("pages/{name}.txt"), &got);
    page.text
}

/// Each failure class of real pages: the text is there, the chrome is not.
#[test]
fn failure_classes_of_real_pages() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            // MediaWiki's Vector skin: `mw-hide-empty-elt` on the body, sticky-header
            // classes on <html>, the article in `mw-parser-output`.
            "mediawiki-vector",
            &[
                "A tidal mill is a water mill",
                "History",
                "- Some pumped water out of mines.",
                "head of water.",
            ],
            &[
                "Jump to content",
                "Main page",
                "Contents",
                "12 languages",
                "From Riverpedia",
                "Categories",
                "last edited",
                "Privacy policy",
                "[",
                "edit",
            ],
        ),
        (
            // A 2008-style layout: text in <td>/<font>/<br>, no <p>.
            "table-layout",
            &[
                "Storm closes the old pier",
                "Engineers from the council",
                "The pier was built in 1894",
            ],
            &["Sport", "Letters", "All rights reserved", "Contact us"],
        ),
        (
            "no-body",
            &[
                "Notes on sourdough starters",
                "A starter is flour and water",
                "- Use unbleached flour.",
            ],
            &[],
        ),
        (
            // <frameset> with the text in <noframes>.
            "frameset",
            &[
                "Valley Orchard Society",
                "forty old apple and pear trees",
                "autumn fair",
            ],
            &[],
        ),
        (
            // A page builder theme: body and wrapper classes full of "header", "sidebar",
            // "nav", "form-field".
            "themed-body",
            &[
                "A reading room does not need to be large",
                "Shelves and storage",
                "not bought yet.",
            ],
            &[
                "Free delivery",
                "Home",
                "Anna Linden",
                "Book a consultation",
                "newsletter",
            ],
        ),
        (
            // Each post is a repeated block with a user card, a signature and actions.
            "forum-thread",
            &[
                "Which wood lasts longest without paint?",
                "Cedar will outlast oak",
                "I will go with cedar",
            ],
            &[
                "Well-known member",
                "Joined",
                "1,204",
                "Measure twice",
                "Like",
                "Reply",
                "timber_tom and 3 others",
                "Members online",
                "Log in",
                "Terms and rules",
            ],
        ),
        (
            "product",
            &[
                "Thrown by hand on the wheel",
                "dishwasher safe",
                "- Capacity: 350 ml",
            ],
            &[
                "Free shipping",
                "Mugs",
                "Add to cart",
                "Quantity",
                "Share",
                "You may also like",
                "Side Plate",
                "Moss green (12)",
                "Sign up",
                "Skip to content",
            ],
        ),
    ];
    for (name, present, absent) in cases {
        let text = page_fixture(name);
        for p in *present {
            assert!(text.contains(p), "{name}: {p:?} missing from\n{text}");
        }
        for a in *absent {
            assert!(!text.contains(a), "{name}: {a:?} left in\n{text}");
        }
    }
}

/// The text of `html` at `url` extracted with `favor = "<favor>"` (a drop is a failure).
/// The text the default configuration extracts from a page (which it must keep).
fn default_text(html: &[u8], url: &str) -> String {
    extract::Extract::new(&Config::default())
        .page_of(html, None, url)
        .expect("kept")
        .text
}

fn text_with_favor(favor: &str, html: &[u8], url: &str) -> String {
    let config: Config = toml::from_str(&format!("favor = \"{favor}\"")).expect("config");
    extract::Extract::new(&config)
        .page_of(html, None, url)
        .unwrap_or_else(|reason| panic!("{favor}: dropped as {reason}"))
        .text
}

/// `favor`: a short blog post with a longer comment section (a page we wrote in the
/// shape of a 2012 WordPress blog). `balanced` keeps the comments (they outweigh the
/// post, as the posts of a thread do); `precision` removes them, as FineWeb's
/// trafilatura does; `recall` keeps them. The same comments at a forum's address are
/// the thread and stay in every mode. The `og:title`'s no-break and double spaces are
/// folded.
#[test]
fn favor_decides_readers_comments() {
    let path = root().join("fixtures/pages/blog-comments.html");
    let bytes = std::fs::read(&path).expect("fixture");
    let run = |favor: &str, url: &str| {
        let config: Config = toml::from_str(&format!("favor = \"{favor}\"")).expect("config");
        extract::Extract::new(&config)
            .page_of(&bytes, None, url)
            .unwrap_or_else(|reason| panic!("{favor}: dropped as {reason}"))
    };
    let blog = "https://garden-diary.example/2012/04/notes-week-12/";
    let post = "The broad beans finally came up this week";
    let comment = "does anyone sow peas in gutters";
    for (favor, keeps_comments) in [("balanced", true), ("precision", false), ("recall", true)] {
        let page = run(favor, blog);
        assert!(page.text.contains(post), "{favor}: {}", page.text);
        assert!(page.text.contains("cover the rest with straw"), "{favor}");
        assert_eq!(
            page.text.contains(comment),
            keeps_comments,
            "{favor}: {}",
            page.text
        );
        assert!(!page.text.contains("Copyright"), "{favor}");
        assert_eq!(
            page.title.as_deref(),
            Some("Notes from the allotment: week 12"),
            "{favor}"
        );
    }
    let thread = run(
        "precision",
        "https://garden-diary.example/forum/notes-week-12/",
    );
    assert!(thread.text.contains(comment), "{}", thread.text);
    // A thread whose posts are comment-marked, with no prose of its own beside them
    // (only a title), at an address without a discussion word: the posts are the page
    // in every mode.
    let post = |who: &str, text: &str| {
        format!("<li class=\"comment\"><div class=\"comment-author\">{who}</div><p>{text}</p></li>")
    };
    let thread_page = format!(
        "<html><body><nav><a href=/>Home</a></nav><main><h1>Best first telescope?</h1>\
         <ol class=\"comment-list\">{}{}{}</ol></main></body></html>",
        post(
            "ana",
            "I am looking for a first telescope for the garden, under three hundred pounds."
        ),
        post(
            "ben",
            "A small Dobsonian is the usual answer: simple to set up, and bright views."
        ),
        post(
            "cy",
            "Start with binoculars on a tripod and learn the sky before spending more."
        )
    );
    for favor in ["balanced", "precision"] {
        let text = text_with_favor(favor, thread_page.as_bytes(), "https://club.example/t1234");
        assert!(text.contains("A small Dobsonian"), "{favor}: {text}");
    }
    assert!(
        toml::from_str::<Config>("favor = \"speed\"").is_err(),
        "an unknown favor is an error"
    );
}

/// A sidebar beside the article that holds more text than the article (a reviews
/// widget on a shop page, a blog's long blurb column) is still a sidebar: it goes in
/// every `favor`, where the wrapper guard used to keep it for its size.
#[test]
fn a_large_sidebar_beside_an_article_goes() {
    let review = |n: u32| {
        format!(
            "<p>Review {n}: the shop answered within a day and the parcel came well packed, \
             five stars from a happy customer in the north.</p>"
        )
    };
    let page = format!(
        "<html><body><div class=\"page\"><article><h1>Osprey pack rental</h1>\
         <p>Rent a 65 litre pack for a week in the hills: the frame carries thirty to fifty \
         pounds, the hip belt adjusts, and the rain cover is included in the price.</p>\
         <p>Pick it up at the shop on Friday evening and bring it back on Monday, cleaned \
         and dry; we check every buckle and strap before the next rental.</p>\
         <p>Sizes: small, medium and large, fitted at the counter in five minutes by our staff.</p></article>\
         <div class=\"sidebar\"><h3>What our customers say</h3>{}</div></div>\
         </body></html>",
        (1..=8).map(review).collect::<String>()
    );
    for favor in ["balanced", "precision", "recall"] {
        let text = text_with_favor(favor, page.as_bytes(), "https://rentals.example/pack");
        assert!(
            text.contains("the rain cover is included"),
            "{favor}: {text}"
        );
        assert!(!text.contains("Review 3"), "{favor}: {text}");
    }
}

/// A short post beside a heavier column that no class names (a 2012 blog theme: a
/// column of book blurbs and retailer labels beside a three-paragraph post). The post
/// holds little of the page's text but most of its prose: it is the root in every
/// `favor`, and the column goes. When the column has prose of its own (blurbs of
/// 40 bytes and more), `balanced` keeps the page whole and `precision` still takes
/// the post.
#[test]
fn a_short_post_beside_a_heavier_column_is_the_root() {
    let label = |n: u32| format!("<div>Find book {n} at a shop near you</div>");
    let blurb = |n: u32| {
        format!(
            "<div>Blurb {n}: a book about the small things that make a neighbourhood shop              worth the walk, now in paperback.</div>"
        )
    };
    let page = |blurbs: u32| {
        format!(
            "<html><body><div id=\"alpha\"><h2>Books</h2>{}{}</div>\
             <div id=\"beta\"><h3>Gift cards that expire</h3><div class=\"entry-body\">\
             <p>It is easier to love a shop when the shop loves you back, and that is worth \
             remembering the next time a customer annoys you.</p>\
             <p>Or when you are writing a rule that punishes a few people and annoys all of \
             the others, every single day they come in.</p>\
             <p>So tell me again why the gift cards you sell have an expiry date on them.</p>\
             </div></div></body></html>",
            (1..=30).map(label).collect::<String>(),
            (1..=blurbs).map(blurb).collect::<String>()
        )
    };
    let run = |favor: &str, html: &str| {
        text_with_favor(
            favor,
            html.as_bytes(),
            "https://shopkeeper.example/2012/11/gift-cards",
        )
    };
    let labels_only = page(0);
    for favor in ["balanced", "precision", "recall"] {
        let text = run(favor, &labels_only);
        assert!(
            text.contains("why the gift cards you sell"),
            "{favor}: {text}"
        );
        assert!(!text.contains("Find book 7"), "{favor}: {text}");
    }
    let with_blurbs = page(4);
    let balanced = run("balanced", &with_blurbs);
    assert!(
        balanced.contains("why the gift cards you sell"),
        "{balanced}"
    );
    assert!(balanced.contains("Blurb 2"), "{balanced}");
    let precision = run("precision", &with_blurbs);
    assert!(
        precision.contains("why the gift cards you sell"),
        "{precision}"
    );
    assert!(!precision.contains("Blurb 2"), "{precision}");
    assert!(!precision.contains("Find book 7"), "{precision}");
}

/// A short post (under 250 bytes) in a content-marked element beside a sidebar and a
/// footer that class names mark (a 2012 blog: "About this magazine", "Subscribe").
/// `balanced` takes the more lenient pass, which gives over twice the text, sidebar
/// included; `precision`, the default, keeps the post alone: a lenient pass must give
/// sixteen times a content-marked element's text to replace it.
#[test]
fn a_short_post_is_not_replaced_by_its_sidebar() {
    let page = "<html><body><div id=\"wrap\"><div class=\"post\"><h2>Issue one is out</h2>\
        <div class=\"entry-content\"><p>We have finally released issue one, with a new website to go with it.</p>\
        <p>Thanks to all who wrote for it.</p></div></div>\
        <div class=\"sidebar\"><div class=\"widget\"><h3>About this magazine</h3><p>A print magazine \
        of the best essays written by programmers, edited by volunteers every month.</p></div>\
        <div class=\"widget\"><h3>Subscribe</h3><p>Subscriptions start from twenty-nine pounds a year \
        and include every back issue as a download.</p></div></div>\
        <div class=\"footer\"><p>Published by a small press of two people who like paper more than \
        screens. Not affiliated with any news site.</p></div></div></body></html>";
    let url = "https://magazine.example/2012/06/issue-one";
    let default = default_text(page.as_bytes(), url);
    for (favor, text) in [
        (
            "precision",
            text_with_favor("precision", page.as_bytes(), url),
        ),
        ("default", default),
    ] {
        assert!(
            text.contains("finally released issue one"),
            "{favor}: {text}"
        );
        assert!(!text.contains("Subscriptions start"), "{favor}: {text}");
        assert!(!text.contains("small press"), "{favor}: {text}");
    }
    let balanced = text_with_favor("balanced", page.as_bytes(), url);
    assert!(
        balanced.contains("finally released issue one"),
        "{balanced}"
    );
    assert!(balanced.contains("Subscriptions start"), "{balanced}");
}

/// A news story that declares itself an article (`og:type`), followed inside its
/// container by a "From the archive" list of other stories' titles (a heading that
/// names no related list, which would go on its own), links of 30 bytes and
/// more (a 2012 news site's related-stories block, no class naming it). `precision`
/// drops what follows the story's last paragraph once two such titles are there;
/// `balanced` keeps them, and so does `precision` on a page that does not declare an
/// article (a listing's titles are its content). A list of links between two
/// paragraphs stays. A page declares an article with `og:type`, or with one element
/// that says it is a post (hAtom's `hentry`, a schema.org `Article` item); a blog's
/// index, one `hentry` per post, does not.
#[test]
fn related_stories_after_an_article_go() {
    let page_with = |og: &str, class: &str, before: &str| {
        format!(
            "<html><head>{og}<title>Harbour wall repaired</title></head><body>{before}<div id=\"main\" class=\"{class}\">\
             <h1>Harbour wall repaired before the winter storms</h1>\
             <p>Work on the old harbour wall finished on Friday, two weeks ahead of the \
             storms the forecasters expect at the end of the month.</p>\
             <p>Sources the council used:</p><ul><li><a href=/a>The engineers' survey of the harbour wall, 2011</a></li>\
             <li><a href=/b>The council's decision to fund the repair in full</a></li></ul>\
             <p>The fishermen, who had moved their boats to the next bay in October, can \
             bring them back next week, the harbour master said.</p>\
             <h3>From the archive</h3><ul>\
             <li><a href=/c>School bus timetable changes from Monday morning</a></li>\
             <li><a href=/d>Lifeboat crew called out twice in one night off the point</a></li>\
             <li><a href=/e>Market hall to open on Sundays through December</a></li></ul>\
             </div></body></html>"
        )
    };
    let url = "https://harbour-news.example/2012/11/wall";
    let og = "<meta property=\"og:type\" content=\"article\">";
    let schema = "post\" itemscope itemtype=\"https://schema.org/NewsArticle";
    let older = "<div class=\"post hentry\"><h2>Ferry fares</h2><p>An older post.</p></div>";
    // (what the page is, favor, the page, whether the related list goes)
    let cases = [
        ("og:type article", "precision", page_with(og, "", ""), true),
        ("og:type article", "balanced", page_with(og, "", ""), false),
        ("undeclared", "precision", page_with("", "", ""), false),
        (
            "one hentry",
            "precision",
            page_with("", "post hentry", ""),
            true,
        ),
        (
            "schema.org item",
            "precision",
            page_with("", schema, ""),
            true,
        ),
        (
            "blog index",
            "precision",
            page_with("", "post hentry", older),
            false,
        ),
    ];
    for (what, favor, html, goes) in cases {
        let text = text_with_favor(favor, html.as_bytes(), url);
        assert!(
            text.contains("bring them back next week"),
            "{what}, {favor}: {text}"
        );
        assert!(
            text.contains("The engineers' survey"),
            "{what}, {favor}: {text}"
        );
        assert_eq!(
            !text.contains("School bus timetable") && !text.contains("From the archive"),
            goes,
            "{what}, {favor}: {text}"
        );
    }
    // `precision` is the default.
    let text = default_text(page_with(og, "", "").as_bytes(), url);
    assert!(!text.contains("School bus timetable"), "{text}");
}

/// A short post whose body a class names (`entry-body`) beside an unnamed column of
/// book blurbs with more prose than the post (a 2012 blog theme). The post holds under
/// a fifth of the page's text and of its prose, too little for a container marked by
/// a tag or a bare `entry`; marked as a post's body, `precision` (the default) trusts
/// it from a tenth of the text or 15% of the prose, and the column goes. The same page
/// at a site's front page address keeps the column: a home page is not one post.
#[test]
fn a_named_post_body_is_the_root_beside_a_column_of_blurbs() {
    let page = |body_class: &str| {
        let blurb = |n: u32| {
            format!(
                "<div>Blurb {n}: the story of a village bakery that stayed open through three \
                 winters, now out in paperback.</div>"
            )
        };
        format!(
            "<html><body><div id=\"alpha\"><div class=\"entry\"><h3>Gift cards</h3>\
             <div class=\"{body_class}\"><p>It is easier to love a shop when the shop does \
             not punish you for the one time you forgot the receipt at home.</p>\
             <p>Why do the gift cards you sell expire after a year, when the money never \
             does?</p></div></div></div><div id=\"beta\">{}</div></body></html>",
            (1..=8).map(blurb).collect::<String>()
        )
    };
    let post = "why do the gift cards you sell expire";
    let url = "https://small-shops.example/2012/05/gift-cards.html";
    let named = page("entry-body");
    let text = default_text(named.as_bytes(), url);
    assert!(text.to_lowercase().contains(post), "{text}");
    assert!(!text.contains("Blurb 3"), "{text}");
    let unnamed = text_with_favor("precision", page("copy").as_bytes(), url);
    assert!(unnamed.to_lowercase().contains(post), "{unnamed}");
    assert!(unnamed.contains("Blurb 3"), "{unnamed}");
    let front = text_with_favor(
        "precision",
        named.as_bytes(),
        "https://small-shops.example/",
    );
    assert!(front.contains("Blurb 3"), "{front}");
}

/// A story whose body a class names (`entry-content`) ends with "Also on our site:"
/// and a slideshow of other stories inside a `promo` element, each slide a caption
/// paragraph, with more prose than the story. A class rule never removes an element
/// holding most of the page's prose (a shop's `product` grid is its content), so the
/// captions stayed. With `precision`, the default, a promotion or related-links
/// element inside a post's body with 1,000 bytes of prose besides goes however much
/// it holds; `balanced` keeps it, and so does `precision` when the story is short.
#[test]
fn a_slideshow_promo_inside_a_story_goes() {
    let caption = |n: u32| {
        format!(
            "<li><p>Slide {n}: a runner crosses the line in the evening heat of the stadium, \
             arms wide, as the crowd rises behind her for the final lap of the relay.</p></li>"
        )
    };
    let story = |n: usize| {
        format!(
            "<p>Paragraph {n} of the story: the sprinter won the final by two tenths of a \
             second, the widest margin in that event since the games of 1984.</p>"
        )
    };
    let page = |paragraphs: usize| {
        format!(
            "<html><body><div class=\"post\"><h1>Sprinter keeps her title</h1>\
             <div class=\"entry-content\">{}<p>Also on our site:</p>\
             <div class=\"promo_holder\"><ul class=\"slideshow\">{}</ul></div></div></div>\
             </body></html>",
            (1..=paragraphs).map(story).collect::<String>(),
            (1..=16).map(caption).collect::<String>()
        )
    };
    let url = "https://sport-news.example/2012/08/09/sprinter";
    let long = page(10);
    let text = default_text(long.as_bytes(), url);
    assert!(text.contains("Paragraph 9 of the story"), "{text}");
    assert!(!text.contains("Slide 3"), "{text}");
    let balanced = text_with_favor("balanced", long.as_bytes(), url);
    assert!(balanced.contains("Slide 3"), "{balanced}");
    let short = text_with_favor("precision", page(3).as_bytes(), url);
    assert!(short.contains("Paragraph 2 of the story"), "{short}");
    assert!(short.contains("Slide 3"), "{short}");
}

/// A story in a content-marked block with a "Related stories" heading and three
/// titles of other stories in the middle of it, and a "Most popular" list after it
/// (no class names either list). With `precision`, the default, on a page with an
/// article, a heading that names related links goes with the lines after it up to the
/// next paragraph: both lists go, the paragraph between them stays. `balanced` keeps
/// them, and so does `precision` at a site's front page, where "Latest news" and the
/// like are the content.
#[test]
fn sections_of_related_links_go_with_their_heading() {
    let titles = |from: u32| {
        (from..from + 3)
            .map(|n| {
                format!("<li><a href=/s{n}>Headline of another story number {n} this week</a></li>")
            })
            .collect::<String>()
    };
    let page = format!(
        "<html><body><div class=\"main-content\"><h1>Lighthouse keeper retires</h1>\
         <p>After forty years on the rock, the last keeper of the north lighthouse handed \
         over the keys on Saturday to the trust that will run it as a museum.</p>\
         <h3>Related stories</h3><ul>{}</ul>\
         <p>The lamp itself has been automatic since 1998, but he stayed on to keep the \
         building, the fog bell and the logbooks in order, he said.</p>\
         <h3>Most popular:</h3><ul>{}</ul></div></body></html>",
        titles(1),
        titles(4)
    );
    let url = "https://coast-news.example/2012/10/keeper";
    let text = default_text(page.as_bytes(), url);
    assert!(text.contains("handed over the keys"), "{text}");
    assert!(text.contains("the fog bell"), "{text}");
    for gone in [
        "Related stories",
        "story number 2",
        "Most popular",
        "story number 5",
    ] {
        assert!(!text.contains(gone), "{gone}: {text}");
    }
    let balanced = text_with_favor("balanced", page.as_bytes(), url);
    assert!(balanced.contains("story number 2"), "{balanced}");
    assert!(balanced.contains("story number 5"), "{balanced}");
    let front = text_with_favor("precision", page.as_bytes(), "https://coast-news.example/");
    assert!(front.contains("story number 5"), "{front}");
}

/// A theme that puts the post in an `<aside class="blogPost">` (its body a
/// `blogContent`), beside two `<aside>` columns of teasers that together hold more
/// prose than the post. Landmarks are weighed by prose, so the post's aside went with
/// the columns, the pass was empty and a lenient one gave the teasers with the post.
/// With `precision`, the default, a landmark that holds an article (a content-marked
/// element with 300 bytes of prose) is not weighed by its prose, and the post is the
/// text; `balanced` keeps the teasers.
#[test]
fn a_post_inside_an_aside_stays() {
    let teaser = |n: u32| {
        format!(
            "<p>Teaser {n}: a celebrity was seen at the airport with a new hat, and the \
             internet has opinions about the colour of its ribbon.</p>"
        )
    };
    let column = |from: u32| (from..from + 8).map(teaser).collect::<String>();
    let page = format!(
        "<html><body><div id=\"wrap\"><aside class=\"blogPost\"><h1>Village fete raises a \
         record sum</h1><div class=\"blogContent\"><p>The village fete raised more money on \
         Saturday than in any year since it began, thanks to the cake stall and the dog show.</p>\
         <p>The money goes to the roof of the village hall, which has leaked above the stage \
         since the storm two winters ago, the organisers said.</p><p>Next year the fete moves \
         to the school field, which has room for twice as many stalls.</p><p>The dog show \
         alone had forty entries, and the winner was a spaniel from the farm by the ford.</p>\
         </div></aside>\
         <aside class=\"topStories\">{}</aside><aside class=\"pageTwo\">{}</aside></div>\
         </body></html>",
        column(1),
        column(9)
    );
    let url = "https://village-news.example/2012/08/fete";
    let text = default_text(page.as_bytes(), url);
    assert!(text.contains("roof of the village hall"), "{text}");
    assert!(!text.contains("Teaser 3"), "{text}");
    let balanced = text_with_favor("balanced", page.as_bytes(), url);
    assert!(balanced.contains("Teaser 3"), "{balanced}");
}

/// A blog post that is a photo and its title, with no prose of its own, marked as
/// one post (hAtom's `hentry`), followed by a long comment section (`commentlist`).
/// Comments beside no prose used to be the page's content (as the posts of a thread
/// are). With `precision`, the default, a page with one post loses its comments
/// whatever the post holds; `balanced` keeps them, and so does `precision` on the same
/// page without the `hentry` (a thread under a short opening post).
#[test]
fn comments_under_a_photo_post_go() {
    let page = |post_class: &str| {
        let comment = |n: u32| {
            format!(
                "<li class=\"comment\"><div class=\"comment-author\">Reader {n}</div>\
                 <p>Comment {n}: what a beautiful picture of the harbour at dawn, it reminds me \
                 of the summers we spent there when the children were small.</p></li>"
            )
        };
        format!(
            "<html><body><div class=\"{post_class}\"><h2 class=\"entry-title\">Harbour at \
             dawn</h2><div class=\"entry-content\"><img src=\"/harbour.jpg\" alt=\"\"></div>\
             <div class=\"entry-meta\">by Ana on July 21, 2012</div></div>\
             <ol class=\"commentlist\">{}</ol></body></html>",
            (1..=8).map(comment).collect::<String>()
        )
    };
    let url = "https://photo-blog.example/2012/07/harbour-at-dawn";
    let post = page("post hentry");
    let text = default_text(post.as_bytes(), url);
    assert!(text.contains("Harbour at dawn"), "{text}");
    assert!(!text.contains("Comment 3"), "{text}");
    let balanced = text_with_favor("balanced", post.as_bytes(), url);
    assert!(balanced.contains("Comment 3"), "{balanced}");
    let unmarked = text_with_favor("precision", page("post").as_bytes(), url);
    assert!(unmarked.contains("Comment 3"), "{unmarked}");
}

/// A blog post of 2007 whose comments carry no class: a `<h2>` "Comments" (an empty
/// anchor inside it), then each comment a paragraph and a "Posted by:" line, all in the
/// same content-marked block as the post. With `precision`, the default, on a page
/// whose comments go beside its article, a comment section's heading after the post's
/// first paragraph ends the text; `balanced` keeps the comments, and so does
/// `precision` at a forum's address (there the comments are the thread), and a
/// section titled "Comments in the config file" stays.
#[test]
fn a_comment_section_without_classes_goes_with_its_heading() {
    let page = |heading: &str| {
        let comment = |n: u32| {
            format!(
                "<p>Reader comment {n}: thank you for all the years of posts about teaching \
                 and learning, they changed how I run my classes.</p>\
                 <p>Posted by: reader {n} | April 6, 2007 at 10:0{n} AM</p>"
            )
        };
        format!(
            "<html><body><div id=\"center\"><div class=\"content\">\
             <h2>My favourite graphs, and what comes next</h2>\
             <p>This blog has always been about helping people get better at what they love, \
             and the graphs below are the ones readers asked about most often.</p>\
             <p>I will take a break from writing here for a while, and I will read every \
             suggestion you leave about what to do with the blog next.</p>\
             <p>Posted by Kathy on April 6, 2007 | Permalink</p>\
             <h2><a id=\"comments\"></a>{heading}</h2>{}</div></div></body></html>",
            (1..=6).map(comment).collect::<String>()
        )
    };
    let url = "https://teaching-blog.example/2007/04/favourite-graphs.html";
    let comments = page("Comments");
    let text = default_text(comments.as_bytes(), url);
    assert!(text.contains("read every suggestion"), "{text}");
    assert!(text.contains("Posted by Kathy"), "{text}");
    assert!(!text.contains("Reader comment"), "{text}");
    assert!(!text.contains("Comments"), "{text}");
    let balanced = text_with_favor("balanced", comments.as_bytes(), url);
    assert!(balanced.contains("Reader comment 3"), "{balanced}");
    let forum = text_with_favor(
        "precision",
        comments.as_bytes(),
        "https://teaching.example/forum/threads/favourite-graphs",
    );
    assert!(forum.contains("Reader comment 3"), "{forum}");
    let section = text_with_favor(
        "precision",
        page("Comments in the config file").as_bytes(),
        url,
    );
    assert!(section.contains("Reader comment 3"), "{section}");
}

/// A story whose body a class names (`art-content`, as a 2012 portal's theme has it,
/// or a bare `entry`) inside the page's `role="main"` block, which also holds a column
/// of other stories, each a linked title and a teaser paragraph: the body holds about
/// half of the block, under the 60% that takes the root into a content-marked element.
/// With `precision`, the default, a content block of 1,000 bytes of prose or more
/// inside a wider one that is no post's body is the root from 40% of it, and the
/// teasers go; `balanced` keeps them, and so does `precision` when the body is short,
/// even at half of the block (three lines are no reason to drop the rest of it),
/// unless the page says it is an article (`og:type`: 300 bytes are enough). Inside
/// a post's body (`entry-content`), its first part (`entry-body`) is not the root at
/// that share: the part after it (`entry-more`) is the same article.
#[test]
fn a_story_body_inside_the_main_block_is_the_root() {
    let paragraph = |n: usize| {
        format!(
            "<p>Day {n}: the city's tram line reopened after a summer of work on the tracks, \
             and the first trams ran on time all morning, the operator said.</p>"
        )
    };
    let teaser = |n: u32| {
        format!(
            "<div><h4><a href=/s{n}>Other story number {n} from the city desk</a></h4><p>A \
             teaser of other story {n}: what the council decided about the bridges, the parks \
             and the new bus lanes, and what it will cost.</p></div>"
        )
    };
    let page = |class: &str, paragraphs: usize, teasers: u32| {
        format!(
            "<html><body><div class=\"bd\" role=\"main\"><h1>Trams run again</h1>\
             <div class=\"{class}\">{}</div><h3>Top stories</h3>{}</div></body></html>",
            (1..=paragraphs).map(paragraph).collect::<String>(),
            (1..=teasers).map(teaser).collect::<String>()
        )
    };
    let url = "https://city-news.example/2012/09/trams";
    for class in ["mod art-content", "entry"] {
        let long = page(class, 10, 10);
        let text = default_text(long.as_bytes(), url);
        assert!(text.contains("first trams ran on time"), "{class}: {text}");
        assert!(!text.contains("Other story number 3"), "{class}: {text}");
        assert!(!text.contains("teaser of other story"), "{class}: {text}");
        let balanced = text_with_favor("balanced", long.as_bytes(), url);
        assert!(
            balanced.contains("teaser of other story 3"),
            "{class}: {balanced}"
        );
        let short = text_with_favor("precision", page(class, 3, 3).as_bytes(), url);
        assert!(
            short.contains("first trams ran on time"),
            "{class}: {short}"
        );
        assert!(
            short.contains("teaser of other story 3"),
            "{class}: {short}"
        );
        let declared = page(class, 3, 3).replace(
            "<html>",
            "<html><head><meta property=\"og:type\" content=\"article\"></head>",
        );
        let declared = text_with_favor("precision", declared.as_bytes(), url);
        assert!(
            declared.contains("first trams ran on time"),
            "{class}: {declared}"
        );
        assert!(
            !declared.contains("teaser of other story"),
            "{class}: {declared}"
        );
    }
    let more = |n: usize| {
        format!(
            "<p>More {n}: the new timetable adds a tram every six minutes at peak hours, and \
             the night service runs on Fridays and Saturdays until two.</p>"
        )
    };
    let parts = format!(
        "<html><body><div class=\"entry-content\"><div class=\"entry-body\">{}</div>\
         <div class=\"entry-more\">{}</div></div></body></html>",
        (1..=10).map(paragraph).collect::<String>(),
        (1..=8).map(more).collect::<String>()
    );
    let text = default_text(parts.as_bytes(), url);
    assert!(text.contains("Day 9:"), "{text}");
    assert!(text.contains("More 7:"), "{text}");
}

/// An `<aside>` beside an article that holds most of the page's prose (a column of
/// teasers of other stories, each a paragraph): landmarks are weighed by prose, so the
/// aside used to stay as the page's wrapper. With `precision`, the default, an aside
/// beside an article with 300 bytes of prose goes, as a class-marked sidebar does;
/// `balanced` keeps it.
#[test]
fn an_aside_of_teasers_beside_an_article_goes() {
    let teaser = |n: u32| {
        format!(
            "<div><h4><a href=/t{n}>Road test {n}</a></h4><p>We drove the new hatchback {n} for \
             a week of school runs, motorway miles and one muddy field, and here is what we \
             learned about its boot, its seats and its thirst.</p></div>"
        )
    };
    let page = format!(
        "<html><body><div id=\"wrap\"><article><h1>Five point inspection: the estate</h1>\
         <p>The estate's boot swallows a pushchair and a week of shopping with room to \
         spare, and the rear seats fold flat with one pull of a strap.</p>\
         <p>Fuel economy on our mixed loop came to 38 miles per gallon, two short of the \
         brochure, which is closer than most cars we test this year.</p>\
         <p>The ride is firm on broken roads but quiet at speed, and the brakes pulled \
         straight and true in every stop we made on the wet test track.</p></article>\
         <aside><h3>More road tests</h3>{}</aside></div></body></html>",
        (1..=16).map(teaser).collect::<String>()
    );
    let url = "https://car-tests.example/2012/09/estate";
    let text = default_text(page.as_bytes(), url);
    assert!(text.contains("rear seats fold flat"), "{text}");
    assert!(!text.contains("muddy field"), "{text}");
    let balanced = text_with_favor("balanced", page.as_bytes(), url);
    assert!(balanced.contains("muddy field"), "{balanced}");
}

/// Comments that are `<article>`s of their own under a short post (a link aggregator's
/// thread, at an address without a discussion word) are the thread's posts:
/// `precision` keeps them, as `balanced` does. The same comments as list items without
/// `<article>` are a blog's comment section, and `precision` removes them.
#[test]
fn comments_that_are_articles_are_a_thread() {
    let page = |tag: &str| {
        let comment = |who: &str, text: &str| {
            format!(
                "<li class=\"comment\"><{tag} class=\"comment-node\"><div class=\"comment-author\">{who}</div>\
                 <div class=\"comment-text\"><p>{text}</p></div></{tag}></li>"
            )
        };
        format!(
            "<html><body><nav><a href=/>Home</a></nav><main><article class=\"post\">\
             <h1>Release notes for version 0.19</h1><div class=\"post-body\"><p>Here is our \
             regular update on what changed in this release of the server and the apps.</p></div>\
             </article><ul class=\"comments\">{}{}{}</ul></main></body></html>",
            comment(
                "ana",
                "The new search is much faster here, thanks for all the work on the index this month."
            ),
            comment(
                "ben",
                "Could the next release bring back the compact view? Many of us read on small phones."
            ),
            comment(
                "cy",
                "Upgraded our instance last night without trouble; the migration took four minutes."
            )
        )
    };
    let url = "https://links.example/post/21018";
    let thread = page("article");
    for favor in ["precision", "balanced"] {
        let text = text_with_favor(favor, thread.as_bytes(), url);
        assert!(text.contains("regular update"), "{favor}: {text}");
        assert!(text.contains("compact view"), "{favor}: {text}");
    }
    let blog = page("div");
    let text = text_with_favor("precision", blog.as_bytes(), url);
    assert!(text.contains("regular update"), "{text}");
    assert!(!text.contains("compact view"), "{text}");
}

/// The lines a 2012 blog theme puts under a post and beside it: the post's
/// `postmetadata` ("This entry was posted on … and is filed under …"), a "recent
/// posts" list of teasers, and a photo's credit line. Each goes; the post stays.
#[test]
fn post_metadata_recent_posts_and_credits_go() {
    let page = "<html><body><div id=\"content\"><div class=\"post\">\
        <h2>Rain gauges compared</h2><div class=\"entry\">\
        <p>We left four rain gauges on the same fence post for a month and read them every \
        morning before work, in all weathers.</p>\
        <p>The cheapest funnel gauge read within two millimetres of the council's station \
        over the whole month, which surprised us all.</p>\
        <p><img src=\"g.jpg\"><span class=\"photo-credit\">Photograph by the garden club \
        secretary, used with her kind permission</span></p>\
        <p>The digital one lost its signal twice, once in a thunderstorm.</p></div>\
        <p class=\"postmetadata alt\"><small>This entry was posted on Saturday, August \
        25th, 2012 at 12:23 am and is filed under Weather. You can follow any responses \
        to this entry through the RSS 2.0 feed.</small></p></div>\
        <div class=\"recent-posts\"><h3>Recent posts</h3>\
        <p>Our first frost of the year came early, and what it did to the dahlias</p>\
        <p>Measuring soil temperature with a meat thermometer, and why it works</p>\
        </div></div></body></html>";
    let got = extract::Extract::new(&Config::default())
        .page_of(
            page.as_bytes(),
            None,
            "https://weather-garden.example/2012/08/gauges",
        )
        .expect("page");
    for kept in ["within two millimetres", "lost its signal twice"] {
        assert!(got.text.contains(kept), "{kept}: {}", got.text);
    }
    for gone in [
        "This entry was posted",
        "Photograph by",
        "first frost",
        "meat thermometer",
    ] {
        assert!(!got.text.contains(gone), "{gone}: {}", got.text);
    }
}

/// An article inside an element whose class names metadata (a 2012 blog theme's
/// `entry-meta` around the post's `entry-body`) is not removed with the metadata: a
/// class of that group never wraps 300 bytes of a content-marked element's prose.
#[test]
fn an_article_inside_a_meta_class_stays() {
    let blurb = |who: &str| {
        format!(
            "<p>{who} writes about courts, lobbying and the people who work the halls of \
             Congress, and has covered the capital for many years.</p>"
        )
    };
    let page = format!(
        "<html><body><div id=\"blog\"><div id=\"beta\"><h3>Contributors</h3>{}{}{}{}</div>\
         <div class=\"entry-meta\"><h2>Park owner hires lobbyists on safety rules</h2>\
         <div class=\"entry-body\"><p>The owner of two amusement parks has hired a law \
         firm's lobbying arm to work on workplace safety rules, the firm told Congress on \
         Monday in its filing.</p><p>The filing names the agency's rules on rides and on \
         the training of seasonal staff, and the parks' trade group backs the effort.</p>\
         <p>Neither the parks nor the firm would say how much the work is worth this year.</p>\
         <p>The rules come up for review in the spring, after the summer season ends.</p></div>\
         </div></div></body></html>",
        blurb("Ann"),
        blurb("Bo"),
        blurb("Cy"),
        blurb("Di")
    );
    let got = extract::Extract::new(&Config::default())
        .page_of(page.as_bytes(), None, "https://blog.example/2012/11/park")
        .expect("page");
    assert!(
        got.text.contains("hired a law firm's lobbying arm"),
        "{}",
        got.text
    );
}

/// On a page that declares itself a product (JSON-LD `"@type": "Product"`, or an
/// `og:type` naming a product), comment-marked elements are its reviews: `precision`
/// treats them as `balanced` does, and keeps them beside a short description.
#[test]
fn a_products_reviews_stay_in_precision() {
    let review =
        |who: &str, text: &str| format!("<li class=\"comment\"><b>{who}</b><p>{text}</p></li>");
    let page = |head: &str| {
        format!(
            "<html><head>{head}</head><body><main><h1>Walnut desk</h1>\
             <div class=\"product-description\"><p>A standing desk in solid walnut, 140 by \
             70 centimetres, with a quiet motor and three memory positions.</p></div>\
             <ol class=\"comment-list\">{}{}{}</ol></main></body></html>",
            review(
                "Ann",
                "The motor is quiet enough to use during calls, and the top is beautifully finished."
            ),
            review(
                "Bo",
                "Took an hour to assemble; the instructions were clear and every screw was there."
            ),
            review(
                "Cy",
                "Third month of use and the memory positions still stop exactly where I set them."
            )
        )
    };
    let config: Config = toml::from_str("favor = \"precision\"").expect("config");
    let run = |html: String| {
        extract::Extract::new(&config)
            .page_of(html.as_bytes(), None, "https://shop.example/desk")
            .expect("page")
            .text
    };
    let json_ld = "<script type=\"application/ld+json\">{\"@context\": \"https://schema.org\", \
                   \"@type\" : [\"Product\"], \"name\": \"Walnut desk\"}</script>";
    for head in [json_ld, "<meta property=\"og:type\" content=\"product\">"] {
        let text = run(page(head));
        assert!(
            text.contains("memory positions still stop"),
            "{head}: {text}"
        );
    }
    // Without the declaration the same page is a short post with comments: precision
    // takes the comments.
    let text = run(page(""));
    assert!(text.contains("solid walnut"), "{text}");
    assert!(!text.contains("memory positions still stop"), "{text}");
}
