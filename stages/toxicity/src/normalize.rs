//! How a text becomes a classifier's input line. A model is trained and scored on the
//! same form, so the form is a setting of both `[train]` and `[classifier]`:
//! - `raw`: the text as fastText's own tools take it, newlines as spaces (dolma's and
//!   FineWeb's classifiers).
//! - `words`: lowercase word tokens. Tokens holding `@` (mentions, e-mail addresses) or
//!   a web address (`://`, `www.`) are removed; punctuation, symbols and emoji split
//!   words and are dropped; an apostrophe between two letters stays (`don't`), with the
//!   typographic one (U+2019) written as `'`. Tweets, talk-page comments and web pages
//!   then share one vocabulary: `Idiot!!`, `idiot,` and `IDIOT` are one word.

use pipeline::fasttext_model::prepare;
use serde::{Deserialize, Serialize};

/// The form of a classifier's input (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalize {
    #[default]
    Raw,
    Words,
}

impl Normalize {
    /// fastText's input line for `text`, ending in one newline.
    pub fn line(self, text: &str) -> String {
        match self {
            Normalize::Raw => prepare(text),
            Normalize::Words => words_line(text),
        }
    }
}

fn is_address(token: &str) -> bool {
    token.contains('@')
        || token.contains("://")
        || token
            .get(..4)
            .is_some_and(|p| p.eq_ignore_ascii_case("www."))
}

fn words_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    for token in text.split_whitespace() {
        if is_address(token) {
            continue;
        }
        let mut in_word = false;
        let mut after_letter = false;
        let mut chars = token.chars().peekable();
        while let Some(c) = chars.next() {
            if c.is_alphanumeric() {
                if !in_word && !out.is_empty() {
                    out.push(' ');
                }
                in_word = true;
                after_letter = c.is_alphabetic();
                if c.is_ascii() {
                    // Most of web text: one byte, no case-mapping iterator.
                    out.push(c.to_ascii_lowercase());
                } else {
                    out.extend(c.to_lowercase());
                }
            } else if matches!(c, '\'' | '\u{2019}')
                && after_letter
                && chars.peek().is_some_and(|n| n.is_alphabetic())
            {
                out.push('\'');
                after_letter = false;
            } else {
                in_word = false;
                after_letter = false;
            }
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercase_tokens_without_addresses_or_punctuation() {
        let w = |t: &str| Normalize::Words.line(t);
        assert_eq!(
            w("@USER Go home, you're DRUNK!!! 👊 #MAGA https://t.co/x"),
            "go home you're drunk maga\n"
        );
        assert_eq!(
            w("Don’t\nwrite to me@example.com or www.example.com"),
            "don't write to or\n"
        );
        assert_eq!(w("l'été 2024—ÉTÉ"), "l'été 2024 été\n");
        assert_eq!(w("'quoted' rock'n'roll it''s"), "quoted rock'n'roll it s\n");
        assert_eq!(w(""), "\n");
        assert_eq!(w("!!! ..."), "\n");
    }

    #[test]
    fn raw_is_the_text_on_one_line() {
        assert_eq!(Normalize::Raw.line("A b!\nC"), "A b! C\n");
    }
}
