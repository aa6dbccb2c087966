//! The pairs files of the buckets phase, read by the clusters phase:
//! `<section>-<range>.pairs`, a 64-byte header
//! (`"TMPAIRS1"`, version u32, section u32, range u32, ranges u32, the SHA-256 of the
//! signature listing, the kind byte), then pairs of little-endian u64 global numbers
//! (keeper candidate, other).

use pipeline::{Error, Result};

use crate::Kind;

const PAIRS_MAGIC: &[u8; 8] = b"TMPAIRS1";
/// Bytes of the header of a pairs file.
pub const PAIRS_HEADER: usize = 64;

/// What the header of a pairs file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairsHeader {
    pub section: usize,
    pub range: usize,
    pub ranges: usize,
    /// SHA-256 (hex) of the signature listing the pairs were merged from.
    pub files_hash: String,
}

/// The header bytes of a pairs file.
pub fn encode_header(
    section: usize,
    range: usize,
    ranges: usize,
    files_hash: &str,
    kind: Kind,
) -> Vec<u8> {
    let mut header = Vec::with_capacity(PAIRS_HEADER);
    header.extend_from_slice(PAIRS_MAGIC);
    for v in [1u32, section as u32, range as u32, ranges as u32] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    header.extend_from_slice(&hex32(files_hash));
    header.push(kind as u8);
    header.resize(PAIRS_HEADER, 0);
    header
}

/// The name of a unit: `<section>-<range>`, zero-padded.
pub fn unit_name(section: usize, range: usize) -> String {
    format!("{section:03}-{range:03}")
}

/// The section and range a unit name stands for.
pub fn parse_unit_name(name: &str) -> Result<(usize, usize)> {
    name.split_once('-')
        .and_then(|(s, r)| Some((s.parse().ok()?, r.parse().ok()?)))
        .ok_or_else(|| Error::Usage(format!("{name:?} is not a bucket unit name")))
}

fn hex32(hex: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = hex
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
    }
    out
}

/// Reads the header of a pairs file (`bytes`: the whole file, or its first
/// [`PAIRS_HEADER`] bytes).
pub fn read_pairs_header(bytes: &[u8], url: &str) -> Result<PairsHeader> {
    let bad = |m: &str| Error::Input {
        url: url.to_string(),
        message: format!("not a pairs file: {m}"),
    };
    if bytes.len() < PAIRS_HEADER || &bytes[..8] != PAIRS_MAGIC {
        return Err(bad("no magic"));
    }
    if !(bytes.len() - PAIRS_HEADER).is_multiple_of(16) {
        return Err(bad("length is not a whole number of pairs"));
    }
    let u = |o: usize| {
        u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
    };
    Ok(PairsHeader {
        section: u(12),
        range: u(16),
        ranges: u(20),
        files_hash: bytes[24..56].iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// The pairs of a pairs file (after the header).
pub fn pairs(bytes: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    bytes[PAIRS_HEADER.min(bytes.len())..]
        .chunks_exact(16)
        .map(|c| {
            let (a, b) = c.split_at(8);
            (
                u64::from_le_bytes(a.try_into().unwrap_or_default()),
                u64::from_le_bytes(b.try_into().unwrap_or_default()),
            )
        })
}
