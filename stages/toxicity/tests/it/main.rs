//! mill-toxicity: training on labelled fixtures, the three classifier modes, word and
//! URL lists, golden drop reasons, conformance, and clear errors for bad inputs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pipeline::testing::{Conformance, check, golden, shared_dir};
use pipeline::{Document, Location, RunOptions, Stage, Storage, Value, Verdict};
use toxicity::{Classifier, ClassifierConfig, Config, Mode, TrainConfig, Unit};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> PathBuf {
    root().join("fixtures/toxicity").join(rel)
}

/// A classifier trained once on the labelled fixtures (once per build of this test
/// binary, whose tests share it), and what training reported.
fn trained() -> &'static (PathBuf, toxicity::TrainReport) {
    static T: OnceLock<(PathBuf, toxicity::TrainReport)> = OnceLock::new();
    T.get_or_init(|| {
        let dir = shared_dir(env!("CARGO_TARGET_TMPDIR"), "toxicity-trained", |dir| {
            toxicity::train::train(
                &Storage::new(),
                &Location::Local(fixture("labelled")),
                &Location::Local(dir.to_path_buf()),
                &TrainConfig::default(),
            )
            .expect("train");
        });
        let json = std::fs::read(dir.join(toxicity::train::REPORT_FILE)).expect("train.json");
        let report = serde_json::from_slice(&json).expect("train.json parses");
        (dir, report)
    })
}

fn model_path() -> String {
    trained().0.join("model.bin").to_string_lossy().to_string()
}

fn classifier(mode: Mode) -> ClassifierConfig {
    ClassifierConfig {
        model: model_path(),
        model_sha256: None,
        labels: vec!["toxic".into()],
        threshold: 0.4,
        mode,
        unit: Unit::Sentence,
        max_toxic_fraction: 0.1,
        normalize: None,
    }
}

fn full_config(mode: Mode) -> Config {
    let s = |p: PathBuf| p.to_string_lossy().to_string();
    toml::from_str::<Config>(&format!(
        "[urls]\nlists = [{:?}]\n[words]\nlists = {{ en = {:?}, de = {:?}, zh = {:?}, default = {:?} }}\n",
        s(fixture("blacklists/adult")),
        s(fixture("words/en.txt")),
        s(fixture("words/de.txt")),
        s(fixture("words/zh.txt")),
        s(fixture("words/en.txt")),
    ))
    .map(|mut c| {
        c.classifier = Some(classifier(mode));
        c
    })
    .expect("config")
}

fn doc(text: &str) -> Document {
    Document::new("d", text)
}

#[test]
fn training_separates_held_out_documents() {
    let (_, r) = trained();
    assert!(r.validation_documents >= 20, "{r:?}");
    assert!(r.at_threshold.f1 >= 0.9, "{r:?}");
    assert_eq!(r.sweep.len(), 9);
    // The model loads back into the filter and scores new texts the right way round.
    let c = Classifier::new(&Storage::new(), &classifier(Mode::Document)).expect("load");
    assert!(c.score("Shut up you worthless loser, nobody wants you here.") > 0.5);
    assert!(c.score("Thanks for the detailed answer, have a great day.") < 0.5);
}

#[test]
fn training_is_reproducible() {
    let again = tempfile::tempdir().expect("tempdir");
    let r = toxicity::train::train(
        &Storage::new(),
        &Location::Local(fixture("labelled")),
        &Location::Local(again.path().to_path_buf()),
        &TrainConfig::default(),
    )
    .expect("train");
    assert_eq!(r.model_sha256, trained().1.model_sha256);
}

#[test]
fn document_fraction_and_remove_modes() {
    let storage = Storage::new();
    let mixed = "The recipe needs two cups of flour. The oven should be hot. You absolute waste of \
                 space, you are garbage. Let the dough rest for an hour. Serve it warm with butter \
                 and jam. My cat sleeps on the keyboard while I bake.";
    let whole = Classifier::new(&storage, &classifier(Mode::Document)).expect("load");
    let mut d = doc(mixed);
    let _ = whole.process(&mut d);
    assert!(matches!(
        d.annotation(toxicity::SCORE_COLUMN),
        Some(Value::F64(_))
    ));

    let fraction = Classifier::new(&storage, &classifier(Mode::Fraction)).expect("load");
    let mut d = doc(mixed);
    assert_eq!(fraction.process(&mut d), Verdict::Drop("toxic_fraction"));
    let mut clean = doc("The bus was late. The library opens on Monday.");
    assert_eq!(fraction.process(&mut clean), Verdict::Keep);
    assert!(matches!(clean.annotation(toxicity::SCORE_COLUMN), Some(Value::F64(s)) if *s < 0.4));

    let remove = Classifier::new(&storage, &classifier(Mode::Remove)).expect("load");
    let mut d = doc(mixed);
    assert_eq!(remove.process(&mut d), Verdict::Keep);
    assert!(!d.text.contains("garbage"), "{}", d.text);
    assert!(
        d.text
            .starts_with("The recipe needs two cups of flour. The oven should be hot. "),
        "{}",
        d.text
    );
    assert!(d.text.ends_with("while I bake."));
    let removed = match d.annotation(toxicity::REMOVED_COLUMN) {
        Some(Value::I64(n)) => *n,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        removed as usize,
        mixed.chars().count() - d.text.chars().count()
    );
    let mut all = doc("You are garbage. Shut up you worthless loser.");
    assert_eq!(remove.process(&mut all), Verdict::Drop("toxic_all_removed"));
}

fn run_step(config: &Config, input: PathBuf) -> (tempfile::TempDir, pipeline::Report) {
    let out = tempfile::tempdir().expect("tempdir");
    let storage = Storage::new();
    let step = toxicity::step(&storage, config).expect("step");
    let report = pipeline::run(
        &step,
        &storage,
        &RunOptions::new(
            Location::Local(input),
            Location::Local(out.path().to_path_buf()),
        ),
    )
    .expect("run");
    (out, report)
}

#[test]
fn golden_verdicts_on_fixture_documents() {
    let (out, report) = run_step(&full_config(Mode::Document), fixture("docs.jsonl"));
    let kept = pipeline::shard::read_all_documents(
        &Storage::new(),
        &Location::Local(out.path().join("docs.parquet")),
    )
    .expect("read");
    let mut got = format!(
        "docs in {}, out {}\n",
        report.stats.docs_in, report.stats.docs_out
    );
    for (reason, n) in &report.stats.drops {
        got.push_str(&format!("drop {reason}: {n}\n"));
    }
    for d in &kept {
        got.push_str(&format!("kept {}\n", d.id));
    }
    golden(&root().join("fixtures/expected/toxicity.txt"), &got);
    assert!(report.stats.balanced());
    for reason in ["adult_url", "bad_words", "toxic"] {
        assert!(report.stats.drops.contains_key(reason), "{reason}: {got}");
    }
}

#[test]
fn word_ratio_rule() {
    let mut config = full_config(Mode::Document);
    config.classifier = None;
    let words = config.words.as_mut().expect("words");
    words.rule = toxicity::WordRule::Ratio;
    words.max_ratio = 0.1;
    let (_, report) = run_step(&config, fixture("docs.jsonl"));
    // "Heck NO, the river path…": 2 matched of 9 words, over 10%; the Chinese page: one
    // match among 3 unspaced runs. One "darn" in a longer text, or "crap" as 1 of 10
    // words, is not over.
    assert_eq!(
        report.stats.drops.get("bad_word_ratio"),
        Some(&2),
        "{report:?}"
    );
}

#[test]
fn conformance() {
    let config_dir = tempfile::tempdir().expect("tempdir");
    let config_path = config_dir.path().join("toxicity.toml");
    let config = full_config(Mode::Remove);
    std::fs::write(&config_path, toml::to_string(&config).expect("toml")).expect("write config");
    let binary = |args: Vec<String>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mill-toxicity"));
        cmd.args(args).arg("--config").arg(&config_path);
        cmd
    };
    let read = |rel: &str| std::fs::read(root().join(rel)).expect("fixture");
    check(&Conformance {
        step: &|| toxicity::step(&Storage::new(), &full_config(Mode::Remove)).expect("step"),
        inputs: vec![
            ("tox.jsonl".into(), read("fixtures/toxicity/docs.jsonl")),
            (
                "web.jsonl".into(),
                read("fixtures/docs/web-multilingual.jsonl"),
            ),
            (
                "labelled.jsonl".into(),
                read("fixtures/toxicity/labelled/train.jsonl"),
            ),
        ],
        broken: vec![(
            "broken.jsonl".into(),
            read("fixtures/docs/broken.jsonl"),
            "malformed_json",
        )],
        command: Some(&binary),
    });
}

#[test]
fn train_then_filter_with_the_binaries() {
    let work = tempfile::tempdir().expect("tempdir");
    let model_dir = work.path().join("model");
    let out = Command::new(env!("CARGO_BIN_EXE_mill-toxicity"))
        .arg("train")
        .arg("--input")
        .arg(fixture("labelled"))
        .arg("--output")
        .arg(&model_dir)
        .output()
        .expect("run train");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("precision") && stdout.contains("threshold"),
        "{stdout}"
    );
    let config = work.path().join("filter.toml");
    std::fs::write(
        &config,
        format!("[classifier]\nmodel = {:?}\n", model_dir.join("model.bin")),
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_mill-toxicity"))
        .arg("--input")
        .arg(fixture("docs.jsonl"))
        .arg("--output")
        .arg(work.path().join("filtered"))
        .arg("--config")
        .arg(&config)
        .output()
        .expect("run filter");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("drop toxic:"), "{stdout}");
}

#[test]
fn bad_models_and_labels_give_clear_errors() {
    let storage = Storage::new();
    let mut missing = classifier(Mode::Document);
    missing.model = "/no/such/model.bin".into();
    let err = Classifier::new(&storage, &missing)
        .expect_err("missing model")
        .to_string();
    assert!(
        err.contains("/no/such/model.bin") && err.contains("not found"),
        "{err}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"not a model at all").expect("write");
    let mut bad = classifier(Mode::Document);
    bad.model = junk.to_string_lossy().to_string();
    let err = Classifier::new(&storage, &bad)
        .expect_err("junk model")
        .to_string();
    assert!(err.contains("not a fastText model"), "{err}");

    let mut unknown = classifier(Mode::Document);
    unknown.labels = vec!["nsfw".into()];
    let err = Classifier::new(&storage, &unknown)
        .expect_err("unknown label")
        .to_string();
    assert!(err.contains("__label__nsfw"), "{err}");

    let labelled = dir.path().join("labelled");
    std::fs::create_dir(&labelled).expect("mkdir");
    std::fs::write(
        labelled.join("a.jsonl"),
        "{\"id\":\"x1\",\"text\":\"fine\",\"label\":\"clean\"}\n{\"id\":\"x2\",\"text\":\"no label here\"}\n",
    )
    .expect("write");
    let err = toxicity::train::train(
        &storage,
        &Location::Local(labelled.clone()),
        &Location::Local(dir.path().join("out")),
        &TrainConfig::default(),
    )
    .expect_err("missing label")
    .to_string();
    assert!(
        err.contains("a.jsonl") && err.contains("x2") && err.contains("label"),
        "{err}"
    );

    std::fs::write(
        labelled.join("a.jsonl"),
        "{\"id\":\"x1\",\"text\":\"fine\",\"label\":\"clean\"}\n{oops\n",
    )
    .expect("write");
    let err = toxicity::train::train(
        &storage,
        &Location::Local(labelled),
        &Location::Local(dir.path().join("out")),
        &TrainConfig::default(),
    )
    .expect_err("malformed")
    .to_string();
    assert!(
        err.contains("a.jsonl") && err.contains("malformed"),
        "{err}"
    );
}

#[test]
fn train_unit_conforms() {
    let storage = Storage::new();
    let config_dir = tempfile::tempdir().expect("tempdir");
    let file = config_dir.path().join("toxicity.toml");
    std::fs::write(&file, "[train]\n").expect("config");
    let file = file.to_string_lossy().to_string();
    let command = |flags: Vec<String>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mill-toxicity"));
        c.arg("train").args(flags).args(["--config", &file]);
        c
    };
    pipeline::testing::check_units(&pipeline::testing::UnitConformance {
        run: &|o| Ok(toxicity::train::train_step(&storage, o, &TrainConfig::default())?.0),
        input: fixture("labelled"),
        command: Some(&command),
        // The report names the output folder.
        run_records: &[toxicity::train::REPORT_FILE],
    });
}

/// `classifier = "default"`: the shipped model (models/toxicity-en-v1.ftz, compiled in)
/// with its settings, from any folder; it tells a known insult from known clean text.
#[test]
fn the_shipped_model_loads_and_scores() {
    let config: Config = toml::from_str("classifier = \"default\"").expect("config");
    let c = config.classifier.clone().expect("a classifier");
    assert_eq!(c, toxicity::shipped::config());
    assert_eq!(
        c.model_sha256.as_deref(),
        Some(toxicity::shipped::sha256().as_str())
    );
    assert!(
        toxicity::shipped::BYTES.len() <= 2_000_000,
        "the shipped model must stay within 2 MB"
    );
    let model = Classifier::new(&Storage::new(), &c).expect("the shipped model loads");
    for insult in [
        "You are a complete idiot and everyone here knows it. Shut up, you pathetic loser.",
        "What a stupid, worthless comment from a brainless moron.",
    ] {
        let s = model.score(insult);
        assert!(s >= c.threshold, "{insult:?} scored {s}");
    }
    for clean in [
        "The library opens at nine on weekdays; the reading room closes an hour earlier.",
        "Preheat the oven to 200 degrees, then bake the bread for thirty minutes until golden.",
        "To install the package, run the setup script and restart the service.",
    ] {
        let s = model.score(clean);
        assert!(s < c.threshold, "{clean:?} scored {s}");
    }
    // The whole step from the config, as `mill-toxicity` runs it: the insult is dropped
    // as `toxic`, the recipe kept.
    let mut insult = doc("You people are disgusting idiots. Get lost and never post here again.");
    let mut recipe =
        doc("Mix the flour with the water and a pinch of salt, then knead for ten minutes.");
    assert_eq!(model.process(&mut insult), Verdict::Drop("toxic"));
    assert_eq!(model.process(&mut recipe), Verdict::Keep);
    // The table form names it too, with other settings; `words` is its form unless set.
    let table: Config =
        toml::from_str("[classifier]\nmodel = \"default\"\nthreshold = 0.9\nmode = \"fraction\"")
            .expect("table");
    let t = table.classifier.expect("classifier");
    assert_eq!(
        (t.threshold, t.mode, t.normalize),
        (0.9, Mode::Fraction, None)
    );
    Classifier::new(&Storage::new(), &t).expect("loads");
}

#[test]
fn the_shipped_model_has_clear_errors() {
    let err = toml::from_str::<Config>("classifier = \"jigsaw\"")
        .expect_err("unknown name")
        .to_string();
    assert!(err.contains("unknown classifier \"jigsaw\""), "{err}");
    // A table keeps its own errors.
    let err = toml::from_str::<Config>("[classifier]\nmodel = \"default\"\nthreshhold = 0.5")
        .expect_err("typo")
        .to_string();
    assert!(err.contains("threshhold"), "{err}");
    let mut c = toxicity::shipped::config();
    c.model_sha256 = Some("0".repeat(64));
    let err = Classifier::new(&Storage::new(), &c)
        .expect_err("another model")
        .to_string();
    assert!(
        err.contains(&format!("expected {}", "0".repeat(64))) && err.contains("shipped"),
        "{err}"
    );
}

/// Quantised training writes `model.ftz`, smaller than the `.bin`, and it still
/// classifies (the shipped model's recipe quantises the same way).
#[test]
fn quantised_training_writes_a_small_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TrainConfig {
        normalize: toxicity::Normalize::Words,
        minn: 2,
        maxn: 5,
        quantize: Some(toxicity::QuantizeConfig {
            cutoff: 1000,
            qnorm: true,
            retrain: true,
            ..Default::default()
        }),
        ..TrainConfig::default()
    };
    let report = toxicity::train::train(
        &Storage::new(),
        &Location::Local(fixture("labelled")),
        &Location::Local(dir.path().to_path_buf()),
        &config,
    )
    .expect("train");
    let ftz = dir.path().join("model.ftz");
    assert!(report.model.ends_with("model.ftz"), "{}", report.model);
    let small = std::fs::metadata(&ftz).expect("model.ftz").len();
    let big = std::fs::metadata(model_path()).expect("model.bin").len();
    assert!(small * 5 < big, "{small} bytes quantised, {big} not");
    assert!(report.at_threshold.f1 > 0.8, "{report:?}");
    let c = ClassifierConfig {
        model: ftz.to_string_lossy().to_string(),
        normalize: Some(toxicity::Normalize::Words),
        ..classifier(Mode::Document)
    };
    Classifier::new(&Storage::new(), &c).expect("loads");
}

/// tokenmill's own fastText predictor against fastText's C++ (the `fasttext` crate) on
/// both classifiers the tests use: the shipped model (quantized, norms apart, softmax)
/// and one trained on the fixtures (unquantized). Every label's probability is equal to
/// the last bit on every fixture text, in both normalized forms. The projected
/// predictor the stage scores with (`Predictor::project`: each row's products with the
/// output rows, a known word's rows summed at load) is within 1e-6 of them.
#[test]
fn the_predictor_equals_fasttexts_own_code() {
    let shipped = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(shipped.path(), toxicity::shipped::BYTES).expect("write");
    let mut texts: Vec<String> = Vec::new();
    for path in [fixture("docs.jsonl")].into_iter().chain(
        std::fs::read_dir(fixture("labelled"))
            .expect("labelled fixtures")
            .map(|e| e.expect("entry").path()),
    ) {
        let body = std::fs::read_to_string(&path).expect("fixture");
        for line in body.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON line");
            texts.push(v["text"].as_str().expect("text").to_string());
        }
    }
    assert!(texts.len() >= 40, "{} texts", texts.len());
    let mut compared = 0;
    for model in [shipped.path().display().to_string(), model_path()] {
        let mut reference = fasttext::FastText::new();
        reference
            .load_model(&model)
            .expect("fastText loads the model");
        let bytes = std::fs::read(&model).expect("model bytes");
        let ours = pipeline::fasttext_model::Predictor::from_bytes(&bytes).expect("predictor");
        let mut projected =
            pipeline::fasttext_model::Predictor::from_bytes(&bytes).expect("predictor");
        assert!(
            projected.project(),
            "{model}: a two-label softmax is projected"
        );
        for text in &texts {
            for form in [toxicity::Normalize::Words, toxicity::Normalize::Raw] {
                let line = form.line(text);
                for k in [1, -1] {
                    let mut theirs: Vec<(String, u32)> = reference
                        .predict(&line, k, 0.0)
                        .expect("fastText predicts")
                        .into_iter()
                        .map(|p| (p.label, p.prob.to_bits()))
                        .collect();
                    let mut mine: Vec<(String, u32)> = ours
                        .predict_line(&line, k, 0.0)
                        .into_iter()
                        .map(|(i, p)| (ours.labels()[i].clone(), p.to_bits()))
                        .collect();
                    theirs.sort();
                    mine.sort();
                    assert_eq!(mine, theirs, "{model}: {line:?}, k {k}");
                    if k < 0 {
                        let near = projected.predict_line(&line, k, 0.0);
                        assert_eq!(near.len(), theirs.len(), "{model}: {line:?}");
                        for (i, p) in near {
                            let label = &projected.labels()[i];
                            let (_, bits) = theirs
                                .iter()
                                .find(|(l, _)| l == label)
                                .unwrap_or_else(|| panic!("{model}: {line:?}: no {label}"));
                            let d = (p - f32::from_bits(*bits)).abs();
                            assert!(d <= 1e-6, "{model}: {line:?}: {label} {p}, {d:e} away");
                        }
                    }
                    compared += 1;
                }
            }
        }
    }
    assert!(compared >= 160, "{compared} predictions compared");
}
