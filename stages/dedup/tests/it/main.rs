//! Tests of mill-dedup: all phases on fixtures (golden), conformance of the signature and
//! filter phases, the merge against brute force, resume of every phase, incremental runs
//! against an index, and one run on the loopback S3 server; exact-substring dedup in
//! [`substring`].

mod clusters;
mod substring;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use dedup::buckets::merge_unit;
use dedup::merge::{MergeInput, Origin};
use dedup::pairs::pairs;
use dedup::runs::{Entry, Layout, RunWriter, SectionReader, read_header, slots};
use dedup::{Config, Kind};
use pipeline::testing::{Conformance, UnitConformance, check, check_units, snapshot};

use pipeline::{Location, RunOptions, Storage};
use proptest::prelude::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn docs_dir() -> PathBuf {
    fixtures().join("dedup/docs")
}

fn loc(p: &Path) -> Location {
    Location::Local(p.to_path_buf())
}

fn opts(input: &Path, output: &Path) -> RunOptions {
    RunOptions::new(loc(input), loc(output))
}

fn config(kind: Kind) -> Config {
    Config {
        kind,
        batch_docs: 4,
        ..Config::default()
    }
}

/// Runs all four phases with the library; returns the filter's output folder.
fn dedup_all(storage: &Storage, input: &Path, work: &Path, config: &Config) -> PathBuf {
    let (sig, bk, cl, out) = (
        work.join("sig"),
        work.join("buckets"),
        work.join("clusters"),
        work.join("out"),
    );
    dedup::signatures::signatures(storage, &opts(input, &sig), config).expect("signatures");
    dedup::buckets::buckets(storage, &opts(&sig, &bk), config, None).expect("buckets");
    dedup::clusters::clusters(storage, &opts(&bk, &cl), config).expect("clusters");
    let step = dedup::filter::step(storage, config, &cl.to_string_lossy()).expect("filter step");
    pipeline::run(&step, storage, &opts(input, &out)).expect("filter");
    out
}

/// Kept ids with their cluster size, and dropped ids with their reason.
fn outcome(out: &Path, kind: Kind, input: &Path) -> (BTreeMap<String, i64>, BTreeSet<String>) {
    let mut kept = BTreeMap::new();
    let storage = Storage::new();
    for entry in std::fs::read_dir(out).expect("out") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "parquet") {
            kept.extend(cluster_sizes(&storage, &loc(&p), kind));
        }
    }
    let mut all = BTreeSet::new();
    for entry in std::fs::read_dir(input).expect("input") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            all.insert(v["id"].as_str().expect("id").to_string());
        }
    }
    let dropped = all
        .into_iter()
        .filter(|id| !kept.contains_key(id))
        .collect();
    (kept, dropped)
}

/// (id, cluster size) of every document of a filter output shard.
fn cluster_sizes(storage: &Storage, shard: &Location, kind: Kind) -> Vec<(String, i64)> {
    use arrow_array::Array;
    let meta = storage.head(shard).expect("head").expect("shard exists");
    let reader = pipeline::shard::ParquetReader::open(storage, &meta, "", 1024)
        .expect("open")
        .expect("parquet");
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        let carry = batch
            .carry
            .expect("stage columns come back as carried columns");
        let col = carry
            .column_by_name(kind.size_column())
            .expect("cluster size column")
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .expect("int64")
            .clone();
        for (i, d) in batch.docs.into_iter().enumerate() {
            assert!(col.is_valid(i), "{}: no cluster size", d.id);
            out.push((d.id, col.value(i)));
        }
    }
    out
}

#[test]
fn golden_all_kinds_on_fixtures() {
    let storage = Storage::new();
    let mut report = String::new();
    for kind in [Kind::Url, Kind::Exact, Kind::Minhash] {
        let work = tempfile::tempdir().expect("tmp");
        let out = dedup_all(&storage, &docs_dir(), work.path(), &config(kind));
        let (kept, dropped) = outcome(&out, kind, &docs_dir());
        let summary = dedup::clusters::read_summary(&storage, &loc(&work.path().join("clusters")))
            .expect("summary");
        report.push_str(&format!(
            "## {}: {} documents, {} pairs, {} clusters, {} removed\n",
            kind.name(),
            summary.documents,
            summary.pairs,
            summary.clusters,
            summary.removed
        ));
        for id in &dropped {
            report.push_str(&format!("drop {id}\n"));
        }
        for (id, size) in &kept {
            if *size > 1 {
                report.push_str(&format!("keep {id} (cluster of {size})\n"));
            }
        }
    }
    // What the fixtures were built to show.
    for line in [
        "drop en-harbour-copy",               // exact: same text after normalisation
        "keep en-harbour-url (cluster of 2)", // url: the later crawl of the same URL
        "keep de-garten-copy (cluster of 3)", // minhash: copy, orig and near (ß = SS)
    ] {
        assert!(report.contains(line), "missing {line:?} in\n{report}");
    }
    assert!(
        !report.contains("-far"),
        "a third of the words changed is no duplicate:\n{report}"
    );
    pipeline::testing::golden(&fixtures().join("expected/dedup.txt"), &report);
}

#[test]
fn chars_shingles_find_cjk_near_duplicates() {
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let words = dedup_all(&storage, &docs_dir(), work.path(), &config(Kind::Minhash));
    let (_, dropped_words) = outcome(&words, Kind::Minhash, &docs_dir());
    assert!(
        !dropped_words.contains("zh-chaguan-near"),
        "one word per Chinese sentence: no 5-word shingles in common"
    );
    let work2 = tempfile::tempdir().expect("tmp");
    let chars = Config {
        shingles: dedup::Shingles::Chars,
        ..config(Kind::Minhash)
    };
    let out = dedup_all(&storage, &docs_dir(), work2.path(), &chars);
    let (kept, _) = outcome(&out, Kind::Minhash, &docs_dir());
    let zh: Vec<&String> = kept
        .keys()
        .filter(|id| id.starts_with("zh-chaguan-"))
        .collect();
    // orig, copy and near are one cluster: one keeper, with the far and url ones.
    assert_eq!(zh.len(), 3, "{zh:?}");
    assert!(kept.contains_key("zh-chaguan-far") && kept.contains_key("zh-chaguan-url"));
    let keeper = zh
        .iter()
        .find(|id| !id.ends_with("-far") && !id.ends_with("-url"))
        .expect("keeper");
    assert_eq!(kept[*keeper], 3);
}

fn mill() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mill-dedup"))
}

fn run_ok(args: &[&str]) -> String {
    let out = mill().args(args).output().expect("run mill-dedup");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn signatures_conformance() {
    let storage = Storage::new();
    let root = tempfile::tempdir().expect("tmp");
    // Many small batches so a crash can land inside a file.
    let cfg = config(Kind::Minhash);
    let one = root.path().join("one");
    let many = root.path().join("many");
    let r1 = dedup::signatures::signatures(
        &storage,
        &RunOptions {
            threads: 1,
            ..opts(&docs_dir(), &one)
        },
        &cfg,
    )
    .expect("1 thread");
    dedup::signatures::signatures(
        &storage,
        &RunOptions {
            threads: 4,
            ..opts(&docs_dir(), &many)
        },
        &cfg,
    )
    .expect("4 threads");
    assert_eq!(
        snapshot(&one),
        snapshot(&many),
        "thread count changed the output"
    );
    assert!(r1.stats.balanced());
    assert_eq!(r1.stats.docs_in, 42);
    assert_eq!(
        r1.stats.drops.get(dedup::signatures::NOTHING_TO_SIGN),
        Some(&1)
    );
    // Rerun: nothing processed, nothing changed.
    let before = snapshot(&one);
    let again =
        dedup::signatures::signatures(&storage, &opts(&docs_dir(), &one), &cfg).expect("rerun");
    assert!(again.processed.is_empty());
    assert_eq!(again.skipped.len(), 3);
    assert_eq!(before, snapshot(&one));
    // Killed after k batches, then resumed: the same bytes.
    let cfg_path = root.path().join("dedup.toml");
    std::fs::write(&cfg_path, "batch_docs = 4\n").expect("config");
    for k in [1, 3, 7] {
        let out = root.path().join(format!("crash{k}"));
        let args = [
            "signatures",
            "--input",
            &docs_dir().to_string_lossy(),
            "--output",
            &out.to_string_lossy(),
            "--config",
            &cfg_path.to_string_lossy(),
            "--log-format",
            "json",
        ]
        .map(String::from);
        let status = mill()
            .args(&args)
            .env(pipeline::runner::CRASH_AFTER_BATCHES, k.to_string())
            .status()
            .expect("run");
        assert!(!status.success(), "crash point {k} did not crash");
        run_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            snapshot(&one),
            snapshot(&out),
            "resume after crash at batch {k}"
        );
    }
}

/// The dedup config file the binary reads in the conformance tests (`batch_docs = 4`,
/// as [`config`]), for `kind`.
fn config_file(dir: &Path, kind: Kind) -> String {
    let path = dir.join("dedup.toml");
    std::fs::write(
        &path,
        format!("batch_docs = 4\nkind = \"{}\"\n", kind.name()),
    )
    .expect("config");
    path.to_string_lossy().to_string()
}

/// `mill-dedup <phase> <flags> --config <file> <extra>`, for the unit harness.
fn phase_command<'a>(
    phase: &'a str,
    config: &'a str,
    extra: &'a [String],
) -> impl Fn(Vec<String>) -> Command + 'a {
    move |flags| {
        let mut c = mill();
        c.arg(phase)
            .args(flags)
            .args(["--config", config])
            .args(extra);
        c
    }
}

#[test]
fn buckets_clusters_and_index_units_conform() {
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    for kind in [Kind::Minhash, Kind::Url] {
        let cfg = config(kind);
        let dir = work.path().join(kind.name());
        dedup_all(&storage, &docs_dir(), &dir, &cfg);
        let file = config_file(&dir, kind);
        let none: Vec<String> = Vec::new();
        let buckets_cmd = phase_command("buckets", &file, &none);
        check_units(&UnitConformance {
            run: &|o| dedup::buckets::buckets(&storage, o, &cfg, None),
            input: dir.join("sig"),
            command: Some(&buckets_cmd),
            run_records: &[],
        });
        let clusters_cmd = phase_command("clusters", &file, &none);
        check_units(&UnitConformance {
            run: &|o| dedup::clusters::clusters(&storage, o, &cfg),
            input: dir.join("buckets"),
            command: Some(&clusters_cmd),
            run_records: &[],
        });
        let clusters = loc(&dir.join("clusters"));
        let extra = vec!["--clusters".to_string(), clusters.to_string()];
        let index_cmd = phase_command("index", &file, &extra);
        check_units(&UnitConformance {
            run: &|o| dedup::index::index(&storage, o, &cfg, &clusters),
            input: dir.join("sig"),
            command: Some(&index_cmd),
            run_records: &[],
        });
    }
}

#[test]
fn unit_markers_written_before_versions_still_count() {
    // Before units had a `source_hash`, bucket markers kept the listing hash in
    // `input_etag`. Such markers must still mark their units done.
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let cfg = config(Kind::Minhash);
    let (sig, bk) = (work.path().join("sig"), work.path().join("bk"));
    dedup::signatures::signatures(&storage, &opts(&docs_dir(), &sig), &cfg).expect("signatures");
    let first = dedup::buckets::buckets(&storage, &opts(&sig, &bk), &cfg, None).expect("buckets");
    for entry in std::fs::read_dir(bk.join("_done")).expect("markers") {
        let path = entry.expect("entry").path();
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).expect("marker")).expect("json");
        let version = m["source_hash"].take();
        assert!(version.is_string());
        m["input_etag"] = version;
        m.as_object_mut().expect("object").remove("source_hash");
        std::fs::write(&path, serde_json::to_vec(&m).expect("json")).expect("write");
    }
    let again = dedup::buckets::buckets(&storage, &opts(&sig, &bk), &cfg, None).expect("rerun");
    assert!(again.processed.is_empty(), "{:?}", again.processed);
    assert_eq!(again.skipped.len(), first.processed.len());
}

#[test]
fn filter_conformance() {
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let cfg = config(Kind::Minhash);
    dedup_all(&storage, &docs_dir(), work.path(), &cfg);
    let clusters = work.path().join("clusters").to_string_lossy().to_string();
    let inputs = ["a.jsonl", "b.jsonl", "c.jsonl"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                std::fs::read(docs_dir().join(n)).expect("fixture"),
            )
        })
        .collect();
    let cfg_dir = tempfile::tempdir().expect("tmp");
    let cfg_path = cfg_dir.path().join("dedup.toml");
    std::fs::write(&cfg_path, "batch_docs = 4\n").expect("config");
    let clusters2 = clusters.clone();
    let cfg_str = cfg_path.to_string_lossy().to_string();
    check(&Conformance {
        step: &|| dedup::filter::step(&Storage::new(), &cfg, &clusters).expect("step"),
        inputs,
        broken: Vec::new(),
        command: Some(&move |flags: Vec<String>| {
            let mut c = mill();
            c.arg("filter")
                .args(flags)
                .args(["--clusters", &clusters2, "--config", &cfg_str]);
            c
        }),
    });
}

#[test]
fn filter_refuses_an_input_the_clusters_did_not_see() {
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let cfg = config(Kind::Exact);
    dedup_all(&storage, &docs_dir(), work.path(), &cfg);
    let other = work.path().join("other");
    std::fs::create_dir_all(&other).expect("dir");
    std::fs::write(
        other.join("zzz.jsonl"),
        "{\"id\":\"x\",\"text\":\"hello\"}\n",
    )
    .expect("write");
    let step = dedup::filter::step(
        &storage,
        &cfg,
        &work.path().join("clusters").to_string_lossy(),
    )
    .expect("step");
    let err = pipeline::run(&step, &storage, &opts(&other, &work.path().join("o2")))
        .expect_err("must fail");
    assert!(err.to_string().contains("no removal list"), "{err}");
}

#[test]
fn every_phase_resumes_and_reruns_as_a_no_op() {
    let storage = Storage::new();
    let w = tempfile::tempdir().expect("tmp");
    let cfg = config(Kind::Minhash);
    let (sig, bk, cl) = (
        w.path().join("sig"),
        w.path().join("bk"),
        w.path().join("cl"),
    );
    dedup::signatures::signatures(&storage, &opts(&docs_dir(), &sig), &cfg).expect("signatures");
    // Buckets in 40 tasks (14 bands × 4 ranges); run only some, clusters must refuse.
    let task = |t: usize| RunOptions {
        tasks: 40,
        task: t,
        ..opts(&sig, &bk)
    };
    for t in 0..39 {
        dedup::buckets::buckets(&storage, &task(t), &cfg, None).expect("bucket task");
    }
    let err = dedup::clusters::clusters(&storage, &opts(&bk, &cl), &cfg).expect_err("incomplete");
    assert!(err.to_string().contains("incomplete"), "{err}");
    let last = dedup::buckets::buckets(&storage, &task(39), &cfg, None).expect("last task");
    assert_eq!(last.processed.len(), 1);
    let again = dedup::buckets::buckets(&storage, &task(39), &cfg, None).expect("rerun");
    assert!(again.processed.is_empty() && again.skipped.len() == 1);
    // A lost unit is redone alone.
    std::fs::remove_file(bk.join("_done/003-001.json")).expect("remove marker");
    let redo = dedup::buckets::buckets(&storage, &task(3 * 4 + 1), &cfg, None).expect("redo");
    assert_eq!(redo.processed, vec!["003-001".to_string()]);
    let ran = dedup::clusters::clusters(&storage, &opts(&bk, &cl), &cfg).expect("clusters");
    assert_eq!(ran.processed, vec!["clusters".to_string()]);
    let s1 = dedup::clusters::read_summary(&storage, &loc(&cl)).expect("summary");
    let before = snapshot(&cl);
    let again = dedup::clusters::clusters(&storage, &opts(&bk, &cl), &cfg).expect("rerun");
    assert!(again.processed.is_empty() && again.skipped == vec!["clusters".to_string()]);
    let s2 = dedup::clusters::read_summary(&storage, &loc(&cl)).expect("summary");
    assert_eq!(s1, s2);
    assert_eq!(before, snapshot(&cl));
    // 40 tasks give the same removals as one.
    let w1 = tempfile::tempdir().expect("tmp");
    let (bk1, cl1) = (w1.path().join("bk"), w1.path().join("cl"));
    dedup::buckets::buckets(&storage, &opts(&sig, &bk1), &cfg, None).expect("one task");
    dedup::clusters::clusters(&storage, &opts(&bk1, &cl1), &cfg).expect("clusters");
    let s3 = dedup::clusters::read_summary(&storage, &loc(&cl1)).expect("summary");
    assert_eq!(s1.removed, s3.removed);
    for stem in ["a", "b", "c"] {
        assert_eq!(
            std::fs::read(cl.join(format!("{stem}.dups"))).expect("dups"),
            std::fs::read(cl1.join(format!("{stem}.dups"))).expect("dups"),
        );
    }
}

#[test]
fn incremental_run_against_an_index() {
    let storage = Storage::new();
    let w = tempfile::tempdir().expect("tmp");
    let cfg = config(Kind::Minhash);
    // Batch 1: a.jsonl. Batch 2: b.jsonl and c.jsonl, deduplicated against batch 1.
    let (b1, b2) = (w.path().join("batch1"), w.path().join("batch2"));
    std::fs::create_dir_all(&b1).expect("dir");
    std::fs::create_dir_all(&b2).expect("dir");
    std::fs::copy(docs_dir().join("a.jsonl"), b1.join("a.jsonl")).expect("copy");
    for n in ["b.jsonl", "c.jsonl"] {
        std::fs::copy(docs_dir().join(n), b2.join(n)).expect("copy");
    }
    let index = w.path().join("index");
    let run1 = w.path().join("run1");
    dedup_all(&storage, &b1, &run1, &cfg);
    dedup::index::index(
        &storage,
        &opts(&run1.join("sig"), &index),
        &cfg,
        &loc(&run1.join("clusters")),
    )
    .expect("index 1");
    let runs_after_1: Vec<_> = std::fs::read_dir(index.join("000"))
        .expect("index")
        .collect();
    assert_eq!(runs_after_1.len(), 1);

    let run2 = w.path().join("run2");
    let (sig, bk, cl, out) = (
        run2.join("sig"),
        run2.join("bk"),
        run2.join("cl"),
        run2.join("out"),
    );
    dedup::signatures::signatures(&storage, &opts(&b2, &sig), &cfg).expect("signatures");
    dedup::buckets::buckets(&storage, &opts(&sig, &bk), &cfg, Some(&loc(&index))).expect("buckets");
    dedup::clusters::clusters(&storage, &opts(&bk, &cl), &cfg).expect("clusters");
    let summary = dedup::clusters::read_summary(&storage, &loc(&cl)).expect("summary");
    assert!(summary.matched_index > 0, "{summary:?}");
    let step = dedup::filter::step(&storage, &cfg, &cl.to_string_lossy()).expect("step");
    pipeline::run(&step, &storage, &opts(&b2, &out)).expect("filter");
    let (kept2, _) = outcome(&out, Kind::Minhash, &b2);

    // The same documents deduplicated in one batch: what batch 2 keeps is what the
    // whole corpus keeps minus batch 1's documents, for every cluster batch 1 holds.
    let whole = w.path().join("whole");
    let out_all = dedup_all(&storage, &docs_dir(), &whole, &cfg);
    let (kept_all, _) = outcome(&out_all, Kind::Minhash, &docs_dir());
    let a_ids: BTreeSet<String> = std::fs::read_to_string(b1.join("a.jsonl"))
        .expect("read")
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["id"]
                .as_str()
                .expect("id")
                .to_string()
        })
        .collect();
    for id in kept2.keys() {
        let base = id.rsplit_once('-').map_or(id.as_str(), |(b, _)| b);
        assert!(
            !a_ids.iter().any(|a| a.starts_with(base)
                && kept_all.contains_key(a)
                && !kept_all.contains_key(id)),
            "{id} kept in batch 2 although batch 1 holds its cluster's keeper"
        );
    }
    // Index grows by appending: a second run file per section, the first untouched.
    let first = std::fs::read(runs_after_1[0].as_ref().expect("entry").path()).expect("run");
    dedup::index::index(&storage, &opts(&sig, &index), &cfg, &loc(&cl)).expect("index 2");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(index.join("000"))
        .expect("index")
        .map(|e| e.expect("e").path())
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter()
            .any(|p| std::fs::read(p).expect("read") == first)
    );
    // Another configuration cannot use this index.
    let other = Config {
        seed: 2,
        ..cfg.clone()
    };
    let err = dedup::buckets::buckets(
        &storage,
        &opts(&sig, &w.path().join("bk2")),
        &other,
        Some(&loc(&index)),
    )
    .expect_err("seed mismatch");
    assert!(err.to_string().contains("index was built with"), "{err}");
}

/// Writes one run file of `layout` holding `sections`.
fn write_run(
    storage: &Storage,
    path: &Path,
    layout: Layout,
    sections: &[Vec<Entry>],
    docs: u64,
) -> u64 {
    let mut w = RunWriter::create(storage, &loc(path), layout).expect("create");
    for s in sections {
        w.section();
        let mut s = s.clone();
        s.sort();
        for e in &s {
            w.push(e).expect("push");
        }
    }
    w.finish(docs).expect("finish")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// The merge finds exactly the groups a brute-force comparison of keys finds, for any
    /// split into hash ranges and with small key spaces full of collisions.
    #[test]
    fn merge_equals_brute_force(
        files in proptest::collection::vec(proptest::collection::vec(0u8..24, 0..40), 1..6),
        ranges_log in 0u32..4,
    ) {
        let storage = Storage::new();
        let dir = tempfile::tempdir().expect("tmp");
        let layout = Kind::Minhash.layout();
        let mut paths = Vec::new();
        let mut truth: BTreeMap<u128, BTreeSet<u64>> = BTreeMap::new();
        for (f, keys) in files.iter().enumerate() {
            // Spread small keys over the top byte so ranges split them.
            let entries: Vec<Entry> = keys.iter().enumerate().map(|(row, k)| Entry {
                key: ((*k as u128) * 0x0b00_0000_0000_0000u128 + 7) << 64,
                rank: 0,
                row: row as u32,
            }).collect();
            for e in &entries {
                truth.entry(e.key).or_default().insert(dedup::global(f, e.row));
            }
            let p = dir.path().join(format!("{f}.sig"));
            let size = write_run(&storage, &p, layout, &[entries], keys.len() as u64);
            paths.push((p, size));
        }
        let ranges = 1usize << ranges_log;
        let mut found: BTreeMap<u64, u64> = BTreeMap::new(); // member -> group keeper
        for r in 0..ranges {
            let inputs = paths.iter().enumerate().map(|(f, (p, size))| {
                let h = read_header(&storage, &loc(p), *size).expect("header");
                MergeInput {
                    reader: SectionReader::open(&storage, &loc(p), h.layout, &h.sections[0], slots(r, ranges), 40),
                    origin: Origin::Input(f),
                }
            }).collect();
            let out = dir.path().join(format!("u{r}.pairs"));
            merge_unit(&storage, &loc(&out), inputs, (0, r, ranges), &"0".repeat(64), Kind::Minhash).expect("merge");
            for (a, b) in pairs(&std::fs::read(&out).expect("pairs")) {
                prop_assert!(a < b);
                prop_assert!(found.insert(b, a).is_none(), "{b} paired twice");
            }
        }
        let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
        for members in truth.values() {
            let first = *members.iter().next().expect("member");
            for m in members.iter().skip(1) {
                expected.insert(*m, first);
            }
        }
        prop_assert_eq!(found, expected);
    }
}

#[test]
fn run_files_with_hash_ranges_cover_each_key_once() {
    let storage = Storage::new();
    let dir = tempfile::tempdir().expect("tmp");
    let layout = Kind::Url.layout();
    let entries: Vec<Entry> = (0..1000u64)
        .map(|i| Entry {
            key: (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
            rank: i % 3,
            row: i as u32,
        })
        .collect();
    let p = dir.path().join("x.sig");
    let size = write_run(&storage, &p, layout, &[entries], 1000);
    let h = read_header(&storage, &loc(&p), size).expect("header");
    let mut seen = HashMap::new();
    for r in 0..16 {
        let mut rd = SectionReader::open(
            &storage,
            &loc(&p),
            layout,
            &h.sections[0],
            slots(r, 16),
            100,
        );
        while let Some(e) = rd.next_entry().expect("entry") {
            *seen.entry(e.row).or_insert(0) += 1;
        }
    }
    assert_eq!(seen.len(), 1000);
    assert!(seen.values().all(|&n| n == 1));
}

#[test]
fn all_phases_on_s3() {
    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-dedup") else {
        return;
    };
    let base = Location::parse(&format!("s3://{bucket}/")).expect("address");
    for n in ["a.jsonl", "b.jsonl", "c.jsonl"] {
        storage
            .put(
                &base.join(&format!("docs/{n}")),
                &std::fs::read(docs_dir().join(n)).expect("read"),
            )
            .expect("upload");
    }
    let s3 = |p: &str| format!("s3://{bucket}/{p}");
    let run = |args: Vec<String>| {
        let out = mill()
            .args(&args)
            .env("AWS_ENDPOINT_URL", &endpoint)
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    run(v(&[
        "signatures",
        "--input",
        &s3("docs/"),
        "--output",
        &s3("sig/"),
    ]));
    for t in 0..3 {
        run(v(&[
            "buckets",
            "--input",
            &s3("sig/"),
            "--output",
            &s3("bk/"),
            "--tasks",
            "3",
            "--task",
            &t.to_string(),
        ]));
    }
    run(v(&[
        "clusters",
        "--input",
        &s3("bk/"),
        "--output",
        &s3("cl/"),
    ]));
    run(v(&[
        "filter",
        "--input",
        &s3("docs/"),
        "--output",
        &s3("out/"),
        "--clusters",
        &s3("cl/"),
    ]));
    // The same as on disk.
    let w = tempfile::tempdir().expect("tmp");
    dedup_all(&Storage::new(), &docs_dir(), w.path(), &Config::default());
    for stem in ["a", "b", "c"] {
        assert_eq!(
            storage
                .read(&base.join(&format!("cl/{stem}.dups")))
                .expect("dups"),
            std::fs::read(w.path().join(format!("clusters/{stem}.dups"))).expect("local dups"),
            "{stem}"
        );
    }
    let remote =
        pipeline::shard::read_all_documents(&storage, &base.join("out/a.parquet")).expect("read");
    let local =
        pipeline::shard::read_all_documents(&Storage::new(), &loc(&w.path().join("out/a.parquet")))
            .expect("read");
    assert_eq!(
        remote.iter().map(|d| &d.id).collect::<Vec<_>>(),
        local.iter().map(|d| &d.id).collect::<Vec<_>>()
    );
}
