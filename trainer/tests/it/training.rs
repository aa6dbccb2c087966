//! Training end to end through `mill-train`: exact resume after SIGKILL, two ranks
//! against one, bf16 with f32 masters, and the export read back by `transformers`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pipeline::tokens::{MANIFEST, Manifest};
use pipeline::{Location, Storage};
use tch::Tensor;

use crate::{final_weights, phrase_corpus};

/// A run's TOML for `mill-train`: the tiny preset, one layer unless `model` says more.
fn run_toml(dir: &Path, name: &str, steps: u64, micro: usize, extra: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let model = if extra.contains("[model]") {
        extra.to_string()
    } else {
        format!("{extra}\n[model]\nlayers = 1\n")
    };
    std::fs::write(
        &path,
        format!(
            "preset = \"tiny\"\ncheckpoint_every = 100\nkeep = 2\nlog_every = 1\neval_every = 0\nthreads = 1\n\
             {model}\n[data]\nseq_len = 16\nvalidation_share = 0.0\n\
             [train]\nsteps = {steps}\nmicro_batch = {micro}\n\
             [train.schedule]\nlr = 0.003\nmin_lr = 0.0003\nwarmup_steps = 20\ntotal_steps = {steps}\n"
        ),
    )
    .expect("config");
    path
}

fn mill_train(shards: &Path, ckpt: &Path, config: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mill-train"));
    c.arg("--shards")
        .arg(shards)
        .arg("--checkpoints")
        .arg(ckpt)
        .arg("--config")
        .arg(config)
        .args(["--log-format", "json", "--device", "cpu"])
        .env_remove("WORLD_SIZE")
        .env_remove("SLURM_NTASKS");
    c
}

fn succeed(mut c: Command) -> String {
    let out = c.output().expect("run mill-train");
    assert!(
        out.status.success(),
        "mill-train failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn latest_step(ckpt: &Path) -> u64 {
    std::fs::read_to_string(ckpt.join("latest"))
        .ok()
        .and_then(|s| s.trim().strip_prefix("step-")?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn two_thousand_steps_killed_and_resumed_end_bit_identical() {
    let shards = tempfile::tempdir().expect("tmp");
    phrase_corpus(shards.path(), 16);
    let work = tempfile::tempdir().expect("tmp");
    let config = run_toml(work.path(), "run", 2000, 2, "");
    let (a, b) = (work.path().join("a"), work.path().join("b"));
    succeed(mill_train(shards.path(), &a, &config));
    // The same run, killed with SIGKILL once a few checkpoints exist, then resumed.
    let mut child = mill_train(shards.path(), &b, &config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let started = Instant::now();
    while latest_step(&b) < 500 {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no checkpoint at step 500"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "finished before the kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let killed_at = latest_step(&b);
    assert!(killed_at < 2000, "killed too late: {killed_at}");
    let mut resume = mill_train(shards.path(), &b, &config);
    resume.arg("--resume");
    let lines = succeed(resume);
    let first: serde_json::Value =
        serde_json::from_str(lines.lines().next().expect("a line")).expect("json");
    assert_eq!(
        first["step"].as_u64(),
        Some(killed_at),
        "resumed at the checkpoint"
    );
    let (wa, wb) = (final_weights(&a), final_weights(&b));
    assert_eq!(wa.len(), wb.len());
    for ((na, ta), (nb, tb)) in wa.iter().zip(&wb) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "{na} differs after SIGKILL and resume");
    }
    // The recorded loss curves are whole and equal: every step once.
    let storage = Storage::new();
    let curve = |d: &Path| {
        trainer::checkpoint::read_metrics(&storage, &Location::Local(d.to_path_buf()))
            .expect("metrics")
    };
    let (ca, cb) = (curve(&a), curve(&b));
    assert_eq!(ca.len(), 2000);
    assert!(ca.iter().enumerate().all(|(i, r)| r.step == i as u64));
    let losses = |c: &[trainer::StepRecord]| c.iter().map(|r| r.loss).collect::<Vec<_>>();
    assert_eq!(losses(&ca), losses(&cb));
    let (head, tail) = (&ca[..50], &ca[1950..]);
    let mean = |r: &[trainer::StepRecord]| r.iter().map(|x| x.loss).sum::<f64>() / r.len() as f64;
    eprintln!(
        "2,000 steps: loss {:.3} -> {:.3}; killed after checkpoint {killed_at}, resumed bit-identical",
        mean(head),
        mean(tail)
    );
}

#[test]
fn two_ranks_match_one_rank_at_twice_the_micro_batch() {
    let shards = tempfile::tempdir().expect("tmp");
    phrase_corpus(shards.path(), 16);
    let work = tempfile::tempdir().expect("tmp");
    let steps = 30;
    let one = work.path().join("one");
    succeed(mill_train(
        shards.path(),
        &one,
        &run_toml(work.path(), "one", steps, 4, ""),
    ));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let two = work.path().join("two");
    let config = run_toml(work.path(), "two", steps, 2, "");
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            mill_train(shards.path(), &two, &config)
                .env("WORLD_SIZE", "2")
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a rank")
        })
        .collect();
    let outputs: Vec<_> = ranks
        .into_iter()
        .map(|c| c.wait_with_output().expect("rank"))
        .collect();
    for (r, o) in outputs.iter().enumerate() {
        assert!(
            o.status.success(),
            "rank {r}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Rank 0 reports and checkpoints; rank 1 only trains.
    assert_eq!(
        String::from_utf8_lossy(&outputs[0].stdout).lines().count(),
        steps as usize
    );
    assert_eq!(outputs[1].stdout.len(), 0);
    let (w1, w2) = (final_weights(&one), final_weights(&two));
    let mut worst = 0f64;
    for ((n1, t1), (n2, t2)) in w1.iter().zip(&w2) {
        assert_eq!(n1, n2);
        let d = (t1 - t2).abs().max().double_value(&[]);
        worst = worst.max(d);
    }
    eprintln!("2 ranks vs 1 rank after {steps} steps: largest weight difference {worst:.2e}");
    assert!(worst < 1e-4, "weights differ by {worst}");
    // Same losses, as the mean over the ranks.
    let storage = Storage::new();
    let curve = |d: &Path| {
        trainer::checkpoint::read_metrics(&storage, &Location::Local(d.to_path_buf()))
            .expect("metrics")
    };
    for (a, b) in curve(&one).iter().zip(curve(&two).iter()) {
        assert!(
            (a.loss - b.loss).abs() < 1e-4,
            "step {}: {} vs {}",
            a.step,
            a.loss,
            b.loss
        );
        assert_eq!(a.tokens, b.tokens);
    }
}

#[test]
fn bf16_compute_keeps_f32_masters_and_learns() {
    let shards = tempfile::tempdir().expect("tmp");
    let (corpus, model) = phrase_corpus(shards.path(), 16);
    let work = tempfile::tempdir().expect("tmp");
    let train = trainer::TrainConfig {
        steps: 60,
        micro_batch: 4,
        global_batch_tokens: 4 * 16 * 2,
        precision: trainer::Precision::Bf16,
        schedule: trainer::schedule::Schedule {
            lr: 3e-3,
            min_lr: 3e-4,
            warmup_steps: 5,
            total_steps: 60,
        },
        ..trainer::TrainConfig::default()
    };
    let ckpt = trainer::Checkpoints {
        storage: Storage::new(),
        dir: Location::Local(work.path().to_path_buf()),
        every: 60,
        keep: 1,
        resume: false,
    };
    let records = trainer::train_steps(corpus, &model, &train, Some(&ckpt)).expect("train");
    // The global batch in tokens made two micro-batches a step.
    assert!(records.iter().all(|r| r.tokens == 4 * 16 * 2));
    let mean = |r: &[trainer::StepRecord]| r.iter().map(|x| x.loss).sum::<f64>() / r.len() as f64;
    let (first, last) = (mean(&records[..5]), mean(&records[55..]));
    assert!(last < 0.7 * first, "bf16: loss {first:.3} -> {last:.3}");
    for (name, t) in final_weights(work.path()) {
        assert_eq!(t.kind(), tch::Kind::Float, "{name} saved as {:?}", t.kind());
    }
    eprintln!("bf16 on CPU: loss {first:.3} -> {last:.3} in 60 steps");
    // A global batch that micro-batches cannot make is refused.
    let bad = trainer::TrainConfig {
        global_batch_tokens: 100,
        ..train
    };
    let err = trainer::train_steps(phrase_corpus(shards.path(), 16).0, &model, &bad, None)
        .expect_err("indivisible batch");
    assert!(err.to_string().contains("global_batch_tokens 100"), "{err}");
}

/// A word-level `tokenizer.json` of `n` entries (`<|endoftext|>`, then `w1`, `w2`, …).
fn word_tokenizer(n: usize) -> String {
    let vocab: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            let word = if i == 0 {
                "<|endoftext|>".to_string()
            } else {
                format!("w{i}")
            };
            (word, i.into())
        })
        .collect();
    serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<|endoftext|>"},
    })
    .to_string()
}

#[test]
fn exported_checkpoints_give_transformers_our_logits() {
    let python = std::env::var("VIRTUAL_ENV")
        .map(|v| PathBuf::from(v).join("bin/python"))
        .expect("VIRTUAL_ENV: run `eval \"$(trainer/setup-torch.sh)\"` first (it installs transformers)");
    let shards = tempfile::tempdir().expect("tmp");
    phrase_corpus(shards.path(), 16);
    // The shards' manifest names a real tokenizer (and its hash).
    let tokenizer = word_tokenizer(128);
    let tok_path = shards.path().join("tokenizer.json");
    std::fs::write(&tok_path, &tokenizer).expect("tokenizer");
    let mut manifest: Manifest =
        serde_json::from_slice(&std::fs::read(shards.path().join(MANIFEST)).expect("manifest"))
            .expect("manifest json");
    manifest.tokenizer = tok_path.to_string_lossy().into_owned();
    manifest.tokenizer_sha256 = pipeline::cli::sha256_hex(tokenizer.as_bytes());
    manifest.vocab_size = 128;
    std::fs::write(
        shards.path().join(MANIFEST),
        serde_json::to_vec_pretty(&manifest).expect("json"),
    )
    .expect("manifest");
    let work = tempfile::tempdir().expect("tmp");
    let storage = Storage::new();
    // Tied embeddings with grouped-query attention, and an untied output projection.
    for (name, model) in [
        ("tied", "[model]\nlayers = 2\n"),
        (
            "untied",
            "[model]\nlayers = 2\nkv_heads = 4\ntie_embeddings = false\n",
        ),
    ] {
        let ckpt = work.path().join(format!("ckpt-{name}"));
        succeed(mill_train(
            shards.path(),
            &ckpt,
            &run_toml(work.path(), name, 20, 4, model),
        ));
        let out = work.path().join(format!("hf-{name}"));
        let mut export = Command::new(env!("CARGO_BIN_EXE_mill-train"));
        export.arg("export").arg(&ckpt).arg(&out);
        succeed(export);
        // Our logits on a fixed input, from the same checkpoint.
        let at =
            trainer::export::resolve(&storage, &Location::Local(ckpt.clone())).expect("latest");
        let loaded = trainer::checkpoint::load(&storage, &at).expect("load");
        let (_vs, net) =
            trainer::export::model(&loaded, &at.to_string(), tch::Device::Cpu).expect("model");
        let ids: Vec<i64> = (0..24).map(|i| (i * 37 + 5) % 128).collect();
        let ids = Tensor::from_slice(&ids).view([2, 12]);
        let logits = tch::no_grad(|| net.forward(&ids)).expect("forward");
        let ours = work.path().join(format!("ours-{name}.safetensors"));
        Tensor::write_safetensors(&[("ids", ids), ("logits", logits)], &ours).expect("save");
        let out = Command::new(&python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hf_check.py"))
            .arg(work.path().join(format!("hf-{name}")))
            .arg(&ours)
            .output()
            .expect("run python");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: transformers disagrees: {report}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(report.trim()).expect("report");
        assert_eq!(v["logits_shape"], serde_json::json!([2, 12, 128]));
        assert_eq!(v["tokenizer_ids"], serde_json::json!([1, 2, 3]));
        assert_eq!(v["eos_token_id"], serde_json::json!(0));
        assert_eq!(v["tied"].as_bool(), Some(name == "tied"));
        eprintln!(
            "{name}: transformers' logits within {} of ours",
            v["max_abs_diff"]
        );
        // Multiple-choice log-likelihoods as lm-eval-harness takes them, one of them past
        // the model's 256 positions (cut from the left).
        let ids = |n: usize, k: usize| -> Vec<u32> {
            (0..n)
                .map(|i| ((i * 31 + k * 7) % 127 + 1) as u32)
                .collect()
        };
        let pairs: Vec<(Vec<u32>, Vec<u32>)> = vec![
            (ids(5, 1), ids(1, 2)),
            (ids(12, 3), ids(4, 4)),
            (vec![0], ids(6, 5)),
            (ids(300, 6), ids(3, 7)),
        ];
        let scored: Vec<serde_json::Value> = pairs
            .iter()
            .map(|(c, x)| {
                let ll = trainer::tasks::loglikelihood(&net, c, x, tch::Device::Cpu)
                    .expect("loglikelihood");
                serde_json::json!([c, x, ll])
            })
            .collect();
        let file = work.path().join(format!("pairs-{name}.json"));
        std::fs::write(&file, serde_json::json!({ "pairs": scored }).to_string()).expect("pairs");
        let out = Command::new(&python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tasks_check.py"))
            .arg(work.path().join(format!("hf-{name}")))
            .arg(&file)
            .output()
            .expect("run python");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: transformers' log-likelihoods disagree: {report}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{name}: multiple-choice log-likelihoods {}", report.trim());
    }
}

#[test]
fn a_stalled_run_writes_a_note_and_exits_for_a_retry() {
    let work = tempfile::tempdir().expect("tmp");
    // Shards whose manifest is a pipe nobody writes: reading it never ends, as with an
    // object store that stops answering.
    let shards = work.path().join("shards");
    std::fs::create_dir_all(&shards).expect("dir");
    let made = Command::new("mkfifo")
        .arg(shards.join("manifest.json"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let ckpt = work.path().join("ckpt");
    let started = Instant::now();
    let out = mill_train(&shards, &ckpt, &run_toml(work.path(), "stall", 10, 2, ""))
        .args(["--stall-timeout", "1"])
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stalled"));
    let notes: Vec<_> = std::fs::read_dir(ckpt.join("stalls"))
        .expect("a stalls folder")
        .filter_map(|e| e.ok())
        .collect();
    assert_eq!(notes.len(), 1);
    let note: serde_json::Value =
        serde_json::from_slice(&std::fs::read(notes[0].path()).expect("note")).expect("json");
    assert_eq!(note["rank"], 0);
    assert_eq!(note["steps_done_this_run"], 0);
}
