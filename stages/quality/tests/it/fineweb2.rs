//! FineWeb-2's quality step, cross-checked with datatrove 0.10.1 set up as FineWeb-2's
//! pipeline sets it (`scripts/fineweb2_reference.py`): keep/drop decisions and word
//! segmentation, per language.
//!
//! The documents: `TOKENMILL_FINEWEB2_CORPUS`, a folder of `<label>.jsonl` files
//! (`scripts/multilingual_corpus.py` builds one from real text in registry packages),
//! else the multilingual fixture documents (`fixtures/multilingual/docs.jsonl`).
//! `TOKENMILL_FINEWEB2_SHOW=N` prints N disagreements per language.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::{Command, Stdio};

use pipeline::languages::Table;
use quality::{Config, Quality, Rules, Segmenter};

use crate::root;

struct Doc {
    id: String,
    label: String,
    text: String,
}

fn read_jsonl(path: &std::path::Path, out: &mut Vec<Doc>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON document");
        let field = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("{k} in {line}"));
        out.push(Doc {
            id: field("id").to_string(),
            label: format!("{}_{}", field("language"), field("language_script")),
            text: field("text").to_string(),
        });
    }
}

fn documents() -> Vec<Doc> {
    let mut docs = Vec::new();
    match std::env::var_os("TOKENMILL_FINEWEB2_CORPUS") {
        Some(dir) => {
            let mut files: Vec<_> = std::fs::read_dir(&dir)
                .expect("TOKENMILL_FINEWEB2_CORPUS")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect();
            files.sort();
            for f in files {
                read_jsonl(&f, &mut docs);
            }
        }
        None => read_jsonl(&root().join("fixtures/multilingual/docs.jsonl"), &mut docs),
    }
    docs
}

struct Theirs {
    reason: Option<String>,
    words: Vec<String>,
}

/// datatrove's decisions and words; `None` (skipped, outside CI) without datatrove.
fn reference(docs: &[Doc]) -> Option<Vec<Theirs>> {
    let mut child = Command::new("python3")
        .arg(root().join("scripts/fineweb2_reference.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let mut input = Vec::new();
    for d in docs {
        let (language, script) = d.label.split_at(3);
        let line = serde_json::json!({
            "id": d.id, "text": d.text, "language": language, "language_script": &script[1..],
        });
        input.extend(line.to_string().bytes());
        input.push(b'\n');
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("python3");
    feeder.join().expect("feeder").expect("send documents");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail = &err[err.len().saturating_sub(3000)..];
        assert!(
            std::env::var_os("CI").is_none(),
            "datatrove reference failed: {tail}"
        );
        eprintln!("datatrove unavailable, FineWeb-2 cross-check skipped: {tail}");
        return None;
    }
    let theirs: Vec<Theirs> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("reference line");
            Theirs {
                reason: v["reason"].as_str().map(str::to_string),
                words: v["words"]
                    .as_array()
                    .expect("words")
                    .iter()
                    .map(|w| w.as_str().expect("a word").to_string())
                    .collect(),
            }
        })
        .collect();
    assert_eq!(theirs.len(), docs.len(), "one reference line per document");
    Some(theirs)
}

/// Words both lists hold (as multisets).
fn common(a: &[String], b: &[String]) -> usize {
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for w in a {
        *counts.entry(w).or_default() += 1;
    }
    b.iter()
        .filter(|w| {
            let c = counts.entry(w.as_str()).or_default();
            *c -= 1;
            *c >= 0
        })
        .count()
}

#[derive(Default)]
struct Tally {
    docs: usize,
    kept: usize,
    agree: usize,
    same_reason: usize,
    ours_words: usize,
    their_words: usize,
    common_words: usize,
    count_equal: usize,
    shown: usize,
}

/// The least decision agreement each language must reach on the documents checked:
/// the 98%, which every checked language reaches on the real-text corpus
/// (`scripts/multilingual_corpus.py`) and on the fixture documents.
const FLOOR: f64 = 98.0;

#[test]
fn fineweb2_decisions_match_datatrove() {
    let docs = documents();
    assert!(!docs.is_empty());
    let Some(theirs) = reference(&docs) else {
        return;
    };
    let table = Table::fineweb2().expect("shipped table");
    let base = Config::default();
    let mut rules: HashMap<String, Rules> = HashMap::new();
    let show: usize = std::env::var("TOKENMILL_FINEWEB2_SHOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    // TOKENMILL_FINEWEB2_DUMP=FILE writes both word lists of every document (JSONL).
    let mut dump = std::env::var_os("TOKENMILL_FINEWEB2_DUMP")
        .map(|p| std::io::BufWriter::new(std::fs::File::create(p).expect("dump file")));
    for (d, t) in docs.iter().zip(&theirs) {
        let r = rules.entry(d.label.clone()).or_insert_with(|| {
            let s = table
                .get(&d.label)
                .unwrap_or_else(|| panic!("{} has no FineWeb-2 config", d.label));
            Rules::fineweb2(&base, s)
        });
        let mut text = d.text.clone();
        let ours = Quality::judge_by(r, &mut text);
        let words = r.segmenter.words(&d.text).expect("the dictionary reads");
        if let Some(out) = dump.as_mut() {
            let line = serde_json::json!({
                "id": d.id, "ours": words, "theirs": t.words,
                "our_reason": ours, "their_reason": t.reason,
            });
            writeln!(out, "{line}").expect("dump");
        }
        let tally = tallies.entry(d.label.clone()).or_default();
        tally.docs += 1;
        tally.kept += usize::from(t.reason.is_none());
        let agree = ours.is_none() == t.reason.is_none();
        tally.agree += usize::from(agree);
        tally.same_reason += usize::from(ours == t.reason.as_deref());
        tally.ours_words += words.len();
        tally.their_words += t.words.len();
        tally.common_words += common(&words, &t.words);
        tally.count_equal += usize::from(words.len() == t.words.len());
        if !agree && tally.shown < show {
            tally.shown += 1;
            eprintln!(
                "{} {}: ours {ours:?}, datatrove {:?}; words {} / {}\n{}\n---",
                d.label,
                d.id,
                t.reason,
                words.len(),
                t.words.len(),
                d.text.chars().take(600).collect::<String>()
            );
        }
    }
    println!(
        "{:<10} {:<15} {:>5} {:>5} {:>9} {:>7} {:>11} {:>11} {:>11}",
        "label",
        "segmenter",
        "docs",
        "kept",
        "decisions",
        "reasons",
        "word count",
        "same count",
        "same words"
    );
    let mut low = Vec::new();
    for (label, t) in &tallies {
        let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
        let agreement = pct(t.agree, t.docs);
        println!(
            "{:<10} {:<15} {:>5} {:>5} {:>8.1}% {:>6.1}% {:>10.1}% {:>10.1}% {:>10.1}%",
            label,
            Segmenter::for_label(label).name(),
            t.docs,
            t.kept,
            agreement,
            pct(t.same_reason, t.docs),
            pct(t.ours_words, t.their_words),
            pct(t.count_equal, t.docs),
            pct(t.common_words, t.ours_words.max(t.their_words)),
        );
        if agreement < FLOOR {
            low.push(format!("{label} {agreement:.1}% < {FLOOR}%"));
        }
    }
    assert!(
        low.is_empty(),
        "decision agreement below the floor: {low:?}"
    );
}
