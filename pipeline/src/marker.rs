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

/// Writes a marker atomically.
pub fn write_marker(storage: &Storage, loc: &Location, marker: &Marker) -> Result<()> {
    let json = serde_json::to_vec_pretty(marker)
        .map_err(|e| Error::Usage(format!("serialising marker {loc}: {e}")))?;
    storage.put(loc, &json)
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
}

/// Notes that an input starts (overwriting an earlier note).
pub fn write_started(storage: &Storage, output: &Location, stem: &str) -> Result<()> {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let note = Started {
        started: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        host,
        pid: std::process::id(),
    };
    let json = serde_json::to_vec(&note)
        .map_err(|e| Error::Usage(format!("serialising a start note: {e}")))?;
    storage.put(&output.join(&format!("{STARTED_DIR}/{stem}.json")), &json)
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
