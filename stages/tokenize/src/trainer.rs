//! The BPE trainer: the vocabulary and merges that HuggingFace `tokenizers` 0.22's
//! `BpeTrainer` learns, with its byte-level alphabet and the o200k pre-tokeniser of
//! [`crate::bpe`], counted and merged on every thread of the pool. The tests train both
//! on the same documents and compare the two `tokenizer.json` files byte for byte.
//!
//! Three phases:
//!
//! 1. [`count_words`]: every text is cut into pre-tokens by the compiled o200k grammar
//!    of the `tokenizers` 1.0 encoder (the cuts of the 0.22 regex, except around the
//!    code points of [`crate::bpe::SPLIT_DIFFERS`]: a text holding one is cut by the
//!    0.22 regex) and each distinct pre-token is counted. Each thread
//!    counts into its own tables, split by hash into 64 parts that are then summed
//!    part by part in parallel. Each thread takes the next batch of texts
//!    ([`TextBatches`]) as it finishes one; the training sample's reader decodes its
//!    shards on the threads that ask.
//! 2. [`learn`], before the first merge: the specials, then the 256 byte symbols in
//!    code-point order of their GPT-2 spelling (0.22's order), every word spelled in
//!    those ids, and every adjacent pair counted (`first_pairs`: a counting sort of
//!    the words by the pair's two bytes).
//! 3. The merges, in 0.22's order and with its quirks kept: a queue of (count, pair)
//!    entries each holding the words it was pushed for, checked lazily against the
//!    current count when popped; ties go to the smaller pair; a merged pair keeps its
//!    count, so words that gained the pair after it was queued are merged when their
//!    own entry comes up, which repeats the merge. A merge's words are rewritten in
//!    parallel when there are many of them.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use rayon::prelude::*;
use tokenizers_fast::pipeline::{PreTokenizer, PreTokenizerScratch, Span};
use tokenizers_fast::pre_tokenizers::split::Split;

use pipeline::{Error, Result};

use crate::bpe::{fast_split, reference_cuts, reference_split, splits_differ};

type Map<K, V> = HashMap<K, V, FixedState>;

/// Parts the word counts are split into by hash, summed side by side.
const PARTS: usize = 64;
/// Bytes of text a thread takes from the reader at a time.
const BATCH_BYTES: usize = 256 << 10;
/// A merge rewrites its words on several threads from this many words.
const PARALLEL_WORDS: usize = 4096;

/// A pre-token (its UTF-8 bytes) and how often it occurs in the sample.
pub type WordCount = (Box<[u8]>, u64);

/// The o200k split: the 1.0 encoder's compiled grammar, and the 0.22 regex for the
/// texts the two split differently ([`splits_differ`]).
struct Splits {
    fast: Split,
    reference: tokenizers::pre_tokenizers::split::Split,
}

/// One thread's counting state.
struct Counter {
    scratch: PreTokenizerScratch,
    spans: Vec<Span>,
    parts: Vec<Counts>,
}

/// Distinct words and their counts, keyed by [`word_hash`] (computed once per word).
type Counts = HashTable<WordCount>;

/// The hash a word is counted under. Bits 32-37 pick its part: the tables use the low
/// bits for the bucket and the top seven as a tag, so a part's words still spread.
fn word_hash(word: &[u8]) -> u64 {
    FixedState::default().hash_one(word)
}

fn part_of(hash: u64) -> usize {
    (hash >> 32) as usize % PARTS
}

/// Adds `n` to the count of `word` (hashed to `hash`) in `table`; a new word is kept
/// as given when owned, copied when borrowed.
fn add_count<W>(table: &mut Counts, hash: u64, word: W, n: u64)
where
    W: AsRef<[u8]> + Into<Box<[u8]>>,
{
    match table.find_mut(hash, |(w, _)| **w == *word.as_ref()) {
        Some((_, count)) => *count += n,
        None => {
            table.insert_unique(hash, (word.into(), n), |(w, _)| word_hash(w));
        }
    }
}

impl Counter {
    fn new() -> Counter {
        Counter {
            scratch: PreTokenizerScratch::default(),
            spans: Vec::new(),
            parts: (0..PARTS).map(|_| Counts::new()).collect(),
        }
    }

    fn count(&mut self, splits: &Splits, text: &str) -> Result<()> {
        self.spans.clear();
        if splits_differ(text) {
            let cuts = reference_cuts(&splits.reference, text)?;
            self.spans.extend(cuts.into_iter().map(|(start, end)| Span {
                start: start as u32,
                end: end as u32,
            }));
        } else {
            splits
                .fast
                .pre_tokenize(text, &mut self.scratch, &mut self.spans)
                .map_err(|e| Error::Usage(format!("pre-tokenising a document: {e}")))?;
        }
        let bytes = text.as_bytes();
        for span in &self.spans {
            let word = &bytes[span.start as usize..span.end as usize];
            if word.is_empty() {
                continue;
            }
            let hash = word_hash(word);
            add_count(&mut self.parts[part_of(hash)], hash, word, 1);
        }
        Ok(())
    }
}

/// Batches of texts for the counting threads, taken from any of them at once: each
/// thread asks for the next batch as it finishes one.
pub trait TextBatches: Sync {
    /// The next batch, or `None` when no texts are left.
    fn next_batch(&self) -> Option<Vec<String>>;
}

/// An iterator's texts in batches of at least 256 KiB (the last may be smaller),
/// handed out one at a time.
pub struct IterBatches<I>(Mutex<I>);

impl<I> std::fmt::Debug for IterBatches<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IterBatches")
    }
}

impl<I: Iterator<Item = String> + Send> IterBatches<I> {
    pub fn new(texts: I) -> Self {
        IterBatches(Mutex::new(texts))
    }
}

impl<I: Iterator<Item = String> + Send> TextBatches for IterBatches<I> {
    fn next_batch(&self) -> Option<Vec<String>> {
        let batch = fill_batch(&mut *self.0.lock().ok()?);
        (!batch.is_empty()).then_some(batch)
    }
}

/// The next texts of `texts` up to [`BATCH_BYTES`] or just past it.
fn fill_batch(texts: &mut impl Iterator<Item = String>) -> Vec<String> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    for text in texts {
        bytes += text.len();
        batch.push(text);
        if bytes >= BATCH_BYTES {
            break;
        }
    }
    batch
}

/// Cuts `texts` into batches of at least 256 KiB (the last may be smaller), leaving
/// out empty texts.
pub fn batch_texts(texts: impl IntoIterator<Item = String>) -> Vec<Vec<String>> {
    let mut texts = texts.into_iter().filter(|t| !t.is_empty());
    std::iter::from_fn(|| Some(fill_batch(&mut texts)).filter(|b| !b.is_empty())).collect()
}

/// Every distinct pre-token of `texts` with its count (see [`count_batches`]).
pub fn count_words<I>(texts: I) -> Result<Vec<WordCount>>
where
    I: Iterator<Item = String> + Send,
{
    count_batches(&IterBatches::new(texts))
}

/// Every distinct pre-token of the texts of `batches` with its count, in an order that
/// depends only on the words (by part, then by bytes), never on the threads.
pub fn count_batches<B: TextBatches + ?Sized>(batches: &B) -> Result<Vec<WordCount>> {
    let splits = Splits {
        fast: fast_split()?,
        reference: reference_split()?,
    };
    let stop = AtomicBool::new(false);
    // Every thread of the pool counts into its own tables: the reader's work (a
    // shard's decoding) is done inside `next_batch` by whichever thread asks.
    let counters: Vec<Result<Counter>> = rayon::broadcast(|_| {
        let mut counter = Counter::new();
        while !stop.load(AtomicOrdering::Relaxed) {
            let Some(batch) = batches.next_batch() else {
                break;
            };
            if let Err(e) = batch
                .iter()
                .try_for_each(|text| counter.count(&splits, text))
            {
                stop.store(true, AtomicOrdering::Relaxed);
                return Err(e);
            }
        }
        Ok(counter)
    });
    let mut columns: Vec<Vec<Counts>> = (0..PARTS).map(|_| Vec::new()).collect();
    for counter in counters {
        let counter = counter?;
        for (column, table) in columns.iter_mut().zip(counter.parts) {
            column.push(table);
        }
    }
    let parts: Vec<Vec<WordCount>> = columns
        .into_par_iter()
        .map(|mut tables| {
            tables.sort_by_key(|t| std::cmp::Reverse(t.len()));
            let mut tables = tables.into_iter();
            let mut sum = tables.next().unwrap_or_default();
            for table in tables {
                for (word, n) in table {
                    add_count(&mut sum, word_hash(&word), word, n);
                }
            }
            let mut words: Vec<WordCount> = sum.into_iter().collect();
            words.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            words
        })
        .collect();
    Ok(parts.concat())
}

/// GPT-2's spelling of each byte: the printable Latin-1 bytes stand for themselves,
/// the others (controls, space, 0x7f-0xa0, 0xad) for U+0100 onwards in byte order.
pub fn byte_chars() -> [char; 256] {
    let printable = |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xff).contains(&b) && b != 0xad;
    let mut chars = ['\0'; 256];
    let mut next = 0x100;
    for (b, c) in chars.iter_mut().enumerate() {
        let b = b as u32;
        let code = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        *c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
    }
    chars
}

/// What the trainer settles on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learned {
    /// Token spellings by id: the specials, the 256 byte symbols, then merged tokens.
    pub tokens: Vec<String>,
    /// The merges in the order made, as (left id, right id); a pair merged twice
    /// appears twice (its rank is the later one, as in 0.22).
    pub merges: Vec<(u32, u32)>,
}

/// A queued pair: its count when queued, and the slot of [`Queue::lists`] that holds
/// the words it was queued for (kept out of the heap, whose entries move on every
/// push and pop: 24 bytes an entry instead of 40).
struct Entry {
    count: u64,
    pair: u64,
    slot: u32,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.pair == other.pair
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// The larger count first; of equal counts, the smaller pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.count
            .cmp(&other.count)
            .then_with(|| other.pair.cmp(&self.pair))
    }
}

/// The queue of pairs to merge, with the lists of words of its entries.
struct Queue {
    heap: BinaryHeap<Entry>,
    lists: Vec<Vec<u32>>,
    /// Slots of `lists` whose entry was merged, to be reused.
    free: Vec<u32>,
}

impl Queue {
    /// A queue of `(count, pair, words)`, ordered by the heap in one pass.
    fn new(entries: Vec<(u64, u64, Vec<u32>)>) -> Queue {
        let mut lists = Vec::with_capacity(entries.len());
        let mut heap = Vec::with_capacity(entries.len());
        for (count, pair, words) in entries {
            heap.push(Entry {
                count,
                pair,
                slot: lists.len() as u32,
            });
            lists.push(words);
        }
        Queue {
            heap: BinaryHeap::from(heap),
            lists,
            free: Vec::new(),
        }
    }

    fn push(&mut self, count: u64, pair: u64, words: Vec<u32>) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.lists[slot as usize] = words;
                slot
            }
            None => {
                self.lists.push(words);
                (self.lists.len() - 1) as u32
            }
        };
        self.heap.push(Entry { count, pair, slot });
    }

    /// The words of a popped entry, its slot freed.
    fn take_words(&mut self, entry: &Entry) -> Vec<u32> {
        self.free.push(entry.slot);
        std::mem::take(&mut self.lists[entry.slot as usize])
    }
}

fn pack(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

fn unpack(pair: u64) -> (u32, u32) {
    ((pair >> 32) as u32, pair as u32)
}

/// The words being merged: the symbols of word `w` are `symbols[start[w]..][..len[w]]`
/// (the slice keeps its first length; merges shorten `len`).
struct Words {
    symbols: Vec<u32>,
    start: Vec<usize>,
    len: Vec<u32>,
}

/// A change to a pair's count caused by a merge in one word: (pair, +1 or -1, word).
type Change = (u64, i32, u32);

/// Merges `(a, b)` into `new` in one word's symbols, in place, noting the pairs lost
/// and made exactly as 0.22's `Word::merge` does: left to right, a made pair only when
/// the new symbol's length with its neighbour's stays under `max_len`.
#[allow(clippy::too_many_arguments)]
fn merge_word(
    symbols: &mut [u32],
    len: &mut u32,
    word: u32,
    (a, b, new): (u32, u32, u32),
    lens: &[usize],
    max_len: usize,
    changes: &mut Vec<Change>,
) {
    let n = *len as usize;
    let new_len = lens[a as usize] + lens[b as usize];
    let (mut read, mut write) = (0, 0);
    while read < n {
        if symbols[read] == a && read + 1 < n && symbols[read + 1] == b {
            if write > 0 {
                let before = symbols[write - 1];
                changes.push((pack(before, a), -1, word));
                if lens[before as usize] + new_len < max_len {
                    changes.push((pack(before, new), 1, word));
                }
            }
            if read + 2 < n {
                let after = symbols[read + 2];
                changes.push((pack(b, after), -1, word));
                if lens[after as usize] + new_len < max_len {
                    changes.push((pack(new, after), 1, word));
                }
            }
            symbols[write] = new;
            read += 2;
        } else {
            symbols[write] = symbols[read];
            read += 1;
        }
        write += 1;
    }
    *len = write as u32;
}

/// Merges `(a, b)` into `new` in every word of `which` (ascending) and returns the
/// changes in word order; splits the words over the pool when there are many.
fn merge_words(
    words: &mut Words,
    which: &[u32],
    merge: (u32, u32, u32),
    lens: &[usize],
    max_len: usize,
) -> Vec<Change> {
    let threads = rayon::current_num_threads();
    if which.len() < PARALLEL_WORDS || threads < 2 {
        let mut changes = Vec::new();
        for &w in which {
            let at = words.start[w as usize];
            let len = &mut words.len[w as usize];
            merge_word(
                &mut words.symbols[at..at + *len as usize],
                len,
                w,
                merge,
                lens,
                max_len,
                &mut changes,
            );
        }
        return changes;
    }
    // Cut the words into runs of about equal numbers of listed words, each run a
    // contiguous piece of the symbol array that one task owns.
    let runs = threads * 4;
    let mut pieces = Vec::with_capacity(runs);
    let (mut symbols, mut lens_rest) = (&mut words.symbols[..], &mut words.len[..]);
    let (mut first_word, mut first_symbol, mut taken) = (0usize, 0usize, 0usize);
    for k in 1..=runs {
        let upto = which.len() * k / runs;
        // The run ends at the word after the last listed word it holds.
        let end_word = if k == runs {
            words.start.len()
        } else if upto > taken {
            which[upto - 1] as usize + 1
        } else {
            first_word
        };
        let end_symbol = if end_word == words.start.len() {
            first_symbol + symbols.len()
        } else {
            words.start[end_word]
        };
        let (s, rest) = std::mem::take(&mut symbols).split_at_mut(end_symbol - first_symbol);
        let (l, rest_lens) = std::mem::take(&mut lens_rest).split_at_mut(end_word - first_word);
        pieces.push((first_word, first_symbol, s, l, &which[taken..upto]));
        symbols = rest;
        lens_rest = rest_lens;
        first_word = end_word;
        first_symbol = end_symbol;
        taken = upto;
    }
    let start = &words.start;
    let parts: Vec<Vec<Change>> = pieces
        .into_par_iter()
        .map(|(first_word, first_symbol, symbols, lens_run, listed)| {
            let mut changes = Vec::new();
            for &w in listed {
                let at = start[w as usize] - first_symbol;
                let len = &mut lens_run[w as usize - first_word];
                merge_word(
                    &mut symbols[at..at + *len as usize],
                    len,
                    w,
                    merge,
                    lens,
                    max_len,
                    &mut changes,
                );
            }
            changes
        })
        .collect();
    parts.concat()
}

/// Token spellings by id, and back.
#[derive(Default)]
struct Vocab {
    tokens: Vec<String>,
    ids: Map<String, u32>,
    /// Lengths in characters, what `max_token_length` bounds.
    lens: Vec<usize>,
}

impl Vocab {
    /// The id of `token`, added at the end when new.
    fn add(&mut self, token: String) -> u32 {
        if let Some(&id) = self.ids.get(&token) {
            return id;
        }
        let id = self.tokens.len() as u32;
        self.lens.push(token.chars().count());
        self.ids.insert(token.clone(), id);
        self.tokens.push(token);
        id
    }
}

/// What [`learn`] is asked for.
#[derive(Debug, Clone)]
pub struct LearnConfig<'a> {
    pub vocab_size: usize,
    pub min_frequency: u64,
    pub special_tokens: &'a [String],
    pub max_token_length: Option<usize>,
}

/// Every adjacent pair of bytes in `words` (the byte `b` spelled `byte_id[b]`) with
/// its count (the words' counts summed as 0.22's `i32` counts are, wrapping) and the
/// words it occurs in (ascending, each once), in pair order. A counting sort keyed by
/// the two bytes' ranks among the byte ids (so in the pairs' order): each thread's run
/// of words sorted on its own, then each pair's lists joined in run order.
fn first_pairs(words: &[WordCount], byte_id: &[u32; 256]) -> Vec<(u64, i32, Vec<u32>)> {
    const KEYS: usize = 1 << 16;
    let mut ids: Vec<(u32, u8)> = (0..=255u8).map(|b| (byte_id[b as usize], b)).collect();
    ids.sort_unstable();
    let mut rank = [0usize; 256];
    for (r, &(_, b)) in ids.iter().enumerate() {
        rank[b as usize] = r;
    }
    let key = |p: &[u8]| rank[p[0] as usize] << 8 | rank[p[1] as usize];
    let runs = rayon::current_num_threads().clamp(1, words.len().max(1));
    let runs: Vec<Run> = (0..runs)
        .into_par_iter()
        .map(|r| {
            let of = words.len() * r / runs..words.len() * (r + 1) / runs;
            let mut starts = vec![0u32; KEYS + 1];
            let mut sums = vec![0i32; KEYS];
            for (word, n) in &words[of.clone()] {
                for p in word.windows(2) {
                    let k = key(p);
                    starts[k + 1] += 1;
                    sums[k] = sums[k].wrapping_add(*n as i32);
                }
            }
            for k in 0..KEYS {
                starts[k + 1] += starts[k];
            }
            let mut next = starts.clone();
            let mut listed = vec![0u32; starts[KEYS] as usize];
            for w in of {
                for p in words[w].0.windows(2) {
                    let k = key(p);
                    listed[next[k] as usize] = w as u32;
                    next[k] += 1;
                }
            }
            Run {
                starts,
                sums,
                listed,
            }
        })
        .collect();
    (0..KEYS)
        .into_par_iter()
        .filter_map(|k| {
            let seen: usize = runs.iter().map(|r| r.of(k).len()).sum();
            if seen == 0 {
                return None;
            }
            let count = runs.iter().fold(0i32, |c, r| c.wrapping_add(r.sums[k]));
            let mut listed = Vec::with_capacity(seen);
            for run in &runs {
                listed.extend_from_slice(run.of(k));
            }
            listed.dedup();
            Some((pack(ids[k >> 8].0, ids[k & 0xff].0), count, listed))
        })
        .collect()
}

/// One thread's run of words sorted by pair: the words of pair key `k` are
/// `listed[starts[k]..starts[k + 1]]`, the sum of their counts `sums[k]`.
struct Run {
    starts: Vec<u32>,
    sums: Vec<i32>,
    listed: Vec<u32>,
}

impl Run {
    fn of(&self, k: usize) -> &[u32] {
        &self.listed[self.starts[k] as usize..self.starts[k + 1] as usize]
    }
}

/// Learns the vocabulary and merges from counted words (see the module notes).
pub fn learn(words: &[WordCount], config: &LearnConfig<'_>) -> Learned {
    let mut vocab = Vocab::default();
    for special in config.special_tokens {
        vocab.add(special.clone());
    }
    let chars = byte_chars();
    let mut alphabet = chars;
    alphabet.sort_unstable();
    for c in alphabet {
        vocab.add(c.to_string());
    }
    let mut byte_id = [0u32; 256];
    for (id, c) in byte_id.iter_mut().zip(chars) {
        *id = vocab.add(c.to_string());
    }
    let max_len = config.max_token_length.unwrap_or(usize::MAX);

    // The words in byte ids.
    let mut start = Vec::with_capacity(words.len());
    let mut len = Vec::with_capacity(words.len());
    let mut total = 0usize;
    for (w, _) in words {
        start.push(total);
        len.push(w.len() as u32);
        total += w.len();
    }
    let mut symbols = Vec::with_capacity(total);
    for (w, _) in words {
        symbols.extend(w.iter().map(|&b| byte_id[b as usize]));
    }
    let counts: Vec<u64> = words.iter().map(|(_, n)| *n).collect();
    // Every adjacent pair with its count and the words it occurs in.
    let queued = first_pairs(words, &byte_id);
    let mut words = Words {
        symbols,
        start,
        len,
    };
    let mut pair_counts: Map<u64, i32> = Map::default();
    pair_counts.reserve(queued.len());
    let mut entries = Vec::with_capacity(queued.len());
    for (pair, count, listed) in queued {
        pair_counts.insert(pair, count);
        if count > 0 {
            entries.push((count as u64, pair, listed));
        }
    }
    let mut queue = Queue::new(entries);

    let mut merges: Vec<(u32, u32)> = Vec::new();
    let mut made: Map<u64, Vec<u32>> = Map::default();
    while vocab.tokens.len() < config.vocab_size {
        let Some(mut top) = queue.heap.pop() else {
            break;
        };
        let now = pair_counts.get(&top.pair).copied().unwrap_or(0);
        if top.count != now as u64 {
            top.count = now as u64;
            queue.heap.push(top);
            continue;
        }
        if top.count < 1 || config.min_frequency > top.count {
            break;
        }
        let (a, b) = unpack(top.pair);
        let new = vocab.add(format!(
            "{}{}",
            vocab.tokens[a as usize], vocab.tokens[b as usize]
        ));
        merges.push((a, b));
        let listed = queue.take_words(&top);
        let changes = merge_words(&mut words, &listed, (a, b, new), &vocab.lens, max_len);
        for (pair, delta, w) in changes {
            let count = pair_counts.entry(pair).or_insert(0);
            *count = count.wrapping_add(delta.wrapping_mul(counts[w as usize] as i32));
            if delta > 0 {
                // Words come in ascending order: a repeat is the last one.
                let listed = made.entry(pair).or_default();
                if listed.last() != Some(&w) {
                    listed.push(w);
                }
            }
        }
        // The drain order is fixed by the changes (fixed hash seeds), whatever the
        // threads: it only orders entries of equal count and pair.
        for (pair, listed) in made.drain() {
            let count = pair_counts.get(&pair).copied().unwrap_or(0);
            if count > 0 {
                queue.push(count as u64, pair, listed);
            }
        }
    }
    Learned {
        tokens: vocab.tokens,
        merges,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;

    #[test]
    fn byte_spellings_are_gpt2s() {
        let chars = byte_chars();
        let ours: std::collections::HashSet<char> = chars.iter().copied().collect();
        assert_eq!(ours, ByteLevel::alphabet().into_iter().collect());
        assert_eq!((chars[b' ' as usize], chars[b'\n' as usize]), ('Ġ', 'Ċ'));
        assert_eq!(
            (chars[b'a' as usize], chars[0xad], chars[0xff]),
            ('a', 'Ń', 'ÿ')
        );
    }

    #[test]
    fn a_pair_that_overlaps_itself_is_merged_left_to_right() {
        // a a a a b -> aa aa b: the pairs lost and made, in 0.22's order.
        let (a, b, aa) = (1u32, 2u32, 3u32);
        let mut symbols = vec![a, a, a, a, b];
        let mut len = 5;
        let mut changes = Vec::new();
        let lens = [1, 1, 1, 2];
        merge_word(
            &mut symbols,
            &mut len,
            7,
            (a, a, aa),
            &lens,
            usize::MAX,
            &mut changes,
        );
        assert_eq!(&symbols[..len as usize], &[aa, aa, b]);
        let expected = vec![
            (pack(a, a), -1, 7),
            (pack(aa, a), 1, 7),
            (pack(aa, a), -1, 7),
            (pack(aa, aa), 1, 7),
            (pack(a, b), -1, 7),
            (pack(aa, b), 1, 7),
        ];
        assert_eq!(changes, expected);
        // With tokens at most 3 long, no pair of two `aa` is made.
        let mut symbols = vec![a, a, a, a];
        let mut len = 4;
        changes.clear();
        merge_word(
            &mut symbols,
            &mut len,
            0,
            (a, a, aa),
            &lens,
            4,
            &mut changes,
        );
        assert!(!changes.contains(&(pack(aa, aa), 1, 0)), "{changes:?}");
    }
}
