//! A crawl of WET files run by `mill`: the text step reads `conversion` records as
//! documents, and the files beside them that are not inputs (a WAT file, a README) are
//! counted as `not_an_input` in the run's summary, in `mill status` and in the report;
//! the summary, the marker and the report say where the step's time went.

use super::{mill, model_present, ok, report_html, root};

#[test]
fn a_wet_crawl_runs_and_files_that_are_not_inputs_are_counted() {
    if !model_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let crawl = dir.path().join("crawl");
    std::fs::create_dir_all(&crawl).expect("crawl");
    for name in ["crawl.warc.wet.gz", "crawl.warc.wat.gz"] {
        std::fs::copy(root().join("fixtures/wet").join(name), crawl.join(name)).expect("copy");
    }
    std::fs::write(crawl.join("README.txt"), "WET and WAT files of one crawl\n").expect("readme");
    // Hidden files are neither inputs nor counted.
    std::fs::write(crawl.join(".listing"), "x").expect("hidden");
    let run = dir.path().join("run");
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(
        &pipeline,
        format!(
            "input = \"{}\"\noutput = \"{}\"\ntasks = 1\n\n\
             [config.langid]\nlanguages = [\"en\"]\n\n[config.quality]\n\n\
             [[step]]\nname = \"text\"\nstages = [\"extract\", \"langid\", \"quality\"]\n",
            crawl.display(),
            run.display()
        ),
    )
    .expect("pipeline");
    let f = pipeline.to_string_lossy().to_string();
    let stdout = ok(mill(&["run", &f]).output().expect("mill run"), "mill run");
    assert!(
        stdout.contains("not_an_input: 2 files"),
        "the WAT file and the README are counted:\n{stdout}"
    );
    // 11 records: 10 conversions (pages), 1 warcinfo.
    assert!(
        stdout.contains("records read 11: pages 10, not pages 1"),
        "{stdout}"
    );
    // Where the fused step's time went: reading, each stage in order, writing; the
    // shares add up to 100%.
    let time = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("time: "))
        .unwrap_or_else(|| panic!("no time line:\n{stdout}"));
    let parts: Vec<(&str, f64)> = time
        .split(" (")
        .next()
        .unwrap_or("")
        .split(", ")
        .map(|p| {
            let (name, share) = p.rsplit_once(' ').expect("name and share");
            (name, share.trim_end_matches('%').parse().expect("a share"))
        })
        .collect();
    let names: Vec<&str> = parts.iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        ["read", "extract", "langid", "quality", "write"],
        "{time}"
    );
    let sum: f64 = parts.iter().map(|p| p.1).sum();
    assert!((sum - 100.0).abs() < 0.5, "{time}");

    let json = ok(
        mill(&["status", &run.to_string_lossy(), "--json"])
            .output()
            .expect("status"),
        "status --json",
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    let step = &v["steps"][0];
    assert_eq!(step["not_inputs"], 2, "{step}");
    assert_eq!(step["stats"]["docs_in"], 10, "{step}");
    // The marker keeps the seconds of each part.
    let parts = step["stats"]["stage_seconds"]
        .as_array()
        .expect("stage_seconds");
    assert_eq!(parts.len(), 5, "{step}");
    // The English conversions with enough words pass langid and the Gopher rules.
    let out = step["stats"]["docs_out"].as_u64().expect("docs_out");
    assert!(out >= 4, "kept {out} of the WET documents: {step}");
    let text = ok(
        mill(&["status", &run.to_string_lossy()])
            .output()
            .expect("status"),
        "status",
    );
    assert!(text.contains("not_an_input: 2 files"), "{text}");

    let html = report_html(dir.path(), &run.to_string_lossy());
    assert!(
        html.contains("2 files of its input are not inputs of the step (not_an_input)"),
        "report"
    );
    assert!(
        html.contains("Where the time goes") && html.contains("time: read"),
        "report"
    );
}
