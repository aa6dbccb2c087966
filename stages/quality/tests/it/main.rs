//! Integration tests of `mill-quality`: decisions equal datatrove's on generated
//! documents, conformance, golden run on the fixtures.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pipeline::Storage;
use pipeline::testing::{Conformance, check};
use quality::{Config, Quality};

mod fineweb2;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Documents built from the fixture lines (prose and boilerplate) with seeded
/// variations: length, repeated lines, bullets, hashes, ellipses, citations,
/// very short lines — so every rule is exercised near and away from its threshold.
pub fn corpus(n: usize, seed: u64) -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(root().join("fixtures/quality/sentences.txt")).expect("fixture");
    let tricky =
        std::fs::read_to_string(root().join("fixtures/quality/tricky.txt")).expect("fixture");
    let prose: Vec<&str> = text.lines().take(30).chain(tricky.lines()).collect();
    let junk: Vec<&str> = text.lines().skip(30).collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|i| {
            let mut lines: Vec<String> = Vec::new();
            for _ in 0..rng.usize(1..30) {
                let line = match rng.u8(..100) {
                    0..=59 => {
                        let k = rng.usize(1..4);
                        (0..k)
                            .map(|_| prose[rng.usize(..prose.len())])
                            .collect::<Vec<_>>()
                            .join(" ")
                    }
                    60..=79 => junk[rng.usize(..junk.len())].to_string(),
                    80..=84 => {
                        format!(
                            "{}[{}]",
                            prose[rng.usize(..prose.len())].trim_end_matches('.'),
                            rng.u8(1..30)
                        ) + "."
                    }
                    85..=89 => lines.last().cloned().unwrap_or_default(),
                    90..=94 => format!("- {}", prose[rng.usize(..prose.len())]),
                    _ => prose[rng.usize(..prose.len())]
                        .split(' ')
                        .take(rng.usize(1..6))
                        .collect::<Vec<_>>()
                        .join(" "),
                };
                lines.push(line);
            }
            let sep = if rng.u8(..10) == 0 { "\n\n" } else { "\n" };
            (format!("q{seed}-{i}"), lines.join(sep))
        })
        .collect()
}

fn reference(docs: &[(String, String)]) -> Option<Vec<Option<String>>> {
    let mut child = match Command::new("python3")
        .arg(root().join("scripts/quality_reference.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("python3: {e}"),
    };
    // Feed stdin from another thread: the reference answers as it reads, and a full
    // stdout pipe would otherwise block both sides.
    let mut stdin = child.stdin.take().expect("stdin");
    let input = jsonl(docs);
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("python3");
    feeder
        .join()
        .expect("feeder thread")
        .expect("send documents");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            std::env::var_os("CI").is_none(),
            "datatrove reference failed: {err}"
        );
        eprintln!("datatrove unavailable, cross-check skipped: {err}");
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("reference line");
                v["reason"].as_str().map(str::to_string)
            })
            .collect(),
    )
}

#[test]
fn decisions_match_datatrove() {
    // TOKENMILL_QUALITY_DOCS / TOKENMILL_QUALITY_SEED run a larger or another corpus.
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let docs = corpus(
        env("TOKENMILL_QUALITY_DOCS", 600) as usize,
        env("TOKENMILL_QUALITY_SEED", 1),
    );
    let Some(expected) = reference(&docs) else {
        return;
    };
    assert_eq!(expected.len(), docs.len());
    let stage = Quality::new(&Storage::new(), &Config::default()).expect("stage");
    let mut agree = 0;
    let mut report = String::new();
    let mut kept = 0;
    let mut same_reason = 0;
    for ((id, text), theirs) in docs.iter().zip(&expected) {
        let mut t = text.clone();
        let ours = stage.judge(&mut t);
        if ours.is_none() {
            kept += 1;
        }
        if ours == theirs.as_deref() {
            same_reason += 1;
        }
        if ours.is_none() == theirs.is_none() {
            agree += 1;
        } else {
            report.push_str(&format!(
                "{id}: ours {ours:?}, datatrove {theirs:?}\n{text}\n---\n"
            ));
        }
    }
    let rate = agree as f64 / docs.len() as f64;
    eprintln!(
        "keep/drop agreement with datatrove: {agree}/{} ({:.2}%), same reason {same_reason}, {kept} kept\n{report}",
        docs.len(),
        rate * 100.0
    );
    assert!(
        kept > 20 && kept < docs.len() - 20,
        "the corpus must hold both kinds: {kept} kept"
    );
    assert!(rate >= 0.99, "agreement {rate:.4} < 0.99");
}

fn binary(args: Vec<String>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-quality"));
    cmd.args(args);
    cmd
}

fn jsonl(docs: &[(String, String)]) -> Vec<u8> {
    docs.iter()
        .map(|(id, text)| format!("{}\n", serde_json::json!({"id": id, "text": text})))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn conformance() {
    let fixture = |name: &str| std::fs::read(root().join("fixtures").join(name)).expect("fixture");
    check(&Conformance {
        step: &|| quality::step(&Storage::new(), &Config::default()).expect("step"),
        inputs: vec![
            ("web.jsonl".into(), fixture("docs/web-multilingual.jsonl")),
            ("gen-a.jsonl".into(), jsonl(&corpus(300, 2))),
            ("gen-b.jsonl".into(), jsonl(&corpus(200, 3))),
        ],
        broken: vec![(
            "broken.jsonl".into(),
            fixture("docs/broken.jsonl"),
            "malformed_json",
        )],
        command: Some(&binary),
    });
}

/// Drop reasons on a seeded corpus, as a golden file (`TOKENMILL_BLESS=1` rewrites it).
#[test]
fn golden_reasons_on_generated_corpus() {
    let stage = Quality::new(&Storage::new(), &Config::default()).expect("stage");
    let mut counts = std::collections::BTreeMap::new();
    for (_, text) in corpus(400, 4) {
        let mut t = text;
        *counts
            .entry(stage.judge(&mut t).unwrap_or("kept"))
            .or_insert(0) += 1;
    }
    let got: String = counts.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    let path = root().join("fixtures/expected/quality-reasons.txt");
    if std::env::var_os("TOKENMILL_BLESS").is_some() {
        std::fs::write(&path, &got).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&path).expect("golden file");
    assert_eq!(
        got, expected,
        "TOKENMILL_BLESS=1 rewrites fixtures/expected/quality-reasons.txt"
    );
}

/// `languages = "fineweb2"`: each document is judged by its language's FineWeb-2 row;
/// a language without one gets the configured rules (English: decisions as without
/// the table) or is dropped, and is counted.
#[test]
fn fineweb2_settings_by_language() {
    use pipeline::languages::LANGUAGE_SCRIPT;
    use pipeline::{Document, Stage, Value, Verdict};
    let storage = Storage::new();
    let plain = Quality::new(&storage, &Config::default()).expect("stage");
    let cfg = Config {
        languages: Some("fineweb2".into()),
        ..Config::default()
    };
    let stage = Quality::new(&storage, &cfg).expect("stage");
    let doc = |language: &str, script: Option<&str>| {
        let mut d = Document::new("1", "x");
        d.language = Some(language.into());
        if let Some(s) = script {
            d.annotate(LANGUAGE_SCRIPT, Value::Str(s.into()));
        }
        d
    };
    let zh = stage.rules_for(&doc("zh", None)).expect("zh has a row");
    assert_eq!(zh.gopher_quality.stop_words[0], "的");
    assert_eq!(zh.gopher_quality.max_avg_word_length, 5.0);
    assert!(!zh.c4.enabled);
    assert_eq!(zh.fineweb.char_duplicates_ratio, 0.1);
    assert_eq!(zh.gopher_repetition.dup_line_frac, 0.287);
    assert_eq!(stage.rules_for(&doc("cmn", Some("Hani"))), Some(zh));
    let de = stage
        .rules_for(&doc("deu", Some("Latn")))
        .expect("deu_Latn");
    assert_eq!(de.gopher_quality.stop_words[..2], ["der", "und"]);
    // datatrove reads a 0 as off: German's minimum word length is 0.
    assert_eq!(de.gopher_quality.min_avg_word_length, 0.0);
    assert!(stage.rules_for(&doc("en", None)).is_none());
    assert!(stage.rules_for(&doc("xx", None)).is_none());

    // English and unknown labels: the configured rules, counted.
    for (id, text) in corpus(200, 5) {
        for language in ["en", "xx"] {
            let mut d = Document::new(id.clone(), text.clone());
            d.language = Some(language.into());
            let mut t = text.clone();
            let expected = match plain.judge(&mut t) {
                Some(reason) => Verdict::Drop(reason),
                None => Verdict::Keep,
            };
            assert_eq!(stage.process(&mut d), expected, "{id}");
            assert_eq!(d.counts, [(quality::FALLBACK_COUNT, 1)]);
            assert_eq!(d.text, t);
        }
    }
    let drop = Quality::new(
        &storage,
        &Config {
            language_fallback: quality::Fallback::Drop,
            ..cfg.clone()
        },
    )
    .expect("stage");
    assert_eq!(
        drop.process(&mut doc("xx", None)),
        Verdict::Drop("no_language_settings")
    );

    // A German page passes German's rules, its text untouched (FineWeb-2 runs no C4,
    // whose line removal would take its line without terminal punctuation).
    let german = "Die Stadtbibliothek verlängert ab Montag ihre Öffnungszeiten.\n\
        Leserinnen und Leser können nun auch am Samstagnachmittag Bücher ausleihen, \
        die neuen Lernräume im zweiten Stock nutzen und an Kursen teilnehmen.\n\
        Der Förderverein hat dafür drei zusätzliche Stellen finanziert, die zunächst \
        für zwei Jahre befristet sind.\n\
        Wer einen Ausweis besitzt, kann außerdem Zeitschriften, Spiele und Noten \
        mitnehmen, und die Rückgabe ist rund um die Uhr am Automaten möglich.\n\
        Im Herbst folgt eine Reihe von Lesungen mit Autorinnen aus der Region\n\
        Die Leitung bittet um Anmeldung per Telefon oder im Foyer des Hauses.";
    let mut d = Document::new("de", german);
    d.language = Some("de".into());
    assert_eq!(stage.process(&mut d), Verdict::Keep);
    assert_eq!(d.text, german);
    assert!(d.counts.is_empty());
    let mut t = german.to_string();
    assert!(plain.judge(&mut t).is_some(), "the English rules drop it");
}

/// A table given by address: its errors name the language and the key.
#[test]
fn a_broken_language_table_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let path = tmp.path().join("table.tsv");
    let mut row: Vec<String> = vec!["deu_Latn".into()];
    row.extend(std::iter::repeat_n("0.1".to_string(), 12));
    row.push("lots".into());
    std::fs::write(&path, row.join("\t") + "\n").expect("write");
    let cfg = Config {
        languages: Some(path.display().to_string()),
        ..Config::default()
    };
    let err = Quality::new(&Storage::new(), &cfg)
        .expect_err("a broken table")
        .to_string();
    assert!(
        err.contains("deu_Latn") && err.contains("new_line_ratio"),
        "{err}"
    );
    let cfg = Config {
        languages: Some(tmp.path().join("none.tsv").display().to_string()),
        ..Config::default()
    };
    assert!(Quality::new(&Storage::new(), &cfg).is_err());
}
