//! `mill run --incremental` over a crawl that grows: three increments, a document
//! copied into a later increment removed there, and the union of the increments'
//! shards equal to one run over everything with the same tokenizer.

use std::path::Path;

use pipeline::tokens::{Index, read_manifest};
use pipeline::{Location, Storage};

use crate::{mill, model_present, ok, root};

/// Every document's token ids of the corpus whose manifest is at `prefix`, sorted.
fn documents(prefix: &Path) -> Vec<Vec<u32>> {
    let storage = Storage::new();
    let prefix = Location::Local(prefix.to_path_buf());
    let manifest = read_manifest(&storage, &prefix).expect("manifest");
    let mut docs = Vec::new();
    for s in &manifest.shards {
        let at = prefix.join(&s.name);
        let index = Index::read(&storage, &at).expect("index");
        for i in 0..index.len() {
            docs.push(index.document(&storage, &at, i).expect("document"));
        }
    }
    docs.sort();
    docs
}

/// The fixture pipeline reading `crawl`, writing `run`; with `tokenizer`, it encodes
/// with that tokenizer.json instead of training one.
fn pipeline(dir: &Path, name: &str, crawl: &Path, run: &Path, tokenizer: Option<&Path>) -> String {
    let mut text =
        std::fs::read_to_string(root().join("fixtures/pipeline.toml")).expect("pipeline");
    text = text
        .replace(
            "input = \"fixtures/crawl\"",
            &format!("input = \"{}\"", crawl.display()),
        )
        .replace(
            "output = \"out/pipeline\"",
            &format!("output = \"{}\"", run.display()),
        )
        .replace("\"fixtures/", &format!("\"{}/fixtures/", root().display()));
    if let Some(t) = tokenizer {
        text = text
            .replace(
                "[[step]]\nname = \"tokenizer\"\nphase = \"tokenize.train\"\n\n",
                "",
            )
            .replace(
                "tokenizer = \"tokenizer\"",
                &format!("tokenizer = \"{}\"", t.display()),
            );
        assert!(
            !text.contains("phase = \"tokenize.train\""),
            "the train step is gone"
        );
    }
    let f = dir.join(format!("{name}.toml"));
    std::fs::write(&f, text).expect("write");
    f.to_string_lossy().into_owned()
}

#[test]
fn three_increments_equal_one_run_minus_the_duplicates_across_them() {
    if !model_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let crawl = dir.path().join("crawl");
    std::fs::create_dir_all(&crawl).expect("dir");
    let fixture = |n: &str| root().join("fixtures/crawl").join(n);
    let run = dir.path().join("run");
    let f = pipeline(dir.path(), "cron", &crawl, &run, None);
    let cron = || {
        ok(
            mill(&["run", &f, "--incremental"]).output().expect("run"),
            "increment",
        )
    };
    // Day 1: one WARC file.
    std::fs::copy(
        fixture("crawl-00000.warc.gz"),
        crawl.join("crawl-00000.warc.gz"),
    )
    .expect("copy");
    let out = cron();
    assert!(out.contains("increment 1: 1 new inputs"), "{out}");
    // Day 2: a new file, and a copy of day 1's under a new name (every page again).
    std::fs::copy(
        fixture("crawl-00001.warc.gz"),
        crawl.join("crawl-00001.warc.gz"),
    )
    .expect("copy");
    std::fs::copy(
        fixture("crawl-00000.warc.gz"),
        crawl.join("crawl-00001b.warc.gz"),
    )
    .expect("copy");
    let out = cron();
    assert!(out.contains("increment 2: 2 new inputs"), "{out}");
    // Nothing new: nothing done.
    let out = cron();
    assert!(out.contains("no new inputs"), "{out}");
    // Day 3.
    std::fs::copy(
        fixture("crawl-00002.warc.gz"),
        crawl.join("crawl-00002.warc.gz"),
    )
    .expect("copy");
    let out = cron();
    assert!(out.contains("increment 3: 1 new inputs"), "{out}");
    // Earlier increments' shards were never rewritten; each increment has its own.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("json");
    let names: Vec<&str> = manifest["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    for k in 1..=3 {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&format!("inc-0000{k}/tokens/"))),
            "{names:?}"
        );
    }
    assert!(run.join("manifest-v00001.json").exists() && run.join("manifest-v00003.json").exists());
    // The copy's pages were removed in increment 2, against what increment 1 kept.
    let copy_marker: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run.join("inc-00002/deduped/_done/crawl-00001b.json")).expect("marker"),
    )
    .expect("json");
    assert_eq!(copy_marker["stats"]["docs_out"], 0, "{copy_marker}");
    assert!(copy_marker["stats"]["drops"]["minhash_dup"].as_u64() > Some(0));
    // One run over everything, encoded with the same tokenizer, keeps the same documents.
    let once = dir.path().join("once");
    let tokenizer = run.join("inc-00001/tokenizer/tokenizer.json");
    let f1 = pipeline(dir.path(), "once", &crawl, &once, Some(&tokenizer));
    ok(mill(&["run", &f1]).output().expect("run"), "one run");
    let (union, whole) = (documents(&run), documents(&once.join("tokens")));
    assert!(!union.is_empty());
    assert_eq!(union.len(), whole.len(), "documents: increments vs one run");
    assert!(
        union == whole,
        "the increments' documents differ from one run's"
    );
}
