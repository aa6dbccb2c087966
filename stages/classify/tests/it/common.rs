//! What the tests share: the fixture texts, the Python references, the models they
//! make once per build of this test binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pipeline::testing::shared_dir;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The trainer's torch venv (`trainer/setup-torch.sh` sets `VIRTUAL_ENV`): torch and
/// transformers.
pub fn torch_python() -> PathBuf {
    std::env::var("VIRTUAL_ENV")
        .map(|v| PathBuf::from(v).join("bin/python"))
        .unwrap_or_else(|_| PathBuf::from("python"))
}

/// Runs a Python command and fails the test with its output when it fails.
pub fn run_python(python: &Path, args: &[&str]) -> String {
    let out = Command::new(python)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Texts of the fixtures (web-like documents in several languages, code, sentences),
/// with long ones joined from them (well past 512 tokens) and the edge cases (empty,
/// blank, one character, symbols only): at least 200.
pub fn texts() -> &'static Vec<String> {
    static T: OnceLock<Vec<String>> = OnceLock::new();
    T.get_or_init(|| {
        let mut docs: Vec<String> = Vec::new();
        for rel in [
            "fixtures/tokenize/docs/web.jsonl",
            "fixtures/tokenize/docs/code.jsonl",
            "fixtures/tokenize/docs/edge.jsonl",
            "fixtures/docs/web-multilingual.jsonl",
            "fixtures/docs/dolma-style.jsonl",
            "fixtures/decontam/docs.jsonl",
            "fixtures/pii/tricky.jsonl",
            "fixtures/toxicity/docs.jsonl",
        ] {
            let bytes = std::fs::read(root().join(rel)).unwrap_or_default();
            for line in bytes.split(|&b| b == b'\n') {
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line)
                    && let Some(t) = v["text"].as_str()
                {
                    docs.push(t.to_string());
                }
            }
        }
        let mut sentences = lines_of(&root().join("fixtures/langid/sentences.txt"));
        sentences.extend(lines_of(&root().join("fixtures/quality/sentences.txt")));
        sentences.extend(lines_of(&root().join("fixtures/quality/tricky.txt")));
        let mut out = docs.clone();
        out.extend(sentences.iter().cloned());
        // Paragraphs of a few sentences each.
        for (i, chunk) in sentences.chunks(3).enumerate() {
            let sep = if i % 2 == 0 { "\n" } else { " " };
            out.push(chunk.join(sep));
        }
        // Long documents: every document joined, from several starting points.
        let all = docs.join("\n\n");
        for k in 0..12 {
            let start = (k * all.len() / 13..)
                .find(|&i| all.is_char_boundary(i))
                .unwrap_or(0);
            out.push(format!("{}\n{}", &all[start..], sentences.join(" ")));
        }
        out.extend(
            [
                "",
                "   ",
                "a",
                "!!!",
                "\n\n",
                "😀 🎉",
                "東京は日本の首都です。",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        assert!(out.len() >= 200, "only {} fixture texts", out.len());
        out
    })
}

/// The texts as JSONL (`{"text": ...}` per line), written once.
pub fn texts_file() -> PathBuf {
    let dir = shared_dir(env!("CARGO_TARGET_TMPDIR"), "classify-texts", |dir| {
        let mut s = String::new();
        for t in texts() {
            s.push_str(&serde_json::json!({ "text": t }).to_string());
            s.push('\n');
        }
        std::fs::write(dir.join("texts.jsonl"), s).expect("write texts");
    });
    dir.join("texts.jsonl")
}

/// The four random-weight models transformers makes (scripts/classify_reference.py):
/// bert-regression, bert-labels, xlmr-regression, xlmr-labels.
pub fn models() -> PathBuf {
    let corpus = texts_file();
    shared_dir(env!("CARGO_TARGET_TMPDIR"), "classify-models", |dir| {
        run_python(
            &torch_python(),
            &[
                &root()
                    .join("scripts/classify_reference.py")
                    .to_string_lossy(),
                "models",
                &dir.to_string_lossy(),
                &corpus.to_string_lossy(),
            ],
        );
    })
}
