//! `mill status`, `mill report` and `mill wait` from any folder: a run records its
//! addresses absolute, so a run started with relative paths reads the same from `/`
//! (cron) as from where it ran; a run whose input cannot be resolved is an error, never
//! "not started".

use crate::{mill_in, model_present, ok, root};

#[test]
fn status_report_and_wait_read_a_relative_run_from_another_folder() {
    if !model_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let here = dir.path().join("here");
    let crawl = here.join("crawl");
    std::fs::create_dir_all(&crawl).expect("dir");
    for entry in std::fs::read_dir(root().join("fixtures/crawl")).expect("fixtures") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "gz") {
            std::fs::copy(&p, crawl.join(p.file_name().expect("name"))).expect("copy");
        }
    }
    // The fixture pipeline's text and signatures steps, input and output relative.
    let f = crate::pipeline_at(&here, "out/run");
    let text = std::fs::read_to_string(&f).expect("pipeline");
    let cut = text
        .find("[[step]]\nname = \"buckets\"")
        .expect("buckets step");
    let text = text[..cut].replace(
        &format!("input = \"{}/fixtures/crawl\"", root().display()),
        "input = \"crawl\"",
    );
    let text = text.replace("input = \"fixtures/crawl\"", "input = \"crawl\"");
    assert!(text.contains("input = \"crawl\""), "{text}");
    std::fs::write(&f, text).expect("pipeline");
    ok(
        mill_in(&here, &["run", "pipeline.toml"])
            .output()
            .expect("run"),
        "mill run",
    );
    let run = here.join("out/run");
    let recorded = std::fs::read_to_string(run.join("_pipeline.toml")).expect("copy");
    assert!(
        recorded.contains(&format!("input = \"{}\"", crawl.display())),
        "the copy keeps absolute addresses: {recorded}"
    );
    // From elsewhere (cron runs from /): every step complete, as from the run's folder.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("dir");
    let run_s = run.to_string_lossy().to_string();
    let status = |from: &std::path::Path| {
        ok(
            mill_in(from, &["status", &run_s]).output().expect("status"),
            "status",
        )
    };
    let there = status(&elsewhere);
    assert_eq!(there, status(&here), "status depends on the folder");
    for step in ["text", "signatures"] {
        assert!(
            there
                .lines()
                .any(|l| l.starts_with(step) && l.ends_with("complete")),
            "{step} is not complete seen from another folder:\n{there}"
        );
    }
    assert!(!there.contains("not started"), "{there}");
    let stalled = mill_in(&elsewhere, &["status", &run_s, "--stalled", "1"])
        .output()
        .expect("status --stalled");
    assert!(stalled.status.success(), "{stalled:?}");
    let html = elsewhere.join("report.html");
    ok(
        mill_in(
            &elsewhere,
            &["report", &run_s, "-o", &html.to_string_lossy()],
        )
        .output()
        .expect("report"),
        "report",
    );
    assert!(
        std::fs::read_to_string(&html)
            .expect("html")
            .contains("signatures")
    );
    // `mill wait` counts the completion notes fleet tasks write: one task of the
    // signatures step run as `mill step` from here, read from elsewhere.
    let copy = run.join("_pipeline.toml").to_string_lossy().to_string();
    ok(
        mill_in(
            &here,
            &["step", "pipeline.toml", "signatures", "--tasks", "1"],
        )
        .output()
        .expect("step"),
        "mill step",
    );
    let waited = ok(
        mill_in(
            &elsewhere,
            &[
                "wait",
                &copy,
                "signatures",
                "--tasks",
                "1",
                "--timeout",
                "5",
            ],
        )
        .output()
        .expect("wait"),
        "wait",
    );
    assert!(waited.contains("1 of 1 tasks finished"), "{waited}");
    // A copy recorded with a relative input (before addresses were kept absolute)
    // that does not resolve here is an error, not a run that has not started.
    std::fs::write(
        run.join("_pipeline.toml"),
        recorded.replace(
            &format!("input = \"{}\"", crawl.display()),
            "input = \"crawl\"",
        ),
    )
    .expect("old copy");
    let old = mill_in(&elsewhere, &["status", &run_s])
        .output()
        .expect("status");
    assert!(
        !old.status.success(),
        "{}",
        String::from_utf8_lossy(&old.stdout)
    );
    let err = String::from_utf8_lossy(&old.stderr);
    assert!(err.contains("relative input"), "{err}");
    // A run whose input has gone is an error too.
    std::fs::write(run.join("_pipeline.toml"), &recorded).expect("copy");
    std::fs::rename(&crawl, here.join("moved")).expect("move");
    let gone = mill_in(&elsewhere, &["status", &run_s])
        .output()
        .expect("status");
    assert!(
        !gone.status.success(),
        "{}",
        String::from_utf8_lossy(&gone.stdout)
    );
    assert!(String::from_utf8_lossy(&gone.stderr).contains("does not exist"));
}
