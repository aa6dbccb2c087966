//! Integration tests of `mill-import`: conformance, golden output on the fixtures.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline::shard::read_all_documents;
use pipeline::testing::{Conformance, check};
use pipeline::{Location, Storage};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).expect("gzip");
    gz.finish().expect("gzip")
}

fn binary(args: Vec<String>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-import"));
    cmd.args(args);
    cmd
}

#[test]
fn conformance() {
    let web = fixture("docs/web-multilingual.jsonl");
    let many: Vec<u8> = (0..40).flat_map(|_| web.iter().copied()).collect();
    check(&Conformance {
        step: &|| import::step(&import::Config::default()),
        inputs: vec![
            ("web.jsonl".into(), web.clone()),
            ("dolma.jsonl".into(), fixture("docs/dolma-style.jsonl")),
            ("many.jsonl.gz".into(), gzip(&many)),
            ("plain/many.jsonl".into(), many.clone()),
        ],
        broken: vec![
            (
                "broken.jsonl".into(),
                fixture("docs/broken.jsonl"),
                "malformed_json",
            ),
            (
                "cut.jsonl.gz".into(),
                gzip(&many)[..2000].to_vec(),
                "truncated_input",
            ),
        ],
        command: Some(&binary),
    });
}

/// Compares with a golden file under fixtures/expected (`TOKENMILL_BLESS=1` rewrites it).
fn golden(name: &str, got: &str) {
    pipeline::testing::golden(&fixtures().join("expected").join(name), got);
}

/// The documents of an output shard as one JSON line each (file_path dropped: it holds
/// this machine's path).
fn golden_lines(path: &Path) -> String {
    let docs = read_all_documents(&Storage::new(), &Location::Local(path.to_path_buf()))
        .expect("read output");
    let file = std::fs::File::open(path).expect("open output");
    let mut metadata = Vec::new();
    for batch in parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet")
        .build()
        .expect("reader")
    {
        let batch = batch.expect("batch");
        let column = batch.column_by_name("metadata").expect("metadata column");
        let strings = arrow_array::cast::AsArray::as_string::<i32>(column.as_ref());
        for i in 0..batch.num_rows() {
            metadata.push(
                arrow_array::Array::is_valid(strings, i).then(|| strings.value(i).to_string()),
            );
        }
    }
    docs.into_iter()
        .zip(metadata)
        .map(|(d, metadata)| {
            serde_json::json!({
                "id": d.id, "text": d.text, "url": d.url, "date": d.date, "dump": d.dump,
                "language": d.language, "metadata": metadata,
            })
            .to_string()
                + "\n"
        })
        .collect()
}

#[test]
fn golden_run_on_fixtures() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_mill-import"))
        .arg("--input")
        .arg(fixtures().join("docs"))
        .arg("--output")
        .arg(out.path())
        .arg("--config")
        .arg(fixtures().join("import.toml"))
        .arg("--log-format")
        .arg("json")
        .output()
        .expect("run mill-import");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    let summary: String = summary
        .lines()
        .filter(|l| !l.contains("bytes in"))
        .map(|l| format!("{l}\n"))
        .collect();
    golden("import-summary.txt", &summary);
    for stem in ["web-multilingual", "dolma-style", "broken"] {
        let got = golden_lines(&out.path().join(format!("{stem}.parquet")));
        golden(&format!("import-{stem}.jsonl"), &got);
    }
}

#[test]
fn bad_config_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "dump = 'x'\nno_such_field = 1\n").expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_mill-import"))
        .arg("--input")
        .arg(fixtures().join("docs"))
        .arg("--output")
        .arg(dir.path().join("out"))
        .arg("--config")
        .arg(&config)
        .output()
        .expect("run mill-import");
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("no_such_field"),
        "{err}"
    );
}

#[test]
fn dry_run_lists_the_split() {
    let output = Command::new(env!("CARGO_BIN_EXE_mill-import"))
        .arg("--input")
        .arg(fixtures().join("docs"))
        .arg("--output")
        .arg(tempfile::tempdir().expect("tempdir").path())
        .args(["--tasks", "2", "--task", "1", "--dry-run"])
        .output()
        .expect("run mill-import");
    assert!(output.status.success());
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.contains("task 1/2: 3 inputs listed, 2 to run, 0 done"),
        "{out}"
    );
    assert!(out.contains("run  broken.jsonl (371 bytes)"), "{out}");
}
