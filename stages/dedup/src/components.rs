//! The clusters phase in rounds of units, for pairs that do not fit one unit's memory:
//! the connected components of the candidate pairs by the alternating large-star and
//! small-star rounds of Kiveris et al. (SoCC 2014), over edge files partitioned by node.
//!
//! - Load: one unit per pairs file writes each pair in both directions, partitioned by
//!   node (a hash of its global number) into `partitions` sections.
//! - Large star (odd rounds) and small star (even rounds): one unit per partition merges
//!   the sections meant for it from every unit of the round before (sorted by node,
//!   then neighbour) and streams each node's neighbours once; each round's edges keep
//!   the components and pull every node towards its component's smallest node. A small
//!   star round that changes nothing after a large star round that changed nothing
//!   leaves stars: each component is its smallest node (the keeper) and its members.
//! - Finish: one unit per partition reads the stars (twice: sizes, then records) and
//!   writes, per member, (member, keeper, component size), partitioned by input group.
//! - Write: one unit per group of inputs writes their removal lists and a partial
//!   summary; then the phase's own unit (`clusters`, task 0) adds up the summary.
//!
//! The result is the one-unit union-find's, byte for byte: the component and its
//! smallest node do not depend on how the work was cut. A unit's memory is bounded by
//! `clusters_memory_bytes`: its output is sorted in memory up to half of it and spilled
//! to sorted parts beyond; its inputs are merged with read buffers from the other half.
//!
//! Tasks share the rounds: each takes units that no one has claimed (its own share
//! first), runs them (markers below `_rounds/<tag>/_done/`, as the unit planner's), and
//! waits only for units that another task claimed; a claim older than
//! [`CLAIM_SECONDS`], or one of its own earlier attempt, is taken over (the units write
//! the same bytes whoever runs them).
//! One task alone runs everything; any number of tasks give the same bytes. The
//! rounds' files are deleted once the removal lists are written.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{BufReader, Read, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pipeline::marker::{Marker, marker_location, read_marker, write_marker};
use pipeline::{Error, Location, Report, Result, RunOptions, Stats, Storage, Unit, UnitDone};

use crate::dups::{Dups, Removed, SUFFIX, apply_index_matches, summarize};
use crate::ids::{KeeperIds, attach_names};
use crate::merge::chunk_bytes;
use crate::minhash::mix;
use crate::pairs::PAIRS_HEADER;
use crate::runs::{Entry, FENCES, Layout, Section, SectionReader};
use crate::signatures::FileList;
use crate::{Config, is_index, split_global};

/// A claim on a unit older than this is taken over by another task.
pub const CLAIM_SECONDS: u64 = 900;
/// Seconds between looks at the markers while units claimed by other tasks run.
const POLL: Duration = Duration::from_millis(500);
/// Rounds after which the phase gives up (large and small star rounds converge in
/// O(log² n) rounds; 99 is far past any corpus).
const MAX_ROUNDS: usize = 99;
/// Edge files: node (8-byte key), neighbour (rank), no row.
const EDGES: Layout = Layout {
    key_bytes: 8,
    rank: true,
    row: false,
};
/// Member records: member (key), keeper (rank), component size (row).
const RECORDS: Layout = Layout {
    key_bytes: 8,
    rank: true,
    row: true,
};

/// Bytes of memory per candidate pair that the one-unit union-find needs (its hash map
/// holds up to two entries per pair); above the budget, the phase runs in rounds.
pub const UNION_FIND_BYTES_PER_PAIR: u64 = 64;

/// Keeps the C allocator to one arena for the whole process (glibc's `M_ARENA_MAX` 1,
/// as `MALLOC_ARENA_MAX=1` would). Each unit runs on a thread of its own, and glibc gives
/// threads arenas of their own that keep what the unit freed: at 10^8 planted documents
/// and 32 MiB per unit, two one-thread tasks peaked at 135 MiB each with the default
/// arenas and 43 MiB with `MALLOC_ARENA_MAX=1` (75 and 46 MiB at 10^7). The units
/// allocate large buffers and few small blocks. Call it first thing in a process that
/// runs the clusters phase (`mill-dedup clusters`, `mill step` of a clusters step): the
/// limit holds only for arenas not made yet. Returns whether the allocator took it;
/// elsewhere than glibc it does nothing and returns false.
#[allow(unsafe_code)]
pub fn one_allocator_arena() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets an allocator parameter; M_ARENA_MAX with 1 is a
        // documented value (mallopt(3)).
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The shape of one run of rounds.
#[derive(Debug, Clone)]
pub struct Rounds {
    /// Node partitions of the star rounds.
    pub partitions: usize,
    /// Input groups of the write round: `groups[g]` is a range of input positions.
    pub groups: Vec<std::ops::Range<usize>>,
    /// Where the rounds keep their files and markers.
    pub root: Location,
}

/// Partitions and input groups for `pairs` candidate pairs over `list` within
/// `budget` bytes per unit.
pub fn shape(list: &FileList, pairs: u64, budget: u64, root: Location) -> Rounds {
    // A star round's unit holds about its share of the edges (two per pair, 16 bytes),
    // sorted in memory up to half the budget.
    let edge_bytes = pairs.saturating_mul(32);
    let partitions = edge_bytes.div_ceil((budget / 2).max(1)).clamp(1, 4096) as usize;
    // A write unit holds the removal lists of its inputs (24 bytes per removed row, 8
    // per keeper) and the id of each keeper they name (about 100 bytes with a 47-byte
    // WARC-Record-ID, twice while they are handed out): 64 bytes per row on average when
    // about a third of the rows go, as on the web.
    let per_group = (budget / 2 / 64).max(1);
    let mut groups = Vec::new();
    let mut start = 0;
    let mut docs = 0u64;
    for (i, f) in list.files.iter().enumerate() {
        if i > start && docs + f.documents > per_group {
            groups.push(start..i);
            start = i;
            docs = 0;
        }
        docs += f.documents;
    }
    groups.push(start..list.files.len().max(start));
    Rounds {
        partitions,
        groups,
        root,
    }
}

/// The partition of a node (a fixed mix of its global number).
fn partition(node: u64, partitions: usize) -> u32 {
    (mix(node) % partitions as u64) as u32
}

fn edge(node: u64, neighbour: u64) -> Entry {
    Entry {
        key: (node as u128) << 64,
        rank: neighbour,
        row: 0,
    }
}

/// The part files one unit writes, `<unit>.<n>.part`: each section's bytes in section
/// order, then per section (offset, count) as u64, and the trailer (below).
struct Parts<'a> {
    storage: &'a Storage,
    dir: Location,
    unit: String,
    names: Vec<String>,
    bytes: u64,
}

impl<'a> Parts<'a> {
    fn new(storage: &'a Storage, dir: &Location, unit: &str) -> Self {
        Parts {
            storage,
            dir: dir.clone(),
            unit: unit.to_string(),
            names: Vec::new(),
            bytes: 0,
        }
    }

    /// Writes the next part: `section(s, w)` writes section `s` and returns its count
    /// (entries, or bytes for an empty layout) and its bytes.
    fn write(
        &mut self,
        sections: usize,
        layout: Layout,
        magic: &[u8; 8],
        mut section: impl FnMut(u32, &mut dyn Write) -> std::io::Result<(u64, u64)>,
    ) -> Result<()> {
        let rel = format!("{}.{:04}{PART}", self.unit, self.names.len());
        let loc = self.dir.join(&rel);
        self.storage.remove_stale_temporaries(&loc)?;
        let url = loc.to_string();
        let io = |e| Error::from_io_error("writing", &url, e);
        let mut w = std::io::BufWriter::with_capacity(1 << 20, self.storage.create(&loc)?);
        let mut table = Vec::with_capacity(sections * 16 + 16);
        let mut offset = 0u64;
        for s in 0..sections as u32 {
            let (count, bytes) = section(s, &mut w).map_err(io)?;
            table.extend_from_slice(&offset.to_le_bytes());
            table.extend_from_slice(&count.to_le_bytes());
            offset += bytes;
        }
        table.extend_from_slice(&(sections as u32).to_le_bytes());
        table.push(layout.key_bytes);
        table.push(u8::from(layout.rank) | (u8::from(layout.row) << 1));
        table.extend_from_slice(&[0, 0]);
        table.extend_from_slice(magic);
        w.write_all(&table).map_err(io)?;
        let writer = w
            .into_inner()
            .map_err(|e| Error::from_io_error("writing", &url, e.into_error()))?;
        self.bytes += writer.finish()?;
        self.names.push(rel);
        Ok(())
    }

    /// The parts written and their bytes.
    fn done(self) -> (Vec<String>, u64) {
        (self.names, self.bytes)
    }
}

/// Sorted output of one unit: entries by section, spilled to a new part whenever the
/// buffer holds `cap` entries. Each part has one section per partition of the next
/// round, or per input group.
struct Spill<'a> {
    parts: Parts<'a>,
    layout: Layout,
    sections: usize,
    cap: usize,
    buf: Vec<(u32, Entry)>,
}

impl<'a> Spill<'a> {
    fn new(
        storage: &'a Storage,
        dir: &Location,
        unit: &str,
        layout: Layout,
        sections: usize,
        budget: u64,
    ) -> Self {
        // Half the budget for the buffer, reserved whole at the first entry (no doubling
        // past it); an entry takes 48 bytes in it.
        let width = std::mem::size_of::<(u32, Entry)>() as u64;
        let cap = ((budget / 2) / width).clamp(1024, 1 << 28) as usize;
        Spill {
            parts: Parts::new(storage, dir, unit),
            layout,
            sections,
            cap,
            buf: Vec::new(),
        }
    }

    fn push(&mut self, section: u32, e: Entry) -> Result<()> {
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(self.cap);
        }
        self.buf.push((section, e));
        if self.buf.len() >= self.cap {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() && !self.parts.names.is_empty() {
            return Ok(());
        }
        self.buf.sort_unstable();
        self.buf.dedup();
        let (buf, layout) = (&self.buf, self.layout);
        let mut at = 0;
        let mut bytes = Vec::with_capacity(32);
        self.parts
            .write(self.sections, layout, PART_MAGIC, |s, w| {
                let start = at;
                while at < buf.len() && buf[at].0 == s {
                    bytes.clear();
                    layout.encode(&buf[at].1, &mut bytes);
                    w.write_all(&bytes)?;
                    at += 1;
                }
                let n = (at - start) as u64;
                Ok((n, n * layout.width() as u64))
            })?;
        self.buf.clear();
        Ok(())
    }

    /// Whether anything was pushed.
    fn pushed(&self) -> bool {
        !self.buf.is_empty() || !self.parts.names.is_empty()
    }

    /// Writes what is left; returns the parts (at least one) and bytes written.
    fn finish(mut self) -> Result<(Vec<String>, u64)> {
        self.flush()?;
        Ok(self.parts.done())
    }
}

/// The id parts of the ids round: per input group, (keeper u64, index run node u64 or
/// `u64::MAX`, length u32, id bytes) in ascending order of keeper, as the ids unit
/// finds them (no sort); a new part whenever the buffers hold half the budget. Same
/// trailer as the edge parts, with an empty layout, counts in bytes and its own magic.
struct IdSpill<'a> {
    parts: Parts<'a>,
    cap: usize,
    held: usize,
    buf: Vec<Vec<u8>>,
}

const ID_PART_MAGIC: &[u8; 8] = b"TMIDPT01";
/// Bytes of an id record before the id.
const ID_HEAD: usize = 20;
/// The run field of a keeper whose component matched no index run.
const NO_RUN: u64 = u64::MAX;
const NO_LAYOUT: Layout = Layout {
    key_bytes: 0,
    rank: false,
    row: false,
};

impl<'a> IdSpill<'a> {
    fn new(storage: &'a Storage, dir: &Location, unit: &str, sections: usize, budget: u64) -> Self {
        IdSpill {
            parts: Parts::new(storage, dir, unit),
            cap: (budget / 2).max(1 << 16) as usize,
            held: 0,
            buf: vec![Vec::new(); sections],
        }
    }

    fn push(&mut self, section: u32, keeper: u64, run: Option<u64>, id: &str) -> Result<()> {
        let b = &mut self.buf[section as usize];
        b.extend_from_slice(&keeper.to_le_bytes());
        b.extend_from_slice(&run.unwrap_or(NO_RUN).to_le_bytes());
        b.extend_from_slice(&(id.len() as u32).to_le_bytes());
        b.extend_from_slice(id.as_bytes());
        self.held += ID_HEAD + id.len();
        if self.held >= self.cap {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.held == 0 && !self.parts.names.is_empty() {
            return Ok(());
        }
        let buf = &mut self.buf;
        self.parts
            .write(buf.len(), NO_LAYOUT, ID_PART_MAGIC, |s, w| {
                let b = &mut buf[s as usize];
                w.write_all(b)?;
                let n = b.len() as u64;
                b.clear();
                Ok((n, n))
            })?;
        self.held = 0;
        Ok(())
    }

    fn finish(mut self) -> Result<(Vec<String>, u64)> {
        self.flush()?;
        Ok(self.parts.done())
    }
}

/// One section of id parts, read in order in chunks: (keeper, id) ascending.
struct IdReader<'a> {
    storage: &'a Storage,
    files: Vec<Location>,
    chunk: u64,
    file: usize,
    loc: Option<Location>,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    at: usize,
    section: usize,
}

impl<'a> IdReader<'a> {
    fn new(storage: &'a Storage, files: Vec<Location>, section: usize, chunk: u64) -> Self {
        IdReader {
            storage,
            files,
            chunk: chunk.max(1 << 16),
            file: 0,
            loc: None,
            pos: 0,
            end: 0,
            buf: Vec::new(),
            at: 0,
            section,
        }
    }

    /// Makes `n` bytes available at `self.at`, reading on; false at the section's end.
    fn fill(&mut self, n: usize) -> Result<bool> {
        while self.buf.len() - self.at < n {
            if self.pos == self.end {
                return Ok(false);
            }
            let Some(loc) = self.loc.as_ref() else {
                return Ok(false);
            };
            let want = self.chunk.max(n as u64).min(self.end - self.pos);
            let got = self.storage.read_range(loc, self.pos, want)?;
            if got.len() as u64 != want {
                return Err(Error::Input {
                    url: loc.to_string(),
                    message: format!("short read at {} of an id part", self.pos),
                });
            }
            self.pos += want;
            self.buf.drain(..self.at);
            self.at = 0;
            self.buf.extend_from_slice(&got);
        }
        Ok(true)
    }

    /// The next (keeper, index run, id).
    fn next(&mut self) -> Result<Option<(u64, Option<u64>, String)>> {
        loop {
            if self.fill(ID_HEAD)? {
                let b = &self.buf[self.at..];
                let u = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
                let (k, run) = (u(0), u(8));
                let len = u32::from_le_bytes(b[16..20].try_into().unwrap_or_default()) as usize;
                let url = self.loc.as_ref().map(|l| l.to_string()).unwrap_or_default();
                if !self.fill(ID_HEAD + len)? {
                    return Err(Error::Input {
                        url,
                        message: "an id part's section ends inside a record".into(),
                    });
                }
                let at = self.at + ID_HEAD;
                let id = std::str::from_utf8(&self.buf[at..at + len])
                    .map_err(|_| Error::Input {
                        url,
                        message: format!("keeper {k:#x}: id is not UTF-8"),
                    })?
                    .to_string();
                self.at = at + len;
                return Ok(Some((k, (run != NO_RUN).then_some(run), id)));
            }
            if self.at != self.buf.len() {
                return Err(Error::Input {
                    url: self.loc.as_ref().map(|l| l.to_string()).unwrap_or_default(),
                    message: "an id part's section ends inside a record".into(),
                });
            }
            // The next part (parts of lower input groups first: their keepers are smaller).
            let Some(loc) = self.files.get(self.file).cloned() else {
                return Ok(None);
            };
            self.file += 1;
            let size = self
                .storage
                .head(&loc)?
                .ok_or_else(|| Error::Input {
                    url: loc.to_string(),
                    message: "an id part of the clusters rounds is missing".into(),
                })?
                .size;
            let (_, offset, count) =
                part_table(self.storage, &loc, size, self.section, ID_PART_MAGIC)?;
            self.pos = offset;
            self.end = offset + count;
            self.buf.clear();
            self.at = 0;
            self.loc = Some(loc);
        }
    }
}

/// A k-way merge of one section of many part files, in entry order.
struct Merge {
    readers: Vec<SectionReader>,
    heap: BinaryHeap<Reverse<(Entry, usize)>>,
}

impl Merge {
    fn open(
        storage: &Storage,
        files: &[Location],
        section: usize,
        config: &Config,
    ) -> Result<Merge> {
        let budget = config.clusters_memory_bytes / 2;
        let chunk = chunk_bytes(
            &Config {
                merge_memory_bytes: budget,
                ..config.clone()
            },
            files.len(),
            1,
        );
        let mut readers = Vec::with_capacity(files.len());
        for loc in files {
            // Parts of a round are deleted once the round after it is done: a missing
            // part means a round already finished is being redone.
            let size = storage
                .head(loc)?
                .ok_or_else(|| Error::Input {
                    url: loc.to_string(),
                    message: "a part of a finished round is missing (deleted once the next round was done); clear the rounds' folder and rerun".into(),
                })?
                .size;
            let (layout, sec) = part_section(storage, loc, size, section)?;
            readers.push(SectionReader::open(
                storage,
                loc,
                layout,
                &sec,
                0..FENCES - 1,
                chunk,
            ));
        }
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(e) = r.next_entry()? {
                heap.push(Reverse((e, i)));
            }
        }
        Ok(Merge { readers, heap })
    }

    /// The next entry, skipping repeats of the one before.
    fn next(&mut self, last: &mut Option<Entry>) -> Result<Option<Entry>> {
        while let Some(Reverse((e, i))) = self.heap.pop() {
            if let Some(n) = self.readers[i].next_entry()? {
                self.heap.push(Reverse((n, i)));
            }
            if *last == Some(e) {
                continue;
            }
            *last = Some(e);
            return Ok(Some(e));
        }
        Ok(None)
    }
}

/// Suffix and magic of the part files of the rounds: fixed-width entries by section,
/// then per section (offset, count) as u64, the section count u32, the key width and
/// flags as in [`crate::runs`], two zero bytes and the magic.
const PART: &str = ".part";
const PART_MAGIC: &[u8; 8] = b"TMPART01";
const PART_TRAILER: u64 = 16;

/// The layout and the place of section `section` of the part file at `loc` (two small
/// ranged reads).
fn part_section(
    storage: &Storage,
    loc: &Location,
    size: u64,
    section: usize,
) -> Result<(Layout, Section)> {
    let (layout, offset, count) = part_table(storage, loc, size, section, PART_MAGIC)?;
    Ok((
        layout,
        Section {
            offset,
            count,
            fences: vec![0; FENCES],
        },
    ))
}

/// The layout, offset and count of section `section` of a part file whose trailer
/// ends in `magic` (for an id part the layout is empty and the count is bytes).
fn part_table(
    storage: &Storage,
    loc: &Location,
    size: u64,
    section: usize,
    magic: &[u8; 8],
) -> Result<(Layout, u64, u64)> {
    let bad = |m: &str| Error::Input {
        url: loc.to_string(),
        message: format!("not a part file of the clusters rounds ({size} bytes): {m}"),
    };
    if size < PART_TRAILER {
        return Err(bad("too short"));
    }
    let t = storage.read_range(loc, size - PART_TRAILER, PART_TRAILER)?;
    if t.len() != PART_TRAILER as usize || &t[8..] != magic {
        return Err(bad("no magic at the end"));
    }
    let sections = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as u64;
    let layout = Layout {
        key_bytes: t[4],
        rank: t[5] & 1 != 0,
        row: t[5] & 2 != 0,
    };
    if section as u64 >= sections || size < PART_TRAILER + sections * 16 {
        return Err(bad(&format!("no section {section} of {sections}")));
    }
    let table = size - PART_TRAILER - sections * 16;
    let b = storage.read_range(loc, table + section as u64 * 16, 16)?;
    let u = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
    let (offset, count) = (u(0), u(8));
    if b.len() != 16 || offset + count * layout.width().max(1) as u64 > table {
        return Err(bad("section past the table"));
    }
    Ok((layout, offset, count))
}

/// The node and neighbour of an edge entry.
fn ends(e: &Entry) -> (u64, u64) {
    ((e.key >> 64) as u64, e.rank)
}

/// The two kinds of star round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Star {
    Large,
    Small,
}

/// Runs the rounds up to the removal lists; returns the stats of this task's units.
/// `pairs_files`: the buckets phase's pairs files with their sizes, in order.
#[allow(clippy::too_many_arguments)]
pub fn run(
    storage: &Storage,
    opts: &RunOptions,
    config: &Config,
    list: &FileList,
    pairs_files: &[(Location, u64)],
    shape: &Rounds,
    hash: &str,
    output: &Location,
    finished: &dyn Fn() -> Result<bool>,
) -> Result<Report> {
    let ropts = RunOptions {
        output: shape.root.clone(),
        force: false,
        ..opts.clone()
    };
    let version = list.hash();
    let mut ctx = Shared {
        storage,
        ropts: ropts.clone(),
        hash,
        input: opts.input.to_string(),
        finished,
        report: Report::default(),
    };
    let p = shape.partitions;
    let budget = config.clusters_memory_bytes;
    let groups = shape.groups.len();
    let group_of: Vec<u32> = shape
        .groups
        .iter()
        .enumerate()
        .flat_map(|(g, r)| r.clone().map(move |_| g as u32))
        .collect();
    let group = |x: u64| -> u32 {
        split_global(x)
            .and_then(|(f, _)| group_of.get(f).copied())
            .unwrap_or(0)
    };
    // Load: each pairs file, both directions, partitioned by node; a document paired
    // with an index run goes to the matches (parts named `.mat`) by its input group.
    let units: Vec<Unit> = pairs_files
        .iter()
        .enumerate()
        .map(|(i, (_, size))| Unit {
            name: format!("c00-{i:05}"),
            size: *size,
            version: version.clone(),
        })
        .collect();
    let mut prev = ctx.share("dedup.clusters.load", units, true, |u| {
        let i = unit_number(u)?;
        let (loc, _) = &pairs_files[i];
        let mut out = Spill::new(storage, &shape.root, &u.name, EDGES, p, budget / 2);
        let mut matches = Spill::new(
            storage,
            &shape.root,
            &format!("{}{MATCHES}", u.name),
            EDGES,
            groups,
            budget / 2,
        );
        let mut r = BufReader::with_capacity(4 << 20, storage.open(loc)?);
        let mut pair = [0u8; PAIRS_HEADER];
        r.read_exact(&mut pair)
            .map_err(|e| Error::from_io_error("reading", loc, e))?;
        let mut read = 0u64;
        loop {
            match r.read_exact(&mut pair[..16]) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(Error::from_io_error("reading", loc, e)),
            }
            read += 16;
            let a = u64::from_le_bytes(pair[..8].try_into().unwrap_or_default());
            let b = u64::from_le_bytes(pair[8..16].try_into().unwrap_or_default());
            if is_index(a) {
                matches.push(group(b), edge(b, a))?;
                continue;
            }
            out.push(partition(a, p), edge(a, b))?;
            out.push(partition(b, p), edge(b, a))?;
        }
        let (mut parts, mut written) = out.finish()?;
        if matches.pushed() {
            let (more, more_bytes) = matches.finish()?;
            parts.extend(more);
            written += more_bytes;
        }
        Ok(unit_done(parts, read, written))
    })?;
    let loaded = prev.clone();
    prev = prev
        .into_iter()
        .map(|d| Done {
            parts: d
                .parts
                .into_iter()
                .filter(|l| !is_named(l, MATCHES))
                .collect(),
            changed: d.changed,
        })
        .collect();
    let mut round = 1;
    let mut changed_before = u64::MAX;
    loop {
        if round > MAX_ROUNDS {
            return Err(Error::Usage(format!(
                "dedup.clusters: no convergence after {MAX_ROUNDS} rounds"
            )));
        }
        let star = if round % 2 == 1 {
            Star::Large
        } else {
            Star::Small
        };
        let inputs = prev.clone();
        let units = named_units(&format!("c{round:02}"), p, &version);
        prev = ctx.share("dedup.clusters.star", units, true, |u| {
            let q = unit_number(u)?;
            star_unit(storage, config, shape, &inputs, q, &u.name, star)
        })?;
        drop_parts(storage, &ropts, &inputs)?;
        let changed: u64 = prev.iter().map(|r| r.changed).sum();
        tracing::info!(round, star = ?star, changed, "dedup.clusters round done");
        if star == Star::Small && changed == 0 && changed_before == 0 {
            break;
        }
        changed_before = changed;
        round += 1;
    }
    let inputs = prev.clone();
    let units = named_units("cf", p, &version);
    let records = ctx.share("dedup.clusters.finish", units, true, |u| {
        let q = unit_number(u)?;
        finish_unit(
            storage, config, shape, &inputs, q, &u.name, &group_of, groups,
        )
    })?;
    drop_parts(storage, &ropts, &inputs)?;
    // Matches of the index, turned into (component keeper, index run) by the keeper's
    // input group.
    // Only when some pair named an index run: the load units write no match parts
    // otherwise.
    let matches = parts_named(&loaded, MATCHES);
    let flags = if matches.is_empty() {
        Vec::new()
    } else {
        let units = named_units("cm", groups, &version);
        ctx.share("dedup.clusters.matches", units, true, |u| {
            let h = unit_number(u)?;
            matches_unit(
                storage, config, shape, &matches, &records, h, &u.name, &group,
            )
        })?
    };
    let stems: Vec<String> = list.files.iter().map(|f| f.stem.clone()).collect();
    let units = named_units("ci", groups, &version);
    let ids = ctx.share("dedup.clusters.ids", units, true, |u| {
        let g = unit_number(u)?;
        ids_unit(
            storage, config, shape, list, &stems, &records, &flags, g, &u.name,
        )
    })?;
    let units = named_units("cw", groups, &version);
    ctx.share("dedup.clusters.write", units, false, |u| {
        let g = unit_number(u)?;
        write_unit(
            storage, config, shape, list, &records, &ids, g, &u.name, output,
        )
    })?;
    Ok(ctx.report)
}

/// Deletes the parts a finished round read (task 0 only): nothing reads them again,
/// and the rounds then hold two rounds' edges at most. A late copy of a finished unit
/// that still reads them fails, and its task finds the phase finished by the others.
fn drop_parts(storage: &Storage, ropts: &RunOptions, read: &[Done]) -> Result<()> {
    if ropts.task != 0 {
        return Ok(());
    }
    for loc in read.iter().flat_map(|d| d.parts.iter()) {
        storage.delete(loc)?;
    }
    Ok(())
}

/// The units `<prefix>-<i>` for `i` in `0..n`.
fn named_units(prefix: &str, n: usize, version: &str) -> Vec<Unit> {
    (0..n)
        .map(|i| Unit {
            name: format!("{prefix}-{i:05}"),
            size: 0,
            version: version.to_string(),
        })
        .collect()
}

/// The number of a unit `<prefix>-<i>`.
fn unit_number(u: &Unit) -> Result<usize> {
    u.name
        .rsplit_once('-')
        .and_then(|(_, i)| i.parse().ok())
        .ok_or_else(|| Error::Usage(format!("{:?} is not a unit of the clusters rounds", u.name)))
}

/// What a finished round unit left: its parts and the edges it changed.
#[derive(Debug, Clone)]
struct Done {
    parts: Vec<Location>,
    changed: u64,
}

/// Suffix of the file in which a star unit records the edges it changed.
const CHANGED: &str = ".changed";

/// What every unit of the rounds shares: where they run, their identity, and what this
/// task's units did.
struct Shared<'a> {
    storage: &'a Storage,
    ropts: RunOptions,
    hash: &'a str,
    input: String,
    finished: &'a dyn Fn() -> Result<bool>,
    report: Report,
}

impl Shared<'_> {
    /// Runs the units of one round with the other tasks (see the module comment) and
    /// returns what every unit of the round left, in unit order (nothing when
    /// `collect` is false). A unit that two tasks run at once writes the same bytes
    /// twice: unlike the runner's units, a round unit never deletes what an earlier run
    /// of it wrote.
    fn share(
        &mut self,
        step: &str,
        units: Vec<Unit>,
        collect: bool,
        work: impl Fn(&Unit) -> Result<UnitDone> + Sync,
    ) -> Result<Vec<Done>> {
        let (storage, ropts, hash, input, finished) = (
            self.storage,
            &self.ropts,
            self.hash,
            self.input.as_str(),
            self.finished,
        );
        let report = &mut self.report;
        let tasks = ropts.tasks.max(1);
        let n = units.len();
        // This task's share first, then the others' in order.
        let mut order: Vec<usize> = (0..n).filter(|i| i % tasks == ropts.task).collect();
        order.extend((0..n).filter(|i| i % tasks != ropts.task));
        let mut done = vec![false; n];
        let claims = ropts.output.join("_claims/");
        loop {
            for &i in &order {
                if !done[i] {
                    done[i] =
                        read_marker(storage, &marker_location(&ropts.output, &units[i].name))?
                            .is_some_and(|m| m.matches_unit(&units[i].version, hash));
                }
            }
            if done.iter().all(|d| *d) {
                break;
            }
            // Other tasks may have run every unit of every round, written the phase's own
            // marker and deleted the rounds: then there is nothing left to do.
            if finished()? {
                return Err(Error::Usage(format!(
                    "{step}: the phase was finished by other tasks"
                )));
            }
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let mut take = Vec::new();
            for &i in &order {
                if done[i] || take.len() >= ropts.concurrency(n) {
                    continue;
                }
                let claim = claims.join(&format!("{}.json", units[i].name));
                // A claim is "<seconds since the epoch> <task>"; this task's own claims are
                // an earlier attempt's (killed, or running beside this retry) and never
                // waited for.
                let fresh = match storage.head(&claim)? {
                    Some(_) => {
                        let text = String::from_utf8_lossy(&storage.read(&claim)?).to_string();
                        let mut words = text.split_whitespace();
                        let at: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                        let by: Option<usize> = words.next().and_then(|w| w.parse().ok());
                        by != Some(ropts.task) && now.saturating_sub(at) < CLAIM_SECONDS
                    }
                    None => false,
                };
                if !fresh {
                    storage.put(&claim, format!("{now} {}", ropts.task).as_bytes())?;
                    take.push(&units[i]);
                }
            }
            if take.is_empty() {
                std::thread::sleep(POLL);
                continue;
            }
            let results: Vec<Result<Stats>> = std::thread::scope(|s| {
                let handles: Vec<_> = take
                    .iter()
                    .map(|unit| {
                        let work = &work;
                        s.spawn(move || run_one(storage, ropts, step, unit, hash, input, work))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(Error::Usage(format!("{step}: a unit's thread panicked")))
                        })
                    })
                    .collect()
            });
            for (unit, r) in take.iter().zip(results) {
                match r {
                    Ok(stats) => report.stats.merge(&stats),
                    // Two tasks that claim a unit at the same moment both run it; once
                    // one copy is done the rounds move on and delete what the other may
                    // still be reading. The unit's marker then says its work is done.
                    Err(e) => {
                        let marker = marker_location(&ropts.output, &unit.name);
                        if read_marker(storage, &marker)?
                            .is_some_and(|m| m.matches_unit(&unit.version, hash))
                        {
                            tracing::warn!(unit = %unit.name, error = %e, "a second copy of a unit failed after the first finished");
                            continue;
                        }
                        return Err(e);
                    }
                }
            }
        }
        if !collect {
            return Ok(Vec::new());
        }
        units
            .iter()
            .map(|u| {
                let m = read_marker(storage, &marker_location(&ropts.output, &u.name))?
                    .ok_or_else(|| {
                        Error::Usage(format!("{}: unit {} has no marker", ropts.output, u.name))
                    })?;
                let mut parts = Vec::new();
                let mut changed = 0;
                for rel in &m.outputs {
                    let loc = ropts.output.join(rel);
                    if rel.ends_with(CHANGED) {
                        changed = String::from_utf8_lossy(&storage.read(&loc)?)
                            .trim()
                            .parse()
                            .map_err(|_| Error::Input {
                                url: loc.to_string(),
                                message: "not a count".into(),
                            })?;
                    } else if rel.ends_with(PART) {
                        parts.push(loc);
                    }
                }
                Ok(Done { parts, changed })
            })
            .collect()
    }
}

/// Runs one unit and marks it done (its outputs first, the marker last).
fn run_one(
    storage: &Storage,
    ropts: &RunOptions,
    step: &str,
    unit: &Unit,
    hash: &str,
    input: &str,
    work: &(impl Fn(&Unit) -> Result<UnitDone> + Sync),
) -> Result<Stats> {
    let start = Instant::now();
    let marker_loc = marker_location(&ropts.output, &unit.name);
    storage.remove_stale_temporaries(&marker_loc)?;
    let UnitDone { outputs, mut stats } = work(unit)?;
    stats.seconds = start.elapsed().as_secs_f64();
    pipeline::runner::crash_point();
    let marker = Marker {
        step: step.to_string(),
        input: input.to_string(),
        input_size: unit.size,
        input_etag: None,
        source_hash: Some(unit.version.clone()),
        config_hash: hash.to_string(),
        outputs,
        stats: stats.clone(),
    };
    write_marker(storage, &marker_loc, &marker)?;
    Ok(stats)
}

fn all_parts(inputs: &[Done]) -> Vec<Location> {
    inputs
        .iter()
        .flat_map(|d| d.parts.iter().cloned())
        .collect()
}

/// One large or small star unit over partition `q`.
fn star_unit(
    storage: &Storage,
    config: &Config,
    shape: &Rounds,
    inputs: &[Done],
    q: usize,
    name: &str,
    star: Star,
) -> Result<UnitDone> {
    let p = shape.partitions;
    let budget = config.clusters_memory_bytes;
    let files = all_parts(inputs);
    let mut merge = Merge::open(storage, &files, q, config)?;
    let mut out = Spill::new(storage, &shape.root, name, EDGES, p, budget);
    let mut last = None;
    let mut group: Option<(u64, u64, u64)> = None; // node, its star's centre, neighbours seen
    let mut changed = 0u64;
    let mut read = 0u64;
    while let Some(e) = merge.next(&mut last)? {
        read += 1;
        let (u, v) = ends(&e);
        let first = group.is_none_or(|g| g.0 != u);
        match star {
            // Each node links its larger neighbours to the smallest of its
            // neighbourhood (itself included); the next round reads them by the larger
            // end only.
            Star::Large => {
                if first {
                    group = Some((u, u.min(v), 0));
                }
                let m = group.map_or(u, |g| g.1);
                if v > u {
                    out.push(partition(v, p), edge(v, m))?;
                    changed += u64::from(m != u);
                }
            }
            // Read by the larger end: each node links itself and its smaller neighbours
            // to the smallest of them; the next round reads both directions.
            Star::Small => {
                if v > u {
                    continue;
                }
                if first {
                    group = Some((u, v, 0));
                    out.push(partition(u, p), edge(u, v))?;
                    out.push(partition(v, p), edge(v, u))?;
                }
                if let Some(g) = group.as_mut() {
                    g.2 += 1;
                    if g.2 > 1 {
                        changed += 1;
                        out.push(partition(v, p), edge(v, g.1))?;
                        out.push(partition(g.1, p), edge(g.1, v))?;
                    }
                }
            }
        }
    }
    let (mut parts, bytes) = out.finish()?;
    let rel = format!("{name}{CHANGED}");
    storage.put(&shape.root.join(&rel), changed.to_string().as_bytes())?;
    parts.push(rel);
    Ok(unit_done(parts, read * 16, bytes))
}

/// The finish unit of partition `q`: the stars of the last round, read twice (the size
/// of each star, then one record per member), partitioned by the member's input group;
/// and, for the ids round, one request (keeper, the removed member's input group) per
/// removed member, partitioned by the keeper's input group (parts named `.req`).
#[allow(clippy::too_many_arguments)]
fn finish_unit(
    storage: &Storage,
    config: &Config,
    shape: &Rounds,
    inputs: &[Done],
    q: usize,
    name: &str,
    group_of: &[u32],
    groups: usize,
) -> Result<UnitDone> {
    let files = all_parts(inputs);
    // Pass 1: each centre (a node whose neighbours are all larger) and its star's size.
    let mut sizes: Vec<(u64, u64)> = Vec::new();
    let mut merge = Merge::open(storage, &files, q, config)?;
    let (mut last, mut node) = (None, None);
    while let Some(e) = merge.next(&mut last)? {
        let (u, v) = ends(&e);
        if node != Some(u) {
            node = Some(u);
            if v > u {
                sizes.push((u, 1));
            }
        }
        if let Some(s) = sizes.last_mut().filter(|s| s.0 == u) {
            s.1 += 1;
        }
    }
    // Pass 2: the records.
    let section = |x: u64| -> u32 {
        split_global(x)
            .and_then(|(f, _)| group_of.get(f).copied())
            .unwrap_or(0)
    };
    let half = config.clusters_memory_bytes / 2;
    let mut out = Spill::new(storage, &shape.root, name, RECORDS, groups, half);
    let mut requests = Spill::new(
        storage,
        &shape.root,
        &format!("{name}{REQUESTS}"),
        EDGES,
        groups,
        half,
    );
    let mut merge = Merge::open(storage, &files, q, config)?;
    let (mut last, mut node) = (None, None);
    let mut at = 0usize;
    let mut centre: Option<(u64, u32)> = None;
    let mut read = 0u64;
    while let Some(e) = merge.next(&mut last)? {
        read += 1;
        let (u, v) = ends(&e);
        if node != Some(u) {
            node = Some(u);
            centre = None;
            while at < sizes.len() && sizes[at].0 < u {
                at += 1;
            }
            if at < sizes.len() && sizes[at].0 == u {
                let size = sizes[at].1.min(u32::MAX as u64) as u32;
                centre = Some((u, size));
                out.push(section(u), record(u, u, size))?;
            }
        }
        if let Some((c, size)) = centre {
            out.push(section(v), record(v, c, size))?;
            if !is_index(c) {
                requests.push(section(c), edge(c, section(v) as u64))?;
            }
        }
    }
    let (mut parts, mut bytes) = out.finish()?;
    let (more, more_bytes) = requests.finish()?;
    parts.extend(more);
    bytes += more_bytes;
    Ok(unit_done(parts, read * 16, bytes))
}

/// What marks the finish units' request parts among their parts.
const REQUESTS: &str = ".req";
/// What marks the load units' parts of index matches among their parts.
const MATCHES: &str = ".mat";

/// Whether the part at `loc` is one of the kind `mark` (`.req`, `.mat`).
fn is_named(loc: &Location, mark: &str) -> bool {
    loc.to_string().contains(&format!("{mark}."))
}

/// The parts of `inputs` of the kind `mark`.
fn parts_named(inputs: &[Done], mark: &str) -> Vec<Location> {
    all_parts(inputs)
        .into_iter()
        .filter(|l| is_named(l, mark))
        .collect()
}

/// The parts of `inputs` that are records (no kind mark).
fn records_of(inputs: &[Done]) -> Vec<Location> {
    all_parts(inputs)
        .into_iter()
        .filter(|l| !is_named(l, REQUESTS))
        .collect()
}

/// The matches unit of input group `h`: its documents that matched the index (sorted),
/// joined with its records (sorted by member) to their component's keeper; writes
/// (keeper, index run) by the keeper's input group. A matched document in no record is
/// a component of one. Nothing to read when the group matched nothing.
#[allow(clippy::too_many_arguments)]
fn matches_unit(
    storage: &Storage,
    config: &Config,
    shape: &Rounds,
    matches: &[Location],
    records: &[Done],
    h: usize,
    name: &str,
    group: &dyn Fn(u64) -> u32,
) -> Result<UnitDone> {
    let budget = config.clusters_memory_bytes;
    let mut out = Spill::new(
        storage,
        &shape.root,
        name,
        EDGES,
        shape.groups.len(),
        budget / 2,
    );
    let half = Config {
        clusters_memory_bytes: budget / 2,
        ..config.clone()
    };
    let mut found = Merge::open(storage, matches, h, &half)?;
    let (mut last, mut last_record) = (None, None);
    let mut read = 0u64;
    let mut members: Option<Merge> = None;
    let mut record: Option<Entry> = None;
    while let Some(e) = found.next(&mut last)? {
        read += 1;
        let (m, run) = ends(&e);
        let members = match members.as_mut() {
            Some(r) => r,
            None => {
                let mut r = Merge::open(storage, &records_of(records), h, &half)?;
                record = r.next(&mut last_record)?;
                members.insert(r)
            }
        };
        while record.is_some_and(|r| ((r.key >> 64) as u64) < m) {
            record = members.next(&mut last_record)?;
            read += 1;
        }
        let keeper = match record {
            Some(r) if (r.key >> 64) as u64 == m => r.rank,
            _ => m,
        };
        out.push(group(keeper), edge(keeper, run))?;
    }
    let (parts, bytes) = out.finish()?;
    Ok(unit_done(parts, read * 16, bytes))
}

/// The ids unit of input group `g`: the requests for its keepers and the index runs
/// its components matched, both sorted by keeper. A keeper whose component matched the
/// index is answered with the run (to its own group and every requesting one); any
/// other with its id, from its input's id file (each streamed once), to the requesting
/// groups.
#[allow(clippy::too_many_arguments)]
fn ids_unit(
    storage: &Storage,
    config: &Config,
    shape: &Rounds,
    list: &FileList,
    stems: &[String],
    inputs: &[Done],
    flags: &[Done],
    g: usize,
    name: &str,
) -> Result<UnitDone> {
    let budget = config.clusters_memory_bytes;
    let half = Config {
        clusters_memory_bytes: budget / 2,
        ..config.clone()
    };
    let mut requests = Merge::open(storage, &parts_named(inputs, REQUESTS), g, &half)?;
    let mut runs = Merge::open(storage, &all_parts(flags), g, &half)?;
    let mut out = IdSpill::new(storage, &shape.root, name, shape.groups.len(), budget / 2);
    // One id file open at a time, read through a buffer of at most 8 MiB.
    let buffer = (budget / 8).clamp(64 << 10, 8 << 20) as usize;
    let mut lookup = KeeperIds::new(storage, &list.signatures, stems, buffer)?;
    let (mut last_request, mut last_run) = (None, None);
    let mut request = requests.next(&mut last_request)?;
    let mut run = runs.next(&mut last_run)?;
    let mut read = 0u64;
    let mut to: Vec<u32> = Vec::new();
    loop {
        let keeper = match (request, run) {
            (None, None) => break,
            (Some(a), Some(b)) => ends(&a).0.min(ends(&b).0),
            (Some(a), None) => ends(&a).0,
            (None, Some(b)) => ends(&b).0,
        };
        to.clear();
        while let Some(e) = request.filter(|e| ends(e).0 == keeper) {
            to.push(ends(&e).1 as u32);
            request = requests.next(&mut last_request)?;
            read += 1;
        }
        // The smallest run comes first; the others of the same keeper are skipped.
        let matched = run.filter(|e| ends(e).0 == keeper).map(|e| ends(&e).1);
        while run.is_some_and(|e| ends(&e).0 == keeper) {
            run = runs.next(&mut last_run)?;
            read += 1;
        }
        match matched {
            Some(node) => {
                to.push(g as u32);
                to.sort_unstable();
                to.dedup();
                for h in &to {
                    out.push(*h, keeper, Some(node), "")?;
                }
            }
            None => {
                let id = lookup.get(keeper)?.ok_or_else(|| Error::Input {
                    url: shape.root.to_string(),
                    message: format!("a request for the id of {keeper:#x}, which is no document"),
                })?;
                for h in &to {
                    out.push(*h, keeper, None, &id)?;
                }
            }
        }
    }
    let (parts, bytes) = out.finish()?;
    Ok(unit_done(parts, read * 16, bytes))
}

/// What a round unit leaves: its files and the bytes it read and wrote.
fn unit_done(outputs: Vec<String>, bytes_in: u64, bytes_out: u64) -> UnitDone {
    UnitDone {
        outputs,
        stats: Stats {
            bytes_in,
            bytes_out,
            ..Stats::default()
        },
    }
}

fn record(member: u64, keeper: u64, size: u32) -> Entry {
    Entry {
        key: (member as u128) << 64,
        rank: keeper,
        row: size,
    }
}

/// Name of the partial summary a write unit leaves.
fn partial(name: &str) -> String {
    format!("{name}.summary.json")
}

/// The write unit of input group `g`: the removal lists of its inputs and a partial
/// summary (its components' keepers, sizes and removals).
#[allow(clippy::too_many_arguments)]
fn write_unit(
    storage: &Storage,
    config: &Config,
    shape: &Rounds,
    list: &FileList,
    inputs: &[Done],
    ids: &[Done],
    g: usize,
    name: &str,
    output: &Location,
) -> Result<UnitDone> {
    let files = records_of(inputs);
    let range = shape.groups[g].clone();
    let mut per_file: Vec<Dups> = list.files[range.clone()]
        .iter()
        .map(|f| Dups {
            documents: f.documents,
            ..Dups::default()
        })
        .collect();
    let mut merge = Merge::open(storage, &files, g, config)?;
    let mut last = None;
    let mut read = 0u64;
    while let Some(e) = merge.next(&mut last)? {
        read += 1;
        let (member, keeper, size) = ((e.key >> 64) as u64, e.rank, e.row);
        let Some((f, row)) = split_global(member).and_then(|(f, row)| {
            (range.contains(&f) && (row as u64) < list.files[f].documents)
                .then_some((f - range.start, row))
        }) else {
            return Err(Error::Input {
                url: shape.root.to_string(),
                message: format!("member {member:#x} belongs to no input of group {g}"),
            });
        };
        if member == keeper {
            per_file[f].keepers.push((row, size));
        } else {
            per_file[f].removed.push(Removed {
                row,
                size,
                keeper,
                cluster: keeper,
            });
        }
    }
    // The keepers' ids and index matches, from the id parts of every ids unit in order
    // of input group (ascending keepers).
    let chunk = config.clusters_memory_bytes / 8;
    let mut answers = IdReader::new(storage, all_parts(ids), g, chunk);
    let (mut names, mut matched) = (HashMap::new(), HashMap::new());
    while let Some((keeper, run, id)) = answers.next()? {
        match run {
            Some(node) => {
                matched.insert(keeper, node);
            }
            None => {
                names.insert(keeper, id);
            }
        }
    }
    apply_index_matches(&mut per_file, range.start, &matched);
    attach_names(&mut per_file, &names, &shape.root.to_string())?;
    drop(names);
    let summary = summarize(&per_file, range.start);
    let mut written = 0u64;
    for (f, d) in list.files[range].iter().zip(&per_file) {
        let bytes = d.encode();
        written += bytes.len() as u64;
        let loc = output.join(&format!("{}{SUFFIX}", f.stem));
        storage.remove_stale_temporaries(&loc)?;
        storage.put(&loc, &bytes)?;
    }
    let rel = partial(name);
    let json = serde_json::to_vec(&summary).map_err(|e| Error::Usage(e.to_string()))?;
    storage.put(&shape.root.join(&rel), &json)?;
    Ok(unit_done(vec![rel], read * 20, written))
}

/// The partial summaries of the write units of `shape`, added up.
pub fn add_partials(storage: &Storage, shape: &Rounds) -> Result<crate::dups::Summary> {
    let mut total = crate::dups::Summary::default();
    for g in 0..shape.groups.len() {
        let loc = shape.root.join(&partial(&format!("cw-{g:05}")));
        let s: crate::dups::Summary =
            serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
                url: loc.to_string(),
                message: e.to_string(),
            })?;
        total.clusters += s.clusters;
        total.removed += s.removed;
        total.matched_index += s.matched_index;
        total.largest = total.largest.max(s.largest);
        for (size, n) in s.sizes {
            *total.sizes.entry(size).or_insert(0) += n;
        }
    }
    Ok(total)
}

/// Bytes read and written by all units of the rounds at `shape`, from their markers.
pub fn unit_bytes(storage: &Storage, shape: &Rounds) -> Result<(u64, u64)> {
    let (mut read, mut written) = (0, 0);
    for m in storage.list(&shape.root.join("_done/"))? {
        if let Some(marker) = read_marker(storage, &m.location)? {
            read += marker.stats.bytes_in;
            written += marker.stats.bytes_out;
        }
    }
    Ok((read, written))
}

/// Deletes the rounds' files and markers (after the phase's own unit is done).
pub fn clear(storage: &Storage, root: &Location) -> Result<()> {
    for m in storage.list(root)? {
        storage.delete(&m.location)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn partitions_spread_nodes() {
        let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
        for f in 1..50u64 {
            for row in 0..2000u64 {
                *counts.entry(partition((f << 32) | row, 16)).or_default() += 1;
            }
        }
        assert_eq!(counts.len(), 16);
        let (lo, hi) = (
            counts.values().min().copied().unwrap_or(0),
            counts.values().max().copied().unwrap_or(0),
        );
        assert!(hi < lo * 11 / 10, "{counts:?}");
    }
}
