//! A lock on a run, so that two scheduled runs (cron, a timer) never overlap, with a
//! lease so that a dead holder's lock expires.
//!
//! It needs no conditional write, so it works on local disk and on any S3-compatible
//! store (S3 is strongly consistent for a read or list after a write). A contender
//! writes a claim object of its own, `<run>/_lock/<millis>-<random>.json`, then lists
//! the claims, ignoring expired ones:
//! - when another claim is `holding`, or an earlier one (by name) is pending, it lost:
//!   it deletes its claim;
//! - otherwise it rewrites its claim as `holding` and lists again, giving up if an
//!   earlier claim appeared meanwhile. A later claim that sees it holding backs off, so
//!   two holders never coexist (a claim is written before its writer lists, and the
//!   store is consistent); contenders racing may all back off, never both win.
//!
//! The holder renews its lease (rewrites its claim with a later expiry) every third of
//! the lease on a thread of its own, and deletes its claim when dropped. A holder that
//! dies stops renewing: its claim expires and the next contender ignores it (and
//! deletes it).

use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::{Location, Storage};

/// Folder of the claims below a run.
pub const LOCK_DIR: &str = "_lock";

/// One contender's claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Who: a free text (the command), the host and the process.
    pub owner: String,
    pub host: String,
    pub pid: u32,
    /// Whether it won.
    pub holding: bool,
    /// Milliseconds since 1970 after which the claim is void.
    pub expires_ms: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The lock while held; dropping it releases it.
#[derive(Debug)]
pub struct RunLock {
    storage: Storage,
    claim: Location,
    /// Dropped to stop the renewer: it wakes at once, not at its next tick.
    stop: Option<Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

fn write(storage: &Storage, loc: &Location, claim: &Claim) -> Result<()> {
    let json = serde_json::to_vec(claim)
        .map_err(|e| Error::Usage(format!("serialising a lock claim: {e}")))?;
    storage.put(loc, &json)
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Whether a claim's process is known to be gone: it ran on this host, which has a
/// process table (`/proc`), and its pid is not in it (a holder killed here frees the
/// run at once, not after its lease).
fn dead_here(c: &Claim, host: &str) -> bool {
    !host.is_empty()
        && c.host == host
        && c.pid != std::process::id()
        && std::path::Path::new("/proc/self").exists()
        && !std::path::Path::new(&format!("/proc/{}", c.pid)).exists()
}

/// The live claims below `dir`: (name, claim); expired ones, and those of processes
/// gone from this host, are deleted.
fn live(storage: &Storage, dir: &Location) -> Result<Vec<(String, Claim)>> {
    let now = now_ms();
    let host = host_name();
    let mut out = Vec::new();
    for meta in storage.list(dir)? {
        if !meta.relative.ends_with(".json") {
            continue;
        }
        let bytes = match storage.read(&meta.location) {
            Ok(b) => b,
            // Released between the listing and the read.
            Err(_) if !storage.exists(&meta.location)? => continue,
            Err(e) => return Err(e),
        };
        match serde_json::from_slice::<Claim>(&bytes) {
            Ok(c) if c.expires_ms > now && !dead_here(&c, &host) => {
                out.push((meta.relative.clone(), c))
            }
            // Expired, or not a claim: void. Its holder is gone.
            _ => storage.delete(&meta.location)?,
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Takes the lock of the run at `run` for `owner`, with a lease of `lease` (renewed
/// while held), or says who holds it.
pub fn acquire(storage: &Storage, run: &Location, owner: &str, lease: Duration) -> Result<RunLock> {
    let dir = run.join(&format!("{LOCK_DIR}/"));
    let name = format!("{:015}-{:08x}.json", now_ms(), fastrand::u32(..));
    let loc = dir.join(&name);
    let lease_ms = lease.as_millis().max(1000) as u64;
    let claim = Claim {
        owner: owner.to_string(),
        host: host_name(),
        pid: std::process::id(),
        holding: false,
        expires_ms: now_ms() + lease_ms,
    };
    write(storage, &loc, &claim)?;
    match contend(storage, run, &dir, &name, &loc, claim, lease_ms) {
        Err(e) => {
            // Refused or failed: this claim must not stay behind to block others.
            let _ = storage.delete(&loc);
            Err(e)
        }
        ok => ok,
    }
}

/// The rest of [`acquire`], once this contender's pending claim is written.
fn contend(
    storage: &Storage,
    run: &Location,
    dir: &Location,
    name: &str,
    loc: &Location,
    mut claim: Claim,
    lease_ms: u64,
) -> Result<RunLock> {
    let refuse = |holder: &Claim| -> Result<RunLock> {
        Err(Error::Usage(format!(
            "run {run} is locked by {} (pid {} on {}) until {} s after 1970 unless renewed; try later",
            holder.owner,
            holder.pid,
            holder.host,
            holder.expires_ms / 1000
        )))
    };
    let claims = live(storage, dir)?;
    if let Some((_, holder)) = claims.iter().find(|(n, c)| c.holding && n != name) {
        return refuse(holder);
    }
    if let Some((first, earlier)) = claims.first()
        && first != name
    {
        return refuse(earlier);
    }
    claim.holding = true;
    claim.expires_ms = now_ms() + lease_ms;
    write(storage, loc, &claim)?;
    // A claim written before this one's listing and earlier by name wins over it;
    // a later one sees this claim holding and backs off.
    if let Some((_, other)) = live(storage, dir)?.iter().find(|(n, _)| n.as_str() < name) {
        return refuse(other);
    }
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let (s, l, mut c) = (storage.clone(), loc.clone(), claim.clone());
    let every = Duration::from_millis(lease_ms / 3);
    let renewer = std::thread::Builder::new()
        .name("tokenmill-lock".into())
        .spawn(move || {
            // Renews every third of the lease until the lock is dropped (its sender
            // goes, and the wait ends at once: a short run does not wait for a tick).
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                c.expires_ms = now_ms() + lease_ms;
                if let Err(e) = write(&s, &l, &c) {
                    tracing::warn!(lock = %l, error = %e, "lock lease not renewed");
                }
            }
        })
        .map_err(|e| Error::Usage(format!("starting the lock's lease thread: {e}")))?;
    Ok(RunLock {
        storage: storage.clone(),
        claim: loc.clone(),
        stop: Some(stop),
        renewer: Some(renewer),
    })
}

impl RunLock {
    /// The claim object (for messages).
    pub fn claim(&self) -> &Location {
        &self.claim
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        drop(self.stop.take());
        // A renewal in progress finishes before the claim goes, or it would put the
        // claim back.
        if let Some(r) = self.renewer.take() {
            let _ = r.join();
        }
        if let Err(e) = self.storage.delete(&self.claim) {
            tracing::warn!(lock = %self.claim, error = %e, "lock not released; it expires with its lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(storage: &Storage, run: &Location) {
        let held = acquire(storage, run, "first", Duration::from_secs(3)).expect("free");
        let err = acquire(storage, run, "second", Duration::from_secs(3)).expect_err("held");
        assert!(err.to_string().contains("locked by first"), "{err}");
        // The lease is renewed: still held after more than one lease.
        std::thread::sleep(Duration::from_millis(3500));
        assert!(acquire(storage, run, "third", Duration::from_secs(3)).is_err());
        drop(held);
        let again = acquire(storage, run, "fourth", Duration::from_secs(3)).expect("released");
        drop(again);
        // A holder that died: its claim stays but expires.
        let dead = Claim {
            owner: "dead".into(),
            host: "gone".into(),
            pid: 1,
            holding: true,
            expires_ms: now_ms() + 1500,
        };
        let dead_loc = run.join(&format!("{LOCK_DIR}/000000000000001-dead.json"));
        write(storage, &dead_loc, &dead).expect("claim");
        assert!(acquire(storage, run, "early", Duration::from_secs(3)).is_err());
        std::thread::sleep(Duration::from_millis(1700));
        let taken = acquire(storage, run, "late", Duration::from_secs(3)).expect("expired");
        assert!(
            !storage.exists(&dead_loc).expect("exists"),
            "the void claim is gone"
        );
        drop(taken);
        // A holder killed on this host (its pid is gone) frees the run at once.
        let killed = Claim {
            owner: "killed".into(),
            host: host_name(),
            pid: u32::MAX - 7,
            holding: true,
            expires_ms: now_ms() + 600_000,
        };
        let killed_loc = run.join(&format!("{LOCK_DIR}/000000000000002-killed.json"));
        write(storage, &killed_loc, &killed).expect("claim");
        drop(acquire(storage, run, "after a kill", Duration::from_secs(3)).expect("pid gone"));
        // Many at once: never two holders.
        let winners: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|i| {
                    s.spawn(move || {
                        acquire(storage, run, &format!("racer {i}"), Duration::from_secs(5))
                            .ok()
                            .map(|l| {
                                std::thread::sleep(Duration::from_millis(500));
                                drop(l);
                            })
                            .is_some() as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        assert!(winners <= 1, "{winners} holders at once");
        let left: Vec<String> = storage
            .list(&run.join(&format!("{LOCK_DIR}/")))
            .expect("list")
            .into_iter()
            .map(|m| {
                format!(
                    "{} {:?}",
                    m.relative,
                    String::from_utf8_lossy(&storage.read(&m.location).unwrap_or_default())
                )
            })
            .collect();
        assert!(left.is_empty(), "claims left: {left:?}");
        drop(acquire(storage, run, "after the race", Duration::from_secs(3)).expect("free again"));
    }

    #[test]
    fn one_holder_at_a_time_on_disk() {
        let dir = tempfile::tempdir().expect("tmp");
        check(&Storage::new(), &Location::Local(dir.path().to_path_buf()));
    }

    #[test]
    fn one_holder_at_a_time_on_s3() {
        let Some((storage, _, bucket)) = crate::testing::s3_bucket("lock") else {
            return;
        };
        let run = Location::parse(&format!("s3://{bucket}/runs/r1/")).expect("address");
        check(&storage, &run);
    }
}
