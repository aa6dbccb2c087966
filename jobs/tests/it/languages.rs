//! The multilingual fixture crawl (`fixtures/multilingual.toml`): FineWeb-2's labels,
//! thresholds, settings and segmenters, with the documents in, kept and dropped by
//! language in the step's stats, `mill status` and `mill report`.

use super::*;

#[test]
fn multilingual_crawl_counts_by_language() {
    if !model_present() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temporary directory");
    let run = tmp.path().join("multilingual");
    let text = std::fs::read_to_string(root().join("fixtures/multilingual.toml"))
        .expect("fixture pipeline")
        .replace(
            "output = \"out/multilingual\"",
            &format!("output = \"{}\"", run.display()),
        )
        .replace("\"fixtures/", &format!("\"{}/fixtures/", root().display()));
    let spec = tmp.path().join("multilingual.toml");
    std::fs::write(&spec, text).expect("write pipeline");
    ok(
        mill(&["run", &spec.to_string_lossy()])
            .output()
            .expect("run"),
        "multilingual run",
    );

    // The articles of 12 languages in 8 scripts, each labelled as FineWeb-2 labels it
    // and written under its label, as FineWeb-2 lays its output out.
    let status = ok(
        mill(&["status", &run.to_string_lossy()])
            .output()
            .expect("status"),
        "status",
    );
    let labels = [
        "arb_Arab", "cmn_Hani", "deu_Latn", "fas_Arab", "fra_Latn", "hin_Deva", "jpn_Jpan",
        "kor_Hang", "rus_Cyrl", "tha_Thai", "tur_Latn", "vie_Latn",
    ];
    let listed: Vec<&str> = status
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("language "))
        .collect();
    assert!(listed.len() >= 10, "{status}");
    let mut kept = 0;
    for line in &listed {
        // `cmn_Hani: 4 in, 4 kept[, reason n]...`, adding up.
        let (label, rest) = line.split_once(": ").expect("label");
        assert!(labels.contains(&label), "{label}: {status}");
        let nums: Vec<u64> = rest
            .split(", ")
            .map(|p| p.split(' ').find_map(|w| w.parse().ok()).expect("a count"))
            .collect();
        assert_eq!(nums[0], nums[1] + nums[2..].iter().sum::<u64>(), "{line}");
        kept += nums[1];
        assert!(
            run.join("text").join(label).is_dir() || nums[1] == 0,
            "{label} has no folder"
        );
    }
    assert!(kept >= 30, "most articles are kept: {status}");
    let report = report_html(tmp.path(), &run.to_string_lossy());
    assert!(report.contains("documents by language"), "report");
    assert!(report.contains("cmn_Hani"), "report");
}
