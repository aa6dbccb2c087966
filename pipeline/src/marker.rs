//! Resume markers: `<output>/_done/<input-stem>.json`, written after an input's
//! outputs, so an input is done exactly when its marker exists and matches.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::stats::Stats;
use crate::storage::{Location, ObjectMeta, Storage};

/// Folder of markers below an output prefix.
pub const DONE_DIR: &str = "_done";
/// Folder of start notes below an output prefix: an input with a start note and no
/// marker is running, or its task died.
pub const STARTED_DIR: &str = "_started";
/// Folder of rejected documents below an output prefix.
pub const REJECTED_DIR: &str = "_rejected";

/// What a finished input leaves behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    /// The step that wrote it.
    pub step: String,
    /// The input's address.
    pub input: String,
    /// The input's size when it was read.
    pub input_size: u64,
    /// The input's ETag (S3) or size-and-mtime tag (disk) when it was read.
    pub input_etag: Option<String>,
    /// For a unit ([`crate::runner::Unit`]): the hash of what it read (a listing, a set
    /// of files), its `version`. Absent in markers of input files, and in unit markers
    /// written before this field existed, which carried it in `input_etag`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
    /// Hash of the step's configuration.
    pub config_hash: String,
    /// Outputs written for this input, relative to the output prefix.
    pub outputs: Vec<String>,
    /// Counters for this input.
    pub stats: Stats,
}

impl Marker {
    /// Whether this marker says `input` was done with this configuration.
    pub fn matches(&self, input: &ObjectMeta, config_hash: &str) -> bool {
        self.config_hash == config_hash
            && self.input_size == input.size
            && self.input_etag == input.etag
    }

    /// Whether this marker says a unit of this `version` was done with this
    /// configuration (older unit markers kept the version in `input_etag`).
    pub fn matches_unit(&self, version: &str, config_hash: &str) -> bool {
        self.config_hash == config_hash
            && self.source_hash.as_deref().or(self.input_etag.as_deref()) == Some(version)
    }
}

/// The marker address of an input stem.
pub fn marker_location(output: &Location, stem: &str) -> Location {
    output.join(&format!("{DONE_DIR}/{stem}.json"))
}

/// Reads a marker; a missing or unreadable one means "not done".
pub fn read_marker(storage: &Storage, loc: &Location) -> Result<Option<Marker>> {
    if !storage.exists(loc)? {
        return Ok(None);
    }
    let bytes = storage.read(loc)?;
    match serde_json::from_slice(&bytes) {
        Ok(m) => Ok(Some(m)),
        Err(e) => {
            tracing::warn!(url = %loc, error = %e, "ignoring an unreadable marker; the input will be redone");
            Ok(None)
        }
    }
}

/// Writes a marker atomically; the input's heartbeat stops.
pub fn write_marker(storage: &Storage, loc: &Location, marker: &Marker) -> Result<()> {
    let json = serde_json::to_vec_pretty(marker)
        .map_err(|e| Error::Usage(format!("serialising marker {loc}: {e}")))?;
    storage.put(loc, &json)?;
    heartbeat::stop(loc);
    Ok(())
}

/// Every marker below an output prefix, with its stem.
pub fn list_markers(storage: &Storage, output: &Location) -> Result<Vec<(String, Marker)>> {
    let mut out = Vec::new();
    for obj in storage.list(&output.join(DONE_DIR))? {
        if let Some(stem) = obj.relative.strip_suffix(".json")
            && let Some(m) = read_marker(storage, &obj.location)?
        {
            out.push((stem.to_string(), m));
        }
    }
    Ok(out)
}

/// When and where an input was started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// Seconds since 1970.
    pub started: u64,
    pub host: String,
    pub pid: u32,
    /// Seconds since 1970 of the last sign of life: the note is rewritten every
    /// [`heartbeat::every`] while the input is worked on (0 in notes of older runs).
    #[serde(default)]
    pub heartbeat: u64,
}

impl Started {
    /// The last sign of life: the heartbeat, or the start.
    pub fn last_seen(&self) -> u64 {
        self.heartbeat.max(self.started)
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Heartbeats of the inputs this process works on: one thread rewrites their start
/// notes every [`heartbeat::every`] until their markers are written, so that `mill status
/// --stalled` tells a task that died (no heartbeat) from a slow one.
pub mod heartbeat {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, Once};
    use std::time::Duration;

    use super::{Started, now_secs};
    use crate::storage::{Location, Storage};

    struct Beat {
        /// The marker's address: the beat stops when it is written.
        marker: String,
        storage: Storage,
        note_loc: Location,
        note: Started,
    }

    static BEATS: Mutex<Vec<Beat>> = Mutex::new(Vec::new());
    static THREAD: Once = Once::new();
    /// Milliseconds between heartbeats; 0 until first asked.
    static EVERY_MS: AtomicU64 = AtomicU64::new(0);

    /// Time between heartbeats: `TOKENMILL_HEARTBEAT_SECS`, default 60 s.
    pub fn every() -> Duration {
        let ms = EVERY_MS.load(Ordering::Relaxed);
        if ms > 0 {
            return Duration::from_millis(ms);
        }
        let secs = std::env::var("TOKENMILL_HEARTBEAT_SECS")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&s| s > 0)
            .unwrap_or(60);
        EVERY_MS.store(secs * 1000, Ordering::Relaxed);
        Duration::from_secs(secs)
    }

    /// Sets the time between heartbeats for this process.
    pub fn set_every(every: Duration) {
        EVERY_MS.store(every.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    fn beats() -> std::sync::MutexGuard<'static, Vec<Beat>> {
        BEATS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn start(storage: &Storage, marker: &Location, note_loc: Location, note: Started) {
        beats().push(Beat {
            marker: marker.to_string(),
            storage: storage.clone(),
            note_loc,
            note,
        });
        THREAD.call_once(|| {
            let spawned = std::thread::Builder::new()
                .name("tokenmill-heartbeat".into())
                .spawn(|| {
                    loop {
                        std::thread::sleep(every());
                        let due: Vec<(Storage, Location, Started)> = beats()
                            .iter()
                            .map(|b| (b.storage.clone(), b.note_loc.clone(), b.note.clone()))
                            .collect();
                        let now = now_secs();
                        for (storage, loc, mut note) in due {
                            note.heartbeat = now;
                            let Ok(json) = serde_json::to_vec(&note) else {
                                continue;
                            };
                            if let Err(e) = storage.put_note(&loc, &json) {
                                tracing::warn!(note = %loc, error = %e, "heartbeat not written");
                            }
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "the heartbeat thread did not start");
            }
        });
    }

    pub(super) fn stop(marker: &Location) {
        let key = marker.to_string();
        beats().retain(|b| b.marker != key);
    }
}

/// Notes that an input starts (overwriting an earlier note).
pub fn write_started(storage: &Storage, output: &Location, stem: &str) -> Result<()> {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let now = now_secs();
    let note = Started {
        started: now,
        host,
        pid: std::process::id(),
        heartbeat: now,
    };
    let json = serde_json::to_vec(&note)
        .map_err(|e| Error::Usage(format!("serialising a start note: {e}")))?;
    let loc = output.join(&format!("{STARTED_DIR}/{stem}.json"));
    storage.put_note(&loc, &json)?;
    heartbeat::start(storage, &marker_location(output, stem), loc, note);
    Ok(())
}

/// Every start note below an output prefix, by stem.
pub fn list_started(storage: &Storage, output: &Location) -> Result<Vec<(String, Started)>> {
    let mut out = Vec::new();
    for obj in storage.list(&output.join(STARTED_DIR))? {
        if let Some(stem) = obj.relative.strip_suffix(".json")
            && let Ok(note) = serde_json::from_slice::<Started>(&storage.read(&obj.location)?)
        {
            out.push((stem.to_string(), note));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(storage: &Storage, output: &Location, stem: &str) -> Started {
        let bytes = storage
            .read(&output.join(&format!("{STARTED_DIR}/{stem}.json")))
            .expect("note");
        serde_json::from_slice(&bytes).expect("json")
    }

    #[test]
    fn start_notes_beat_until_the_marker_is_written() {
        heartbeat::set_every(std::time::Duration::from_millis(300));
        let dir = tempfile::tempdir().expect("tmp");
        let storage = Storage::new();
        let output = Location::Local(dir.path().to_path_buf());
        write_started(&storage, &output, "a").expect("start");
        let first = note(&storage, &output, "a");
        // Heartbeats are whole seconds: wait for one in a later second.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while note(&storage, &output, "a").heartbeat == first.heartbeat {
            assert!(std::time::Instant::now() < deadline, "no heartbeat");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let beating = note(&storage, &output, "a");
        assert_eq!(beating.started, first.started);
        assert!(beating.last_seen() > first.started);
        // The marker stops the beat.
        let marker = Marker {
            step: "s".into(),
            input: "in".into(),
            input_size: 0,
            input_etag: None,
            source_hash: None,
            config_hash: "h".into(),
            outputs: Vec::new(),
            stats: Stats::default(),
        };
        write_marker(&storage, &marker_location(&output, "a"), &marker).expect("marker");
        std::thread::sleep(std::time::Duration::from_millis(700));
        let stopped = note(&storage, &output, "a");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        assert_eq!(
            note(&storage, &output, "a"),
            stopped,
            "beats after the marker"
        );
    }
}
