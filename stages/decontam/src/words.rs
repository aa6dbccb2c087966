//! Words and n-grams as decontamination compares them, with where each word sits in
//! the original text (so that `cut` mode can remove the matching spans).
//!
//! The folding follows datatrove's `simplify_text`, which its n-gram decontamination
//! uses: lowercase; a number (`\d+`, maybe with one `.` or `,` and more digits) becomes
//! `0`; punctuation separates words; accents (combining marks after canonical
//! decomposition) are dropped. Here every character that is neither a letter, a digit
//! nor a combining mark separates words (datatrove lists its punctuation; symbols
//! outside its list stay inside words there).

use unicode_normalization::char::{decompose_canonical, is_combining_mark};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed of the word and n-gram hashes (fixed: an index and the filter must agree).
const SEED: u64 = 0x6465_636f_6e74_616d; // "decontam"

/// One word of a text: its byte range and the hash of its folded form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word {
    pub start: usize,
    pub end: usize,
    pub hash: u64,
}

/// Calls `on_word(start, end, folded)` for each word of `text`, in order.
fn scan(text: &str, mut on_word: impl FnMut(usize, usize, &str)) {
    let mut folded = String::new();
    let mut start = None;
    // Inside a number: its digits are written as one `0`; it may take one decimal part.
    let mut in_number = false;
    let mut decimal_taken = false;
    let bytes = text.as_bytes();
    let mut finish = |start: &mut Option<usize>, end: usize, folded: &mut String| {
        if let Some(s) = start.take()
            && !folded.is_empty()
        {
            on_word(s, end, folded);
        }
        folded.clear();
    };
    for (i, c) in text.char_indices() {
        if c.is_numeric() {
            start.get_or_insert(i);
            if !in_number {
                folded.push('0');
                in_number = true;
                decimal_taken = false;
            }
            continue;
        }
        if in_number
            && !decimal_taken
            && matches!(c, '.' | ',')
            && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
        {
            // `3.14`, `1,000`: one number.
            decimal_taken = true;
            continue;
        }
        in_number = false;
        if c.is_alphanumeric() || is_combining_mark(c) {
            start.get_or_insert(i);
            for l in c.to_lowercase() {
                if l.is_ascii() {
                    folded.push(l);
                } else {
                    decompose_canonical(l, |d| {
                        if !is_combining_mark(d) {
                            folded.push(d);
                        }
                    });
                }
            }
        } else {
            finish(&mut start, i, &mut folded);
        }
    }
    finish(&mut start, text.len(), &mut folded);
}

/// The words of `text`, in order, into `out` (cleared first).
pub fn words_into(text: &str, out: &mut Vec<Word>) {
    out.clear();
    scan(text, |start, end, folded| {
        out.push(Word {
            start,
            end,
            hash: xxh3_64_with_seed(folded.as_bytes(), SEED),
        })
    });
}

/// The hash of the n-gram of `words` (their word hashes in order).
pub fn ngram_hash(words: &[Word]) -> u64 {
    let mut buf = [0u8; 8 * 64];
    let n = words.len().min(64);
    for (k, w) in words[..n].iter().enumerate() {
        buf[k * 8..k * 8 + 8].copy_from_slice(&w.hash.to_le_bytes());
    }
    xxh3_64_with_seed(&buf[..n * 8], SEED)
}

/// The hashes of every n-gram of `text` (none when it has fewer than `n` words).
pub fn ngram_hashes(text: &str, n: usize) -> Vec<u64> {
    let mut words = Vec::new();
    words_into(text, &mut words);
    if words.len() < n || n == 0 {
        return Vec::new();
    }
    words.windows(n).map(ngram_hash).collect()
}

/// The folded words of `text` joined by spaces (tests, debugging).
pub fn folded(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    scan(text, |_, _, f| out.push(f.to_string()));
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        let mut w = Vec::new();
        words_into(text, &mut w);
        w.iter().map(|w| &text[w.start..w.end]).collect()
    }

    #[test]
    fn words_numbers_and_accents() {
        assert_eq!(
            spans("Hello, world! It's 3.14 or 1,000,000."),
            ["Hello", "world", "It", "s", "3.14", "or", "1,000", "000"]
        );
        assert_eq!(folded("Café NAÏVE 10km 3.14"), "cafe naive 0km 0");
        assert_eq!(
            ngram_hashes("the Café was closed", 2),
            ngram_hashes("THE cafe... was, closed!", 2)
        );
        assert_ne!(ngram_hashes("a b c", 2), ngram_hashes("a c b", 2));
        assert!(ngram_hashes("one two", 3).is_empty());
    }

    #[test]
    fn other_scripts_keep_their_letters() {
        assert_eq!(
            spans("東京は 大きい。Привет, мир"),
            ["東京は", "大きい", "Привет", "мир"]
        );
        assert_eq!(folded("Ёлка"), "елка");
    }
}
