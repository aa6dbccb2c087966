//! The form a text is given to a fastText classifier in: the form its model was
//! trained on.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// How a document's text becomes a fastText input line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextForm {
    /// DCLM's: `" ".join(text.strip().splitlines())`, Python's line boundaries
    /// (`\n`, `\r`, `\v`, `\f`, `\x1c`–`\x1e`, U+0085, U+2028, U+2029) turned to spaces
    /// and the whitespace at both ends (Python's `str.isspace`) cut.
    #[default]
    Lines,
    /// datatrove's and FineWeb's: newlines turned to spaces, nothing else
    /// (`text.replace("\n", " ")`).
    Newlines,
}

/// Python's `str.isspace`: Unicode whitespace plus the separators `\x1c`–`\x1f`.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A line boundary of Python's `str.splitlines` that fastText does not already read as
/// whitespace (it splits words at ` `, `\n`, `\r`, `\t`, `\v`, `\f` and NUL).
fn extra_boundary(c: char) -> bool {
    matches!(
        c,
        '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

impl TextForm {
    /// The text to give [`pipeline::fasttext_model::Predictor::predict_text`] (which
    /// reads newlines as spaces and ends the line): borrowed when the form changes
    /// nothing fastText would see.
    pub fn apply(self, text: &str) -> Cow<'_, str> {
        match self {
            TextForm::Newlines => Cow::Borrowed(text),
            TextForm::Lines => {
                // Whitespace fastText splits on anyway changes nothing at the ends; the
                // extra boundaries are found by a byte search (each starts with one of
                // these bytes), not a walk over the characters.
                let ends_unchanged = text
                    .chars()
                    .take_while(|&c| python_space(c))
                    .chain(text.chars().rev().take_while(|&c| python_space(c)))
                    .all(|c| matches!(c, ' ' | '\n' | '\r' | '\t' | '\u{b}' | '\u{c}'));
                let bytes = text.as_bytes();
                // U+0085 is C2 85, U+2028 and U+2029 are E2 80 A8 and E2 80 A9: only
                // the lead bytes of other characters (a no-break space, a quote) are
                // common in web text, so each hit's next bytes decide.
                let no_boundary = memchr::memchr3(0x1c, 0x1d, 0x1e, bytes).is_none()
                    && !memchr::memchr2_iter(0xc2, 0xe2, bytes).any(|i| {
                        matches!(
                            (bytes[i], bytes.get(i + 1), bytes.get(i + 2)),
                            (0xc2, Some(0x85), _) | (0xe2, Some(0x80), Some(0xa8 | 0xa9))
                        )
                    });
                if ends_unchanged && no_boundary {
                    return Cow::Borrowed(text);
                }
                let trimmed = text.trim_matches(python_space);
                Cow::Owned(
                    trimmed
                        .chars()
                        .map(|c| if extra_boundary(c) { ' ' } else { c })
                        .collect(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_is_dclms_form() {
        let f = |t: &str| TextForm::Lines.apply(t).into_owned();
        assert_eq!(
            f("a\nb"),
            "a\nb",
            "newlines are fastText's whitespace already"
        );
        assert_eq!(f("\u{a0}a b\u{3000}"), "a b");
        assert_eq!(f("a\u{2028}b\u{85}c\u{1e}d"), "a b c d");
        assert_eq!(f("  plain  "), "  plain  ");
        assert!(matches!(TextForm::Lines.apply("x y"), Cow::Borrowed(_)));
        // Other characters with the boundaries' lead bytes change nothing.
        assert!(matches!(
            TextForm::Lines.apply("it\u{2019}s a\u{a0}b \u{2030}"),
            Cow::Borrowed(_)
        ));
        assert_eq!(f("a\u{2029}b\u{85}"), "a b");
        assert_eq!(TextForm::Newlines.apply("\u{a0}a"), "\u{a0}a");
    }
}
