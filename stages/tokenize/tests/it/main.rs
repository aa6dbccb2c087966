//! mill-tokenize end to end on the fixture documents: train → encode → read back, the
//! fast encoder against the reference one, resume and thread-count rules, shard
//! rollover, token counts, the global shuffle, the Python interoperability check and
//! one run on the loopback S3 server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pipeline::testing::{shared_dir, snapshot};
use pipeline::{Location, RunOptions, Storage};
use tokenize::merge::{gather, scatter};
use tokenize::{EncodeConfig, EncoderKind, Index, Loaded, MergeConfig, TrainConfig, read_manifest};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn docs_dir() -> PathBuf {
    root().join("fixtures/tokenize/docs")
}

/// The fixture texts in encode order (files sorted, lines in order), empty ones left out.
fn fixture_texts() -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(docs_dir())
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        for line in std::fs::read_to_string(&f).expect("read").lines() {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            let text = v["text"].as_str().expect("text").to_string();
            if !text.is_empty() {
                out.push(text);
            }
        }
    }
    out
}

fn small_train() -> TrainConfig {
    TrainConfig {
        vocab_size: 1200,
        ..TrainConfig::default()
    }
}

/// One tokenizer trained on the fixtures, shared by the tests.
fn tokenizer() -> &'static (PathBuf, PathBuf) {
    static T: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    T.get_or_init(|| {
        let dir = shared_dir(env!("CARGO_TARGET_TMPDIR"), "tokenize-trained", |dir| {
            let report = tokenize::train(
                &Storage::new(),
                &Location::Local(docs_dir()),
                &Location::Local(dir.to_path_buf()),
                &small_train(),
            )
            .expect("train");
            assert_eq!(report.vocab_size, 1200, "{report:?}");
        });
        let path = dir.join("tokenizer.json");
        (dir, path)
    })
}

fn loaded(kind: EncoderKind) -> Loaded {
    let url = tokenizer().1.to_string_lossy().to_string();
    Loaded::read(&Storage::new(), &url, kind, tokenize::END_OF_DOCUMENT).expect("load tokenizer")
}

fn encode_to(
    out: &Path,
    config: &EncodeConfig,
    kind: EncoderKind,
    threads: usize,
) -> pipeline::Report {
    let mut opts = RunOptions::new(
        Location::Local(docs_dir()),
        Location::Local(out.to_path_buf()),
    );
    opts.threads = threads;
    tokenize::encode(&Storage::new(), &opts, config, &loaded(kind)).expect("encode")
}

/// Every document of the datasets an output's manifest lists, in order.
fn read_back(storage: &Storage, out: &Location) -> Vec<Vec<u32>> {
    let manifest = read_manifest(storage, out).expect("manifest");
    let mut docs = Vec::new();
    for s in &manifest.shards {
        let prefix = out.join(&s.name);
        let idx = Index::read(storage, &prefix).expect("idx");
        assert_eq!(idx.len() as u64, s.documents);
        assert_eq!(idx.tokens(), s.tokens);
        for i in 0..idx.len() {
            docs.push(idx.document(storage, &prefix, i).expect("document"));
        }
    }
    assert_eq!(docs.len() as u64, manifest.documents);
    assert_eq!(
        docs.iter().map(|d| d.len() as u64).sum::<u64>(),
        manifest.tokens
    );
    docs
}

#[test]
fn training_is_deterministic_and_reaches_the_asked_size() {
    let (_, first) = tokenizer();
    let again = tempfile::tempdir().expect("tempdir");
    let report = tokenize::train(
        &Storage::new(),
        &Location::Local(docs_dir()),
        &Location::Local(again.path().to_path_buf()),
        &small_train(),
    )
    .expect("train");
    assert_eq!(
        std::fs::read(first).expect("first"),
        std::fs::read(again.path().join("tokenizer.json")).expect("second"),
        "two trainings on the same sample differ"
    );
    assert!(report.sample_documents as usize >= fixture_texts().len());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(first).expect("read")).expect("json");
    assert_eq!(json["added_tokens"][0]["content"], "<|endoftext|>");
    assert_eq!(json["added_tokens"][0]["id"], 0);
    assert_eq!(json["model"]["type"], "BPE");
}

#[test]
fn golden_training_and_shards() {
    let out = tempfile::tempdir().expect("tempdir");
    encode_to(out.path(), &EncodeConfig::default(), EncoderKind::Native, 0);
    let storage = Storage::new();
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tokenizer().0.join("train.json")).expect("train.json"),
    )
    .expect("json");
    let m = read_manifest(&storage, &Location::Local(out.path().to_path_buf())).expect("m");
    let mut got = format!(
        "tokenizer sha256 {}\nvocabulary {} from {} documents, {} bytes\ndocuments {}, tokens {}\n",
        m.tokenizer_sha256,
        report["vocab_size"],
        report["sample_documents"],
        report["sample_bytes"],
        m.documents,
        m.tokens
    );
    for s in &m.shards {
        got.push_str(&format!(
            "{}: {} documents, {} tokens, {} bytes\n",
            s.name, s.documents, s.tokens, s.bytes
        ));
        let prefix = out.path().join(&s.name);
        let idx = Index::read(&storage, &Location::Local(prefix.clone())).expect("idx");
        let first = idx
            .document(&storage, &Location::Local(prefix), 0)
            .expect("first document");
        got.push_str(&format!(
            "  first ids {:?}\n",
            &first[..first.len().min(24)]
        ));
    }
    pipeline::testing::golden(&root().join("fixtures/expected/tokenize.txt"), &got);
}

/// The fixture texts and texts that stress the merge rules: runs of one letter (a
/// pair overlapping itself), a special token's spelling, CRLF, long digit runs,
/// emoji and combining marks, scripts without spaces.
fn training_texts() -> Vec<String> {
    let mut texts = fixture_texts();
    for n in [2, 3, 4, 5, 7, 8, 9, 16, 17] {
        texts.push(format!("{} {}!", "a".repeat(n), "ab".repeat(n)));
        texts.push(format!("{}\r\n{}", "=".repeat(n), "0".repeat(n * 3)));
    }
    texts.push("<|endoftext|> in a text is text. <|padding|><|padding|>".into());
    texts.push("👍🏽👍🏽 Ça s'écrit e\u{301}; ნათელი; 東京都の天気は晴れ; ภาษาไทยไม่มีช่องว่าง".into());
    texts.push("\t\t  \u{a0}\u{2003}x\u{200b}y\u{feff}z \u{7f}\u{0}".into());
    // Code points the 1.0 grammar and the 0.22 regex split differently
    // (tokenize::bpe::SPLIT_DIFFERS): a long s after an apostrophe, CJK extension J.
    for _ in 0..3 {
        texts.push("it'ſ here: \u{323b0}\u{323b1}ab \u{323b0}\u{323b1}ab".into());
    }
    texts
}

fn train_both(config: &TrainConfig, threads: usize, texts: &[String]) -> (String, String) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
    pool.install(|| {
        let ours =
            tokenize::bpe::train(config, texts.iter().cloned(), &failed).expect("our trainer");
        let reference = tokenize::bpe::train_reference(config, texts.iter().cloned(), &failed)
            .expect("tokenizers 0.22");
        (ours.json, reference.json)
    })
}

#[test]
fn our_trainer_writes_the_tokenizer_json_of_tokenizers_0_22() {
    let configs = [
        small_train(),
        // Runs out of pairs seen twice before reaching the size.
        TrainConfig {
            vocab_size: 100_000,
            ..TrainConfig::default()
        },
        TrainConfig {
            vocab_size: 900,
            min_frequency: 5,
            max_token_length: Some(4),
            special_tokens: vec!["<|endoftext|>".into(), "ab".into(), "<|endoftext|>".into()],
            ..TrainConfig::default()
        },
        // Specials spelled as byte symbols: the bytes' ids are then not one run.
        TrainConfig {
            vocab_size: 700,
            special_tokens: vec!["!".into(), "<|endoftext|>".into(), "Ġ".into()],
            ..TrainConfig::default()
        },
    ];
    let texts = training_texts();
    let mut first = None;
    for config in &configs {
        for threads in [1, 3] {
            let (ours, reference) = train_both(config, threads, &texts);
            assert!(
                ours == reference,
                "{config:?} on {threads} threads: our tokenizer.json differs from 0.22's"
            );
            first.get_or_insert(ours);
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&first.expect("trained")).expect("tokenizer.json");
    assert_eq!(
        json["model"]["vocab"].as_object().map(|v| v.len()),
        Some(1200)
    );
    // No text at all, and one word: the specials and the bytes, then what one word
    // can give.
    for texts in [vec![], vec!["abab".to_string()]] {
        let (ours, reference) = train_both(&small_train(), 2, &texts);
        assert!(
            ours == reference,
            "{texts:?}: our tokenizer.json differs from 0.22's"
        );
    }
}

/// Six JSONL inputs of 2,500 documents each (three reader batches of up to 1,024,
/// each cut into several batches for the counters), every tenth one empty.
fn sample_inputs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let words = [
        "river",
        "stone",
        "Zeit",
        "città",
        "東京",
        "λόγος",
        "42",
        "kotlin",
    ];
    for file in 0..6 {
        let mut lines = String::new();
        for doc in 0..2500usize {
            let text = if doc % 10 == 9 {
                String::new()
            } else {
                let n = 20 + (file * 7 + doc * 13) % 40;
                (0..n)
                    .map(|k| words[(file + doc * 3 + k * k) % words.len()])
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            lines.push_str(
                &serde_json::json!({ "id": format!("{file}-{doc}"), "text": text }).to_string(),
            );
            lines.push('\n');
        }
        std::fs::write(dir.path().join(format!("part-{file}.jsonl")), lines).expect("write input");
    }
    dir
}

#[test]
fn the_sample_is_the_same_on_any_thread_count_and_stops_at_its_budget() {
    let input = sample_inputs();
    let storage = Storage::new();
    let all: u64 = std::fs::read_dir(input.path())
        .expect("inputs")
        .map(|e| {
            let text = std::fs::read_to_string(e.expect("entry").path()).expect("read");
            text.lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).expect("json");
                    v["text"].as_str().expect("text").len() as u64
                })
                .sum::<u64>()
        })
        .sum();
    // The budget ends the sample inside a shard, then takes them all.
    for sample_bytes in [all * 3 / 5, all + 1] {
        let config = TrainConfig {
            vocab_size: 400,
            sample_bytes,
            ..TrainConfig::default()
        };
        let mut first: Option<(serde_json::Value, Vec<u8>)> = None;
        for threads in [1, 2, 5] {
            let out = tempfile::tempdir().expect("tempdir");
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            pool.install(|| {
                tokenize::train(
                    &storage,
                    &Location::Local(input.path().to_path_buf()),
                    &Location::Local(out.path().to_path_buf()),
                    &config,
                )
            })
            .expect("train");
            let mut report: serde_json::Value = serde_json::from_slice(
                &std::fs::read(out.path().join("train.json")).expect("train.json"),
            )
            .expect("json");
            for volatile in ["tokenizer", "seconds", "peak_rss_bytes"] {
                report[volatile] = serde_json::Value::Null;
            }
            let tokenizer = std::fs::read(out.path().join("tokenizer.json")).expect("tokenizer");
            match &first {
                None => first = Some((report, tokenizer)),
                Some((r, t)) => {
                    assert_eq!(&report, r, "{threads} threads took another sample");
                    assert!(
                        &tokenizer == t,
                        "{threads} threads trained another tokenizer"
                    );
                }
            }
        }
        // What reading the listed shards in order, document by document, takes.
        let (report, tokenizer) = first.expect("trained");
        let shards: Vec<&str> = report["sample_shards"]
            .as_array()
            .expect("shards")
            .iter()
            .map(|s| s.as_str().expect("name"))
            .collect();
        let (mut texts, mut bytes) = (Vec::new(), 0u64);
        'shards: for shard in &shards {
            let text = std::fs::read_to_string(input.path().join(shard)).expect("read");
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).expect("json");
                let text = v["text"].as_str().expect("text");
                if text.is_empty() {
                    continue;
                }
                texts.push(text.to_string());
                bytes += text.len() as u64;
                if bytes >= sample_bytes {
                    break 'shards;
                }
            }
        }
        let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let alone = tokenize::bpe::train(&config, texts.iter().cloned(), &failed).expect("train");
        assert!(
            alone.json.as_bytes() == tokenizer,
            "{sample_bytes} bytes asked: not trained on the sample's texts"
        );
        assert_eq!(
            report["sample_documents"],
            texts.len(),
            "{sample_bytes} bytes asked"
        );
        assert_eq!(report["sample_bytes"], bytes, "{sample_bytes} bytes asked");
        if sample_bytes > all {
            assert_eq!(shards.len(), 6);
            assert_eq!(bytes, all);
        } else {
            assert!(shards.len() < 6, "{shards:?}");
            assert!(bytes >= sample_bytes && bytes < all, "{bytes} of {all}");
        }
    }
}

#[test]
fn a_vocabulary_too_small_for_the_bytes_is_refused() {
    let out = tempfile::tempdir().expect("tempdir");
    let err = tokenize::train(
        &Storage::new(),
        &Location::Local(docs_dir()),
        &Location::Local(out.path().to_path_buf()),
        &TrainConfig {
            vocab_size: 100,
            ..TrainConfig::default()
        },
    )
    .expect_err("too small");
    assert!(err.to_string().contains("256 byte tokens"), "{err}");
}

#[test]
fn encode_reads_back_to_the_same_texts() {
    let out = tempfile::tempdir().expect("tempdir");
    let report = encode_to(out.path(), &EncodeConfig::default(), EncoderKind::Native, 0);
    let texts = fixture_texts();
    assert_eq!(report.stats.docs_out as usize, texts.len());
    assert_eq!(report.stats.drops.get(tokenize::EMPTY_TEXT), Some(&1));
    assert!(report.stats.balanced());
    let storage = Storage::new();
    let docs = read_back(&storage, &Location::Local(out.path().to_path_buf()));
    let tok = loaded(EncoderKind::Native);
    assert_eq!(docs.len(), texts.len());
    for (ids, text) in docs.iter().zip(&texts) {
        assert_eq!(
            ids.last(),
            Some(&tok.eod),
            "every document ends with the end-of-document id"
        );
        assert_eq!(
            ids.iter().filter(|&&i| i == tok.eod).count(),
            1,
            "special spellings stay text"
        );
        let decoded = tok.encoder.decode(&ids[..ids.len() - 1]).expect("decode");
        assert_eq!(&decoded, text, "decode(encode(text)) == text");
    }
    let manifest = read_manifest(&storage, &Location::Local(out.path().to_path_buf())).expect("m");
    assert_eq!(manifest.dtype, tokenize::Dtype::U16);
    assert_eq!(manifest.end_of_document_id, 0);
    assert_eq!(
        manifest.tokenizer_sha256,
        tokenize::sha256_hex(&std::fs::read(&tokenizer().1).expect("tok"))
    );
}

#[test]
fn the_three_encoders_write_the_same_ids() {
    let shards = |kind: EncoderKind| -> BTreeMap<String, Vec<u8>> {
        let out = tempfile::tempdir().expect("tempdir");
        encode_to(out.path(), &EncodeConfig::default(), kind, 0);
        snapshot(out.path())
            .into_iter()
            .filter(|(k, _)| k.ends_with(".bin") || k.ends_with(".idx"))
            .collect()
    };
    // The trained file is ours to encode (else `Native` would fall back to 1.0 and
    // this would compare 1.0 with itself).
    let json = std::fs::read_to_string(&tokenizer().1).expect("tokenizer");
    tokenize::native::Native::from_json(&json).expect("a trained file is taken by ours");
    let native = shards(EncoderKind::Native);
    assert!(!native.is_empty());
    assert_eq!(native, shards(EncoderKind::Fast), "native against 1.0");
    assert_eq!(
        native,
        shards(EncoderKind::Reference),
        "native against 0.22"
    );
}

/// Texts of many scripts and shapes: long runs that take the queue form of the merges
/// (a pre-token of over 128 bytes), whitespace runs, digits, code, special spellings.
fn hard_texts() -> Vec<String> {
    let mut texts = fixture_texts();
    let mut rng = fastrand::Rng::with_seed(11);
    let pieces = [
        "the",
        " the",
        "ing",
        "tion",
        "東京",
        "日本語の文章",
        "Ελληνικά",
        "русский",
        "עברית",
        "العربية",
        "हिन्दी",
        "ภาษาไทย",
        "한국어",
        "ſ",
        "'s",
        "'LL",
        " ",
        "  ",
        "\n",
        "\t",
        "\r\n",
        "123",
        "4567",
        "½",
        "😀",
        "👩‍👩‍👧",
        "e\u{301}",
        "{",
        "}}",
        "::",
        "<|endoftext|>",
        "fn main()",
        "ß",
        "İ",
        "\u{a0}",
        "\u{200b}",
        "\u{323b0}",
    ];
    for _ in 0..400 {
        let n = rng.usize(1..40);
        texts.push(
            (0..n)
                .map(|_| *rng.choice(&pieces).expect("piece"))
                .collect(),
        );
    }
    texts.push("日本語".repeat(200));
    texts.push("a".repeat(1000));
    texts.push(" ".repeat(700) + "x");
    texts.push("\n".repeat(300));
    texts.push("ab".repeat(150) + &"ab ".repeat(50));
    texts
}

#[test]
fn the_three_encoders_agree_on_hard_texts() {
    // A larger vocabulary than the shared one, so that long merges exist.
    let config = TrainConfig {
        vocab_size: 4000,
        ..TrainConfig::default()
    };
    let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
    let mut sample = fixture_texts();
    sample.extend(hard_texts().into_iter().step_by(2));
    let trained = tokenize::bpe::train(&config, sample.into_iter(), &failed).expect("train");
    tokenize::native::Native::from_json(&trained.json).expect("a trained file is ours");
    let load = |kind| tokenize::Encoder::load(&trained.json, kind, "test").expect("load");
    let (native, fast, reference) = (
        load(EncoderKind::Native),
        load(EncoderKind::Fast),
        load(EncoderKind::Reference),
    );
    assert_eq!(native.vocab_size(), reference.vocab_size());
    for token in [
        "<|endoftext|>",
        "<|padding|>",
        "Ġthe",
        "the",
        "nope-not-a-token",
    ] {
        assert_eq!(native.token_id(token), reference.token_id(token), "{token}");
    }
    // Decoding: every id (and some past the vocabulary) in runs of 7, whose bytes are
    // often cut UTF-8, so the replacement of invalid bytes is compared too.
    let every: Vec<u32> = (0..native.vocab_size() as u32 + 5).collect();
    for run in every.chunks(7) {
        assert_eq!(
            native.decode(run).expect("native"),
            reference.decode(run).expect("reference"),
            "{run:?}"
        );
    }
    let mut long = 0;
    for text in hard_texts() {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        native.encode_into(&text, &mut a).expect("native");
        fast.encode_into(&text, &mut b).expect("fast");
        reference.encode_into(&text, &mut c).expect("reference");
        assert_eq!(a, c, "native against 0.22: {text:?}");
        assert_eq!(b, c, "1.0 against 0.22: {text:?}");
        assert_eq!(native.decode(&a).expect("decode"), text);
        long += usize::from(text.split(' ').any(|w| w.len() > 128));
    }
    assert!(long >= 3, "the queue form was not reached");
}

#[test]
fn texts_the_two_splits_differ_on_get_the_reference_ids() {
    // A vocabulary that learnt these texts as 0.22 splits them: `x'ſ` (the long s
    // taken as the s of 's) and letters of Unicode 17 as one word with `ab`.
    let texts = ["x'ſ y'ſ x'ſ", "\u{323b0}\u{323b1}ab \u{323b0}\u{323b1}ab"];
    let config = TrainConfig {
        vocab_size: 300,
        ..TrainConfig::default()
    };
    let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
    let trained = tokenize::bpe::train(
        &config,
        texts.repeat(5).into_iter().map(String::from),
        &failed,
    )
    .expect("train");
    tokenize::native::Native::from_json(&trained.json).expect("a trained file is ours");
    let load = |kind| tokenize::Encoder::load(&trained.json, kind, "test").expect("load");
    let reference = load(EncoderKind::Reference);
    for kind in [EncoderKind::Native, EncoderKind::Fast] {
        let encoder = load(kind);
        for text in texts {
            assert!(tokenize::bpe::splits_differ(text), "{text}");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            encoder.encode_into(text, &mut a).expect("encode");
            reference.encode_into(text, &mut b).expect("reference");
            assert_eq!(a, b, "{kind:?}: {text}");
        }
    }
}

#[test]
fn a_foreign_layout_is_encoded_by_tokenizers() {
    // The shared tokenizer with a normaliser: ours refuses it, and the load falls back
    // to the 1.0 encoder, which lowercases as the file asks.
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&tokenizer().1).expect("read")).expect("json");
    json["normalizer"] = serde_json::json!({"type": "Lowercase"});
    let json = json.to_string();
    assert!(tokenize::native::Native::from_json(&json).is_err());
    let native = tokenize::Encoder::load(&json, EncoderKind::Native, "test").expect("load");
    let reference = tokenize::Encoder::load(&json, EncoderKind::Reference, "test").expect("0.22");
    let (mut a, mut b, mut lower) = (Vec::new(), Vec::new(), Vec::new());
    native.encode_into("Hello World", &mut a).expect("encode");
    reference
        .encode_into("Hello World", &mut b)
        .expect("reference");
    reference
        .encode_into("hello world", &mut lower)
        .expect("reference");
    assert_eq!(a, b);
    assert_eq!(a, lower);
}

#[test]
fn rerun_is_a_no_op_and_threads_do_not_change_output() {
    let one = tempfile::tempdir().expect("tempdir");
    let many = tempfile::tempdir().expect("tempdir");
    let config = EncodeConfig {
        batch_docs: 4,
        ..EncodeConfig::default()
    };
    encode_to(one.path(), &config, EncoderKind::Native, 1);
    encode_to(many.path(), &config, EncoderKind::Native, 3);
    let first = snapshot(one.path());
    assert_eq!(first, snapshot(many.path()));
    let again = encode_to(one.path(), &config, EncoderKind::Native, 2);
    assert!(again.processed.is_empty(), "{again:?}");
    assert_eq!(again.skipped.len(), 3);
    assert_eq!(first, snapshot(one.path()));
}

#[test]
fn shards_roll_over_and_keep_every_document_in_order() {
    let small = tempfile::tempdir().expect("tempdir");
    let whole = tempfile::tempdir().expect("tempdir");
    encode_to(
        small.path(),
        &EncodeConfig {
            shard_bytes: 4000,
            ..EncodeConfig::default()
        },
        EncoderKind::Native,
        0,
    );
    encode_to(
        whole.path(),
        &EncodeConfig::default(),
        EncoderKind::Native,
        0,
    );
    let storage = Storage::new();
    let m = read_manifest(&storage, &Location::Local(small.path().to_path_buf())).expect("m");
    assert!(m.shards.len() > 4, "{:?}", m.shards);
    for s in &m.shards {
        let bin = std::fs::metadata(small.path().join(format!("{}.bin", s.name))).expect("bin");
        // A shard is only over the limit when one document alone is.
        assert!(bin.len() <= 4000 || s.documents == 1, "{s:?}");
    }
    assert_eq!(
        read_back(&storage, &Location::Local(small.path().to_path_buf())),
        read_back(&storage, &Location::Local(whole.path().to_path_buf()))
    );
}

#[test]
fn token_counts_are_written_back_on_request() {
    let out = tempfile::tempdir().expect("tempdir");
    encode_to(
        out.path(),
        &EncodeConfig {
            token_counts: true,
            ..EncodeConfig::default()
        },
        EncoderKind::Native,
        0,
    );
    let storage = Storage::new();
    let ids = read_back(&storage, &Location::Local(out.path().to_path_buf()));
    let mut counts = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(out.path().join("documents"))
        .expect("documents/")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    for f in files {
        for d in pipeline::shard::read_all_documents(&storage, &Location::Local(f)).expect("read") {
            counts.push(d.token_count.expect("token_count"));
        }
    }
    assert_eq!(
        counts,
        ids.iter().map(|d| d.len() as i64).collect::<Vec<_>>()
    );
}

#[test]
fn killed_encode_resumes_to_identical_output() {
    let clean = tempfile::tempdir().expect("tempdir");
    let config_dir = tempfile::tempdir().expect("tempdir");
    let config = config_dir.path().join("tokenize.toml");
    std::fs::write(&config, "[encode]\nbatch_docs = 3\nshard_bytes = 3000\n").expect("config");
    let run = |out: &Path, crash: Option<u32>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-tokenize"));
        cmd.args(["encode", "--input"])
            .arg(docs_dir())
            .arg("--output")
            .arg(out)
            .arg("--tokenizer")
            .arg(&tokenizer().1)
            .arg("--config")
            .arg(&config)
            .args(["--threads", "1", "--log-format", "json"]);
        if let Some(n) = crash {
            cmd.env(pipeline::runner::CRASH_AFTER_BATCHES, n.to_string());
        }
        cmd.output().expect("run mill-tokenize")
    };
    let ok = run(clean.path(), None);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let expected = snapshot(clean.path());
    for crash in [1, 3, 6, 9] {
        let out = tempfile::tempdir().expect("tempdir");
        let killed = run(out.path(), Some(crash));
        assert!(
            !killed.status.success(),
            "crash point {crash} was not reached"
        );
        let resumed = run(out.path(), None);
        assert!(
            resumed.status.success(),
            "{}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        let mut got = snapshot(out.path());
        got.retain(|k, _| !k.ends_with(".tmp"));
        assert_eq!(
            expected.keys().collect::<Vec<_>>(),
            got.keys().collect::<Vec<_>>(),
            "crash at batch {crash}"
        );
        for (k, v) in &expected {
            assert!(got[k] == *v, "crash at batch {crash}: {k} differs");
        }
    }
}

/// Token shards of the fixtures, small enough that the merge tests see many.
fn small_shards() -> tempfile::TempDir {
    let encoded = tempfile::tempdir().expect("tempdir");
    let config = EncodeConfig {
        shard_bytes: 5000,
        ..EncodeConfig::default()
    };
    encode_to(encoded.path(), &config, EncoderKind::Native, 0);
    encoded
}

/// A merge into shards of about 3,000 tokens.
fn small_merge() -> MergeConfig {
    MergeConfig {
        seed: 7,
        shard_tokens: 3000,
    }
}

#[test]
fn merge_shuffles_every_document_exactly_once() {
    let encoded = small_shards();
    let storage = Storage::new();
    let input = Location::Local(encoded.path().to_path_buf());
    let before = read_back(&storage, &input);
    let config = small_merge();
    let merged = |tasks: usize| {
        let out = tempfile::tempdir().expect("tempdir");
        for task in 0..tasks {
            let mut opts =
                RunOptions::new(input.clone(), Location::Local(out.path().to_path_buf()));
            opts.tasks = tasks;
            opts.task = task;
            scatter(&storage, &opts, &config).expect("scatter");
        }
        for task in 0..tasks {
            let mut opts =
                RunOptions::new(input.clone(), Location::Local(out.path().to_path_buf()));
            opts.tasks = tasks;
            opts.task = task;
            gather(&storage, &opts, &config).expect("gather");
        }
        out
    };
    let one = merged(1);
    let after = read_back(&storage, &Location::Local(one.path().to_path_buf()));
    let m = read_manifest(&storage, &Location::Local(one.path().to_path_buf())).expect("m");
    assert!(m.shards.len() >= 3, "{:?}", m.shards);
    assert_ne!(after, before, "the order changed");
    let mut a = after.clone();
    let mut b = before.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the same documents, each once");
    let two = merged(2);
    let shards = |d: &Path| -> BTreeMap<String, Vec<u8>> {
        snapshot(d)
            .into_iter()
            .filter(|(k, _)| !k.starts_with('_'))
            .collect()
    };
    assert_eq!(
        shards(one.path()),
        shards(two.path()),
        "tasks do not change the shuffle"
    );
    // Rerun: nothing to redo, nothing changes.
    let before_rerun = shards(one.path());
    let opts = RunOptions::new(input.clone(), Location::Local(one.path().to_path_buf()));
    let s = scatter(&storage, &opts, &config).expect("scatter again");
    assert_eq!(s.docs_in, 0);
    let g = gather(&storage, &opts, &config).expect("gather again");
    assert!(g.processed.is_empty() && !g.skipped.is_empty(), "{g:?}");
    assert_eq!(before_rerun, shards(one.path()));
}

#[test]
fn inspect_prints_counts_and_text() {
    let out = tempfile::tempdir().expect("tempdir");
    encode_to(out.path(), &EncodeConfig::default(), EncoderKind::Native, 0);
    let storage = Storage::new();
    let m = read_manifest(&storage, &Location::Local(out.path().to_path_buf())).expect("m");
    let prefix = out.path().join(&m.shards[0].name);
    let output = Command::new(env!("CARGO_BIN_EXE_mill-tokenize"))
        .arg("inspect")
        .arg(&prefix)
        .output()
        .expect("run inspect");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(&format!("documents {}", m.shards[0].documents)),
        "{text}"
    );
    let first: String = fixture_texts()[0].chars().take(20).collect();
    let first = format!("{first:?}");
    assert!(text.contains(first.trim_end_matches('"')), "{text}");
}

#[test]
fn python_tokenizers_and_transformers_agree() {
    let out = tempfile::tempdir().expect("tempdir");
    encode_to(out.path(), &EncodeConfig::default(), EncoderKind::Native, 0);
    let output = Command::new("python3")
        .arg(root().join("scripts/tokenize_check.py"))
        .arg("--tokenizer")
        .arg(&tokenizer().1)
        .arg("--docs")
        .arg(docs_dir())
        .arg("--shards")
        .arg(out.path())
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(2) && std::env::var_os("CI").is_none() {
        eprintln!("Python tokenizers/transformers unavailable, test skipped: {stderr}");
        return;
    }
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("\"mismatches\": []"), "{stdout}");
}

#[test]
fn train_encode_read_back_on_s3() {
    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-tokenize") else {
        return;
    };
    let base = Location::parse(&format!("s3://{bucket}/")).expect("address");
    for entry in std::fs::read_dir(docs_dir()).expect("fixtures") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        storage
            .put(
                &base.join(&format!("docs/{name}")),
                &std::fs::read(&path).expect("read"),
            )
            .expect("upload");
    }
    let config_dir = tempfile::tempdir().expect("tempdir");
    let config = config_dir.path().join("tokenize.toml");
    std::fs::write(
        &config,
        "[train]\nvocab_size = 1200\n[encode]\nshard_bytes = 6000\n",
    )
    .expect("config");
    let run = |args: Vec<String>| {
        let out = Command::new(env!("CARGO_BIN_EXE_mill-tokenize"))
            .args(&args)
            .env("AWS_ENDPOINT_URL", &endpoint)
            .output()
            .expect("run mill-tokenize");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let cfg = config.to_string_lossy().to_string();
    run(vec![
        "train".into(),
        "--input".into(),
        format!("s3://{bucket}/docs/"),
        "--output".into(),
        format!("s3://{bucket}/tok/"),
        "--config".into(),
        cfg.clone(),
    ]);
    run(vec![
        "encode".into(),
        "--input".into(),
        format!("s3://{bucket}/docs/"),
        "--output".into(),
        format!("s3://{bucket}/tokens/"),
        "--tokenizer".into(),
        format!("s3://{bucket}/tok/tokenizer.json"),
        "--config".into(),
        cfg,
        "--log-format".into(),
        "json".into(),
    ]);
    // The tokenizer trained on S3 is the one trained on disk (same sample, same seed).
    assert_eq!(
        storage
            .read(&base.join("tok/tokenizer.json"))
            .expect("tokenizer"),
        std::fs::read(&tokenizer().1).expect("local tokenizer")
    );
    let remote = read_back(&storage, &base.join("tokens"));
    let local = tempfile::tempdir().expect("tempdir");
    encode_to(
        local.path(),
        &EncodeConfig {
            shard_bytes: 6000,
            ..EncodeConfig::default()
        },
        EncoderKind::Native,
        0,
    );
    assert_eq!(
        remote,
        read_back(
            &Storage::new(),
            &Location::Local(local.path().to_path_buf())
        )
    );
    let m = read_manifest(&storage, &base.join("tokens")).expect("manifest");
    assert!(m.shards.len() > 1);
}

/// `mill-tokenize <sub> <flags> --config <file> <extra>`, for the unit harness.
fn tokenize_command<'a>(
    sub: &'a [&'a str],
    config: &'a str,
) -> impl Fn(Vec<String>) -> Command + 'a {
    move |flags| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mill-tokenize"));
        c.args(sub).args(flags).args(["--config", config]);
        c
    }
}

#[test]
fn train_alone_resumes_and_its_folder_serves_as_the_tokenizer() {
    let out = tempfile::tempdir().expect("tempdir");
    let storage = Storage::new();
    let opts = RunOptions::new(
        Location::Local(docs_dir()),
        Location::Local(out.path().to_path_buf()),
    );
    let (first, trained) = tokenize::train_step(&storage, &opts, &small_train()).expect("train");
    assert_eq!(first.processed, vec![tokenize::TRAIN_UNIT.to_string()]);
    assert!(trained.is_some());
    let before = snapshot(out.path());
    let (again, trained) = tokenize::train_step(&storage, &opts, &small_train()).expect("rerun");
    assert!(
        again.processed.is_empty() && again.skipped.len() == 1,
        "{again:?}"
    );
    assert!(trained.is_none());
    assert_eq!(before, snapshot(out.path()));
    // A marker `mill status` reads, like every other step's.
    let markers = pipeline::marker::list_markers(&storage, &opts.output).expect("markers");
    assert_eq!(markers.len(), 1);
    assert_eq!(markers[0].0, tokenize::TRAIN_UNIT);
    // The folder loads the tokenizer.json inside it.
    let kind = EncoderKind::Native;
    let eod = tokenize::END_OF_DOCUMENT;
    let folder = Loaded::read(&storage, &out.path().display().to_string(), kind, eod)
        .expect("tokenizer from its folder");
    let file = out.path().join(tokenize::TOKENIZER_FILE);
    let direct =
        Loaded::read(&storage, &file.display().to_string(), kind, eod).expect("tokenizer.json");
    assert_eq!(folder.sha256, direct.sha256);
}

#[test]
fn train_and_gather_units_conform() {
    let config_dir = tempfile::tempdir().expect("tempdir");
    let file = config_dir.path().join("tokenize.toml");
    std::fs::write(
        &file,
        "[train]\nvocab_size = 1200\n[merge]\nseed = 7\nshard_tokens = 3000\n",
    )
    .expect("config");
    let file = file.to_string_lossy().to_string();
    let storage = Storage::new();
    let train_cmd = tokenize_command(&["train"], &file);
    pipeline::testing::check_units(&pipeline::testing::UnitConformance {
        run: &|o| Ok(tokenize::train_step(&storage, o, &small_train())?.0),
        input: docs_dir(),
        command: Some(&train_cmd),
        run_records: &["train.json"],
    });
    let encoded = small_shards();
    let merge = small_merge();
    let merge_cmd = tokenize_command(&["merge", "--phase", "all"], &file);
    pipeline::testing::check_units(&pipeline::testing::UnitConformance {
        // As `merge --phase all` does: gather has nothing to plan before a scatter.
        run: &|o| {
            scatter(&storage, o, &merge)?;
            if o.dry_run {
                return Ok(pipeline::Report::default());
            }
            gather(&storage, o, &merge)
        },
        input: encoded.path().to_path_buf(),
        command: Some(&merge_cmd),
        run_records: &[],
    });
}
