//! The corpus features in `mill run` pipelines, on disk and on S3: PII replacement as a
//! chain stage (its counts in the stats and the report).

use std::path::Path;

use crate::{mill, ok, root, secrets};

/// A pipeline of one chain step, `pii`, over `input` into `output`.
fn pii_pipeline(dir: &Path, input: &str, output: &str) -> String {
    let text = format!(
        "input = \"{input}\"\noutput = \"{output}\"\n\n[config.pii]\ncredit_cards = true\nibans = true\ncount_column = true\n\n[[step]]\nname = \"clean\"\nstages = [\"pii\"]\n"
    );
    let path = dir.join(format!("pii-{}.toml", output.len()));
    std::fs::write(&path, text).expect("pipeline");
    path.to_string_lossy().to_string()
}

/// The texts of a document shard.
fn texts(storage: &pipeline::Storage, shard: &pipeline::Location) -> Vec<String> {
    let meta = storage.head(shard).expect("head").expect("shard exists");
    let reader = pipeline::shard::ParquetReader::open(storage, &meta, "", 1024)
        .expect("open")
        .expect("parquet");
    reader
        .flat_map(|b| b.expect("batch").docs)
        .map(|d| d.text)
        .collect()
}

/// The replacement counts a run's `clean` step recorded, from `mill status --json`.
fn counts(status_json: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(status_json.trim()).expect("status json");
    v["steps"][0]["stats"]["counts"].clone()
}

#[test]
fn pii_step_on_disk_and_on_s3() {
    let dir = tempfile::tempdir().expect("tmp");
    let fixture = root().join("fixtures/pii/tricky.jsonl");
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).expect("dir");
    std::fs::copy(&fixture, input.join("tricky.jsonl")).expect("copy");
    let run = dir.path().join("run");
    let f = pii_pipeline(dir.path(), &input.to_string_lossy(), &run.to_string_lossy());
    ok(mill(&["run", &f]).output().expect("mill run"), "mill run");
    let r = run.to_string_lossy().to_string();
    let local = counts(&ok(
        mill(&["status", &r, "--json"]).output().expect("status"),
        "status",
    ));
    for kind in [
        "pii_email",
        "pii_ipv4",
        "pii_ipv6",
        "pii_phone",
        "pii_card",
        "pii_iban",
    ] {
        assert!(local[kind].as_u64() > Some(0), "{kind}: {local}");
    }
    let report = dir.path().join("report.html");
    ok(
        mill(&["report", &r, "-o", &report.to_string_lossy()])
            .output()
            .expect("report"),
        "report",
    );
    let html = std::fs::read_to_string(&report).expect("report");
    assert!(
        html.contains("replacements, by kind") && html.contains("pii_phone"),
        "the report shows the PII counts"
    );
    let shard = texts(
        &pipeline::Storage::new(),
        &pipeline::Location::Local(run.join("clean/tricky.parquet")),
    );
    assert_eq!(shard.len(), 13);
    assert!(shard.iter().any(|t| t.contains("email@example.com")));

    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-pii") else {
        return;
    };
    let base = pipeline::Location::parse(&format!("s3://{bucket}/")).expect("address");
    storage
        .put(
            &base.join("in/tricky.jsonl"),
            &std::fs::read(&fixture).expect("fixture"),
        )
        .expect("upload");
    let s3_run = format!("s3://{bucket}/run");
    let f = pii_pipeline(dir.path(), &format!("s3://{bucket}/in/"), &s3_run);
    ok(
        secrets::with_fake_credentials(&mut mill(&["run", &f]), &endpoint),
        "mill run on S3",
    );
    let remote = counts(&ok(
        secrets::with_fake_credentials(&mut mill(&["status", &s3_run, "--json"]), &endpoint),
        "status on S3",
    ));
    assert_eq!(remote, local);
    let remote_shard = texts(&storage, &base.join("run/clean/tricky.parquet"));
    assert_eq!(remote_shard, shard, "the same texts on S3 as on disk");
}
