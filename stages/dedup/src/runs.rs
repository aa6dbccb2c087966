//! Sorted runs: the file format of signatures (one file per input) and of index runs.
//!
//! A file holds sections (one per MinHash band; one for exact or URL keys), each a
//! sorted array of fixed-width little-endian entries: the key (8 bytes for band hashes,
//! 16 for text and URL hashes), then a rank (8 bytes, URL dedup only: smaller is
//! preferred), then the document's row in its input (4 bytes; absent in index runs).
//! Entries sort by (key, rank, row).
//!
//! The header sits at the end, so a writer can stream: per section its byte offset, its
//! entry count and 257 fences (`fence[k]` = index of the first entry whose key's top
//! byte is ≥ `k`), which let a reader fetch one band, or one hash range of a band, with
//! ranged reads. The last 16 bytes are the header's offset and the magic.
//!
//! ```text
//! entries of section 0 | entries of section 1 | … | header | header offset u64 | "TMRUNS01"
//! header: version u32, key bytes u8, flags u8 (1: rank, 2: row), 0u16,
//!         documents u64, sections u32, 0u32,
//!         then per section: offset u64, count u64, fences 257 × u64
//! ```

use std::io::Write;
use std::thread::JoinHandle;

use bytes::Bytes;
use pipeline::{Error, Location, Result, Storage};

/// Magic at the end of every run file.
pub const MAGIC: &[u8; 8] = b"TMRUNS01";
const VERSION: u32 = 1;
/// Fences per section: one per value of a key's top byte, plus the end.
pub const FENCES: usize = 257;
const FIXED_HEADER: usize = 24;
const SECTION_HEADER: usize = 16 + FENCES * 8;

/// One entry. Keys are left-aligned in 128 bits: an 8-byte key is the top half.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    pub key: u128,
    pub rank: u64,
    pub row: u32,
}

/// What each entry of a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// 8 or 16.
    pub key_bytes: u8,
    pub rank: bool,
    pub row: bool,
}

impl Layout {
    /// Bytes per entry.
    pub fn width(self) -> usize {
        self.key_bytes as usize + if self.rank { 8 } else { 0 } + if self.row { 4 } else { 0 }
    }

    pub(crate) fn encode(self, e: &Entry, out: &mut Vec<u8>) {
        if self.key_bytes == 8 {
            out.extend_from_slice(&((e.key >> 64) as u64).to_le_bytes());
        } else {
            out.extend_from_slice(&e.key.to_le_bytes());
        }
        if self.rank {
            out.extend_from_slice(&e.rank.to_le_bytes());
        }
        if self.row {
            out.extend_from_slice(&e.row.to_le_bytes());
        }
    }

    fn decode(self, b: &[u8]) -> Entry {
        let mut at = 0;
        let mut take = |n: usize| {
            let s = &b[at..at + n];
            at += n;
            s
        };
        let key = if self.key_bytes == 8 {
            (u64::from_le_bytes(take(8).try_into().unwrap_or_default()) as u128) << 64
        } else {
            u128::from_le_bytes(take(16).try_into().unwrap_or_default())
        };
        let rank = if self.rank {
            u64::from_le_bytes(take(8).try_into().unwrap_or_default())
        } else {
            0
        };
        let row = if self.row {
            u32::from_le_bytes(take(4).try_into().unwrap_or_default())
        } else {
            0
        };
        Entry { key, rank, row }
    }
}

/// One section of a file, as its header describes it.
#[derive(Debug, Clone)]
pub struct Section {
    pub offset: u64,
    pub count: u64,
    pub fences: Vec<u64>,
}

/// The header of a run file.
#[derive(Debug, Clone)]
pub struct Header {
    pub layout: Layout,
    /// Documents of the input (signature files), or 0.
    pub documents: u64,
    pub sections: Vec<Section>,
}

/// Streams sorted sections into a file; the header goes last.
#[derive(Debug)]
pub struct RunWriter {
    out: std::io::BufWriter<pipeline::storage::Writer>,
    layout: Layout,
    written: u64,
    sections: Vec<Section>,
    last: Option<Entry>,
    next_fence: usize,
    buf: Vec<u8>,
    url: String,
}

impl RunWriter {
    /// Starts a file at `loc` (visible only after [`RunWriter::finish`]).
    pub fn create(storage: &Storage, loc: &Location, layout: Layout) -> Result<Self> {
        storage.remove_stale_temporaries(loc)?;
        Ok(RunWriter {
            out: std::io::BufWriter::with_capacity(1 << 20, storage.create(loc)?),
            layout,
            written: 0,
            sections: Vec::new(),
            last: None,
            next_fence: 0,
            buf: Vec::with_capacity(32),
            url: loc.to_string(),
        })
    }

    /// Starts the next section.
    pub fn section(&mut self) {
        self.close_fences();
        self.next_fence = 0;
        self.sections.push(Section {
            offset: self.written,
            count: 0,
            fences: vec![0; FENCES],
        });
        self.last = None;
    }

    /// Appends an entry to the current section; entries must come sorted.
    pub fn push(&mut self, e: &Entry) -> Result<()> {
        if self.last.is_some_and(|l| l > *e) {
            return Err(Error::Usage(format!("{}: entries out of order", self.url)));
        }
        let Some(section) = self.sections.last_mut() else {
            return Err(Error::Usage(format!(
                "{}: entry before any section",
                self.url
            )));
        };
        // Fences up to this key's top byte that are not set yet start here.
        let top = (e.key >> 120) as usize;
        for f in &mut section.fences[self.next_fence..=top] {
            *f = section.count;
        }
        self.next_fence = self.next_fence.max(top + 1);
        section.count += 1;
        self.last = Some(*e);
        self.buf.clear();
        self.layout.encode(e, &mut self.buf);
        self.out
            .write_all(&self.buf)
            .map_err(|e| Error::from_io_error("writing", &self.url, e))?;
        self.written += self.buf.len() as u64;
        Ok(())
    }

    /// Fences above every key of the current section end at its count.
    fn close_fences(&mut self) {
        if let Some(s) = self.sections.last_mut() {
            for f in &mut s.fences[self.next_fence..] {
                *f = s.count;
            }
            self.next_fence = FENCES;
        }
    }

    /// Writes the header and makes the file visible; returns its size.
    pub fn finish(mut self, documents: u64) -> Result<u64> {
        self.close_fences();
        let mut h = Vec::with_capacity(FIXED_HEADER + self.sections.len() * SECTION_HEADER + 16);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.push(self.layout.key_bytes);
        h.push(u8::from(self.layout.rank) | (u8::from(self.layout.row) << 1));
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&documents.to_le_bytes());
        h.extend_from_slice(&(self.sections.len() as u32).to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        for s in &self.sections {
            h.extend_from_slice(&s.offset.to_le_bytes());
            h.extend_from_slice(&s.count.to_le_bytes());
            for f in &s.fences {
                h.extend_from_slice(&f.to_le_bytes());
            }
        }
        h.extend_from_slice(&self.written.to_le_bytes());
        h.extend_from_slice(MAGIC);
        self.out
            .write_all(&h)
            .map_err(|e| Error::from_io_error("writing", &self.url, e))?;
        let writer = self
            .out
            .into_inner()
            .map_err(|e| Error::from_io_error("writing", &self.url, e.into_error()))?;
        writer.finish()
    }
}

/// Reads the header of the run file at `loc` (two ranged reads at most).
pub fn read_header(storage: &Storage, loc: &Location, size: u64) -> Result<Header> {
    let bad = |what: &str| Error::Input {
        url: loc.to_string(),
        message: format!("not a tokenmill run file ({size} bytes): {what}"),
    };
    if size < 16 {
        return Err(bad("too short"));
    }
    let tail_len = size.min(64 * 1024);
    let tail = storage.read_range(loc, size - tail_len, tail_len)?;
    let t = &tail[tail.len() - 16..];
    if &t[8..] != MAGIC {
        return Err(bad("no magic at the end"));
    }
    let at = u64::from_le_bytes(t[..8].try_into().map_err(|_| bad("offset"))?);
    if at > size - 16 {
        return Err(bad("header offset past the end"));
    }
    let header_len = size - 16 - at;
    let bytes: Bytes = if header_len + 16 <= tail_len {
        let start = (tail_len - 16 - header_len) as usize;
        tail.slice(start..start + header_len as usize)
    } else {
        storage.read_range(loc, at, header_len)?
    };
    let u32_at = |o: usize| -> Result<u32> {
        Ok(u32::from_le_bytes(
            bytes
                .get(o..o + 4)
                .ok_or_else(|| bad("header cut short"))?
                .try_into()
                .map_err(|_| bad("header"))?,
        ))
    };
    let u64_at = |o: usize| -> Result<u64> {
        Ok(u64::from_le_bytes(
            bytes
                .get(o..o + 8)
                .ok_or_else(|| bad("header cut short"))?
                .try_into()
                .map_err(|_| bad("header"))?,
        ))
    };
    if u32_at(0)? != VERSION {
        return Err(bad("unknown version"));
    }
    let key_bytes = *bytes.get(4).ok_or_else(|| bad("header cut short"))?;
    let flags = *bytes.get(5).ok_or_else(|| bad("header cut short"))?;
    if key_bytes != 8 && key_bytes != 16 {
        return Err(bad("key width"));
    }
    let layout = Layout {
        key_bytes,
        rank: flags & 1 != 0,
        row: flags & 2 != 0,
    };
    let documents = u64_at(8)?;
    let n = u32_at(16)? as usize;
    let mut sections = Vec::with_capacity(n);
    for i in 0..n {
        let base = FIXED_HEADER + i * SECTION_HEADER;
        let offset = u64_at(base)?;
        let count = u64_at(base + 8)?;
        let mut fences = Vec::with_capacity(FENCES);
        for k in 0..FENCES {
            fences.push(u64_at(base + 16 + k * 8)?.min(count));
        }
        if offset + count * layout.width() as u64 > at {
            return Err(bad("section past the header"));
        }
        sections.push(Section {
            offset,
            count,
            fences,
        });
    }
    Ok(Header {
        layout,
        documents,
        sections,
    })
}

/// Streams the entries of one section whose key's top byte lies in `slots`, with large
/// ranged reads, the next one in flight while the current one is consumed.
#[derive(Debug)]
pub struct SectionReader {
    storage: Storage,
    loc: Location,
    layout: Layout,
    next_offset: u64,
    end: u64,
    chunk: u64,
    buf: Bytes,
    pos: usize,
    pending: Option<Fetch>,
}

/// A read in flight on its own thread, or one already done.
#[derive(Debug)]
enum Fetch {
    Thread(JoinHandle<Result<Bytes>>),
    Done(Result<Bytes>),
}

/// Local reads shorter than this are done in place: starting a thread costs more than
/// the read (a merge of many small sections started one per section and input; on two
/// threads the stacks' mappings cost more system time than the merge's work).
const LOCAL_READ_IN_PLACE: u64 = 1 << 20;

impl SectionReader {
    /// Reads entries `[fences[slots.start], fences[slots.end])` of `section`, fetching
    /// about `chunk_bytes` per request.
    pub fn open(
        storage: &Storage,
        loc: &Location,
        layout: Layout,
        section: &Section,
        slots: std::ops::Range<usize>,
        chunk_bytes: u64,
    ) -> Self {
        let w = layout.width() as u64;
        let first = section.fences[slots.start.min(FENCES - 1)];
        let last = if slots.end >= FENCES - 1 {
            section.count
        } else {
            section.fences[slots.end]
        };
        let mut r = SectionReader {
            storage: storage.clone(),
            loc: loc.clone(),
            layout,
            next_offset: section.offset + first * w,
            end: section.offset + last.max(first) * w,
            chunk: (chunk_bytes / w).max(1) * w,
            buf: Bytes::new(),
            pos: 0,
            pending: None,
        };
        r.fetch_next();
        r
    }

    fn fetch_next(&mut self) {
        if self.next_offset >= self.end {
            return;
        }
        let len = self.chunk.min(self.end - self.next_offset);
        let offset = self.next_offset;
        self.next_offset += len;
        self.pending = Some(if !self.loc.is_s3() && len < LOCAL_READ_IN_PLACE {
            Fetch::Done(self.storage.read_range(&self.loc, offset, len))
        } else {
            let (storage, loc) = (self.storage.clone(), self.loc.clone());
            Fetch::Thread(std::thread::spawn(move || {
                storage.read_range(&loc, offset, len)
            }))
        });
    }

    /// The next entry, or `None` at the end of the range.
    pub fn next_entry(&mut self) -> Result<Option<Entry>> {
        let w = self.layout.width();
        if self.pos + w > self.buf.len() {
            self.buf = match self.pending.take() {
                None => return Ok(None),
                Some(Fetch::Done(read)) => read?,
                Some(Fetch::Thread(handle)) => handle.join().map_err(|_| {
                    Error::Usage(format!("reader thread of {} panicked", self.loc))
                })??,
            };
            self.pos = 0;
            self.fetch_next();
            if self.buf.len() < w {
                return Err(Error::Input {
                    url: self.loc.to_string(),
                    message: format!("short read in a section before byte {}", self.next_offset),
                });
            }
        }
        let e = self.layout.decode(&self.buf[self.pos..self.pos + w]);
        self.pos += w;
        Ok(Some(e))
    }
}

/// The fence slots `[lo, hi)` of hash range `range` out of `ranges` (a power of two ≤ 256).
pub fn slots(range: usize, ranges: usize) -> std::ops::Range<usize> {
    let per = 256 / ranges.max(1);
    range * per..(range + 1) * per
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: u128, row: u32) -> Entry {
        Entry { key, rank: 0, row }
    }

    /// 8-byte keys with rows, as the signatures' sections.
    const KEYS_AND_ROWS: Layout = Layout {
        key_bytes: 8,
        rank: false,
        row: true,
    };

    /// `n` spread keys, sorted, written as one section (row = position) of a run at
    /// `loc` that stays open for more sections.
    fn section_of_keys(storage: &Storage, loc: &Location, n: u64) -> (RunWriter, Vec<u128>) {
        let mut keys: Vec<u128> = (0..n)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) as u128) << 64)
            .collect();
        keys.sort();
        let mut w = RunWriter::create(storage, loc, KEYS_AND_ROWS).expect("create");
        w.section();
        for (i, k) in keys.iter().enumerate() {
            w.push(&entry(*k, i as u32)).expect("push");
        }
        (w, keys)
    }

    #[test]
    fn round_trip_with_fences_and_ranges() {
        let dir = tempfile::tempdir().expect("tmp");
        let storage = Storage::new();
        let loc = Location::parse(&dir.path().join("a.run").to_string_lossy()).expect("loc");
        let layout = KEYS_AND_ROWS;
        let (mut w, keys) = section_of_keys(&storage, &loc, 5000);
        w.section();
        w.push(&entry(5u128 << 64, 9)).expect("push");
        let size = w.finish(5000).expect("finish");
        let h = read_header(&storage, &loc, size).expect("header");
        assert_eq!(h.documents, 5000);
        assert_eq!(h.sections.len(), 2);
        assert_eq!(h.sections[0].count, 5000);
        for ranges in [1, 2, 8, 256] {
            let mut all = Vec::new();
            for r in 0..ranges {
                let sl = slots(r, ranges);
                let mut rd =
                    SectionReader::open(&storage, &loc, layout, &h.sections[0], sl.clone(), 999);
                while let Some(e) = rd.next_entry().expect("read") {
                    let top = (e.key >> 120) as usize;
                    assert!(sl.contains(&top), "{top} outside {sl:?}");
                    all.push(e.key);
                }
            }
            assert_eq!(all, keys, "ranges {ranges}");
        }
        let mut rd = SectionReader::open(&storage, &loc, layout, &h.sections[1], 0..256, 1 << 20);
        assert_eq!(rd.next_entry().expect("read"), Some(entry(5u128 << 64, 9)));
        assert_eq!(rd.next_entry().expect("read"), None);
    }

    #[test]
    fn reads_in_place_and_on_a_thread_agree() {
        // Local reads under LOCAL_READ_IN_PLACE are done in place, longer ones on a
        // read-ahead thread: a section of 1.2 MB read both ways gives the same entries.
        let dir = tempfile::tempdir().expect("tmp");
        let storage = Storage::new();
        let loc = Location::parse(&dir.path().join("b.run").to_string_lossy()).expect("loc");
        let layout = KEYS_AND_ROWS;
        let (w, keys) = section_of_keys(&storage, &loc, 100_000);
        let size = w.finish(100_000).expect("finish");
        let h = read_header(&storage, &loc, size).expect("header");
        let bytes = h.sections[0].count * layout.width() as u64;
        assert!(
            bytes > LOCAL_READ_IN_PLACE,
            "{bytes} bytes: the thread path is not taken"
        );
        // In place only; a thread, then the tail in place; one read on a thread.
        for chunk in [4096, LOCAL_READ_IN_PLACE + 4096, 4 * LOCAL_READ_IN_PLACE] {
            let mut rd = SectionReader::open(&storage, &loc, layout, &h.sections[0], 0..256, chunk);
            let mut got = Vec::with_capacity(keys.len());
            while let Some(e) = rd.next_entry().expect("read") {
                got.push(e.key);
            }
            assert_eq!(got, keys, "chunk {chunk}");
        }
    }

    #[test]
    fn rejects_garbage_and_disorder() {
        let dir = tempfile::tempdir().expect("tmp");
        let storage = Storage::new();
        let loc = Location::parse(&dir.path().join("x").to_string_lossy()).expect("loc");
        storage
            .put(&loc, b"hello, this is not a run file at all")
            .expect("put");
        assert!(read_header(&storage, &loc, 36).is_err());
        let layout = Layout {
            key_bytes: 16,
            rank: true,
            row: true,
        };
        let mut w = RunWriter::create(&storage, &loc, layout).expect("create");
        w.section();
        w.push(&entry(9, 0)).expect("push");
        assert!(w.push(&entry(3, 0)).is_err());
    }
}
