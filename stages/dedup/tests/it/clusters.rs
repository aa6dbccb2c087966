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
    let rows: Vec<_> = rejected(&storage, &out.join("_rejected/b.parquet"))
        .into_iter()
        .map(|r| {
            (
                r.id,
                r.keeper_id.expect("keeper id"),
                r.input,
                r.row.expect("row"),
                r.cluster,
                r.size,
            )
        })
        .collect();
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

/// What a rejected document says it matched.
#[derive(Debug)]
struct Rejected {
    id: String,
    keeper_id: Option<String>,
    input: String,
    row: Option<i64>,
    cluster: i64,
    size: i64,
}

/// The rejected documents of one MinHash filter shard.
fn rejected(storage: &Storage, shard: &Path) -> Vec<Rejected> {
    use arrow_array::Array;
    let shard = Location::Local(shard.to_path_buf());
    let meta = storage.head(&shard).expect("head").expect("rejected shard");
    let reader = pipeline::shard::ParquetReader::open(storage, &meta, "", 1024)
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
            rows.push(Rejected {
                id: d.id,
                keeper_id: keeper.is_valid(i).then(|| keeper.value(i).to_string()),
                input: input.value(i).to_string(),
                row: row.is_valid(i).then(|| row.value(i)),
                cluster: id.value(i),
                size: size.value(i),
            });
        }
    }
    rows
}

/// A text of `words` words from a vocabulary of 5,000, one per `seed`: texts of different
/// seeds share almost no 5-word shingles.
fn text(seed: u64, words: usize) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..words)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Letters only: normalisation folds digits.
            let w = x % 5000;
            let l = |v: u64| char::from(b'a' + (v % 26) as u8);
            format!("{}{}{}", l(w), l(w / 26), l(w / 676))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn clusters_that_match_the_index_keep_their_own_size_and_name_the_run() {
    // Two earlier batches become the index, one run each. Batch 2 holds 10 documents
    // that match it alone, 5 pairs of copies that match it, 70 pairs of new copies and
    // 10 new documents, its buckets cut into 112 tasks (eight hash ranges per band). Each
    // cluster that matches the index is removed whole, names the index run it matched
    // and keeps its own size (the match counts as one): none is merged with another
    // through a run. The union-find and the rounds write the same bytes.
    let storage = Storage::new();
    let work = tempfile::tempdir().expect("tmp");
    let w = work.path();
    let line =
        |id: &str, seed: u64| format!("{{\"id\":\"{id}\",\"text\":\"{}\"}}\n", text(seed, 80));
    let b2 = w.join("batch2");
    std::fs::create_dir_all(&b2).expect("dir");
    let mut files = vec![String::new(), String::new(), String::new()];
    let mut n = 0;
    let mut put = |files: &mut Vec<String>, id: String, seed: u64| {
        files[n % 3].push_str(&line(&id, seed));
        n += 1;
    };
    for i in 0..10 {
        put(&mut files, format!("alone{i}"), i);
    }
    for i in 10..15 {
        put(&mut files, format!("twin{i}a"), i);
        put(&mut files, format!("twin{i}b"), i);
    }
    for i in 100..170 {
        put(&mut files, format!("new{i}a"), i);
        put(&mut files, format!("new{i}b"), i);
    }
    for i in 200..210 {
        put(&mut files, format!("unique{i}"), i);
    }
    for (f, body) in files.iter().enumerate() {
        std::fs::write(b2.join(format!("p{f}.jsonl")), body).expect("batch 2");
    }
    let config = Config::default();
    let index = w.join("index");
    let index_runs = || -> std::collections::BTreeSet<String> {
        std::fs::read_dir(index.join("000"))
            .expect("index runs")
            .filter_map(|e| {
                let name = e.expect("entry").file_name().to_string_lossy().to_string();
                name.strip_suffix(".run").map(str::to_string)
            })
            .collect()
    };
    // Earlier batch A holds old0..old7, batch B old8..old14: one index run each.
    let mut run_of = Vec::new();
    for (batch, seeds) in [("a", 0..8u64), ("b", 8..15u64)] {
        let (dir, run) = (
            w.join(format!("batch-{batch}")),
            w.join(format!("run-{batch}")),
        );
        std::fs::create_dir_all(&dir).expect("dir");
        let body: String = seeds.map(|i| line(&format!("old{i}"), i)).collect();
        std::fs::write(dir.join("old.jsonl"), body).expect("earlier batch");
        let (sig1, bk1, cl1) = (run.join("sig"), run.join("bk"), run.join("cl"));
        dedup::signatures::signatures(&storage, &opts(&dir, &sig1), &config).expect("signatures");
        dedup::buckets::buckets(&storage, &opts(&sig1, &bk1), &config, None).expect("buckets");
        dedup::clusters::clusters(&storage, &opts(&bk1, &cl1), &config).expect("clusters");
        let before = if index.exists() {
            index_runs()
        } else {
            Default::default()
        };
        dedup::index::index(&storage, &opts(&sig1, &index), &config, &loc(&cl1)).expect("index");
        let new: Vec<String> = index_runs().difference(&before).cloned().collect();
        assert_eq!(new.len(), 1, "one new run per batch");
        run_of.push(format!("index:{}", new[0]));
    }
    let run_of = |seed: u64| run_of[usize::from(seed >= 8)].as_str();

    let (sig, bk) = (w.join("sig"), w.join("bk"));
    dedup::signatures::signatures(&storage, &opts(&b2, &sig), &config).expect("signatures");
    let tasks = 8 * config.bands;
    for task in 0..tasks {
        let o = RunOptions {
            tasks,
            task,
            ..opts(&sig, &bk)
        };
        dedup::buckets::buckets(&storage, &o, &config, Some(&loc(&index))).expect("buckets");
    }
    let uf = w.join("uf");
    dedup::clusters::clusters(&storage, &opts(&bk, &uf), &config).expect("union-find");
    let summary = dedup::clusters::read_summary(&storage, &loc(&uf)).expect("summary");
    assert_eq!(
        (
            summary.clusters,
            summary.removed,
            summary.matched_index,
            summary.largest
        ),
        (85, 90, 20, 3),
        "{summary:?}"
    );
    assert_eq!(
        summary.sizes,
        std::collections::BTreeMap::from([(2, 80), (3, 5)])
    );
    let small = Config {
        clusters_memory_bytes: 64 << 10,
        ..config.clone()
    };
    assert!(
        summary.pairs * dedup::components::UNION_FIND_BYTES_PER_PAIR > small.clusters_memory_bytes
    );
    let rounds = w.join("rounds");
    dedup::clusters::clusters(&storage, &opts(&bk, &rounds), &small).expect("rounds");
    assert_eq!(results(&uf), results(&rounds), "rounds vs union-find");

    let step = dedup::filter::step(&storage, &config, &uf.to_string_lossy()).expect("step");
    let out = w.join("out");
    let o = RunOptions {
        keep_rejected: true,
        ..opts(&b2, &out)
    };
    pipeline::run(&step, &storage, &o).expect("filter");
    let mut all = Vec::new();
    for f in 0..3 {
        all.extend(rejected(
            &storage,
            &out.join(format!("_rejected/p{f}.parquet")),
        ));
    }
    assert_eq!(all.len(), 90);
    let by_id: std::collections::HashMap<&str, &Rejected> =
        all.iter().map(|r| (r.id.as_str(), r)).collect();
    for i in 0..10 {
        let r = by_id[format!("alone{i}").as_str()];
        assert_eq!(
            (r.input.as_str(), r.size, r.keeper_id.as_deref(), r.row),
            (run_of(i), 2, None, None)
        );
    }
    for i in 10..15 {
        let (a, b) = (
            by_id[format!("twin{i}a").as_str()],
            by_id[format!("twin{i}b").as_str()],
        );
        assert_eq!((a.input.as_str(), a.size), (run_of(i), 3));
        assert_eq!((b.input.as_str(), b.size), (run_of(i), 3));
        assert_eq!(a.cluster, b.cluster, "one cluster id for both copies");
    }
    let twins: std::collections::BTreeSet<i64> = (10..15)
        .map(|i| by_id[format!("twin{i}a").as_str()].cluster)
        .collect();
    assert_eq!(twins.len(), 5, "clusters that match one run stay apart");
    for i in 100..170 {
        // The copy in the earlier input is kept (inputs are sorted by name).
        let (a, b) = (format!("new{i}a"), format!("new{i}b"));
        let (gone, kept) = if by_id.contains_key(a.as_str()) {
            (a, b)
        } else {
            (b, a)
        };
        let r = by_id[gone.as_str()];
        assert_eq!((r.keeper_id.as_deref(), r.size), (Some(kept.as_str()), 2));
    }
}
