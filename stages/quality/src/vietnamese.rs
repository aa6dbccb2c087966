//! Vietnamese words as datatrove counts them: spaCy's Vietnamese tokenizer with pyvi
//! 0.1.1. Syllables are found by pyvi's patterns (whitespace kept), pyvi's CRF labels
//! each one as beginning or continuing a word (its features: the syllable and its
//! neighbours lowercased, their case, and whether the neighbouring pairs and triples
//! are in its word list), and syllables labelled as continuing join the word before
//! with the whitespace between them, unless punctuation, a digit or a capital after a
//! lowercase syllable stops it, as spaCy's `pyvi_tokenize` does.
//!
//! The model is pyvi's, read from a text dump of its CRF weights (`pyvi-crf.txt`) and
//! its word list (`pyvi-words.txt`), which `scripts/fetch-models.sh` writes into the
//! models folder from the pyvi wheel.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use regex::Regex;

/// ASCII punctuation, as Python's `string.punctuation`.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

pub struct Vietnamese {
    /// Each attribute's weights for the labels (B_W, I_W).
    weights: HashMap<String, [f64; 2]>,
    /// Transition weights, `[from][to]`.
    transitions: [[f64; 2]; 2],
    bigrams: HashSet<String>,
    trigrams: HashSet<String>,
    syllables: Regex,
}

/// Python's `str.isupper()`: a cased character, and no lowercase one.
fn is_upper(s: &str) -> bool {
    s.chars().any(|c| c.is_uppercase() || c.is_lowercase()) && !s.chars().any(char::is_lowercase)
}

/// Python's `str.istitle()`: cased runs start with a capital, the rest lowercase.
fn is_title(s: &str) -> bool {
    let mut cased = false;
    let mut prev_cased = false;
    for c in s.chars() {
        if c.is_uppercase() {
            if prev_cased {
                return false;
            }
            prev_cased = true;
            cased = true;
        } else if c.is_lowercase() {
            if !prev_cased {
                return false;
            }
            prev_cased = true;
            cased = true;
        } else {
            prev_cased = false;
        }
    }
    cased
}

/// Python's `str.isdigit()`, near enough: every character numeric.
fn is_digit(s: &str) -> bool {
    !s.is_empty() && s.chars().all(char::is_numeric)
}

impl Vietnamese {
    /// Reads the CRF dump at `crf` and the word list at `words`.
    pub fn open(crf: &Path, words: &Path) -> Result<Vietnamese, String> {
        let dump = std::fs::read_to_string(crf).map_err(|e| format!("{}: {e}", crf.display()))?;
        let label = |l: &str| match l {
            "B_W" => Some(0),
            "I_W" => Some(1),
            _ => None,
        };
        let mut weights: HashMap<String, [f64; 2]> = HashMap::new();
        let mut transitions = [[0.0; 2]; 2];
        let mut section = "";
        for line in dump.lines() {
            if let Some(name) = line.strip_suffix(" = {") {
                section = name;
                continue;
            }
            // `  (0) attribute --> LABEL: weight` / `  (1) FROM --> TO: weight`
            let Some((head, weight)) = line.rsplit_once(": ") else {
                continue;
            };
            let Some((left, to)) = head.rsplit_once(" --> ") else {
                continue;
            };
            let (Ok(weight), Some(to)) = (weight.trim().parse::<f64>(), label(to.trim())) else {
                continue;
            };
            let Some((_, attribute)) = left.trim_start().split_once(") ") else {
                continue;
            };
            match section {
                "STATE_FEATURES" => weights.entry(attribute.to_string()).or_default()[to] = weight,
                "TRANSITIONS" => {
                    if let Some(from) = label(attribute) {
                        transitions[from][to] = weight;
                    }
                }
                _ => {}
            }
        }
        if weights.len() < 1000 {
            return Err(format!("{}: not a dump of pyvi's CRF", crf.display()));
        }
        let list =
            std::fs::read_to_string(words).map_err(|e| format!("{}: {e}", words.display()))?;
        let (mut bigrams, mut trigrams) = (HashSet::new(), HashSet::new());
        for token in list.split('\n') {
            match token.split(' ').count() {
                2 => {
                    bigrams.insert(token.to_string());
                }
                3 => {
                    trigrams.insert(token.to_string());
                }
                _ => {}
            }
        }
        let syllables = Regex::new(
            r"\s+|[A-ZĐ]+\.|Tp\.|Mr\.|Mrs\.|Ms\.|Dr\.|ThS\.|==>|->|\.\.\.|>>|\w+://[^\s]+|[a-zA-Z0-9_.+-]+@(?:[a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+|\d+(?:[\.,_]\d+)+|[^\w\s]|\w+",
        )
        .map_err(|e| e.to_string())?;
        Ok(Vietnamese {
            weights,
            transitions,
            bigrams,
            trigrams,
            syllables,
        })
    }

    fn add(&self, scores: &mut [f64; 2], attribute: &str, value: f64) {
        if value != 0.0
            && let Some(w) = self.weights.get(attribute)
        {
            scores[0] += value * w[0];
            scores[1] += value * w[1];
        }
    }

    /// The state scores of syllable `i` (pyvi's `word2features`).
    fn scores(&self, words: &[&str], lower: &[String], i: usize) -> [f64; 2] {
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        let mut s = [0.0; 2];
        let w = words[i];
        self.add(&mut s, "bias", 1.0);
        self.add(&mut s, &format!("word.lower():{}", lower[i]), 1.0);
        self.add(&mut s, "word.isupper()", b(is_upper(w)));
        self.add(&mut s, "word.istitle()", b(is_title(w)));
        self.add(&mut s, "word.isdigit()", b(is_digit(w)));
        if i > 0 {
            let w1 = words[i - 1];
            self.add(&mut s, &format!("-1:word.lower():{}", lower[i - 1]), 1.0);
            self.add(&mut s, "-1:word.istitle()", b(is_title(w1)));
            self.add(&mut s, "-1:word.isupper()", b(is_upper(w1)));
            let pair = format!("{} {}", lower[i - 1], lower[i]);
            self.add(&mut s, "-1:word.bi_gram()", b(self.bigrams.contains(&pair)));
            if i > 1 {
                let triple = format!("{} {} {}", lower[i - 2], lower[i - 1], lower[i]);
                self.add(
                    &mut s,
                    "-2:word.tri_gram()",
                    b(self.trigrams.contains(&triple)),
                );
            }
        }
        if i + 1 < words.len() {
            let w1 = words[i + 1];
            self.add(&mut s, &format!("+1:word.lower():{}", lower[i + 1]), 1.0);
            self.add(&mut s, "+1:word.istitle()", b(is_title(w1)));
            self.add(&mut s, "+1:word.isupper()", b(is_upper(w1)));
            let pair = format!("{} {}", lower[i], lower[i + 1]);
            self.add(&mut s, "+1:word.bi_gram()", b(self.bigrams.contains(&pair)));
            if i + 2 < words.len() {
                let triple = format!("{} {} {}", lower[i], lower[i + 1], lower[i + 2]);
                self.add(
                    &mut s,
                    "+2:word.tri_gram()",
                    b(self.trigrams.contains(&triple)),
                );
            }
        }
        s
    }

    /// The CRF's labels (true: continues a word), by Viterbi.
    fn labels(&self, words: &[&str]) -> Vec<bool> {
        let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let n = words.len();
        let mut best = vec![[0.0f64; 2]; n];
        let mut back = vec![[0usize; 2]; n];
        for i in 0..n {
            let s = self.scores(words, &lower, i);
            for to in 0..2 {
                if i == 0 {
                    best[i][to] = s[to];
                    continue;
                }
                let (from, score) = (0..2)
                    .map(|from| (from, best[i - 1][from] + self.transitions[from][to]))
                    .fold((0, f64::NEG_INFINITY), |a, b| if b.1 > a.1 { b } else { a });
                best[i][to] = score + s[to];
                back[i][to] = from;
            }
        }
        let mut out = vec![false; n];
        let mut label = if best[n - 1][1] > best[n - 1][0] {
            1
        } else {
            0
        };
        for i in (0..n).rev() {
            out[i] = label == 1;
            label = back[i][label];
        }
        out
    }

    /// The words of `text` (owned: a word joins its syllables with the whitespace
    /// between them).
    pub fn words(&self, text: &str) -> Vec<String> {
        // Syllables, each with the whitespace before it.
        let mut syllables: Vec<&str> = Vec::new();
        let mut before: Vec<&str> = Vec::new();
        let mut space = "";
        for m in self.syllables.find_iter(text) {
            let s = m.as_str();
            if s.chars().all(char::is_whitespace) {
                space = s;
            } else {
                syllables.push(s);
                before.push(space);
                space = "";
            }
        }
        if syllables.is_empty() {
            return Vec::new();
        }
        let labels = self.labels(&syllables);
        let first_title = |s: &str| s.chars().next().is_some_and(|c| c.is_uppercase());
        let first_digit = |s: &str| s.chars().next().is_some_and(|c| is_digit(&c.to_string()));
        let mut out = Vec::new();
        let mut word = syllables[0].to_string();
        for i in 1..syllables.len() {
            let (w, w1) = (syllables[i], syllables[i - 1]);
            if labels[i]
                && !PUNCTUATION.contains(w)
                && !PUNCTUATION.contains(w1)
                && !first_digit(w)
                && !first_digit(w1)
                && (!first_title(w) || first_title(w1))
            {
                word.push_str(before[i]);
                word.push_str(w);
            } else {
                out.push(std::mem::replace(&mut word, w.to_string()));
            }
        }
        out.push(word);
        out
    }
}
