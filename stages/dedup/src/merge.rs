//! The streaming k-way merge the buckets and index phases share: sorted sections of
//! run files (signatures, index runs) in, groups of equal keys out.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pipeline::Result;

use crate::runs::{Entry, SectionReader};
use crate::{Config, global, index_node};

/// Where the entries of a merge input come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Input `f` of this run: entries are documents, `global(f, row)`.
    Input(usize),
    /// Run `r` of the index of earlier runs (in name order): entries are index
    /// entries, global number `r` (see [`index_node`]).
    IndexRun(u32),
}

/// One sorted input of a merge.
#[derive(Debug)]
pub struct MergeInput {
    pub reader: SectionReader,
    pub origin: Origin,
}

/// An entry with its place in the merge. Items order by key, then index entries
/// before the documents of this run, then rank, then global number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Item {
    pub key: u128,
    /// A document of this run (`false`: an entry of the index, from an earlier run).
    pub from_run: bool,
    /// URL dedup's rank (latest date first); 0 otherwise.
    pub rank: u64,
    /// `global(file, row)`, or the index run's node for index entries.
    pub global: u64,
}

impl Item {
    /// Whether the entry is one of this run's documents (not of the index).
    pub fn is_document(&self) -> bool {
        self.from_run
    }
}

/// A streaming k-way merge that hands out groups of equal keys.
#[derive(Debug)]
pub struct Merger {
    inputs: Vec<MergeInput>,
    heap: BinaryHeap<Reverse<(Item, usize)>>,
}

fn item(e: &Entry, origin: Origin) -> Item {
    match origin {
        Origin::Input(f) => Item {
            key: e.key,
            from_run: true,
            rank: e.rank,
            global: global(f, e.row),
        },
        Origin::IndexRun(r) => Item {
            key: e.key,
            from_run: false,
            rank: 0,
            global: index_node(r),
        },
    }
}

impl Merger {
    /// Starts a merge (reads the first entry of every input).
    pub fn new(mut inputs: Vec<MergeInput>) -> Result<Self> {
        let mut heap = BinaryHeap::with_capacity(inputs.len());
        for (i, input) in inputs.iter_mut().enumerate() {
            if let Some(e) = input.reader.next_entry()? {
                heap.push(Reverse((item(&e, input.origin), i)));
            }
        }
        Ok(Merger { inputs, heap })
    }

    /// Fills `group` with the next run of equal keys, in order; false at the end.
    pub fn next_group(&mut self, group: &mut Vec<Item>) -> Result<bool> {
        group.clear();
        while let Some(Reverse((it, i))) = self.heap.peek().copied() {
            if group.first().is_some_and(|g| g.key != it.key) {
                break;
            }
            self.heap.pop();
            group.push(it);
            let input = &mut self.inputs[i];
            if let Some(e) = input.reader.next_entry()? {
                self.heap.push(Reverse((item(&e, input.origin), i)));
            }
        }
        Ok(!group.is_empty())
    }
}

/// Chunk size per merged input for `fan_in` inputs and `concurrent` merges at once.
pub fn chunk_bytes(config: &Config, fan_in: usize, concurrent: usize) -> u64 {
    let per = config.merge_memory_bytes / (2 * fan_in.max(1) * concurrent.max(1)) as u64;
    per.clamp(64 << 10, config.read_chunk_bytes.max(64 << 10))
}
