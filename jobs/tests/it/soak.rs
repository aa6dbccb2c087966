//! The soak (`scripts/bench-soak.sh`; skipped by the test run): the whole fixture
//! pipeline on the loopback S3 server behind the fault-injecting proxy (errors,
//! connection resets, bodies cut short, bodies that trickle), while the running
//! `mill run` is killed with SIGKILL (its whole process group, as a lost machine) every
//! `TOKENMILL_SOAK_KILL_EVERY` seconds (30) on the clock and started again, round after round for
//! `TOKENMILL_SOAK_SECONDS` (600). Each round's shards must equal a clean run's; the
//! memory and open files of the task are sampled every second and must stay bounded.

#[path = "../../../pipeline/tests/it/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pipeline::storage::Location;

use super::{mill, model_present, outputs, outputs_at, pipeline_at, root};
use proxy::{Faults, Proxy};

/// Stated bounds on one task (the `mill run` process and its children together).
const RSS_BOUND_MIB: u64 = 3072;
const FD_BOUND: u64 = 1024;

/// Copies of the fixture crawl in the soak's input.
const COPIES: usize = 4;

fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The processes of group `pgid`: their summed RSS (MiB) and open files.
fn sample_group(pgid: u32) -> (u64, u64) {
    let (mut rss_kib, mut fds) = (0u64, 0u64);
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return (0, 0);
    };
    for p in procs.flatten() {
        let name = p.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state, ppid, pgrp, …
        let group = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|g| g.parse::<u32>().ok());
        if group != Some(pgid) {
            continue;
        }
        if let Ok(status) = std::fs::read_to_string(p.path().join("status")) {
            rss_kib += status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
        fds += std::fs::read_dir(p.path().join("fd")).map_or(0, |d| d.count() as u64);
    }
    (rss_kib / 1024, fds)
}

/// SIGKILL to the child's process group (its pid: it was started as a group leader).
/// `-s KILL -- -<group>`: procps-ng 4.0's `kill -KILL -<group>` signals every process
/// the caller may signal, as `kill -1` would (seen here: it took the machine's shell).
fn kill_group(child: &mut Child) {
    let pgid = child.id();
    assert!(pgid > 1, "process group {pgid}");
    let _ = std::process::Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{pgid}")])
        .status();
    let _ = child.wait();
}

#[test]
#[ignore = "a 10-minute soak: scripts/bench-soak.sh"]
fn soak_under_faults_and_kills() {
    assert!(model_present(), "the soak needs lid.176");
    let seconds = env_secs("TOKENMILL_SOAK_SECONDS", 600);
    let kill_every = Duration::from_secs(env_secs("TOKENMILL_SOAK_KILL_EVERY", 30));
    let Some((storage, endpoint, bucket)) = pipeline::testing::s3_bucket("tm-soak") else {
        panic!("the soak needs the S3 test server (scripts/bench-soak.sh starts it)");
    };
    let base = Location::parse(&format!("s3://{bucket}/")).expect("address");
    // The fixture crawl four times over (other names, so other documents' ids), on
    // disk for the clean run and in the bucket for the soak: a round lasts long
    // enough for kills to land in every step.
    let dir = tempfile::tempdir().expect("tmp");
    let local_input = dir.path().join("crawl");
    std::fs::create_dir_all(&local_input).expect("input folder");
    for entry in std::fs::read_dir(root().join("fixtures/crawl")).expect("fixtures") {
        let p = entry.expect("entry").path();
        if p.is_file() {
            let name = p.file_name().expect("name").to_string_lossy().to_string();
            let bytes = std::fs::read(&p).expect("read");
            for copy in 0..COPIES {
                let name = format!("c{copy}-{name}");
                std::fs::write(local_input.join(&name), &bytes).expect("copy");
                storage
                    .put(&base.join(&format!("crawl/{name}")), &bytes)
                    .expect("upload");
            }
        }
    }
    let pipeline_file = |name: &str, input: &str, output: &str| {
        let text = std::fs::read_to_string(pipeline_at(dir.path(), output)).expect("read");
        let text = text.replace(
            "input = \"fixtures/crawl\"",
            &format!("input = \"{input}\""),
        );
        let f = dir.path().join(format!("{name}.toml"));
        std::fs::write(&f, text).expect("write");
        f.to_string_lossy().to_string()
    };
    let clean = dir.path().join("clean");
    let f = pipeline_file(
        "clean",
        &local_input.to_string_lossy(),
        &clean.to_string_lossy(),
    );
    super::ok(mill(&["run", &f]).output().expect("run"), "clean run");
    let expected = outputs(&clean);
    assert!(!expected.is_empty());

    // 5% of requests fail (SlowDown, a reset connection, a body cut short) and 5%
    // more trickle.
    let faults = Faults {
        slow_down: 0.02,
        drop: 0.015,
        cut_body: 0.015,
        slow_body: 0.05,
    };
    let upstream = endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("endpoint port");
    let proxy = Proxy::start(upstream, faults, 7);
    let log_path = dir.path().join("soak.log");

    let start = Instant::now();
    // Kills land on the clock, whichever attempt of whichever round is running.
    let mut next_kill = start + kill_every;
    let (mut rounds, mut kills, mut restarts, mut failed) = (0u64, 0u64, 0u64, 0u64);
    let (mut peak_rss, mut peak_fds) = (0u64, 0u64);
    while start.elapsed() < Duration::from_secs(seconds) {
        let run = format!("s3://{bucket}/soak-{rounds}");
        let f = pipeline_file(
            &format!("soak-{rounds}"),
            &format!("s3://{bucket}/crawl/"),
            &run,
        );
        let mut attempts = 0;
        loop {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .expect("log");
            let mut child = mill(&["run", &f])
                .env("AWS_ENDPOINT_URL", proxy.endpoint())
                .env("RUST_LOG", "warn,pipeline::storage::s3=debug")
                .stdout(Stdio::null())
                .stderr(log)
                .process_group(0)
                .spawn()
                .expect("spawn mill run");
            attempts += 1;
            let status = loop {
                if let Some(status) = child.try_wait().expect("wait") {
                    break Some(status);
                }
                let (rss, fds) = sample_group(child.id());
                peak_rss = peak_rss.max(rss);
                peak_fds = peak_fds.max(fds);
                if Instant::now() >= next_kill {
                    kill_group(&mut child);
                    kills += 1;
                    next_kill += kill_every;
                    break None;
                }
                std::thread::sleep(Duration::from_millis(1000));
            };
            match status {
                Some(s) if s.success() => break,
                Some(_) => failed += 1,
                None => {}
            }
            restarts += 1;
            assert!(
                attempts < 50,
                "round {rounds}: no end after 50 attempts (log: {})",
                log_path.display()
            );
        }
        let got = outputs_at(&storage, &Location::parse(&run).expect("run"));
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "round {rounds}: other outputs"
        );
        assert!(got == expected, "round {rounds}: outputs differ");
        rounds += 1;
        println!(
            "soak: round {rounds} equal to the clean run after {attempts} attempts ({:.0} s in)",
            start.elapsed().as_secs_f64()
        );
    }
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let retries = log
        .lines()
        .filter(|l| l.contains("retrying transient S3 fault"))
        .count();
    let (slow_down, dropped, cut) = proxy.injected();
    let slowed = proxy
        .counts
        .slowed
        .load(std::sync::atomic::Ordering::SeqCst);
    let requests = proxy
        .counts
        .requests
        .load(std::sync::atomic::Ordering::SeqCst);
    println!(
        "soak: {:.0} s, {rounds} rounds each equal to a clean run; {kills} SIGKILLs, \
         {restarts} restarts ({failed} after a failed exit); {requests} S3 requests, \
         {slow_down} SlowDown, {dropped} reset, {cut} cut bodies, {slowed} slow bodies; \
         {retries} retries logged; peak task RSS {peak_rss} MiB, peak open files {peak_fds}",
        start.elapsed().as_secs_f64()
    );
    assert!(rounds > 0);
    assert!(peak_rss < RSS_BOUND_MIB, "peak RSS {peak_rss} MiB");
    assert!(peak_fds < FD_BOUND, "peak open files {peak_fds}");
}
