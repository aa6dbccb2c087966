//! Word splitting.
//!
//! For scripts with spaces the rules follow the English tokenizer that datatrove's
//! filters use (spaCy's `blank("en")`), closely enough that the quality decisions match:
//! split on whitespace; peel opening punctuation, quotes and currency signs off the
//! front and closing punctuation, quotes, `'s` and sentence periods off the back (a
//! period stays on abbreviations such as `U.S.`, `e.g.`, `Mr.`); split contractions
//! (`don't` → `do n't`, `I'm` → `I 'm`); split hyphens, slashes and commas between
//! letters; keep URLs whole. Scripts written without spaces (Han, Hiragana, Katakana,
//! Thai, Lao, Khmer, Myanmar) have no reliable word boundary without a dictionary; each
//! of their characters counts as one word, which keeps the word-based rules meaningful
//! (a CJK document of 50 characters has 50 "words").

use pipeline::text::unspaced;

/// Characters peeled off the front of a word.
fn is_prefix(c: char) -> bool {
    matches!(
        c,
        '§' | '%'
            | '='
            | '—'
            | '–'
            | '+'
            | '"'
            | '\''
            | '“'
            | '”'
            | '‘'
            | '’'
            | '«'
            | '»'
            | '„'
            | '('
            | '['
            | '{'
            | '<'
            | '>'
            | ')'
            | ']'
            | '}'
            | '¿'
            | '¡'
            | '$'
            | '£'
            | '€'
            | '¥'
            | '₹'
            | '#'
            | '&'
            | '*'
            | '…'
            | ','
            | ':'
            | ';'
            | '!'
            | '?'
            | '_'
            | '·'
            | '`'
            | '~'
    )
}

/// Characters peeled off the back of a word (the period has its own rule).
fn is_suffix(c: char) -> bool {
    matches!(
        c,
        ',' | ':'
            | ';'
            | '!'
            | '?'
            | '"'
            | '\''
            | '“'
            | '”'
            | '‘'
            | '’'
            | '«'
            | '»'
            | ')'
            | ']'
            | '}'
            | '>'
            | '<'
            | '('
            | '['
            | '{'
            | '…'
            | '%'
            | '*'
            | '&'
            | '#'
            | '_'
            | '—'
            | '–'
            | '`'
            | '~'
            | '¿'
            | '¡'
    )
}

/// Abbreviations that keep their period.
const ABBREVIATIONS: [&str; 36] = [
    "mr.", "mrs.", "ms.", "dr.", "prof.", "st.", "jr.", "sr.", "vs.", "etc.", "e.g.", "i.e.",
    "a.m.", "p.m.", "inc.", "ltd.", "co.", "corp.", "jan.", "feb.", "mar.", "apr.", "jun.", "jul.",
    "aug.", "sep.", "sept.", "oct.", "nov.", "dec.", "no.", "mt.", "ave.", "gen.", "gov.", "rev.",
];

/// Words with inner punctuation that stay whole.
const KEPT_WHOLE: [&str; 3] = ["and/or", "w/o", "o.k."];

/// Pronouns whose `'m 're 've 'll 'd` contractions are split.
const CONTRACTING: [&str; 14] = [
    "i", "you", "he", "she", "it", "we", "they", "that", "there", "what", "who", "where", "how",
    "here",
];

fn is_url(s: &str) -> bool {
    let l = s.trim_start_matches(|c: char| is_prefix(c));
    l.starts_with("http://") || l.starts_with("https://") || l.starts_with("www.")
}

/// Splits `text` into words (see the module docs).
pub fn split_words(text: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / 5);
    scan(text, |chunk, plain| {
        if plain {
            out.push(chunk);
        } else {
            split_chunk(chunk, &mut out);
        }
    });
    out
}

/// The number of words [`split_words`] finds, without keeping them.
pub fn count_words(text: &str) -> usize {
    let mut buf = Vec::new();
    let mut count = 0;
    scan(text, |chunk, plain| {
        if plain {
            count += 1;
        } else {
            buf.clear();
            split_chunk(chunk, &mut buf);
            count += buf.len();
        }
    });
    count
}

/// What a byte starting a character is, for [`scan`].
const ALNUM: u8 = 0;
const SPACE: u8 = 1;
const OTHER: u8 = 2;
/// A lead byte of a character that may be a space (see [`space_at`]).
const MAYBE: u8 = 3;

const CLASSES: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if c.is_ascii_alphanumeric() {
            ALNUM
        } else if matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            SPACE
        } else if matches!(c, 0xc2 | 0xe1 | 0xe2 | 0xe3) {
            MAYBE
        } else {
            OTHER
        };
        b += 1;
    }
    t
};

/// Whether the character at byte `i` of `text` is a space, and its length in bytes.
fn space_at(text: &str, i: usize) -> (bool, usize) {
    let b = text.as_bytes()[i];
    match CLASSES[b as usize] {
        SPACE => (true, 1),
        MAYBE => {
            let c = text[i..].chars().next().unwrap_or(' ');
            (c.is_whitespace(), c.len_utf8())
        }
        _ => (
            false,
            match b {
                0..0x80 => 1,
                0x80..0xe0 => 2,
                0xe0..0xf0 => 3,
                _ => 4,
            },
        ),
    }
}

/// Calls `f` with each whitespace-separated piece of `text` (as [`chunks`] finds them)
/// and whether it is plain: ASCII letters and digits only, one word as it stands.
fn scan<'a>(text: &'a str, mut f: impl FnMut(&'a str, bool)) {
    let bytes = text.as_bytes();
    let (mut i, mut start, mut plain) = (0, None, true);
    while i < bytes.len() {
        if CLASSES[bytes[i] as usize] == ALNUM {
            if start.is_none() {
                (start, plain) = (Some(i), true);
            }
            i += 1;
            continue;
        }
        let (space, len) = space_at(text, i);
        if space {
            if let Some(s) = start.take() {
                f(&text[s..i], plain);
            }
        } else {
            start.get_or_insert(i);
            plain = false;
        }
        i += len;
    }
    if let Some(s) = start {
        f(&text[s..], plain);
    }
}

/// The whitespace-separated pieces of `text`, as [`str::split_whitespace`] finds them
/// (Unicode White_Space), but looking at bytes: ASCII bytes are tested directly and a
/// multi-byte character is decoded only when its lead byte can start a space
/// (U+0085, U+00A0, U+1680, U+2000-U+205F, U+3000).
pub fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        // Skip spaces, then take everything up to the next one.
        let mut start = None;
        while i < bytes.len() {
            let (space, len) = space_at(text, i);
            match (space, start) {
                (true, Some(s)) => return Some(&text[s..i]),
                (false, None) => start = Some(i),
                _ => {}
            }
            i += len;
        }
        start.map(|s| {
            i = bytes.len();
            &text[s..]
        })
    })
}

fn split_chunk<'a>(chunk: &'a str, out: &mut Vec<&'a str>) {
    // Plain ASCII letters and digits: one word, no rule applies.
    if chunk.bytes().all(|b| b.is_ascii_alphanumeric()) {
        out.push(chunk);
        return;
    }
    if chunk.chars().any(unspaced) {
        let mut start = 0;
        for (i, c) in chunk.char_indices() {
            if unspaced(c) {
                if start < i {
                    split_chunk(&chunk[start..i], out);
                }
                out.push(&chunk[i..i + c.len_utf8()]);
                start = i + c.len_utf8();
            }
        }
        if start < chunk.len() {
            split_chunk(&chunk[start..], out);
        }
        return;
    }
    if is_url(chunk) {
        let trimmed = chunk.trim_end_matches(['.', ',', ')', ';', ':', '!', '?', '"', '\'']);
        let lead = trimmed.len() - trimmed.trim_start_matches(|c: char| is_prefix(c)).len();
        for (i, c) in trimmed[..lead].char_indices() {
            out.push(&trimmed[i..i + c.len_utf8()]);
        }
        out.push(&trimmed[lead..]);
        let rest = &chunk[trimmed.len()..];
        for (i, c) in rest.char_indices() {
            out.push(&rest[i..i + c.len_utf8()]);
        }
        return;
    }
    let mut s = chunk;
    let mut tail: Vec<&'a str> = Vec::new();
    loop {
        if s.is_empty() {
            break;
        }
        if (s.ends_with('.') || s.contains('/'))
            && ABBREVIATIONS
                .iter()
                .chain(KEPT_WHOLE.iter())
                .any(|a| a.eq_ignore_ascii_case(s))
        {
            out.push(s);
            break;
        }
        if s.len() > 1 {
            // Ellipsis as a unit at either end.
            if let Some(rest) = s.strip_prefix("...") {
                out.push(&s[..3]);
                s = rest;
                continue;
            }
            if let Some(rest) = s.strip_suffix("...") {
                tail.push(&s[rest.len()..]);
                s = rest;
                continue;
            }
            if let Some(c) = s.chars().next()
                && is_prefix(c)
            {
                out.push(&s[..c.len_utf8()]);
                s = &s[c.len_utf8()..];
                continue;
            }
            if let Some(stem) = strip_possessive(s) {
                tail.push(&s[stem.len()..]);
                s = stem;
                continue;
            }
            if let Some(c) = s.chars().next_back() {
                if is_suffix(c) {
                    tail.push(&s[s.len() - c.len_utf8()..]);
                    s = &s[..s.len() - c.len_utf8()];
                    continue;
                }
                if c == '.' && splits_period(&s[..s.len() - 1]) {
                    tail.push(&s[s.len() - 1..]);
                    s = &s[..s.len() - 1];
                    continue;
                }
            }
            if let Some((stem, clitic)) = contraction(s) {
                out.push(stem);
                out.push(clitic);
                break;
            }
        }
        split_infixes(s, out);
        break;
    }
    out.extend(tail.into_iter().rev());
}

/// `'s` / `’s` at the end of a word longer than the clitic.
fn strip_possessive(s: &str) -> Option<&str> {
    for suffix in ["'s", "'S", "’s", "’S"] {
        if let Some(stem) = s.strip_suffix(suffix)
            && !stem.is_empty()
        {
            return Some(stem);
        }
    }
    None
}

/// A sentence period splits after a lowercase letter, a digit, `%`, a closing quote or
/// bracket, or two capitals; it stays on `U.S.`-like abbreviations.
fn splits_period(before: &str) -> bool {
    let mut rev = before.chars().rev();
    let Some(last) = rev.next() else {
        return false;
    };
    if before.contains('.') {
        return false;
    }
    last.is_lowercase()
        || last.is_ascii_digit()
        || matches!(last, '%' | '²' | '-' | '+' | '"' | '\'' | ')' | ']')
        || (last.is_uppercase() && rev.next().is_some_and(char::is_uppercase))
        || (last.is_alphabetic() && !last.is_uppercase())
}

fn contraction(s: &str) -> Option<(&str, &str)> {
    // Every clitic holds an apostrophe: most words have none.
    if !s.contains(['\'', '’']) {
        return None;
    }
    let ends_ci = |suffix: &str| {
        s.len() > suffix.len()
            && s.is_char_boundary(s.len() - suffix.len())
            && s[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    };
    for clitic in ["n't", "n’t"] {
        if ends_ci(clitic) {
            let at = s.len() - clitic.len();
            return Some((&s[..at], &s[at..]));
        }
    }
    for clitic in [
        "'m", "'re", "'ve", "'ll", "'d", "’m", "’re", "’ve", "’ll", "’d",
    ] {
        if (ends_ci(clitic) || s.len() == clitic.len() && s.eq_ignore_ascii_case(clitic))
            && CONTRACTING
                .iter()
                .any(|p| p.eq_ignore_ascii_case(&s[..s.len() - clitic.len()]))
        {
            let at = s.len() - clitic.len();
            return Some((&s[..at], &s[at..]));
        }
    }
    None
}

/// Splits hyphens, slashes, commas and colons between letters, and `+ - * ^` between
/// digits, keeping the separator as its own word.
fn split_infixes<'a>(s: &'a str, out: &mut Vec<&'a str>) {
    // Most words hold no separator at all.
    if !s.contains([
        '-', '–', '—', '~', '/', ':', '<', '>', '=', ',', '+', '*', '^',
    ]) {
        out.push(s);
        return;
    }
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut start = 0;
    for w in 1..chars.len().saturating_sub(1) {
        let (i, c) = chars[w];
        let prev = chars[w - 1].1;
        let next = chars[w + 1].1;
        let between_letters = prev.is_alphabetic() && next.is_alphabetic();
        let split = match c {
            '-' | '–' | '—' | '~' => {
                (prev.is_alphanumeric() && next.is_alphabetic())
                    || (prev.is_ascii_digit() && (next.is_ascii_digit() || next == '-'))
            }
            '/' | ':' | '<' | '>' | '=' => (prev.is_alphanumeric()) && next.is_alphabetic(),
            ',' => between_letters,
            '+' | '*' | '^' => prev.is_ascii_digit() && (next.is_ascii_digit() || next == '-'),
            _ => false,
        };
        if split && i >= start {
            if start < i {
                out.push(&s[start..i]);
            }
            out.push(&s[i..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: &[&str]) {
        assert_eq!(split_words(text), expected, "{text:?}");
        assert_eq!(count_words(text), expected.len(), "{text:?}");
    }

    #[test]
    fn english_like_spacy() {
        check("Hello, world!", &["Hello", ",", "world", "!"]);
        check("I don't know.", &["I", "do", "n't", "know", "."]);
        check(
            "I'm here (really).",
            &["I", "'m", "here", "(", "really", ")", "."],
        );
        check(
            "the U.S. and e.g. this",
            &["the", "U.S.", "and", "e.g.", "this"],
        );
        check(
            "John's well-known and/or",
            &["John", "'s", "well", "-", "known", "and/or"],
        );
        check("\"Quoted\" text...", &["\"", "Quoted", "\"", "text", "..."]);
        check(
            "see https://example.com/a.html.",
            &["see", "https://example.com/a.html", "."],
        );
        check(
            "Mr. Smith paid $30.",
            &["Mr.", "Smith", "paid", "$", "30", "."],
        );
        check("2020-2021", &["2020", "-", "2021"]);
        check(
            " a\u{a0}b\u{3000}c d\u{2014}e ",
            &["a", "b", "c", "d", "—", "e"],
        );
        check(
            "40-page and/or 24/7",
            &["40", "-", "page", "and/or", "24/7"],
        );
    }

    #[test]
    fn chunks_split_like_split_whitespace() {
        for text in [
            "",
            "   ",
            "a",
            " a  b\tc\n",
            "x\u{85}y\u{a0}z\u{1680}w\u{2003}v\u{2028}u\u{202f}t\u{205f}s\u{3000}r",
            "é\u{e9}\u{2010}\u{2060}ü 東京\u{1f600} \u{1c}\u{1d}",
            "tail space ",
        ] {
            assert_eq!(
                chunks(text).collect::<Vec<_>>(),
                text.split_whitespace().collect::<Vec<_>>(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn unspaced_scripts_count_characters() {
        check("图书馆。", &["图", "书", "馆", "。"]);
        check("東京 tower", &["東", "京", "tower"]);
        check("ตลาดน้ำ", &["ต", "ล", "า", "ด", "น", "้", "ำ"]);
    }
}
