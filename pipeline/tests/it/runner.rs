//! The runner, through the conformance harness and on its own.

use std::io::Write;
use std::process::Command;

use clap::Parser;
use pipeline::cli::StageArgs;
use pipeline::marker::list_markers;
use pipeline::shard::{ShardOptions, read_all_documents};
use pipeline::testing::{Conformance, check, snapshot};
use pipeline::{
    Column, ColumnKind, Document, DocumentSource, Location, RunOptions, Stage, Step, Storage,
    Value, Verdict, run,
};

use crate::s3env;

/// Drops documents under `min` characters; writes `char_count`.
struct MinChars(usize);

impl Stage for MinChars {
    fn name(&self) -> &'static str {
        "min_chars"
    }
    fn columns(&self) -> Vec<Column> {
        vec![Column {
            name: "char_count",
            kind: ColumnKind::I64,
        }]
    }
    fn process(&self, doc: &mut Document) -> Verdict {
        let n = doc.text.chars().count();
        doc.annotate("char_count", Value::I64(n as i64));
        if n < self.0 {
            Verdict::Drop("too_short")
        } else {
            Verdict::Keep
        }
    }
}

/// Drops documents mentioning "casino"; lowercases the rest.
struct NoCasino;

impl Stage for NoCasino {
    fn name(&self) -> &'static str {
        "no_casino"
    }
    fn process(&self, doc: &mut Document) -> Verdict {
        if doc.text.contains("casino") {
            return Verdict::Drop("casino");
        }
        doc.text = doc.text.to_lowercase();
        Verdict::Keep
    }
}

fn test_step(min: usize) -> Step {
    Step {
        name: "test".into(),
        stages: vec![Box::new(MinChars(min)), Box::new(NoCasino)],
        source: Box::new(DocumentSource {
            batch_rows: 50,
            ..DocumentSource::default()
        }),
        config_hash: format!("min={min}"),
        shard: ShardOptions {
            row_group_bytes: 16 << 10,
            ..ShardOptions::default()
        },
        partition: None,
        per_input: None,
    }
}

const WORDS: [&str; 12] = [
    "the",
    "Haus",
    "maison",
    "casa",
    "数据",
    "データ",
    "بيانات",
    "נתונים",
    "данные",
    "डेटा",
    "casino",
    "corpus",
];

fn jsonl(seed: u64, n: usize) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::new();
    for i in 0..n {
        let words: Vec<&str> = (0..rng.usize(1..40))
            .map(|_| WORDS[rng.usize(..WORDS.len())])
            .collect();
        let line = serde_json::json!({
            "id": format!("{seed}-{i}"),
            "text": words.join(" "),
            "url": format!("https://site{}.example/{i}", rng.u8(..)),
            "source": "fixture",
        });
        writeln!(out, "{line}").expect("write to vec");
    }
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).expect("gzip");
    gz.finish().expect("gzip")
}

fn parquet_fixture(seed: u64) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, jsonl(seed, 300)).expect("write");
    let out = dir.path().join("out");
    let step = Step {
        name: "copy".into(),
        stages: Vec::new(),
        source: Box::new(DocumentSource::default()),
        config_hash: String::new(),
        shard: ShardOptions::default(),
        partition: None,
        per_input: None,
    };
    run(
        &step,
        &Storage::new(),
        &RunOptions::new(Location::Local(input), Location::Local(out.clone())),
    )
    .expect("make parquet fixture");
    std::fs::read(out.join("in.parquet")).expect("read parquet fixture")
}

fn inputs() -> Vec<(String, Vec<u8>)> {
    vec![
        ("a.jsonl".into(), jsonl(1, 400)),
        ("b.jsonl.gz".into(), gzip(&jsonl(2, 300))),
        (
            "nested/c.jsonl.zst".into(),
            zstd::encode_all(&jsonl(3, 250)[..], 3).expect("zstd"),
        ),
        ("d.parquet".into(), parquet_fixture(4)),
        ("e.jsonl".into(), jsonl(5, 7)),
    ]
}

fn broken() -> Vec<(String, Vec<u8>, &'static str)> {
    let gz = gzip(&jsonl(6, 500));
    let mut bad_lines = jsonl(7, 60);
    bad_lines.extend_from_slice(b"{\"text\": broken\n\xff\xfe\n");
    bad_lines.extend_from_slice(&jsonl(8, 60));
    vec![
        (
            "broken/truncated.jsonl.gz".into(),
            gz[..gz.len() / 2].to_vec(),
            "truncated_input",
        ),
        (
            "broken/garbage.parquet".into(),
            b"PAR1 this is not parquet at all".to_vec(),
            "corrupt_parquet",
        ),
        ("broken/lines.jsonl".into(), bad_lines, "malformed_json"),
    ]
}

const CHILD_ARGS: &str = "TOKENMILL_CHILD_ARGS";

#[derive(Debug, Parser)]
struct ChildArgs {
    #[command(flatten)]
    stage: StageArgs,
}

/// Not a test of its own: the conformance harness re-runs this test binary with
/// `TOKENMILL_CHILD_ARGS` set to run the test step as a separate process, which it then
/// kills.
#[test]
fn child_process_entry() {
    let Ok(args) = std::env::var(CHILD_ARGS) else {
        return;
    };
    let args = ChildArgs::parse_from(
        std::iter::once("child".to_string()).chain(args.split('\u{1f}').map(str::to_string)),
    );
    let mut options = args.stage.options().expect("options");
    options.progress = false;
    run(&test_step(10), &Storage::new(), &options).expect("child run");
}

fn child_command(args: Vec<String>) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args([
        "runner::child_process_entry",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(CHILD_ARGS, args.join("\u{1f}"));
    cmd
}

#[test]
fn conformance_of_a_test_stage() {
    check(&Conformance {
        step: &|| test_step(10),
        inputs: inputs(),
        broken: broken(),
        command: Some(&child_command),
    });
}

fn write_inputs(dir: &std::path::Path) {
    for (name, bytes) in inputs() {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }
}

#[test]
fn outputs_carry_unknown_columns_and_declared_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    write_inputs(&input);
    let out = dir.path().join("out");
    run(
        &test_step(10),
        &Storage::new(),
        &RunOptions::new(Location::Local(input), Location::Local(out.clone())),
    )
    .expect("run");
    let file = std::fs::File::open(out.join("d.parquet")).expect("output");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet")
        .build()
        .expect("reader");
    let mut rows = 0;
    for batch in reader {
        let batch = batch.expect("batch");
        let names: Vec<String> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert!(names.contains(&"metadata".to_string()), "{names:?}");
        assert!(names.contains(&"char_count".to_string()), "{names:?}");
        let meta = batch.column_by_name("metadata").expect("metadata");
        let meta = arrow_array::cast::AsArray::as_string::<i32>(meta.as_ref());
        for i in 0..batch.num_rows() {
            assert_eq!(meta.value(i), r#"{"source":"fixture"}"#);
        }
        rows += batch.num_rows();
    }
    let docs =
        read_all_documents(&Storage::new(), &Location::Local(out.join("d.parquet"))).expect("read");
    assert_eq!(docs.len(), rows);
    assert!(
        docs.iter()
            .all(|d| d.text.chars().count() >= 10 && !d.text.contains("casino"))
    );
    assert!(docs.iter().all(|d| d.text == d.text.to_lowercase()));
}

#[test]
fn rejected_documents_keep_their_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    write_inputs(&input);
    let out = dir.path().join("out");
    let mut opts = RunOptions::new(Location::Local(input), Location::Local(out.clone()));
    opts.keep_rejected = true;
    let report = run(&test_step(10), &Storage::new(), &opts).expect("run");
    let storage = Storage::new();
    let mut rejected = 0;
    for (stem, marker) in list_markers(&storage, &Location::Local(out.clone())).expect("markers") {
        assert_eq!(marker.outputs.len(), 2, "{stem}: output and rejected shard");
        let rejected_shard = marker
            .outputs
            .iter()
            .find(|o| o.starts_with("_rejected/"))
            .expect("a rejected shard");
        let file = std::fs::File::open(out.join(rejected_shard)).expect("rejected shard");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .expect("parquet")
            .build()
            .expect("reader");
        for batch in reader {
            let batch = batch.expect("batch");
            let reasons = batch
                .column_by_name("drop_reason")
                .expect("drop_reason column");
            let reasons = arrow_array::cast::AsArray::as_string::<i32>(reasons.as_ref());
            for i in 0..batch.num_rows() {
                assert!(["too_short", "casino"].contains(&reasons.value(i)));
            }
            rejected += batch.num_rows() as u64;
        }
    }
    let s = &report.stats;
    assert_eq!(
        rejected,
        s.drops.get("too_short").copied().unwrap_or(0)
            + s.drops.get("casino").copied().unwrap_or(0)
    );
    assert!(rejected > 0);
}

#[test]
fn tasks_split_the_work_and_any_split_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    write_inputs(&input);
    let storage = Storage::new();
    let whole = dir.path().join("whole");
    run(
        &test_step(10),
        &storage,
        &RunOptions::new(
            Location::Local(input.clone()),
            Location::Local(whole.clone()),
        ),
    )
    .expect("one task");

    let split = dir.path().join("split");
    let mut processed = Vec::new();
    for task in 0..3 {
        let mut o = RunOptions::new(
            Location::Local(input.clone()),
            Location::Local(split.clone()),
        );
        o.tasks = 3;
        o.task = task;
        processed.extend(run(&test_step(10), &storage, &o).expect("task").processed);
    }
    processed.sort();
    assert_eq!(processed.len(), inputs().len());
    assert_eq!(
        snapshot(&whole),
        snapshot(&split),
        "3 tasks write what 1 task writes"
    );

    // A rerun with another task count finds everything done.
    let mut o = RunOptions::new(
        Location::Local(input.clone()),
        Location::Local(split.clone()),
    );
    o.tasks = 2;
    let again = run(&test_step(10), &storage, &o).expect("rerun");
    assert!(again.processed.is_empty());

    // A changed configuration redoes everything; --force too.
    let changed = run(
        &test_step(20),
        &storage,
        &RunOptions::new(
            Location::Local(input.clone()),
            Location::Local(split.clone()),
        ),
    )
    .expect("changed config");
    assert_eq!(changed.processed.len(), inputs().len());
    let mut forced = RunOptions::new(
        Location::Local(input.clone()),
        Location::Local(split.clone()),
    );
    forced.force = true;
    assert_eq!(
        run(&test_step(20), &storage, &forced)
            .expect("force")
            .processed
            .len(),
        inputs().len()
    );

    // A new input in the prefix is picked up alone.
    std::fs::write(input.join("f.jsonl"), jsonl(9, 30)).expect("write");
    let more = run(
        &test_step(20),
        &storage,
        &RunOptions::new(Location::Local(input), Location::Local(split)),
    )
    .expect("new input");
    assert_eq!(more.processed, ["f.jsonl"]);
}

#[test]
fn dry_run_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    write_inputs(&input);
    let out = dir.path().join("out");
    let mut o = RunOptions::new(Location::Local(input), Location::Local(out.clone()));
    o.dry_run = true;
    let report = run(&test_step(10), &Storage::new(), &o).expect("dry run");
    assert!(report.processed.is_empty());
    assert!(!out.exists());
}

#[test]
fn runs_from_and_to_s3() {
    let Some(endpoint) = s3env::endpoint() else {
        return;
    };
    let (storage, bucket) = s3env::bucket(&endpoint, "runner");
    for (name, bytes) in inputs()
        .into_iter()
        .chain(broken().into_iter().map(|(n, b, _)| (n, b)))
    {
        storage
            .put(&bucket.join(&format!("in/{name}")), &bytes)
            .expect("upload input");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let local_in = dir.path().join("in");
    write_inputs(&local_in);
    for (name, bytes, _) in broken() {
        let path = local_in.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }
    let local_out = dir.path().join("out");
    run(
        &test_step(10),
        &Storage::new(),
        &RunOptions::new(
            Location::Local(local_in),
            Location::Local(local_out.clone()),
        ),
    )
    .expect("local run");

    let report = run(
        &test_step(10),
        &storage,
        &RunOptions::new(bucket.join("in"), bucket.join("out")),
    )
    .expect("S3 run");
    assert_eq!(report.processed.len(), inputs().len() + broken().len());
    // Same documents; only file_path (the input's address) differs.
    let without_path = |mut docs: Vec<Document>| {
        docs.iter_mut().for_each(|d| d.file_path = None);
        docs
    };
    for (name, _) in snapshot(&local_out) {
        if name.starts_with("_done") {
            continue;
        }
        let local = read_all_documents(&Storage::new(), &Location::Local(local_out.join(&name)))
            .expect("local output");
        let remote =
            read_all_documents(&storage, &bucket.join(&format!("out/{name}"))).expect("S3 output");
        assert_eq!(without_path(local), without_path(remote), "{name}");
    }
    let again = run(
        &test_step(10),
        &storage,
        &RunOptions::new(bucket.join("in"), bucket.join("out")),
    )
    .expect("S3 rerun");
    assert!(again.processed.is_empty(), "S3 rerun is a no-op");
}

#[test]
fn a_corrupt_row_group_is_counted_row_for_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A shard of several row groups (tiny row group size), then zeros over its middle.
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("docs.jsonl"), jsonl(12, 3000)).expect("write");
    let make = Step {
        name: "copy".into(),
        stages: Vec::new(),
        source: Box::new(DocumentSource::default()),
        config_hash: String::new(),
        shard: ShardOptions {
            row_group_bytes: 8 << 10,
            ..ShardOptions::default()
        },
        partition: None,
        per_input: None,
    };
    let shard_dir = dir.path().join("shard");
    run(
        &make,
        &Storage::new(),
        &RunOptions::new(Location::Local(src), Location::Local(shard_dir.clone())),
    )
    .expect("make shard");
    let mut bytes = std::fs::read(shard_dir.join("docs.parquet")).expect("read shard");
    let middle = bytes.len() / 2;
    bytes[middle..middle + 4096].fill(0);
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).expect("mkdir");
    std::fs::write(input.join("docs.parquet"), &bytes).expect("write corrupt shard");

    let report = run(
        &test_step(0),
        &Storage::new(),
        &RunOptions::new(
            Location::Local(input),
            Location::Local(dir.path().join("out")),
        ),
    )
    .expect("a corrupt row group does not fail the task");
    let s = &report.stats;
    assert!(s.balanced());
    assert_eq!(
        s.docs_in, 3000,
        "every row of the footer is accounted for: {s:?}"
    );
    let lost = s.drops.get("corrupt_parquet").copied().unwrap_or(0);
    assert!(
        lost > 0 && lost < 3000,
        "rows before the damage survive, the rest are counted: {s:?}"
    );
}
