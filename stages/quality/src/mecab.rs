//! A MeCab-compatible morphological segmenter: reads a dictionary compiled for MeCab
//! 0.996 (`sys.dic`, `unk.dic`, `matrix.bin`, `char.bin`, `dicrc`) and cuts text by
//! MeCab's lattice and Viterbi search (dictionary words by common-prefix search in the
//! double array, unknown words by character category, connection costs from the
//! matrix). The Korean segmenter runs it on mecab-ko-dic, with mecab-ko's extra
//! cost for a particle or ending written after a space (`left-space-penalty-factor`).
//!
//! Only the segmentation is kept: surfaces, not features.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// MeCab's dictionary magic number, XORed with the file size in the header.
const MAGIC: u32 = 0xef71_8f77;
/// The dictionary format version MeCab 0.996 writes.
const VERSION: u32 = 102;
/// Longest run of one category taken as one unknown word.
const MAX_GROUPING: usize = 24;

/// What failed reading a dictionary, and where.
#[derive(Debug, thiserror::Error)]
#[error("MeCab dictionary {path}: {message}")]
pub struct Error {
    path: PathBuf,
    message: String,
}

fn err(path: &Path, message: impl Into<String>) -> Error {
    Error {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A compiled dictionary (`sys.dic` or `unk.dic`): its double array and its tokens.
struct Dictionary {
    bytes: Vec<u8>,
    /// Where the double array's units start and how many there are.
    da: usize,
    units: usize,
    /// Where the tokens start and how many there are.
    tokens: usize,
    count: usize,
    /// Where the feature strings start.
    features: usize,
}

/// One dictionary entry's costs.
#[derive(Debug, Clone, Copy)]
struct Token {
    left: u16,
    right: u16,
    pos: u16,
    cost: i16,
    /// Where its feature string starts in the system dictionary (`u32::MAX`: an
    /// unknown word's, not kept).
    feature: u32,
}

/// The first `n` bytes of a file and its length.
fn head(path: &Path, n: usize) -> Result<(Vec<u8>, usize), Error> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| err(path, e.to_string()))?;
    let len = file.metadata().map_err(|e| err(path, e.to_string()))?.len() as usize;
    let mut bytes = Vec::with_capacity(n);
    file.take(n as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| err(path, e.to_string()))?;
    Ok((bytes, len))
}

/// A dictionary's header checked against its file's length: where the double array
/// starts and the sizes of the double array and the tokens.
fn dictionary_layout(
    path: &Path,
    header: &[u8],
    len: usize,
) -> Result<(usize, usize, usize), Error> {
    if header.len() < 72 {
        return Err(err(path, "shorter than its header"));
    }
    if u32_at(header, 0) ^ MAGIC != len as u32 {
        return Err(err(path, "not a MeCab dictionary (magic number)"));
    }
    let version = u32_at(header, 4);
    if version != VERSION {
        return Err(err(path, format!("version {version}, not {VERSION}")));
    }
    let (dsize, tsize, fsize) = (
        u32_at(header, 24) as usize,
        u32_at(header, 28) as usize,
        u32_at(header, 32) as usize,
    );
    let da = 40 + 32;
    if da + dsize + tsize + fsize != len || dsize % 8 != 0 || tsize % 16 != 0 {
        return Err(err(path, "section sizes do not add up to the file's"));
    }
    Ok((da, dsize, tsize))
}

/// `matrix.bin`'s dimensions, checked against its length.
fn matrix_layout(path: &Path, header: &[u8], len: usize) -> Result<(usize, usize), Error> {
    if header.len() < 4 {
        return Err(err(path, "shorter than its header"));
    }
    let (l, r) = (u16_at(header, 0) as usize, u16_at(header, 2) as usize);
    if len != 4 + 2 * l * r {
        return Err(err(path, "size does not match its dimensions"));
    }
    Ok((l, r))
}

/// `char.bin`'s category count, checked against its length.
fn chars_layout(path: &Path, header: &[u8], len: usize) -> Result<usize, Error> {
    if header.len() < 4 {
        return Err(err(path, "shorter than its header"));
    }
    let categories = u32_at(header, 0) as usize;
    if len != 4 + 32 * categories + 4 * 0xffff {
        return Err(err(path, "size does not match its category count"));
    }
    Ok(categories)
}

impl Dictionary {
    fn open(path: &Path) -> Result<Dictionary, Error> {
        let bytes = std::fs::read(path).map_err(|e| err(path, e.to_string()))?;
        let (da, dsize, tsize) = dictionary_layout(path, &bytes, bytes.len())?;
        Ok(Dictionary {
            da,
            units: dsize / 8,
            tokens: da + dsize,
            count: tsize / 16,
            features: da + dsize + tsize,
            bytes,
        })
    }

    fn base(&self, i: usize) -> i32 {
        u32_at(&self.bytes, self.da + 8 * i) as i32
    }

    fn check(&self, i: usize) -> u32 {
        u32_at(&self.bytes, self.da + 8 * i + 4)
    }

    /// Calls `f(length in bytes, value)` for every entry that is a prefix of `key`
    /// (Darts' commonPrefixSearch).
    fn prefixes(&self, key: &[u8], mut f: impl FnMut(usize, u32)) {
        if self.units == 0 {
            return;
        }
        let mut b = self.base(0);
        let leaf = |b: i32, at: usize, f: &mut dyn FnMut(usize, u32)| {
            let p = b as usize;
            if p < self.units {
                let n = self.base(p);
                if b as u32 == self.check(p) && n < 0 {
                    f(at, (-n - 1) as u32);
                }
            }
        };
        for (i, &c) in key.iter().enumerate() {
            leaf(b, i, &mut f);
            let p = b as usize + c as usize + 1;
            if p >= self.units || b as u32 != self.check(p) {
                return;
            }
            b = self.base(p);
        }
        leaf(b, key.len(), &mut f);
    }

    /// The value of `key` itself, if it is an entry.
    fn exact(&self, key: &[u8]) -> Option<u32> {
        let mut found = None;
        self.prefixes(key, |len, v| {
            if len == key.len() {
                found = Some(v);
            }
        });
        found
    }

    /// The tokens a search value stands for.
    fn tokens(&self, value: u32) -> impl Iterator<Item = Token> + '_ {
        let first = (value >> 8) as usize;
        let n = (value & 0xff) as usize;
        (first..(first + n).min(self.count)).map(move |i| {
            let at = self.tokens + 16 * i;
            Token {
                left: u16_at(&self.bytes, at),
                right: u16_at(&self.bytes, at + 2),
                pos: u16_at(&self.bytes, at + 4),
                cost: u16_at(&self.bytes, at + 6) as i16,
                feature: u32_at(&self.bytes, at + 8),
            }
        })
    }
}

/// A character's categories (`char.bin`): MeCab's CharInfo bit fields.
#[derive(Debug, Clone, Copy)]
struct CharInfo(u32);

impl CharInfo {
    fn kinds(self) -> u32 {
        self.0 & 0x3ffff
    }
    fn default_kind(self) -> usize {
        ((self.0 >> 18) & 0xff) as usize
    }
    fn length(self) -> usize {
        ((self.0 >> 26) & 0xf) as usize
    }
    fn group(self) -> bool {
        self.0 & (1 << 30) != 0
    }
    fn invoke(self) -> bool {
        self.0 & (1 << 31) != 0
    }
    fn is_kind_of(self, other: CharInfo) -> bool {
        self.kinds() & other.kinds() != 0
    }
}

/// A dictionary loaded: the segmenter.
pub struct Mecab {
    sys: Dictionary,
    /// The unknown-word tokens of each character category.
    unknown: Vec<Vec<Token>>,
    matrix: Vec<i16>,
    left_size: usize,
    chars: Vec<CharInfo>,
    space: CharInfo,
    /// mecab-ko: extra cost by part-of-speech id for a word after a space.
    space_penalty: HashMap<u16, i32>,
}

/// One lattice node.
#[derive(Clone, Copy)]
struct Node {
    /// Where its surface starts and ends (bytes of the line), spaces before excluded.
    start: u32,
    end: u32,
    left: u16,
    right: u16,
    cost: i64,
    prev: u32,
    feature: u32,
}

impl Mecab {
    /// Checks the files of the dictionary in `dir` (present, headers matching their
    /// lengths) without reading them whole.
    pub fn check(dir: &Path) -> Result<(), Error> {
        for name in ["sys.dic", "unk.dic"] {
            let path = dir.join(name);
            let (header, len) = head(&path, 72)?;
            dictionary_layout(&path, &header, len)?;
        }
        let path = dir.join("matrix.bin");
        let (header, len) = head(&path, 4)?;
        matrix_layout(&path, &header, len)?;
        let path = dir.join("char.bin");
        let (header, len) = head(&path, 4)?;
        chars_layout(&path, &header, len)?;
        Ok(())
    }

    /// Loads the dictionary in `dir`.
    pub fn open(dir: &Path) -> Result<Mecab, Error> {
        let sys = Dictionary::open(&dir.join("sys.dic"))?;
        let unk = Dictionary::open(&dir.join("unk.dic"))?;
        let path = dir.join("matrix.bin");
        let bytes = std::fs::read(&path).map_err(|e| err(&path, e.to_string()))?;
        let (left_size, _) = matrix_layout(&path, &bytes, bytes.len())?;
        let matrix = bytes[4..]
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        let path = dir.join("char.bin");
        let bytes = std::fs::read(&path).map_err(|e| err(&path, e.to_string()))?;
        let categories = chars_layout(&path, &bytes, bytes.len())?;
        let names: Vec<&[u8]> = (0..categories)
            .map(|i| {
                let raw = &bytes[4 + 32 * i..4 + 32 * (i + 1)];
                &raw[..raw.iter().position(|&b| b == 0).unwrap_or(32)]
            })
            .collect();
        let chars: Vec<CharInfo> = bytes[4 + 32 * categories..]
            .chunks_exact(4)
            .map(|c| CharInfo(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect();
        let mut unknown = Vec::with_capacity(categories);
        for name in &names {
            let value = unk.exact(name).ok_or_else(|| {
                err(
                    &dir.join("unk.dic"),
                    format!(
                        "no entry for character category {}",
                        String::from_utf8_lossy(name)
                    ),
                )
            })?;
            unknown.push(
                unk.tokens(value)
                    .map(|t| Token {
                        feature: u32::MAX,
                        ..t
                    })
                    .collect(),
            );
        }
        let space = names
            .iter()
            .position(|n| *n == b"SPACE")
            .map(|i| CharInfo(1 << i))
            .ok_or_else(|| err(&dir.join("char.bin"), "no SPACE category"))?;
        let mut space_penalty = HashMap::new();
        if let Ok(rc) = std::fs::read_to_string(dir.join("dicrc")) {
            for line in rc.lines() {
                let Some((key, value)) = line.split_once('=') else {
                    continue;
                };
                if key.trim() != "left-space-penalty-factor" {
                    continue;
                }
                let cells: Vec<&str> = value.split(',').map(str::trim).collect();
                for pair in cells.chunks_exact(2) {
                    if let (Ok(pos), Ok(cost)) = (pair[0].parse(), pair[1].parse()) {
                        space_penalty.insert(pos, cost);
                    }
                }
            }
        }
        Ok(Mecab {
            sys,
            unknown,
            matrix,
            left_size,
            chars,
            space,
            space_penalty,
        })
    }

    fn char_at(&self, s: &[u8], at: usize) -> (CharInfo, usize) {
        // MeCab reads UTF-8 as UCS-2: a character beyond the BMP reads as U+0000.
        let b = s[at];
        let (code, len) = if b < 0x80 {
            (b as usize, 1)
        } else if b & 0xe0 == 0xc0 && at + 1 < s.len() {
            (
                (((b & 0x1f) as usize) << 6) | (s[at + 1] & 0x3f) as usize,
                2,
            )
        } else if b & 0xf0 == 0xe0 && at + 2 < s.len() {
            (
                (((b & 0x0f) as usize) << 12)
                    | (((s[at + 1] & 0x3f) as usize) << 6)
                    | (s[at + 2] & 0x3f) as usize,
                3,
            )
        } else if b & 0xf8 == 0xf0 && at + 3 < s.len() {
            (0, 4)
        } else {
            (0, 1)
        };
        (self.chars.get(code).copied().unwrap_or(CharInfo(0)), len)
    }

    /// From `at`, skips characters while each shares a category with the one before
    /// (starting from `info`): where that stops, the info there, and how many were
    /// skipped.
    fn seek(&self, s: &[u8], mut at: usize, mut info: CharInfo) -> (usize, CharInfo, usize) {
        let mut n = 0;
        let mut last = CharInfo(0);
        while at < s.len() {
            let (c, len) = self.char_at(s, at);
            last = c;
            if !info.is_kind_of(c) {
                break;
            }
            at += len;
            n += 1;
            info = c;
        }
        (at, last, n)
    }

    fn cost(&self, left: &Node, right: &Node) -> i64 {
        self.matrix
            .get(left.right as usize + self.left_size * right.left as usize)
            .copied()
            .unwrap_or(0) as i64
    }

    /// The words of one line of text (no newline inside), in order.
    pub fn words<'a>(&self, line: &'a str, out: &mut Vec<&'a str>) {
        self.segment(line, |w, _| out.push(w));
    }

    /// The words of one line with each one's feature string (the dictionary's CSV
    /// columns; empty for an unknown word), in order.
    pub fn segment<'a>(&self, line: &'a str, mut f: impl FnMut(&'a str, &str)) {
        let s = line.as_bytes();
        if s.is_empty() {
            return;
        }
        // nodes[0] is BOS; ends[pos] lists the nodes ending at pos (their spaces
        // before included in what they cover).
        let mut nodes: Vec<Node> = vec![Node {
            start: 0,
            end: 0,
            left: 0,
            right: 0,
            cost: 0,
            prev: u32::MAX,
            feature: u32::MAX,
        }];
        let mut ends: Vec<Vec<u32>> = vec![Vec::new(); s.len() + 1];
        ends[0].push(0);
        let mut new: Vec<(usize, usize, Token, bool)> = Vec::new();
        for pos in 0..s.len() {
            if ends[pos].is_empty() {
                continue;
            }
            new.clear();
            self.lookup(s, pos, &mut new);
            for &(start, end, token, spaced) in &new {
                let mut best = (i64::MAX, u32::MAX);
                let mut node = Node {
                    start: start as u32,
                    end: end as u32,
                    left: token.left,
                    right: token.right,
                    cost: 0,
                    prev: 0,
                    feature: token.feature,
                };
                let penalty = if spaced {
                    self.space_penalty.get(&token.pos).copied().unwrap_or(0) as i64
                } else {
                    0
                };
                // MeCab walks its end list newest first and keeps the first best.
                for &l in ends[pos].iter().rev() {
                    let left = &nodes[l as usize];
                    let c = left.cost + self.cost(left, &node) + token.cost as i64 + penalty;
                    if c < best.0 {
                        best = (c, l);
                    }
                }
                node.cost = best.0;
                node.prev = best.1;
                nodes.push(node);
                ends[end].push((nodes.len() - 1) as u32);
            }
        }
        // EOS joins the last position anything reaches.
        let Some(last) = (0..=s.len()).rev().find(|&p| !ends[p].is_empty()) else {
            return;
        };
        let eos = Node {
            start: last as u32,
            end: last as u32,
            left: 0,
            right: 0,
            cost: 0,
            prev: 0,
            feature: u32::MAX,
        };
        let mut best = (i64::MAX, 0u32);
        for &l in ends[last].iter().rev() {
            let left = &nodes[l as usize];
            let c = left.cost + self.cost(left, &eos);
            if c < best.0 {
                best = (c, l);
            }
        }
        let mut path = Vec::new();
        let mut at = best.1;
        while at != 0 && at != u32::MAX {
            path.push(at);
            at = nodes[at as usize].prev;
        }
        for &i in path.iter().rev() {
            let n = &nodes[i as usize];
            f(
                &line[n.start as usize..n.end as usize],
                self.feature(n.feature),
            );
        }
    }

    fn feature(&self, at: u32) -> &str {
        if at == u32::MAX {
            return "";
        }
        let bytes = &self.sys.bytes[(self.sys.features + at as usize).min(self.sys.bytes.len())..];
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        std::str::from_utf8(&bytes[..end]).unwrap_or("")
    }

    /// The nodes starting at `pos`: (surface start, end, token, after a space).
    fn lookup(&self, s: &[u8], pos: usize, out: &mut Vec<(usize, usize, Token, bool)>) {
        let limit = s.len().min(pos + 65535);
        let s = &s[..limit];
        let (begin, info, _) = self.seek(s, pos, self.space);
        if begin >= s.len() {
            return;
        }
        let spaced = begin > pos;
        let mut found = false;
        self.sys.prefixes(&s[begin..], |len, value| {
            for t in self.sys.tokens(value) {
                out.push((begin, begin + len, t, spaced));
                found = true;
            }
        });
        if found && !info.invoke() {
            return;
        }
        let unknown = |end: usize, out: &mut Vec<(usize, usize, Token, bool)>| {
            if let Some(tokens) = self.unknown.get(info.default_kind()) {
                for &t in tokens {
                    out.push((begin, end, t, spaced));
                }
            }
        };
        let (_, first_len) = self.char_at(s, begin);
        let mut end = begin + first_len;
        let mut added = found;
        let mut group_end = None;
        if info.group() {
            let (stop, _, n) = self.seek(s, end, info);
            if n <= MAX_GROUPING {
                unknown(stop, out);
                added = true;
            }
            group_end = Some(stop);
        }
        for _ in 1..=info.length() {
            if end > s.len() {
                break;
            }
            if Some(end) != group_end {
                unknown(end, out);
                added = true;
            }
            if end == s.len() {
                break;
            }
            let (c, len) = self.char_at(s, end);
            if !info.is_kind_of(c) {
                break;
            }
            end += len;
        }
        if !added {
            unknown(begin + first_len, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_dictionary_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let e = Mecab::open(dir.path())
            .err()
            .expect("no dictionary")
            .to_string();
        assert!(e.contains("sys.dic"), "{e}");
        std::fs::write(dir.path().join("sys.dic"), [0u8; 100]).expect("write");
        let e = Mecab::open(dir.path()).err().expect("garbage").to_string();
        assert!(e.contains("magic number"), "{e}");
    }
}
