//! fastText's supervised prediction, in Rust: the same numbers as fastText 0.9's
//! `predict` (every float operation in its order and precision, so scores are equal to
//! the last bit), without its per-word string building, its `unordered_map` of pruned
//! n-gram ids and its product-quantizer decoding per row, which made it the largest part
//! of the text step's CPU time.
//!
//! What it does, as fastText does it:
//! - The line is split into words at ASCII whitespace and NUL; a newline ends it with the
//!   end-of-sentence word `</s>`.
//! - A word in the vocabulary brings its row and the rows of its character n-grams
//!   (precomputed at load); another word brings its n-grams, hashed (FNV-1a over signed
//!   bytes) into the model's buckets, through the pruning index of a quantized model.
//!   Word n-grams (`wordNgrams` > 1) follow, hashed from the words' hashes. Each
//!   thread keeps the n-gram rows of the words out of the vocabulary it has met (up to
//!   4 MiB), so a repeated word is hashed and looked up once: the same rows in the
//!   same order, so the same sums.
//! - The hidden vector is the mean of those rows; the output layer (hierarchical
//!   softmax, softmax, or one-vs-all sigmoids) gives the labels' log-probabilities.
//!
//! Quantized input rows are decoded once at load (each value is the product fastText
//! computes per lookup, so sums are unchanged).

use std::cell::RefCell;

use hashbrown::HashTable;
use thread_local::ThreadLocal;

/// fastText's file magic and the newest format version it writes.
const MAGIC: i32 = 793_712_314;
const VERSION: i32 = 12;
/// The end-of-sentence word.
const EOS: &[u8] = b"</s>";
/// The default label prefix (fastText does not store it in the model).
const LABEL_PREFIX: &[u8] = b"__label__";
/// Product quantizer: 8-bit codes.
const KSUB: usize = 256;
/// The sigmoid table of fastText's losses.
const SIGMOID_TABLE_SIZE: i64 = 512;
const MAX_SIGMOID: i64 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LossKind {
    HierarchicalSoftmax,
    NegativeSampling,
    Softmax,
    OneVsAll,
}

/// `a % d` for a fixed 32-bit `d` without a division (Lemire, Kaser and Kurz,
/// "Faster remainder by direct computation", 2019): `M = ⌈2^128 / d⌉`, then the high
/// 128 bits of `(M a mod 2^128) d`. Exact for every 64-bit `a` when `d < 2^32`.
#[derive(Debug, Clone, Copy)]
struct FastMod {
    m: u128,
    d: u64,
}

impl FastMod {
    fn new(d: u32) -> FastMod {
        let d = u64::from(d.max(1));
        FastMod {
            m: (u128::MAX / u128::from(d)).wrapping_add(1),
            d,
        }
    }

    fn rem(self, a: u64) -> u64 {
        let low = self.m.wrapping_mul(u128::from(a));
        let lo = u128::from(low as u64) * u128::from(self.d);
        let hi = (low >> 64) * u128::from(self.d);
        ((hi + (lo >> 64)) >> 64) as u64
    }
}

/// The bytes of 8 that fastText's reader splits words at (ASCII whitespace: space,
/// `\t`, `\n`, `\v`, `\f`, `\r`; and NUL), as the top bit of each byte: exact byte
/// tests without carries between bytes (each sum stays under 256).
#[cfg(not(target_arch = "x86_64"))]
fn delimiters8(x: u64) -> u64 {
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const TOP: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| !(((v & LOW) + LOW) | v) & TOP;
    let low = x & LOW;
    // `\t` to `\r` are 9 to 13: at least 9 and not at least 14, top bit clear.
    let at_least = |n: u64| (low + (0x80 - n) * 0x0101_0101_0101_0101) & TOP;
    let control = at_least(9) & !at_least(14) & !x;
    zero(x) | zero(x ^ 0x2020_2020_2020_2020) | control
}

/// The positions where words start and end (alternately, from a start; an end is
/// the position after the word) in a text split at [`delimiters64`]'s bytes: 64 bytes
/// become a mask, and each change between a word byte and a delimiter is a bit.
fn word_edges(text: &[u8]) -> Vec<u32> {
    let mut edges = Vec::with_capacity(text.len() / 3 + 2);
    let mut inside = 0u64;
    let mut tail = [0u8; 64];
    // A block's edges (at most 64) are written here, then appended at once.
    let mut found = [0u32; 64];
    for (b, block) in text.chunks(64).enumerate() {
        let block: &[u8; 64] = match block.try_into() {
            Ok(block) => block,
            Err(_) => {
                // NUL pads the last block: delimiters, so a word at the end ends there.
                tail[..block.len()].copy_from_slice(block);
                &tail
            }
        };
        let word = !delimiters64(block);
        let mut changes = word ^ ((word << 1) | inside);
        inside = word >> 63;
        let base = (b * 64) as u32;
        let mut n = 0;
        while changes != 0 {
            found[n & 63] = base + changes.trailing_zeros();
            n += 1;
            changes &= changes - 1;
        }
        edges.extend_from_slice(&found[..n.min(64)]);
    }
    if inside == 1 {
        edges.push(text.len() as u32);
    }
    edges
}

/// Bit `i` set where `block[i]` is one of fastText's delimiters (space, `\t` to `\r`,
/// NUL), 16 bytes at a time (SSE2, which every x86-64 has).
#[cfg(target_arch = "x86_64")]
fn delimiters64(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_setzero_si128, _mm_sub_epi8,
    };
    let mut mask = 0u64;
    for i in 0..4 {
        // SAFETY: SSE2 is part of every x86-64 target, and the load reads the 16 bytes
        // at `16 * i` of the 64 of `block`.
        #[allow(unsafe_code)]
        let m = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().add(16 * i).cast());
            let space = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x20));
            let nul = _mm_cmpeq_epi8(x, _mm_setzero_si128());
            // `\t` to `\r` are 9 to 13: less 9, at most 4 (unsigned).
            let c = _mm_sub_epi8(x, _mm_set1_epi8(9));
            let control = _mm_cmpeq_epi8(_mm_min_epu8(c, _mm_set1_epi8(4)), c);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(space, nul), control)) as u16
        };
        mask |= u64::from(m) << (16 * i);
    }
    mask
}

/// [`delimiters8`] over a block of 64 bytes, where SSE2 is not there.
#[cfg(not(target_arch = "x86_64"))]
fn delimiters64(block: &[u8; 64]) -> u64 {
    let mut delimiters = 0u64;
    for (i, chunk) in block.chunks_exact(8).enumerate() {
        let mut x = [0u8; 8];
        x.copy_from_slice(chunk);
        let top = delimiters8(u64::from_le_bytes(x)) >> 7;
        delimiters |= (top.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * i);
    }
    delimiters
}

fn memchr_newline(line: &[u8]) -> Option<usize> {
    line.iter().position(|&b| b == b'\n')
}

/// A supervised fastText model, ready to predict.
pub struct Predictor {
    dim: usize,
    word_ngrams: i32,
    bucket: u32,
    bucket_mod: FastMod,
    minn: usize,
    maxn: usize,
    nwords: i32,
    /// Labels as the model writes them (`__label__en`).
    labels: Vec<String>,
    vocab: Vocab,
    /// Rows of each in-vocabulary word (`[word id, n-gram rows…]`), by word id.
    word_rows: Vec<(u32, u32)>,
    rows: Vec<u32>,
    prune: Prune,
    /// Input rows, decoded: `rows × dim`.
    input: Vec<f32>,
    /// Output rows (decoded centroids for a quantized output) and the factor fastText
    /// multiplies each dot product by (a quantized output's norms).
    output: Vec<f32>,
    output_scale: Option<Vec<f32>>,
    loss: LossKind,
    /// Hierarchical softmax tree: children of each inner node (`-1` for a leaf).
    tree: Vec<(i32, i32)>,
    sigmoid: Vec<f32>,
    /// Each thread's rows of the words out of the vocabulary it has met.
    oov: ThreadLocal<RefCell<OovRows>>,
    /// With [`Predictor::project`]: each input row's product with every output row
    /// (`rows × labels`; for two labels `rows`, the second's less the first's), the
    /// input rows themselves dropped.
    projection: Option<Vec<f32>>,
    /// With the projection of a model without character n-grams: the words of at most
    /// 16 bytes found by their bytes ([`ShortWords`]), no hash computed for them.
    short: Option<ShortWords>,
    /// With the projection of two labels of a model with character n-grams: each
    /// vocabulary word's rows summed (the word's row and its n-grams' rows), by word id,
    /// so that a known word is one read, not one per row.
    word_values: Option<Vec<f64>>,
}

impl std::fmt::Debug for Predictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predictor")
            .field("dim", &self.dim)
            .field("labels", &self.labels.len())
            .field("loss", &self.loss)
            .finish_non_exhaustive()
    }
}

/// How n-gram buckets map to rows.
enum Prune {
    /// Every bucket has its row (`nwords + bucket`).
    All,
    /// No n-gram has a row (a quantized model pruned to words only).
    Nothing,
    /// The buckets kept by quantization, each with its row.
    Map(IdMap),
}

/// Open addressing from a bucket to its row.
struct IdMap {
    keys: Vec<i32>,
    values: Vec<i32>,
    mask: usize,
    /// One bit per n-gram bucket: whether its key is held. Most n-grams of a
    /// quantized model are not (lid.176 keeps 42,765 of 2 million buckets), and this
    /// bitmap (256 KB for 2 million) answers them from the cache, where the table's
    /// probe would read memory.
    held: Vec<u64>,
}

impl IdMap {
    /// The map of `pairs`, whose keys are n-gram ids under `bucket` (a key outside it
    /// can never be asked for, and is left out).
    fn new(pairs: &[(i32, i32)], bucket: u32) -> IdMap {
        let cap = (pairs.len() * 2).next_power_of_two().max(16);
        let mut map = IdMap {
            keys: vec![-1; cap],
            values: vec![0; cap],
            mask: cap - 1,
            held: vec![0; bucket as usize / 64 + 1],
        };
        for &(k, v) in pairs
            .iter()
            .filter(|p| (0..bucket as i64).contains(&i64::from(p.0)))
        {
            let bit = k as usize;
            map.held[bit / 64] |= 1 << (bit % 64);
            let mut at = Self::slot(k, map.mask);
            while map.keys[at] != -1 && map.keys[at] != k {
                at = (at + 1) & map.mask;
            }
            map.keys[at] = k;
            map.values[at] = v;
        }
        map
    }

    /// Fibonacci hashing: the high bits of the product pick the slot.
    fn slot(k: i32, mask: usize) -> usize {
        let h = u64::from((k as u32).wrapping_mul(0x9E37_79B1));
        ((h * (mask as u64 + 1)) >> 32) as usize
    }

    fn get(&self, k: i32) -> Option<i32> {
        let bit = k as u32 as usize;
        if self
            .held
            .get(bit / 64)
            .is_none_or(|w| w & (1 << (bit % 64)) == 0)
        {
            return None;
        }
        let mut at = Self::slot(k, self.mask);
        loop {
            match self.keys[at] {
                -1 => return None,
                key if key == k => return Some(self.values[at]),
                _ => at = (at + 1) & self.mask,
            }
        }
    }
}

/// The dictionary's words and labels, found by fastText's hash of their bytes.
struct Vocab {
    /// Open addressing over the words' hashes ([`Slot`]).
    slots: Vec<Slot>,
    mask: usize,
    spans: Vec<(u32, u32)>,
    bytes: Vec<u8>,
    /// Entry type: 0 word, 1 label.
    kinds: Vec<u8>,
}

/// One slot of the vocabulary's table: a word's first 8 bytes (zero-padded: words
/// hold no NUL), its hash, and its id plus one (0: empty) with [`SHORT`] set when it
/// has at most 8 bytes, so that a short word is found from the slot alone.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    prefix: u64,
    hash: u32,
    id: u32,
}

/// In [`Slot::id`]: the word has at most 8 bytes.
const SHORT: u32 = 1 << 31;

/// A word's first 8 bytes, zero-padded.
fn prefix(word: &[u8]) -> u64 {
    if let Some(b) = word.first_chunk::<8>() {
        return u64::from_le_bytes(*b);
    }
    let mut x = 0u64;
    for (i, &b) in word.iter().enumerate() {
        x |= u64::from(b) << (8 * i);
    }
    x
}

impl Slot {
    fn new(word: &[u8], hash: u32, id: usize) -> Slot {
        let short = if word.len() <= 8 { SHORT } else { 0 };
        Slot {
            prefix: prefix(word),
            hash,
            id: (id as u32 + 1) | short,
        }
    }
}

/// The words of at most 16 bytes of a model without character n-grams, by their
/// bytes: each slot holds the word's bytes (zero-padded: a dictionary word holds no
/// NUL, and NUL splits the words of a text), its fastText hash (for the word
/// n-grams) and its row, so that a word is found, and its hash known, from one slot
/// read, without hashing its bytes one at a time. Built by [`Predictor::project`].
struct ShortWords {
    slots: Vec<ShortSlot>,
    /// `64 - log2(slots)`: a key's high bits pick the first slot.
    shift: u32,
}

/// 32 bytes, aligned: a slot never spans two cache lines.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct ShortSlot {
    lo: u64,
    hi: u64,
    hash: u32,
    /// The word's input row, or [`ShortSlot::EMPTY`] or [`ShortSlot::LABEL`].
    row: u32,
    /// For a projection of two labels, the word's row in it (read with the slot,
    /// not from the table); else 0.
    value: f32,
}

impl ShortSlot {
    const EMPTY: u32 = u32::MAX;
    const LABEL: u32 = u32::MAX - 1;
}

/// A word of a line as [`Predictor::short_rows`] looks it up: its bytes (zero for a
/// word longer than [`ShortWords::MAX`]), its first slot and its span (`u32::MAX`
/// twice for the `</s>` the reader adds).
struct ShortKey {
    lo: u64,
    hi: u64,
    at: u32,
    start: u32,
    end: u32,
}

/// `MASKS[n]` keeps the first `n` bytes of a little-endian word of 8.
const MASKS: [u64; 9] = {
    let mut m = [0u64; 9];
    let mut i = 1;
    while i < 9 {
        m[i] = if i == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * i)) - 1
        };
        i += 1;
    }
    m
};

impl ShortWords {
    /// Longest word held.
    const MAX: usize = 16;

    /// The bytes `text[s..s + len]` (`len` at most 16) as two zero-padded words.
    #[inline]
    fn bytes_of(text: &[u8], s: usize, len: usize) -> (u64, u64) {
        let word = |b: &[u8]| {
            let mut x = [0u8; 8];
            x.copy_from_slice(b);
            u64::from_le_bytes(x)
        };
        // 16 bytes from the word on where the text has them (the masks cut the rest).
        let (lo, hi) = match text.get(s..s + 16) {
            Some(b) => (word(&b[..8]), word(&b[8..])),
            None => {
                let mut b = [0u8; 16];
                b[..len].copy_from_slice(&text[s..s + len]);
                (word(&b[..8]), word(&b[8..]))
            }
        };
        (lo & MASKS[len.min(8)], hi & MASKS[len.saturating_sub(8)])
    }

    fn first(&self, lo: u64, hi: u64) -> usize {
        let k = (lo ^ hi.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(31))
            .wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        (k >> self.shift) as usize
    }

    /// `values`: a projection of two labels, by row (the words' rows come first).
    fn new(vocab: &Vocab, values: Option<&[f32]>) -> ShortWords {
        let held = vocab
            .spans
            .iter()
            .filter(|&&(s, e)| (e - s) as usize <= Self::MAX)
            .count();
        let cap = (held * 2).next_power_of_two().max(16);
        let mut table = ShortWords {
            slots: vec![
                ShortSlot {
                    lo: 0,
                    hi: 0,
                    hash: 0,
                    row: ShortSlot::EMPTY,
                    value: 0.0,
                };
                cap
            ],
            shift: 64 - cap.trailing_zeros(),
        };
        let mask = cap - 1;
        for (id, &(s, e)) in vocab.spans.iter().enumerate() {
            let word = &vocab.bytes[s as usize..e as usize];
            if word.len() > Self::MAX {
                continue;
            }
            let (lo, hi) = Self::bytes_of(word, 0, word.len());
            let mut at = table.first(lo, hi);
            while table.slots[at].row != ShortSlot::EMPTY {
                at = (at + 1) & mask;
            }
            table.slots[at] = ShortSlot {
                lo,
                hi,
                hash: hash(word),
                row: if vocab.kinds[id] == 1 {
                    ShortSlot::LABEL
                } else {
                    id as u32
                },
                value: values.and_then(|v| v.get(id)).copied().unwrap_or(0.0),
            };
        }
        table
    }

    /// The slot of the word `(lo, hi)`, from its first slot (already read).
    #[inline]
    fn find_from(&self, lo: u64, hi: u64, at: usize, first: ShortSlot) -> Option<ShortSlot> {
        let mask = self.slots.len() - 1;
        let (mut at, mut slot) = (at, first);
        loop {
            if slot.row == ShortSlot::EMPTY {
                return None;
            }
            if slot.lo == lo && slot.hi == hi {
                return Some(slot);
            }
            at = (at + 1) & mask;
            slot = self.slots[at];
        }
    }
}

impl Vocab {
    /// The slot of a vocabulary word of hash `h` in this table: the first free one
    /// from `h`.
    fn insert(slots: &mut [Slot], mask: usize, slot: Slot) {
        let mut at = slot.hash as usize & mask;
        while slots[at].id != 0 {
            at = (at + 1) & mask;
        }
        slots[at] = slot;
    }

    /// Whether a word (found as `id`, or not found) is a label, which brings no row:
    /// a label of the dictionary, or a word with the label prefix outside it.
    fn is_label(&self, id: Option<usize>, word: &[u8]) -> bool {
        match id {
            Some(id) => self.kinds[id] == 1,
            None => word.starts_with(LABEL_PREFIX),
        }
    }

    /// The id of `word` (hashed to `h`), given its first slot already read.
    fn find_from(&self, word: &[u8], h: u32, first: Slot) -> Option<usize> {
        let mut at = h as usize & self.mask;
        let mut slot = first;
        let p = prefix(word);
        let short = word.len() <= 8;
        loop {
            if slot.id == 0 {
                return None;
            }
            if slot.hash == h && slot.prefix == p {
                let id = (slot.id & !SHORT) as usize - 1;
                match (slot.id & SHORT != 0, short) {
                    (true, true) => return Some(id),
                    (false, false) => {
                        let (s, e) = self.spans[id];
                        if same_bytes(&self.bytes[s as usize..e as usize], word) {
                            return Some(id);
                        }
                    }
                    _ => {}
                }
            }
            at = (at + 1) & self.mask;
            slot = self.slots[at];
        }
    }
}

/// Bytes a thread's cache for one model holds at most (its rows, words and entries: 4
/// MiB, about 40,000 words of lid.176's n-grams); past it the cache starts again empty.
const OOV_BYTES: usize = 4 << 20;
/// Words longer than this (in bytes) are not kept: long runs without spaces (addresses,
/// encoded data) rarely repeat and would fill the cache.
const OOV_WORD_BYTES: usize = 64;

/// The n-gram rows of the words out of the vocabulary that one thread has met: a
/// word's n-grams are hashed and looked up in the pruning index once, not at each
/// occurrence. The rows are the ones [`Predictor::subwords`] gives, in its order, so
/// the sums (and the scores) are the same to the last bit.
struct OovRows {
    /// At most this many bytes are held (see [`OovRows::held`]).
    limit: usize,
    /// The kept words, by their fastText hash (spread by a multiply).
    table: HashTable<OovWord>,
    bytes: Vec<u8>,
    rows: Vec<u32>,
}

/// A kept word: its hash, where its bytes are in `OovRows::bytes` and its rows in
/// `OovRows::rows`.
#[derive(Clone, Copy)]
struct OovWord {
    hash: u32,
    bytes: (u32, u32),
    rows: (u32, u32),
}

impl Default for OovRows {
    fn default() -> Self {
        OovRows::with_limit(OOV_BYTES)
    }
}

impl OovRows {
    fn with_limit(limit: usize) -> Self {
        OovRows {
            limit,
            table: HashTable::new(),
            bytes: Vec::new(),
            rows: Vec::new(),
        }
    }

    fn spread(h: u32) -> u64 {
        u64::from(h).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// Bytes held: rows, word bytes and the entries (a word without rows counts too).
    fn held(&self) -> usize {
        self.rows.len() * size_of::<u32>()
            + self.bytes.len()
            + self.table.len() * (size_of::<OovWord>() + 1)
    }

    /// Where in `rows` the rows of `word` (hashed to `h`) are; the first time, `make`
    /// appends them to the vector it is given.
    fn rows_of(
        &mut self,
        word: &[u8],
        h: u32,
        make: impl FnOnce(&mut Vec<u32>),
    ) -> std::ops::Range<usize> {
        let found = self.table.find(Self::spread(h), |w| {
            w.hash == h && same_bytes(&self.bytes[w.bytes.0 as usize..w.bytes.1 as usize], word)
        });
        if let Some(w) = found {
            return w.rows.0 as usize..w.rows.1 as usize;
        }
        if self.held() >= self.limit {
            self.table.clear();
            self.bytes.clear();
            self.rows.clear();
        }
        let start = self.rows.len();
        make(&mut self.rows);
        let entry = OovWord {
            hash: h,
            bytes: (
                self.bytes.len() as u32,
                (self.bytes.len() + word.len()) as u32,
            ),
            rows: (start as u32, self.rows.len() as u32),
        };
        self.bytes.extend_from_slice(word);
        self.table
            .insert_unique(Self::spread(h), entry, |w| Self::spread(w.hash));
        start..self.rows.len()
    }
}

/// `a == b` for byte strings, without a call to `memcmp` for the short ones (most
/// words): up to 16 bytes, two loads of each that overlap and cover every byte.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    fn at<const N: usize>(s: &[u8], i: usize) -> [u8; N] {
        let mut x = [0u8; N];
        x.copy_from_slice(&s[i..i + N]);
        x
    }
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => at::<4>(a, 0) == at::<4>(b, 0) && at::<4>(a, n - 4) == at::<4>(b, n - 4),
        8..=16 => at::<8>(a, 0) == at::<8>(b, 0) && at::<8>(a, n - 8) == at::<8>(b, n - 8),
        _ => a == b,
    }
}

/// `word` between fastText's `<` and `>`, in `buf`.
fn bracketed<'a>(buf: &'a mut Vec<u8>, word: &[u8]) -> &'a [u8] {
    buf.clear();
    buf.push(b'<');
    buf.extend_from_slice(word);
    buf.push(b'>');
    buf
}

/// fastText's word hash: FNV-1a over the bytes taken as signed chars.
fn hash(bytes: &[u8]) -> u32 {
    bytes.iter().fold(2_166_136_261u32, |h, &b| step(h, b))
}

fn step(h: u32, b: u8) -> u32 {
    (h ^ (b as i8 as i32 as u32)).wrapping_mul(16_777_619)
}

/// fastText's `std_log`.
fn std_log(x: f32) -> f32 {
    (f64::from(x) + 1e-5).ln() as f32
}

/// Little-endian reader over a model file.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "the file ends at byte {} inside a {n}-byte field at byte {}",
                self.bytes.len(),
                self.at
            ));
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn f32s(&mut self, n: usize) -> Result<Vec<f32>, String> {
        let bytes = self.take(n.checked_mul(4).ok_or("matrix size overflows")?)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
    fn count(&mut self, what: &str) -> Result<usize, String> {
        let n = self.i64()?;
        usize::try_from(n).map_err(|_| format!("{what} {n} is negative"))
    }
}

/// A product quantizer as fastText stores it.
struct Quantizer {
    nsubq: usize,
    dsub: usize,
    lastdsub: usize,
    centroids: Vec<f32>,
}

impl Quantizer {
    fn load(r: &mut Reader<'_>) -> Result<Quantizer, String> {
        let dim = r.i32()?;
        let nsubq = r.i32()?;
        let dsub = r.i32()?;
        let lastdsub = r.i32()?;
        if dim <= 0 || nsubq <= 0 || dsub <= 0 || lastdsub <= 0 {
            return Err(format!(
                "bad product quantizer: dim {dim}, {nsubq} sub-quantizers of {dsub} (last {lastdsub})"
            ));
        }
        let centroids = r.f32s(dim as usize * KSUB)?;
        Ok(Quantizer {
            nsubq: nsubq as usize,
            dsub: dsub as usize,
            lastdsub: lastdsub as usize,
            centroids,
        })
    }

    /// fastText's `get_centroids(m, code)`.
    fn centroid(&self, m: usize, code: u8) -> &[f32] {
        let (start, len) = if m == self.nsubq - 1 {
            (
                m * KSUB * self.dsub + code as usize * self.lastdsub,
                self.lastdsub,
            )
        } else {
            ((m * KSUB + code as usize) * self.dsub, self.dsub)
        };
        self.centroids.get(start..start + len).unwrap_or(&[])
    }

    /// The decoded row `t` (each value times `alpha`, as fastText's `addcode`).
    fn decode(&self, codes: &[u8], t: usize, alpha: f32, out: &mut [f32]) {
        let code = &codes[self.nsubq * t..self.nsubq * (t + 1)];
        for (m, &c) in code.iter().enumerate() {
            for (n, v) in self.centroid(m, c).iter().enumerate() {
                if let Some(o) = out.get_mut(m * self.dsub + n) {
                    *o = alpha * v;
                }
            }
        }
    }
}

/// A matrix as fastText stores it: rows decoded, and per-row norms when quantized with
/// `qnorm` (kept apart so dot products multiply by them last, as fastText does).
struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
    norms: Option<Vec<f32>>,
}

impl Matrix {
    fn dense(r: &mut Reader<'_>) -> Result<Matrix, String> {
        let rows = r.count("matrix rows")?;
        let cols = r.count("matrix columns")?;
        let data = r.f32s(rows.checked_mul(cols).ok_or("matrix size overflows")?)?;
        Ok(Matrix {
            rows,
            cols,
            data,
            norms: None,
        })
    }

    /// A quantized matrix; `fold_norms` multiplies rows by their norms (input rows,
    /// which fastText adds scaled), else the norms are kept apart (output rows).
    fn quantized(r: &mut Reader<'_>, fold_norms: bool) -> Result<Matrix, String> {
        let qnorm = r.u8()? != 0;
        let rows = r.count("matrix rows")?;
        let cols = r.count("matrix columns")?;
        let codesize = r.i32()?;
        let codes = r.take(usize::try_from(codesize).map_err(|_| "negative code size")?)?;
        let pq = Quantizer::load(r)?;
        if codes.len() < rows * pq.nsubq {
            return Err(format!(
                "{} codes for {rows} rows of {} sub-quantizers",
                codes.len(),
                pq.nsubq
            ));
        }
        let norms = if qnorm {
            let codes = r.take(rows)?.to_vec();
            let npq = Quantizer::load(r)?;
            Some(
                codes
                    .iter()
                    .map(|&c| npq.centroid(0, c).first().copied().unwrap_or(0.0))
                    .collect::<Vec<f32>>(),
            )
        } else {
            None
        };
        let mut data = vec![0f32; rows * cols];
        for t in 0..rows {
            let alpha = match (&norms, fold_norms) {
                (Some(n), true) => n[t],
                _ => 1.0,
            };
            pq.decode(codes, t, alpha, &mut data[t * cols..(t + 1) * cols]);
        }
        Ok(Matrix {
            rows,
            cols,
            data,
            norms: if fold_norms { None } else { norms },
        })
    }
}

impl Predictor {
    /// Reads a fastText model file (`.bin` or `.ftz`, format versions up to 12).
    pub fn from_bytes(bytes: &[u8]) -> Result<Predictor, String> {
        let mut r = Reader { bytes, at: 0 };
        if r.i32()? != MAGIC {
            return Err("bad magic number".into());
        }
        let version = r.i32()?;
        if version > VERSION {
            return Err(format!("format version {version} is newer than {VERSION}"));
        }
        let dim = r.i32()?;
        let _ws = r.i32()?;
        let _epoch = r.i32()?;
        let _min_count = r.i32()?;
        let _neg = r.i32()?;
        let word_ngrams = r.i32()?;
        let loss = match r.i32()? {
            1 => LossKind::HierarchicalSoftmax,
            2 => LossKind::NegativeSampling,
            3 => LossKind::Softmax,
            4 => LossKind::OneVsAll,
            other => return Err(format!("unknown loss {other}")),
        };
        let model = r.i32()?;
        if model != 3 {
            return Err(format!(
                "model type {model} is not supervised: it cannot classify"
            ));
        }
        let bucket = r.i32()?;
        let minn = r.i32()?;
        let mut maxn = r.i32()?;
        let _lr_update_rate = r.i32()?;
        let _t = r.array::<8>()?;
        if version == 11 {
            // fastText: old supervised models do not use character n-grams.
            maxn = 0;
        }
        if dim <= 0 || bucket < 0 {
            return Err(format!("bad dimensions: dim {dim}, bucket {bucket}"));
        }

        // Dictionary.
        let size = r.i32()?;
        let nwords = r.i32()?;
        let nlabels = r.i32()?;
        let _ntokens = r.i64()?;
        let prune_size = r.i64()?;
        if size < 0 || nwords < 0 || nlabels <= 0 || nwords + nlabels != size {
            return Err(format!(
                "bad dictionary: {size} entries, {nwords} words, {nlabels} labels"
            ));
        }
        let mut vbytes = Vec::new();
        let mut spans = Vec::with_capacity(size as usize);
        let mut hashes = Vec::with_capacity(size as usize);
        let mut kinds = Vec::with_capacity(size as usize);
        let mut counts = Vec::with_capacity(size as usize);
        for _ in 0..size {
            let rest = &r.bytes[r.at..];
            let len = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or("a dictionary word runs to the end of the file")?;
            let start = vbytes.len() as u32;
            vbytes.extend_from_slice(&rest[..len]);
            hashes.push(hash(&rest[..len]));
            r.at += len + 1;
            spans.push((start, vbytes.len() as u32));
            counts.push(r.i64()?);
            kinds.push(r.u8()?);
        }
        let mut pairs = Vec::new();
        for _ in 0..prune_size.max(0) {
            pairs.push((r.i32()?, r.i32()?));
        }
        let cap = (size as usize * 2).next_power_of_two().max(16);
        let mut slots = vec![Slot::default(); cap];
        for (id, (&h, &(s, e))) in hashes.iter().zip(&spans).enumerate() {
            Vocab::insert(
                &mut slots,
                cap - 1,
                Slot::new(&vbytes[s as usize..e as usize], h, id),
            );
        }
        let vocab = Vocab {
            slots,
            mask: cap - 1,
            spans,
            bytes: vbytes,
            kinds,
        };
        let labels: Vec<String> = (nwords..size)
            .map(|id| {
                let (s, e) = vocab.spans[id as usize];
                String::from_utf8_lossy(&vocab.bytes[s as usize..e as usize]).into_owned()
            })
            .collect();
        let label_counts: Vec<i64> = counts[nwords as usize..].to_vec();
        let prune = match prune_size {
            0 => Prune::Nothing,
            n if n < 0 => Prune::All,
            _ => Prune::Map(IdMap::new(&pairs, bucket as u32)),
        };

        // Matrices.
        let quant_input = r.u8()? != 0;
        let input = if quant_input {
            Matrix::quantized(&mut r, true)?
        } else {
            if prune_size >= 0 {
                return Err("a pruned dictionary with an unquantized input matrix".into());
            }
            Matrix::dense(&mut r)?
        };
        let qout = r.u8()? != 0;
        let output = if quant_input && qout {
            Matrix::quantized(&mut r, false)?
        } else {
            Matrix::dense(&mut r)?
        };
        if input.cols != dim as usize || output.cols != dim as usize {
            return Err(format!(
                "matrices of {} and {} columns in a model of dimension {dim}",
                input.cols, output.cols
            ));
        }
        if output.rows != nlabels as usize {
            return Err(format!("{} output rows for {nlabels} labels", output.rows));
        }

        let mut predictor = Predictor {
            dim: dim as usize,
            word_ngrams,
            bucket: bucket as u32,
            bucket_mod: FastMod::new(bucket as u32),
            minn: minn.max(0) as usize,
            maxn: maxn.max(0) as usize,
            nwords,
            labels,
            vocab,
            word_rows: Vec::new(),
            rows: Vec::new(),
            prune,
            input: input.data,
            output: output.data,
            output_scale: output.norms,
            loss,
            tree: Vec::new(),
            sigmoid: Vec::new(),
            oov: ThreadLocal::new(),
            projection: None,
            short: None,
            word_values: None,
        };
        // Rows of each in-vocabulary word, as fastText's `initNgrams`.
        let mut rows = Vec::new();
        let mut word_rows = Vec::with_capacity(size as usize);
        let mut buf = Vec::new();
        for id in 0..size as usize {
            let start = rows.len() as u32;
            rows.push(id as u32);
            let (s, e) = predictor.vocab.spans[id];
            let word = &predictor.vocab.bytes[s as usize..e as usize];
            if word != EOS {
                predictor.subwords(bracketed(&mut buf, word), |row| rows.push(row));
            }
            word_rows.push((start, rows.len() as u32));
        }
        let input_rows = input.rows;
        if rows.iter().any(|&row| row as usize >= input_rows) {
            return Err(format!(
                "a word's n-gram row is past the input matrix's {input_rows} rows"
            ));
        }
        if let Prune::Map(map) = &predictor.prune
            && map
                .values
                .iter()
                .zip(&map.keys)
                .any(|(&v, &k)| k != -1 && (v < 0 || (nwords + v) as usize >= input_rows))
        {
            return Err("a pruned n-gram's row is past the input matrix".into());
        }
        if matches!(predictor.prune, Prune::All) && (nwords as usize + bucket as usize) > input_rows
        {
            return Err(format!(
                "{nwords} words and {bucket} buckets, but {input_rows} input rows"
            ));
        }
        predictor.word_rows = word_rows;
        predictor.rows = rows;
        if loss == LossKind::HierarchicalSoftmax {
            predictor.tree = huffman(&label_counts);
        }
        predictor.sigmoid = (0..=SIGMOID_TABLE_SIZE)
            .map(|i| {
                let x =
                    (i * 2 * MAX_SIGMOID) as f32 / SIGMOID_TABLE_SIZE as f32 - MAX_SIGMOID as f32;
                (1.0 / (1.0 + f64::from((-x).exp()))) as f32
            })
            .collect();
        Ok(predictor)
    }

    /// The labels as the model writes them (`__label__en`), by index.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The row of n-gram bucket `id`, through the pruning index (fastText's `pushHash`).
    fn ngram_row(&self, id: u32) -> Option<u32> {
        match &self.prune {
            Prune::All => Some(self.nwords as u32 + id),
            Prune::Nothing => None,
            Prune::Map(map) => map.get(id as i32).map(|r| (self.nwords + r) as u32),
        }
    }

    /// Calls `f` with the row of each character n-gram of `word` (with its `<` and
    /// `>`), in fastText's order (`computeSubwords`).
    fn subwords(&self, word: &[u8], mut f: impl FnMut(u32)) {
        if self.maxn == 0 || self.bucket == 0 {
            return;
        }
        let len = word.len();
        for i in 0..len {
            if word[i] & 0xC0 == 0x80 {
                continue;
            }
            let mut h = 2_166_136_261u32;
            let mut j = i;
            let mut n = 1;
            while j < len && n <= self.maxn {
                h = step(h, word[j]);
                j += 1;
                while j < len && word[j] & 0xC0 == 0x80 {
                    h = step(h, word[j]);
                    j += 1;
                }
                if n >= self.minn
                    && !(n == 1 && (i == 0 || j == len))
                    && let Some(row) = self.ngram_row(self.bucket_mod.rem(u64::from(h)) as u32)
                {
                    f(row);
                }
                n += 1;
            }
        }
    }

    /// Predicts from one line of fastText input, as its `predict` reads a line: words
    /// at whitespace, the line ending at its first newline (or NUL, where a C string
    /// ends). `k < 0` asks for every label. Returns (label index, probability), best
    /// first.
    pub fn predict_line(&self, line: &str, k: i32, threshold: f32) -> Vec<(usize, f32)> {
        let line = line.as_bytes();
        let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
        self.predict_words(line, false, k, threshold)
    }

    /// Predicts from a text as FineWeb prepares it (newlines become spaces, one newline
    /// at the end): the same as `predict_line(&prepare(text), …)` without the copy.
    pub fn predict_text(&self, text: &str, k: i32, threshold: f32) -> Vec<(usize, f32)> {
        self.predict_words(text.as_bytes(), true, k, threshold)
    }

    /// The words of a line as fastText's `getLine` reads them: split at ASCII
    /// whitespace and NUL, ended by a newline (unless `whole`: a prepared text's
    /// newlines are spaces) or by a word that is `</s>`; `whole` adds the `</s>` a
    /// line without one ends with. `None` spans stand for the `</s>` the reader adds.
    /// The bytes are classified 64 at a time ([`word_edges`]).
    fn line_words(line: &[u8], whole: bool, mut word: impl FnMut(Option<(u32, u32)>)) {
        // Not whole: the line ends at its first newline, which brings `</s>`.
        let cut = if whole { None } else { memchr_newline(line) };
        let (text, newline) = match cut {
            Some(i) => (&line[..i], true),
            None => (line, false),
        };
        let edges = word_edges(text);
        // A word `</s>` ends the line: looked for word by word only in a text that holds
        // those bytes.
        if memchr::memmem::find(text, EOS).is_none() {
            for pair in edges.chunks_exact(2) {
                word(Some((pair[0], pair[1])));
            }
        } else {
            for pair in edges.chunks_exact(2) {
                let (s, e) = (pair[0], pair[1]);
                word(Some((s, e)));
                if &text[s as usize..e as usize] == EOS {
                    return;
                }
            }
        }
        if whole || newline {
            word(None);
        }
    }

    /// Calls `add` with the input row of every word, character n-gram and word n-gram
    /// of a line, in fastText's order (each word's rows as the words come, then the
    /// word n-grams). The words are split and hashed first and looked up together:
    /// their vocabulary slots are then read from memory side by side, not one word at
    /// a time.
    fn line_rows(&self, line: &[u8], whole: bool, add: &mut dyn FnMut(u32)) {
        self.line_rows_by(line, whole, add, |_| false);
    }

    /// [`Predictor::line_rows`], with each word of the vocabulary (in a model with
    /// character n-grams) offered to `vocab_word` first, by its id: where it returns
    /// `true` it has taken the word's rows as a whole, and they are not given to `add`.
    fn line_rows_by(
        &self,
        line: &[u8],
        whole: bool,
        add: &mut dyn FnMut(u32),
        mut vocab_word: impl FnMut(usize) -> bool,
    ) {
        let mut words: Vec<Option<(u32, u32)>> = Vec::with_capacity(line.len() / 4 + 2);
        Self::line_words(line, whole, |w| words.push(w));
        let word = |w: Option<(u32, u32)>| match w {
            Some((s, e)) => &line[s as usize..e as usize],
            None => EOS,
        };
        let hashes: Vec<u32> = words.iter().map(|&w| hash(word(w))).collect();
        let mask = self.vocab.mask;
        let first: Vec<Slot> = hashes
            .iter()
            .map(|&h| self.vocab.slots[h as usize & mask])
            .collect();
        let mut word_hashes: Vec<i32> = Vec::with_capacity(words.len());
        let mut buf = Vec::new();
        let mut oov = self.oov.get_or_default().borrow_mut();
        for ((&w, &h), &slot) in words.iter().zip(&hashes).zip(&first) {
            let word = word(w);
            let id = self.vocab.find_from(word, h, slot);
            if self.vocab.is_label(id, word) {
                continue;
            }
            match id {
                Some(id) if self.maxn == 0 => add(id as u32),
                Some(id) if vocab_word(id) => {}
                Some(id) => {
                    let (s, e) = self.word_rows[id];
                    for &row in &self.rows[s as usize..e as usize] {
                        add(row);
                    }
                }
                // Without character n-grams a word out of the vocabulary has no row.
                None if self.maxn == 0 => {}
                None if word != EOS && word.len() > OOV_WORD_BYTES => {
                    self.subwords(bracketed(&mut buf, word), &mut *add);
                }
                None if word != EOS => {
                    let rows = oov.rows_of(word, h, |rows| {
                        self.subwords(bracketed(&mut buf, word), |r| rows.push(r));
                    });
                    for &row in &oov.rows[rows] {
                        add(row);
                    }
                }
                None => {}
            }
            word_hashes.push(h as i32);
        }
        self.word_ngram_rows(&word_hashes, add);
    }

    /// Calls `add` with the row of each word n-gram of a line's words (given by their
    /// hashes), in fastText's order (`addWordNgrams`).
    fn word_ngram_rows(&self, word_hashes: &[i32], add: &mut dyn FnMut(u32)) {
        if self.word_ngrams > 1 && self.bucket > 0 {
            let n = self.word_ngrams as usize;
            for i in 0..word_hashes.len() {
                let mut h = word_hashes[i] as i64 as u64;
                for &next in word_hashes.iter().skip(i + 1).take(n - 1) {
                    h = h.wrapping_mul(116_049_371).wrapping_add(next as i64 as u64);
                    if let Some(row) = self.ngram_row(self.bucket_mod.rem(h) as u32) {
                        add(row);
                    }
                }
            }
        }
    }

    /// [`Predictor::line_rows`] for a model without character n-grams: the same rows,
    /// with the words of at most 16 bytes found through [`ShortWords`] (their hashes
    /// read from their slots, not computed). Every word's first slot is read before any
    /// is probed, so the reads overlap. With word bigrams, a bigram's row comes right
    /// after its second word's (not after every word's, as fastText orders them), so
    /// that its read overlaps the next lookups; other word n-grams come at the end.
    ///
    /// With `VALUES` (a projection of two labels, whose slots hold the words'
    /// values), the short words' values are summed here instead of their rows given to
    /// `add`: returns their sum and count (else zeros).
    fn short_rows<const VALUES: bool>(
        &self,
        short: &ShortWords,
        line: &[u8],
        whole: bool,
        mut add: impl FnMut(u32),
    ) -> (f64, usize) {
        let (mut values, mut counted) = (0f64, 0usize);
        // Each word's bytes and first slot, as it is split; `</s>` is the span
        // `(u32::MAX, u32::MAX)`.
        let mut keys: Vec<ShortKey> = Vec::with_capacity(line.len() / 4 + 2);
        Self::line_words(line, whole, |w| {
            let ((lo, hi), (start, end)) = match w {
                Some((s, e)) if (e - s) as usize <= ShortWords::MAX => (
                    ShortWords::bytes_of(line, s as usize, (e - s) as usize),
                    (s, e),
                ),
                // Longer words are found through the vocabulary.
                Some(span) => ((0, 0), span),
                None => (
                    ShortWords::bytes_of(EOS, 0, EOS.len()),
                    (u32::MAX, u32::MAX),
                ),
            };
            let at = short.first(lo, hi) as u32;
            keys.push(ShortKey {
                lo,
                hi,
                at,
                start,
                end,
            });
        });
        let first: Vec<ShortSlot> = keys.iter().map(|k| short.slots[k.at as usize]).collect();
        let bigrams = self.word_ngrams == 2 && self.bucket > 0;
        let mut word_hashes: Vec<i32> = Vec::new();
        let mut previous: Option<i32> = None;
        for (key, &slot) in keys.iter().zip(&first) {
            let word = || match key.start {
                u32::MAX => EOS,
                s => &line[s as usize..key.end as usize],
            };
            let (lo, hi, at) = (key.lo, key.hi, key.at as usize);
            let h = if key.end.wrapping_sub(key.start) as usize <= ShortWords::MAX {
                match short.find_from(lo, hi, at, slot) {
                    Some(found) if found.row == ShortSlot::LABEL => continue,
                    Some(found) => {
                        if VALUES {
                            values += f64::from(found.value);
                            counted += 1;
                        } else {
                            add(found.row);
                        }
                        found.hash
                    }
                    None if self.vocab.is_label(None, word()) => continue,
                    None => hash(word()),
                }
            } else {
                let word = word();
                let h = hash(word);
                let id =
                    self.vocab
                        .find_from(word, h, self.vocab.slots[h as usize & self.vocab.mask]);
                if self.vocab.is_label(id, word) {
                    continue;
                }
                if let Some(id) = id {
                    add(id as u32);
                }
                h
            };
            if bigrams {
                if let Some(p) = previous {
                    let g = (p as i64 as u64)
                        .wrapping_mul(116_049_371)
                        .wrapping_add(h as i32 as i64 as u64);
                    if let Some(row) = self.ngram_row(self.bucket_mod.rem(g) as u32) {
                        add(row);
                    }
                }
                previous = Some(h as i32);
            } else {
                word_hashes.push(h as i32);
            }
        }
        self.word_ngram_rows(&word_hashes, &mut add);
        (values, counted)
    }

    /// Whether [`Predictor::project`] can serve this model: a softmax output layer (its
    /// logits are linear in the hidden vector) of few labels (the table is then smaller
    /// than the input rows).
    pub fn can_project(&self) -> bool {
        self.loss == LossKind::Softmax && self.labels.len() * 4 <= self.dim
    }

    /// Replaces the input rows by their products with the output rows, once: a line's
    /// logits are then the mean of its rows' products, `labels` numbers a row instead
    /// of `dim` (one for two labels, their difference: for DCLM's 100 dimensions, 4
    /// bytes a row, and 8 MB for 2 million n-gram buckets where the rows take 800
    /// MB), which is what makes scoring fast: the rows of a long text are read from
    /// memory at random. Sums are
    /// then taken in f64 over products rounded to f32, not in fastText's f32 order over
    /// the rows, so probabilities are not equal to fastText's to the last bit: within
    /// 1e-6 on the tests' texts, up to 2.0e-6 on long web pages, where fastText's own
    /// f32 sums drift. In a model of two labels with character
    /// n-grams (the shipped toxicity model) each known word's rows are summed here
    /// too, so a known word costs one read. `false`, and nothing changes, when
    /// [`Predictor::can_project`] says no.
    pub fn project(&mut self) -> bool {
        if !self.can_project() {
            return false;
        }
        if self.projection.is_some() {
            return true;
        }
        let (dim, labels) = (self.dim, self.labels.len());
        let product = |row: &[f32], i: usize| {
            let w = &self.output[i * dim..(i + 1) * dim];
            let mut d = 0f64;
            for (x, c) in row.iter().zip(w) {
                d += f64::from(*x) * f64::from(*c);
            }
            if let Some(norms) = &self.output_scale {
                d *= f64::from(norms[i]);
            }
            d
        };
        let table: Vec<f32> = if labels == 2 {
            // Softmax of two labels depends on their difference alone: one float a row.
            self.input
                .chunks_exact(dim)
                .map(|row| (product(row, 1) - product(row, 0)) as f32)
                .collect()
        } else {
            self.input
                .chunks_exact(dim)
                .flat_map(|row| (0..labels).map(move |i| product(row, i) as f32))
                .collect()
        };
        self.projection = Some(table);
        self.input = Vec::new();
        if self.maxn == 0 {
            let values = self.projection.as_deref().filter(|_| labels == 2);
            self.short = Some(ShortWords::new(&self.vocab, values));
        } else if labels == 2
            && let Some(table) = &self.projection
        {
            self.word_values = Some(
                self.word_rows
                    .iter()
                    .map(|&(s, e)| {
                        self.rows[s as usize..e as usize]
                            .iter()
                            .map(|&r| f64::from(table[r as usize]))
                            .sum()
                    })
                    .collect(),
            );
        }
        true
    }

    /// Softmax probabilities from the projected rows of a line, as fastText returns
    /// them (`exp(log(p + 1e-5))`), by label index; `None` for a line without rows.
    fn projected(&self, table: &[f32], line: &[u8], whole: bool) -> Option<Vec<f32>> {
        let labels = self.labels.len();
        // The rows first, then their sums: loads of rows known in advance overlap,
        // where rows read between word lookups wait on memory one by one.
        let mut rows: Vec<u32> = Vec::with_capacity(line.len() / 2);
        let (values, counted) = match &self.short {
            Some(short) if labels == 2 => {
                self.short_rows::<true>(short, line, whole, |row| rows.push(row))
            }
            Some(short) => self.short_rows::<false>(short, line, whole, |row| rows.push(row)),
            None => match &self.word_values {
                // Known words by their summed rows, the other words' n-grams row by row.
                Some(word_values) => {
                    let (mut values, mut counted) = (0f64, 0usize);
                    self.line_rows_by(line, whole, &mut |row: u32| rows.push(row), |id| {
                        let (s, e) = self.word_rows[id];
                        values += word_values[id];
                        counted += (e - s) as usize;
                        true
                    });
                    (values, counted)
                }
                None => {
                    self.line_rows(line, whole, &mut |row: u32| rows.push(row));
                    (0f64, 0)
                }
            },
        };
        let count = rows.len() + counted;
        if count == 0 {
            return None;
        }
        let mut sums = vec![0f64; labels];
        if labels == 2 {
            // The rows hold the second label's logit less the first's (the short words'
            // values are summed already): four sums, so that the additions do not wait
            // on each other.
            let mut acc = [values, 0f64, 0f64, 0f64];
            let chunks = rows.chunks_exact(4);
            let rest = chunks.remainder();
            for four in chunks {
                for (a, &row) in acc.iter_mut().zip(four) {
                    *a += f64::from(table[row as usize]);
                }
            }
            for (a, &row) in acc.iter_mut().zip(rest) {
                *a += f64::from(table[row as usize]);
            }
            sums[1] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        } else {
            for &row in &rows {
                let r = row as usize * labels;
                for (s, p) in sums.iter_mut().zip(&table[r..r + labels]) {
                    *s += f64::from(*p);
                }
            }
        }
        let n = count as f64;
        let max = sums.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = sums.iter().map(|s| ((s - max) / n).exp()).collect();
        let z: f64 = exps.iter().sum();
        Some(exps.iter().map(|e| std_log((e / z) as f32).exp()).collect())
    }

    fn predict_words(&self, line: &[u8], whole: bool, k: i32, threshold: f32) -> Vec<(usize, f32)> {
        let k = if k < 0 { self.labels.len() } else { k as usize };
        // An empty raw line is no line at all; a prepared text always holds its `</s>`.
        if k == 0 || line.is_empty() && !whole {
            return Vec::new();
        }
        if let Some(table) = &self.projection {
            let Some(probs) = self.projected(table, line, whole) else {
                return Vec::new();
            };
            let mut best: Vec<(f32, usize)> = Vec::with_capacity(k + 1);
            // The probabilities hold fastText's 1e-5 already: the threshold is on p.
            for (i, &p) in probs.iter().enumerate() {
                if p - 1e-5 >= threshold {
                    push_best(&mut best, k, p, i);
                }
            }
            best.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            return best.into_iter().map(|(p, i)| (i, p)).collect();
        }
        let mut hidden = vec![0f32; self.dim];
        let mut count = 0usize;
        self.line_rows(line, whole, &mut |row: u32| {
            let r = row as usize * self.dim;
            for (h, v) in hidden.iter_mut().zip(&self.input[r..r + self.dim]) {
                *h += v;
            }
            count += 1;
        });
        if count == 0 {
            return Vec::new();
        }
        let a = (1.0 / count as f64) as f32;
        for h in &mut hidden {
            *h *= a;
        }
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(k + 1);
        match self.loss {
            LossKind::HierarchicalSoftmax => {
                let root = 2 * self.labels.len() - 2;
                self.dfs(k, threshold, root, 0.0, &mut best, &hidden);
            }
            LossKind::Softmax => {
                let mut out: Vec<f32> = (0..self.labels.len())
                    .map(|i| self.dot(&hidden, i))
                    .collect();
                let max = out.iter().copied().fold(out[0], f32::max);
                let mut z = 0f32;
                for o in &mut out {
                    *o = f64::from(*o - max).exp() as f32;
                    z += *o;
                }
                for o in &mut out {
                    *o /= z;
                }
                k_best(&out, k, threshold, &mut best);
            }
            LossKind::NegativeSampling | LossKind::OneVsAll => {
                let out: Vec<f32> = (0..self.labels.len())
                    .map(|i| self.sigmoid(self.dot(&hidden, i)))
                    .collect();
                k_best(&out, k, threshold, &mut best);
            }
        }
        best.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        best.into_iter().map(|(s, i)| (i, s.exp())).collect()
    }

    /// Output row `i` times the hidden vector, in fastText's order.
    fn dot(&self, hidden: &[f32], i: usize) -> f32 {
        let row = &self.output[i * self.dim..(i + 1) * self.dim];
        let mut d = 0f32;
        for (x, c) in hidden.iter().zip(row) {
            d += x * c;
        }
        match &self.output_scale {
            Some(norms) => d * norms[i],
            None => d,
        }
    }

    fn sigmoid(&self, x: f32) -> f32 {
        if x < -(MAX_SIGMOID as f32) {
            0.0
        } else if x > MAX_SIGMOID as f32 {
            1.0
        } else {
            let i = ((x + MAX_SIGMOID as f32) * SIGMOID_TABLE_SIZE as f32
                / MAX_SIGMOID as f32
                / 2.0) as i64;
            self.sigmoid[i as usize]
        }
    }

    fn dfs(
        &self,
        k: usize,
        threshold: f32,
        node: usize,
        score: f32,
        best: &mut Vec<(f32, usize)>,
        hidden: &[f32],
    ) {
        if score < std_log(threshold) {
            return;
        }
        if best.len() == k && score < min_score(best) {
            return;
        }
        let osz = self.labels.len();
        let (left, right) = if node < osz {
            (-1, -1)
        } else {
            self.tree[node - osz]
        };
        if left == -1 && right == -1 {
            push_best(best, k, score, node);
            return;
        }
        let f = self.dot(hidden, node - osz);
        let f = (1.0 / f64::from(1.0 + (-f).exp())) as f32;
        self.dfs(
            k,
            threshold,
            left as usize,
            score + std_log((1.0 - f64::from(f)) as f32),
            best,
            hidden,
        );
        self.dfs(
            k,
            threshold,
            right as usize,
            score + std_log(f),
            best,
            hidden,
        );
    }
}

fn min_score(best: &[(f32, usize)]) -> f32 {
    best.iter().map(|b| b.0).fold(f32::INFINITY, f32::min)
}

/// Keeps the `k` best scores, as fastText's heap does.
fn push_best(best: &mut Vec<(f32, usize)>, k: usize, score: f32, label: usize) {
    best.push((score, label));
    if best.len() > k
        && let Some(worst) = best
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.0.total_cmp(&b.1.0).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i)
    {
        best.swap_remove(worst);
    }
}

/// fastText's `findKBest` over output probabilities.
fn k_best(out: &[f32], k: usize, threshold: f32, best: &mut Vec<(f32, usize)>) {
    for (i, &o) in out.iter().enumerate() {
        if o < threshold {
            continue;
        }
        let score = std_log(o);
        if best.len() == k && score < min_score(best) {
            continue;
        }
        push_best(best, k, score, i);
    }
}

/// fastText's hierarchical softmax tree over label counts (sorted by count, largest
/// first): the children of each inner node, inner node `osz + i` at index `i`.
fn huffman(counts: &[i64]) -> Vec<(i32, i32)> {
    let osz = counts.len();
    if osz < 2 {
        return Vec::new();
    }
    let mut count: Vec<i64> = counts.to_vec();
    count.resize(2 * osz - 1, 1_000_000_000_000_000);
    let mut children = vec![(-1i32, -1i32); osz - 1];
    let mut leaf = osz as i64 - 1;
    let mut node = osz;
    for i in osz..2 * osz - 1 {
        let mut mini = [0usize; 2];
        for m in &mut mini {
            if leaf >= 0 && count[leaf as usize] < count[node] {
                *m = leaf as usize;
                leaf -= 1;
            } else {
                *m = node;
                node += 1;
            }
        }
        children[i - osz] = (mini[0] as i32, mini[1] as i32);
        count[i] = count[mini[0]] + count[mini[1]];
    }
    children
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_fnv_over_signed_bytes() {
        assert_eq!(hash(b""), 2_166_136_261);
        // A byte over 0x7f is sign-extended before the xor, as fastText does.
        assert_ne!(hash("é".as_bytes()), {
            let mut h = 2_166_136_261u32;
            for &b in "é".as_bytes() {
                h = (h ^ u32::from(b)).wrapping_mul(16_777_619);
            }
            h
        });
    }

    #[test]
    fn huffman_pairs_the_rarest_first() {
        // Counts 5, 3, 1: leaves 2 and 1 join first (node 3, count 4), then node 3
        // and leaf 0 (node 4, the root).
        assert_eq!(huffman(&[5, 3, 1]), vec![(2, 1), (3, 0)]);
    }

    #[test]
    fn fast_modulo_is_the_remainder() {
        let mut rng = fastrand::Rng::with_seed(7);
        for d in [
            1u32,
            2,
            3,
            7,
            1000,
            200_000,
            2_000_000,
            10_000_000,
            u32::MAX,
        ] {
            let f = FastMod::new(d);
            for a in [
                0u64,
                1,
                u64::from(d) - 1,
                u64::from(d),
                u64::MAX,
                u64::MAX - 1,
            ] {
                assert_eq!(f.rem(a), a % u64::from(d), "{a} % {d}");
            }
            for _ in 0..10_000 {
                let a = rng.u64(..);
                assert_eq!(f.rem(a), a % u64::from(d), "{a} % {d}");
            }
        }
    }

    #[test]
    fn same_bytes_is_slice_equality() {
        // Every length up to 40 against itself, a copy, one byte changed at each place,
        // and one byte shorter or longer.
        let text: Vec<u8> = (0..41u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for n in 0..=40 {
            let a = &text[..n];
            let copy = a.to_vec();
            assert!(same_bytes(a, &copy), "{n}");
            for i in 0..n {
                let mut other = copy.clone();
                other[i] ^= 1;
                assert!(!same_bytes(a, &other), "{n} {i}");
            }
            assert!(!same_bytes(a, &text[..n + 1]), "{n}");
            if n > 0 {
                assert!(!same_bytes(a, &text[..n - 1]), "{n}");
            }
        }
    }

    #[test]
    fn oov_rows_are_kept_by_word_and_dropped_at_the_limit() {
        // Rows made from the word's bytes, so a wrong entry shows; words given the same
        // hash must still be told apart by their bytes.
        let make_rows = |word: &[u8]| -> Vec<u32> {
            word.iter()
                .enumerate()
                .map(|(i, &b)| u32::from(b) * 100 + i as u32)
                .collect()
        };
        let entry = size_of::<OovWord>() + 1;
        // Exactly abc, xyz and q with their rows and bytes: the limit is reached there.
        let limit = 3 * entry + (3 + 3 + 1) * 5;
        let mut cache = OovRows::with_limit(limit);
        let words: [&[u8]; 9] = [
            b"abc", b"xyz", b"abc", b"q", b"abcd", b"xyz", b"zz", b"abc", b"zz",
        ];
        let mut made = 0;
        for word in words {
            // Every word hashed alike: the bytes decide.
            let range = cache.rows_of(word, 42, |rows| {
                made += 1;
                rows.extend(make_rows(word));
            });
            assert_eq!(cache.rows[range], make_rows(word)[..], "{word:?}");
        }
        // abc, xyz and q made, abc found between them; abcd finds the cache full and
        // starts it again; xyz and zz made, which passes the limit; abc starts it again
        // and zz is made once more.
        assert_eq!(made, 8);
        assert_eq!(cache.table.len(), 2);
        // Words without rows count too: the cache stays bounded.
        let mut cache = OovRows::with_limit(10 * entry);
        for n in 0..1000u32 {
            cache.rows_of(&n.to_le_bytes(), n, |_| {});
            assert!(cache.held() <= 10 * entry + entry + 4, "{n}");
        }
    }

    #[test]
    fn id_map_finds_what_it_holds() {
        let map = IdMap::new(
            &[(7, 1), (1_999_999, 2), (0, 3), (2_000_000, 4), (-5, 5)],
            2_000_000,
        );
        assert_eq!(map.get(7), Some(1));
        assert_eq!(map.get(1_999_999), Some(2));
        assert_eq!(map.get(0), Some(3));
        assert_eq!(map.get(8), None);
        // Keys outside the buckets, then every key of a fuller map, held or not.
        assert_eq!(
            map.get(2_000_000),
            None,
            "keys past the buckets are left out"
        );
        assert_eq!(map.get(-5), None);
        let pairs: Vec<(i32, i32)> = (0..5000).map(|i| (i * 37 % 100_003, i)).collect();
        let map = IdMap::new(&pairs, 100_003);
        for k in 0..100_100 {
            let want = pairs.iter().find(|p| p.0 == k).map(|p| p.1);
            assert_eq!(map.get(k), want, "{k}");
        }
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(Predictor::from_bytes(b"").is_err());
        assert!(Predictor::from_bytes(&[0u8; 64]).is_err());
        let mut head = MAGIC.to_le_bytes().to_vec();
        head.extend_from_slice(&12i32.to_le_bytes());
        assert!(
            Predictor::from_bytes(&head)
                .err()
                .is_some_and(|e| e.contains("ends at byte"))
        );
    }

    /// A softmax model without character n-grams, written in fastText's format: words
    /// of every length around the short table's 8 and 16 bytes, `</s>` and two labels.
    fn short_word_model() -> (Vec<u8>, Vec<String>) {
        let mut words: Vec<String> = vec!["</s>".into()];
        for n in 1..=24 {
            words.push(
                (0..n)
                    .map(|i| char::from(b'a' + ((i * 7 + n) % 26) as u8))
                    .collect(),
            );
        }
        words.extend(["the", "of", "naïve", "über-long-hyphenated-word", "__x"].map(String::from));
        let (dim, bucket) = (8usize, 1000i32);
        let mut b = Vec::new();
        let i32s = |b: &mut Vec<u8>, v: &[i32]| v.iter().for_each(|x| b.extend(x.to_le_bytes()));
        i32s(
            &mut b,
            &[
                MAGIC, 12, dim as i32, 5, 5, 1, 5, 2, 3, 3, bucket, 0, 0, 100,
            ],
        );
        b.extend(1e-4f64.to_le_bytes());
        let labels = ["__label__a", "__label__b"];
        let size = (words.len() + labels.len()) as i32;
        i32s(&mut b, &[size, words.len() as i32, 2]);
        b.extend(1000i64.to_le_bytes());
        b.extend((-1i64).to_le_bytes());
        for (w, kind) in words
            .iter()
            .map(|w| (w.as_str(), 0u8))
            .chain(labels.map(|l| (l, 1)))
        {
            b.extend(w.as_bytes());
            b.push(0);
            b.extend(3i64.to_le_bytes());
            b.push(kind);
        }
        let mut rng = fastrand::Rng::with_seed(7);
        let mut matrix = |b: &mut Vec<u8>, rows: usize| {
            b.push(0);
            b.extend((rows as i64).to_le_bytes());
            b.extend((dim as i64).to_le_bytes());
            for _ in 0..rows * dim {
                b.extend((rng.f32() - 0.5).to_le_bytes());
            }
        };
        matrix(&mut b, words.len() + bucket as usize);
        matrix(&mut b, 2);
        (b, words)
    }

    #[test]
    fn short_words_give_the_rows_of_the_vocabulary() {
        let (bytes, words) = short_word_model();
        let mut p = Predictor::from_bytes(&bytes).expect("model");
        let mut exact = Predictor::from_bytes(&bytes).expect("model");
        assert!(exact.project());
        exact.short = None;
        assert!(p.project());
        let short = p.short.as_ref().expect("a model without character n-grams");
        let mut rng = fastrand::Rng::with_seed(11);
        let extra = [
            "</s>",
            "__label__a",
            "__label__b",
            "__label__zz",
            "__label__a-very-long-one",
            "oov",
            "an-out-of-vocabulary-word",
            "\0",
            "\n",
            "\t",
            "  ",
            "é",
        ];
        for case in 0..400 {
            let mut text = String::new();
            for _ in 0..rng.usize(0..40) {
                if rng.bool() {
                    text.push_str(&words[rng.usize(0..words.len())]);
                } else {
                    text.push_str(extra[rng.usize(0..extra.len())]);
                }
                if rng.usize(0..4) > 0 {
                    text.push(' ');
                }
            }
            for whole in [false, true] {
                let line = text.as_bytes();
                let mut want = Vec::new();
                p.line_rows(line, whole, &mut |r| want.push(r));
                let mut got = Vec::new();
                p.short_rows::<false>(short, line, whole, |r| got.push(r));
                // The same rows; bigrams' rows come beside their words'.
                want.sort_unstable();
                got.sort_unstable();
                assert_eq!(got, want, "case {case} {text:?} whole {whole}");
                let (a, b) = if whole {
                    (
                        p.predict_text(&text, -1, 0.0),
                        exact.predict_text(&text, -1, 0.0),
                    )
                } else {
                    (
                        p.predict_line(&text, -1, 0.0),
                        exact.predict_line(&text, -1, 0.0),
                    )
                };
                // Sums in another order: equal but for a rounding to f32.
                assert_eq!(a.len(), b.len(), "case {case} {text:?} whole {whole}");
                for (x, y) in a.iter().zip(&b) {
                    assert!(
                        x.0 == y.0 && (x.1 - y.1).abs() <= 1e-7,
                        "case {case} {text:?} whole {whole}: {a:?} vs {b:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn word_edges_split_at_fastexts_delimiters() {
        let delimiter = |b: u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c | 0);
        // Every byte at every place, beside word bytes and beside delimiters.
        for b in 0..=255u8 {
            for at in 0..64 {
                for other in [b'a', 0xff, b' ', 0] {
                    let mut x = [other; 64];
                    x[at] = b;
                    let got = delimiters64(&x);
                    for (i, &y) in x.iter().enumerate() {
                        assert_eq!(
                            got >> i & 1 == 1,
                            delimiter(y),
                            "{b} at {at} beside {other}: {i}"
                        );
                    }
                }
            }
        }
        let mut rng = fastrand::Rng::with_seed(3);
        let alphabet = [
            b' ', b'a', b'\n', 0, 0x0b, 0x0e, 0x08, 0xe2, 0x80, b'z', b'\t', 0xa0,
        ];
        for case in 0..2000 {
            let text: Vec<u8> = (0..rng.usize(0..300))
                .map(|_| alphabet[rng.usize(0..alphabet.len())])
                .collect();
            let mut want = Vec::new();
            let mut inside = false;
            for (i, &b) in text.iter().enumerate() {
                if delimiter(b) == inside {
                    want.push(i as u32);
                    inside = !inside;
                }
            }
            if inside {
                want.push(text.len() as u32);
            }
            assert_eq!(word_edges(&text), want, "case {case} {text:?}");
        }
    }
}
