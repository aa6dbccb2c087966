//! Language labels and FineWeb-2's per-language settings.
//!
//! FineWeb-2 (Penedo et al. 2025) keys its 1,929 per-language configs by GlotLID's
//! labels: an ISO 639-3 code and an ISO 15924 script (`cmn_Hani`, `rus_Cyrl`). A
//! document's label in that form comes from its `language` and `language_script`
//! (as datatrove writes them for a GlotLID-style model: `cmn` and `Hani`), from a
//! `language` that is such a label already, or from a lid.176 code through the
//! documented table `data/lid176-labels.tsv` (`zh` → `cmn_Hani`).
//!
//! The settings ship as `data/fineweb2-languages.tsv`, generated from FineWeb-2's
//! configs by `scripts/fineweb2_tables.py` (the source is named in its first line). A
//! table of the same layout can be given instead ([`Table::parse`]); its errors name
//! the row's label and the column's key.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::{Document, Value};

/// The column a language-ID stage writes a label's script to (FineWeb-2's name), read
/// back into [`Document::annotations`] when an input shard has it.
pub const LANGUAGE_SCRIPT: &str = "language_script";

/// The annotation a reader gives a document whose input row has a script.
pub fn script_annotation(script: &str) -> Vec<(&'static str, Value)> {
    vec![(LANGUAGE_SCRIPT, Value::Str(script.to_string()))]
}

/// The settings table shipped with the project: FineWeb-2's configs.
pub const FINEWEB2_TABLE: &str = include_str!("../data/fineweb2-languages.tsv");

/// lid.176's labels as ISO 639-3 plus script.
const LID176_TABLE: &str = include_str!("../data/lid176-labels.tsv");

/// spaCy's tokenizer special cases and affix behaviour by language code
/// (`scripts/spacy_rules.py`), for the quality stage's word splitting.
pub const SPACY_RULES: &str = include_str!("../data/spacy-rules.tsv");

/// The word tokenizer datatrove assigns to each label.
const WORD_TOKENIZERS: &str = include_str!("../data/word-tokenizers.tsv");

/// The columns of a settings table after the label, in order; stopwords follow.
pub const KEYS: [&str; 16] = [
    "language_score",
    "dup_line_frac",
    "top_2_gram",
    "top_3_gram",
    "top_4_gram",
    "dup_5_gram",
    "dup_6_gram",
    "dup_7_gram",
    "dup_8_gram",
    "dup_9_gram",
    "dup_10_gram",
    "line_punct_thr",
    "new_line_ratio",
    "min_avg_word_length",
    "max_avg_word_length",
    "max_non_alpha_words_ratio",
];

/// One language's settings, as FineWeb-2's pipeline applies them.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `iso639-3_Script`.
    pub label: String,
    /// Minimum language-ID score.
    pub language_score: f64,
    /// Gopher repetition: share of repeated lines.
    pub dup_line_frac: f64,
    /// Gopher repetition: the top n-gram's character share for n = 2, 3, 4.
    pub top_n_grams: [(usize, f64); 3],
    /// Gopher repetition: characters in repeated n-grams for n = 5 to 10.
    pub dup_n_grams: [(usize, f64); 6],
    /// FineWeb: minimum share of lines ending in terminal punctuation (-1: off).
    pub line_punct_thr: f64,
    /// FineWeb: maximum newlines per word.
    pub new_line_ratio: f64,
    /// Gopher quality: mean word length bounds (0: off, as datatrove reads 0).
    pub min_avg_word_length: f64,
    pub max_avg_word_length: f64,
    /// Gopher quality: minimum share of words with a letter (FineWeb-2's key is named
    /// `max_non_alpha_words_ratio`; datatrove uses it as this minimum).
    pub min_alpha_words_ratio: f64,
    /// Gopher quality: the language's stopwords (a document needs 2 of them).
    pub stopwords: Vec<String>,
}

/// A settings table: one [`Settings`] per label.
#[derive(Debug, Clone, Default)]
pub struct Table {
    by_label: HashMap<String, Settings>,
}

impl Table {
    /// Parses a table in the layout of [`FINEWEB2_TABLE`]: `#` lines are comments; each
    /// row is a label, the values of [`KEYS`] and the stopwords, tab-separated. `origin`
    /// names the table in errors.
    pub fn parse(text: &str, origin: &str) -> crate::Result<Table> {
        let err = |message: String| crate::Error::Config {
            url: origin.to_string(),
            message,
        };
        let mut by_label = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let mut cells = line.split('\t');
            let label = cells.next().unwrap_or_default().trim().to_string();
            if !is_label(&label) {
                return Err(err(format!(
                    "line {}: {label:?} is not a language label of the form iso639-3_Script",
                    n + 1
                )));
            }
            let mut values = [0f64; KEYS.len()];
            for (slot, key) in values.iter_mut().zip(KEYS) {
                let cell = cells
                    .next()
                    .ok_or_else(|| err(format!("language {label}: key {key} is missing")))?;
                *slot = cell
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| {
                        err(format!(
                            "language {label}: key {key} is {cell:?}, not a number"
                        ))
                    })?;
            }
            let stopwords: Vec<String> = cells
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if stopwords.is_empty() {
                return Err(err(format!("language {label}: key stopwords is empty")));
            }
            let [
                language_score,
                dup_line_frac,
                t2,
                t3,
                t4,
                d5,
                d6,
                d7,
                d8,
                d9,
                d10,
                line_punct_thr,
                new_line_ratio,
                min_avg_word_length,
                max_avg_word_length,
                min_alpha_words_ratio,
            ] = values;
            if !(0.0..=1.0).contains(&language_score) {
                return Err(err(format!(
                    "language {label}: key language_score is {language_score}, outside [0, 1]"
                )));
            }
            let settings = Settings {
                label: label.clone(),
                language_score,
                dup_line_frac,
                top_n_grams: [(2, t2), (3, t3), (4, t4)],
                dup_n_grams: [(5, d5), (6, d6), (7, d7), (8, d8), (9, d9), (10, d10)],
                line_punct_thr,
                new_line_ratio,
                min_avg_word_length,
                max_avg_word_length,
                min_alpha_words_ratio,
                stopwords,
            };
            if by_label.insert(label.clone(), settings).is_some() {
                return Err(err(format!("language {label}: two rows")));
            }
        }
        Ok(Table { by_label })
    }

    /// FineWeb-2's table, shipped with the project (parsed once; the module's tests
    /// check that it parses).
    pub fn fineweb2() -> crate::Result<Arc<Table>> {
        static SHIPPED: OnceLock<Result<Arc<Table>, String>> = OnceLock::new();
        SHIPPED
            .get_or_init(|| {
                Table::parse(FINEWEB2_TABLE, "fineweb2-languages.tsv")
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|message| crate::Error::Config {
                url: "fineweb2-languages.tsv".into(),
                message,
            })
    }

    /// The table a config names: `fineweb2` (the shipped one), or the address of a table
    /// in the same layout (disk or S3).
    pub fn load(storage: &crate::Storage, spec: &str) -> crate::Result<Arc<Table>> {
        if spec == "fineweb2" {
            return Table::fineweb2();
        }
        let loc = crate::Location::parse(spec)?;
        let bytes = storage.read(&loc)?;
        let text = std::str::from_utf8(&bytes).map_err(|e| crate::Error::Config {
            url: spec.to_string(),
            message: format!("the language table is not UTF-8: {e}"),
        })?;
        Ok(Arc::new(Table::parse(text, spec)?))
    }

    /// The settings of a label (`cmn_Hani`).
    pub fn get(&self, label: &str) -> Option<&Settings> {
        self.by_label.get(label)
    }

    /// Labels held.
    pub fn len(&self) -> usize {
        self.by_label.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_label.is_empty()
    }

    /// Every row, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &Settings> {
        self.by_label.values()
    }
}

/// Whether `s` has the form `abc_Abcd`: three lowercase ASCII letters, `_`, and a
/// capitalised four-letter script code.
pub fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 8
        && b[..3].iter().all(u8::is_ascii_lowercase)
        && b[3] == b'_'
        && b[4].is_ascii_uppercase()
        && b[5..].iter().all(u8::is_ascii_lowercase)
}

fn lid176() -> &'static HashMap<&'static str, &'static str> {
    static MAP: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    MAP.get_or_init(|| {
        LID176_TABLE
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let mut cells = l.split('\t');
                Some((cells.next()?, cells.next()?))
            })
            .collect()
    })
}

/// The word tokenizer datatrove 0.10.1 assigns to `label` (`cmn_Hani`), as its class
/// name and the language code it is built with: (`SpaCyTokenizer`, `zh`),
/// (`ThaiTokenizer`, ``). From `data/word-tokenizers.tsv`, generated from datatrove's
/// `assets/tokenizer_assignment.csv`; `None` for a label it does not list.
pub fn word_tokenizer(label: &str) -> Option<(&'static str, &'static str)> {
    static MAP: OnceLock<HashMap<&'static str, (&'static str, &'static str)>> = OnceLock::new();
    MAP.get_or_init(|| {
        WORD_TOKENIZERS
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let mut cells = l.split('\t');
                Some((cells.next()?, (cells.next()?, cells.next().unwrap_or(""))))
            })
            .collect()
    })
    .get(label)
    .copied()
}

/// lid.176's label `code` (`zh`) as ISO 639-3 plus script (`cmn_Hani`), by the table
/// `data/lid176-labels.tsv`.
pub fn lid176_label(code: &str) -> Option<&'static str> {
    lid176().get(code).copied()
}

/// A model's label split as datatrove splits a GlotLID label: `cmn_Hani` → (`cmn`,
/// `Some("Hani")`); a label without a script (lid.176's `zh`) is mapped through
/// [`lid176_label`] when `map_lid176`, else returned as it is.
pub fn split_label(label: &str, map_lid176: bool) -> (String, Option<String>) {
    let full = if is_label(label) {
        Some(label)
    } else if map_lid176 {
        lid176_label(label)
    } else {
        None
    };
    match full {
        Some(l) => (l[..3].to_string(), Some(l[4..].to_string())),
        None => (label.to_string(), None),
    }
}

/// The document's `language`, joined to its `language_script` annotation where it has
/// one (`cmn` + `Hani` → `cmn_Hani`).
pub fn language_with_script(doc: &Document) -> Option<String> {
    let language = doc.language.as_deref()?;
    Some(match doc.annotation(LANGUAGE_SCRIPT) {
        Some(Value::Str(script)) => format!("{language}_{script}"),
        _ => language.to_string(),
    })
}

/// The document's label in FineWeb-2's form: [`language_with_script`] where that is a
/// full label, else a lid.176 code mapped by [`lid176_label`]. `None` without a language
/// or for a code the table does not know.
pub fn document_label(doc: &Document) -> Option<String> {
    let label = language_with_script(doc)?;
    if is_label(&label) {
        return Some(label);
    }
    lid176_label(&label).map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_holds_every_fineweb2_config() {
        let t = Table::parse(FINEWEB2_TABLE, "shipped").expect("shipped table parses");
        assert_eq!(t.len(), 1929);
        let zh = t.get("cmn_Hani").expect("cmn_Hani");
        assert_eq!(zh.language_score, 0.692);
        assert_eq!(zh.max_avg_word_length, 5.0);
        assert_eq!(zh.top_n_grams[0], (2, 0.256));
        assert_eq!(zh.stopwords.first().map(String::as_str), Some("的"));
        let de = t.get("deu_Latn").expect("deu_Latn");
        assert_eq!(de.dup_n_grams[5], (10, 0.098));
        assert_eq!(&de.stopwords[..3], ["der", "und", "die"]);
        // A stopword may hold a space.
        assert!(
            t.iter()
                .any(|s| s.stopwords.iter().any(|w| w.contains(' ')))
        );
        assert_eq!(Table::fineweb2().expect("shipped").len(), 1929);
    }

    #[test]
    fn every_lid176_label_has_a_config_but_english() {
        let map = lid176();
        assert_eq!(map.len(), 176);
        let table = Table::fineweb2().expect("shipped");
        for (code, label) in map {
            assert!(is_label(label), "{code} -> {label}");
            if *code != "en" {
                assert!(table.get(label).is_some(), "{code} -> {label}");
            }
        }
        assert_eq!(lid176_label("zh"), Some("cmn_Hani"));
        assert_eq!(lid176_label("als"), Some("gsw_Latn"));
        assert_eq!(lid176_label("sq"), Some("als_Latn"));
        assert_eq!(lid176_label("xx"), None);
    }

    #[test]
    fn word_tokenizers_are_datatrove_s() {
        assert_eq!(word_tokenizer("cmn_Hani"), Some(("SpaCyTokenizer", "zh")));
        assert_eq!(word_tokenizer("tha_Thai"), Some(("ThaiTokenizer", "")));
        assert_eq!(
            word_tokenizer("hin_Deva"),
            Some(("IndicNLPTokenizer", "hi"))
        );
        assert_eq!(word_tokenizer("kor_Hang"), Some(("KiwiTokenizer", "")));
        assert_eq!(word_tokenizer("xxx_Latn"), None);
        // Every FineWeb-2 config's label has one.
        let table = Table::fineweb2().expect("shipped");
        for s in table.iter() {
            assert!(word_tokenizer(&s.label).is_some(), "{}", s.label);
        }
    }

    #[test]
    fn labels_split_and_join() {
        assert_eq!(
            split_label("cmn_Hani", false),
            ("cmn".into(), Some("Hani".into()))
        );
        assert_eq!(split_label("zh", false), ("zh".into(), None));
        assert_eq!(split_label("zh", true), ("cmn".into(), Some("Hani".into())));
        assert_eq!(split_label("qqq", true), ("qqq".into(), None));
        let mut d = Document::new("1", "x");
        assert_eq!(document_label(&d), None);
        d.language = Some("ru".into());
        assert_eq!(document_label(&d).as_deref(), Some("rus_Cyrl"));
        d.language = Some("rus".into());
        d.annotate(LANGUAGE_SCRIPT, Value::Str("Latn".into()));
        assert_eq!(document_label(&d).as_deref(), Some("rus_Latn"));
        assert!(!is_label("cmn_HANI") && !is_label("cm_Hani") && is_label("yue_Hani"));
    }

    #[test]
    fn broken_tables_name_the_language_and_the_key() {
        let row = |cells: &[&str]| cells.join("\t");
        let good: Vec<&str> = vec![
            "xyz_Latn", "0.5", "0.3", "0.2", "0.18", "0.16", "0.15", "0.14", "0.13", "0.12",
            "0.11", "0.1", "0.12", "0.3", "3", "10", "0.8", "a", "b",
        ];
        assert!(Table::parse(&row(&good), "t").is_ok());
        let mut bad = good.clone();
        bad[13] = "many";
        let e = Table::parse(&row(&bad), "t")
            .expect_err("not a number")
            .to_string();
        assert!(
            e.contains("xyz_Latn") && e.contains("new_line_ratio"),
            "{e}"
        );
        let e = Table::parse(&row(&good[..10]), "t")
            .expect_err("short")
            .to_string();
        assert!(e.contains("xyz_Latn") && e.contains("dup_9_gram"), "{e}");
        let e = Table::parse(&row(&good[..17]), "t")
            .expect_err("no stopwords")
            .to_string();
        assert!(e.contains("stopwords"), "{e}");
        let mut bad = good.clone();
        bad[1] = "1.5";
        let e = Table::parse(&row(&bad), "t")
            .expect_err("score")
            .to_string();
        assert!(e.contains("language_score"), "{e}");
        let mut bad = good.clone();
        bad[0] = "Chinese";
        let e = Table::parse(&row(&bad), "t")
            .expect_err("label")
            .to_string();
        assert!(e.contains("Chinese"), "{e}");
    }
}
