//! One synchronous facade over local disk and S3.
//!
//! Every operation takes a [`Location`]. Local paths are the embedded default; `s3://`
//! goes through aws-sdk-s3 with the standard AWS configuration (credential chain,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`). The async runtime stays inside the S3 backend; callers see
//! `Read` and `Write`.
//!
//! Visibility rule: an object appears under its final name only when complete. On disk a
//! writer fills a hidden temporary file beside the target and renames it in
//! [`Writer::finish`]; on S3 a multipart upload is completed there. A writer dropped
//! without `finish` leaves nothing behind.

mod local;
mod location;
mod s3;

use std::io::{self, Read, Write};

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

pub use location::Location;
pub use s3::S3Options;

use crate::error::{Error, Result};

/// One listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Its full address.
    pub location: Location,
    /// Its path below the listed prefix, with `/` separators; empty when the listed
    /// address was the object itself.
    pub relative: String,
    /// Size in bytes.
    pub size: u64,
    /// The S3 ETag, or for local files a tag made of size and modification time.
    pub etag: Option<String>,
}

/// The storage facade. Cheap to clone; S3 is set up on first use.
#[derive(Clone, Default)]
pub struct Storage {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    options: S3Options,
    s3: OnceLock<std::result::Result<s3::S3, String>>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("options", &self.inner.options)
            .finish()
    }
}

impl Storage {
    /// A facade with the default S3 options.
    pub fn new() -> Self {
        Self::default()
    }

    /// A facade with explicit S3 options (retries, part size, concurrency).
    pub fn with_options(options: S3Options) -> Self {
        Storage {
            inner: Arc::new(Inner {
                options,
                s3: OnceLock::new(),
            }),
        }
    }

    fn s3(&self, loc: &Location) -> Result<&s3::S3> {
        self.inner
            .s3
            .get_or_init(|| s3::S3::connect(&self.inner.options).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|message| Error::S3 {
                op: "connecting to S3 for",
                url: loc.to_string(),
                message: message.clone(),
            })
    }

    /// Lists every object at or below `loc`, sorted by relative path.
    ///
    /// A `loc` naming one object lists just that object. Hidden temporary files of
    /// unfinished local writers are never listed.
    pub fn list(&self, loc: &Location) -> Result<Vec<ObjectMeta>> {
        let mut objects = match loc {
            Location::Local(path) => local::list(path)?,
            Location::S3 { bucket, key } => self.s3(loc)?.list(bucket, key)?,
        };
        objects.sort_by(|a, b| a.relative.cmp(&b.relative));
        Ok(objects)
    }

    /// Size and tag of one object, or `None` when it does not exist.
    pub fn head(&self, loc: &Location) -> Result<Option<ObjectMeta>> {
        match loc {
            Location::Local(path) => local::head(path),
            Location::S3 { bucket, key } => self.s3(loc)?.head(bucket, key),
        }
    }

    /// Whether the object exists.
    pub fn exists(&self, loc: &Location) -> Result<bool> {
        Ok(self.head(loc)?.is_some())
    }

    /// A streaming reader over the whole object.
    pub fn open(&self, loc: &Location) -> Result<Box<dyn Read + Send>> {
        self.open_from(loc, 0)
    }

    /// A streaming reader from byte `offset` to the end of the object.
    pub fn open_from(&self, loc: &Location, offset: u64) -> Result<Box<dyn Read + Send>> {
        match loc {
            Location::Local(path) => local::open_from(path, offset),
            Location::S3 { bucket, key } => self.s3(loc)?.open_from(bucket, key, offset),
        }
    }

    /// Reads `len` bytes at `offset` (fewer only at the end of the object).
    pub fn read_range(&self, loc: &Location, offset: u64, len: u64) -> Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        match loc {
            Location::Local(path) => local::read_range(path, offset, len),
            Location::S3 { bucket, key } => self.s3(loc)?.read_range(bucket, key, offset, len),
        }
    }

    /// Reads the whole object into memory.
    pub fn read(&self, loc: &Location) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.open(loc)?
            .read_to_end(&mut out)
            .map_err(|e| Error::from_io_error("reading", loc, e))?;
        Ok(out)
    }

    /// Starts writing an object; it becomes visible at [`Writer::finish`].
    pub fn create(&self, loc: &Location) -> Result<Writer> {
        self.writer(loc, true)
    }

    /// A writer for `loc`; `sync`: a local file waits for the disk before it is renamed.
    fn writer(&self, loc: &Location, sync: bool) -> Result<Writer> {
        let inner: Box<dyn ObjectWriter> = match loc {
            Location::Local(path) => {
                let file = local::LocalWriter::create(path)?;
                Box::new(if sync { file } else { file.unsynced() })
            }
            Location::S3 { bucket, key } => Box::new(self.s3(loc)?.create(bucket, key)),
        };
        Ok(Writer {
            inner: Some(inner),
            location: loc.clone(),
            written: 0,
        })
    }

    /// Writes a whole object at once, atomically.
    pub fn put(&self, loc: &Location, data: &[u8]) -> Result<()> {
        Self::put_whole(self.create(loc)?, data)
    }

    fn put_whole(mut w: Writer, data: &[u8]) -> Result<()> {
        w.write_all(data)
            .map_err(|e| Error::from_io_error("writing", &w.location, e))?;
        w.finish()?;
        Ok(())
    }

    /// Writes a whole object at once, atomically, without waiting for a local disk: for
    /// notes that only inform (start notes and their heartbeats, which `mill status`
    /// reads), where a machine's crash may lose the note but not the data. Saves one
    /// `fdatasync` of each input of every step. On S3 the same as [`Self::put`].
    pub fn put_note(&self, loc: &Location, data: &[u8]) -> Result<()> {
        Self::put_whole(self.writer(loc, false)?, data)
    }

    /// Deletes an object; deleting a missing object is not an error.
    pub fn delete(&self, loc: &Location) -> Result<()> {
        match loc {
            Location::Local(path) => local::delete(path),
            Location::S3 { bucket, key } => self.s3(loc)?.delete(bucket, key),
        }
    }

    /// Removes temporary files that a killed local writer left beside `loc`. S3 needs
    /// nothing here: an unfinished multipart upload is invisible (a bucket lifecycle
    /// rule reclaims its parts).
    pub fn remove_stale_temporaries(&self, loc: &Location) -> Result<()> {
        match loc {
            Location::Local(path) => local::remove_stale_temporaries(path),
            Location::S3 { .. } => Ok(()),
        }
    }

    /// Creates a bucket (for tests and benchmarks against an S3-compatible server);
    /// an existing bucket owned by us is fine.
    pub fn create_bucket(&self, loc: &Location) -> Result<()> {
        match loc {
            Location::Local(path) => {
                std::fs::create_dir_all(path).map_err(|e| Error::io("creating", loc, e))
            }
            Location::S3 { bucket, .. } => self.s3(loc)?.create_bucket(bucket),
        }
    }
}

/// How many writes [`each_in_flight`] keeps going at once, whatever a step's thread
/// count: their time is spent waiting on a disk's sync or a request's round trip, not
/// on a core. 16 is a choice, not a measured optimum (the AWS CLI's default
/// `max_concurrent_requests` is 10).
pub const IN_FLIGHT: usize = 16;

/// Runs `f` on every item, up to [`IN_FLIGHT`] at once on threads of its own rather
/// than a step's pool: for many small writes, which one thread ran one after another,
/// each waiting on its sync or its request. Results come back in the items' order; after
/// an error no new item starts, and the error of the first item that failed is returned.
pub fn each_in_flight<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let workers = IN_FLIGHT.min(items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut done: Vec<(usize, Result<R>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            break;
                        };
                        let result = f(item);
                        if result.is_err() {
                            failed.store(true, Ordering::Relaxed);
                        }
                        out.push((i, result));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// A backend writer: bytes go in through `Write`; `finish` makes the object visible;
/// dropping without `finish` must leave nothing behind.
pub(crate) trait ObjectWriter: Write + Send {
    fn finish(self: Box<Self>) -> Result<()>;
}

/// A writer for one object, from [`Storage::create`].
pub struct Writer {
    inner: Option<Box<dyn ObjectWriter>>,
    location: Location,
    written: u64,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("location", &self.location)
            .field("written", &self.written)
            .finish()
    }
}

impl Writer {
    /// Completes the object and makes it visible; returns the bytes written.
    pub fn finish(mut self) -> Result<u64> {
        match self.inner.take() {
            Some(inner) => inner.finish()?,
            None => {
                return Err(Error::Usage(format!(
                    "writer for {} already finished",
                    self.location
                )));
            }
        }
        Ok(self.written)
    }

    /// The address being written.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let inner = self
            .inner
            .as_mut()
            .ok_or_else(|| io::Error::other("write after finish"))?;
        let n = inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.inner.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}
