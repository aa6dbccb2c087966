//! Our own encoder for the tokenizers this stage trains: byte-level BPE over the o200k
//! split, read straight from the vocabulary and merges of `tokenizer.json`.
//!
//! Why: a task loads its tokenizer once, and at 256,000 entries the `tokenizers`
//! readers took about 2 s of CPU (the 0.22 reader 0.65 s; the 1.0 reader 1.2 s, most of
//! it building its own tables from the merges). Here the load is one JSON parse into
//! borrowed strings and one hash table of merges.
//!
//! What it encodes, and how it stays the same as `tokenizers`:
//!
//! - Only files laid out as [`crate::bpe::train`] writes them are taken
//!   ([`Native::from_json`] says why not otherwise, and the caller falls back to the
//!   `tokenizers` 1.0 encoder): a BPE model without dropout, unknown token, affixes,
//!   byte fallback or `ignore_merges`; the o200k split followed by GPT-2's byte-level
//!   mapping and decoder; no normaliser, post-processor, truncation or padding; every added token
//!   special (encoded as text, as the stage asks of `tokenizers`).
//! - Pre-tokens are the cuts of the 1.0 encoder's compiled o200k grammar, or of the 0.22
//!   regex for texts holding a code point of [`crate::bpe::SPLIT_DIFFERS`]: the cuts
//!   the other encoders use.
//! - Each pre-token starts as its bytes' ids and repeatedly merges the adjacent pair of
//!   lowest merge rank, the leftmost first when a pair occurs twice: the order of
//!   0.22's `Word::merge_all` (a queue ordered by rank, then position). A merge map
//!   with one pair twice keeps the later rank, as 0.22's does.
//! - The tests encode the fixture texts and texts of many scripts with all three
//!   encoders and compare the ids.
//!
//! - Decoding joins the tokens' bytes and replaces invalid UTF-8, as 0.22's byte-level
//!   decoder does (the file's decoder must be that one); the tests compare the two on
//!   every id.
//!
//! Pre-tokens up to [`CACHED_BYTES`] bytes are remembered with their ids in a cache per
//! encoding thread (up to [`CACHE_ENTRIES`] words; it is emptied when full).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Mutex, OnceLock};

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use tokenizers_fast::pipeline::{PreTokenizer, PreTokenizerScratch, Span};
use tokenizers_fast::pre_tokenizers::split::Split;

use crate::bpe::{O200K_PATTERN, fast_split, reference_cuts, reference_split, splits_differ};
use crate::trainer::byte_chars;

/// Longest pre-token (in bytes) kept in the cache.
pub const CACHED_BYTES: usize = 64;
/// Words the cache of one thread holds before it is emptied (about 40 MB when full).
pub const CACHE_ENTRIES: usize = 1 << 20;
/// Pre-tokens of more symbols than this merge through a queue instead of by scanning.
const SCAN_SYMBOLS: usize = 128;
/// Ids below this have their pairs' values in [`Native`]'s grid (2 MiB).
const GRID: usize = 512;
/// No merge: the value of a pair that is not in the merge map.
const NONE: u64 = u64::MAX;
/// No neighbour, in the queue form of a word.
const END: u32 = u32::MAX;

/// A loaded tokenizer in our form.
pub struct Native {
    /// Id of each byte's one-byte token.
    byte_id: [u32; 256],
    /// (left id, right id) packed → (rank, made id) packed: rank in the high half, so a
    /// smaller value is an earlier merge.
    merges: HashMap<u64, u64, FixedState>,
    /// The same values for the pairs of two ids under [`GRID`], in one array (the bytes
    /// and the earliest merges: most lookups).
    grid: Vec<u64>,
    /// Bytes of every token, one after another (a special token's: its text).
    token_bytes: Vec<u8>,
    /// Where each id's bytes are in `token_bytes`: (start, length); an id without a token
    /// has none.
    token_at: Vec<(u32, u32)>,
    /// The added tokens, by text.
    specials: Vec<(String, u32)>,
    vocab_size: usize,
    split: Split,
    reference: OnceLock<Result<tokenizers::pre_tokenizers::split::Split, String>>,
    scratch: Mutex<Vec<Scratch>>,
}

impl fmt::Debug for Native {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Native")
            .field("vocab_size", &self.vocab_size)
            .field("merges", &self.merges.len())
            .finish()
    }
}

/// One encoding thread's buffers and word cache.
#[derive(Default)]
struct Scratch {
    pre: PreTokenizerScratch,
    spans: Vec<Span>,
    cache: Cache,
    symbols: Vec<u32>,
    values: Vec<u64>,
    next: Vec<u32>,
    prev: Vec<u32>,
    queue: BinaryHeap<Reverse<(u64, u32)>>,
}

/// Pre-tokens and their ids: a hash table whose entries hold a pre-token of up to 16
/// bytes and a single id in place; longer ones and longer lists of ids are in two arenas.
#[derive(Default)]
struct Cache {
    table: HashTable<Cached>,
    keys: Vec<u8>,
    ids: Vec<u32>,
}

#[derive(Clone, Copy)]
struct Cached {
    /// The pre-token's bytes, zero-padded, when it has up to 16; else its place in `keys`.
    key: [u64; 2],
    key_len: u32,
    /// The one id, or the place of the ids in `ids`.
    id: u32,
    ids_len: u32,
}

/// A pre-token of up to 16 bytes as two words, zero-padded.
#[inline]
fn short_key(word: &[u8]) -> [u64; 2] {
    let mut buf = [0u8; 16];
    buf[..word.len()].copy_from_slice(word);
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&buf[..8]);
    hi.copy_from_slice(&buf[8..]);
    [u64::from_le_bytes(lo), u64::from_le_bytes(hi)]
}

fn word_hash(word: &[u8]) -> u64 {
    FixedState::default().hash_one(word)
}

impl Cache {
    #[inline]
    fn get(&self, hash: u64, word: &[u8]) -> Option<&[u32]> {
        let len = word.len() as u32;
        let found = if word.len() <= 16 {
            let key = short_key(word);
            self.table.find(hash, |c| c.key_len == len && c.key == key)
        } else {
            let keys = &self.keys;
            self.table.find(hash, |c| {
                c.key_len == len && &keys[c.key[0] as usize..][..word.len()] == word
            })
        }?;
        Some(if found.ids_len == 1 {
            std::slice::from_ref(&found.id)
        } else {
            &self.ids[found.id as usize..][..found.ids_len as usize]
        })
    }

    fn insert(&mut self, hash: u64, word: &[u8], ids: &[u32]) {
        if self.table.len() >= CACHE_ENTRIES {
            self.table.clear();
            self.keys.clear();
            self.ids.clear();
        }
        let key = if word.len() <= 16 {
            short_key(word)
        } else {
            self.keys.extend_from_slice(word);
            [(self.keys.len() - word.len()) as u64, 0]
        };
        let id = match ids {
            [one] => *one,
            _ => {
                self.ids.extend_from_slice(ids);
                (self.ids.len() - ids.len()) as u32
            }
        };
        let entry = Cached {
            key,
            key_len: word.len() as u32,
            id,
            ids_len: ids.len() as u32,
        };
        let keys = &self.keys;
        self.table.insert_unique(hash, entry, |c| {
            let len = c.key_len as usize;
            if len <= 16 {
                let mut buf = [0u8; 16];
                buf[..8].copy_from_slice(&c.key[0].to_le_bytes());
                buf[8..].copy_from_slice(&c.key[1].to_le_bytes());
                word_hash(&buf[..len])
            } else {
                word_hash(&keys[c.key[0] as usize..][..len])
            }
        });
    }
}

fn pack(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

// ---------------------------------------------------------------------------------
// reading tokenizer.json

/// A string of the file, borrowed where it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// `model.vocab`: the entries in file order.
struct VocabJson<'a>(Vec<(Text<'a>, u32)>);

impl<'de: 'a, 'a> Deserialize<'de> for VocabJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = VocabJson<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of tokens to ids")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<Text<'a>, u32>()? {
                    entries.push(entry);
                }
                Ok(VocabJson(entries))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// One merge: `["a", "b"]`, or `"a b"` as files before 0.20 spell it.
struct MergeJson<'a>(Text<'a>, Text<'a>);

/// Where `"a b"` splits, or an error.
fn merge_cut<E: serde::de::Error>(whole: &str) -> Result<usize, E> {
    match whole.find(' ') {
        Some(at) if !whole[at + 1..].contains(' ') => Ok(at),
        _ => Err(E::custom(format!("merge {whole:?} is not two tokens"))),
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for MergeJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MergeJson<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a merge: two tokens")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let missing = || serde::de::Error::custom("a merge needs two tokens");
                let a = seq.next_element::<Text<'a>>()?.ok_or_else(missing)?;
                let b = seq.next_element::<Text<'a>>()?.ok_or_else(missing)?;
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(serde::de::Error::custom("a merge has more than two tokens"));
                }
                Ok(MergeJson(a, b))
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                s: &'de str,
            ) -> Result<Self::Value, E> {
                let at = merge_cut(s)?;
                Ok(MergeJson(
                    Text(Cow::Borrowed(&s[..at])),
                    Text(Cow::Borrowed(&s[at + 1..])),
                ))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                let at = merge_cut(s)?;
                Ok(MergeJson(
                    Text(Cow::Owned(s[..at].to_string())),
                    Text(Cow::Owned(s[at + 1..].to_string())),
                ))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct AddedJson<'a> {
    id: u32,
    #[serde(borrow)]
    content: Text<'a>,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct ModelJson<'a> {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    dropout: Option<f64>,
    #[serde(default)]
    unk_token: Option<String>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    byte_fallback: bool,
    #[serde(default)]
    ignore_merges: bool,
    #[serde(borrow)]
    vocab: VocabJson<'a>,
    #[serde(borrow)]
    merges: Vec<MergeJson<'a>>,
}

#[derive(Deserialize)]
struct FileJson<'a> {
    #[serde(borrow, default)]
    added_tokens: Vec<AddedJson<'a>>,
    #[serde(default)]
    truncation: serde_json::Value,
    #[serde(default)]
    padding: serde_json::Value,
    #[serde(default)]
    normalizer: serde_json::Value,
    #[serde(default)]
    pre_tokenizer: serde_json::Value,
    #[serde(default)]
    post_processor: serde_json::Value,
    #[serde(default)]
    decoder: serde_json::Value,
    #[serde(borrow)]
    model: ModelJson<'a>,
}

/// Whether the file's pre-tokeniser is the o200k split then GPT-2's byte-level mapping
/// without its own regex; else what differs.
fn check_pre_tokenizer(pre: &serde_json::Value) -> Result<(), String> {
    let parts = pre
        .get("pretokenizers")
        .and_then(|p| p.as_array())
        .filter(|_| pre["type"] == "Sequence")
        .ok_or("the pre-tokeniser is not a sequence")?;
    let [split, bytes] = parts.as_slice() else {
        return Err("the pre-tokeniser is not a split and a byte-level step".into());
    };
    let split_ok = split["type"] == "Split"
        && split["pattern"]["Regex"] == O200K_PATTERN
        && split["behavior"] == "Isolated"
        && split["invert"] == false;
    if !split_ok {
        return Err("the split is not the o200k one".into());
    }
    let bytes_ok = bytes["type"] == "ByteLevel"
        && bytes["add_prefix_space"] == false
        && bytes["use_regex"] == false;
    if !bytes_ok {
        return Err("the byte-level step adds a prefix space or splits again".into());
    }
    Ok(())
}

/// GPT-2's byte of each spelling character, by code point (the spellings end below
/// U+0144); -1 where a character spells no byte.
fn char_bytes() -> Vec<i16> {
    let chars = byte_chars();
    let mut table = vec![-1i16; 0x144];
    for (b, c) in chars.iter().enumerate() {
        if let Some(slot) = table.get_mut(*c as usize) {
            *slot = b as i16;
        }
    }
    table
}

/// Appends the bytes `token` spells in GPT-2's alphabet to `out`; false (and `out` as
/// it was) when a character is not in it.
fn spell_into(token: &str, table: &[i16], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    for c in token.chars() {
        match table.get(c as usize) {
            Some(&b) if b >= 0 => out.push(b as u8),
            _ => {
                out.truncate(start);
                return false;
            }
        }
    }
    true
}

impl Native {
    /// Reads a `tokenizer.json`; `Err` says why it is not a file this encoder takes
    /// (the caller then encodes with `tokenizers`).
    pub fn from_json(json: &str) -> Result<Native, String> {
        let file: FileJson<'_> =
            serde_json::from_str(json).map_err(|e| format!("reading it: {e}"))?;
        for (what, value) in [
            ("truncation", &file.truncation),
            ("padding", &file.padding),
            ("a normaliser", &file.normalizer),
            ("a post-processor", &file.post_processor),
        ] {
            if !value.is_null() {
                return Err(format!("it has {what}"));
            }
        }
        check_pre_tokenizer(&file.pre_tokenizer)?;
        if file.decoder["type"] != "ByteLevel" {
            return Err("the decoder is not the byte-level one".into());
        }
        let model = file.model;
        if model.kind.as_deref().is_some_and(|k| k != "BPE") {
            return Err("the model is not BPE".into());
        }
        let plain = model.dropout.is_none_or(|p| p == 0.0)
            && model.unk_token.is_none()
            && model
                .continuing_subword_prefix
                .as_deref()
                .is_none_or(str::is_empty)
            && model
                .end_of_word_suffix
                .as_deref()
                .is_none_or(str::is_empty)
            && !model.byte_fallback
            && !model.ignore_merges;
        if !plain {
            return Err(
                "the BPE model has dropout, an unknown token, affixes, byte fallback or ignore_merges"
                    .into(),
            );
        }
        if let Some(added) = file.added_tokens.iter().find(|a| !a.special) {
            return Err(format!(
                "the added token {:?} is not special",
                added.content.0
            ));
        }

        let table = char_bytes();
        let specials: Vec<(String, u32)> = file
            .added_tokens
            .iter()
            .map(|a| (a.content.0.to_string(), a.id))
            .collect();
        let top = model
            .vocab
            .0
            .iter()
            .map(|(_, id)| *id)
            .chain(specials.iter().map(|(_, id)| *id))
            .max()
            .map_or(0, |m| m as usize + 1);
        // Ids are dense in any real file; a stray huge one would size the tables below.
        let entries = model.vocab.0.len() + specials.len();
        if top > 2 * entries + 1024 {
            return Err(format!(
                "its ids are not dense: {} for {entries} entries",
                top - 1
            ));
        }
        let mut is_special = vec![false; top];
        for (_, id) in &specials {
            is_special[*id as usize] = true;
        }
        let mut ids: HashMap<&str, u32, FixedState> =
            HashMap::with_capacity_and_hasher(model.vocab.0.len(), FixedState::default());
        let mut names: Vec<Option<&str>> = vec![None; top];
        for (text, id) in &model.vocab.0 {
            ids.insert(&text.0, *id);
            let name = &mut names[*id as usize];
            if name.is_some() {
                return Err(format!("two tokens have id {id}"));
            }
            *name = Some(&text.0);
        }
        // Every token's bytes in one arena, (start, length) by id, as 0.22's byte-level
        // decoder gives them: a special token's text spelled in GPT-2's alphabet when it
        // can be, else its UTF-8.
        let mut token_bytes: Vec<u8> = Vec::with_capacity(json.len() / 4);
        let mut token_at: Vec<(u32, u32)> = vec![(0, 0); top];
        for (id, name) in names.iter().enumerate() {
            let start = token_bytes.len();
            if is_special[id] {
                if let Some((text, _)) = specials.iter().find(|(_, s)| *s as usize == id)
                    && !spell_into(text, &table, &mut token_bytes)
                {
                    token_bytes.extend_from_slice(text.as_bytes());
                }
            } else if let Some(text) = name
                && !spell_into(text, &table, &mut token_bytes)
            {
                return Err(format!(
                    "the token {text:?} is not spelled in GPT-2's bytes"
                ));
            }
            token_at[id] = (start as u32, (token_bytes.len() - start) as u32);
        }
        let mut byte_id = [u32::MAX; 256];
        for (b, c) in byte_chars().iter().enumerate() {
            byte_id[b] = *ids
                .get(c.encode_utf8(&mut [0; 4]) as &str)
                .ok_or_else(|| format!("the byte {b:#04x} has no token"))?;
        }

        let mut merges: HashMap<u64, u64, FixedState> =
            HashMap::with_capacity_and_hasher(model.merges.len(), FixedState::default());
        let mut joined = String::new();
        let id_of = |text: &str| {
            ids.get(text)
                .copied()
                .ok_or_else(|| format!("the merge token {text:?} is not in the vocabulary"))
        };
        // A trained file lists the merges' products after the specials and bytes, in rank
        // order: each product is first looked for there, then by its text.
        let first_product = top.saturating_sub(model.merges.len());
        for (rank, MergeJson(a, b)) in model.merges.iter().enumerate() {
            let (a, b) = (a.0.as_ref(), b.0.as_ref());
            let in_place = names
                .get(first_product + rank)
                .copied()
                .flatten()
                .filter(|n| n.len() == a.len() + b.len() && n.starts_with(a) && n.ends_with(b));
            let made = match in_place {
                Some(_) => (first_product + rank) as u32,
                None => {
                    joined.clear();
                    joined.push_str(a);
                    joined.push_str(b);
                    id_of(&joined)?
                }
            };
            let value = ((rank as u64) << 32) | u64::from(made);
            merges.insert(pack(id_of(a)?, id_of(b)?), value);
        }
        let mut grid = vec![NONE; GRID * GRID];
        for (&pair, &value) in &merges {
            let (a, b) = ((pair >> 32) as usize, pair as u32 as usize);
            if a < GRID && b < GRID {
                grid[a * GRID + b] = value;
            }
        }

        let vocab_size = ids.len()
            + specials
                .iter()
                .filter(|(text, _)| !ids.contains_key(text.as_str()))
                .count();
        Ok(Native {
            byte_id,
            merges,
            grid,
            token_bytes,
            token_at,
            specials,
            vocab_size,
            split: fast_split().map_err(|e| e.to_string())?,
            reference: OnceLock::new(),
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// Entries in the vocabulary, special tokens included (as 0.22 counts them: distinct
    /// texts).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The id of a token written as in `tokenizer.json` (a special token by its text).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        if let Some((_, id)) = self.specials.iter().find(|(s, _)| s == token) {
            return Some(*id);
        }
        let mut bytes = Vec::new();
        if !spell_into(token, &char_bytes(), &mut bytes) {
            return None;
        }
        let is_special = |id: usize| self.specials.iter().any(|(_, s)| *s as usize == id);
        (0..self.token_at.len())
            .find(|&id| self.token(id as u32) == Some(bytes.as_slice()) && !is_special(id))
            .map(|id| id as u32)
    }

    /// The bytes of one id; `None` for an id without a token.
    fn token(&self, id: u32) -> Option<&[u8]> {
        let &(start, len) = self.token_at.get(id as usize)?;
        (len > 0).then(|| &self.token_bytes[start as usize..][..len as usize])
    }

    #[inline]
    fn value(&self, a: u32, b: u32) -> u64 {
        let (i, j) = (a as usize, b as usize);
        if i < GRID && j < GRID {
            return self.grid[i * GRID + j];
        }
        self.merges.get(&pack(a, b)).copied().unwrap_or(NONE)
    }

    /// Appends the ids of `text` to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        let mut scratch = self
            .scratch
            .lock()
            .map_err(|_| "the encoder's scratch pool is poisoned".to_string())?
            .pop()
            .unwrap_or_default();
        let result = self.encode_with(&mut scratch, text, out);
        if let Ok(mut pool) = self.scratch.lock() {
            pool.push(scratch);
        }
        result
    }

    fn encode_with(&self, s: &mut Scratch, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        s.spans.clear();
        if splits_differ(text) {
            let split = self
                .reference
                .get_or_init(|| reference_split().map_err(|e| e.to_string()))
                .as_ref()
                .map_err(Clone::clone)?;
            let cuts = reference_cuts(split, text).map_err(|e| e.to_string())?;
            s.spans.extend(cuts.into_iter().map(|(start, end)| Span {
                start: start as u32,
                end: end as u32,
            }));
        } else {
            self.split
                .pre_tokenize(text, &mut s.pre, &mut s.spans)
                .map_err(|e| format!("pre-tokenising: {e}"))?;
        }
        let bytes = text.as_bytes();
        let spans = std::mem::take(&mut s.spans);
        for span in &spans {
            let word = &bytes[span.start as usize..span.end as usize];
            self.encode_word(s, word, out);
        }
        s.spans = spans;
        Ok(())
    }

    fn encode_word(&self, s: &mut Scratch, word: &[u8], out: &mut Vec<u32>) {
        match word {
            [] => {}
            [b] => out.push(self.byte_id[*b as usize]),
            _ if word.len() <= CACHED_BYTES => {
                let hash = word_hash(word);
                if let Some(ids) = s.cache.get(hash, word) {
                    out.extend_from_slice(ids);
                    return;
                }
                self.merge(s, word);
                out.extend_from_slice(&s.symbols);
                s.cache.insert(hash, word, &s.symbols);
            }
            _ => {
                self.merge(s, word);
                out.extend_from_slice(&s.symbols);
            }
        }
    }

    /// Leaves the ids of `word` in `s.symbols`.
    fn merge(&self, s: &mut Scratch, word: &[u8]) {
        s.symbols.clear();
        s.symbols
            .extend(word.iter().map(|&b| self.byte_id[b as usize]));
        if word.len() <= SCAN_SYMBOLS {
            self.merge_by_scan(&mut s.symbols, &mut s.values);
        } else {
            self.merge_by_queue(s);
        }
    }

    /// The merges of a short word: the value of each adjacent pair in a row, the
    /// smallest (leftmost on ties) merged until none is left.
    fn merge_by_scan(&self, symbols: &mut Vec<u32>, values: &mut Vec<u64>) {
        values.clear();
        values.extend(symbols.windows(2).map(|w| self.value(w[0], w[1])));
        loop {
            let mut best = NONE;
            let mut at = 0;
            for (i, &v) in values.iter().enumerate() {
                if v < best {
                    best = v;
                    at = i;
                }
            }
            if best == NONE {
                return;
            }
            symbols[at] = best as u32;
            symbols.remove(at + 1);
            values.remove(at);
            if at > 0 {
                values[at - 1] = self.value(symbols[at - 1], symbols[at]);
            }
            if at < values.len() {
                values[at] = self.value(symbols[at], symbols[at + 1]);
            }
        }
    }

    /// The merges of a long word: a queue of (value, position) and a linked list of
    /// symbols; an entry whose pair has changed since it was queued is dropped.
    fn merge_by_queue(&self, s: &mut Scratch) {
        let n = s.symbols.len();
        let Scratch {
            symbols,
            next,
            prev,
            queue,
            ..
        } = s;
        next.clear();
        next.extend((1..=n as u32).map(|i| if i as usize == n { END } else { i }));
        prev.clear();
        prev.extend((0..n as u32).map(|i| if i == 0 { END } else { i - 1 }));
        queue.clear();
        for i in 0..n - 1 {
            let v = self.value(symbols[i], symbols[i + 1]);
            if v != NONE {
                queue.push(Reverse((v, i as u32)));
            }
        }
        // A merged-away symbol is marked by a `prev` of its own position.
        while let Some(Reverse((v, at))) = queue.pop() {
            let i = at as usize;
            let right = next[i];
            if prev[i] == at || right == END {
                continue;
            }
            if self.value(symbols[i], symbols[right as usize]) != v {
                continue;
            }
            symbols[i] = v as u32;
            let after = next[right as usize];
            next[i] = after;
            prev[right as usize] = right;
            if after != END {
                prev[after as usize] = at;
                let w = self.value(symbols[i], symbols[after as usize]);
                if w != NONE {
                    queue.push(Reverse((w, at)));
                }
            }
            let before = prev[i];
            if before != END {
                let w = self.value(symbols[before as usize], symbols[i]);
                if w != NONE {
                    queue.push(Reverse((w, before)));
                }
            }
        }
        let mut kept = 0;
        let mut i = 0u32;
        while i != END {
            symbols[kept] = symbols[i as usize];
            kept += 1;
            i = next[i as usize];
        }
        symbols.truncate(kept);
    }

    /// The text of `ids`, as 0.22's byte-level decoder gives it: the tokens' bytes,
    /// invalid UTF-8 replaced; ids outside the vocabulary are skipped, as 0.22 skips them.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            if let Some(t) = self.token(id) {
                bytes.extend_from_slice(t);
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny file in the trained layout: bytes, three merges, one special token.
    fn tiny() -> String {
        let chars = byte_chars();
        let mut vocab = serde_json::Map::new();
        vocab.insert("<|endoftext|>".into(), 0.into());
        let mut sorted: Vec<char> = chars.to_vec();
        sorted.sort_unstable();
        for (i, c) in sorted.iter().enumerate() {
            vocab.insert(c.to_string(), (i + 1).into());
        }
        for (i, t) in ["aa", "aaaa", "ab"].iter().enumerate() {
            vocab.insert((*t).into(), (257 + i).into());
        }
        serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": false,
                "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
            "normalizer": null,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": O200K_PATTERN}, "behavior": "Isolated", "invert": false},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
                "byte_fallback": false, "ignore_merges": false, "vocab": vocab,
                "merges": [["a", "a"], ["aa", "aa"], "a b"]}
        })
        .to_string()
    }

    #[test]
    fn leftmost_lowest_rank_first_in_both_merge_forms() {
        let native = Native::from_json(&tiny()).expect("native");
        let a = native.token_id("a").expect("a");
        let (aa, aaaa, ab) = (257, 258, 259);
        let cases: [(&str, Vec<u32>); 5] = [
            ("aaa", vec![aa, a]),
            ("aaaaa", vec![aaaa, a]),
            ("aab", vec![aa, native.token_id("b").expect("b")]),
            ("aaaaaab", vec![aaaa, aa, native.token_id("b").expect("b")]),
            ("abaa", vec![ab, aa]),
        ];
        let mut s = Scratch::default();
        for (word, want) in cases {
            native.merge(&mut s, word.as_bytes());
            assert_eq!(s.symbols, want, "{word} by scan");
            s.symbols.clear();
            s.symbols
                .extend(word.bytes().map(|b| native.byte_id[b as usize]));
            native.merge_by_queue(&mut s);
            assert_eq!(s.symbols, want, "{word} by queue");
        }
        // Long words: the two forms agree on every length and mix.
        let mut rng = fastrand::Rng::with_seed(7);
        for len in 2..400 {
            let word: Vec<u8> = (0..len)
                .map(|_| *rng.choice(b"aab ").expect("letter"))
                .collect();
            let mut by_scan = Vec::new();
            let mut values = Vec::new();
            by_scan.extend(word.iter().map(|&b| native.byte_id[b as usize]));
            native.merge_by_scan(&mut by_scan, &mut values);
            s.symbols.clear();
            s.symbols
                .extend(word.iter().map(|&b| native.byte_id[b as usize]));
            native.merge_by_queue(&mut s);
            assert_eq!(s.symbols, by_scan, "{}", String::from_utf8_lossy(&word));
        }
        assert_eq!(native.vocab_size(), 260);
        assert_eq!(native.token_id("<|endoftext|>"), Some(0));
        assert_eq!(native.decode(&[aaaa, 9999, ab, 0]), "aaaaab<|endoftext|>");
    }

    #[test]
    fn other_layouts_are_refused_with_a_reason() {
        let base: serde_json::Value = serde_json::from_str(&tiny()).expect("json");
        assert!(
            Native::from_json(&base.to_string()).is_ok(),
            "the unedited file"
        );
        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 7] = [
            ("decoder", |v| {
                v["decoder"] = serde_json::json!({"type": "Metaspace"})
            }),
            ("normaliser", |v| {
                v["normalizer"] = serde_json::json!({"type": "NFC"})
            }),
            ("split", |v| {
                v["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+".into()
            }),
            ("prefix space", |v| {
                v["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true.into()
            }),
            ("ignore_merges", |v| {
                v["model"]["ignore_merges"] = true.into()
            }),
            ("not special", |v| {
                v["added_tokens"][0]["special"] = false.into()
            }),
            ("merge outside", |v| {
                v["model"]["merges"]
                    .as_array_mut()
                    .expect("merges")
                    .push(serde_json::json!(["a", "zz"]))
            }),
        ];
        for (what, edit) in edits {
            let mut v = base.clone();
            edit(&mut v);
            assert!(Native::from_json(&v.to_string()).is_err(), "{what}");
        }
        assert!(Native::from_json("{").is_err());
        let mut sparse = base.clone();
        sparse["model"]["vocab"]["zz"] = 4_000_000_000u32.into();
        assert!(
            Native::from_json(&sparse.to_string()).is_err(),
            "sparse ids"
        );
    }
}
