//! The clusters phase in rounds ([`dedup::components`]) on planted corpora
//! ([`dedup::planted`]): every planted cluster becomes one component with its smallest
//! document kept; the rounds write the one-unit union-find's bytes whatever the task
//! count, tasks run one after another or at once; the unit conformance (resume after a
//! crash, rerun, threads) holds.

use std::path::Path;

use dedup::Config;
use dedup::planted::Planted;
use pipeline::testing::{UnitConformance, check_units, snapshot};
use pipeline::{Location, RunOptions, Storage};

use crate::{loc, opts, phase_command};

/// Writes a planted corpus's signatures and runs the buckets phase; returns the pairs
/// folder.
fn planted_pairs(
    storage: &Storage,
    work: &Path,
    planted: &Planted,
    config: &Config,
) -> std::path::PathBuf {
    let (sig, bk) = (work.join("sig"), work.join("bk"));
    planted
        .write(storage, &loc(&sig), config)
        .expect("write signatures");
    dedup::buckets::buckets(storage, &opts(&sig, &bk), config, None).expect("buckets");
    bk
}

fn check_truth(storage: &Storage, planted: &Planted, clusters: &Path) {
    let keepers = planted.keepers();
    for f in 0..planted.files() {
        let got = dedup::dups::read_dups(storage, &loc(clusters), &format!("part-{f:06}"))
            .expect("removal list");
        assert_eq!(got, planted.expected(&keepers, f), "input {f}");
    }
    let s = dedup::clusters::read_summary(storage, &loc(clusters)).expect("summary");
    assert_eq!(s.clusters, planted.clusters.len() as u64);
    assert_eq!(
        s.removed,
        planted.clustered() - planted.clusters.len() as u64
    );
}

/// Only the results: the rounds' own folder is gone once they are done.
fn results(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut s = snapshot(dir);
    s.retain(|k, _| !k.starts_with("_done/") && !k.starts_with("_rounds/"));
    s
}

#[test]
fn planted_clusters_in_rounds_equal_the_union_find_whatever_the_tasks() {
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let config = Config::default();
    let planted = Planted::standard(1_000_000, 20_000, config.bands, 11);
    let bk = planted_pairs(&storage, work.path(), &planted, &config);
    // One unit: the union-find.
    let uf = work.path().join("uf");
    dedup::clusters::clusters(&storage, &opts(&bk, &uf), &config).expect("union-find");
    check_truth(&storage, &planted, &uf);
    assert!(!uf.join("_rounds").exists());
    // Rounds: 2 MiB per unit makes several partitions and input groups.
    let small = Config {
        clusters_memory_bytes: 2 << 20,
        ..config.clone()
    };
    let one = work.path().join("rounds-1");
    let report = dedup::clusters::clusters(&storage, &opts(&bk, &one), &small).expect("rounds");
    assert_eq!(report.processed, vec!["clusters".to_string()]);
    assert!(
        report.stats.bytes_out > 0,
        "the rounds' bytes are in the stats"
    );
    assert_eq!(results(&uf), results(&one), "rounds vs union-find");
    assert!(
        !one.join("_rounds").exists() || snapshot(&one.join("_rounds")).is_empty(),
        "the rounds' files are deleted"
    );
    // Three tasks one after another (as `mill run` runs them): the first does it all.
    let seq = work.path().join("rounds-seq");
    for task in 0..3 {
        let o = RunOptions {
            tasks: 3,
            task,
            ..opts(&bk, &seq)
        };
        dedup::clusters::clusters(&storage, &o, &small).expect("task");
    }
    assert_eq!(results(&uf), results(&seq), "3 tasks in turn vs union-find");
    // Four tasks at once, one thread each (as a fleet runs them): they share the units.
    let par = work.path().join("rounds-par");
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|task| {
                let (storage, small, bk, par) = (&storage, &small, &bk, &par);
                s.spawn(move || {
                    let o = RunOptions {
                        tasks: 4,
                        task,
                        threads: 1,
                        ..opts(bk, par)
                    };
                    dedup::clusters::clusters(storage, &o, small)
                })
            })
            .collect();
        for h in handles {
            h.join().expect("task thread").expect("task");
        }
    });
    assert_eq!(results(&uf), results(&par), "4 tasks at once vs union-find");
    check_truth(&storage, &planted, &par);
}

#[test]
fn clusters_in_rounds_conform() {
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let file = work.path().join("dedup.toml");
    std::fs::write(&file, "clusters_memory_bytes = 65536\n").expect("config");
    let config = Config {
        clusters_memory_bytes: 65536,
        ..Config::default()
    };
    let planted = Planted::standard(30_000, 3_000, config.bands, 5);
    let bk = planted_pairs(&storage, work.path(), &planted, &config);
    let none: Vec<String> = Vec::new();
    let file = file.to_string_lossy().to_string();
    let command = phase_command("clusters", &file, &none);
    check_units(&UnitConformance {
        run: &|o| dedup::clusters::clusters(&storage, o, &config),
        input: bk.clone(),
        command: Some(&command),
        run_records: &[],
    });
    let out = work.path().join("out");
    dedup::clusters::clusters(&storage, &opts(&bk, &out), &config).expect("rounds");
    check_truth(&storage, &planted, &out);
}

#[test]
fn a_removed_document_names_its_keeper() {
    // The filter's rejected output says what each dropped document matched.
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let docs = work.path().join("docs");
    std::fs::create_dir_all(&docs).expect("dir");
    let text = "the quick brown fox jumps over the lazy dog and keeps running far into the green hills beyond the old river";
    std::fs::write(
        docs.join("a.jsonl"),
        format!(
            "{{\"id\":\"a0\",\"text\":\"{text}\"}}\n{{\"id\":\"a1\",\"text\":\"something else entirely written here for the test of keepers\"}}\n"
        ),
    )
    .expect("a");
    std::fs::write(
        docs.join("b.jsonl"),
        format!("{{\"id\":\"b0\",\"text\":\"{text}\"}}\n"),
    )
    .expect("b");
    let config = Config {
        batch_docs: 4,
        ..Config::default()
    };
    let (sig, bk, cl, out) = (
        work.path().join("sig"),
        work.path().join("bk"),
        work.path().join("cl"),
        work.path().join("out"),
    );
    dedup::signatures::signatures(&storage, &opts(&docs, &sig), &config).expect("signatures");
    dedup::buckets::buckets(&storage, &opts(&sig, &bk), &config, None).expect("buckets");
    dedup::clusters::clusters(&storage, &opts(&bk, &cl), &config).expect("clusters");
    let step = dedup::filter::step(&storage, &config, &cl.to_string_lossy()).expect("step");
    let o = RunOptions {
        keep_rejected: true,
        ..opts(&docs, &out)
    };
    pipeline::run(&step, &storage, &o).expect("filter");
    use arrow_array::Array;
    let shard = Location::Local(out.join("_rejected/b.parquet"));
    let meta = storage.head(&shard).expect("head").expect("rejected shard");
    let reader = pipeline::shard::ParquetReader::open(&storage, &meta, "", 1024)
        .expect("open")
        .expect("parquet");
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        let carry = batch
            .carry
            .expect("stage columns come back as carried columns");
        let text = |name: &str| {
            carry
                .column_by_name(name)
                .unwrap_or_else(|| panic!("no column {name}"))
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .expect("string")
                .clone()
        };
        let int = |name: &str| {
            carry
                .column_by_name(name)
                .unwrap_or_else(|| panic!("no column {name}"))
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .expect("int64")
                .clone()
        };
        let (input, row, keeper, id, size) = (
            text("minhash_keeper_input"),
            int("minhash_keeper_row"),
            text("minhash_keeper_id"),
            int("minhash_cluster_id"),
            int("minhash_cluster_size"),
        );
        for (i, d) in batch.docs.into_iter().enumerate() {
            assert!(input.is_valid(i) && row.is_valid(i) && keeper.is_valid(i));
            rows.push((
                d.id,
                keeper.value(i).to_string(),
                input.value(i).to_string(),
                row.value(i),
                id.value(i),
                size.value(i),
            ));
        }
    }
    assert_eq!(
        rows,
        vec![(
            "b0".to_string(),
            "a0".to_string(),
            "a".to_string(),
            0,
            1i64 << 32,
            2
        )]
    );
}
