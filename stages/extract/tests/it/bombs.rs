//! Bombs and giants at `mill-extract`: each a file written by the test, run through
//! the binary on one thread under a peak-RSS probe. Each must end with its bad part
//! counted under a reason, its good neighbours kept, and the process's peak RSS under
//! [`RSS_BOUND_MIB`]. The measured peaks are printed (`--nocapture`).

use std::io::Write;
use std::path::Path;

use super::{binary, gz, http, record};

/// The stated bound on one extract task's peak RSS (one thread, default config:
/// 10 MiB pages, a record cap of 11 MiB).
pub const RSS_BOUND_MIB: u64 = 160;

/// Runs `mill-extract` on `input` (one thread) into a fresh folder; returns the
/// closing summary, the drop counts it printed and the peak RSS in MiB, measured by
/// the kernel's accounting of the child (Python's `getrusage(RUSAGE_CHILDREN)`).
fn run_measured(input: &Path) -> (String, u64) {
    let out = tempfile::tempdir().expect("tempdir");
    let cmd = binary(vec![
        "--input".into(),
        input.to_string_lossy().into_owned(),
        "--output".into(),
        out.path().to_string_lossy().into_owned(),
        "--threads".into(),
        "1".into(),
        "--log-format".into(),
        "json".into(),
    ]);
    let (output, rss) = pipeline::testing::run_with_peak_rss(&cmd);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (stdout, rss)
}

fn count(summary: &str, what: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix(&format!("drop {what}: "))
                .or_else(|| l.strip_prefix(&format!("count {what}: ")))
        })
        .map_or(0, |n| n.parse().expect("count"))
}

fn kept(summary: &str) -> u64 {
    summary
        .split("out ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .expect("docs out in the summary")
}

fn small(id: &str) -> Vec<u8> {
    record(
        id,
        &format!("https://small.example/{id}"),
        &http(b"<html><body><p>A small page with a sentence of text.</p></body></html>"),
    )
}

/// `n` bytes of `byte` as one gzip member, streamed (never held whole).
fn gz_stream(out: &mut Vec<u8>, head: &[u8], byte: u8, n: u64, tail: &[u8]) {
    let mut w = flate2::write::GzEncoder::new(out, flate2::Compression::best());
    w.write_all(head).expect("gzip");
    let chunk = vec![byte; 1 << 20];
    let mut left = n;
    while left > 0 {
        let take = left.min(chunk.len() as u64) as usize;
        w.write_all(&chunk[..take]).expect("gzip");
        left -= take as u64;
    }
    w.write_all(tail).expect("gzip");
    w.finish().expect("gzip");
}

/// Writes `bytes` as `<dir>/<file>`, runs the stage on it under the RSS probe, checks
/// the peak against the bound (printed as `label`) and returns the summary.
fn bomb(dir: &Path, file: &str, bytes: Vec<u8>, label: &str) -> String {
    let input = dir.join(file);
    std::fs::write(&input, bytes).expect("write");
    let (summary, rss) = run_measured(&input);
    eprintln!("bomb {label}: peak RSS {rss} MiB (bound {RSS_BOUND_MIB})");
    assert!(
        rss <= RSS_BOUND_MIB,
        "{label}: peak RSS {rss} MiB over {RSS_BOUND_MIB}"
    );
    summary
}

/// A gzip member that inflates 1,000× to 1 GiB: a record whose block is a gigabyte of
/// zeros. Streamed past, counted `oversized_record`; the next record is kept.
#[test]
fn gzip_bomb_of_a_gigabyte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n: u64 = 1 << 30;
    let head = format!(
        "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:bomb>\r\nContent-Length: {n}\r\n\r\n"
    );
    let mut file = gz(&small("1"));
    gz_stream(&mut file, head.as_bytes(), 0, n, b"\r\n\r\n");
    assert!(file.len() < 2 << 20, "the bomb is small: {}", file.len());
    eprintln!("gzip bomb: {} bytes inflate to {n}", file.len());
    file.extend(gz(&small("2")));
    let summary = bomb(dir.path(), "bomb.warc.gz", file, "gzip 1 GiB");
    assert_eq!(count(&summary, "oversized_record"), 1, "{summary}");
    assert_eq!(kept(&summary), 2, "{summary}");
}

/// A record whose Content-Length says 10 bytes, followed by a gigabyte of bytes that
/// are not a record, then good records; and the reverse, a 10-byte record that says
/// it holds 2 GB. Both counted once; the records after them are kept.
#[test]
fn content_length_that_lies_by_gigabytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let head = "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:short>\r\nContent-Length: 10\r\n\r\n";
    let mut file = gz(&small("1"));
    gz_stream(&mut file, head.as_bytes(), b'x', 1 << 30, b"\r\n\r\n");
    file.extend(gz(&small("2")));
    let summary = bomb(
        dir.path(),
        "short.warc.gz",
        file,
        "10-byte length, 1 GiB record",
    );
    assert_eq!(count(&summary, "bad_content_length"), 1, "{summary}");
    assert_eq!(kept(&summary), 2, "{summary}");

    let liar = "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:long>\r\nContent-Length: 2000000000\r\n\r\n0123456789\r\n\r\n";
    let mut file = small("1");
    file.extend_from_slice(liar.as_bytes());
    file.extend(small("2"));
    file.extend(small("3"));
    let summary = bomb(dir.path(), "long.warc", file, "2 GB length, 10-byte record");
    assert_eq!(count(&summary, "bad_content_length"), 1, "{summary}");
    assert_eq!(kept(&summary), 3, "{summary}");
}

/// A zstd frame whose header asks for a 2 GiB window (past the decoder's 128 MiB
/// limit): refused by the decoder, counted `corrupt_compression`, nothing allocated.
#[test]
fn zstd_frame_declaring_a_huge_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let payload = small("1");
    // Frame header: magic, descriptor 0 (no content size, not single-segment), then
    // the window descriptor: exponent 21 → a window of 2^31 bytes. One raw block,
    // the last.
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 21 << 3];
    let block_header = ((payload.len() as u32) << 3) | 1;
    frame.extend_from_slice(&block_header.to_le_bytes()[..3]);
    frame.extend_from_slice(&payload);
    let summary = bomb(dir.path(), "window.warc.zst", frame, "zstd 2 GiB window");
    assert_eq!(count(&summary, "corrupt_compression"), 1, "{summary}");
}

/// Pages made to hurt an HTML parser: 10^6 attributes on one tag, 10^6 entities,
/// 200k nested tables. Each is a document or counted (`too_complex`); the small
/// pages around them are kept.
#[test]
fn html_bombs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut attrs = b"<html><body><div".to_vec();
    for i in 0..1_000_000 {
        attrs.extend_from_slice(if i % 2 == 0 { &b" a"[..] } else { &b" b=1"[..] });
    }
    attrs.extend_from_slice(
        b"><p>Text after a tag with a million attributes.</p></div></body></html>",
    );
    let mut entities = b"<html><body><p>".to_vec();
    for i in 0..1_000_000 {
        entities.extend_from_slice(if i % 2 == 0 {
            &b"&amp;"[..]
        } else {
            &b"&#x263a;"[..]
        });
    }
    entities.extend_from_slice(b"</p></body></html>");
    let mut tables = b"<html><body>".to_vec();
    for _ in 0..200_000 {
        tables.extend_from_slice(b"<table><tr><td>");
    }
    tables.extend_from_slice(b"<p>A cell deep inside the tables.</p></body></html>");
    let mut file = gz(&small("1"));
    for (id, page) in [("attrs", attrs), ("entities", entities), ("tables", tables)] {
        file.extend(gz(&record(
            id,
            &format!("https://bomb.example/{id}"),
            &http(&page),
        )));
    }
    file.extend(gz(&small("2")));
    let summary = bomb(
        dir.path(),
        "html.warc.gz",
        file,
        "HTML attributes, entities, nested tables",
    );
    let documents = kept(&summary);
    let complex = count(&summary, "too_complex");
    let empty = count(&summary, "empty_text");
    assert!(documents >= 2, "{summary}");
    assert_eq!(documents + complex + empty, 5, "{summary}");
}
