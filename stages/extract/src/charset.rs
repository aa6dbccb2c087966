//! Bytes → text: the charset from the HTTP header, then the HTML `<meta>` prescan, then
//! detection (chardetng); decoded with encoding_rs, undecodable bytes replaced.
//!
//! Labels lie often enough on the web to be checked: a page labelled UTF-8 that is not
//! valid UTF-8, or labelled with a legacy single-byte charset while being valid
//! multi-byte UTF-8, is decoded with the detected encoding instead.

use encoding_rs::{Encoding, UTF_8};

/// How a page was decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub text: String,
    /// The encoding used.
    pub encoding: &'static Encoding,
    /// Where the choice came from: `bom`, `http`, `meta`, `detected`.
    pub source: &'static str,
    /// U+FFFD characters the decoding produced (bytes that were not text).
    pub replaced: usize,
}

/// Decodes `bytes`, with the charset the HTTP header declared (if any) and the page's
/// host name as a hint for detection.
pub fn decode(bytes: &[u8], http_charset: Option<&str>, host: &str) -> Decoded {
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        return run(enc, &bytes[bom_len..], "bom");
    }
    let declared = http_charset
        .and_then(|l| Encoding::for_label(l.as_bytes()))
        .map(|e| (e, "http"))
        .or_else(|| meta_charset(bytes).map(|e| (e, "meta")));
    if let Some((enc, source)) = declared {
        let enc = enc.output_encoding();
        if enc == UTF_8 {
            match std::str::from_utf8(bytes) {
                Ok(s) => return plain(s, source),
                Err(_) => {
                    let d = run(UTF_8, bytes, source);
                    // A few bad bytes in a UTF-8 page are damage; many mean a mislabel.
                    if d.replaced <= 2 || d.replaced * 100 <= d.text.chars().count() {
                        return d;
                    }
                }
            }
        } else {
            // Valid multi-byte UTF-8 labelled as a legacy charset: the label is wrong.
            if enc.is_single_byte()
                && !bytes.is_ascii()
                && let Ok(s) = std::str::from_utf8(bytes)
            {
                return plain(s, "detected");
            }
            return run(enc, bytes, source);
        }
    }
    if let Ok(s) = std::str::from_utf8(bytes) {
        return plain(s, "detected");
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    let tld = host.rsplit('.').next().map(str::as_bytes);
    let enc = detector.guess(
        tld.filter(|t| t.iter().all(u8::is_ascii_alphabetic)),
        chardetng::Utf8Detection::Allow,
    );
    run(enc, bytes, "detected")
}

fn plain(s: &str, source: &'static str) -> Decoded {
    Decoded {
        text: s.to_string(),
        encoding: UTF_8,
        source,
        replaced: 0,
    }
}

fn run(enc: &'static Encoding, bytes: &[u8], source: &'static str) -> Decoded {
    let (text, _) = enc.decode_without_bom_handling(bytes);
    let replaced = if enc == UTF_8 || text.len() != bytes.len() {
        text.chars().filter(|&c| c == '\u{FFFD}').count()
    } else {
        0
    };
    Decoded {
        text: text.into_owned(),
        encoding: enc,
        source,
        replaced,
    }
}

/// The charset a `<meta>` tag declares in the first 1024 bytes (the HTML prescan,
/// simplified): `<meta charset=…>` or `<meta http-equiv=Content-Type content="…;
/// charset=…">`. A declared UTF-16 means UTF-8 here, as the HTML standard says.
pub fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(1024)];
    let lower = head.to_ascii_lowercase();
    let mut at = 0;
    while let Some(i) = memchr::memmem::find(&lower[at..], b"<meta") {
        let tag_start = at + i + 5;
        let tag_end =
            memchr::memchr(b'>', &lower[tag_start..]).map_or(lower.len(), |e| tag_start + e);
        let tag = &lower[tag_start..tag_end];
        if let Some(c) = memchr::memmem::find(tag, b"charset") {
            let rest = &tag[c + 7..];
            let rest = rest.trim_ascii_start();
            if let Some(rest) = rest.strip_prefix(b"=") {
                let rest = rest.trim_ascii_start();
                let rest = rest
                    .strip_prefix(b"\"")
                    .or_else(|| rest.strip_prefix(b"'"))
                    .unwrap_or(rest);
                let label_end = rest
                    .iter()
                    .position(|b| {
                        matches!(b, b'"' | b'\'' | b';' | b' ' | b'/' | b'\t' | b'\n' | b'\r')
                    })
                    .unwrap_or(rest.len());
                if let Some(enc) = Encoding::for_label(&rest[..label_end]) {
                    let enc = if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
                        UTF_8
                    } else {
                        enc
                    };
                    return Some(enc);
                }
            }
        }
        at = tag_end.max(tag_start);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_then_meta_then_detection() {
        let latin = b"<p>Caf\xe9 cr\xe8me br\xfbl\xe9e</p>";
        let d = decode(latin, Some("iso-8859-1"), "example.fr");
        assert_eq!(d.text, "<p>Café crème brûlée</p>");
        assert_eq!(d.source, "http");

        let meta = b"<meta charset=\"windows-1251\"><p>\xcf\xf0\xe8\xe2\xe5\xf2</p>";
        let d = decode(meta, None, "example.ru");
        assert!(d.text.contains("Привет"), "{}", d.text);
        assert_eq!(d.source, "meta");

        let sjis = "<p>日本語のテキストです。これは検出のための文章です。</p>".repeat(4);
        let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(&sjis);
        let d = decode(&bytes, None, "example.jp");
        assert_eq!(d.text, sjis);
        assert_eq!(d.source, "detected");
    }

    #[test]
    fn mislabels_are_caught() {
        // UTF-8 bytes labelled Latin-1.
        let d = decode(
            "<p>Grüße aus Köln</p>".as_bytes(),
            Some("iso-8859-1"),
            "example.de",
        );
        assert_eq!(d.text, "<p>Grüße aus Köln</p>");
        // Windows-1251 bytes labelled UTF-8.
        let (bytes, _, _) =
            encoding_rs::WINDOWS_1251.encode("<p>Привет, как дела? Это русский текст.</p>");
        let d = decode(&bytes, Some("utf-8"), "example.ru");
        assert!(d.text.contains("Привет"), "{}", d.text);
        // A stray bad byte in real UTF-8 stays UTF-8, replaced.
        let mut b = "<p>naïve text that is long enough to be mostly fine</p>"
            .as_bytes()
            .to_vec();
        b.push(0xff);
        let d = decode(&b, Some("utf-8"), "example.com");
        assert_eq!(d.replaced, 1);
        assert_eq!(d.source, "http");
    }
}
