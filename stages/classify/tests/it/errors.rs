//! Bad models are clear errors that name the file, before any document is read; bad
//! text is scored or counted, never a crash.

use std::path::Path;
use std::process::Command;

use classify::{ClassifierConfig, Classify, Config, Kind};
use pipeline::Storage;

use crate::common::models;

/// A copy of a model folder to break.
fn copy(name: &str, to: &Path) -> std::path::PathBuf {
    let from = models().join(name);
    let dir = to.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for e in std::fs::read_dir(&from).expect("model folder").flatten() {
        std::fs::copy(e.path(), dir.join(e.file_name())).expect("copy");
    }
    dir
}

fn load(c: ClassifierConfig) -> String {
    Classify::new(
        &Storage::new(),
        &Config {
            classifiers: vec![c],
            ..Config::default()
        },
    )
    .expect_err("must fail")
    .to_string()
}

fn transformer(dir: &Path) -> ClassifierConfig {
    ClassifierConfig::new("q", Kind::Transformer, &dir.to_string_lossy())
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("config")).expect("json");
    edit(&mut v);
    std::fs::write(&path, serde_json::to_vec(&v).expect("json")).expect("write");
}

#[test]
fn a_model_folder_missing_a_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        let dir = copy("bert-labels", tmp.path());
        std::fs::remove_file(dir.join(file)).expect("remove");
        let err = load(transformer(&dir));
        assert!(err.contains(file) && err.contains("no "), "{file}: {err}");
        std::fs::remove_dir_all(&dir).expect("clean");
    }
}

#[test]
fn an_unknown_architecture() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = copy("bert-labels", tmp.path());
    edit_config(&dir, |v| {
        v["architectures"] = serde_json::json!(["DebertaV2ForSequenceClassification"]);
        v["model_type"] = serde_json::json!("deberta-v2");
    });
    let err = load(transformer(&dir));
    assert!(
        err.contains("unknown architecture") && err.contains("config.json"),
        "{err}"
    );
}

#[test]
fn a_label_the_model_does_not_have() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = copy("bert-labels", tmp.path());
    let err = load(ClassifierConfig {
        label: Some("educational".into()),
        ..transformer(&dir)
    });
    assert!(
        err.contains("no label \"educational\"") && err.contains("LABEL_0"),
        "{err}"
    );
    let err = load(ClassifierConfig {
        label: Some("nope".into()),
        ..crate::fasttext::config("q")
    });
    assert!(
        err.contains("no label \"nope\"") && err.contains("model.bin"),
        "{err}"
    );
    // A regression head has no labels to choose.
    let err = load(ClassifierConfig {
        label: Some("LABEL_0".into()),
        ..transformer(&models().join("bert-regression"))
    });
    assert!(err.contains("regression head"), "{err}");
}

#[test]
fn a_head_whose_size_does_not_match() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = copy("xlmr-labels", tmp.path());
    edit_config(&dir, |v| {
        v["id2label"] = serde_json::json!({"0": "a", "1": "b", "2": "c"});
        v["label2id"] = serde_json::json!({"a": 0, "b": 1, "c": 2});
    });
    let err = load(transformer(&dir));
    assert!(
        err.contains("model.safetensors") && err.contains("2 outputs") && err.contains("3 labels"),
        "{err}"
    );
}

#[test]
fn the_binary_fails_before_reading_a_document() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = copy("bert-labels", tmp.path());
    std::fs::remove_file(dir.join("tokenizer.json")).expect("remove");
    let config = tmp.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[[classifier]]\nname = \"q\"\nkind = \"transformer\"\nmodel = {:?}\n",
            dir.to_string_lossy()
        ),
    )
    .expect("config");
    let out_dir = tmp.path().join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_mill-classify"))
        .arg("--input")
        .arg(crate::common::root().join("fixtures/classify/positives.jsonl"))
        .arg("--output")
        .arg(&out_dir)
        .arg("--config")
        .arg(&config)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tokenizer.json"), "{err}");
    assert!(!out_dir.exists(), "nothing may be written");
}

#[test]
fn empty_and_odd_text_is_scored() {
    let c = Classify::new(
        &Storage::new(),
        &Config {
            classifiers: vec![
                crate::fasttext::config("f"),
                transformer(&models().join("xlmr-regression")),
            ],
            ..Config::default()
        },
    )
    .expect("load");
    for text in [
        "",
        " ",
        "\u{0}",
        "\u{feff}",
        "\u{2028}",
        "🦀",
        &"x".repeat(100_000),
    ] {
        let mut doc = pipeline::Document::new("d", text);
        let v = pipeline::Stage::process(&c, &mut doc);
        assert_eq!(v, pipeline::Verdict::Keep, "{text:?}");
        for col in ["f_score", "q_score"] {
            match doc.annotation(col) {
                Some(pipeline::Value::F32(x)) => assert!(x.is_finite(), "{text:?}: {col} {x}"),
                other => panic!("{text:?}: {col} is {other:?}"),
            }
        }
    }
}

/// Models on S3 (the loopback server): a fastText file and a transformer folder load
/// and score as they do from disk; a folder missing a file names its S3 address.
#[test]
fn models_load_from_s3() {
    let Some((storage, _, bucket)) = pipeline::testing::s3_bucket("classify-models") else {
        return;
    };
    let put = |rel: &str, path: &Path| {
        let loc = pipeline::Location::parse(&format!("s3://{bucket}/{rel}")).expect("address");
        storage
            .put(&loc, &std::fs::read(path).expect("read"))
            .expect("upload");
    };
    put("ft/model.bin", crate::fasttext::model());
    let folder = models().join("xlmr-labels");
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        put(&format!("xlmr/{f}"), &folder.join(f));
    }
    let config = |ft: &str, tr: &str| Config {
        classifiers: vec![
            crate::fasttext::config_at("f", ft),
            ClassifierConfig::new("t", Kind::Transformer, tr),
        ],
        ..Config::default()
    };
    let remote = Classify::new(
        &storage,
        &config(
            &format!("s3://{bucket}/ft/model.bin"),
            &format!("s3://{bucket}/xlmr"),
        ),
    )
    .expect("models from S3");
    let local = Classify::new(
        &Storage::new(),
        &config(
            &crate::fasttext::model().to_string_lossy(),
            &folder.to_string_lossy(),
        ),
    )
    .expect("models from disk");
    for text in ["The key idea is simple.", "Add to cart\nSign in"] {
        let mut a = pipeline::Document::new("d", text);
        let mut b = pipeline::Document::new("d", text);
        pipeline::Stage::process(&remote, &mut a);
        pipeline::Stage::process(&local, &mut b);
        assert_eq!(a.annotations, b.annotations, "{text}");
    }
    let err = Classify::new(
        &storage,
        &config(
            &format!("s3://{bucket}/ft/model.bin"),
            &format!("s3://{bucket}/ft"),
        ),
    )
    .expect_err("no config.json there")
    .to_string();
    assert!(
        err.contains(&format!("s3://{bucket}/ft/config.json")),
        "{err}"
    );
}
