//! Splitting a text into the units the classifier scores in `fraction` and `remove`
//! modes. The spans cover the text end to end (each unit keeps the whitespace after
//! it), so cutting some out and joining the rest loses nothing else.

use crate::Unit;

/// Byte spans of the units of `text`.
pub fn split(text: &str, unit: Unit) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end_here = match unit {
            Unit::Line => c == '\n',
            Unit::Sentence => {
                c == '\n'
                    || (matches!(c, '。' | '！' | '？' | '!' | '?' | '.' | '؟' | '।')
                        && chars.peek().is_none_or(|&(_, n)| {
                            n.is_whitespace() || matches!(c, '。' | '！' | '？' | '।')
                        }))
            }
        };
        if end_here {
            // Take the whitespace that follows into this unit.
            let mut end = i + c.len_utf8();
            while let Some(&(j, n)) = chars.peek() {
                if n.is_whitespace() {
                    end = j + n.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            spans.push((start, end));
            start = end;
        }
    }
    if start < text.len() {
        spans.push((start, text.len()));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str, unit: Unit) -> Vec<&str> {
        split(text, unit)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect()
    }

    #[test]
    fn sentences_keep_their_spacing_and_cover_the_text() {
        let t = "One. Two three!  Four?\nFive 3.14 six";
        let p = pieces(t, Unit::Sentence);
        assert_eq!(p, vec!["One. ", "Two three!  ", "Four?\n", "Five 3.14 six"]);
        assert_eq!(p.concat(), t);
        assert_eq!(
            pieces("你好。再见！", Unit::Sentence),
            vec!["你好。", "再见！"]
        );
    }

    #[test]
    fn lines() {
        assert_eq!(
            pieces("a. b\nc\n\nd", Unit::Line),
            vec!["a. b\n", "c\n\n", "d"]
        );
        assert!(split("", Unit::Line).is_empty());
    }
}
