//! `mill ablate`: a planted contrast (the same pages, and the same pages plus copies
//! whose words are shuffled), measured on clean reference text by tiny models of two
//! seeds each; reruns from scratch and after a SIGKILL give the same losses; the
//! fixture ablation; mistakes refused before anything runs.

use std::path::Path;
use std::time::{Duration, Instant};

use jobs::ablate::mean_spread;
use serde_json::Value;

use super::{mill, ok, root};

/// Writes `docs` as one JSONL file in a new folder `dir/name`.
fn docs_folder(dir: &Path, name: &str, docs: &[String]) -> String {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).expect("folder");
    let mut text = String::new();
    for (i, d) in docs.iter().enumerate() {
        text.push_str(&serde_json::json!({"id": format!("{name}-{i:04}"), "text": d}).to_string());
        text.push('\n');
    }
    std::fs::write(folder.join("docs.jsonl"), text).expect("write docs");
    folder.to_string_lossy().into_owned()
}

/// The words of `text` in an order drawn from `seed`.
fn shuffled(text: &str, seed: u64) -> String {
    let mut words: Vec<&str> = text.split_whitespace().collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    rng.shuffle(&mut words);
    words.join(" ")
}

/// The ablation of the planted contrast in `dir`: returns its file.
pub(crate) fn planted(dir: &Path) -> std::path::PathBuf {
    let lines: Vec<String> =
        std::fs::read_to_string(root().join("fixtures/classify/positives.jsonl"))
            .expect("fixture texts")
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("json");
                v["text"].as_str().expect("text").to_string()
            })
            .collect();
    // The last texts are the clean reference, never trained on.
    let (train, reference) = lines.split_at(lines.len() - 30);
    let clean = docs_folder(dir, "clean", train);
    let mut noisy_docs = train.to_vec();
    noisy_docs.extend(train.iter().enumerate().map(|(i, t)| shuffled(t, i as u64)));
    let noisy = docs_folder(dir, "noisy", &noisy_docs);
    let tasks = dir.join("tasks.jsonl");
    // Which of a text's first 6 words comes next, its true continuation first.
    let items: Vec<String> = reference
        .iter()
        .map(|t| {
            let words: Vec<&str> = t.split_whitespace().collect();
            serde_json::json!({
                "context": words[..6].join(" "),
                "choices": [format!(" {}", words[6]), format!(" {}", words[1]), " zebra"],
                "gold": 0,
            })
            .to_string()
        })
        .collect();
    std::fs::write(&tasks, items.join("\n")).expect("tasks");
    let reference = docs_folder(dir, "reference", reference);
    let base = dir.join("base.toml");
    std::fs::write(
        &base,
        format!(
            r#"input = "{clean}"
output = "{out}"

[config.tokenize.train]
vocab_size = 600

[config.train]
preset = "tiny"
checkpoint_every = 40
keep = 1
eval_every = 40
eval_batches = 2
threads = 1
[config.train.data]
seq_len = 64
validation_share = 0.05
block_samples = 8
[config.train.train]
micro_batch = 8
[config.train.train.schedule]
lr = 0.003
min_lr = 0.0003
warmup_steps = 8

[[step]]
name = "text"
stages = ["import"]

[[step]]
name = "tokenizer"
phase = "tokenize.train"

[[step]]
name = "tokens"
phase = "tokenize.encode"
input = "text"
tokenizer = "tokenizer"

[[step]]
name = "model"
phase = "train"
input = "tokens"
"#,
            out = dir.join("run").display()
        ),
    )
    .expect("base");
    let ablation = dir.join("ablation.toml");
    std::fs::write(
        &ablation,
        format!(
            r#"pipeline = "{base}"
tokens = 61440
seeds = [1, 2]

[eval]
validation = {{ clean = "{reference}" }}
tasks = {{ next = "{tasks}" }}

[[variant]]
name = "clean"

[[variant]]
name = "noisy"
[[variant.step]]
name = "text"
stages = ["import"]
input = "{noisy}"
"#,
            base = base.display(),
            tasks = tasks.display()
        ),
    )
    .expect("ablation");
    ablation
}

/// `mill ablate --json` of a file.
pub(crate) fn results(file: &Path) -> Value {
    let out = ok(
        mill(&["ablate", &file.to_string_lossy(), "--json"])
            .output()
            .expect("ablate"),
        "ablate",
    );
    serde_json::from_str(&out).expect("results JSON")
}

/// A variant's reference loss per seed.
fn losses(results: &Value, variant: &str) -> Vec<f64> {
    let v = results
        .as_array()
        .expect("variants")
        .iter()
        .find(|v| v["name"] == variant)
        .expect("variant");
    v["seeds"]
        .as_array()
        .expect("seeds")
        .iter()
        .map(|s| s["eval_losses"]["clean"].as_f64().expect("reference loss"))
        .collect()
}

#[test]
fn planted_contrast_is_found_and_reruns_give_the_same_losses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = planted(dir.path());
    let first = results(&file);
    let (clean, noisy) = (losses(&first, "clean"), losses(&first, "noisy"));
    eprintln!("reference loss: clean {clean:?}, noisy {noisy:?}");
    assert_eq!((clean.len(), noisy.len()), (2, 2));
    let stats = |x: &[f64]| mean_spread(x.iter().map(|&v| Some(v))).expect("losses");
    let ((clean_mean, clean_spread), (noisy_mean, noisy_spread)) = (stats(&clean), stats(&noisy));
    assert!(
        noisy_mean - clean_mean > clean_spread.max(noisy_spread),
        "noisy {noisy:?} should be worse than clean {clean:?} by more than the seeds' spread"
    );
    // Every model was scored on the task; the clean models do better.
    let acc = |variant: &str| -> Vec<f64> {
        first
            .as_array()
            .expect("variants")
            .iter()
            .find(|v| v["name"] == variant)
            .expect("variant")["seeds"]
            .as_array()
            .expect("seeds")
            .iter()
            .map(|s| s["tasks"]["next"]["acc"].as_f64().expect("acc"))
            .collect()
    };
    eprintln!(
        "task acc: clean {:?}, noisy {:?}",
        acc("clean"),
        acc("noisy")
    );
    assert!(stats(&acc("clean")).0 >= stats(&acc("noisy")).0);
    // Every model trained to the budget: 61,440 tokens of 512 a step.
    for v in first.as_array().expect("variants") {
        for s in v["seeds"].as_array().expect("seeds") {
            assert_eq!(s["train_steps"], 120, "{s}");
            assert_eq!(s["train_tokens"], 61440, "{s}");
        }
    }

    // The tokenizer (trained on the base's data) and the reference set's tokens are
    // shared: one step each, one marker each.
    let printed = ok(
        mill(&["ablate", &file.to_string_lossy(), "--print"])
            .output()
            .expect("print"),
        "print",
    );
    let merged: toml::Value = toml::from_str(&printed).expect("merged pipeline");
    let steps = merged["step"].as_array().expect("steps");
    let named = |prefix: &str| {
        steps
            .iter()
            .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .count()
    };
    assert_eq!(named("tokenizer-"), 1, "{printed}");
    assert_eq!(named("eval-clean-"), 1, "{printed}");
    assert_eq!(named("text-"), 2, "{printed}");
    assert_eq!(named("model-"), 4, "{printed}");
    let run = dir.path().join("run");
    for prefix in ["tokenizer-", "eval-clean-"] {
        let step = steps
            .iter()
            .filter_map(|s| s["name"].as_str())
            .find(|n| n.starts_with(prefix))
            .expect("step");
        let markers = std::fs::read_dir(run.join(step).join("_done"))
            .expect("markers")
            .count();
        assert_eq!(markers, 1, "{step}");
    }

    // A rerun is a no-op with the same figures; from scratch, the same losses.
    assert_eq!(results(&file), first);
    std::fs::remove_dir_all(&run).expect("clean");
    assert_eq!(results(&file), first, "a run from scratch");

    // Killed while a model trains, then resumed: the same losses.
    std::fs::remove_dir_all(&run).expect("clean");
    let mut child = mill(&["ablate", &file.to_string_lossy(), "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    let watched = run
        .join(
            steps
                .iter()
                .filter_map(|s| s["name"].as_str())
                .find(|n| n.starts_with("model-noisy-seed1"))
                .expect("model step"),
        )
        .join("metrics");
    while !watched.exists() && started.elapsed() < Duration::from_secs(120) {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let unfinished = steps
        .iter()
        .filter_map(|s| s["name"].as_str())
        .filter(|n| n.starts_with("model-"))
        .any(|n| !run.join(n).join("_done").exists());
    assert!(unfinished, "the kill came after the last model was trained");
    assert_eq!(results(&file), first, "killed and resumed");
}

#[test]
fn fixture_ablation_runs_and_reports() {
    if !super::model_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(root().join("fixtures/ablation.toml"))
        .expect("fixture ablation")
        .replace("\"fixtures/", &format!("\"{}/fixtures/", root().display()))
        .replace(
            "output = \"out/ablation\"",
            &format!("output = \"{}\"", dir.path().join("run").display()),
        );
    // The base pipeline with absolute fixture paths too.
    let base = super::pipeline_at(dir.path(), &dir.path().join("unused").to_string_lossy());
    let text = text.replace(
        &format!("\"{}/fixtures/pipeline.toml\"", root().display()),
        &format!("\"{}\"", base.display()),
    );
    let file = dir.path().join("ablation.toml");
    std::fs::write(&file, &text).expect("write");
    let out = ok(
        mill(&["ablate", &file.to_string_lossy()])
            .output()
            .expect("ablate"),
        "fixture ablation",
    );
    let table = out
        .lines()
        .skip_while(|l| !l.starts_with("variant "))
        .collect::<Vec<_>>();
    assert!(table[0].contains("reference loss (spread)"), "{out}");
    assert!(table.iter().any(|l| l.starts_with("base ")), "{out}");
    assert!(table.iter().any(|l| l.starts_with("no-quality ")), "{out}");
    // mill status reads the run like any other.
    let run = dir.path().join("run").to_string_lossy().into_owned();
    ok(mill(&["status", &run]).output().expect("status"), "status");
    // The report: the comparison, the funnels, every model's curves.
    let html = super::report_html(dir.path(), &run);
    for want in [
        "Ablation: 2 variants",
        "loss on reference",
        "completion acc_norm",
        "Training loss of every model",
        "Loss on reference of every model",
        "no-quality seed 2",
    ] {
        assert!(html.contains(want), "{want:?} missing from the report");
    }
    let json: Value = serde_json::from_str(&ok(
        mill(&["report", &run, "--json"]).output().expect("report"),
        "report --json",
    ))
    .expect("json");
    assert_eq!(json.as_array().map(Vec::len), Some(2));
    assert!(
        json[1]["seeds"][1]["tasks"]["completion"]["acc"].is_number(),
        "{json}"
    );
}

#[test]
fn mistakes_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = planted(dir.path());
    let good = std::fs::read_to_string(&file).expect("read");
    for (bad, says) in [
        (
            good.replace("name = \"noisy\"", "name = \"noisy\"\nremove = [\"nope\"]"),
            "the base has no step nope",
        ),
        (
            good.replace(
                "name = \"noisy\"",
                "name = \"noisy\"\n[variant.config.quality]\nmin_words = 3",
            ),
            "no step of the variant runs quality",
        ),
        (
            good.replace(
                "name = \"noisy\"",
                "name = \"noisy\"\n[variant.config.tokenize.train]\nvocab_sise = 3",
            ),
            "vocab_sise",
        ),
        (
            good.replace("name = \"noisy\"", "name = \"clean\""),
            "two variants are named clean",
        ),
        (good.replace("tokens = 61440", "tokens = 0"), "tokens is 0"),
    ] {
        std::fs::write(&file, &bad).expect("write");
        let out = mill(&["ablate", &file.to_string_lossy()])
            .output()
            .expect("ablate");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad}");
        assert!(err.contains(says), "{err} should say {says}");
        assert!(!dir.path().join("run").exists(), "nothing ran: {bad}");
    }
    // A task file with a bad line: named, before anything runs.
    std::fs::write(&file, &good).expect("write");
    let tasks = dir.path().join("tasks.jsonl");
    let mut lines = std::fs::read_to_string(&tasks).expect("tasks");
    lines.push_str("\n{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 5}\n");
    std::fs::write(&tasks, lines).expect("write");
    let out = mill(&["ablate", &file.to_string_lossy()])
        .output()
        .expect("ablate");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("tasks.jsonl") && err.contains("line 31: gold 5 of 2"),
        "{err}"
    );
    assert!(!dir.path().join("run").exists());
}

#[test]
fn an_ablation_goes_to_every_engine_its_models_on_gpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The fixture pipeline with every engine's settings, its train step on 1 × 2 GPUs.
    let base = super::submit::engines_pipeline(dir.path(), 3, 1, 2);
    let file = dir.path().join("ablation.toml");
    std::fs::write(
        &file,
        format!(
            "pipeline = \"{base}\"\ntokens = 30720\nseeds = [1, 2]\n\
             [[variant]]\nname = \"base\"\n\
             [[variant]]\nname = \"no-quality\"\n[[variant.step]]\nname = \"text\"\n\
             stages = [\"extract\", \"langid\", \"toxicity\", \"pii\"]\n"
        ),
    )
    .expect("ablation");
    let out = dir.path().join("jobs");
    super::submit::dry_runs(&file.to_string_lossy(), &out);
    let checked = super::submit::check_schemas(&out);
    assert!(
        checked.status.success(),
        "schemas: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    // A GPU job per variant and seed on every engine.
    let files: Vec<String> = std::fs::read_dir(&out)
        .expect("jobs")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let models = |ext: &str| -> Vec<&String> {
        files
            .iter()
            .filter(|f| f.contains("-model-") && f.ends_with(ext))
            .collect()
    };
    assert_eq!(models(".sbatch").len(), 4, "{files:?}");
    for f in models(".sbatch") {
        let sbatch = std::fs::read_to_string(out.join(f)).expect("sbatch");
        assert!(sbatch.contains("#SBATCH --gpus-per-node=2\n"), "{sbatch}");
    }
    assert_eq!(models(".jobdef.json").len(), 4, "{files:?}");
}
