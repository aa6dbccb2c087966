//! Exact-substring dedup: planted repeats are cut exactly and nothing else; both phases
//! conform to the resume contracts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dedup::Config;
use dedup::substring::{SubstringConfig, filter_step, substring};
use pipeline::testing::{Conformance, UnitConformance, check, check_units};
use pipeline::{Location, RunOptions, Storage};

fn loc(p: &Path) -> Location {
    Location::Local(p.to_path_buf())
}

/// Random words from the fixture sentences: no run of 50 pieces repeats by chance.
fn words(rng: &mut fastrand::Rng, n: usize) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/quality/sentences.txt"),
    )
    .expect("fixture");
    let vocab: Vec<&str> = text
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| w.len() > 2)
        .collect();
    (0..n)
        .map(|_| vocab[rng.usize(..vocab.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

/// The planted corpus: three inputs of 40 documents. Returns the input folder and, by
/// (file, row), the text each document must have after the filter (`None`: dropped).
fn planted(dir: &Path) -> (PathBuf, BTreeMap<(String, usize), Option<String>>) {
    let mut rng = fastrand::Rng::with_seed(11);
    let long = words(&mut rng, 70);
    let short = words(&mut rng, 40);
    let para = words(&mut rng, 60);
    let whole = format!("{} {}", words(&mut rng, 30), words(&mut rng, 40));
    let input = dir.join("docs");
    std::fs::create_dir_all(&input).expect("dir");
    let mut expected = BTreeMap::new();
    for (f, file) in ["a.jsonl", "b.jsonl", "c.jsonl"].iter().enumerate() {
        let mut lines = String::new();
        for row in 0..40 {
            let len = rng.usize(30..200);
            let body = words(&mut rng, len);
            let (text, after): (String, Option<String>) = match (f, row) {
                // The first copy of the long span stays; the later two lose it.
                (0, 3) => {
                    let t = format!("{body}. {long}, end");
                    (t.clone(), Some(t))
                }
                (1, 5) => (
                    format!("{body}: {long}! end"),
                    Some(format!("{body}:! end")),
                ),
                (2, 10) => (
                    format!("{body}? {long}; fin"),
                    Some(format!("{body}?; fin")),
                ),
                // 40 words: under the threshold, in both copies.
                (0, 7) | (1, 8) => {
                    let t = format!("{body}; {short}.");
                    (t.clone(), Some(t))
                }
                // A paragraph said twice in one document: the second goes.
                (2, 2) => (
                    format!("{body}\n{para}\n\n{para}\n"),
                    Some(format!("{body}\n{para}\n\n\n")),
                ),
                // A whole document again: nothing left, dropped.
                (0, 20) => (whole.clone(), Some(whole.clone())),
                (2, 30) => (whole.clone(), None),
                _ => (body.clone(), Some(body)),
            };
            lines.push_str(&format!(
                "{}\n",
                serde_json::json!({"id": format!("{file}-{row}"), "text": text})
            ));
            expected.insert((file.to_string(), row), after);
        }
        std::fs::write(input.join(file), lines).expect("write");
    }
    (input, expected)
}

fn texts_of(dir: &Path, stem: &str) -> BTreeMap<String, String> {
    let storage = Storage::new();
    let meta = storage
        .head(&loc(&dir.join(format!("{stem}.parquet"))))
        .expect("head")
        .expect("shard");
    let reader = pipeline::shard::ParquetReader::open(&storage, &meta, "", 1024)
        .expect("open")
        .expect("parquet");
    reader
        .flat_map(|b| b.expect("batch").docs)
        .map(|d| (d.id, d.text))
        .collect()
}

#[test]
fn planted_repeats_are_cut_exactly_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tmp");
    let (input, expected) = planted(dir.path());
    let storage = Storage::new();
    let cfg = SubstringConfig::default();
    let cuts = dir.path().join("cuts");
    substring(&storage, &RunOptions::new(loc(&input), loc(&cuts)), &cfg).expect("substring");
    let out = dir.path().join("out");
    let step = filter_step(&storage, &cfg, &cuts.to_string_lossy()).expect("step");
    let report =
        pipeline::run(&step, &storage, &RunOptions::new(loc(&input), loc(&out))).expect("filter");
    assert_eq!(report.stats.drops.get("substring_dup"), Some(&1));
    assert_eq!(report.stats.counts.get("substring_documents_cut"), Some(&4));
    for stem in ["a", "b", "c"] {
        let got = texts_of(&out, stem);
        for row in 0..40 {
            let id = format!("{stem}.jsonl-{row}");
            let want = &expected[&(format!("{stem}.jsonl"), row)];
            assert_eq!(got.get(&id), want.as_ref(), "{id}");
        }
    }
}

#[test]
fn partitions_do_not_see_each_other() {
    let dir = tempfile::tempdir().expect("tmp");
    let (input, _) = planted(dir.path());
    let storage = Storage::new();
    // One input per partition: the copies in b and c are not seen from a.
    let cfg = SubstringConfig {
        partition_bytes: 1,
        ..SubstringConfig::default()
    };
    let cuts = dir.path().join("cuts");
    let report =
        substring(&storage, &RunOptions::new(loc(&input), loc(&cuts)), &cfg).expect("substring");
    assert_eq!(report.processed.len(), 3, "{report:?}");
    // Only the paragraph repeated inside c.jsonl's document is cut.
    assert_eq!(report.stats.counts.get("substring_documents_cut"), Some(&1));
}

fn mill() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mill-dedup"))
}

#[test]
fn substring_phases_conform() {
    let dir = tempfile::tempdir().expect("tmp");
    let (input, _) = planted(dir.path());
    let storage = Storage::new();
    // Two partitions, so resume is checked across units.
    let cfg = Config {
        substring: SubstringConfig {
            partition_bytes: 20_000,
            ..SubstringConfig::default()
        },
        ..Config::default()
    };
    let file = dir.path().join("dedup.toml");
    std::fs::write(&file, "[substring]\npartition_bytes = 20000\n").expect("config");
    let file = file.to_string_lossy().to_string();
    check_units(&UnitConformance {
        run: &|o| substring(&storage, o, &cfg.substring),
        input: input.clone(),
        command: Some(&|flags| {
            let mut c = mill();
            c.arg("substring").args(flags).args(["--config", &file]);
            c
        }),
        run_records: &[],
    });
    let cuts = dir.path().join("cuts");
    substring(
        &storage,
        &RunOptions::new(loc(&input), loc(&cuts)),
        &cfg.substring,
    )
    .expect("substring");
    let cuts = cuts.to_string_lossy().to_string();
    let inputs = ["a.jsonl", "b.jsonl", "c.jsonl"]
        .iter()
        .map(|n| (n.to_string(), std::fs::read(input.join(n)).expect("input")))
        .collect();
    check(&Conformance {
        step: &|| filter_step(&storage, &cfg.substring, &cuts).expect("step"),
        inputs,
        broken: Vec::new(),
        command: Some(&|flags| {
            let mut c = mill();
            c.arg("substring-filter")
                .args(flags)
                .args(["--cuts", &cuts, "--config", &file]);
            c
        }),
    });
}

/// An input added before the others holds the first copy now: the substring phase
/// redoes its partition and the filter redoes every input, so the old first copy is cut.
#[test]
fn new_cuts_redo_the_filter() {
    let dir = tempfile::tempdir().expect("tmp");
    let (input, _) = planted(dir.path());
    let storage = Storage::new();
    let cfg = SubstringConfig::default();
    let cuts = dir.path().join("cuts");
    let out = dir.path().join("out");
    let run = |storage: &Storage| {
        substring(storage, &RunOptions::new(loc(&input), loc(&cuts)), &cfg).expect("substring");
        let step = filter_step(storage, &cfg, &cuts.to_string_lossy()).expect("step");
        pipeline::run(&step, storage, &RunOptions::new(loc(&input), loc(&out))).expect("filter")
    };
    run(&storage);
    let before = texts_of(&out, "a");
    let again = run(&storage);
    assert!(again.processed.is_empty(), "a rerun is a no-op: {again:?}");
    // The same document as a.jsonl's row 3 (the first copy of the 70-word span), copied
    // into an input that sorts first.
    let first_doc = std::fs::read_to_string(input.join("a.jsonl"))
        .expect("read")
        .lines()
        .nth(3)
        .expect("a line")
        .replace("a.jsonl-3", "0-copy");
    std::fs::write(input.join("0.jsonl"), format!("{first_doc}\n")).expect("write");
    let redone = run(&storage);
    assert_eq!(redone.processed.len(), 4, "{redone:?}");
    let after = texts_of(&out, "a");
    assert_ne!(
        before["a.jsonl-3"],
        after.get("a.jsonl-3").cloned().unwrap_or_default()
    );
}
