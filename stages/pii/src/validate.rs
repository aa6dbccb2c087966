//! What a pattern match must also pass to count as personal data.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::{Config, Kind};

/// The match `text[start..end]` of `kind`, maybe trimmed, if it passes `kind`'s checks.
pub fn check(
    kind: Kind,
    config: &Config,
    text: &str,
    start: usize,
    end: usize,
) -> Option<(usize, usize)> {
    let s = &text[start..end];
    let ok = match kind {
        Kind::Email | Kind::ObfuscatedEmail => true,
        Kind::Ipv4 => {
            (!config.ipv4_word_boundaries || ipv4_stands_alone(text, start, end))
                && ipv4(s).is_some_and(|ip| !config.only_public_ips || ipv4_is_global(ip))
        }
        Kind::Ipv6 => {
            // The pattern may take a colon that ends a sentence or a label.
            let end = if s.ends_with(':') && !s.ends_with("::") {
                end - 1
            } else {
                end
            };
            let s = &text[start..end];
            return (stands_alone(text, start, end, |c| c.is_ascii_hexdigit() || c == ':')
                && s.split(':').filter(|g| !g.is_empty()).count() >= 3
                && s.parse::<Ipv6Addr>()
                    .is_ok_and(|ip| !config.only_public_ips || ipv6_is_global(ip)))
            .then_some((start, end));
        }
        Kind::Iban => iban(s),
        Kind::Card => stands_alone(text, start, end, is_word) && card(s),
        Kind::Phone => {
            stands_alone(text, start, end, |c| is_word(c) || c == '+')
                && !continues_number(text, end)
                && (8..=15).contains(&s.bytes().filter(u8::is_ascii_digit).count())
        }
    };
    ok.then_some((start, end))
}

/// Whether the character before `at` is a letter or digit outside ASCII (a word
/// character for Python's `\b`, not for the ASCII boundary of the patterns).
pub fn after_unicode_word(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| !c.is_ascii() && (c.is_alphanumeric() || c == '_'))
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// No character for which `joins` holds right before or right after the match.
fn stands_alone(text: &str, start: usize, end: usize, joins: impl Fn(char) -> bool) -> bool {
    !text[..start].chars().next_back().is_some_and(&joins)
        && !text[end..].chars().next().is_some_and(&joins)
}

/// The match is followed by a separator and a digit: a longer number goes on.
fn continues_number(text: &str, end: usize) -> bool {
    let mut rest = text[end..].chars();
    matches!(rest.next(), Some('-' | '.' | '/')) && rest.next().is_some_and(|c| c.is_ascii_digit())
}

/// The IPv4 match stands alone: no word character touches it and no `.<digit>` goes on
/// before or after it (a version number).
fn ipv4_stands_alone(text: &str, start: usize, end: usize) -> bool {
    let before = &text[..start];
    let mut back = before.chars().rev();
    let prev = back.next();
    if prev.is_some_and(is_word)
        || (prev == Some('.') && back.next().is_some_and(|c| c.is_ascii_digit()))
    {
        return false;
    }
    let mut ahead = text[end..].chars();
    let next = ahead.next();
    !(next.is_some_and(is_word)
        || (next == Some('.') && ahead.next().is_some_and(|c| c.is_ascii_digit())))
}

/// Four decimal octets without leading zeros, as Python's `ipaddress` reads them.
pub fn ipv4(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for o in &mut octets {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || (p.len() > 1 && p.starts_with('0')) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    parts.next().is_none().then(|| Ipv4Addr::from(octets))
}

/// Python 3.11's `IPv4Address.is_global`: outside 100.64.0.0/10 and outside the
/// networks its `is_private` lists (the IANA IPv4 special-purpose registry).
pub fn ipv4_is_global(ip: Ipv4Addr) -> bool {
    const PRIVATE: [([u8; 4], u32); 15] = [
        ([0, 0, 0, 0], 8),
        ([10, 0, 0, 0], 8),
        ([127, 0, 0, 0], 8),
        ([169, 254, 0, 0], 16),
        ([172, 16, 0, 0], 12),
        ([192, 0, 0, 0], 29),
        ([192, 0, 0, 170], 31),
        ([192, 0, 2, 0], 24),
        ([192, 168, 0, 0], 16),
        ([198, 18, 0, 0], 15),
        ([198, 51, 100, 0], 24),
        ([203, 0, 113, 0], 24),
        ([240, 0, 0, 0], 4),
        ([255, 255, 255, 255], 32),
        // Shared address space (RFC 6598), excluded by `is_global` itself.
        ([100, 64, 0, 0], 10),
    ];
    let a = u32::from(ip);
    !PRIVATE.iter().any(|(net, len)| {
        let mask = u32::MAX << (32 - len);
        a & mask == u32::from_be_bytes(*net) & mask
    })
}

/// Python 3.11's `IPv6Address.is_global`: outside the networks its `is_private` lists
/// (the IANA IPv6 special-purpose registry).
pub fn ipv6_is_global(ip: Ipv6Addr) -> bool {
    const PRIVATE: [(u128, u32); 10] = [
        (0x1, 128),                                      // ::1
        (0x0, 128),                                      // ::
        (0xffff_0000_0000, 96),                          // ::ffff:0:0/96
        (0x0100_0000_0000_0000 << 64, 64),               // 100::/64
        (0x2001_0000_0000_0000 << 64, 23),               // 2001::/23
        (0x2001_0002_0000_0000 << 64, 48),               // 2001:2::/48
        (0x2001_0db8_0000_0000 << 64, 32),               // 2001:db8::/32
        (0x2001_0010_0000_0000 << 64, 28),               // 2001:10::/28
        (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7),  // fc00::/7
        (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10), // fe80::/10
    ];
    let a = u128::from(ip);
    !PRIVATE.iter().any(|(net, len)| {
        let mask = if *len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        a & mask == net & mask
    })
}

/// 13 to 19 digits with a valid Luhn check digit and an issuer prefix of a card network
/// (Visa, Mastercard, American Express, Discover, JCB, Diners Club, UnionPay, Maestro),
/// written in one piece or in the groups cards print (4-4-4-4, 4-4-4-4-3, 4-6-5, 4-6-4).
pub fn card(s: &str) -> bool {
    let groups: Vec<usize> = s.split([' ', '-']).map(str::len).collect();
    if groups.len() > 1
        && !matches!(
            groups.as_slice(),
            [4, 4, 4, 4] | [4, 4, 4, 4, 3] | [4, 6, 5] | [4, 6, 4]
        )
    {
        return false;
    }
    let digits: Vec<u8> = s
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    if !(13..=19).contains(&digits.len()) || digits.iter().all(|d| *d == digits[0]) {
        return false;
    }
    let prefix = |n: usize| {
        digits[..n]
            .iter()
            .fold(0u32, |acc, d| acc * 10 + u32::from(*d))
    };
    let issuer = digits[0] == 4
        || (51..=55).contains(&prefix(2))
        || (2221..=2720).contains(&prefix(4))
        || matches!(prefix(2), 34 | 37 | 35 | 36 | 38 | 62 | 65)
        || (300..=305).contains(&prefix(3))
        || prefix(4) == 6011
        || matches!(prefix(2), 50 | 56..=58 | 63 | 67);
    issuer && luhn(&digits)
}

/// The Luhn checksum of `digits` (the last one is the check digit) is 0 mod 10.
pub fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// An IBAN: 15 to 34 characters without spaces whose ISO 13616 check (the first four
/// moved to the end, letters as 10–35, the number mod 97) gives 1.
pub fn iban(s: &str) -> bool {
    let chars: Vec<u8> = s.bytes().filter(|b| *b != b' ').collect();
    if !(15..=34).contains(&chars.len()) {
        return false;
    }
    let mut rem: u32 = 0;
    for &b in chars[4..].iter().chain(&chars[..4]) {
        rem = match b {
            b'0'..=b'9' => (rem * 10 + u32::from(b - b'0')) % 97,
            b'A'..=b'Z' => (rem * 100 + u32::from(b - b'A') + 10) % 97,
            _ => return false,
        };
    }
    rem == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_and_issuers() {
        assert!(card("4539 1488 0343 6467"));
        assert!(card("5555555555554444"));
        assert!(card("378282246310005"));
        assert!(!card("4539 1488 0343 6468"));
        assert!(!card("0000 0000 0000 0000"));
        assert!(card("3782 822463 10005"));
        assert!(!card("378 2822 4631 0005"));
        // Luhn-valid but no issuer starts with 9.
        assert!(!card("9999 9999 9999 9995"));
    }

    #[test]
    fn iban_check_digits() {
        assert!(iban("GB82 WEST 1234 5698 7654 32"));
        assert!(iban("DE89370400440532013000"));
        assert!(iban("FR1420041010050500013M02606"));
        assert!(!iban("GB82 WEST 1234 5698 7654 33"));
        assert!(!iban("GB82 WEST"));
    }

    #[test]
    fn ipv4_reading_and_ranges() {
        assert_eq!(ipv4("8.8.8.8"), Some(Ipv4Addr::new(8, 8, 8, 8)));
        assert_eq!(ipv4("01.2.3.4"), None);
        assert_eq!(ipv4("1.2.3"), None);
        assert!(ipv4_is_global(Ipv4Addr::new(8, 8, 8, 8)));
        assert!(ipv4_is_global(Ipv4Addr::new(224, 0, 0, 1)));
        assert!(!ipv4_is_global(Ipv4Addr::new(192, 0, 0, 7)));
        assert!(ipv4_is_global(Ipv4Addr::new(192, 0, 0, 8)));
        assert!(!ipv4_is_global(Ipv4Addr::new(100, 127, 255, 255)));
        assert!(ipv4_is_global(Ipv4Addr::new(100, 128, 0, 0)));
    }

    #[test]
    fn ipv6_ranges() {
        let g = |s: &str| ipv6_is_global(s.parse().expect("address"));
        assert!(g("2606:4700:4700::1111"));
        assert!(!g("2001:db8::1"));
        assert!(!g("2001:1ff::1"));
        assert!(g("2001:200::1"));
        assert!(!g("fd12:3456::1"));
        assert!(!g("::ffff:1.2.3.4"));
    }
}
