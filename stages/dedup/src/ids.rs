//! The document ids of one input, beside its signature file (`<stem>.ids`), so that the
//! clusters phase can name each cluster's keeper by its id:
//! ```text
//! "TMIDS001", documents u64, documents × (length u32, UTF-8 bytes) in row order
//! ```
//! Written by the signatures phase (and the planted generator), streamed once per input
//! by whoever looks keepers up; rows are asked for in ascending order.

use std::io::{BufRead, BufReader, Read};

use pipeline::{Error, Location, Result, Storage};

/// Suffix of id files.
pub const SUFFIX: &str = ".ids";
const MAGIC: &[u8; 8] = b"TMIDS001";
/// Longest id accepted (a WARC-Record-ID is 47 bytes; a longer id is cut to this).
pub const MAX_ID_BYTES: usize = 4096;

/// The bytes of an id file being written, row by row.
#[derive(Debug)]
pub struct IdsWriter {
    bytes: Vec<u8>,
    rows: u64,
}

impl Default for IdsWriter {
    fn default() -> Self {
        let mut bytes = Vec::with_capacity(1 << 16);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&0u64.to_le_bytes());
        IdsWriter { bytes, rows: 0 }
    }
}

impl IdsWriter {
    /// Appends the id of the next row (cut at a character boundary past
    /// [`MAX_ID_BYTES`]).
    pub fn push(&mut self, id: &str) {
        let mut end = id.len().min(MAX_ID_BYTES);
        while !id.is_char_boundary(end) {
            end -= 1;
        }
        self.bytes.extend_from_slice(&(end as u32).to_le_bytes());
        self.bytes.extend_from_slice(&id.as_bytes()[..end]);
        self.rows += 1;
    }

    /// The file's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes[8..16].copy_from_slice(&self.rows.to_le_bytes());
        self.bytes
    }
}

/// Address of the id file of input `stem` below the signature folder.
pub fn location(signatures: &Location, stem: &str) -> Location {
    signatures.join(&format!("{stem}{SUFFIX}"))
}

/// A forward-only reader of one id file.
pub struct IdsCursor {
    reader: BufReader<Box<dyn Read + Send>>,
    url: String,
    rows: u64,
    at: u64,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for IdsCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdsCursor")
            .field("url", &self.url)
            .field("rows", &self.rows)
            .field("at", &self.at)
            .finish()
    }
}

impl IdsCursor {
    /// Opens the id file at `loc`.
    pub fn open(storage: &Storage, loc: &Location, buffer: usize) -> Result<IdsCursor> {
        let url = loc.to_string();
        if !storage.exists(loc)? {
            return Err(Error::Usage(format!(
                "no id file {url}: signatures written before ids were kept beside them; rerun the signatures phase"
            )));
        }
        let mut reader = BufReader::with_capacity(buffer.max(4096), storage.open(loc)?);
        let mut head = [0u8; 16];
        reader
            .read_exact(&mut head)
            .map_err(|e| Error::from_io_error("reading", &url, e))?;
        if &head[..8] != MAGIC {
            return Err(Error::Input {
                url,
                message: "not an id file (no magic)".into(),
            });
        }
        let rows = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
        Ok(IdsCursor {
            reader,
            url,
            rows,
            at: 0,
            scratch: Vec::new(),
        })
    }

    /// The id of `row`; rows must come in ascending order.
    pub fn get(&mut self, row: u32) -> Result<String> {
        let row = row as u64;
        if row < self.at || row >= self.rows {
            return Err(Error::Input {
                url: self.url.clone(),
                message: format!(
                    "id of row {row} asked at row {} of {} rows (rows must ascend and exist)",
                    self.at, self.rows
                ),
            });
        }
        loop {
            // Rows before the one asked for are skipped inside the read buffer when
            // they are whole there (most are), without copying them out.
            if self.at < row {
                let buf = self
                    .reader
                    .fill_buf()
                    .map_err(|e| Error::from_io_error("reading", &self.url, e))?;
                let (mut used, mut skipped) = (0usize, 0u64);
                while self.at + skipped < row && buf.len() >= used + 4 {
                    let len = u32::from_le_bytes([
                        buf[used],
                        buf[used + 1],
                        buf[used + 2],
                        buf[used + 3],
                    ]) as usize;
                    if len > MAX_ID_BYTES || buf.len() < used + 4 + len {
                        break;
                    }
                    used += 4 + len;
                    skipped += 1;
                }
                if skipped > 0 {
                    self.reader.consume(used);
                    self.at += skipped;
                    continue;
                }
            }
            let mut len = [0u8; 4];
            self.reader
                .read_exact(&mut len)
                .map_err(|e| Error::from_io_error("reading", &self.url, e))?;
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_ID_BYTES {
                return Err(Error::Input {
                    url: self.url.clone(),
                    message: format!("row {}: id of {len} bytes", self.at),
                });
            }
            self.scratch.resize(len, 0);
            self.reader
                .read_exact(&mut self.scratch)
                .map_err(|e| Error::from_io_error("reading", &self.url, e))?;
            self.at += 1;
            if self.at > row {
                return String::from_utf8(std::mem::take(&mut self.scratch)).map_err(|_| {
                    Error::Input {
                        url: self.url.clone(),
                        message: format!("row {row}: id is not UTF-8"),
                    }
                });
            }
        }
    }
}

/// The ids of keepers looked up in the id files below a signature folder, keepers
/// asked for in ascending order of global number: each input's file is streamed once.
#[derive(Debug)]
pub struct KeeperIds<'a> {
    storage: &'a Storage,
    signatures: Location,
    stems: &'a [String],
    buffer: usize,
    cursor: Option<(usize, IdsCursor)>,
}

impl<'a> KeeperIds<'a> {
    /// `stems[f]` names input `f` of the signature folder `signatures`; `buffer` bytes
    /// of read buffer.
    pub fn new(
        storage: &'a Storage,
        signatures: &str,
        stems: &'a [String],
        buffer: usize,
    ) -> Result<Self> {
        Ok(KeeperIds {
            storage,
            signatures: Location::parse(signatures)?,
            stems,
            buffer,
            cursor: None,
        })
    }

    /// The id of keeper `k` (`None` for the index).
    pub fn get(&mut self, k: u64) -> Result<Option<String>> {
        let Some((f, row)) = crate::split_global(k) else {
            return Ok(None);
        };
        if self.cursor.as_ref().is_none_or(|(at, _)| *at != f) {
            let stem = self.stems.get(f).ok_or_else(|| {
                Error::Usage(format!("keeper {k:#x} names input {f}, past the listing"))
            })?;
            let loc = location(&self.signatures, stem);
            self.cursor = Some((f, IdsCursor::open(self.storage, &loc, self.buffer)?));
        }
        match self.cursor.as_mut() {
            Some((_, c)) => c.get(row).map(Some),
            None => Ok(None),
        }
    }
}

/// Gives each removal list in `lists` the ids of the keepers its removed rows name,
/// from `ids` (keeper → id, at least every keeper named); `url` says where they come
/// from in errors.
pub fn attach_names(
    lists: &mut [crate::dups::Dups],
    ids: &std::collections::HashMap<u64, String>,
    url: &str,
) -> Result<()> {
    let mut named: Vec<u64> = Vec::new();
    for d in lists.iter_mut() {
        named.clear();
        named.extend(
            d.removed
                .iter()
                .map(|r| r.keeper)
                .filter(|k| !crate::is_index(*k)),
        );
        named.sort_unstable();
        named.dedup();
        d.names.reserve_exact(named.len());
        for k in &named {
            let id = ids.get(k).ok_or_else(|| Error::Input {
                url: url.to_string(),
                message: format!("no id for keeper {k:#x}"),
            })?;
            d.names.push((*k, id.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_skip_forward() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::Usage(e.to_string()))?;
        let storage = Storage::new();
        let root = Location::parse(&dir.path().to_string_lossy())?;
        let mut w = IdsWriter::default();
        for id in ["<urn:uuid:a>", "", "b-é", &"x".repeat(MAX_ID_BYTES + 3)] {
            w.push(id);
        }
        let loc = location(&root, "in");
        storage.put(&loc, &w.finish())?;
        let mut c = IdsCursor::open(&storage, &loc, 4096)?;
        assert_eq!(c.get(0)?, "<urn:uuid:a>");
        assert_eq!(c.get(2)?, "b-é");
        assert_eq!(c.get(3)?.len(), MAX_ID_BYTES);
        assert!(c.get(1).is_err(), "rows must ascend");
        let mut c = IdsCursor::open(&storage, &loc, 4096)?;
        assert!(c.get(4).is_err(), "past the end");
        Ok(())
    }
}
