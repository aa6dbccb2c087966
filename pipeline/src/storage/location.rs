//! Addresses: a local path, `file://…` or `s3://bucket/key`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where an object or a prefix lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// A path on local disk (also what `file://` URLs become).
    Local(PathBuf),
    /// An S3 object or prefix; `key` has no leading slash and may be empty.
    S3 { bucket: String, key: String },
}

impl Location {
    /// Parses a URL or a plain path.
    pub fn parse(url: &str) -> Result<Self> {
        let bad = |reason: &str| Error::BadAddress {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        if url.is_empty() {
            return Err(bad("empty address"));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket after s3://"));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_string(),
                key: key.to_string(),
            });
        }
        if let Some(rest) = url.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(bad("file:// URLs need an absolute path"));
            }
            return Ok(Location::Local(PathBuf::from(rest)));
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(bad(&format!(
                "unsupported scheme {scheme:?} (use a path, file:// or s3://)"
            )));
        }
        Ok(Location::Local(PathBuf::from(url)))
    }

    /// The address of `relative` under this prefix (`relative` uses `/`).
    pub fn join(&self, relative: &str) -> Location {
        let relative = relative.trim_start_matches('/');
        match self {
            Location::Local(p) => {
                let mut p = p.clone();
                for part in relative.split('/').filter(|s| !s.is_empty()) {
                    p.push(part);
                }
                Location::Local(p)
            }
            Location::S3 { bucket, key } => {
                let key = if key.is_empty() || key.ends_with('/') {
                    format!("{key}{relative}")
                } else {
                    format!("{key}/{relative}")
                };
                Location::S3 {
                    bucket: bucket.clone(),
                    key,
                }
            }
        }
    }

    /// This address with `suffix` appended to its last component (`a/b` → `a/b.idx`).
    pub fn with_suffix(&self, suffix: &str) -> Location {
        match self {
            Location::Local(p) => {
                let mut s = p.clone().into_os_string();
                s.push(suffix);
                Location::Local(PathBuf::from(s))
            }
            Location::S3 { bucket, key } => Location::S3 {
                bucket: bucket.clone(),
                key: format!("{key}{suffix}"),
            },
        }
    }

    /// The last path component (the object's name).
    pub fn file_name(&self) -> &str {
        match self {
            Location::Local(p) => p.file_name().and_then(|s| s.to_str()).unwrap_or(""),
            Location::S3 { key, .. } => key.trim_end_matches('/').rsplit('/').next().unwrap_or(""),
        }
    }

    /// The local path, if this is local.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::S3 { .. } => None,
        }
    }

    /// Whether this address is on S3.
    pub fn is_s3(&self) -> bool {
        matches!(self, Location::S3 { .. })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
        }
    }
}

impl std::str::FromStr for Location {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Location::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expected: &str) {
        let loc = Location::parse(url).expect("valid address");
        assert_eq!(loc.to_string(), expected);
    }

    #[test]
    fn parses() {
        check("data/in", "data/in");
        check("file:///data/in", "/data/in");
        check("s3://bucket/a/b", "s3://bucket/a/b");
        check("s3://bucket", "s3://bucket/");
    }

    #[test]
    fn rejects() {
        for url in ["", "s3:///key", "gs://b/k", "file://relative"] {
            assert!(Location::parse(url).is_err(), "{url}");
        }
    }

    #[test]
    fn joins() {
        let s3 = Location::parse("s3://b/pre").expect("valid");
        assert_eq!(s3.join("x/y.parquet").to_string(), "s3://b/pre/x/y.parquet");
        let root = Location::parse("s3://b").expect("valid");
        assert_eq!(root.join("x").to_string(), "s3://b/x");
        let local = Location::parse("out").expect("valid");
        assert_eq!(local.join("_done/a.json").to_string(), "out/_done/a.json");
        assert_eq!(s3.join("x/y.parquet").file_name(), "y.parquet");
    }
}
