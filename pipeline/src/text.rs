//! Facts about text that several stages share.

/// Whether `c` belongs to a script written without spaces between words, where a
/// word boundary needs a dictionary: the stages treat each such character as a word
/// of its own (quality's word counts) or match lists inside runs of them (toxicity).
pub fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0E7F        // Thai
        | 0x0E80..=0x0EFF      // Lao
        | 0x1000..=0x109F      // Myanmar
        | 0x1780..=0x17FF      // Khmer
        | 0x2E80..=0x2FDF      // CJK radicals, Kangxi radicals
        | 0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3100..=0x312F      // Bopomofo
        | 0x31A0..=0x31FF      // Bopomofo extended, Katakana phonetic extensions
        | 0x3400..=0x4DBF      // Han extension A
        | 0x4E00..=0x9FFF      // Han
        | 0xF900..=0xFAFF      // Han compatibility
        | 0x20000..=0x3134F) // Han extensions B-G, compatibility supplement
}

#[cfg(test)]
mod tests {
    use super::unspaced;

    #[test]
    fn scripts_without_spaces() {
        for c in [
            '图', '東', 'の', 'カ', 'ㄅ', 'ต', 'ລ', 'က', 'ក', '⺀', '𠀀', '𰀀',
        ] {
            assert!(unspaced(c), "{c:?}");
        }
        for c in ['a', 'é', 'ж', 'ا', 'א', '한', ' ', '1', '。'] {
            assert!(!unspaced(c), "{c:?}");
        }
    }
}
