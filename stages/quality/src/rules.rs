//! The published heuristic rules, each returning the reason of the first rule a
//! document breaks. Ratios count Unicode scalar values, as the reference (Python)
//! implementations do.

use std::borrow::Cow;

use foldhash::{HashSet, HashSetExt};

use serde::{Deserialize, Serialize};

use crate::punctuation::{PUNCTUATION, TERMINAL};
use crate::words::{chunks, split_words};

/// Unicode scalar values in `s`: the bytes that do not continue a UTF-8 sequence.
fn chars(s: &str) -> usize {
    s.bytes().filter(|&b| (b as i8) >= -0x40).count()
}

fn is_terminal(c: char) -> bool {
    TERMINAL.binary_search(&c).is_ok()
}

fn is_punctuation(c: char) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    PUNCTUATION.binary_search(&c).is_ok() || is_terminal(c)
}

/// (count of repeated elements, characters in repeated elements), counting an element
/// as repeated from its second occurrence on.
fn duplicates<'a>(items: impl Iterator<Item = &'a str>) -> (usize, usize) {
    let mut seen = HashSet::new();
    let (mut n, mut c) = (0, 0);
    for item in items {
        if !seen.insert(item) {
            n += 1;
            c += chars(item);
        }
    }
    (n, c)
}

/// Python's `str.splitlines()`.
fn splitlines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Line breaks are \n \r \v \f \x1c-\x1e, U+0085 (C2 85) and U+2028/2029
        // (E2 80 A8/A9): looked at byte by byte, UTF-8 boundaries respected.
        let len = match bytes[i] {
            b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1e => 1,
            0xc2 if bytes.get(i + 1) == Some(&0x85) => 2,
            0xe2 if bytes.get(i + 1) == Some(&0x80)
                && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9)) =>
            {
                3
            }
            _ => 0,
        };
        if len == 0 {
            i += 1;
            continue;
        }
        out.push(&text[start..i]);
        let mut end = i + len;
        if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            end += 1;
        }
        start = end;
        i = end;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Gopher repetition rules (Rae et al. 2021, Table A1; datatrove `GopherRepetitionFilter`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GopherRepetition {
    pub enabled: bool,
    /// Fraction of paragraphs that repeat an earlier one: 0.30 (Gopher).
    pub dup_para_frac: f64,
    /// Fraction of characters in repeated paragraphs: 0.20 (Gopher).
    pub dup_para_char_frac: f64,
    /// Fraction of lines that repeat an earlier one: 0.30 (Gopher).
    pub dup_line_frac: f64,
    /// Fraction of characters in repeated lines: 0.20 (Gopher).
    pub dup_line_char_frac: f64,
    /// Most frequent n-gram's character share, for n = 2, 3, 4: 0.20, 0.18, 0.16 (Gopher).
    pub top_ngram_char_frac: Vec<(usize, f64)>,
    /// Characters in repeated n-grams, n = 5..10: 0.15 down to 0.10 (Gopher).
    pub dup_ngram_char_frac: Vec<(usize, f64)>,
}

impl Default for GopherRepetition {
    fn default() -> Self {
        GopherRepetition {
            enabled: true,
            dup_para_frac: 0.3,
            dup_para_char_frac: 0.2,
            dup_line_frac: 0.3,
            dup_line_char_frac: 0.2,
            top_ngram_char_frac: vec![(2, 0.2), (3, 0.18), (4, 0.16)],
            dup_ngram_char_frac: vec![
                (5, 0.15),
                (6, 0.14),
                (7, 0.13),
                (8, 0.12),
                (9, 0.11),
                (10, 0.10),
            ],
        }
    }
}

fn split_paragraphs(text: &str) -> Vec<&str> {
    // Paragraphs are separated by two or more newlines.
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("\n\n") {
        out.push(&rest[..i]);
        rest = rest[i..].trim_start_matches('\n');
    }
    out.push(rest);
    out
}

fn split_line_runs(text: &str) -> Vec<&str> {
    // Lines separated by runs of newlines; leading/trailing runs give empty lines.
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('\n') {
        out.push(&rest[..i]);
        rest = rest[i..].trim_start_matches('\n');
    }
    out.push(rest);
    out
}

/// Characters of each word, and their running sums (`sums[i]` = characters before word i).
fn char_sums(words: &[&str]) -> Vec<usize> {
    let mut sums = Vec::with_capacity(words.len() + 1);
    let mut total = 0;
    sums.push(0);
    for w in words {
        total += chars(w);
        sums.push(total);
    }
    sums
}

/// Characters of the most frequent word n-gram (the first seen among equals) times its
/// count, and that count. N-grams are compared by the hash of their words (see
/// [`word_hashes`]).
fn top_ngram_chars(
    hashes: &[(u64, u64)],
    sums: &[usize],
    n: usize,
    counts: &mut Counts,
) -> Option<(usize, usize)> {
    if n == 0 || hashes.len() < n {
        return None;
    }
    counts.reset(hashes.len());
    // Most frequent; among equals, the one seen first.
    let (mut count, mut first) = (0u32, 0u32);
    for i in 0..=hashes.len() - n {
        let (c, f) = counts.add(gram_hash(hashes, i, n), i as u32);
        if c > count || (c == count && f < first) {
            (count, first) = (c, f);
        }
    }
    let (count, first) = (count as usize, first as usize);
    // The n-gram joined with spaces, times its count.
    let len = sums[first + n] - sums[first] + n - 1;
    Some((len * count, count))
}

/// Characters of the longest run of `n` words joined with spaces (0 when there are
/// fewer words).
fn longest_window(sums: &[usize], n: usize) -> usize {
    let words = sums.len() - 1;
    if n == 0 || words < n {
        return 0;
    }
    (0..=words - n)
        .map(|i| sums[i + n] - sums[i] + n - 1)
        .max()
        .unwrap_or(0)
}

/// Hash of the words `i..i + n`, separated (a top n-gram is a tuple of words).
fn gram_hash(hashes: &[(u64, u64)], i: usize, n: usize) -> u64 {
    hashes[i..i + n].iter().fold(0u64, |acc, &(h, pow)| {
        acc.wrapping_mul(pow)
            .wrapping_add(h)
            .wrapping_mul(BASE)
            .wrapping_add(0x9e37_79b9)
    })
}

/// A set of u64 keys (hashes already) with a count and a first position per key: open
/// addressing with linear probing, cleared and reused between passes. Several times
/// cheaper than a general hash map for the few hundred to few thousand keys of a page.
struct Counts {
    slots: Vec<(u64, u32, u32)>,
    mask: usize,
}

impl Counts {
    fn new() -> Self {
        Counts {
            slots: Vec::new(),
            mask: 0,
        }
    }

    /// Empties the table, sized for `n` keys.
    fn reset(&mut self, n: usize) {
        let size = (2 * n.max(8)).next_power_of_two();
        self.slots.clear();
        self.slots.resize(size, (0, 0, 0));
        self.mask = size - 1;
    }

    /// Counts `key` seen at `pos`; returns its count so far (1 for a new key) and the
    /// position it was first seen at.
    fn add(&mut self, key: u64, pos: u32) -> (u32, u32) {
        // 0 marks an empty slot.
        let key = key.max(1);
        let mut i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & self.mask;
        loop {
            let slot = &mut self.slots[i];
            if slot.0 == key {
                slot.1 += 1;
                return (slot.1, slot.2);
            }
            if slot.0 == 0 {
                *slot = (key, 1, pos);
                return (1, pos);
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// Polynomial hash of a byte string; `h(xy) = h(x) * B^|y| + h(y)`, so n-grams compare
/// as their concatenation (no separator), as the reference joins them.
const BASE: u64 = 0x100_0000_01b3;

fn word_hashes(words: &[&str]) -> Vec<(u64, u64)> {
    words
        .iter()
        .map(|w| {
            let (mut h, mut pow) = (0u64, 1u64);
            for &b in w.as_bytes() {
                h = h.wrapping_mul(BASE).wrapping_add(u64::from(b) + 1);
                pow = pow.wrapping_mul(BASE);
            }
            (h, pow)
        })
        .collect()
}

/// Concatenation hashes of word windows in O(1) each: `prefix[k]` hashes words `0..k`
/// and the hash of words `i..j` is `prefix[j] - prefix[i] * B^(bytes of i..j)`, equal
/// to folding the words' `(h, pow)` from `i` to `j`.
struct Windows {
    prefix: Vec<u64>,
    /// Bytes before each word.
    offset: Vec<usize>,
    /// `B^k` for every k up to the longest window asked for.
    powers: Vec<u64>,
}

impl Windows {
    fn new(words: &[&str], hashes: &[(u64, u64)], max_n: usize) -> Self {
        let mut prefix = Vec::with_capacity(hashes.len() + 1);
        let mut offset = Vec::with_capacity(words.len() + 1);
        let (mut p, mut o) = (0u64, 0usize);
        prefix.push(p);
        offset.push(o);
        for (w, &(h, pow)) in words.iter().zip(hashes) {
            p = p.wrapping_mul(pow).wrapping_add(h);
            o += w.len();
            prefix.push(p);
            offset.push(o);
        }
        let longest = (0..words.len().saturating_sub(max_n.saturating_sub(1)))
            .map(|i| offset[(i + max_n).min(words.len())] - offset[i])
            .max()
            .unwrap_or(0);
        // Past 64 KiB (a page of one giant token) powers are computed when asked for.
        let table = longest.min(1 << 16);
        let mut powers = Vec::with_capacity(table + 1);
        let mut x = 1u64;
        for _ in 0..=table {
            powers.push(x);
            x = x.wrapping_mul(BASE);
        }
        Windows {
            prefix,
            offset,
            powers,
        }
    }

    fn hash(&self, i: usize, n: usize) -> u64 {
        let bytes = self.offset[i + n] - self.offset[i];
        let power = match self.powers.get(bytes) {
            Some(&p) => p,
            None => pow(BASE, bytes),
        };
        self.prefix[i + n].wrapping_sub(self.prefix[i].wrapping_mul(power))
    }
}

/// `base^exp` modulo 2^64, by squaring.
fn pow(mut base: u64, mut exp: usize) -> u64 {
    let mut acc = 1u64;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    acc
}

fn repeated_ngram_chars(windows: &Windows, sums: &[usize], n: usize, seen: &mut Counts) -> usize {
    let words = sums.len() - 1;
    seen.reset(words);
    let (mut repeated, mut i) = (0, 0);
    while n > 0 && i + n <= words {
        if seen.add(windows.hash(i, n), i as u32).0 == 1 {
            i += 1;
        } else {
            repeated += sums[i + n] - sums[i];
            i += n;
        }
    }
    repeated
}

/// The word positions where the shortest n-gram of the duplicated n-gram rules occurred
/// before. Every n-gram [`repeated_ngram_chars`] counts, for any longer n, starts at one
/// of them (its first words repeat too), so the characters of windows of n words from
/// these positions bound what that pass can find.
struct RepeatStarts {
    /// The shortest n; 0 when there is no rule.
    shortest: usize,
    starts: Vec<bool>,
}

impl RepeatStarts {
    fn new(rules: &[(usize, f64)], windows: &Windows, seen: &mut Counts) -> Self {
        let shortest = rules
            .iter()
            .map(|&(n, _)| n)
            .filter(|&n| n > 0)
            .min()
            .unwrap_or(0);
        let words = windows.prefix.len() - 1;
        let mut starts = Vec::new();
        if shortest > 0 && words >= shortest {
            seen.reset(words);
            starts.extend(
                (0..=words - shortest).map(|i| seen.add(windows.hash(i, shortest), i as u32).0 > 1),
            );
        }
        RepeatStarts { shortest, starts }
    }

    /// Characters covered by the windows of `n` words starting at repeat positions: at
    /// least what `repeated_ngram_chars(n)` counts, for `n` at least the shortest.
    fn bound(&self, sums: &[usize], n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        if self.shortest == 0 || n < self.shortest {
            return usize::MAX;
        }
        let words = sums.len() - 1;
        let (mut covered, mut end) = (0, 0);
        for (i, _) in self.starts.iter().enumerate().filter(|(_, r)| **r) {
            let stop = (i + n).min(words);
            let from = i.max(end);
            if stop > from {
                covered += sums[stop] - sums[from];
            }
            end = end.max(stop);
        }
        covered
    }
}

impl GopherRepetition {
    pub fn check(&self, text: &str) -> Option<&'static str> {
        self.check_words(text, &split_words(text))
    }

    /// [`GopherRepetition::check`] with the words of `text` already split.
    pub fn check_words(&self, text: &str, words: &[&str]) -> Option<&'static str> {
        if text.is_empty() {
            return Some("empty");
        }
        let len = chars(text) as f64;
        let paragraphs = split_paragraphs(text.trim());
        let (n, c) = duplicates(paragraphs.iter().copied());
        if n as f64 / paragraphs.len() as f64 > self.dup_para_frac {
            return Some("dup_para_frac");
        }
        if c as f64 / len > self.dup_para_char_frac {
            return Some("dup_para_char_frac");
        }
        let lines = split_line_runs(text);
        let (n, c) = duplicates(lines.iter().copied());
        if n as f64 / lines.len() as f64 > self.dup_line_frac {
            return Some("dup_line_frac");
        }
        if c as f64 / len > self.dup_line_char_frac {
            return Some("dup_line_char_frac");
        }
        let sums = char_sums(words);
        let hashes = word_hashes(words);
        let mut counts = Counts::new();
        // The most frequent n-gram is no more frequent than the most frequent shorter
        // one, and no longer than the longest window: when that product is under the
        // threshold the rule holds without counting.
        let mut shorter_top: Option<(usize, usize)> = None;
        for &(n, frac) in &self.top_ngram_char_frac {
            if let Some((m, count)) = shorter_top
                && m < n
                && (count * longest_window(&sums, n)) as f64 / len <= frac
            {
                continue;
            }
            let Some((top, count)) = top_ngram_chars(&hashes, &sums, n, &mut counts) else {
                continue;
            };
            if shorter_top.is_none_or(|(m, c)| m >= n || count <= c) {
                shorter_top = Some((n, count));
            }
            if top as f64 / len > frac {
                return Some(match n {
                    2 => "top_2_gram",
                    3 => "top_3_gram",
                    4 => "top_4_gram",
                    _ => "top_n_gram",
                });
            }
        }
        let max_n = self.dup_ngram_char_frac.iter().map(|&(n, _)| n).max();
        let windows = Windows::new(words, &hashes, max_n.unwrap_or(0));
        let repeats = RepeatStarts::new(&self.dup_ngram_char_frac, &windows, &mut counts);
        for &(n, frac) in &self.dup_ngram_char_frac {
            // Most pages repeat little: the bound settles them without a pass of their own.
            if repeats.bound(&sums, n) as f64 / len <= frac {
                continue;
            }
            if repeated_ngram_chars(&windows, &sums, n, &mut counts) as f64 / len > frac {
                return Some(match n {
                    5 => "duplicated_5_n_grams",
                    6 => "duplicated_6_n_grams",
                    7 => "duplicated_7_n_grams",
                    8 => "duplicated_8_n_grams",
                    9 => "duplicated_9_n_grams",
                    10 => "duplicated_10_n_grams",
                    _ => "duplicated_n_grams",
                });
            }
        }
        None
    }
}

/// Gopher quality rules (Rae et al. 2021, section A1; datatrove `GopherQualityFilter`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GopherQuality {
    pub enabled: bool,
    /// Fewer non-symbol words than this: 50 (Gopher).
    pub min_doc_words: usize,
    /// More non-symbol words than this: 100,000 (Gopher).
    pub max_doc_words: usize,
    /// Mean word length bounds: 3 to 10 characters (Gopher).
    pub min_avg_word_length: f64,
    pub max_avg_word_length: f64,
    /// `#` or ellipses per word: 0.1 (Gopher).
    pub max_symbol_word_ratio: f64,
    /// Lines starting with a bullet: 0.9 (Gopher).
    pub max_bullet_lines_ratio: f64,
    /// Lines ending with an ellipsis: 0.3 (Gopher).
    pub max_ellipsis_lines_ratio: f64,
    /// Minimum share of words with an alphabetic character: 0.8 (Gopher).
    pub min_alpha_words_ratio: f64,
    /// Minimum distinct stop words present: 2 (Gopher).
    pub min_stop_words: usize,
    /// Gopher's stop words.
    pub stop_words: Vec<String>,
}

impl Default for GopherQuality {
    fn default() -> Self {
        GopherQuality {
            enabled: true,
            min_doc_words: 50,
            max_doc_words: 100_000,
            min_avg_word_length: 3.0,
            max_avg_word_length: 10.0,
            max_symbol_word_ratio: 0.1,
            max_bullet_lines_ratio: 0.9,
            max_ellipsis_lines_ratio: 0.3,
            min_alpha_words_ratio: 0.8,
            min_stop_words: 2,
            stop_words: ["the", "be", "to", "of", "and", "that", "have", "with"]
                .map(String::from)
                .to_vec(),
        }
    }
}

impl GopherQuality {
    pub fn check(&self, text: &str) -> Option<&'static str> {
        self.check_words(text, &split_words(text))
    }

    /// [`GopherQuality::check`] with the words of `text` already split.
    pub fn check_words(&self, text: &str, words: &[&str]) -> Option<&'static str> {
        let n_words = words.len();
        let (mut non_symbol, mut non_symbol_chars) = (0usize, 0usize);
        for w in words {
            if w.chars().any(|c| !is_punctuation(c)) {
                non_symbol += 1;
                non_symbol_chars += chars(w);
            }
        }
        if non_symbol < self.min_doc_words {
            return Some("gopher_short_doc");
        }
        if non_symbol > self.max_doc_words {
            return Some("gopher_long_doc");
        }
        let mean = non_symbol_chars as f64 / non_symbol as f64;
        if mean < self.min_avg_word_length {
            return Some("gopher_below_avg_threshold");
        }
        if mean > self.max_avg_word_length {
            return Some("gopher_above_avg_threshold");
        }
        let n = n_words as f64;
        if text.matches('#').count() as f64 / n > self.max_symbol_word_ratio {
            return Some("gopher_too_many_hashes");
        }
        if (text.matches("...").count() + text.matches('…').count()) as f64 / n
            > self.max_symbol_word_ratio
        {
            return Some("gopher_too_many_ellipsis");
        }
        let lines = splitlines(text);
        let nl = lines.len().max(1) as f64;
        let bullets = lines
            .iter()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with('•') || l.starts_with('-')
            })
            .count();
        if bullets as f64 / nl > self.max_bullet_lines_ratio {
            return Some("gopher_too_many_bullets");
        }
        let ellipsis = lines
            .iter()
            .filter(|l| {
                let l = l.trim_end();
                l.ends_with("...") || l.ends_with('…')
            })
            .count();
        if ellipsis as f64 / nl > self.max_ellipsis_lines_ratio {
            return Some("gopher_too_many_end_ellipsis");
        }
        let alpha = words
            .iter()
            .filter(|w| w.chars().any(char::is_alphabetic))
            .count();
        if (alpha as f64) / n < self.min_alpha_words_ratio {
            return Some("gopher_below_alpha_threshold");
        }
        // Distinct stop words, counted until there are enough.
        let mut found = vec![false; self.stop_words.len()];
        let mut stop = 0;
        for w in words {
            if stop >= self.min_stop_words {
                break;
            }
            if let Some(k) = self.stop_words.iter().position(|s| s == w)
                && !found[k]
            {
                found[k] = true;
                stop += 1;
            }
        }
        if stop < self.min_stop_words {
            return Some("gopher_enough_stop_words");
        }
        None
    }
}

/// C4 rules (Raffel et al. 2020; datatrove `C4QualityFilter`): lines without terminal
/// punctuation, with fewer than 3 words, with a word over 1,000 characters, mentioning
/// javascript or a policy/cookie phrase are removed; a page with "lorem ipsum" or a curly
/// bracket, or with fewer than 5 sentences left, is dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct C4 {
    pub enabled: bool,
    pub remove_citations: bool,
    pub filter_no_terminal_punct: bool,
    /// Minimum sentences left: 5 (C4).
    pub min_num_sentences: usize,
    /// Minimum words per line: 3 (C4).
    pub min_words_per_line: usize,
    /// Longest word allowed in a line: 1,000 characters (C4's code).
    pub max_word_length: usize,
    pub filter_lorem_ipsum: bool,
    pub filter_javascript: bool,
    pub filter_curly_bracket: bool,
    pub filter_policy: bool,
}

impl Default for C4 {
    fn default() -> Self {
        C4 {
            enabled: true,
            remove_citations: true,
            filter_no_terminal_punct: true,
            min_num_sentences: 5,
            min_words_per_line: 3,
            max_word_length: 1000,
            filter_lorem_ipsum: true,
            filter_javascript: true,
            filter_curly_bracket: true,
            filter_policy: true,
        }
    }
}

const POLICY: [&str; 6] = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
];

/// Removes Wikipedia-style citations: `[12]`, `[]`, `[edit]`, `[citation needed]`.
fn remove_citations(line: &str) -> Cow<'_, str> {
    if !line.contains('[') {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let close = after.find(']');
        let citation = close.is_some_and(|j| {
            let inner = &after[..j];
            inner.chars().all(|c| c.is_ascii_digit())
                || inner == "edit"
                || inner == "citation needed"
        });
        match (citation, close) {
            (true, Some(j)) => rest = &after[j + 1..],
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Sentences in a line, counted as spaCy's sentencizer splits them: a new sentence
/// starts at the first word after a token that is a single sentence-ending character.
fn count_sentences(line: &str) -> usize {
    let tokens = split_words(line);
    if tokens.is_empty() {
        return 0;
    }
    let mut sentences = 1;
    let mut seen_end = false;
    for t in tokens {
        let mut it = t.chars();
        let single_end = matches!((it.next(), it.next()), (Some(c), None) if is_terminal(c));
        let punct = t.chars().all(is_punctuation);
        if seen_end && !punct && !single_end {
            sentences += 1;
            seen_end = false;
        } else if single_end {
            seen_end = true;
        }
    }
    sentences
}

impl C4 {
    /// Removes lines; returns the new text, or the reason the page is dropped.
    pub fn apply(&self, text: &str) -> Result<Option<String>, &'static str> {
        let mut kept: Vec<Cow<'_, str>> = Vec::new();
        let mut sentences = 0;
        let mut lower = String::new();
        for raw in splitlines(text) {
            let trimmed = raw.trim();
            // A word longer than the limit needs a line longer than it, in bytes.
            if trimmed.len() > self.max_word_length
                && chunks(trimmed).any(|w| chars(w) > self.max_word_length)
            {
                continue;
            }
            let line = if self.remove_citations {
                remove_citations(trimmed)
            } else {
                Cow::Borrowed(trimmed)
            };
            if self.filter_no_terminal_punct
                && (!line.ends_with(['.', '?', '!', '"', '\'']) || line.ends_with("..."))
            {
                continue;
            }
            if chunks(trimmed).take(self.min_words_per_line).count() < self.min_words_per_line {
                continue;
            }
            // The phrases looked for are ASCII: lowercasing ASCII letters finds them
            // as Python's lower() does.
            lower.clear();
            lower.extend(line.chars().map(|c| c.to_ascii_lowercase()));
            if self.filter_lorem_ipsum && lower.contains("lorem ipsum") {
                return Err("lorem_ipsum");
            }
            if self.filter_javascript && lower.contains("javascript") {
                continue;
            }
            if self.filter_curly_bracket && line.contains('{') {
                return Err("curly_bracket");
            }
            if self.filter_policy && POLICY.iter().any(|p| lower.contains(p)) {
                continue;
            }
            // Only whether there are enough sentences matters: stop counting then.
            if sentences < self.min_num_sentences {
                sentences += count_sentences(&line);
            }
            kept.push(line);
        }
        if sentences < self.min_num_sentences {
            return Err("too_few_sentences");
        }
        let joined = kept.join("\n").trim().to_string();
        Ok((joined != text).then_some(joined))
    }
}

/// FineWeb's own rules (Penedo et al. 2024; datatrove `FineWebQualityFilter`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FineWeb {
    pub enabled: bool,
    /// Minimum share of lines ending in terminal punctuation: 0.12 (FineWeb).
    pub line_punct_thr: f64,
    /// Maximum share of lines of at most `short_line_length` characters: 0.67 (FineWeb).
    pub short_line_thr: f64,
    pub short_line_length: usize,
    /// Maximum share of characters in duplicated lines: 0.01 (FineWeb).
    pub char_duplicates_ratio: f64,
    /// Maximum newlines per word: 0.3 (FineWeb).
    pub new_line_ratio: f64,
}

impl Default for FineWeb {
    fn default() -> Self {
        FineWeb {
            enabled: true,
            line_punct_thr: 0.12,
            short_line_thr: 0.67,
            short_line_length: 30,
            char_duplicates_ratio: 0.01,
            new_line_ratio: 0.3,
        }
    }
}

impl FineWeb {
    pub fn check(&self, text: &str) -> Option<&'static str> {
        self.check_words(text, None)
    }

    /// [`FineWeb::check`]; `words` is the word count of `text` when already known.
    pub fn check_words(&self, text: &str, words: Option<usize>) -> Option<&'static str> {
        let lines: Vec<&str> = text.split('\n').filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            return Some("empty");
        }
        let n = lines.len() as f64;
        let punct = lines
            .iter()
            .filter(|l| l.chars().next_back().is_some_and(is_terminal))
            .count();
        if (punct as f64) / n < self.line_punct_thr {
            return Some("line_punct_ratio");
        }
        let short = lines
            .iter()
            .filter(|l| chars(l) <= self.short_line_length)
            .count();
        if short as f64 / n > self.short_line_thr {
            return Some("short_line_ratio");
        }
        let (_, dup_chars) = duplicates(lines.iter().copied());
        let body = text.chars().filter(|&c| c != '\n').count().max(1);
        if dup_chars as f64 / body as f64 > self.char_duplicates_ratio {
            return Some("char_dup_ratio");
        }
        let words = words
            .unwrap_or_else(|| crate::words::count_words(text))
            .max(1);
        if text.matches('\n').count() as f64 / words as f64 > self.new_line_ratio {
            return Some("list_ratio");
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENTENCES: [&str; 8] = [
        "The council approved the budget for the new library after a long debate.",
        "Residents have asked for more frequent buses on the northern routes.",
        "The festival will return to the old harbour at the end of June.",
        "Scientists measured the temperature of the lake every morning for a year.",
        "Our team tested twelve laptops to find the best one for students.",
        "She started the company in her garage with a single sewing machine.",
        "Heavy rain is expected across the region on Thursday night.",
        "The museum has opened a new wing dedicated to local history and to the people of the valley.",
    ];

    fn prose(sentences: usize) -> String {
        SENTENCES[..sentences].join("\n")
    }

    #[test]
    fn repetition() {
        let r = GopherRepetition::default();
        assert_eq!(r.check(""), Some("empty"));
        assert_eq!(r.check(&prose(8)), None);
        let repeated = ["same line here."; 10].join("\n");
        assert_eq!(r.check(&repeated), Some("dup_line_frac"));
        let paras = ["a paragraph that repeats itself."; 5].join("\n\n");
        assert_eq!(r.check(&paras), Some("dup_para_frac"));
        assert_eq!(r.check(&"buy now ".repeat(50)), Some("top_2_gram"));
        // A phrase among unique words: its 2-grams stay under their threshold, so the
        // longer n-gram's rule must still be counted, not skipped by the bound.
        let among_unique = |phrase: &str, filler: usize| {
            (0..20)
                .map(|i| {
                    let fill: Vec<String> =
                        (0..filler).map(|j| format!("w{i:02}x{j:02}")).collect();
                    format!("{phrase} {}", fill.join(" "))
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            r.check(&among_unique("alpha beta gamma", 5)),
            Some("top_3_gram")
        );
        assert_eq!(
            r.check(&among_unique("alpha beta gamma delta", 12)),
            Some("top_4_gram")
        );
    }

    #[test]
    fn quality() {
        let q = GopherQuality::default();
        assert_eq!(q.check("too short"), Some("gopher_short_doc"));
        assert_eq!(q.check(&prose(8)), None);
        let hashes = format!("{} {}", prose(8), "#tag ".repeat(20));
        assert_eq!(q.check(&hashes), Some("gopher_too_many_hashes"));
        let bullets = SENTENCES.map(|s| format!("- {s}")).join("\n");
        assert_eq!(q.check(&bullets), Some("gopher_too_many_bullets"));
        let no_stop = "apple banana cherry ".repeat(30);
        assert_eq!(q.check(&no_stop), Some("gopher_enough_stop_words"));
    }

    #[test]
    fn c4_removes_lines_and_drops_pages() {
        let c4 = C4::default();
        let text = format!(
            "{}\nMenu\nPlease enable JavaScript to view this site.\nRead our privacy policy here.",
            prose(6)
        );
        assert_eq!(c4.apply(&text), Ok(Some(prose(6))));
        assert_eq!(c4.apply(&prose(3)), Err("too_few_sentences"));
        assert_eq!(
            c4.apply(&format!("{}\nLorem ipsum dolor sit amet.", prose(6))),
            Err("lorem_ipsum")
        );
        assert_eq!(
            c4.apply(&format!("{}\nvar x = {{ a: 1 }}.", prose(6))),
            Err("curly_bracket")
        );
        assert_eq!(
            remove_citations("Paris[1] is big[citation needed]."),
            "Paris is big."
        );
    }

    #[test]
    fn fineweb() {
        let f = FineWeb::default();
        assert_eq!(f.check(&prose(8)), None);
        let short = (0..10)
            .map(|i| format!("Home {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(f.check(&short), Some("line_punct_ratio"));
        let dup = format!(
            "{}\nThe same closing line appears twice here.\nThe same closing line appears twice here.",
            prose(3)
        );
        assert_eq!(f.check(&dup), Some("char_dup_ratio"));
    }

    #[test]
    fn window_hashes_equal_folded_hashes() {
        let long = "x".repeat(70_000);
        let text = format!("a bb {long} ccc a bb {long} ccc d");
        let words: Vec<&str> = text.split(' ').collect();
        let hashes = word_hashes(&words);
        let windows = Windows::new(&words, &hashes, 4);
        for n in 1..=4 {
            for i in 0..=words.len() - n {
                let folded = hashes[i..i + n]
                    .iter()
                    .fold(0u64, |acc, &(h, p)| acc.wrapping_mul(p).wrapping_add(h));
                assert_eq!(windows.hash(i, n), folded, "window {i}+{n}");
            }
        }
        assert_eq!(windows.hash(0, 4), windows.hash(4, 4));
    }

    #[test]
    fn repeat_bound_holds_for_every_n() {
        // Word streams from a tiny vocabulary with copied stretches: many repeats of
        // every length, at every offset.
        let vocab = ["a", "bb", "ccc", "dddd", "é", "the", "x", "yy"];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as usize
        };
        let rules = GopherRepetition::default().dup_ngram_char_frac;
        for _ in 0..300 {
            let mut words: Vec<&str> = Vec::new();
            let len = 1 + next(120);
            while words.len() < len {
                if words.len() > 4 && next(3) == 0 {
                    let from = next(words.len() - 1);
                    let take = 1 + next(12);
                    for k in from..(from + take).min(words.len()) {
                        words.push(words[k]);
                    }
                } else {
                    words.push(vocab[next(vocab.len())]);
                }
            }
            let sums = char_sums(&words);
            let hashes = word_hashes(&words);
            let windows = Windows::new(&words, &hashes, 10);
            let mut counts = Counts::new();
            let repeats = RepeatStarts::new(&rules, &windows, &mut counts);
            for n in 5..=10 {
                let exact = repeated_ngram_chars(&windows, &sums, n, &mut counts);
                assert!(repeats.bound(&sums, n) >= exact, "n={n} {words:?}");
            }
            // Without a rule nothing is bounded.
            let none = RepeatStarts::new(&[], &windows, &mut counts);
            assert_eq!(none.bound(&sums, 5), usize::MAX);
        }
    }

    #[test]
    fn python_splitlines() {
        assert_eq!(splitlines("a\r\nb\rc\n"), ["a", "b", "c"]);
        assert_eq!(splitlines("a\n\nb"), ["a", "", "b"]);
        assert_eq!(
            splitlines("é\u{85}ü\u{2028}x\u{2029}\u{b}y\u{1e}z€"),
            ["é", "ü", "x", "", "y", "z€"]
        );
    }
}
