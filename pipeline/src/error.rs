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
