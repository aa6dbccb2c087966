//! A Parquet [`ChunkReader`] over storage: reads the footer with one ranged request
//! and each row group with one ranged request, so a shard on S3 costs a handful of
//! large GETs, never one request per page.

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use crate::storage::{Location, Storage};

/// Bytes fetched on a miss when the caller did not prefetch the range.
const MISS_FETCH_BYTES: u64 = 8 << 20;

#[derive(Clone)]
pub(crate) struct RangedFile {
    inner: Arc<Inner>,
}

struct Inner {
    storage: Storage,
    location: Location,
    len: u64,
    segments: Mutex<Vec<(u64, Bytes)>>,
}

impl RangedFile {
    pub(crate) fn new(storage: Storage, location: Location, len: u64) -> Self {
        RangedFile {
            inner: Arc::new(Inner {
                storage,
                location,
                len,
                segments: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Fetches `[start, end)` in one request and keeps it until [`RangedFile::evict`].
    pub(crate) fn prefetch(&self, start: u64, end: u64) -> Result<(), ParquetError> {
        let end = end.min(self.inner.len);
        if start >= end || self.cached(start, end - start).is_some() {
            return Ok(());
        }
        self.fetch(start, end - start).map(|_| ())
    }

    /// Drops all fetched ranges.
    pub(crate) fn evict(&self) {
        if let Ok(mut segments) = self.inner.segments.lock() {
            segments.clear();
        }
    }

    fn cached(&self, start: u64, len: u64) -> Option<Bytes> {
        let segments = self.inner.segments.lock().ok()?;
        segments.iter().find_map(|(offset, data)| {
            let end = offset + data.len() as u64;
            (start >= *offset && start + len <= end).then(|| {
                let from = (start - offset) as usize;
                data.slice(from..from + len as usize)
            })
        })
    }

    fn fetch(&self, start: u64, len: u64) -> Result<Bytes, ParquetError> {
        let data = self
            .inner
            .storage
            .read_range(&self.inner.location, start, len)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        if let Ok(mut segments) = self.inner.segments.lock() {
            segments.push((start, data.clone()));
        }
        Ok(data)
    }
}

impl Length for RangedFile {
    fn len(&self) -> u64 {
        self.inner.len
    }
}

impl ChunkReader for RangedFile {
    type T = Cursor<Bytes>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        // Serve the rest of the cached segment holding `start`, else fetch a window.
        let from_cache = {
            let segments = self
                .inner
                .segments
                .lock()
                .map_err(|_| ParquetError::General("range cache poisoned".into()))?;
            segments.iter().find_map(|(offset, data)| {
                let end = offset + data.len() as u64;
                (start >= *offset && start < end).then(|| data.slice((start - offset) as usize..))
            })
        };
        let data = match from_cache {
            Some(data) => data,
            None => {
                let len = MISS_FETCH_BYTES.min(self.inner.len.saturating_sub(start));
                self.fetch(start, len)?
            }
        };
        Ok(Cursor::new(data))
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        if let Some(data) = self.cached(start, length as u64) {
            return Ok(data);
        }
        let data = self
            .inner
            .storage
            .read_range(&self.inner.location, start, length as u64)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        if data.len() != length {
            return Err(ParquetError::EOF(format!(
                "wanted {length} bytes at {start}, the file has {}",
                self.inner.len
            )));
        }
        Ok(data)
    }
}
