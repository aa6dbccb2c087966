//! What the run reports besides its records: the device's peak for MFU, and the stall
//! watchdog.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Dense bf16 tensor-core peaks (FLOP/s) of known GPUs, from NVIDIA's data sheets,
/// matched against the device name (most specific first).
pub const PEAKS: &[(&str, f64)] = &[
    ("H200", 989.4e12),
    ("H100 PCIe", 756.0e12),
    ("H100", 989.4e12),
    ("GH200", 989.4e12),
    ("B200", 2250.0e12),
    ("A100", 312.0e12),
    ("L40S", 362.05e12),
    ("L4", 121.0e12),
];

/// The peak of a device named `name` (as `nvidia-smi` prints it), if known.
pub fn peak_of(name: &str) -> Option<f64> {
    PEAKS
        .iter()
        .find(|(key, _)| name.contains(key))
        .map(|&(_, p)| p)
}

/// The name of GPU `index` as `nvidia-smi` reports it.
pub fn gpu_name(index: usize) -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=name",
            "--format=csv,noheader",
            &format!("--id={index}"),
        ])
        .output()
        .ok()?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !name.is_empty()).then_some(name)
}

/// Calls `on_stall` once if no [`Watchdog::beat`] comes for `timeout` (checked a few
/// times per timeout on a thread of its own).
#[derive(Debug)]
pub struct Watchdog {
    started: Instant,
    last: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Watchdog {
    pub fn start(timeout: Duration, on_stall: impl FnOnce(Duration) + Send + 'static) -> Watchdog {
        let started = Instant::now();
        let last = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (last.clone(), stop.clone());
        let tick = (timeout / 4).clamp(Duration::from_millis(5), Duration::from_secs(5));
        let spawned = std::thread::Builder::new()
            .name("tokenmill-watchdog".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    let since =
                        started.elapsed() - Duration::from_millis(l.load(Ordering::Relaxed));
                    if since > timeout && !s.load(Ordering::Relaxed) {
                        on_stall(since);
                        return;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "the stall watchdog could not start");
        }
        Watchdog {
            started,
            last,
            stop,
        }
    }

    /// Progress was made now.
    pub fn beat(&self) {
        self.last
            .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn known_gpus_have_peaks() {
        assert_eq!(peak_of("NVIDIA H200"), Some(989.4e12));
        assert_eq!(peak_of("NVIDIA H100 PCIe"), Some(756.0e12));
        assert_eq!(peak_of("NVIDIA A100-SXM4-80GB"), Some(312.0e12));
        assert_eq!(peak_of("a CPU"), None);
    }

    #[test]
    fn the_watchdog_fires_only_without_beats() {
        let (tx, rx) = channel();
        let dog = Watchdog::start(Duration::from_millis(300), move |d| {
            let _ = tx.send(d);
        });
        for _ in 0..12 {
            std::thread::sleep(Duration::from_millis(50));
            dog.beat();
        }
        assert!(rx.try_recv().is_err(), "fired while beating");
        let stalled = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("fires after a stall");
        assert!(stalled >= Duration::from_millis(300), "{stalled:?}");
    }
}
