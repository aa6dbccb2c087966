//! The HTTP response inside a WARC response record: status, content type, charset and
//! the payload (de-chunked and un-gzipped when the headers say so).

use std::borrow::Cow;
use std::io::Read;

/// A parsed HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<'a> {
    pub status: u16,
    /// Media type, lowercased, without parameters (empty when absent).
    pub media_type: String,
    /// The `charset` parameter of Content-Type, if any.
    pub charset: Option<String>,
    pub payload: Cow<'a, [u8]>,
}

/// Why a block is not a usable HTTP response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// The block does not start with an HTTP status line and headers.
    NoHeaders,
}

/// Parses an HTTP response block.
pub fn parse(block: &[u8], max_payload: usize) -> Result<Response<'_>, HttpError> {
    if !block.starts_with(b"HTTP/") {
        return Err(HttpError::NoHeaders);
    }
    let (head_len, body) = match memchr::memmem::find(block, b"\r\n\r\n") {
        Some(i) => (i, i + 4),
        None => match memchr::memmem::find(block, b"\n\n") {
            Some(i) => (i, i + 2),
            None => (block.len(), block.len()),
        },
    };
    let head = String::from_utf8_lossy(&block[..head_len]);
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or(HttpError::NoHeaders)?;
    let mut content_type = "";
    let mut chunked = false;
    let mut gzip = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let name = name.trim();
        if name.eq_ignore_ascii_case("content-type") {
            content_type = value;
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        } else if name.eq_ignore_ascii_case("content-encoding") {
            let v = value.to_ascii_lowercase();
            gzip = v.contains("gzip") || v.contains("deflate");
        }
    }
    let (media_type, charset) = split_content_type(content_type);
    let mut payload = Cow::Borrowed(&block[body..]);
    if chunked && let Some(joined) = dechunk(&payload) {
        payload = Cow::Owned(joined);
    }
    if gzip && payload.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        let mut dec = flate2::read::MultiGzDecoder::new(&payload[..]).take(max_payload as u64 + 1);
        if dec.read_to_end(&mut out).is_ok() {
            payload = Cow::Owned(out);
        }
    }
    Ok(Response {
        status,
        media_type,
        charset,
        payload,
    })
}

/// `text/html; charset=UTF-8` → (`text/html`, `Some("UTF-8")`).
pub fn split_content_type(value: &str) -> (String, Option<String>) {
    let mut parts = value.split(';');
    let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(['"', '\'']).to_string())
            .filter(|c| !c.is_empty())
    });
    (media, charset)
}

/// Joins a chunked body; `None` when it is not well-formed chunking (CC stores most
/// payloads de-chunked while keeping the header).
fn dechunk(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    loop {
        let nl = memchr::memchr(b'\n', &body[at..])? + at;
        let line = std::str::from_utf8(&body[at..nl]).ok()?.trim();
        let size_hex = line.split(';').next()?.trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        at = nl + 1;
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(at..at.checked_add(size)?)?);
        at += size;
        while at < body.len() && matches!(body[at], b'\r' | b'\n') {
            at += 1;
        }
        if at >= body.len() {
            return Some(out);
        }
    }
}

/// Whether a response is HTML: by media type, or by sniffing when none is given.
pub fn is_html(media_type: &str, payload: &[u8]) -> bool {
    match media_type {
        "text/html" | "application/xhtml+xml" | "application/xhtml" => true,
        "" | "text/plain" | "application/octet-stream" | "unknown/unknown" => sniff_html(payload),
        _ => false,
    }
}

fn sniff_html(payload: &[u8]) -> bool {
    let head = &payload[..payload.len().min(1024)];
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let start = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(head.len());
    let head = head[start..].to_ascii_lowercase();
    [
        "<!doctype html",
        "<html",
        "<head",
        "<body",
        "<!--",
        "<title",
        "<p",
        "<div",
    ]
    .iter()
    .any(|p| head.starts_with(p.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_type_and_charset() {
        let r = parse(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=\"ISO-8859-1\"\r\n\r\n<p>x",
            1 << 20,
        )
        .expect("response");
        assert_eq!(r.status, 200);
        assert_eq!(r.media_type, "text/html");
        assert_eq!(r.charset.as_deref(), Some("ISO-8859-1"));
        assert_eq!(&r.payload[..], b"<p>x");
    }

    #[test]
    fn no_headers() {
        assert_eq!(parse(b"<html>", 10), Err(HttpError::NoHeaders));
        assert_eq!(
            parse(b"HTTP/1.1 abc\r\n\r\n", 10),
            Err(HttpError::NoHeaders)
        );
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let r = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n",
            100,
        )
        .expect("response");
        assert_eq!(&r.payload[..], b"Wikipedia");
        let plain = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n<html>not chunked",
            100,
        )
        .expect("response");
        assert_eq!(&plain.payload[..], b"<html>not chunked");
    }

    #[test]
    fn sniffing() {
        assert!(is_html("", b"  <!DOCTYPE html><p>"));
        assert!(!is_html("", b"%PDF-1.4"));
        assert!(!is_html("image/png", b"<html>"));
    }
}
