//! `mill plan`: the fixture crawl's sample run through every step but the train phase,
//! projected to the whole crawl. With every file as the sample the plan is the run: its
//! documents and tokens equal a `mill run`'s. With two of the three files, the projected
//! tokens and core-seconds land near the whole run's.

use super::{mill, model_present, ok, pipeline_at};

/// The fixture pipeline without its train step (GPU work `mill plan` does not run),
/// writing to `<dir>/run`.
fn pipeline_without_train(dir: &std::path::Path) -> String {
    let run = dir.join("run");
    let path = pipeline_at(dir, &run.to_string_lossy());
    let text = std::fs::read_to_string(&path).expect("pipeline");
    let cut = text
        .find("[[step]]\nname = \"model\"")
        .expect("the fixture's train step");
    std::fs::write(&path, &text[..cut]).expect("write");
    path.to_string_lossy().into_owned()
}

fn plan_json(pipeline: &str, sample: &str) -> serde_json::Value {
    let out = ok(
        mill(&[
            "plan",
            pipeline,
            "--sample",
            sample,
            "--threads",
            "1",
            "--json",
        ])
        .output()
        .expect("mill plan"),
        "mill plan",
    );
    serde_json::from_str(out.trim()).expect("plan JSON")
}

#[test]
fn the_plan_of_the_whole_crawl_is_its_run_and_a_sample_lands_near_it() {
    if !model_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let with_train = pipeline_at(dir.path(), &dir.path().join("unused").to_string_lossy());
    let whole = plan_json(&with_train.to_string_lossy(), "3");
    assert_eq!(whole["input_files"], 3, "make.py is not an input: {whole}");
    assert_eq!(whole["sample_files"], 3);
    assert_eq!(whole["scale"], 1.0);
    assert_eq!(whole["not_projected"], serde_json::json!(["model"]));
    let names: Vec<&str> = whole["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "text",
            "signatures",
            "buckets",
            "clusters",
            "deduped",
            "tokenizer",
            "tokens"
        ]
    );
    for s in whole["steps"].as_array().expect("steps") {
        assert!(s["core_seconds"].as_f64().expect("core-s") > 0.0, "{s}");
        assert!(s["put_requests"].as_f64().expect("puts") >= 1.0, "{s}");
    }

    // The same steps run by `mill run`: the same documents per step and tokens.
    let pipeline = pipeline_without_train(dir.path());
    ok(mill(&["run", &pipeline]).output().expect("run"), "mill run");
    let status = ok(
        mill(&[
            "status",
            &dir.path().join("run").to_string_lossy(),
            "--json",
        ])
        .output()
        .expect("status"),
        "status",
    );
    let status: serde_json::Value = serde_json::from_str(status.trim()).expect("status JSON");
    for (planned, ran) in whole["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .zip(status["steps"].as_array().expect("status steps"))
    {
        assert_eq!(
            planned["docs_in"],
            ran["stats"]["docs_in"].as_f64().expect("docs")
        );
        assert_eq!(
            planned["docs_out"],
            ran["stats"]["docs_out"].as_f64().expect("docs")
        );
    }
    let tokens = whole["tokens"].as_f64().expect("tokens");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("run/tokens/manifest.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    assert_eq!(
        tokens,
        manifest["tokens"].as_f64().expect("manifest tokens")
    );

    // Two of the three files, scaled by bytes: tokens within 15% of the whole run's.
    let half = plan_json(&pipeline, "2");
    assert_eq!(half["sample_files"], 2);
    let projected = half["tokens"].as_f64().expect("tokens");
    assert!(
        (projected / tokens - 1.0).abs() < 0.15,
        "projected {projected} tokens, the run made {tokens}"
    );
    // The table names every step and the totals.
    let table = ok(
        mill(&[
            "plan", &pipeline, "--sample", "1", "--cores", "72", "--price", "1.5",
        ])
        .output()
        .expect("plan"),
        "plan table",
    );
    assert!(
        table.contains("core-hours") && table.contains("tokens:"),
        "{table}"
    );
    assert!(table.contains("dedup clusters phase memory"), "{table}");
}
