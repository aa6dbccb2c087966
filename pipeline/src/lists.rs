//! Word and domain lists that stages load from storage: plain files with one entry per
//! line (`#` comments and blank lines ignored), or folders in the UT1 blacklist layout
//! (every file named `domains` below the folder).

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::storage::{Location, Storage};

/// The entries of a list file, or of every `domains` file below a UT1-layout folder:
/// trimmed, comments removed, blank lines left out; case as written.
pub fn read_lines(storage: &Storage, url: &str) -> Result<Vec<String>> {
    let loc = Location::parse(url)?;
    let bytes = match storage.head(&loc)? {
        Some(_) => storage.read(&loc)?,
        None => {
            let mut all = Vec::new();
            let listing = storage.list(&loc)?;
            let files: Vec<_> = listing
                .iter()
                .filter(|m| m.location.file_name() == "domains")
                .collect();
            if files.is_empty() {
                return Err(Error::Config {
                    url: url.to_string(),
                    message: "no such file, and no `domains` files below it".into(),
                });
            }
            for m in files {
                all.extend(storage.read(&m.location)?);
                all.push(b'\n');
            }
            all
        }
    };
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// A set of domains; a listed domain covers its subdomains.
#[derive(Debug, Default, Clone)]
pub struct DomainSet {
    domains: HashSet<String>,
}

impl DomainSet {
    /// Loads the lists (files or UT1 folders) and adds `extra` domains.
    pub fn load(storage: &Storage, lists: &[String], extra: &[String]) -> Result<Self> {
        let mut domains: HashSet<String> = extra.iter().map(|d| normalise_domain(d)).collect();
        for list in lists {
            for line in read_lines(storage, list)? {
                // UT1 lists are bare domains; tolerate hosts-file lines too.
                domains.insert(normalise_domain(
                    line.split_whitespace().last().unwrap_or_default(),
                ));
            }
        }
        domains.remove("");
        Ok(DomainSet { domains })
    }

    /// Whether no domain is listed.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// Domains listed.
    pub fn len(&self) -> usize {
        self.domains.len()
    }

    /// Whether the host of `url`, or a domain above it, is listed.
    pub fn covers_url(&self, url: &str) -> bool {
        if self.domains.is_empty() {
            return false;
        }
        let host = host(url);
        let mut d = host.as_str();
        loop {
            if self.domains.contains(d) {
                return true;
            }
            match d.split_once('.') {
                Some((_, rest)) if !rest.is_empty() => d = rest,
                _ => return false,
            }
        }
    }

    /// The domains, sorted (for config hashes).
    pub fn sorted(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self.domains.iter().map(String::as_str).collect();
        all.sort_unstable();
        all
    }
}

fn normalise_domain(d: &str) -> String {
    d.trim()
        .trim_start_matches("*.")
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// The lowercased host of a URL (no scheme, user, port or trailing dot).
pub fn host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hostport = authority.rsplit('@').next().unwrap_or_default();
    let host = if hostport.starts_with('[') {
        hostport
            .split(']')
            .next()
            .unwrap_or_default()
            .trim_start_matches('[')
    } else {
        hostport.split(':').next().unwrap_or_default()
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(
            host("https://User@Www.Example.COM.:8080/a?b"),
            "www.example.com"
        );
        assert_eq!(host("http://[::1]:80/"), "::1");
        assert_eq!(host("example.org/path"), "example.org");
    }

    #[test]
    fn subdomains_are_covered() {
        let s = DomainSet::load(
            &Storage::new(),
            &[],
            &["Casino.example".into(), "*.bet.test".into()],
        )
        .expect("load");
        assert!(s.covers_url("https://www.casino.example/x"));
        assert!(s.covers_url("http://bet.test"));
        assert!(!s.covers_url("https://notcasino.example/"));
        assert_eq!(s.len(), 2);
    }
}
