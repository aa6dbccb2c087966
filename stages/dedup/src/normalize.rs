//! Text and URL normalisation, and shingling: what two documents must share to count as
//! the same.
//!
//! Text, in this order (datatrove's `simplify_text` does the same kinds of folding):
//! 1. Unicode NFKC (full-width forms, ligatures and compatibility characters folded);
//! 2. lowercase (Unicode `to_lowercase`), and `ß` written `ss` (so `STRASSE` and
//!    `Straße` agree, as full case folding would have it);
//! 3. accents stripped from Latin, Greek and Cyrillic letters only (canonical
//!    decomposition, combining marks dropped): `é` → `e`, `й` → `и`; marks of other
//!    scripts (Devanagari vowel signs, Hebrew points…) are letters there and stay;
//! 4. every character that is a decimal or other number becomes `0`;
//! 5. everything that is neither a letter, a number nor a combining mark (punctuation,
//!    symbols, emoji, control characters, whitespace) separates words;
//! 6. words are joined by one space; no leading or trailing space.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::{decompose_canonical, is_combining_mark};
use xxhash_rust::xxh3::{xxh3_64_with_seed, xxh3_128_with_seed};

/// Writes the normalised form of `text` into `out` (cleared first).
///
/// ASCII runs take a fast path: NFKC leaves ASCII as it is, and an ASCII character
/// never composes with the character before it, so a run of ASCII characters each
/// followed by another ASCII character normalises on its own. The ASCII character just
/// before a non-ASCII one (which may be a combining mark that composes with it: `e` and
/// U+0301) goes to the full path with the non-ASCII run after it.
pub fn normalize_into(text: &str, out: &mut String) {
    // Written as bytes (the ASCII path writes without a branch per byte), taken back as a
    // string at the end.
    let mut buf = std::mem::take(out).into_bytes();
    buf.clear();
    let mut words = Words {
        out: &mut buf,
        gap: false,
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // The ASCII run from `i`; its last byte goes to the full path when a non-ASCII
        // byte follows it.
        let run = i + ascii_run(&bytes[i..]);
        let fast_end = if run == bytes.len() {
            run
        } else {
            run.saturating_sub(1).max(i)
        };
        words.ascii_run(&bytes[i..fast_end]);
        if fast_end == bytes.len() {
            break;
        }
        let mut j = fast_end;
        if bytes[j].is_ascii() {
            j += 1;
        }
        while j < bytes.len() && !bytes[j].is_ascii() {
            j += 1;
        }
        // fast_end and j lie on ASCII bytes (or the end): character boundaries.
        words.full(&text[fast_end..j]);
        i = j;
    }
    *out = match String::from_utf8(buf) {
        Ok(normalized) => normalized,
        // Not reached: ASCII bytes and whole characters are all that is written.
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
}

/// The length of the run of ASCII bytes that `bytes` starts with, 8 bytes at a time.
fn ascii_run(bytes: &[u8]) -> usize {
    let mut n = 0;
    for chunk in bytes.chunks_exact(8) {
        let mut x = [0u8; 8];
        x.copy_from_slice(chunk);
        let high = u64::from_le_bytes(x) & 0x8080_8080_8080_8080;
        if high != 0 {
            return n + (high.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + bytes[n..].iter().take_while(|b| b.is_ascii()).count()
}

/// What the normalised text keeps of an ASCII byte: a lowercase letter, `0` for a digit,
/// and 0 for a separator.
const ASCII_KEPT: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = if c.is_ascii_digit() {
            b'0'
        } else if c.is_ascii_alphabetic() {
            c.to_ascii_lowercase()
        } else {
            0
        };
        b += 1;
    }
    t
};

/// The normalised text being written: words joined by one space.
struct Words<'a> {
    /// UTF-8: ASCII bytes and whole characters.
    out: &'a mut Vec<u8>,
    /// A separator came since the last character written.
    gap: bool,
}

impl Words<'_> {
    fn push(&mut self, c: char) {
        if c.is_alphanumeric() || is_combining_mark(c) {
            if self.gap && !self.out.is_empty() {
                self.out.push(b' ');
            }
            self.gap = false;
            let c = if c.is_numeric() { '0' } else { c };
            self.out
                .extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes());
        } else {
            self.gap = true;
        }
    }

    /// ASCII characters: what [`Words::full`] does to them, without the Unicode tables
    /// and without a branch per byte (words and separators alternate too often for a
    /// branch to be predicted): each byte writes a space and its kept byte, and the
    /// write position moves past what is kept.
    fn ascii_run(&mut self, run: &[u8]) {
        let mut at = self.out.len();
        // A kept byte writes at most two bytes (a space after a gap, then itself), and
        // a gap other than the first takes a byte of the run: `run.len() + 1` at most,
        // and one more for the space each byte writes past the end.
        self.out.resize(at + run.len() + 2, 0);
        let mut gap = self.gap;
        for &b in run {
            let kept = ASCII_KEPT[usize::from(b & 0x7f)];
            let is_kept = kept != 0;
            self.out[at] = b' ';
            at += usize::from(is_kept & gap & (at > 0));
            self.out[at] = kept;
            at += usize::from(is_kept);
            gap = !is_kept;
        }
        self.out.truncate(at);
        self.gap = gap;
    }

    /// NFKC, lowercase, `ß` as `ss`, accents of Latin, Greek and Cyrillic stripped.
    fn full(&mut self, text: &str) {
        for c in text.nfkc() {
            for l in c.to_lowercase() {
                if l == 'ß' {
                    self.push('s');
                    self.push('s');
                    continue;
                }
                // Latin, Greek, Cyrillic and Armenian end before U+0590.
                if !l.is_ascii() && (l as u32) < 0x0590 {
                    decompose_canonical(l, |d| {
                        if !is_combining_mark(d) {
                            self.push(d);
                        }
                    });
                } else {
                    self.push(l);
                }
            }
        }
    }
}

/// The normalised form of `text`.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    normalize_into(text, &mut out);
    out
}

/// What a shingle is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shingles {
    /// Runs of `ngram` words (FineWeb: 5 words).
    Words,
    /// Runs of `ngram` characters of the normalised text, spaces included: for scripts
    /// written without spaces (Chinese, Japanese, Thai).
    Chars,
}

/// Calls `f` with the 64-bit hash of every shingle of a normalised text, in order
/// (repeats included). A text shorter than one shingle gives one shingle of all of it;
/// an empty text gives none.
pub fn for_each_shingle(normalized: &str, kind: Shingles, ngram: usize, mut f: impl FnMut(u64)) {
    let n = ngram.max(1);
    if normalized.is_empty() {
        return;
    }
    let bytes = normalized.as_bytes();
    // Byte offsets where each unit starts, then the end of the text: a unit ends where
    // the next starts (less the space between words, for words).
    let mut starts: Vec<u32> = Vec::new();
    let gap = match kind {
        Shingles::Words => {
            // Each byte writes the start of a word after it, kept where it is a space
            // (no branch per byte).
            starts.resize(bytes.len() + 2, 0);
            let mut words = 1;
            for (i, &b) in bytes.iter().enumerate() {
                starts[words] = i as u32 + 1;
                words += usize::from(b == b' ');
            }
            starts.truncate(words);
            1
        }
        Shingles::Chars => {
            starts.extend(
                bytes
                    .iter()
                    .enumerate()
                    // UTF-8 continuation bytes are 0b10xx_xxxx.
                    .filter(|&(_, &b)| b & 0xC0 != 0x80)
                    .map(|(i, _)| i as u32),
            );
            0
        }
    };
    let units = starts.len();
    starts.push(bytes.len() as u32 + gap);
    if units <= n {
        f(xxh3_64_with_seed(bytes, SHINGLE_SEED));
        return;
    }
    for i in 0..=units - n {
        let s = &bytes[starts[i] as usize..(starts[i + n] - gap) as usize];
        f(xxh3_64_with_seed(s, SHINGLE_SEED));
    }
}

/// Seed of the shingle hash (fixed: signatures of different runs must agree).
pub const SHINGLE_SEED: u64 = 0x746f_6b65_6e6d_696c; // "tokenmil"

/// 128-bit hash of a normalised text (exact dedup).
pub fn text_key(normalized: &str) -> u128 {
    xxh3_128_with_seed(normalized.as_bytes(), SHINGLE_SEED)
}

/// The normalised form of a URL for URL dedup: scheme dropped (`http` and `https` are the
/// same page), host lowercased without a leading `www.` and without a default port,
/// fragment dropped, a trailing `/` of the path dropped; path and query kept as they are.
pub fn normalize_url(url: &str) -> String {
    let url = url.trim();
    let rest = match url.find("://") {
        Some(i) => &url[i + 3..],
        None => url,
    };
    let rest = rest.split('#').next().unwrap_or("");
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let mut host = host_port.to_ascii_lowercase();
    for port in [":80", ":443"] {
        if let Some(h) = host.strip_suffix(port) {
            host = h.to_string();
        }
    }
    if let Some(h) = host.strip_prefix("www.") {
        host = h.to_string();
    }
    let (path, query) = match tail.find('?') {
        Some(i) => (&tail[..i], &tail[i..]),
        None => (tail, ""),
    };
    let path = path.strip_suffix('/').unwrap_or(path);
    format!("{host}{path}{query}")
}

/// 128-bit hash of a normalised URL.
pub fn url_key(url: &str) -> u128 {
    xxh3_128_with_seed(normalize_url(url).as_bytes(), SHINGLE_SEED)
}

/// Seconds since 1970 of an ISO 8601 date (`2024-05-01T12:00:00Z`, `2024-05-01`), or `None`.
/// Offsets other than `Z` are ignored: crawl dates are UTC.
pub fn parse_date(date: &str) -> Option<i64> {
    let b = date.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = std::str::from_utf8(b.get(r)?).ok()?;
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !(1..=12).contains(&m) {
        return None;
    }
    let (hh, mm, ss) = if b.len() >= 19 {
        (num(11..13)?, num(14..16)?, num(17..19)?)
    } else {
        (0, 0, 0)
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_case_accents_digits_punctuation() {
        assert_eq!(normalize("  Héllo, WORLD!!  Ça   va?"), "hello world ca va");
        assert_eq!(
            normalize("Price: 1,299.00 € (２０２４)"),
            "price 0 000 00 0000"
        );
        assert_eq!(normalize("Ёлка и Йод"), "елка и иод");
        assert_eq!(normalize("STRASSE"), normalize("Straße"));
        assert_eq!(
            normalize("ﬁne\u{00A0}print\ttab\nline"),
            "fine print tab line"
        );
        // Marks that are letters in their script stay.
        assert_eq!(normalize("नमस्ते दुनिया"), "नमस्ते दुनिया");
        assert_eq!(normalize("日本語のテキスト。"), "日本語のテキスト");
        assert_eq!(normalize(""), "");
        assert_eq!(normalize("!!!"), "");
    }

    /// The ASCII fast path writes what the full path writes, on text that mixes ASCII
    /// with accents, combining marks after ASCII letters, compatibility forms, `ß`,
    /// digits of other scripts and punctuation.
    #[test]
    fn the_ascii_path_equals_the_full_path() {
        let pieces = [
            "Hello",
            " ",
            "WORLD",
            "e\u{301}",
            "\u{301}",
            "Straße",
            "ﬁne",
            "Ｆｕｌｌ",
            "٣",
            "—",
            "x",
            "9",
            "\t",
            "é",
            "Ω",
            "Й",
            "日本",
            "!",
            "a\u{308}",
            "ǅ",
            "  ",
            "\u{0}",
        ];
        let mut state = 7u64;
        for _ in 0..2000 {
            let mut text = String::new();
            for _ in 0..(state % 9) {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                text.push_str(pieces[(state >> 33) as usize % pieces.len()]);
            }
            state = state.wrapping_add(0x9e37_79b9);
            let mut full = Vec::new();
            Words {
                out: &mut full,
                gap: false,
            }
            .full(&text);
            assert_eq!(normalize(&text).as_bytes(), full, "{text:?}");
        }
    }

    /// The shingles are those of the words and characters as `str` splits them, on
    /// texts with empty words, spaces at either end and characters of 1 to 4 bytes.
    #[test]
    fn shingles_equal_those_of_a_plain_split() {
        let pieces = ["a", "bc", " ", "  ", "é", "日本", "𝄞", "xyz", "0"];
        let mut state = 11u64;
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..(state % 23) {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                text.push_str(pieces[(state >> 33) as usize % pieces.len()]);
            }
            state = state.wrapping_add(0x9e37_79b9);
            for n in [1, 2, 5] {
                let plain = |units: Vec<&str>, joiner: &str| -> Vec<u64> {
                    if text.is_empty() {
                        return Vec::new();
                    }
                    if units.len() <= n {
                        return vec![xxh3_64_with_seed(text.as_bytes(), SHINGLE_SEED)];
                    }
                    units
                        .windows(n)
                        .map(|w| xxh3_64_with_seed(w.join(joiner).as_bytes(), SHINGLE_SEED))
                        .collect()
                };
                let chars: Vec<String> = text.chars().map(String::from).collect();
                for (kind, want) in [
                    (Shingles::Words, plain(text.split(' ').collect(), " ")),
                    (
                        Shingles::Chars,
                        plain(chars.iter().map(String::as_str).collect(), ""),
                    ),
                ] {
                    let mut got = Vec::new();
                    for_each_shingle(&text, kind, n, |h| got.push(h));
                    assert_eq!(got, want, "{kind:?} {n} {text:?}");
                }
            }
        }
    }

    #[test]
    fn shingles_words_and_chars() {
        let mut n = 0;
        for_each_shingle("a b c d e f g", Shingles::Words, 5, |_| n += 1);
        assert_eq!(n, 3);
        let mut short = Vec::new();
        for_each_shingle("a b", Shingles::Words, 5, |h| short.push(h));
        assert_eq!(short.len(), 1);
        let mut c = 0;
        for_each_shingle("日本語のテキスト", Shingles::Chars, 5, |_| c += 1);
        assert_eq!(c, 4);
        let mut none = 0;
        for_each_shingle("", Shingles::Words, 5, |_| none += 1);
        assert_eq!(none, 0);
        // The same words give the same hashes.
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for_each_shingle("one two three four five six", Shingles::Words, 5, |h| {
            x.push(h)
        });
        for_each_shingle("zero one two three four five", Shingles::Words, 5, |h| {
            y.push(h)
        });
        assert_eq!(x[0], y[1]);
    }

    #[test]
    fn urls() {
        assert_eq!(
            normalize_url("https://WWW.Example.com:443/a/b/?q=1#top"),
            "example.com/a/b?q=1"
        );
        assert_eq!(normalize_url("http://example.com"), "example.com");
        assert_eq!(
            url_key("http://example.com/"),
            url_key("https://www.example.com")
        );
        assert_ne!(
            url_key("http://example.com/a"),
            url_key("http://example.com/b")
        );
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_date("2024-03-01"), Some(1_709_251_200));
        assert!(parse_date("2024-03-01T00:00:01Z") > parse_date("2024-03-01"));
        assert_eq!(parse_date("yesterday"), None);
        assert_eq!(parse_date("2024-13-01"), None);
    }
}
