//! Integration tests of `mill-langid`: agreement with fastText's Python binding,
//! conformance, golden labels on the fixtures, model errors, output split by language.

use std::path::{Path, PathBuf};
use std::process::Command;

use langid::{Config, LangId};
use pipeline::testing::{Conformance, check, config_file};
use pipeline::{Location, RunOptions, Storage, run};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// lid.176.ftz as scripts/fetch-models.sh caches it; under CI it must be there.
fn model() -> Option<String> {
    let path = std::env::var("TOKENMILL_LID_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|_| langid::default_model_path());
    if path.is_file() {
        return Some(path.display().to_string());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} missing: run {}",
        path.display(),
        langid::SETUP_COMMAND
    );
    eprintln!(
        "{} missing: langid test skipped (run {})",
        path.display(),
        langid::SETUP_COMMAND
    );
    None
}

fn config(model: &str) -> Config {
    Config {
        model: model.to_string(),
        ..Config::default()
    }
}

/// A few hundred lines from the fixture sentences: whole, halves, mixed pairs,
/// upper-cased, and with markup noise.
fn agreement_lines() -> Vec<String> {
    let text =
        std::fs::read_to_string(root().join("fixtures/langid/sentences.txt")).expect("sentences");
    let sentences: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let mut lines = Vec::new();
    for (i, s) in sentences.iter().enumerate() {
        let chars: Vec<char> = s.chars().collect();
        lines.push(s.to_string());
        lines.push(chars[..chars.len() / 2].iter().collect());
        lines.push(format!("{s} {}", sentences[(i + 1) % sentences.len()]));
        lines.push(s.to_uppercase());
        lines.push(format!("<div>{s}</div>\n© 2024 | {}", i * 37));
    }
    lines
}

const REFERENCE: &str = r#"
import json, sys
import fasttext
model = fasttext.load_model(sys.argv[1])
out = []
for line in sys.stdin.read().split("\x1e"):
    labels, probs = model.predict(line.replace("\n", " "), k=3)
    out.append([[l[len("__label__"):], float(p)] for l, p in zip(labels, probs)])
print(json.dumps(out))
"#;

#[test]
fn labels_and_scores_equal_fasttext_python() {
    let Some(model) = model() else { return };
    let lines = agreement_lines();
    let child = Command::new("python3")
        .arg("-c")
        .arg(REFERENCE)
        .arg(&model)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start python3");
    {
        use std::io::Write;
        let mut stdin = child.stdin.as_ref().expect("stdin");
        stdin
            .write_all(lines.join("\x1e").as_bytes())
            .expect("send lines");
    }
    let output = child.wait_with_output().expect("python3");
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(
            std::env::var_os("CI").is_none(),
            "the Python reference (pip fasttext-predict) failed: {err}"
        );
        eprintln!("Python fastText reference unavailable, test skipped: {err}");
        return;
    }
    let reference: Vec<Vec<(String, f64)>> =
        serde_json::from_slice(&output.stdout).expect("reference JSON");
    assert_eq!(reference.len(), lines.len());
    let stage = LangId::new(&Storage::new(), &config(&model)).expect("load model");
    let mut languages = std::collections::BTreeSet::new();
    for (line, expected) in lines.iter().zip(&reference) {
        let ours: Vec<(String, f32)> = stage
            .predict(line, 3, 0.0)
            .into_iter()
            .map(|p| (p.label, p.score))
            .collect();
        let theirs: Vec<(String, f32)> = expected
            .iter()
            .map(|(l, p)| (l.clone(), *p as f32))
            .collect();
        assert_eq!(ours, theirs, "{line:?}");
        languages.insert(ours[0].0.clone());
    }
    assert!(
        languages.len() >= 25,
        "fixture lines cover {} languages",
        languages.len()
    );
    eprintln!(
        "{} lines, {} top languages, all equal to fastText's Python binding",
        lines.len(),
        languages.len()
    );
}

fn binary(args: Vec<String>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-langid"));
    cmd.args(args);
    if let Some(model) = model() {
        let text = format!("model = {model:?}\nlanguages = [\"en\", \"de\", \"ja\"]\n");
        let path = config_file(env!("CARGO_TARGET_TMPDIR"), "langid-it.toml", &text);
        cmd.arg("--config").arg(path);
    }
    cmd
}

#[test]
fn conformance() {
    let Some(model) = model() else { return };
    let fixture = |name: &str| std::fs::read(root().join("fixtures").join(name)).expect("fixture");
    let web = fixture("docs/web-multilingual.jsonl");
    let many: Vec<u8> = (0..30).flat_map(|_| web.iter().copied()).collect();
    let cfg = Config {
        languages: vec!["en".into(), "de".into(), "ja".into()],
        ..config(&model)
    };
    check(&Conformance {
        step: &|| langid::step(&Storage::new(), &cfg).expect("step"),
        inputs: vec![
            ("web.jsonl".into(), web.clone()),
            ("dolma.jsonl".into(), fixture("docs/dolma-style.jsonl")),
            ("many.jsonl".into(), many),
        ],
        broken: vec![(
            "broken.jsonl".into(),
            fixture("docs/broken.jsonl"),
            "malformed_json",
        )],
        command: Some(&binary),
    });
}

#[test]
fn golden_labels_on_fixtures() {
    let Some(model) = model() else { return };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().to_path_buf();
    let out = dir.join("out");
    let step = langid::step(&Storage::new(), &config(&model)).expect("step");
    let mut opts = RunOptions::new(
        Location::Local(root().join("fixtures/docs/web-multilingual.jsonl")),
        Location::Local(out.clone()),
    );
    opts.keep_rejected = true;
    run(&step, &Storage::new(), &opts).expect("run");
    let docs = pipeline::shard::read_all_documents(
        &Storage::new(),
        &Location::Local(out.join("web-multilingual.parquet")),
    )
    .expect("read");
    let got: Vec<(String, String)> = docs
        .iter()
        .map(|d| {
            (
                d.url.clone().unwrap_or_default(),
                d.language.clone().unwrap_or_default(),
            )
        })
        .collect();
    let expected = [
        ("https://news.example.com/local/flood-2024", "en"),
        ("https://stadt.example.de/bibliothek", "de"),
        ("https://journal.example.fr/gastronomie/baguette", "fr"),
        ("https://ciudad.example.es/noticias/arboles", "es"),
        ("https://news.example.cn/city/library-course", "zh"),
        ("https://machi.example.jp/events/market", "ja"),
        ("https://akhbar.example.com/madina/hadiqa", "ar"),
        ("https://ir.example.co.il/tachbura", "he"),
        ("https://gorod.example.ru/muzei/karty", "ru"),
        ("https://samachar.example.in/pustakalay", "hi"),
        ("https://khao.example.co.th/talat-nam", "th"),
        ("https://sinmun.example.kr/doseogwan", "ko"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(u, l)| (u.to_string(), l.to_string()))
        .collect();
    assert_eq!(got, expected);
    assert!(
        docs.iter()
            .all(|d| d.language_score.is_some_and(|s| s > 0.65))
    );
}

#[test]
fn keep_rule_and_language_split() {
    let Some(model) = model() else { return };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().to_path_buf();
    let cfg = Config {
        languages: vec!["en".into(), "fr".into()],
        split_by_language: true,
        ..config(&model)
    };
    let step = langid::step(&Storage::new(), &cfg).expect("step");
    let report = run(
        &step,
        &Storage::new(),
        &RunOptions::new(
            Location::Local(root().join("fixtures/docs/web-multilingual.jsonl")),
            Location::Local(dir.join("out")),
        ),
    )
    .expect("run");
    assert_eq!(report.stats.docs_out, 2);
    assert_eq!(report.stats.drops.get("unwanted_language"), Some(&10));
    assert!(dir.join("out/en/web-multilingual.parquet").is_file());
    assert!(dir.join("out/fr/web-multilingual.parquet").is_file());
    assert!(!dir.join("out/web-multilingual.parquet").exists());
}

#[test]
fn missing_and_corrupt_models_are_clear_errors() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().to_path_buf();
    let missing = dir.join("nope/lid.176.ftz");
    let err = LangId::new(&Storage::new(), &config(&missing.display().to_string()))
        .expect_err("missing model");
    let msg = err.to_string();
    assert!(
        msg.contains("nope/lid.176.ftz") && msg.contains(langid::SETUP_COMMAND),
        "{msg}"
    );

    let corrupt = dir.join("corrupt.ftz");
    std::fs::write(&corrupt, b"this is not a fastText model").expect("write");
    let msg = LangId::new(&Storage::new(), &config(&corrupt.display().to_string()))
        .expect_err("corrupt model")
        .to_string();
    assert!(
        msg.contains("corrupt.ftz") && msg.contains("not a fastText model"),
        "{msg}"
    );

    if let Some(model) = model() {
        let wrong_hash = Config {
            model_sha256: Some("00".repeat(32)),
            ..config(&model)
        };
        let msg = LangId::new(&Storage::new(), &wrong_hash)
            .expect_err("hash mismatch")
            .to_string();
        assert!(msg.contains("SHA-256"), "{msg}");
        let right_hash = Config {
            model_sha256: Some(langid::LID176_FTZ_SHA256.into()),
            ..config(&model)
        };
        LangId::new(&Storage::new(), &right_hash).expect("the cached model has the published hash");
    }
}

/// tokenmill's own fastText predictor against fastText's C++ (the `fasttext` crate, the
/// code the Python binding wraps), on lid.176: every label's probability equal to the
/// last bit, for the agreement lines and for lines that probe the tokenizer (tabs,
/// carriage returns, form feeds, NULs, newlines inside, a label-shaped word, only
/// spaces, empty), with FineWeb's preparation and as raw lines.
#[test]
fn the_predictor_equals_fasttexts_own_code() {
    let Some(model) = model() else { return };
    let mut reference = fasttext::FastText::new();
    reference
        .load_model(&model)
        .expect("fastText loads lid.176");
    let bytes = std::fs::read(&model).expect("model bytes");
    let ours = pipeline::fasttext_model::Predictor::from_bytes(&bytes).expect("our predictor");
    let mut lines = agreement_lines();
    lines.extend(
        [
            "",
            "   ",
            "\n",
            "word",
            "tab\tseparated\twords\rand\u{b}vertical\u{c}feeds",
            "a NUL\0inside the line",
            "first line\nsecond line\n\nfourth",
            "__label__en is a label-shaped word __label__xx",
            "</s> the end-of-sentence word typed out",
            "Ünïcödé wörds, 日本語の文, and emoji 🙂🙂 mixed",
            "ǅ ǈ ǋ ǲ: title-case digraphs",
        ]
        .map(String::from),
    );
    let labels = ours.labels();
    let mut compared = 0;
    for line in &lines {
        for (input, prepared) in [
            (pipeline::fasttext_model::prepare(line), true),
            (line.clone(), false),
        ] {
            for (k, threshold) in [(1, 0.0), (3, 0.0), (-1, 0.0), (-1, 0.05)] {
                // A C string ends at its NUL: the crate refuses one, fastText's C++
                // reads up to it, as our raw line does.
                let c_string = input.split('\0').next().unwrap_or("");
                let theirs: Vec<(String, u32)> = reference
                    .predict(c_string, k, threshold)
                    .expect("fastText predicts")
                    .into_iter()
                    .map(|p| (p.label, p.prob.to_bits()))
                    .collect();
                let mine = if prepared {
                    ours.predict_text(line, k, threshold)
                } else {
                    ours.predict_line(&input, k, threshold)
                };
                let mine: Vec<(String, u32)> = mine
                    .into_iter()
                    .map(|(i, p)| (labels[i].clone(), p.to_bits()))
                    .collect();
                // Labels of equal probability may come in either order.
                let sorted = |mut v: Vec<(String, u32)>| {
                    v.sort();
                    v
                };
                assert_eq!(
                    sorted(mine),
                    sorted(theirs),
                    "{line:?} (prepared {prepared}, k {k}, threshold {threshold})"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 1000, "{compared} predictions compared");
}

/// FineWeb-2's form: ISO 639-3 codes and scripts (lid.176's codes mapped through the
/// shipped table), and each language's threshold from FineWeb-2's configs.
#[test]
fn fineweb2_labels_and_thresholds() {
    let Some(model) = model() else { return };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let out = tmp.path().join("out");
    let cfg = Config {
        labels: langid::Labels::Iso639_3,
        min_score_table: Some("fineweb2".into()),
        // Nothing clears 1.0: a language without a row (English) is dropped.
        min_score: 1.0,
        ..config(&model)
    };
    let step = langid::step(&Storage::new(), &cfg).expect("step");
    let mut opts = RunOptions::new(
        Location::Local(root().join("fixtures/docs/web-multilingual.jsonl")),
        Location::Local(out.clone()),
    );
    opts.keep_rejected = true;
    run(&step, &Storage::new(), &opts).expect("run");
    let read = |p: &Path| {
        if !p.is_file() {
            return Vec::new();
        }
        pipeline::shard::read_all_documents(&Storage::new(), &Location::Local(p.to_path_buf()))
            .expect("read")
    };
    let kept = read(&out.join("web-multilingual.parquet"));
    let rejected = read(&out.join("_rejected/web-multilingual.parquet"));
    assert_eq!(kept.len() + rejected.len(), 12);
    let table = pipeline::languages::Table::fineweb2().expect("shipped table");
    let mut labels = Vec::new();
    for (doc, was_kept) in kept
        .iter()
        .map(|d| (d, true))
        .chain(rejected.iter().map(|d| (d, false)))
    {
        let label = pipeline::languages::document_label(doc).expect("a label");
        let score = doc.language_score.expect("a score");
        let threshold = table.get(&label).map_or(1.0, |s| s.language_score);
        assert_eq!(
            was_kept,
            score > threshold,
            "{label} {score} against {threshold}"
        );
        labels.push(label);
    }
    labels.sort();
    assert_eq!(
        labels,
        [
            "arb_Arab", "cmn_Hani", "deu_Latn", "eng_Latn", "fra_Latn", "heb_Hebr", "hin_Deva",
            "jpn_Jpan", "kor_Hang", "rus_Cyrl", "spa_Latn", "tha_Thai"
        ]
    );
    let en = rejected
        .iter()
        .find(|d| d.language.as_deref() == Some("eng"))
        .expect("English is under 1.0");
    assert_eq!(
        en.annotation(pipeline::languages::LANGUAGE_SCRIPT),
        Some(&pipeline::Value::Str("Latn".into()))
    );
    assert!(
        !kept.is_empty(),
        "some language clears its FineWeb-2 threshold"
    );

    // Split by language, the folders are FineWeb-2's labels.
    let cfg = Config {
        labels: langid::Labels::Iso639_3,
        split_by_language: true,
        ..config(&model)
    };
    let step = langid::step(&Storage::new(), &cfg).expect("step");
    let split = tmp.path().join("split");
    run(
        &step,
        &Storage::new(),
        &RunOptions::new(
            Location::Local(root().join("fixtures/docs/web-multilingual.jsonl")),
            Location::Local(split.clone()),
        ),
    )
    .expect("run");
    for label in ["cmn_Hani", "eng_Latn", "tha_Thai"] {
        assert!(
            split.join(label).join("web-multilingual.parquet").is_file(),
            "{label}"
        );
    }
}
