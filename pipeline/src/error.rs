//! The one error type of the `pipeline` crate.

use std::io;

/// What went wrong, with the address it went wrong at.
///
/// Bad documents are never errors: they are counted drops. An `Error` means the
/// infrastructure failed (storage, configuration) and the task should stop; a retry of
/// the task is then safe.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address that is neither a local path, `file://…` nor `s3://bucket/key`.
    #[error("invalid address {url:?}: {reason}")]
    BadAddress { url: String, reason: String },
    /// A local file system operation failed.
    #[error("{op} {url}: {source}")]
    Io {
        op: &'static str,
        url: String,
        #[source]
        source: io::Error,
    },
    /// An S3 request failed for good (not transient, or out of retries).
    #[error("{op} {url}: {message}")]
    S3 {
        op: &'static str,
        url: String,
        message: String,
    },
    /// The object does not exist.
    #[error("{url}: no such object")]
    NotFound { url: String },
    /// Reading an input failed for a reason outside the data (storage).
    #[error("reading {url}: {message}")]
    Input { url: String, message: String },
    /// A Parquet file could not be written or its schema is unusable.
    #[error("parquet {url}: {message}")]
    Parquet { url: String, message: String },
    /// A configuration file is missing, unreadable or invalid.
    #[error("config {url}: {message}")]
    Config { url: String, message: String },
    /// Flags or environment that do not make sense together.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub(crate) fn io(op: &'static str, url: impl ToString, source: io::Error) -> Self {
        Error::Io {
            op,
            url: url.to_string(),
            source,
        }
    }

    /// Turns this error into an `io::Error` that [`Error::from_io`] recognises again, so
    /// storage failures crossing a `Read`/`Write` boundary stay infrastructure errors and
    /// are not mistaken for corrupt data.
    pub fn into_io(self) -> io::Error {
        io::Error::other(self)
    }

    /// Converts an I/O error met while doing `op` on `url`: a storage error wrapped by
    /// [`Error::into_io`] comes back as itself, anything else becomes [`Error::Io`].
    pub fn from_io_error(op: &'static str, url: impl ToString, e: io::Error) -> Self {
        if Error::from_io(&e).is_none() {
            return Error::io(op, url, e);
        }
        match e.into_inner().map(|inner| inner.downcast::<Error>()) {
            Some(Ok(err)) => *err,
            Some(Err(other)) => Error::Usage(format!("{op} {}: {other}", url.to_string())),
            None => Error::Usage(format!("{op} {}: unknown error", url.to_string())),
        }
    }

    /// Recovers a storage error wrapped by [`Error::into_io`]; `None` means the I/O error
    /// came from the data itself (a decoder, a parser).
    pub fn from_io(err: &io::Error) -> Option<&Error> {
        err.get_ref().and_then(|e| e.downcast_ref::<Error>())
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Environment variables whose values are secrets: never written to a log, an error,
/// a marker or a report.
const SECRET_VARIABLES: [&str; 3] = [
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCESS_KEY_ID",
];

/// Query parameters and header fields that carry a signature, a credential or a
/// token (presigned URLs, SigV2 and SigV4 `Authorization`).
const SECRET_FIELDS: [&str; 7] = [
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "signature",
    "awsaccesskeyid",
    "credential",
    "authorization",
];

/// `text` with every secret in it replaced by `[redacted]`: the values of the AWS
/// credential variables of this process, and the values of signature, credential and
/// token fields (`X-Amz-Signature=…` in a presigned URL, `Credential=…` in an
/// `Authorization` header, an `X-Amz-Security-Token: …` echoed by a server). Messages
/// that come from outside (an S3 server's error, an SDK's description of a request)
/// pass through it before they reach a log or an error.
pub fn redact_secrets(text: &str) -> String {
    let mut out = text.to_string();
    for var in SECRET_VARIABLES {
        if let Ok(value) = std::env::var(var)
            && value.len() >= 8
        {
            out = out.replace(&value, "[redacted]");
        }
    }
    let lower = out.to_ascii_lowercase();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for field in SECRET_FIELDS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(field) {
            let start = from + i;
            from = start + field.len();
            // A whole field name: not the tail of a longer word.
            if start > 0 && lower.as_bytes()[start - 1].is_ascii_alphanumeric() {
                continue;
            }
            let rest = &lower.as_bytes()[from..];
            let sep = rest
                .iter()
                .take_while(|b| matches!(b, b' ' | b'"' | b'\''))
                .count();
            if !matches!(rest.get(sep), Some(b'=' | b':')) {
                continue;
            }
            let value_start = from + sep + 1;
            let value_start = value_start
                + lower.as_bytes()[value_start..]
                    .iter()
                    .take_while(|b| matches!(b, b' ' | b'"' | b'\''))
                    .count();
            // An Authorization value is its scheme and everything after it on the line.
            let stop: &[u8] = if field == "authorization" {
                b"\r\n\"'<"
            } else {
                b"&,; \r\n\"'<"
            };
            let len = lower.as_bytes()[value_start..]
                .iter()
                .take_while(|b| !stop.contains(b))
                .count();
            if len > 0 {
                spans.push((value_start, value_start + len));
            }
        }
    }
    spans.sort_unstable();
    let mut redacted = String::with_capacity(out.len());
    let mut at = 0;
    for (start, end) in spans {
        if end <= at {
            continue;
        }
        redacted.push_str(&out[at..start.max(at)]);
        redacted.push_str("[redacted]");
        at = end;
    }
    redacted.push_str(&out[at..]);
    redacted
}

#[cfg(test)]
mod redact_tests {
    use super::redact_secrets;

    #[test]
    fn signatures_credentials_and_tokens_are_redacted() {
        let cases = [
            (
                "GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20240101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=abcdef0123&x-id=GetObject failed",
                "GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&x-id=GetObject failed",
            ),
            (
                "<Message>denied: Authorization: AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/x, Signature=ff</Message>",
                "<Message>denied: Authorization: [redacted]</Message>",
            ),
            (
                "header x-amz-security-token: IQoJb3JpZ2luX2Vj and more",
                "header x-amz-security-token: [redacted] and more",
            ),
            (
                "https://h/o?AWSAccessKeyId=AKIA1&Signature=x%2By&Expires=1",
                "https://h/o?AWSAccessKeyId=[redacted]&Signature=[redacted]&Expires=1",
            ),
            (
                "no secret: signatures are checked",
                "no secret: signatures are checked",
            ),
            ("mysignature=keep", "mysignature=keep"),
        ];
        for (text, want) in cases {
            assert_eq!(redact_secrets(text), want, "{text}");
        }
    }
}
