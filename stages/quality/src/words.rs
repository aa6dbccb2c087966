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

use std::collections::HashMap;
use std::sync::OnceLock;

use pipeline::text::unspaced;

/// How a language other than English splits, where spaCy's tokenizer for it differs
/// from its English one (`pipeline/data/spacy-rules.tsv`, from spaCy 3.8.18): its own
/// special cases in place of the English abbreviations and contractions, and four
/// affix behaviours.
#[derive(Debug, Default)]
pub struct Profile {
    /// Words kept whole or cut their own way (`z.`, `bzw.`, `см.`, `):`).
    rules: HashMap<String, Vec<String>>,
    /// A hyphen between letters is cut off; before a capital too with `hyphen_upper`.
    hyphen: bool,
    hyphen_upper: bool,
    /// An elided article is cut off after its apostrophe (`l'` `homme`).
    elision: bool,
    /// Arabic commas, semicolons and question marks are cut off.
    arabic: bool,
    /// A final period is cut off after a lowercase or caseless letter, punctuation or
    /// a quote; without, only after two capital or caseless letters (Arabic's and
    /// Persian's rule). After a digit only with `digit_period` (not German's `1.`).
    period: bool,
    digit_period: bool,
    /// A final slash is cut off (`lib/` → `lib /`).
    slash: bool,
    /// A bracket inside a word is cut off (`ab(cd` → `ab ( cd`).
    bracket: bool,
    /// `'s` is cut off (`Tib's` → `Tib 's`).
    possessive: bool,
    /// `*`, `+`, `^` between digits are cut off.
    times: bool,
    /// A slash between a letter and a digit is cut off (`OS/2`).
    slash_digit: bool,
}

impl Profile {
    /// The profile of spaCy's tokenizer for `code` (`de`), `None` for a code it lacks.
    /// Each language's is read from the table the first time it is asked for.
    pub fn of(code: &str) -> Option<&'static Profile> {
        // One cell per code in the table (its `!flags` rows), filled on first use: no
        // lock on the way of every document.
        static CELLS: OnceLock<HashMap<&'static str, OnceLock<Profile>>> = OnceLock::new();
        let cells = CELLS.get_or_init(|| {
            pipeline::languages::SPACY_RULES
                .lines()
                .filter_map(|l| {
                    l.split_once("\t!flags\t")
                        .map(|(c, _)| (c, OnceLock::new()))
                })
                .collect()
        });
        let cell = cells.get(code)?;
        Some(cell.get_or_init(|| Profile::parse(code).unwrap_or_default()))
    }

    /// `code`'s rows of `pipeline/data/spacy-rules.tsv`, and the shared ones.
    fn parse(code: &str) -> Option<Profile> {
        let mut p = Profile::default();
        let mut found = false;
        for line in pipeline::languages::SPACY_RULES.lines() {
            let Some((c, rest)) = line.split_once('\t') else {
                continue;
            };
            if c != code && c != "*" {
                continue;
            }
            let mut cells = rest.split('\t');
            let Some(word) = cells.next() else {
                continue;
            };
            let pieces: Vec<String> = cells.map(String::from).collect();
            if word == "!flags" {
                found = true;
                let flags = pieces.first().map(String::as_str).unwrap_or("");
                let has = |f: &str| flags.split(',').any(|x| x == f);
                p.hyphen = has("hyphen");
                p.hyphen_upper = has("hyphen-upper");
                p.digit_period = has("digit-period");
                p.slash = has("slash");
                p.bracket = has("bracket");
                p.possessive = has("possessive");
                p.times = has("times");
                p.slash_digit = has("slash-digit");
                p.elision = has("elision");
                p.arabic = has("arabic");
                p.period = has("latin-period");
            } else if pieces.concat() == word {
                p.rules.insert(word.to_string(), pieces);
            }
        }
        found.then_some(p)
    }
}

impl Profile {
    /// The pieces of a special case, as slices of `s`.
    fn special<'a>(&self, s: &'a str, out: &mut Vec<&'a str>) -> bool {
        let Some(pieces) = self.rules.get(s) else {
            return false;
        };
        let mut at = 0;
        for p in pieces {
            out.push(&s[at..at + p.len()]);
            at += p.len();
        }
        true
    }
}

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

/// An e-mail address, kept whole by spaCy's URL match in other languages.
fn is_email(s: &str) -> bool {
    let l = s.trim_start_matches(|c: char| is_prefix(c));
    l.split_once('@').is_some_and(|(user, host)| {
        !user.is_empty() && host.contains('.') && !host.starts_with('.')
    })
}

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

/// Splits `text` into words as spaCy's tokenizer for another language does (see
/// [`Profile`]).
pub fn split_words_in<'a>(text: &'a str, profile: &Profile) -> Vec<&'a str> {
    let mut out = Vec::with_capacity(text.len() / 5);
    scan(text, |chunk, plain| {
        if !plain {
            split_chunk_in(chunk, Some(profile), &mut out);
        } else if !profile.special(chunk, &mut out) {
            out.push(chunk);
        }
    });
    // spaCy's second pass: special cases that affix splitting cut apart (`)` `:` as
    // `):`), where the pieces touch.
    let mut merged: Vec<&'a str> = Vec::with_capacity(out.len());
    for w in out {
        if let Some(&last) = merged.last() {
            let end = last.as_ptr() as usize + last.len();
            if end == w.as_ptr() as usize
                && last.chars().all(|c| c.is_ascii_punctuation())
                && w.chars().all(|c| c.is_ascii_punctuation())
            {
                let start = last.as_ptr() as usize - text.as_ptr() as usize;
                let joined = &text[start..start + last.len() + w.len()];
                if profile.rules.get(joined).is_some_and(|p| p.len() == 1) {
                    merged.pop();
                    merged.push(joined);
                    continue;
                }
            }
        }
        merged.push(w);
    }
    merged
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
    split_chunk_in(chunk, None, out)
}

/// [`split_chunk`] by English rules (`None`) or a language's [`Profile`].
fn split_chunk_in<'a>(chunk: &'a str, profile: Option<&Profile>, out: &mut Vec<&'a str>) {
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
                    split_chunk_in(&chunk[start..i], profile, out);
                }
                out.push(&chunk[i..i + c.len_utf8()]);
                start = i + c.len_utf8();
            }
        }
        if start < chunk.len() {
            split_chunk_in(&chunk[start..], profile, out);
        }
        return;
    }
    if is_url(chunk) || (profile.is_some() && is_email(chunk)) {
        let trimmed = match profile {
            None => chunk.trim_end_matches(['.', ',', ')', ';', ':', '!', '?', '"', '\'']),
            Some(_) => chunk.trim_end_matches(['.', ',', ')', ';', ':', '!', '?', '"', '\'', '>']),
        };
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
        if let Some(p) = profile
            && p.special(s, out)
        {
            break;
        }
        if profile.is_none()
            && (s.ends_with('.') || s.contains('/'))
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
                && (profile.is_none() || c != '~')
            {
                out.push(&s[..c.len_utf8()]);
                s = &s[c.len_utf8()..];
                continue;
            }
            if profile.is_none_or(|p| p.possessive)
                && let Some(stem) = strip_possessive(s)
            {
                tail.push(&s[stem.len()..]);
                s = stem;
                continue;
            }
            if let Some(c) = s.chars().next_back() {
                let before = s[..s.len() - c.len_utf8()].chars().next_back();
                let suffix = is_suffix(c)
                    || profile.is_some_and(|p| {
                        (p.arabic && matches!(c, '،' | '؟' | '؛'))
                            || (matches!(c, '+' | '°')
                                && before.is_some_and(|b| b.is_ascii_digit()))
                            || (c == '/' && p.slash && s.len() > 1)
                    });
                if suffix {
                    tail.push(&s[s.len() - c.len_utf8()..]);
                    s = &s[..s.len() - c.len_utf8()];
                    continue;
                }
                let period = c == '.'
                    && match profile {
                        Some(p) if !p.period => capitals_before(&s[..s.len() - 1]),
                        Some(p) => spacy_period(&s[..s.len() - 1], p.digit_period),
                        None => splits_period(&s[..s.len() - 1]),
                    };
                if period {
                    tail.push(&s[s.len() - 1..]);
                    s = &s[..s.len() - 1];
                    continue;
                }
            }
            if let Some(p) = profile
                && p.elision
                && let Some(at) = elided(s)
            {
                out.push(&s[..at]);
                s = &s[at..];
                continue;
            }
            if profile.is_none()
                && let Some((stem, clitic)) = contraction(s)
            {
                out.push(stem);
                out.push(clitic);
                break;
            }
        }
        let infixes = match profile {
            None => Infixes::ENGLISH,
            Some(p) => Infixes {
                hyphen: if p.hyphen_upper {
                    Hyphen::Letters
                } else if p.hyphen {
                    Hyphen::BeforeLower
                } else {
                    Hyphen::Never
                },
                bracket: p.bracket,
                times: p.times,
                slash_digit: p.slash_digit,
                ellipsis: true,
                period: true,
            },
        };
        split_infixes(s, infixes, out);
        break;
    }
    out.extend(tail.into_iter().rev());
}

/// What [`split_infixes`] cuts inside a word.
#[derive(Clone, Copy)]
struct Infixes {
    hyphen: Hyphen,
    /// Brackets after a letter or digit, before a letter (`ioctl(int`, not `info(1`).
    bracket: bool,
    /// `+ * ^` between digits.
    times: bool,
    /// A slash between a letter and a digit.
    slash_digit: bool,
    /// An ellipsis (`…`, `..`) between anything.
    ellipsis: bool,
    /// A period between a lowercase letter and a capital (`ab.Cd`).
    period: bool,
}

impl Infixes {
    /// spaCy's English infixes, as this module has always cut them.
    const ENGLISH: Infixes = Infixes {
        hyphen: Hyphen::English,
        bracket: false,
        times: true,
        slash_digit: false,
        ellipsis: false,
        period: false,
    };
}

/// When a hyphen between words is cut off.
#[derive(Clone, Copy)]
enum Hyphen {
    /// After a letter or digit, before a letter (spaCy's English).
    English,
    /// Between letters.
    Letters,
    /// After a letter, before a lowercase letter.
    BeforeLower,
    Never,
}

/// spaCy's final-period rules for most languages: after a lowercase or caseless letter,
/// a closing punctuation mark or quote, a digit (`digit_period`), or two capitals.
fn spacy_period(before: &str, digit_period: bool) -> bool {
    let Some(last) = before.chars().next_back() else {
        return false;
    };
    (last.is_alphabetic() && !last.is_uppercase())
        || (digit_period && last.is_ascii_digit())
        || matches!(
            last,
            '"' | '\'' | '”' | '’' | '«' | '»' | '„' | '“' | ')' | ']' | '}' | '%' | '…'
        )
        || capitals_before(before)
}

/// Whether the two characters before a final period are capital or caseless letters
/// (spaCy's `(?<=[{au}][{au}])\.`, where Arabic letters count as capitals).
fn capitals_before(before: &str) -> bool {
    let upper = |c: char| {
        c.is_uppercase()
            || matches!(c as u32, 0x0620..=0x064A | 0x066E..=0x06D5 | 0x06E5..=0x06FF | 0x0750..=0x077F)
            || (c.is_alphabetic()
                && !c.is_lowercase()
                && !c.is_uppercase()
                && !(0x0600..=0x08FF).contains(&(c as u32)))
    };
    let mut rev = before.chars().rev();
    matches!((rev.next(), rev.next()), (Some(a), Some(b)) if upper(a) && upper(b))
}

/// Where an elided article ends (`l'homme` → 3): a letter, then an apostrophe, then a
/// letter (spaCy's elision infix for French, Italian, Catalan).
fn elided(s: &str) -> Option<usize> {
    let mut prev: Option<char> = None;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '\'' | '’')
            && prev.is_some_and(char::is_alphabetic)
            && chars.peek().is_some_and(|&(_, n)| n.is_alphabetic())
        {
            return Some(i + c.len_utf8());
        }
        prev = Some(c);
    }
    None
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
fn split_infixes<'a>(s: &'a str, x: Infixes, out: &mut Vec<&'a str>) {
    // Most words hold no separator at all.
    if !s.contains([
        '-', '–', '—', '~', '/', ':', '<', '>', '=', ',', '+', '*', '^', '(', ')', '[', ']', '{',
        '}', '…', '.',
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
                (match x.hyphen {
                    Hyphen::English => prev.is_alphanumeric() && next.is_alphabetic(),
                    Hyphen::Letters => prev.is_alphabetic() && next.is_alphabetic(),
                    Hyphen::BeforeLower => prev.is_alphabetic() && next.is_lowercase(),
                    Hyphen::Never => false,
                }) || (prev.is_ascii_digit() && (next.is_ascii_digit() || next == '-'))
            }
            '/' => {
                (prev.is_alphanumeric() && next.is_alphabetic())
                    || (x.slash_digit && prev.is_alphabetic() && next.is_ascii_digit())
            }
            ':' | '<' | '>' | '=' => (prev.is_alphanumeric()) && next.is_alphabetic(),
            ',' => between_letters,
            '+' | '*' | '^' => {
                x.times && prev.is_ascii_digit() && (next.is_ascii_digit() || next == '-')
            }
            '(' | ')' | '[' | ']' | '{' | '}' => {
                x.bracket && prev.is_alphanumeric() && next.is_alphabetic()
            }
            '…' => x.ellipsis,
            '.' => x.period && prev.is_lowercase() && next.is_uppercase(),
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

#[cfg(test)]
mod profile_tests {
    use super::*;

    fn words(code: &str, text: &str) -> Vec<String> {
        let p = Profile::of(code).expect("profile");
        split_words_in(text, p)
            .into_iter()
            .map(String::from)
            .collect()
    }

    /// spaCy 3.8.18's `blank(code)` tokens for each text.
    #[test]
    fn languages_split_as_spacy_does() {
        assert_eq!(
            words("de", "E-Mail z. B. GPLv3+ (foo):"),
            ["E-Mail", "z.", "B.", "GPLv3", "+", "(", "foo", "):"]
        );
        assert_eq!(
            words("fr", "l'homme qu'il wxq-zvk"),
            ["l'", "homme", "qu'", "il", "wxq", "-", "zvk"]
        );
        assert_eq!(
            words("ar", "الموقع. الوِب. Firefox، x؟"),
            ["الموقع", ".", "الوِب.", "Firefox", "،", "x", "؟"]
        );
        assert_eq!(
            words("ru", "см. ip6-dotint бело-красный"),
            ["см.", "ip6-dotint", "бело", "-", "красный"]
        );
        assert_eq!(
            words("de", "ioctl(int info(1) OS/2 ~/.ssh lib/ 1. Tib's"),
            [
                "ioctl", "(", "int", "info(1", ")", "OS", "/", "2", "~/.ssh", "lib", "/", "1.",
                "Tib's"
            ]
        );
        assert_eq!(
            words("ru", "2.2. i.e. 90° Script-Fu 10*1024 ab…cd"),
            [
                "2.2", ".", "i.e", ".", "90", "°", "Script", "-", "Fu", "10", "*", "1024", "ab",
                "…", "cd"
            ]
        );
    }
}
