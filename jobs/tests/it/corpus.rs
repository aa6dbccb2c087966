//! The corpus features in `mill run` pipelines, on disk and on S3: PII replacement as a
//! chain stage (its counts in the stats and the report); decontamination as an index
//! phase and a chain stage that names it; exact-substring dedup as two phases.

use std::path::Path;

use crate::{mill, ok, report_html, root, secrets};

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
    let html = report_html(dir.path(), &r);
    assert!(
        html.contains("changes counted") && html.contains("pii_phone"),
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

/// The fixture evaluation sets indexed by a `decontam.index` step, then the fixture
/// documents filtered by a chain that names that step as its index.
fn decontam_pipeline(dir: &Path, evals: &str, docs: &str, output: &str) -> String {
    let text = format!(
        r#"input = "{docs}"
output = "{output}"

[config.decontam]
index = "evalindex"
fields = ["question", "answer"]

[[step]]
name = "evalindex"
phase = "decontam.index"
input = "{evals}"

[[step]]
name = "clean"
stages = ["pii", "decontam"]
input = "{docs}"
keep_rejected = true
"#
    );
    let path = dir.join(format!("decontam-{}.toml", output.len()));
    std::fs::write(&path, text).expect("pipeline");
    path.to_string_lossy().to_string()
}

#[test]
fn decontam_steps_on_disk_and_on_s3() {
    let dir = tempfile::tempdir().expect("tmp");
    let fixtures = root().join("fixtures/decontam");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).expect("dir");
    std::fs::copy(fixtures.join("docs.jsonl"), docs.join("docs.jsonl")).expect("copy");
    let run = dir.path().join("run");
    let f = decontam_pipeline(
        dir.path(),
        &fixtures.join("evals").to_string_lossy(),
        &docs.to_string_lossy(),
        &run.to_string_lossy(),
    );
    let stdout = ok(mill(&["run", &f]).output().expect("mill run"), "mill run");
    assert!(stdout.contains("evalindex"), "{stdout}");
    let r = run.to_string_lossy().to_string();
    let status: serde_json::Value = serde_json::from_str(
        ok(
            mill(&["status", &r, "--json"]).output().expect("status"),
            "status",
        )
        .trim(),
    )
    .expect("json");
    let clean = &status["steps"][1]["stats"];
    assert_eq!(clean["docs_in"], 8);
    assert_eq!(clean["drops"]["contaminated"], 5, "{clean}");
    assert_eq!(clean["counts"]["contaminated_quiz"], 3, "{clean}");
    assert_eq!(clean["counts"]["contaminated_reading"], 2, "{clean}");
    let kept = texts(
        &pipeline::Storage::new(),
        &pipeline::Location::Local(run.join("clean/docs.parquet")),
    );
    assert_eq!(kept.len(), 3);
    let html = report_html(dir.path(), &r);
    assert!(
        html.contains("contaminated_quiz") && html.contains("contaminated"),
        "the report shows what decontamination caught"
    );
    // A rerun does nothing.
    let again = ok(mill(&["run", &f]).output().expect("rerun"), "rerun");
    assert!(!again.contains("1 inputs processed"), "{again}");

    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-decontam") else {
        return;
    };
    let base = pipeline::Location::parse(&format!("s3://{bucket}/")).expect("address");
    for name in ["quiz.jsonl", "reading.jsonl"] {
        storage
            .put(
                &base.join(&format!("evals/{name}")),
                &std::fs::read(fixtures.join("evals").join(name)).expect("fixture"),
            )
            .expect("upload");
    }
    storage
        .put(
            &base.join("docs/docs.jsonl"),
            &std::fs::read(fixtures.join("docs.jsonl")).expect("fixture"),
        )
        .expect("upload");
    let s3_run = format!("s3://{bucket}/run");
    let f = decontam_pipeline(
        dir.path(),
        &format!("s3://{bucket}/evals/"),
        &format!("s3://{bucket}/docs/"),
        &s3_run,
    );
    ok(
        secrets::with_fake_credentials(&mut mill(&["run", &f]), &endpoint),
        "mill run on S3",
    );
    assert_eq!(
        texts(&storage, &base.join("run/clean/docs.parquet")),
        kept,
        "the same documents kept on S3 as on disk"
    );
    assert_eq!(
        storage
            .read(&base.join("run/evalindex/ngrams.bin"))
            .expect("index on S3"),
        std::fs::read(run.join("evalindex/ngrams.bin")).expect("index"),
        "the same index"
    );
}

/// Exact-substring dedup as two phases of a pipeline, over documents that share a long
/// passage: the later copies lose it.
fn substring_pipeline(dir: &Path, docs: &str, output: &str) -> String {
    let text = format!(
        r#"input = "{docs}"
output = "{output}"

[config.dedup.substring]
min_tokens = 30
min_tokens_left = 2

[[step]]
name = "cuts"
phase = "dedup.substring"

[[step]]
name = "clean"
phase = "dedup.substring_filter"
input = "{docs}"
clusters = "cuts"
"#
    );
    let path = dir.join(format!("substring-{}.toml", output.len()));
    std::fs::write(&path, text).expect("pipeline");
    path.to_string_lossy().to_string()
}

#[test]
fn substring_steps_on_disk_and_on_s3() {
    let dir = tempfile::tempdir().expect("tmp");
    let passage = "The museum of clocks keeps more than four hundred timepieces, and the oldest of them was made by a blind watchmaker who worked by touch alone in a room above the river.";
    let openings = [
        "Alpha opens here",
        "Beta",
        "Gamma starts there",
        "Delta",
        "Epsilon begins now",
        "Zeta",
    ];
    let endings = ["Omega", "", "Psi", "", "Chi", ""];
    let docs: Vec<String> = (0..6)
        .map(|i| {
            if i % 2 == 0 {
                format!("{} {passage} {}", openings[i], endings[i])
            } else {
                format!("{} shares nothing else, only line {i}.", openings[i])
            }
        })
        .collect();
    let jsonl: String = docs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "{}\n",
                serde_json::json!({"id": format!("s{i}"), "text": t})
            )
        })
        .collect();
    let input = dir.path().join("docs");
    std::fs::create_dir_all(&input).expect("dir");
    std::fs::write(input.join("docs.jsonl"), &jsonl).expect("write");
    let run = dir.path().join("run");
    let f = substring_pipeline(dir.path(), &input.to_string_lossy(), &run.to_string_lossy());
    ok(mill(&["run", &f]).output().expect("mill run"), "mill run");
    let kept = texts(
        &pipeline::Storage::new(),
        &pipeline::Location::Local(run.join("clean/docs.parquet")),
    );
    assert_eq!(kept.len(), 6);
    assert_eq!(
        kept.iter()
            .filter(|t| t.contains("blind watchmaker"))
            .count(),
        1,
        "{kept:?}"
    );
    assert_eq!(kept[0], docs[0], "the first copy stays whole");
    assert_eq!(kept[1], docs[1]);
    assert_eq!(kept[2], "Gamma starts there Psi");
    assert_eq!(kept[4], "Epsilon begins now Chi");

    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-substr") else {
        return;
    };
    let base = pipeline::Location::parse(&format!("s3://{bucket}/")).expect("address");
    storage
        .put(&base.join("docs/docs.jsonl"), jsonl.as_bytes())
        .expect("upload");
    let s3_run = format!("s3://{bucket}/run");
    let f = substring_pipeline(dir.path(), &format!("s3://{bucket}/docs/"), &s3_run);
    ok(
        secrets::with_fake_credentials(&mut mill(&["run", &f]), &endpoint),
        "mill run on S3",
    );
    assert_eq!(texts(&storage, &base.join("run/clean/docs.parquet")), kept);
}
