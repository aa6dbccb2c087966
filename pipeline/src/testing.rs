//! The conformance harness every stage's tests call.
//!
//! [`check`] runs a step over fixture inputs and asserts the contracts of DESIGN.md:
//! 1 thread and N threads write identical bytes; stats add up (records and bytes read
//! too, where a reader counts them) and match the rows
//! written; a rerun is a no-op; a broken input is counted, not fatal, and the other
//! inputs finish; a process killed mid-run (aborted at several points, and killed with
//! SIGKILL at a random moment) resumes to byte-identical output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::marker::{DONE_DIR, Marker, REJECTED_DIR, list_markers};
use crate::runner::{CRASH_AFTER_BATCHES, Report, RunOptions, Step, run};
use crate::shard::read_all_documents;
use crate::storage::{Location, Storage};

/// Builds the command that runs the step under test as its own process, given the
/// stage flags (`--input <dir> --output <dir> --threads <n> --log-format json`).
pub type CommandFactory<'a> = &'a dyn Fn(Vec<String>) -> Command;

/// What to check.
pub struct Conformance<'a> {
    /// Builds the step under test, the same way the binary does.
    pub step: &'a dyn Fn() -> Step,
    /// Good fixture inputs: relative path and bytes.
    pub inputs: Vec<(String, Vec<u8>)>,
    /// Truncated or corrupt inputs: each must end with at least one counted drop whose
    /// reason is listed here, and must not stop the run.
    pub broken: Vec<(String, Vec<u8>, &'static str)>,
    /// The binary, for the kill-and-resume checks (None skips them).
    pub command: Option<CommandFactory<'a>>,
}

impl std::fmt::Debug for Conformance<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conformance")
            .field("inputs", &self.inputs.len())
            .field("broken", &self.broken.len())
            .finish()
    }
}

/// Every file below `dir` (hidden ones too), with marker timings zeroed.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            // Start notes hold wall-clock times: not output (at any depth: a step may
            // keep markers of an inner phase in a subfolder).
            let folders: Vec<&str> = rel.split('/').collect();
            let folders = &folders[..folders.len().saturating_sub(1)];
            if folders.contains(&crate::marker::STARTED_DIR) {
                continue;
            }
            let mut bytes = std::fs::read(&path).unwrap_or_default();
            if folders.contains(&DONE_DIR)
                && let Ok(mut m) = serde_json::from_slice::<Marker>(&bytes)
            {
                m.stats.seconds = 0.0;
                for (_, secs) in &mut m.stats.stage_seconds {
                    *secs = 0.0;
                }
                bytes = serde_json::to_vec_pretty(&m).unwrap_or_default();
            }
            out.insert(rel, bytes);
        }
    }
    out
}

fn assert_same(what: &str, expected: &BTreeMap<String, Vec<u8>>, got: &BTreeMap<String, Vec<u8>>) {
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(expected), names(got), "{what}: different files");
    for (name, bytes) in expected {
        assert!(
            got.get(name) == Some(bytes),
            "{what}: {name} differs ({} vs {} bytes)",
            bytes.len(),
            got.get(name).map_or(0, Vec::len)
        );
    }
}

fn options(input: &Path, output: &Path, threads: usize) -> RunOptions {
    let mut o = RunOptions::new(
        Location::Local(input.to_path_buf()),
        Location::Local(output.to_path_buf()),
    );
    o.threads = threads;
    o
}

fn run_in_process(c: &Conformance<'_>, input: &Path, output: &Path, threads: usize) -> Report {
    let step = (c.step)();
    match run(&step, &Storage::new(), &options(input, output, threads)) {
        Ok(r) => r,
        Err(e) => panic!(
            "run with {threads} threads into {} failed: {e}",
            output.display()
        ),
    }
}

fn command(factory: CommandFactory<'_>, input: &Path, output: &Path) -> Command {
    let args = [
        "--input",
        &input.display().to_string(),
        "--output",
        &output.display().to_string(),
        "--threads",
        "2",
        "--log-format",
        "json",
    ]
    .map(str::to_string)
    .to_vec();
    let mut cmd = factory(args);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

/// Runs every conformance check; panics with a message naming the broken contract.
pub fn check(c: &Conformance<'_>) {
    let root = tempfile::tempdir().expect("temporary directory");
    let input = root.path().join("input");
    for (name, bytes) in &c.inputs {
        write(&input.join(name), bytes);
    }
    for (name, bytes, _) in &c.broken {
        write(&input.join(name), bytes);
    }
    let all = c.inputs.len() + c.broken.len();

    // 1 thread: everything processed, stats add up and match what was written.
    let one = root.path().join("one");
    let report = run_in_process(c, &input, &one, 1);
    assert_eq!(report.processed.len(), all, "every input is processed");
    check_markers(c, &one);
    let reference = snapshot(&one);

    // Many threads: identical bytes.
    let many = root.path().join("many");
    run_in_process(c, &input, &many, 4);
    assert_same("1 thread vs 4 threads", &reference, &snapshot(&many));

    // Rerun: a no-op.
    let again = run_in_process(c, &input, &one, 2);
    assert!(
        again.processed.is_empty(),
        "a rerun processes nothing, it redid {:?}",
        again.processed
    );
    assert_eq!(again.skipped.len(), all, "a rerun skips every input");
    assert_same("rerun", &reference, &snapshot(&one));

    let Some(factory) = c.command else { return };
    // The binary gives the same bytes as the library.
    let bin = root.path().join("bin");
    let status = command(factory, &input, &bin)
        .status()
        .expect("start the binary");
    assert!(status.success(), "the binary failed: {status}");
    assert_same("binary vs library", &reference, &snapshot(&bin));

    // Crash after k batches, for several k, then resume.
    let batches = reference.len().max(2);
    for k in [1, 2, batches / 2, batches] {
        let out = root.path().join(format!("crash-{k}"));
        let status = command(factory, &input, &out)
            .env(CRASH_AFTER_BATCHES, k.to_string())
            .status()
            .expect("start the binary");
        assert!(
            k > 1 || !status.success(),
            "the run did not crash after its first batch"
        );
        let status = command(factory, &input, &out)
            .status()
            .expect("start the binary");
        assert!(
            status.success(),
            "resume after a crash at batch {k} failed: {status}"
        );
        assert_same(
            &format!("resume after a crash at batch {k}"),
            &reference,
            &snapshot(&out),
        );
    }

    // SIGKILL at random moments of a real run, then resume.
    let started = Instant::now();
    let status = command(factory, &input, &root.path().join("timed"))
        .status()
        .expect("start the binary");
    assert!(status.success());
    let full = started.elapsed();
    let mut rng = fastrand::Rng::with_seed(7);
    for i in 0..3 {
        let out = root.path().join(format!("kill-{i}"));
        let mut child = command(factory, &input, &out)
            .spawn()
            .expect("start the binary");
        std::thread::sleep(full.mul_f64(rng.f64()));
        let _ = child.kill();
        let _ = child.wait();
        let status = command(factory, &input, &out)
            .status()
            .expect("start the binary");
        assert!(status.success(), "resume after SIGKILL failed: {status}");
        assert_same("resume after SIGKILL", &reference, &snapshot(&out));
    }
}

/// What to check of a step made of units ([`crate::runner::plan_units`]): a phase that
/// reads what earlier phases wrote, prepared by the caller in `input`.
pub struct UnitConformance<'a> {
    /// Runs one task of the step, as the binary does.
    pub run: &'a dyn Fn(&RunOptions) -> crate::Result<Report>,
    /// The step's input folder.
    pub input: PathBuf,
    /// The binary, for the crash-and-resume checks (None skips them).
    pub command: Option<CommandFactory<'a>>,
    /// Outputs that record the run rather than the result (wall time, peak memory,
    /// their own address): they must exist, their bytes are not compared.
    pub run_records: &'a [&'a str],
}

impl std::fmt::Debug for UnitConformance<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitConformance")
            .field("input", &self.input)
            .finish()
    }
}

/// The resume contract for steps made of units; panics naming the broken part: one
/// marker per unit with the unit's version, thread count does not change the bytes, a
/// rerun skips every unit and changes nothing, `--force` redoes every unit to the same
/// bytes, `--dry-run` writes nothing, the binary writes what the library writes, and a
/// crash after any unit followed by a rerun gives the same bytes.
pub fn check_units(c: &UnitConformance<'_>) {
    let root = tempfile::tempdir().expect("temporary directory");
    let snapshot = |dir: &Path| {
        let mut files = snapshot(dir);
        for rel in c.run_records {
            if let Some(bytes) = files.get_mut(*rel) {
                bytes.clear();
            }
        }
        files
    };
    let run = |out: &Path, threads: usize, force: bool, dry_run: bool| -> Report {
        let mut o = options(&c.input, out, threads);
        o.force = force;
        o.dry_run = dry_run;
        (c.run)(&o).unwrap_or_else(|e| panic!("run into {} failed: {e}", out.display()))
    };
    let dry = root.path().join("dry");
    let planned = run(&dry, 1, false, true);
    assert!(planned.processed.is_empty(), "a dry run processes nothing");
    assert!(snapshot(&dry).is_empty(), "a dry run writes nothing");

    let one = root.path().join("one");
    let report = run(&one, 1, false, false);
    let units = report.processed.len();
    assert!(units > 0, "the step has units to run");
    let storage = Storage::new();
    let markers = list_markers(&storage, &Location::Local(one.clone())).expect("list markers");
    assert_eq!(markers.len(), units, "one marker per unit");
    for (name, m) in &markers {
        assert!(report.processed.contains(name), "marker {name} of no unit");
        assert!(
            m.source_hash.is_some(),
            "unit {name}: marker without its version"
        );
        for rel in &m.outputs {
            assert!(one.join(rel).exists(), "unit {name}: output {rel} missing");
        }
    }
    let reference = snapshot(&one);

    let many = root.path().join("many");
    run(&many, 4, false, false);
    assert_same("1 thread vs 4 threads", &reference, &snapshot(&many));

    let again = run(&one, 2, false, false);
    assert!(
        again.processed.is_empty(),
        "a rerun processes nothing, it redid {:?}",
        again.processed
    );
    assert_eq!(again.skipped.len(), units, "a rerun skips every unit");
    assert_same("rerun", &reference, &snapshot(&one));

    let forced = run(&one, 2, true, false);
    assert_eq!(forced.processed.len(), units, "--force redoes every unit");
    assert_same("--force", &reference, &snapshot(&one));

    let Some(factory) = c.command else { return };
    let bin = root.path().join("bin");
    let status = command(factory, &c.input, &bin)
        .status()
        .expect("start the binary");
    assert!(status.success(), "the binary failed: {status}");
    assert_same("binary vs library", &reference, &snapshot(&bin));
    let crash_at: std::collections::BTreeSet<usize> = [1, 2, units / 2, units]
        .into_iter()
        .filter(|k| (1..=units).contains(k))
        .collect();
    for k in crash_at {
        let out = root.path().join(format!("crash-{k}"));
        let status = command(factory, &c.input, &out)
            .env(CRASH_AFTER_BATCHES, k.to_string())
            .status()
            .expect("start the binary");
        assert!(!status.success(), "the run did not crash after unit {k}");
        let status = command(factory, &c.input, &out)
            .status()
            .expect("start the binary");
        assert!(status.success(), "resume after a crash at unit {k} failed");
        assert_same(
            &format!("resume after a crash at unit {k}"),
            &reference,
            &snapshot(&out),
        );
    }
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create fixture folder");
    }
    std::fs::write(path, bytes).expect("write fixture");
}

fn check_markers(c: &Conformance<'_>, output: &Path) {
    let storage = Storage::new();
    let out = Location::Local(output.to_path_buf());
    let markers = list_markers(&storage, &out).expect("list markers");
    assert_eq!(
        markers.len(),
        c.inputs.len() + c.broken.len(),
        "one marker per input"
    );
    for (stem, m) in &markers {
        assert!(
            m.stats.balanced(),
            "{stem}: docs_in {} != docs_out {} + drops {:?}",
            m.stats.docs_in,
            m.stats.docs_out,
            m.stats.drops
        );
        if let Err(e) = m.stats.records_balanced() {
            panic!("{stem}: records and bytes do not add up: {e}");
        }
        let mut written = 0u64;
        for rel in m
            .outputs
            .iter()
            .filter(|r| !r.starts_with(REJECTED_DIR))
            .filter(|r| !r.starts_with(crate::runner::SKETCH_DIR))
        {
            let docs = read_all_documents(&storage, &out.join(rel))
                .unwrap_or_else(|e| panic!("{stem}: reading back {rel}: {e}"));
            written += docs.len() as u64;
        }
        assert_eq!(
            written, m.stats.docs_out,
            "{stem}: rows written vs docs_out"
        );
    }
    for (name, _, reason) in &c.broken {
        let m = markers
            .iter()
            .find(|(_, m)| m.input.ends_with(name.as_str()))
            .map(|(_, m)| m)
            .unwrap_or_else(|| panic!("broken input {name} has no marker"));
        assert!(
            m.stats.drops.get(*reason).copied().unwrap_or(0) > 0,
            "broken input {name}: expected drops for {reason}, got {:?}",
            m.stats.drops
        );
    }
}

/// A fresh folder path under a temporary root (kept for the caller's lifetime).
pub fn scratch(root: &tempfile::TempDir, name: &str) -> PathBuf {
    root.path().join(name)
}

/// A folder that `make` fills once for each build of the calling test binary, shared by
/// all its test processes (nextest runs every test in a process of its own), below
/// `tmp` (pass `env!("CARGO_TARGET_TMPDIR")`, which `cargo clean` empties).
///
/// A temporary folder held in a `static` is never dropped, so a fixture trained into
/// one is left behind by every test process; this one is made once and kept in one
/// place. The folder is named after the test binary's size and modification time, so
/// a rebuilt binary makes it anew (and removes the older builds' folders); processes
/// that race take turns on a file lock, and a folder whose `make` did not finish is
/// made again.
pub fn shared_dir(tmp: &str, name: &str, make: impl FnOnce(&Path)) -> PathBuf {
    let root = Path::new(tmp).join(name);
    let exe = std::env::current_exe().expect("the test binary's path");
    let meta = std::fs::metadata(&exe).expect("the test binary's metadata");
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let build = format!("{:x}-{modified:x}", meta.len());
    let dir = root.join(&build);
    let complete = dir.join(".complete");
    if complete.exists() {
        return dir;
    }
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    let lock_path = root.join(".lock");
    let lock = std::fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("{}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()));
    if !complete.exists() {
        for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            if entry.file_name() != ".lock" {
                // Another build's folder, or this one left half made: made anew below.
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        make(&dir);
        std::fs::write(&complete, b"").unwrap_or_else(|e| panic!("{}: {e}", complete.display()));
    }
    dir
}

/// Writes `text` to the file `name` below `tmp` (pass `env!("CARGO_TARGET_TMPDIR")`)
/// and returns its path: one file for every test process that writes the same text
/// (a write to a file of the process's own, renamed into place), not one per process.
pub fn config_file(tmp: &str, name: &str, text: &str) -> PathBuf {
    let path = Path::new(tmp).join(name);
    if std::fs::read(&path).is_ok_and(|b| b == text.as_bytes()) {
        return path;
    }
    let part = Path::new(tmp).join(format!("{name}.{}", std::process::id()));
    std::fs::create_dir_all(tmp).unwrap_or_else(|e| panic!("{tmp}: {e}"));
    std::fs::write(&part, text).unwrap_or_else(|e| panic!("{}: {e}", part.display()));
    std::fs::rename(&part, &path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// Waits for a TCP port on loopback to accept connections.
pub fn wait_for_port(port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Runs `cmd` to its end and returns its output and peak RSS in MiB, as the kernel
/// accounts it for the child (Python's `getrusage(RUSAGE_CHILDREN)` around it: the
/// largest of the process and its own children). Stderr keeps its last 4,000 bytes.
pub fn run_with_peak_rss(cmd: &Command) -> (std::process::Output, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rss_file = dir.path().join("rss");
    let probe = "import resource, subprocess, sys\n\
        p = subprocess.run(sys.argv[2:], capture_output=True)\n\
        sys.stdout.buffer.write(p.stdout)\n\
        sys.stderr.buffer.write(p.stderr[-4000:])\n\
        open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n\
        sys.exit(p.returncode)";
    let mut probed = Command::new("python3");
    if let Some(folder) = cmd.get_current_dir() {
        probed.current_dir(folder);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => probed.env(k, v),
            None => probed.env_remove(k),
        };
    }
    let output = probed
        .arg("-c")
        .arg(probe)
        .arg(&rss_file)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .output()
        .expect("run the RSS probe (python3)");
    let kib: u64 = std::fs::read_to_string(&rss_file)
        .map(|s| s.trim().parse().unwrap_or(0))
        .unwrap_or(0);
    (output, kib / 1024)
}

/// Compares `got` with the golden file `path`, or rewrites the file when
/// `TOKENMILL_BLESS` is set (after a deliberate change).
pub fn golden(path: &Path, got: &str) {
    if std::env::var_os("TOKENMILL_BLESS").is_some() {
        std::fs::write(path, got).expect("bless golden file");
        return;
    }
    let expected =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("golden {}: {e}", path.display()));
    assert_eq!(
        got,
        expected,
        "{} (TOKENMILL_BLESS=1 rewrites it)",
        path.display()
    );
}

/// The texts of a bench: those of the JSONL file named by `TOKENMILL_BENCH_TEXTS`
/// (scripts/bench-classify.sh leaves the WCXB and Dragnet texts so), else of `fallback`
/// (a fixture).
pub fn bench_texts(fallback: &Path) -> Vec<String> {
    let path = std::env::var_os("TOKENMILL_BENCH_TEXTS")
        .map_or_else(|| fallback.to_path_buf(), PathBuf::from);
    jsonl_texts(&path)
}

/// The `"text"` of each line of a JSONL file (lines without one are left out).
pub fn jsonl_texts(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("texts {}: {e}", path.display()))
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect()
}

/// A fresh bucket on the S3 test server named by `TOKENMILL_TEST_S3_ENDPOINT`, with a
/// storage facade pointed at it and the endpoint (for binaries: `AWS_ENDPOINT_URL`).
/// `None` (test skipped) when the variable is unset outside CI; under `CI` a missing
/// server fails the test, so CI cannot skip the S3 tests by accident.
pub fn s3_bucket(prefix: &str) -> Option<(Storage, String, String)> {
    let endpoint = match std::env::var("TOKENMILL_TEST_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => e,
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the S3 tests: set TOKENMILL_TEST_S3_ENDPOINT (scripts/test.sh does)"
            );
            eprintln!("TOKENMILL_TEST_S3_ENDPOINT unset: S3 test skipped");
            return None;
        }
    };
    let storage = Storage::with_options(crate::storage::S3Options {
        endpoint: Some(endpoint.clone()),
        ..crate::storage::S3Options::default()
    });
    let bucket = format!("{prefix}-{}-{}", std::process::id(), fastrand::u32(..));
    let base = Location::parse(&format!("s3://{bucket}/")).expect("bucket address");
    storage
        .create_bucket(&base)
        .expect("create the test bucket");
    Some((storage, endpoint, bucket))
}

/// Runs the Python reference `script` of a cross-check with `input` on its standard
/// input and returns what it printed; `None` (the check is skipped) when it fails
/// outside CI, for instance because the Python package it compares with is missing.
/// Under `CI` a failure fails the test, so CI cannot skip a cross-check by accident.
pub fn python_reference(script: &Path, input: Vec<u8>) -> Option<String> {
    python_reference_with(script, &[], input)
}

/// [`python_reference`] with arguments after the script.
pub fn python_reference_with(script: &Path, args: &[&str], input: Vec<u8>) -> Option<String> {
    use std::io::Write;
    let mut child = Command::new("python3")
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().expect("stdin");
    // Fed from another thread: the reference answers as it reads, and a full stdout
    // pipe would otherwise block both sides.
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("python3");
    feeder.join().expect("feeder thread").expect("send input");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            std::env::var_os("CI").is_none(),
            "{} failed: {err}",
            script.display()
        );
        eprintln!(
            "{} unavailable, cross-check skipped: {err}",
            script.display()
        );
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_shared_folder_is_made_once_and_a_half_made_one_again() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tmp_str = tmp.path().to_str().expect("a UTF-8 path");
        let made = AtomicUsize::new(0);
        let make = |d: &Path| {
            made.fetch_add(1, Ordering::SeqCst);
            assert!(
                !d.join("junk").exists(),
                "a half-made folder was not emptied"
            );
            std::thread::sleep(Duration::from_millis(50));
            std::fs::write(d.join("fixture"), b"made").expect("write");
        };
        // Four racing callers (flock locks of separate opens exclude each other in one
        // process too): one makes it, the others wait and use it.
        let dirs: Vec<PathBuf> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| shared_dir(tmp_str, "fixture", make)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("join"))
                .collect()
        });
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(dirs.iter().all(|d| d == &dirs[0]), "{dirs:?}");
        assert_eq!(
            std::fs::read(dirs[0].join("fixture")).expect("read"),
            b"made"
        );
        // A folder whose making did not finish, and another build's folder: both go.
        std::fs::remove_file(dirs[0].join(".complete")).expect("remove");
        std::fs::write(dirs[0].join("junk"), b"").expect("write");
        let other = tmp.path().join("fixture/other-build");
        std::fs::create_dir_all(&other).expect("mkdir");
        assert_eq!(shared_dir(tmp_str, "fixture", make), dirs[0]);
        assert_eq!(made.load(Ordering::SeqCst), 2);
        assert!(!other.exists());
    }

    #[test]
    fn a_config_file_is_one_file_with_the_last_text() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tmp_str = tmp.path().to_str().expect("a UTF-8 path");
        let a = config_file(tmp_str, "c.toml", "x = 1\n");
        let b = config_file(tmp_str, "c.toml", "x = 1\n");
        assert_eq!(a, b);
        let c = config_file(tmp_str, "c.toml", "x = 2\n");
        assert_eq!(std::fs::read_to_string(&c).expect("read"), "x = 2\n");
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .expect("list")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec!["c.toml"], "no per-process files left");
    }
}
