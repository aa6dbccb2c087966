//! Fuzzing of every parser of outside bytes, on stable Rust.
//!
//! Coverage-guided fuzzers (cargo-fuzz, cargo-afl) need a nightly compiler or an
//! LLVM build that matches rustc's, which this project's machines do not have, so
//! this is structure-aware random mutation: each [`targets::Target`] starts from the
//! fixtures of its format and a dictionary of the tokens that format is made of
//! (`WARC/1.0`, `Content-Length: `, `PAR1`, `<table>`, `&#x`…), and each input is
//! made of up to eight stacked mutations (bit flips, interesting integers, insertion
//! and deletion of ranges, duplication, splicing two seeds, dictionary tokens, long
//! runs of one byte, truncation). Each input is run under the target's contract:
//!
//! - no panic (caught and saved as a finding; the process's panic=abort paths, such
//!   as stack overflow, end the run and are saved before the input runs);
//! - memory bounded: the peak of live heap bytes while the input runs, measured by
//!   the counting allocator ([`alloc::Counting`]), under the target's cap;
//! - a time bound per input;
//! - every input parsed or counted under a named reason (the outcome's label).
//!
//! Findings are written to a folder (`<target>-<sha256>`); the ones found and fixed
//! live in `fixtures/fuzz/<target>/` and are replayed by a test.

pub mod alloc;
pub mod targets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub use alloc::Counting;
pub use targets::{Target, targets};

/// What one input did: the label it was parsed or counted under, or the broken
/// contract.
pub type Outcome = Result<String, String>;

/// Makes inputs from seeds and a dictionary.
#[derive(Debug)]
pub struct Mutator {
    rng: fastrand::Rng,
    max_len: usize,
}

const INTERESTING: [u64; 12] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    u64::MAX,
    1 << 31,
    1 << 40,
];

impl Mutator {
    pub fn new(seed: u64, max_len: usize) -> Self {
        Mutator {
            rng: fastrand::Rng::with_seed(seed),
            max_len,
        }
    }

    /// A new input: a seed (sometimes two spliced) with 1 to 8 mutations.
    pub fn input(&mut self, seeds: &[Vec<u8>], dictionary: &[&[u8]]) -> Vec<u8> {
        let mut data = match seeds.len() {
            0 => Vec::new(),
            n => seeds[self.rng.usize(..n)].clone(),
        };
        let rounds = 1 + self.rng.usize(..8);
        for _ in 0..rounds {
            self.mutate(&mut data, seeds, dictionary);
        }
        data.truncate(self.max_len);
        data
    }

    fn pos(&mut self, data: &[u8]) -> usize {
        self.rng.usize(..=data.len())
    }

    fn mutate(&mut self, data: &mut Vec<u8>, seeds: &[Vec<u8>], dictionary: &[&[u8]]) {
        match self.rng.u8(..11) {
            0 if !data.is_empty() => {
                let i = self.rng.usize(..data.len());
                data[i] ^= 1 << self.rng.u8(..8);
            }
            1 if !data.is_empty() => {
                let i = self.rng.usize(..data.len());
                data[i] = self.rng.u8(..);
            }
            2 => {
                // An interesting integer, in ASCII (lengths in headers) or binary.
                let v = INTERESTING[self.rng.usize(..INTERESTING.len())];
                let at = self.pos(data);
                if self.rng.bool() {
                    data.splice(at..at, v.to_string().into_bytes());
                } else {
                    let n = [1, 2, 4, 8][self.rng.usize(..4)];
                    let end = (at + n).min(data.len());
                    data.splice(at..end, v.to_le_bytes()[..n].to_vec());
                }
            }
            3 if !data.is_empty() => {
                let a = self.rng.usize(..data.len());
                let b = (a + 1 + self.rng.usize(..64.min(data.len() - a))).min(data.len());
                data.drain(a..b);
            }
            4 if !data.is_empty() => {
                // Duplicate a range somewhere else.
                let a = self.rng.usize(..data.len());
                let b = (a + 1 + self.rng.usize(..256.min(data.len() - a))).min(data.len());
                let piece = data[a..b].to_vec();
                let at = self.pos(data);
                data.splice(at..at, piece);
            }
            5 if !seeds.is_empty() => {
                // Splice: this input up to a point, another seed from a point.
                let other = &seeds[self.rng.usize(..seeds.len())];
                let cut = self.pos(data);
                let from = self.rng.usize(..=other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            6 | 7 if !dictionary.is_empty() => {
                let token = dictionary[self.rng.usize(..dictionary.len())];
                let at = self.pos(data);
                if self.rng.bool() {
                    data.splice(at..at, token.iter().copied());
                } else {
                    let end = (at + token.len()).min(data.len());
                    data.splice(at..end, token.iter().copied());
                }
            }
            8 => {
                // A long run of one byte (deep nesting, long lines, huge numbers).
                let byte = [b'<', b'9', b'a', b' ', b'\n', 0, 0xff][self.rng.usize(..7)];
                let n = 1 << self.rng.u32(4..16);
                let at = self.pos(data);
                data.splice(at..at, std::iter::repeat_n(byte, n));
            }
            9 => {
                let cut = self.pos(data);
                data.truncate(cut);
            }
            _ => {
                let at = self.pos(data);
                let n = 1 + self.rng.usize(..16);
                let bytes: Vec<u8> = (0..n).map(|_| self.rng.u8(..)).collect();
                data.splice(at..at, bytes);
            }
        }
    }
}

/// What a fuzzing run of one target found.
#[derive(Debug, Default)]
pub struct Summary {
    pub executions: u64,
    /// Outcome labels and how many inputs got each.
    pub labels: BTreeMap<String, u64>,
    /// Inputs that broke the contract: (what broke, where the input was saved).
    pub findings: Vec<(String, PathBuf)>,
    /// The largest peak of live heap bytes above the run's base, over all inputs.
    pub peak_bytes: usize,
    /// The slowest input's time.
    pub slowest: Duration,
    pub seconds: f64,
}

/// Saves `input` under `dir` as `<target>-<sha256 prefix>`; returns the path.
pub fn save(dir: &Path, target: &str, input: &[u8]) -> PathBuf {
    let hash: String = Sha256::digest(input)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = dir.join(format!("{target}-{hash}"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, input)) {
        eprintln!("cannot save {}: {e}", path.display());
    }
    path
}

/// Runs one input under the target's contract: the outcome, or the broken contract.
pub fn check(target: &Target, input: &[u8]) -> (Outcome, usize, Duration) {
    let base = alloc::live();
    alloc::reset_peak();
    let t0 = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (target.run)(input)));
    let took = t0.elapsed();
    let peak = alloc::peak().saturating_sub(base);
    let outcome = match result {
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            Err(format!("panic: {what}"))
        }
        Ok(Err(broken)) => Err(broken),
        Ok(Ok(label)) if peak > target.memory_cap => Err(format!(
            "memory: peak {} MiB over the cap of {} MiB ({label})",
            peak >> 20,
            target.memory_cap >> 20
        )),
        Ok(Ok(label)) if took > target.time_bound => Err(format!(
            "time: {:.2} s over the bound of {:.2} s ({label})",
            took.as_secs_f64(),
            target.time_bound.as_secs_f64()
        )),
        Ok(ok) => ok,
    };
    (outcome, peak, took)
}

/// Fuzzes `target` for `duration`; findings are saved under `findings`. The input
/// about to run is first written to `<findings>/.current-<target>`, so that an abort
/// (which no handler can catch) leaves it behind.
pub fn fuzz(target: &Target, duration: Duration, seed: u64, findings: &Path) -> Summary {
    let seeds = (target.seeds)();
    let mut mutator = Mutator::new(seed, target.max_input);
    let mut summary = Summary::default();
    let t0 = Instant::now();
    let current = findings.join(format!(".current-{}", target.name));
    let _ = std::fs::create_dir_all(findings);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // The seeds themselves first, then mutations.
    let mut i = 0usize;
    while t0.elapsed() < duration {
        let input = if i < seeds.len() {
            seeds[i].clone()
        } else {
            mutator.input(&seeds, target.dictionary)
        };
        i += 1;
        let _ = std::fs::write(&current, &input);
        let (outcome, peak, took) = check(target, &input);
        summary.executions += 1;
        summary.peak_bytes = summary.peak_bytes.max(peak);
        summary.slowest = summary.slowest.max(took);
        match outcome {
            Ok(label) => *summary.labels.entry(label).or_default() += 1,
            Err(broken) => {
                let path = save(findings, target.name, &input);
                summary.findings.push((broken, path));
            }
        }
    }
    std::panic::set_hook(quiet);
    let _ = std::fs::remove_file(&current);
    summary.seconds = t0.elapsed().as_secs_f64();
    summary
}
