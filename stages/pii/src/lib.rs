//! Stage `pii`: finds personal data in `text` and replaces it with fixed stand-ins.
//!
//! Kinds: e-mail addresses (datatrove's `PIIFormatter` pattern, plus bracketed
//! obfuscations such as `name [at] host [dot] org`), IPv4 and IPv6 addresses (public
//! ones only by default: private and reserved ranges stay, as datatrove keeps them),
//! phone numbers, and, when switched on, payment card numbers (Luhn-checked) and IBANs
//! (ISO 13616 check digits). One [`RegexSet`] pass tells which kinds occur in a
//! document; only those kinds' patterns then look for positions, and each match goes
//! through its kind's validator ([`validate`]). Overlaps go to the kind listed first
//! in [`Kind::ALL`].
//!
//! Each kind's replacements are used in turn, as datatrove does, but the turn starts
//! anew in every document, so the output does not depend on document order or thread
//! count (datatrove's turn runs across a process's documents).
//!
//! The stage never drops a document. It counts what it replaced per kind (`pii_email`,
//! `pii_ipv4`, … in the stats) and can write the total to a `pii_count` column.

pub mod validate;

use pipeline::shard::ShardOptions;
use pipeline::{Column, ColumnKind, Document, DocumentSource, Stage, Step, Value, Verdict};
use regex::{Regex, RegexSet};
use serde::{Deserialize, Serialize};

/// The column with the number of replacements in a document (`count_column = true`).
pub const COUNT_COLUMN: &str = "pii_count";

/// A kind of personal data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Email,
    ObfuscatedEmail,
    Ipv4,
    Ipv6,
    Iban,
    Card,
    Phone,
}

impl Kind {
    /// Every kind, in the order overlaps are settled.
    pub const ALL: [Kind; 7] = [
        Kind::Email,
        Kind::ObfuscatedEmail,
        Kind::Ipv4,
        Kind::Ipv6,
        Kind::Iban,
        Kind::Card,
        Kind::Phone,
    ];

    /// The name of its count in the stats.
    pub fn stat(self) -> &'static str {
        match self {
            // An obfuscated address is an address: one count for both.
            Kind::Email | Kind::ObfuscatedEmail => "pii_email",
            Kind::Ipv4 => "pii_ipv4",
            Kind::Ipv6 => "pii_ipv6",
            Kind::Iban => "pii_iban",
            Kind::Card => "pii_card",
            Kind::Phone => "pii_phone",
        }
    }

    fn pattern(self) -> &'static str {
        match self {
            Kind::Email => EMAIL,
            Kind::ObfuscatedEmail => OBFUSCATED_EMAIL,
            Kind::Ipv4 => IPV4,
            Kind::Ipv6 => IPV6,
            Kind::Iban => IBAN,
            Kind::Card => CARD,
            Kind::Phone => PHONE,
        }
    }
}

/// datatrove's e-mail pattern (itself the RFC 5322 pattern commonly used), with an
/// ASCII word boundary at the start; [`Pii::find`] rejects the start Python's Unicode
/// boundary would refuse (a letter outside ASCII right before it).
const EMAIL: &str = concat!(
    r"(?-u:\b)[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@",
    r"(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?",
    r"|\[(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}",
    r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)\])",
);

/// `name [at] host [dot] org`, `name (at) host.org`, `name{at}host{dot}org`: the `@`
/// (and maybe the dots) written as a bracketed word; at least one dot in the host.
const OBFUSCATED_EMAIL: &str = concat!(
    r"(?-u:\b)[A-Za-z0-9._%+-]+ ?[\[({<] ?[Aa][Tt] ?[\])}>] ?[A-Za-z0-9-]+",
    r"(?:(?: ?[\[({<] ?[Dd][Oo][Tt] ?[\])}>] ?|\.)[A-Za-z0-9-]+)+",
);

/// datatrove's IPv4 pattern: four octets of 0–255 (leading zeros are refused by the
/// validator, as Python's `ipaddress` refuses them).
const IPV4: &str =
    r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)";

/// A run of hex groups and colons with at least two colons; the validator parses it.
const IPV6: &str = r"(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}";

/// Country code, two check digits, then 11 to 30 letters or digits, maybe in groups of
/// four separated by single spaces.
const IBAN: &str = r"(?-u:\b)[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?-u:\b)";

/// 13 to 19 digits, maybe in groups separated by single spaces or hyphens.
const CARD: &str = r"(?-u:\b)[0-9](?:[ -]?[0-9]){12,18}(?-u:\b)";

/// North American numbers (`(415) 555-2671`, `415-555-2671`, `+1 415.555.2671`) and
/// international ones written with `+` and a country code (`+44 20 7946 0958`,
/// `+49 (30) 901820`); the validator wants 8 to 15 digits (E.164's maximum).
const PHONE: &str = concat!(
    r"(?:\+?1[-. ]?)?(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[-. ])[2-9][0-9]{2}[-. ][0-9]{4}",
    r"|\+[1-9][0-9]{0,2}(?:[-. ]?(?:\([0-9]{1,4}\)|[0-9]{1,6})){1,6}",
);

/// Configuration of the pii stage (`[config.pii]`). The replacements are datatrove's
/// `PIIFormatter` defaults where datatrove has the kind; the others are addresses and
/// numbers reserved for documentation or tests, so a stand-in never names anyone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// E-mail addresses (datatrove: `remove_emails = True`).
    pub emails: bool,
    /// Bracketed obfuscations of e-mail addresses (`name [at] host [dot] org`).
    pub obfuscated_emails: bool,
    /// IPv4 addresses (datatrove: `remove_ips = True`).
    pub ipv4: bool,
    /// IPv6 addresses.
    pub ipv6: bool,
    /// Only addresses Python's `ipaddress` calls global (datatrove:
    /// `only_remove_public_ips = True`).
    pub only_public_ips: bool,
    /// An IPv4 match must stand alone: no letter, digit or `_` touching it and no
    /// `.<digit>` continuing it (`v1.2.3.4`, `1.2.3.4.5` are version numbers). datatrove
    /// has no such check; `false` matches it exactly.
    pub ipv4_word_boundaries: bool,
    /// Phone numbers.
    pub phones: bool,
    /// Payment card numbers (Luhn-checked, known issuer prefixes).
    pub credit_cards: bool,
    /// IBANs (ISO 13616 mod-97 check).
    pub ibans: bool,
    /// Write the number of replacements to the `pii_count` column.
    pub count_column: bool,
    /// Used in turn for e-mail addresses (datatrove's default).
    pub email_replacement: Vec<String>,
    /// Used in turn for IPv4 addresses (datatrove's default: addresses that did not
    /// answer pings when its list was made).
    pub ip_replacement: Vec<String>,
    /// IPv6 stand-ins: RFC 3849's documentation prefix.
    pub ipv6_replacement: Vec<String>,
    /// Phone stand-ins: 555-0100 to 555-0199 are reserved for fiction by the NANPA.
    pub phone_replacement: Vec<String>,
    /// Card stand-ins: the well-known Visa test number.
    pub card_replacement: Vec<String>,
    /// IBAN stand-ins: the example IBAN of ISO 13616 / the ECBS.
    pub iban_replacement: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect();
        Config {
            emails: true,
            obfuscated_emails: true,
            ipv4: true,
            ipv6: true,
            only_public_ips: true,
            ipv4_word_boundaries: true,
            phones: true,
            credit_cards: false,
            ibans: false,
            count_column: false,
            email_replacement: v(&["email@example.com", "firstname.lastname@example.org"]),
            ip_replacement: v(&[
                "22.214.171.124",
                "126.96.36.199",
                "188.8.131.52",
                "184.108.40.206",
                "220.127.116.11",
                "18.104.22.168",
            ]),
            ipv6_replacement: v(&["2001:db8::1", "2001:db8::2"]),
            phone_replacement: v(&["(555) 555-0100", "(555) 555-0199"]),
            card_replacement: v(&["4111 1111 1111 1111"]),
            iban_replacement: v(&["GB82 WEST 1234 5698 7654 32"]),
        }
    }
}

impl Config {
    /// Whether `kind` is looked for.
    pub fn enabled(&self, kind: Kind) -> bool {
        match kind {
            Kind::Email => self.emails,
            Kind::ObfuscatedEmail => self.obfuscated_emails,
            Kind::Ipv4 => self.ipv4,
            Kind::Ipv6 => self.ipv6,
            Kind::Iban => self.ibans,
            Kind::Card => self.credit_cards,
            Kind::Phone => self.phones,
        }
    }

    fn replacements(&self, kind: Kind) -> &[String] {
        match kind {
            Kind::Email | Kind::ObfuscatedEmail => &self.email_replacement,
            Kind::Ipv4 => &self.ip_replacement,
            Kind::Ipv6 => &self.ipv6_replacement,
            Kind::Iban => &self.iban_replacement,
            Kind::Card => &self.card_replacement,
            Kind::Phone => &self.phone_replacement,
        }
    }

    /// Checks what serde cannot: every enabled kind has a replacement.
    pub fn check(&self) -> pipeline::Result<()> {
        for kind in Kind::ALL {
            if self.enabled(kind) && self.replacements(kind).is_empty() {
                return Err(config_error(format!(
                    "{} is enabled but its replacement list is empty",
                    kind.stat()
                )));
            }
        }
        Ok(())
    }
}

fn config_error(message: String) -> pipeline::Error {
    pipeline::Error::Config {
        url: "[config.pii]".into(),
        message,
    }
}

/// One piece of personal data found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: Kind,
    /// Byte range in the text.
    pub start: usize,
    pub end: usize,
}

/// The pii stage.
#[derive(Debug, Clone)]
pub struct Pii {
    config: Config,
    /// The enabled kinds, in [`Kind::ALL`]'s order.
    kinds: Vec<Kind>,
    /// Their patterns in one set, for the one pass that says which occur.
    set: RegexSet,
    /// The same patterns, to find positions.
    patterns: Vec<Regex>,
}

impl Pii {
    pub fn new(config: Config) -> pipeline::Result<Self> {
        config.check()?;
        let kinds: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| config.enabled(*k))
            .collect();
        let sources: Vec<&str> = kinds.iter().map(|k| k.pattern()).collect();
        let bad = |e: regex::Error| config_error(format!("pattern: {e}"));
        let set = RegexSet::new(&sources).map_err(bad)?;
        let patterns = sources
            .iter()
            .map(|p| Regex::new(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        Ok(Pii {
            config,
            kinds,
            set,
            patterns,
        })
    }

    /// Every piece of personal data in `text`, in text order, without overlaps.
    pub fn find(&self, text: &str) -> Vec<Found> {
        let mut found: Vec<Found> = Vec::new();
        for i in self.set.matches(text).iter() {
            let kind = self.kinds[i];
            let mut at = 0;
            while at <= text.len() {
                let Some(m) = self.patterns[i].find_at(text, at) else {
                    break;
                };
                let (start, end) = (m.start(), m.end());
                if kind == Kind::Email && validate::after_unicode_word(text, start) {
                    // Python's `\b` sees no boundary after a non-ASCII letter; its
                    // search goes on from the next character.
                    at = start + text[start..].chars().next().map_or(1, char::len_utf8);
                    continue;
                }
                at = if end > start { end } else { end + 1 };
                let Some((start, end)) = validate::check(kind, &self.config, text, start, end)
                else {
                    continue;
                };
                if found.iter().all(|f| f.end <= start || end <= f.start) {
                    found.push(Found { kind, start, end });
                }
            }
        }
        found.sort_by_key(|f| f.start);
        found
    }

    /// `text` with its personal data replaced, and what was replaced.
    pub fn redact(&self, text: &str) -> (String, Vec<Found>) {
        let found = self.find(text);
        (self.replace(text, &found), found)
    }

    /// `text` with the pieces `found` (in text order, from [`Pii::find`]) replaced by
    /// their stand-ins, each kind's list used in turn from its start.
    pub fn replace(&self, text: &str, found: &[Found]) -> String {
        let mut out = String::with_capacity(text.len());
        let mut turn = [0usize; Kind::ALL.len()];
        let mut last = 0;
        for f in found {
            out.push_str(&text[last..f.start]);
            // The turn goes by replacement list: an obfuscated address takes the next
            // e-mail stand-in.
            let slot = match f.kind {
                Kind::ObfuscatedEmail => Kind::Email as usize,
                k => k as usize,
            };
            let list = self.config.replacements(f.kind);
            out.push_str(&list[turn[slot] % list.len()]);
            turn[slot] += 1;
            last = f.end;
        }
        out.push_str(&text[last..]);
        out
    }
}

impl Stage for Pii {
    fn name(&self) -> &'static str {
        "pii"
    }

    fn columns(&self) -> Vec<Column> {
        if self.config.count_column {
            vec![Column {
                name: COUNT_COLUMN,
                kind: ColumnKind::I64,
            }]
        } else {
            Vec::new()
        }
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        // Most documents hold nothing: their text is not copied.
        let found = self.find(&doc.text);
        for f in &found {
            doc.count(f.kind.stat(), 1);
        }
        if !found.is_empty() {
            doc.text = self.replace(&doc.text, &found);
        }
        if self.config.count_column {
            doc.annotate(COUNT_COLUMN, Value::I64(found.len() as i64));
        }
        Verdict::Keep
    }
}

/// The step `mill-pii` runs.
pub fn step(config: &Config) -> pipeline::Result<Step> {
    Ok(Step {
        name: "pii".into(),
        stages: vec![Box::new(Pii::new(config.clone())?)],
        source: Box::new(DocumentSource::default()),
        config_hash: pipeline::cli::config_hash("pii", config),
        shard: ShardOptions::default(),
        partition: None,
        per_input: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(config: &Config, text: &str) -> String {
        Pii::new(config.clone()).expect("config").redact(text).0
    }

    #[test]
    fn emails_and_public_ips_are_replaced_in_turn() {
        let c = Config::default();
        assert_eq!(
            redact(
                &c,
                "Write to a@b.org or c.d@e.co.uk, from 8.8.8.8 or 1.1.1.1."
            ),
            "Write to email@example.com or firstname.lastname@example.org, from 22.214.171.124 or 126.96.36.199."
        );
        // The turn starts again in every document.
        assert_eq!(redact(&c, "x@y.com"), "email@example.com");
    }

    #[test]
    fn private_reserved_and_malformed_ips_stay() {
        let c = Config::default();
        for t in [
            "10.0.0.1",
            "192.168.1.20",
            "127.0.0.1",
            "172.16.5.4",
            "100.64.1.1",
            "169.254.0.3",
            "203.0.113.9",
            "08.8.8.8",
            "::1",
            "fe80::1:2:3",
            "2001:db8::8:1",
            "fd00::1:2",
        ] {
            assert_eq!(redact(&c, t), t);
        }
    }

    #[test]
    fn version_numbers_are_not_addresses_unless_asked() {
        let mut c = Config::default();
        for t in ["v1.2.3.4", "release 2.1.0.1.7", "build1.2.3.4"] {
            assert_eq!(redact(&c, t), t);
        }
        c.ipv4_word_boundaries = false;
        assert_eq!(redact(&c, "v1.2.3.4"), "v22.214.171.124");
    }

    #[test]
    fn ipv6_needs_a_valid_global_address_of_three_groups() {
        let c = Config::default();
        assert_eq!(
            redact(
                &c,
                "resolver 2606:4700:4700::1111, time 12:30:45, a::b, 10:30::"
            ),
            "resolver 2001:db8::1, time 12:30:45, a::b, 10:30::"
        );
        assert_eq!(
            redact(&c, "host 2a00:1450:4007:80e::200e."),
            "host 2001:db8::1."
        );
    }

    #[test]
    fn phones_cards_and_ibans() {
        let c = Config {
            credit_cards: true,
            ibans: true,
            ..Config::default()
        };
        assert_eq!(
            redact(
                &c,
                "Call (415) 555-2671 or +44 20 7946 0958; card 4539 1488 0343 6467; IBAN DE89 3704 0044 0532 0130 00."
            ),
            "Call (555) 555-0100 or (555) 555-0199; card 4111 1111 1111 1111; IBAN GB82 WEST 1234 5698 7654 32."
        );
        // A failed Luhn check, a date, an ISBN and a bad IBAN checksum stay.
        for t in [
            "4539 1488 0343 6468",
            "2024-01-15",
            "ISBN 978-3-16-148410-0",
            "DE89 3704 0044 0532 0130 01",
        ] {
            assert_eq!(redact(&c, t), t);
        }
        // Off by default.
        assert_eq!(
            redact(&Config::default(), "4539 1488 0343 6467"),
            "4539 1488 0343 6467"
        );
    }

    #[test]
    fn obfuscated_addresses_count_as_emails() {
        let p = Pii::new(Config::default()).expect("config");
        let (out, found) = p.redact("mail jane.doe [at] uni-x [dot] edu or bob(at)host.org");
        assert_eq!(
            out,
            "mail email@example.com or firstname.lastname@example.org"
        );
        assert!(found.iter().all(|f| f.kind.stat() == "pii_email"));
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn a_letter_outside_ascii_before_an_address_moves_its_start_as_python_does() {
        let c = Config::default();
        // Python's `\b` finds no boundary between "é" and "j": no match at "john".
        assert_eq!(redact(&c, "éjohn@x.com"), "éjohn@x.com");
        assert_eq!(redact(&c, "éa.john@x.com"), "éa.email@example.com");
    }

    #[test]
    fn empty_replacement_lists_are_refused() {
        let c = Config {
            email_replacement: Vec::new(),
            ..Config::default()
        };
        assert!(Pii::new(c).is_err());
    }
}
