//! Progress: a bar on a terminal, a periodic heartbeat line in batch logs.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Seconds between heartbeat lines; `TOKENMILL_HEARTBEAT_SECS` overrides.
const HEARTBEAT_SECS: u64 = 30;

#[derive(Default)]
struct Counters {
    docs: AtomicU64,
    bytes: AtomicU64,
    files: AtomicU64,
    stop: AtomicBool,
}

/// Set to true, with a notification, to stop the heartbeat thread.
type StopSignal = Arc<(Mutex<bool>, Condvar)>;

/// Shared progress of one run.
pub struct Progress {
    counters: Arc<Counters>,
    bar: Option<ProgressBar>,
    heartbeat: Option<(JoinHandle<()>, StopSignal)>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress").finish_non_exhaustive()
    }
}

impl Progress {
    /// Starts showing progress over `files` inputs of `bytes` bytes in all.
    pub fn start(step: &str, files: u64, bytes: u64, enabled: bool) -> Self {
        let counters = Arc::new(Counters::default());
        if !enabled || files == 0 {
            return Progress {
                counters,
                bar: None,
                heartbeat: None,
            };
        }
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(bytes);
            let style = ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_prefix(step.to_string());
            return Progress {
                counters,
                bar: Some(bar),
                heartbeat: None,
            };
        }
        let secs = std::env::var("TOKENMILL_HEARTBEAT_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(HEARTBEAT_SECS)
            .max(1);
        let wake: StopSignal = Arc::new((Mutex::new(false), Condvar::new()));
        let (c, w, step) = (counters.clone(), wake.clone(), step.to_string());
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            let (lock, cvar) = &*w;
            let Ok(mut stopped) = lock.lock() else { return };
            while !c.stop.load(Ordering::Relaxed) {
                let Ok((guard, _)) = cvar.wait_timeout(stopped, Duration::from_secs(secs)) else {
                    return;
                };
                stopped = guard;
                if *stopped {
                    break;
                }
                let elapsed = started.elapsed().as_secs_f64().max(1e-9);
                let docs = c.docs.load(Ordering::Relaxed);
                let mb = c.bytes.load(Ordering::Relaxed) as f64 / 1e6;
                tracing::info!(
                    step = %step,
                    files_done = c.files.load(Ordering::Relaxed),
                    files,
                    docs,
                    docs_per_sec = (docs as f64 / elapsed).round(),
                    mb_per_sec = format!("{:.1}", mb / elapsed),
                    "heartbeat"
                );
            }
        });
        Progress {
            counters,
            bar: None,
            heartbeat: Some((handle, wake)),
        }
    }

    /// Counts documents read.
    pub fn docs(&self, n: u64) {
        self.counters.docs.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one finished input of `bytes` bytes.
    pub fn file_done(&self, bytes: u64) {
        self.counters.files.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.inc(bytes);
            bar.set_message(format!(
                "{} docs",
                self.counters.docs.load(Ordering::Relaxed)
            ));
        }
    }

    /// Stops the display.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.counters.stop.store(true, Ordering::Relaxed);
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if let Some((handle, wake)) = self.heartbeat.take() {
            let (lock, cvar) = &*wake;
            if let Ok(mut stopped) = lock.lock() {
                *stopped = true;
            }
            cvar.notify_all();
            let _ = handle.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}
