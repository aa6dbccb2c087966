//! A pipeline that keeps the top share of a corpus by a learned score: `import →
//! classify`, `classify.threshold`, `classify.filter`. The same bytes at 1 and 7 tasks
//! and after kills at several points; `mill status` and the report show the threshold
//! and the histogram of the scores.

use std::path::{Path, PathBuf};

use pipeline::{Location, RunOptions, Storage};

use crate::{mill, ok, report_html, root};

/// A fastText classifier trained on the classify fixtures, with DCLM's settings but
/// a small hash table.
fn model(dir: &Path) -> PathBuf {
    let sets = root().join("fixtures/classify");
    let set = |n: &str| Location::Local(sets.join(format!("{n}.jsonl")));
    let out = dir.join("model");
    classify::train::train_step(
        &Storage::new(),
        &RunOptions::new(set("positives"), Location::Local(out.clone())),
        &set("positives"),
        &set("negatives"),
        &classify::train::TrainConfig {
            bucket: 20_000,
            ..classify::train::TrainConfig::default()
        },
    )
    .expect("train");
    out.join("model.bin")
}

/// The fixture sets split into nine inputs.
fn inputs(dir: &Path) -> PathBuf {
    let input = dir.join("in");
    std::fs::create_dir_all(&input).expect("mkdir");
    let mut lines: Vec<String> = Vec::new();
    for n in ["positives", "negatives"] {
        let text = std::fs::read_to_string(root().join(format!("fixtures/classify/{n}.jsonl")))
            .expect("fixture");
        lines.extend(text.lines().map(str::to_string));
    }
    for k in 0..9 {
        let part: Vec<&str> = lines
            .iter()
            .skip(k)
            .step_by(9)
            .map(String::as_str)
            .collect();
        std::fs::write(
            input.join(format!("part-{k}.jsonl")),
            part.join("\n") + "\n",
        )
        .expect("write");
    }
    input
}

fn pipeline(dir: &Path, input: &Path, model: &Path, output: &Path) -> PathBuf {
    let text = format!(
        r#"input = {input:?}
output = {output:?}

[[config.classify.classifier]]
name = "dclm"
kind = "fasttext"
model = {model:?}
label = "hq"
keep_top = 0.25

[[step]]
name = "scored"
stages = ["import", "classify"]

[[step]]
name = "threshold"
phase = "classify.threshold"

[[step]]
name = "top"
phase = "classify.filter"
input = "scored"
threshold = "threshold"
"#,
        input = input.to_string_lossy(),
        output = output.to_string_lossy(),
        model = model.to_string_lossy(),
    );
    let f = dir.join(format!(
        "{}.toml",
        output
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    std::fs::write(&f, text).expect("pipeline");
    f
}

/// The kept documents and the thresholds of a run.
fn kept(run: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for (dir, ext) in [("top", ".parquet"), ("threshold", ".json")] {
        for e in std::fs::read_dir(run.join(dir)).expect("outputs").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(ext) {
                out.insert(
                    format!("{dir}/{name}"),
                    std::fs::read(e.path()).expect("read"),
                );
            }
        }
    }
    out
}

#[test]
fn keep_top_at_one_and_seven_tasks_after_kills_with_status_and_report() {
    let dir = tempfile::tempdir().expect("tmp");
    let model = model(dir.path());
    let input = inputs(dir.path());
    let one = dir.path().join("one");
    let f = pipeline(dir.path(), &input, &model, &one);
    let summary = ok(
        mill(&["run", &f.to_string_lossy()]).output().expect("run"),
        "run",
    );
    assert!(summary.contains("dclm_below_top"), "{summary}");
    let expected = kept(&one);
    assert!(expected.len() == 10, "{:?}", expected.keys());

    let seven = dir.path().join("seven");
    let f7 = pipeline(dir.path(), &input, &model, &seven);
    ok(
        mill(&["run", &f7.to_string_lossy(), "--tasks", "7"])
            .output()
            .expect("run"),
        "7 tasks",
    );
    assert_eq!(kept(&seven), expected, "1 and 7 tasks differ");

    // Kill points: each input of the scoring step, the threshold unit, the filter.
    for k in [1u32, 5, 9, 10, 13] {
        let run = dir.path().join(format!("k{k}"));
        let f = pipeline(dir.path(), &input, &model, &run);
        let crashed = mill(&["run", &f.to_string_lossy()])
            .env(pipeline::runner::CRASH_AFTER_BATCHES, k.to_string())
            .output()
            .expect("run");
        assert!(
            !crashed.status.success(),
            "kill point {k} did not kill the run"
        );
        ok(
            mill(&["run", &f.to_string_lossy()])
                .output()
                .expect("rerun"),
            "rerun",
        );
        assert_eq!(kept(&run), expected, "kill at batch {k}: outputs differ");
    }

    let status = ok(
        mill(&["status", &one.to_string_lossy()])
            .output()
            .expect("status"),
        "status",
    );
    assert!(status.contains("threshold of dclm: "), "{status}");
    assert!(
        status.contains("keep_top 0.25 of 300 documents"),
        "{status}"
    );
    assert!(
        status.contains("dclm_score of 300 documents, 0 to 1: "),
        "{status}"
    );
    let html = report_html(dir.path(), &one.to_string_lossy());
    assert!(html.contains("Classifier scores"), "report");
    assert!(html.contains("threshold of dclm"), "report");
    assert!(html.contains("dclm_score of 300 documents"), "report");
}
