//! Bad-word lists (the LDNOOBW layout: one file per language, one word or phrase per
//! line), matched on word boundaries after Unicode normalisation.
//!
//! Normalisation, of the lists and of the text alike: NFKC (full-width letters, ligatures
//! and compatibility forms fold to their plain letters), then Unicode lowercase. Words
//! are the runs of letters, digits and combining marks; a phrase matches as consecutive
//! words. An entry written in a script without spaces between words (Han, Hiragana,
//! Katakana, Thai, …) cannot rely on word boundaries and matches as a substring.

use std::collections::{BTreeMap, HashMap, HashSet};

use pipeline::Storage;
use pipeline::lists::read_lines;
use pipeline::text::unspaced;
use serde::{Deserialize, Serialize};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::{IsNormalized, UnicodeNormalization};

/// Maps of the lists' words, looked up once per word of every document: foldhash with
/// fixed seeds rather than SipHash (SipHash was most of the matcher's time outside
/// normalisation).
type FastSet<T> = HashSet<T, foldhash::fast::FixedState>;
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// How a document is judged by its matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WordRule {
    /// Any match drops the document (C4's rule with the LDNOOBW list).
    #[default]
    Any,
    /// Drops when matched words / all words exceeds `max_ratio`.
    Ratio,
}

/// Word-list settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WordsConfig {
    /// List per language code (the document's `language`, from langid); the key
    /// `default` applies to documents without a language or without a list of their own.
    pub lists: BTreeMap<String, String>,
    #[serde(default)]
    pub rule: WordRule,
    /// For `rule = "ratio"`: the largest share of matched words kept.
    #[serde(default = "default_max_ratio")]
    pub max_ratio: f64,
}

fn default_max_ratio() -> f64 {
    0.01
}

/// The key of the list for documents without one of their own.
pub const DEFAULT_LIST: &str = "default";

/// Lowercased NFKC text, each character lowercased on its own (`char::to_lowercase`).
/// Text that is NFKC already (all ASCII text, and most of the web's) skips the
/// normalisation, which was most of the word filter's time.
pub fn normalise(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    if unicode_normalization::is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        return text.chars().flat_map(char::to_lowercase).collect();
    }
    text.nfkc().flat_map(char::to_lowercase).collect()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_combining_mark(c)
}

/// The words of normalised text.
fn words(normalised: &str) -> Vec<&str> {
    normalised
        .split(|c: char| !is_word_char(c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// One language's list, ready to match.
#[derive(Debug, Default)]
pub struct WordList {
    /// Single words.
    single: FastSet<String>,
    /// Phrases by their first word.
    phrases: FastMap<String, Vec<Vec<String>>>,
    /// Entries matched as substrings.
    substrings: Vec<String>,
}

impl WordList {
    /// Builds a list from its entries.
    pub fn new(entries: &[String]) -> WordList {
        let mut list = WordList::default();
        for e in entries {
            let n = normalise(e);
            if n.chars().any(unspaced) {
                list.substrings.push(n.trim().to_string());
                continue;
            }
            let ws: Vec<String> = words(&n).into_iter().map(str::to_string).collect();
            match ws.len() {
                0 => {}
                1 => {
                    list.single.insert(ws[0].clone());
                }
                _ => list.phrases.entry(ws[0].clone()).or_default().push(ws),
            }
        }
        list.substrings.retain(|s| !s.is_empty());
        list
    }

    /// (matched words, all words) of a text.
    pub fn count(&self, text: &str) -> (usize, usize) {
        let n = normalise(text);
        let ws = words(&n);
        let mut matched = 0;
        let mut i = 0;
        while i < ws.len() {
            if let Some(phrases) = self.phrases.get(ws[i])
                && let Some(len) = phrases
                    .iter()
                    .filter(|p| {
                        ws.len() - i >= p.len() && p.iter().zip(&ws[i..]).all(|(a, b)| a == b)
                    })
                    .map(Vec::len)
                    .max()
            {
                matched += len;
                i += len;
                continue;
            }
            if self.single.contains(ws[i]) {
                matched += 1;
            }
            i += 1;
        }
        for s in &self.substrings {
            matched += n.matches(s.as_str()).count();
        }
        (matched, ws.len())
    }

    /// Entries, for the config hash.
    pub fn fingerprint(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .single
            .iter()
            .cloned()
            .chain(self.phrases.values().flatten().map(|p| p.join(" ")))
            .chain(self.substrings.iter().map(|s| format!("~{s}")))
            .collect();
        all.sort();
        all
    }
}

/// All loaded lists and the rule.
#[derive(Debug)]
pub struct BadWords {
    lists: BTreeMap<String, WordList>,
    rule: WordRule,
    max_ratio: f64,
}

impl BadWords {
    /// Loads every list the config names.
    pub fn load(storage: &Storage, config: &WordsConfig) -> pipeline::Result<BadWords> {
        if !(0.0..=1.0).contains(&config.max_ratio) {
            return Err(pipeline::Error::Usage(format!(
                "[words].max_ratio {} is outside [0, 1]",
                config.max_ratio
            )));
        }
        let mut lists = BTreeMap::new();
        for (lang, url) in &config.lists {
            lists.insert(lang.clone(), WordList::new(&read_lines(storage, url)?));
        }
        Ok(BadWords {
            lists,
            rule: config.rule,
            max_ratio: config.max_ratio,
        })
    }

    /// The drop reason for a document of this language, if any.
    pub fn check(&self, text: &str, language: Option<&str>) -> Option<&'static str> {
        let list = language
            .and_then(|l| self.lists.get(l))
            .or_else(|| self.lists.get(DEFAULT_LIST))?;
        let (matched, total) = list.count(text);
        match self.rule {
            WordRule::Any if matched > 0 => Some("bad_words"),
            WordRule::Ratio if total > 0 && matched as f64 / total as f64 > self.max_ratio => {
                Some("bad_word_ratio")
            }
            _ => None,
        }
    }

    /// Lists and rule, for the config hash.
    pub fn fingerprint(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .lists
            .iter()
            .flat_map(|(lang, l)| {
                l.fingerprint()
                    .into_iter()
                    .map(move |e| format!("{lang}:{e}"))
            })
            .collect();
        out.push(format!("{:?}:{}", self.rule, self.max_ratio));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> WordList {
        WordList::new(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_short_cuts_normalise_as_nfkc_does() {
        let samples = [
            "Plain ASCII, MIXED case 123.",
            "Grüße aus Köln — “quoted” café",
            "ΟΔΟΣ ΣΟΦΙΑΣ",
            "ＤＡＲＮ ﬁne ㎏ ½",
            "e\u{301} versus \u{e9}, Å and A\u{30a}",
            "İstanbul ǅ ﬀ",
            "日本語のテキスト、ｶﾀｶﾅ",
            "",
        ];
        for text in samples {
            let slow: String = text.nfkc().flat_map(char::to_lowercase).collect();
            assert_eq!(normalise(text), slow, "{text:?}");
        }
    }

    #[test]
    fn words_match_on_boundaries_only() {
        let l = list(&["darn", "heck no"]);
        assert_eq!(l.count("Darn it.").0, 1);
        assert_eq!(l.count("darned socks").0, 0, "no match inside a word");
        assert_eq!(l.count("Oh HECK   no!").0, 2, "a phrase over any spacing");
        assert_eq!(l.count("heck yes").0, 0);
    }

    #[test]
    fn normalisation_folds_width_case_and_ligatures() {
        let l = list(&["darn", "straße"]);
        assert_eq!(l.count("ＤＡＲＮ").0, 1, "full-width letters");
        assert_eq!(l.count("STRASSE").0, 0, "no folding beyond lowercase");
        assert_eq!(l.count("Straße").0, 1);
        let e = list(&["cafe\u{301}"]);
        assert_eq!(e.count("CAFÉ au lait").0, 1, "NFKC composes the accent");
    }

    #[test]
    fn unspaced_scripts_match_as_substrings() {
        let l = list(&["坏蛋"]);
        assert_eq!(l.count("你这个坏蛋！").0, 1);
        assert_eq!(l.count("好人").0, 0);
    }
}
