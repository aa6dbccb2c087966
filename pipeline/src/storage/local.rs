//! Local disk backend: temp file + rename for atomic visibility.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use bytes::Bytes;

use super::{Location, ObjectMeta, ObjectWriter};
use crate::error::{Error, Result};

const TEMP_SUFFIX: &str = ".tmp";

fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(TEMP_SUFFIX) && name.contains(".part-")
}

fn loc(path: &Path) -> Location {
    Location::Local(path.to_path_buf())
}

fn meta_of(path: &Path, relative: String, md: &fs::Metadata) -> ObjectMeta {
    let mtime = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    ObjectMeta {
        location: loc(path),
        relative,
        size: md.len(),
        etag: Some(format!("{}-{mtime}", md.len())),
    }
}

pub(super) fn list(root: &Path) -> Result<Vec<ObjectMeta>> {
    let md = match fs::metadata(root) {
        Ok(md) => md,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("listing", loc(root), e)),
    };
    if md.is_file() {
        return Ok(vec![meta_of(root, String::new(), &md)]);
    }
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    // What another process deletes while this lists it (a phase's rounds cleared by
    // the task that finished them) is left out, as an object store's listing would.
    let gone = |e: &io::Error| e.kind() == io::ErrorKind::NotFound;
    while let Some((dir, prefix)) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(Error::io("listing", loc(&dir), e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("listing", loc(&dir), e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(Error::BadAddress {
                    url: entry.path().display().to_string(),
                    reason: "file name is not UTF-8".into(),
                });
            };
            if is_temporary(name) {
                continue;
            }
            let path = entry.path();
            let relative = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            let md = match fs::metadata(&path) {
                Ok(md) => md,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(Error::io("listing", loc(&path), e)),
            };
            if md.is_dir() {
                stack.push((path, relative));
            } else if md.is_file() {
                out.push(meta_of(&path, relative, &md));
            }
        }
    }
    Ok(out)
}

pub(super) fn head(path: &Path) -> Result<Option<ObjectMeta>> {
    match fs::metadata(path) {
        Ok(md) if md.is_file() => Ok(Some(meta_of(path, String::new(), &md))),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("inspecting", loc(path), e)),
    }
}

fn open_file(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::NotFound {
            url: path.display().to_string(),
        },
        _ => Error::io("opening", loc(path), e),
    })
}

pub(super) fn open_from(path: &Path, offset: u64) -> Result<Box<dyn Read + Send>> {
    let mut f = open_file(path)?;
    if offset > 0 {
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io("seeking", loc(path), e))?;
    }
    Ok(Box::new(io::BufReader::with_capacity(1 << 20, f)))
}

pub(super) fn read_range(path: &Path, offset: u64, len: u64) -> Result<Bytes> {
    let mut f = open_file(path)?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io("seeking", loc(path), e))?;
    let mut buf = Vec::with_capacity(len.min(1 << 30) as usize);
    f.take(len)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io("reading", loc(path), e))?;
    Ok(Bytes::from(buf))
}

pub(super) fn delete(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("deleting", loc(path), e)),
    }
}

fn temp_prefix(target: &Path) -> Option<String> {
    target
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| format!(".{n}.part-"))
}

pub(super) fn remove_stale_temporaries(target: &Path) -> Result<()> {
    let (Some(dir), Some(prefix)) = (target.parent(), temp_prefix(target)) else {
        return Ok(());
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("listing", loc(dir), e)),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if let Some(name) = name.to_str()
            && name.starts_with(&prefix)
            && name.ends_with(TEMP_SUFFIX)
            && !writer_alive(&name[prefix.len()..])
        {
            delete(&entry.path())?;
        }
    }
    Ok(())
}

/// Whether the temporary named `<pid>-<n>.tmp` (after its prefix) belongs to a process
/// that is still running here: another copy of the same task (an engine may start a
/// retry while the first attempt runs) whose file must not be pulled from under it.
/// Without a process table (`/proc`), every temporary counts as stale.
fn writer_alive(rest: &str) -> bool {
    let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    Path::new("/proc/self").exists() && Path::new(&format!("/proc/{pid}")).exists()
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes into `.<name>.part-<pid>-<n>.tmp` beside the target, renamed on finish.
pub(super) struct LocalWriter {
    target: PathBuf,
    temp: PathBuf,
    file: Option<BufWriter<File>>,
    /// Whether `finish` waits for the disk before the rename (see [`Self::unsynced`]).
    sync: bool,
}

impl LocalWriter {
    pub(super) fn create(target: &Path) -> Result<Self> {
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let prefix = temp_prefix(target).ok_or_else(|| Error::BadAddress {
            url: target.display().to_string(),
            reason: "no file name to write".into(),
        })?;
        fs::create_dir_all(&parent)
            .map_err(|e| Error::io("creating directory", loc(&parent), e))?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = parent.join(format!("{prefix}{}-{n}{TEMP_SUFFIX}", std::process::id()));
        let file = File::create(&temp).map_err(|e| Error::io("creating", loc(&temp), e))?;
        Ok(LocalWriter {
            target: target.to_path_buf(),
            temp,
            file: Some(BufWriter::with_capacity(1 << 20, file)),
            sync: true,
        })
    }

    /// A writer whose `finish` renames without waiting for the disk: still whole or
    /// absent to a reader, but a machine's crash may lose it (a note that only informs).
    pub(super) fn unsynced(mut self) -> Self {
        self.sync = false;
        self
    }
}

impl Write for LocalWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.file.as_mut() {
            Some(f) => f.write(buf),
            None => Err(io::Error::other("write after finish")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl ObjectWriter for LocalWriter {
    fn finish(mut self: Box<Self>) -> Result<()> {
        let Some(buffered) = self.file.take() else {
            return Ok(());
        };
        let file = buffered
            .into_inner()
            .map_err(|e| Error::io("writing", loc(&self.temp), e.into_error()))?;
        if self.sync {
            file.sync_data()
                .map_err(|e| Error::io("syncing", loc(&self.temp), e))?;
        }
        drop(file);
        fs::rename(&self.temp, &self.target).map_err(|e| {
            let _ = fs::remove_file(&self.temp);
            Error::io("renaming into place", loc(&self.target), e)
        })
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.temp);
        }
    }
}
