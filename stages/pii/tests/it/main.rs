//! Integration tests of `mill-pii`: replacements equal datatrove's `PIIFormatter` on
//! generated documents (every difference explained), the tricky fixture as a golden,
//! conformance.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pii::{Config, Kind, Pii};
use pipeline::testing::{Conformance, check, golden};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Things that look like personal data, or almost: every kind, the ranges that stay,
/// the shapes datatrove and we read differently.
const ITEMS: &[&str] = &[
    "jane.doe@example-news.com",
    "x@y.co",
    "first+tag@sub.mail.example.org",
    "o'brien@example.ie",
    "a.b-c_d@host-1.example.com",
    "user@[8.8.4.4]",
    "mailto:sales@shop-x.org",
    "https://medium.com/@john.doe/post",
    "@handle",
    "not an @ address",
    "name@localhost",
    "trailing.dot@example.com.",
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "192.168.0.1",
    "10.20.30.40",
    "172.20.1.1",
    "127.0.0.1",
    "100.64.3.2",
    "203.0.113.77",
    "255.255.255.255",
    "08.8.8.8",
    "256.1.1.1",
    "v1.2.3.4",
    "1.2.3.4.5",
    "10.0.19041.1",
    "build4.4.4.4",
    "2606:4700:4700::1111",
    "fe80::1:2:3",
    "12:30:45",
    "(415) 555-2671",
    "+44 20 7946 0958",
    "1-800-555-0199",
    "2024-01-15",
    "4539 1488 0343 6467",
    "DE89 3704 0044 0532 0130 00",
    "maria [at] uni [dot] it",
    "é.bob@example.com",
    "ñandu@example.com",
    "3.14159",
];

/// Documents of fixture sentences with items from [`ITEMS`] put between and inside
/// them, seeded.
fn corpus(n: usize, seed: u64) -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(root().join("fixtures/quality/sentences.txt")).expect("fixture");
    let prose: Vec<&str> = text.lines().collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|i| {
            let mut words: Vec<String> = Vec::new();
            for _ in 0..rng.usize(1..8) {
                words.push(prose[rng.usize(..prose.len())].to_string());
                for _ in 0..rng.usize(0..3) {
                    let item = ITEMS[rng.usize(..ITEMS.len())];
                    let glue = [" ", ", ", " (", "\n", ": ", " <", "/"][rng.usize(..7)];
                    words.push(format!("{glue}{item}"));
                }
            }
            (format!("p{seed}-{i}"), words.join(" "))
        })
        .collect()
}

fn jsonl(docs: &[(String, String)]) -> Vec<u8> {
    docs.iter()
        .map(|(id, text)| format!("{}\n", serde_json::json!({"id": id, "text": text})))
        .collect::<String>()
        .into_bytes()
}

/// datatrove's output texts, or `None` (skipped) when it is not installed outside CI.
fn reference(docs: &[(String, String)]) -> Option<Vec<String>> {
    let out =
        pipeline::testing::python_reference(&root().join("scripts/pii_reference.py"), jsonl(docs))?;
    Some(
        out.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("reference line");
                v["text"].as_str().expect("text").to_string()
            })
            .collect(),
    )
}

/// datatrove's scope: e-mails and public IPv4 addresses, no boundary check.
fn datatrove_scope() -> Config {
    Config {
        obfuscated_emails: false,
        ipv6: false,
        phones: false,
        ipv4_word_boundaries: false,
        ..Config::default()
    }
}

#[test]
fn replacements_match_datatrove() {
    let docs = corpus(800, 1);
    let Some(theirs) = reference(&docs) else {
        return;
    };
    assert_eq!(theirs.len(), docs.len());
    let scope = Pii::new(datatrove_scope()).expect("config");
    let bounded = Pii::new(Config {
        ipv4_word_boundaries: true,
        ..datatrove_scope()
    })
    .expect("config");
    let all = Pii::new(Config {
        credit_cards: true,
        ibans: true,
        ..Config::default()
    })
    .expect("config");
    let mut same = 0;
    let mut replaced = 0;
    let mut explained: BTreeMap<&str, usize> = BTreeMap::new();
    let mut unexplained = String::new();
    for ((id, text), theirs) in docs.iter().zip(&theirs) {
        // In datatrove's scope, the same text.
        let (ours, found) = scope.redact(text);
        assert_eq!(
            &ours, theirs,
            "{id}: datatrove's scope differs\n{text}\n--- ours\n{ours}\n--- datatrove\n{theirs}"
        );
        replaced += found.len();
        // With every kind on, each difference has a reason.
        let (full, found) = all.redact(text);
        if full == *theirs {
            same += 1;
            continue;
        }
        let extra: Vec<Kind> = found
            .iter()
            .map(|f| f.kind)
            .filter(|k| !matches!(k, Kind::Email | Kind::Ipv4))
            .collect();
        if bounded.redact(text).0 != ours {
            *explained
                .entry("ipv4 that touches a word or a version")
                .or_default() += 1;
        } else if let Some(k) = extra.first() {
            *explained.entry(kind_name(*k)).or_default() += 1;
        } else {
            unexplained.push_str(&format!(
                "{id}:\n{text}\n--- ours\n{full}\n--- datatrove\n{theirs}\n"
            ));
        }
    }
    eprintln!(
        "{} documents, {replaced} replacements in datatrove's scope, all equal; with every kind on, {same} equal, differences: {explained:?}",
        docs.len()
    );
    assert!(replaced > 500, "the corpus must exercise the patterns");
    assert!(
        unexplained.is_empty(),
        "unexplained differences:\n{unexplained}"
    );
}

fn tricky() -> Vec<(String, String)> {
    std::fs::read_to_string(root().join("fixtures/pii/tricky.jsonl"))
        .expect("fixture")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            (
                v["id"].as_str().expect("id").to_string(),
                v["text"].as_str().expect("text").to_string(),
            )
        })
        .collect()
}

/// The tricky fixture with every kind on: each document's replacements and text.
#[test]
fn golden_on_tricky_cases() {
    let pii = Pii::new(Config {
        credit_cards: true,
        ibans: true,
        ..Config::default()
    })
    .expect("config");
    let mut got = String::new();
    for (id, text) in tricky() {
        let (out, found) = pii.redact(&text);
        let kinds: Vec<String> = found
            .iter()
            .map(|f| format!("{}={}", f.kind.stat(), &text[f.start..f.end]))
            .collect();
        got.push_str(&format!("## {id}\n{}\n{out}\n\n", kinds.join("\n")));
    }
    golden(&root().join("fixtures/expected/pii-tricky.txt"), &got);
}

fn binary(args: Vec<String>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-pii"));
    cmd.args(args);
    cmd
}

#[test]
fn conformance() {
    let fixture = |name: &str| std::fs::read(root().join("fixtures").join(name)).expect("fixture");
    check(&Conformance {
        step: &|| pii::step(&Config::default()).expect("step"),
        inputs: vec![
            ("tricky.jsonl".into(), fixture("pii/tricky.jsonl")),
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

/// `mill-pii` counts what it replaced, per kind, in the input's marker, and the
/// `pii_count` column holds each document's total.
#[test]
fn counts_per_kind_reach_the_stats_and_the_column() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("pii.toml");
    std::fs::write(&config, "count_column = true\n").expect("config");
    let out = dir.path().join("out");
    let status = binary(vec![
        "--input".into(),
        root().join("fixtures/pii").display().to_string(),
        "--output".into(),
        out.display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "--log-format".into(),
        "json".into(),
    ])
    .status()
    .expect("mill-pii");
    assert!(status.success());
    let marker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("_done/tricky.json")).expect("marker"))
            .expect("json");
    let counts = &marker["stats"]["counts"];
    let pii = Pii::new(Config::default()).expect("config");
    let mut expected: BTreeMap<&str, u64> = BTreeMap::new();
    let mut per_doc = Vec::new();
    for (_, text) in tricky() {
        let found = pii.find(&text);
        per_doc.push(found.len() as i64);
        for f in found {
            *expected.entry(f.kind.stat()).or_default() += 1;
        }
    }
    assert!(expected.len() >= 4, "{expected:?}");
    for (k, n) in &expected {
        assert_eq!(counts[k].as_u64(), Some(*n), "{k} in {counts}");
    }
    let storage = pipeline::Storage::new();
    let meta = storage
        .list(&pipeline::Location::Local(out.clone()))
        .expect("list")
        .into_iter()
        .find(|m| m.relative == "tricky.parquet")
        .expect("shard");
    let reader = pipeline::shard::ParquetReader::open(&storage, &meta, "", 1024)
        .expect("open")
        .expect("readable");
    let mut got = Vec::new();
    for batch in reader {
        use arrow_array::Array;
        let batch = batch.expect("batch");
        let carry = batch
            .carry
            .expect("stage columns come back as carried columns");
        let col = carry
            .column_by_name(pii::COUNT_COLUMN)
            .expect("pii_count column")
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .expect("int64")
            .clone();
        for i in 0..batch.docs.len() {
            assert!(col.is_valid(i));
            got.push(col.value(i));
        }
    }
    assert_eq!(got, per_doc);
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Email => "e-mail",
        Kind::ObfuscatedEmail => "obfuscated e-mail",
        Kind::Ipv4 => "ipv4",
        Kind::Ipv6 => "ipv6",
        Kind::Iban => "iban",
        Kind::Card => "card",
        Kind::Phone => "phone",
    }
}
