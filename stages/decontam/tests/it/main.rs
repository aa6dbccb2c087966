//! Integration tests of `mill-decontam`: decisions equal datatrove's n-gram
//! decontamination on generated documents, the index phase (JSONL and Parquet sets,
//! resume), the filter's conformance and goldens in both modes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use decontam::{Config, Decontam, Index, Mode};
use pipeline::testing::{Conformance, UnitConformance, check, check_units, golden};
use pipeline::{Location, RunOptions, Storage};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The records of the fixture evaluation sets: (set, question, answer).
fn evals() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for set in ["quiz", "reading"] {
        let text =
            std::fs::read_to_string(root().join(format!("fixtures/decontam/evals/{set}.jsonl")))
                .expect("fixture");
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            out.push((
                set.to_string(),
                v["question"].as_str().unwrap_or_default().to_string(),
                v["answer"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    out
}

fn fields() -> Vec<String> {
    vec!["question".into(), "answer".into()]
}

/// Writes the index of the fixture sets into `dir` and returns its folder.
fn build_index(dir: &Path) -> PathBuf {
    let out = dir.join("index");
    let storage = Storage::new();
    let opts = RunOptions::new(
        Location::Local(root().join("fixtures/decontam/evals")),
        Location::Local(out.clone()),
    );
    let config = Config {
        fields: fields(),
        ..Config::default()
    };
    decontam::index_step(&storage, &opts, &config).expect("index");
    out
}

/// Documents of fixture sentences with spans of the evaluation texts planted in some:
/// whole records, windows of 13 to 20 words, 12-word windows (below the n-gram),
/// re-cased and re-punctuated, seeded.
fn corpus(n: usize, seed: u64) -> Vec<(String, String)> {
    let prose =
        std::fs::read_to_string(root().join("fixtures/quality/sentences.txt")).expect("fixture");
    let prose: Vec<&str> = prose.lines().collect();
    let evals = evals();
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|i| {
            let mut parts: Vec<String> = (0..rng.usize(1..6))
                .map(|_| prose[rng.usize(..prose.len())].to_string())
                .collect();
            if rng.u8(..100) < 60 {
                let (_, q, a) = &evals[rng.usize(..evals.len())];
                let all = format!("{q} {a}");
                let words: Vec<&str> = all.split_whitespace().collect();
                let planted = match rng.u8(..4) {
                    0 => all.clone(),
                    1 | 2 => {
                        let len = rng.usize(12..21).min(words.len());
                        let start = rng.usize(..=words.len() - len);
                        words[start..start + len].join(" ")
                    }
                    _ => {
                        let len = 12.min(words.len());
                        words[..len].join(" ")
                    }
                };
                let planted = match rng.u8(..3) {
                    0 => planted.to_uppercase(),
                    1 => planted.replace(' ', ", ").replace("?", "!"),
                    _ => planted,
                };
                let at = rng.usize(..=parts.len());
                parts.insert(at, planted);
            }
            (format!("d{seed}-{i}"), parts.join(" "))
        })
        .collect()
}

fn jsonl(docs: &[(String, String)]) -> Vec<u8> {
    docs.iter()
        .map(|(id, text)| format!("{}\n", serde_json::json!({"id": id, "text": text})))
        .collect::<String>()
        .into_bytes()
}

/// datatrove's decision per document, or `None` (skipped) when it is not installed
/// outside CI.
fn reference(docs: &[(String, String)]) -> Option<Vec<bool>> {
    let job = serde_json::json!({
        "n": 13,
        "evals": evals().iter().map(|(t, q, a)| serde_json::json!({"task": t, "question": q, "answer": a})).collect::<Vec<_>>(),
        "docs": docs.iter().map(|(id, text)| serde_json::json!({"id": id, "text": text})).collect::<Vec<_>>(),
    });
    let out = pipeline::testing::python_reference(
        &root().join("scripts/decontam_reference.py"),
        job.to_string().into_bytes(),
    )?;
    Some(
        out.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("reference line");
                v["contaminated"].as_bool().expect("bool")
            })
            .collect(),
    )
}

#[test]
fn decisions_match_datatrove() {
    let dir = tempfile::tempdir().expect("tmp");
    let index = Arc::new(
        Index::load(&Storage::new(), &build_index(dir.path()).to_string_lossy()).expect("load"),
    );
    let filter = Decontam::new(index, Config::default()).expect("filter");
    let docs = corpus(600, 1);
    let Some(theirs) = reference(&docs) else {
        return;
    };
    assert_eq!(theirs.len(), docs.len());
    let mut contaminated = 0;
    let mut differ = String::new();
    for ((id, text), theirs) in docs.iter().zip(&theirs) {
        let ours = filter.judge(text).0.is_some();
        contaminated += usize::from(ours);
        if ours != *theirs {
            differ.push_str(&format!("{id}: ours {ours}, datatrove {theirs}\n{text}\n"));
        }
    }
    eprintln!(
        "{} documents, {contaminated} contaminated by ours; differences:\n{differ}",
        docs.len()
    );
    assert!(
        contaminated > 150 && contaminated < 450,
        "the corpus must hold both kinds: {contaminated}"
    );
    assert!(differ.is_empty(), "decisions differ from datatrove's");
}

/// The index of the fixture sets: what each set gave, the malformed line counted.
#[test]
fn index_of_the_fixture_sets() {
    let dir = tempfile::tempdir().expect("tmp");
    let folder = build_index(dir.path());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("index.json")).expect("manifest"))
            .expect("json");
    let sets = manifest["sets"].as_array().expect("sets");
    assert_eq!(sets.len(), 2);
    assert_eq!(sets[0]["name"], "quiz");
    assert_eq!(sets[0]["records"], 16);
    assert_eq!(sets[0]["indexed"], 15);
    assert_eq!(sets[1]["too_short"], 1);
    let marker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("_done/index.json")).expect("marker"))
            .expect("json");
    assert_eq!(marker["stats"]["drops"]["malformed_json"], 1);
    assert_eq!(marker["stats"]["drops"]["too_short"], 1);
    let index = Index::load(&Storage::new(), &folder.to_string_lossy()).expect("load");
    assert_eq!(
        index.len(),
        manifest["ngrams"].as_u64().expect("n") as usize
    );
    // Each record's own n-grams are found, in its own set.
    for (set, q, a) in evals() {
        let hs = decontam::words::ngram_hashes(&format!("{q} {a}"), 13);
        let want = u16::from(set == "reading");
        assert!(hs.iter().all(|h| index.lookup(*h) == Some(want)), "{q}");
    }
}

/// A Parquet evaluation set gives the same index as the same records in JSONL.
#[test]
fn parquet_sets_index_like_jsonl() {
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    let dir = tempfile::tempdir().expect("tmp");
    let records: Vec<(String, String, String)> =
        evals().into_iter().filter(|e| e.0 == "quiz").collect();
    let q: ArrayRef = Arc::new(StringArray::from_iter_values(records.iter().map(|r| &r.1)));
    let a: ArrayRef = Arc::new(StringArray::from_iter_values(records.iter().map(|r| &r.2)));
    let batch = RecordBatch::try_from_iter([("question", q), ("answer", a)]).expect("batch");
    let pq_dir = dir.path().join("pq");
    std::fs::create_dir_all(&pq_dir).expect("dir");
    let file = std::fs::File::create(pq_dir.join("quiz.parquet")).expect("file");
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
    let js_dir = dir.path().join("js");
    std::fs::create_dir_all(&js_dir).expect("dir");
    std::fs::copy(
        root().join("fixtures/decontam/evals/quiz.jsonl"),
        js_dir.join("quiz.jsonl"),
    )
    .expect("copy");
    let storage = Storage::new();
    let build = |d: &Path| {
        let files = storage
            .list(&Location::Local(d.to_path_buf()))
            .expect("list");
        decontam::index::build(&storage, &files, 13, &fields())
            .expect("build")
            .0
    };
    assert_eq!(build(&pq_dir).sha256, build(&js_dir).sha256);
}

fn binary(extra: &[String], args: Vec<String>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-decontam"));
    cmd.args(extra).args(args);
    cmd
}

#[test]
fn index_phase_conformance() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("decontam.toml");
    std::fs::write(&config, "fields = [\"question\", \"answer\"]\n").expect("config");
    let cfg = Config {
        fields: fields(),
        ..Config::default()
    };
    let storage = Storage::new();
    let extra = vec!["--config".to_string(), config.display().to_string()];
    check_units(&UnitConformance {
        run: &|opts| decontam::index_step(&storage, opts, &cfg),
        input: root().join("fixtures/decontam/evals"),
        command: Some(&|args| {
            let mut c = binary(&["index".to_string()], args);
            c.args(&extra);
            c
        }),
        run_records: &[],
    });
}

#[test]
fn filter_conformance() {
    let dir = tempfile::tempdir().expect("tmp");
    let index = build_index(dir.path());
    let config = dir.path().join("decontam.toml");
    std::fs::write(
        &config,
        format!("index = {:?}\n", index.display().to_string()),
    )
    .expect("config");
    let cfg = Config {
        index: Some(index.display().to_string()),
        ..Config::default()
    };
    let storage = Storage::new();
    let extra = vec!["--config".to_string(), config.display().to_string()];
    let fixture = |name: &str| std::fs::read(root().join("fixtures").join(name)).expect("fixture");
    check(&Conformance {
        step: &|| decontam::step(&storage, &cfg).expect("step"),
        inputs: vec![
            ("docs.jsonl".into(), fixture("decontam/docs.jsonl")),
            ("web.jsonl".into(), fixture("docs/web-multilingual.jsonl")),
            ("gen-a.jsonl".into(), jsonl(&corpus(300, 2))),
            ("gen-b.jsonl".into(), jsonl(&corpus(200, 3))),
        ],
        broken: vec![(
            "broken.jsonl".into(),
            fixture("docs/broken.jsonl"),
            "malformed_json",
        )],
        command: Some(&|args| binary(&extra, args)),
    });
}

/// The fixture documents through the filter in both modes.
#[test]
fn golden_decisions_in_both_modes() {
    let dir = tempfile::tempdir().expect("tmp");
    let index = Arc::new(
        Index::load(&Storage::new(), &build_index(dir.path()).to_string_lossy()).expect("load"),
    );
    let docs: Vec<(String, String)> =
        std::fs::read_to_string(root().join("fixtures/decontam/docs.jsonl"))
            .expect("fixture")
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("json");
                (
                    v["id"].as_str().expect("id").into(),
                    v["text"].as_str().expect("text").into(),
                )
            })
            .collect();
    let mut got = String::new();
    for mode in [Mode::Drop, Mode::Cut] {
        let filter = Decontam::new(
            index.clone(),
            Config {
                mode,
                ..Config::default()
            },
        )
        .expect("filter");
        got.push_str(&format!("# {mode:?}\n"));
        for (id, text) in &docs {
            let (outcome, sets) = filter.judge(text);
            let sets: Vec<&str> = sets
                .iter()
                .map(|s| index.names()[*s as usize].as_str())
                .collect();
            let what = match outcome {
                None => "kept".to_string(),
                Some(None) => format!("dropped ({})", sets.join(", ")),
                Some(Some(t)) => format!("cut ({}) to: {t}", sets.join(", ")),
            };
            got.push_str(&format!("{id}: {what}\n"));
        }
    }
    golden(&root().join("fixtures/expected/decontam-docs.txt"), &got);
}
