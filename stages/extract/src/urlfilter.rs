//! URL filtering, the first thing RefinedWeb did to a crawl: a domain blocklist and a
//! rule on the words of the URL, each with its own drop reason.
//!
//! - Blocklist: one domain per line (`#` comments, blank lines ignored); a listed
//!   domain blocks its subdomains too. A folder is read as the UT1 blacklist layout:
//!   every file named `domains` below it is loaded.
//! - URL words, as datatrove's `URLFilter` applies them: the URL is lowercased and
//!   split on non-alphanumeric characters; one banned word drops it
//!   (`url_banned_word`), as do `soft_word_threshold` soft words (`url_soft_words`);
//!   banned subwords are looked for anywhere in the URL with punctuation removed
//!   (`url_banned_subword`).

use std::collections::HashSet;

use pipeline::lists::{DomainSet, read_lines};
use pipeline::{Document, Stage, Storage, Verdict};
use serde::{Deserialize, Serialize};

/// URL filter settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlFilterConfig {
    /// Domain lists: files, or folders in the UT1 layout, on any storage.
    #[serde(default)]
    pub blocklists: Vec<String>,
    /// Domains blocked in addition to the lists.
    #[serde(default)]
    pub blocked_domains: Vec<String>,
    /// URL words that drop a page on their own.
    #[serde(default)]
    pub banned_words: Vec<String>,
    /// Files of banned words, one per line.
    #[serde(default)]
    pub banned_words_files: Vec<String>,
    /// URL words that drop a page when `soft_word_threshold` of them appear.
    #[serde(default)]
    pub soft_words: Vec<String>,
    #[serde(default)]
    pub soft_words_files: Vec<String>,
    /// Soft words needed to drop a page: 2, datatrove `URLFilter(soft_word_threshold=2)`.
    #[serde(default = "default_soft_threshold")]
    pub soft_word_threshold: usize,
    /// Strings that drop a page wherever they appear in its URL.
    #[serde(default)]
    pub banned_subwords: Vec<String>,
    #[serde(default)]
    pub banned_subwords_files: Vec<String>,
}

fn default_soft_threshold() -> usize {
    2
}

impl Default for UrlFilterConfig {
    fn default() -> Self {
        UrlFilterConfig {
            blocklists: Vec::new(),
            blocked_domains: Vec::new(),
            banned_words: Vec::new(),
            banned_words_files: Vec::new(),
            soft_words: Vec::new(),
            soft_words_files: Vec::new(),
            soft_word_threshold: default_soft_threshold(),
            banned_subwords: Vec::new(),
            banned_subwords_files: Vec::new(),
        }
    }
}

/// The loaded lists.
#[derive(Debug, Default)]
pub struct UrlFilter {
    domains: DomainSet,
    banned: HashSet<String>,
    soft: HashSet<String>,
    soft_threshold: usize,
    subwords: Vec<String>,
}

fn words(storage: &Storage, inline: &[String], files: &[String]) -> pipeline::Result<Vec<String>> {
    let mut out: Vec<String> = inline.iter().map(|w| w.trim().to_lowercase()).collect();
    for f in files {
        out.extend(
            read_lines(storage, f)?
                .into_iter()
                .map(|w| w.to_lowercase()),
        );
    }
    out.retain(|w| !w.is_empty());
    Ok(out)
}

impl UrlFilter {
    /// Loads every list the config names.
    pub fn load(storage: &Storage, config: &UrlFilterConfig) -> pipeline::Result<Self> {
        let domains = DomainSet::load(storage, &config.blocklists, &config.blocked_domains)?;
        let subwords = words(
            storage,
            &config.banned_subwords,
            &config.banned_subwords_files,
        )?
        .into_iter()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric())
                .collect::<String>()
        })
        .filter(|w| !w.is_empty())
        .collect();
        Ok(UrlFilter {
            domains,
            banned: words(storage, &config.banned_words, &config.banned_words_files)?
                .into_iter()
                .collect(),
            soft: words(storage, &config.soft_words, &config.soft_words_files)?
                .into_iter()
                .collect(),
            soft_threshold: config.soft_word_threshold.max(1),
            subwords,
        })
    }

    /// Whether nothing is configured.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
            && self.banned.is_empty()
            && self.soft.is_empty()
            && self.subwords.is_empty()
    }

    /// A fingerprint of the loaded lists, for the config hash.
    pub fn fingerprint(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .domains
            .sorted()
            .into_iter()
            .map(|d| format!("d:{d}"))
            .chain(self.banned.iter().map(|w| format!("b:{w}")))
            .chain(self.soft.iter().map(|w| format!("s:{w}")))
            .chain(self.subwords.iter().map(|w| format!("u:{w}")))
            .collect();
        all.sort();
        all.push(format!("t:{}", self.soft_threshold));
        all
    }

    /// The drop reason for a URL, if any.
    pub fn check(&self, url: &str) -> Option<&'static str> {
        if self.domains.covers_url(url) {
            return Some("url_blocklisted_domain");
        }
        let lower = url.to_lowercase();
        if !self.banned.is_empty() || !self.soft.is_empty() {
            let mut soft = 0;
            for w in lower
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                if self.banned.contains(w) {
                    return Some("url_banned_word");
                }
                if self.soft.contains(w) {
                    soft += 1;
                }
            }
            if soft >= self.soft_threshold {
                return Some("url_soft_words");
            }
        }
        if !self.subwords.is_empty() {
            let squashed: String = lower.chars().filter(|c| c.is_alphanumeric()).collect();
            if self.subwords.iter().any(|w| squashed.contains(w.as_str())) {
                return Some("url_banned_subword");
            }
        }
        None
    }
}

impl Stage for UrlFilter {
    fn name(&self) -> &'static str {
        "url_filter"
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        match doc.url.as_deref().and_then(|u| self.check(u)) {
            Some(reason) => Verdict::Drop(reason),
            None => Verdict::Keep,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(config: UrlFilterConfig) -> UrlFilter {
        UrlFilter::load(&Storage::new(), &config).expect("load")
    }

    #[test]
    fn domains_block_subdomains() {
        let f = filter(UrlFilterConfig {
            blocked_domains: vec!["bad.example".into()],
            ..Default::default()
        });
        assert_eq!(
            f.check("https://bad.example/x"),
            Some("url_blocklisted_domain")
        );
        assert_eq!(
            f.check("http://www.Bad.Example:8080/"),
            Some("url_blocklisted_domain")
        );
        assert_eq!(f.check("https://notbad.example/"), None);
        assert_eq!(f.check("https://bad.example.org/"), None);
    }

    #[test]
    fn words() {
        let f = filter(UrlFilterConfig {
            banned_words: vec!["casino".into()],
            soft_words: vec!["hot".into(), "cheap".into()],
            soft_word_threshold: 2,
            banned_subwords: vec!["spam-site".into()],
            ..Default::default()
        });
        assert_eq!(
            f.check("https://x.example/casino/win"),
            Some("url_banned_word")
        );
        assert_eq!(f.check("https://x.example/casinos"), None);
        assert_eq!(
            f.check("https://x.example/hot-cheap-deals"),
            Some("url_soft_words")
        );
        assert_eq!(f.check("https://x.example/hot-deals"), None);
        assert_eq!(
            f.check("https://myspamsite.example/"),
            Some("url_banned_subword")
        );
    }
}
