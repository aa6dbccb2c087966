//! Gzip that survives damage: members are decoded one after another, and a member that
//! is truncated, corrupt or fails its CRC does not end the stream. The reader reports
//! the damage once (an [`io::Error`] holding a [`Gap`]) and carries on at the next
//! member header it finds. Common Crawl writes one member per WARC record, so one bad
//! member costs one record.
//!
//! flate2's `MultiGzDecoder` stops at the first bad member; that is why this exists. The
//! compressed bytes of the current member stay buffered (up to [`RETAIN`]) so that a
//! resync can look for the next header inside bytes the inflater already swallowed.

use std::io::{self, Read};

use flate2::{Decompress, FlushDecompress, Status};

/// Compressed bytes of one member kept for a resync; past this (a single-member file)
/// a resync searches from the current position instead.
pub const RETAIN: usize = 16 << 20;

const CHUNK: usize = 256 << 10;

/// `read`, retried while it is interrupted.
pub(crate) fn read_some(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}
/// How the detail of a gap at the end of the input begins.
const INPUT_ENDS: &str = "input ends";
const MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// The damage a [`GzMembers`] stepped over, carried inside the `io::Error` it returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// What went wrong.
    pub detail: String,
    /// Compressed offset where the damaged member started.
    pub offset: u64,
    /// The input ended inside the member: nothing follows the damage.
    pub at_end: bool,
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gzip damage at byte {}: {}", self.offset, self.detail)
    }
}

impl std::error::Error for Gap {}

impl Gap {
    /// The gap inside an error returned by [`GzMembers::read`], if it is one.
    pub fn from_io(err: &io::Error) -> Option<&Gap> {
        err.get_ref().and_then(|e| e.downcast_ref::<Gap>())
    }
}

#[derive(Debug)]
enum State {
    Header,
    Body,
    Trailer,
}

/// Decodes concatenated gzip members, skipping damaged ones.
#[derive(Debug)]
pub struct GzMembers<R> {
    inner: R,
    buf: Vec<u8>,
    /// Unread compressed bytes are `buf[pos..end]`.
    pos: usize,
    end: usize,
    /// Where in `buf` the current member began, while it is retained.
    member: Option<usize>,
    /// Compressed offset of `buf[0]`.
    base: u64,
    /// Compressed offset where the current member began.
    member_offset: u64,
    eof: bool,
    state: State,
    inflate: Decompress,
    crc: crc32fast::Hasher,
    size: u32,
    /// Members decoded whole.
    pub members: u64,
    /// A deflate error found by a read that also decoded bytes: those are returned
    /// first, and the gap is reported by the next read.
    pending: Option<String>,
}

impl<R: Read> GzMembers<R> {
    /// Wraps a compressed stream.
    pub fn new(inner: R) -> Self {
        GzMembers {
            inner,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            member: Some(0),
            base: 0,
            member_offset: 0,
            eof: false,
            state: State::Header,
            inflate: Decompress::new(false),
            crc: crc32fast::Hasher::new(),
            size: 0,
            members: 0,
            pending: None,
        }
    }

    /// Reads more compressed bytes; `false` at the end of the input.
    fn refill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let keep = match self.member {
            Some(m) if self.end - m <= RETAIN => m,
            _ => {
                self.member = None;
                self.pos
            }
        };
        if keep > 0 {
            self.buf.copy_within(keep..self.end, 0);
            self.end -= keep;
            self.pos -= keep;
            self.base += keep as u64;
            if let Some(m) = self.member.as_mut() {
                *m -= keep;
            }
        }
        if self.buf.len() - self.end < CHUNK {
            self.buf.resize(self.end + CHUNK, 0);
        }
        let n = read_some(&mut self.inner, &mut self.buf[self.end..])?;
        self.end += n;
        self.eof = n == 0;
        Ok(n > 0)
    }

    fn start_member(&mut self) {
        self.state = State::Header;
        self.member = Some(self.pos);
        self.member_offset = self.base + self.pos as u64;
        self.inflate.reset(false);
        self.crc = crc32fast::Hasher::new();
        self.size = 0;
    }

    /// Gives up on the current member: finds the next member header after its start and
    /// returns the error that reports the gap.
    fn gap(&mut self, detail: String) -> io::Result<io::Error> {
        // The input ending inside a member is the one damage nothing can follow.
        let at_end = self.eof && detail.starts_with(INPUT_ENDS);
        let offset = self.member_offset;
        let mut from = match self.member {
            Some(m) => m + 1,
            None => self.pos,
        };
        self.member = None;
        loop {
            let hay = &self.buf[from.min(self.end)..self.end];
            if let Some(i) = memchr::memmem::find(hay, &MAGIC) {
                self.pos = from + i;
                break;
            }
            // Keep the last two bytes: a header may straddle the refill.
            self.pos = self.end.saturating_sub(2).max(from.min(self.end));
            if !self.refill()? {
                self.pos = self.end;
                break;
            }
            from = self.pos;
        }
        self.start_member();
        Ok(io::Error::new(
            io::ErrorKind::InvalidData,
            Gap {
                detail,
                offset,
                at_end,
            },
        ))
    }

    /// Parses a member header at `pos`: `Ok(Some(len))`, `Ok(None)` when more bytes are
    /// needed, `Err` when the bytes are not a gzip header.
    fn header(&self) -> Result<Option<usize>, String> {
        let b = &self.buf[self.pos..self.end];
        if b.len() < 10 {
            return if MAGIC.starts_with(&b[..b.len().min(3)]) {
                Ok(None)
            } else {
                Err("not a gzip member header".into())
            };
        }
        if b[..3] != MAGIC {
            return Err("not a gzip member header".into());
        }
        let flags = b[3];
        if flags & 0xe0 != 0 {
            return Err(format!("reserved header flags set ({flags:#04x})"));
        }
        let mut at = 10;
        if flags & 0x04 != 0 {
            if b.len() < at + 2 {
                return Ok(None);
            }
            at += 2 + u16::from_le_bytes([b[at], b[at + 1]]) as usize;
        }
        for bit in [0x08, 0x10] {
            if flags & bit != 0 {
                match b.get(at..).and_then(|rest| memchr::memchr(0, rest)) {
                    Some(z) => at += z + 1,
                    None if b.len() - at.min(b.len()) > 1 << 16 => {
                        return Err("header name or comment over 64 KiB".into());
                    }
                    None => return Ok(None),
                }
            }
        }
        if flags & 0x02 != 0 {
            at += 2;
        }
        Ok((b.len() >= at).then_some(at))
    }
}

impl<R: Read> Read for GzMembers<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if let Some(detail) = self.pending.take() {
            return Err(self.gap(detail)?);
        }
        loop {
            match self.state {
                State::Header => {
                    if self.pos == self.end && !self.refill()? {
                        return Ok(0);
                    }
                    match self.header() {
                        Ok(Some(len)) => {
                            self.pos += len;
                            self.state = State::Body;
                        }
                        Ok(None) => {
                            if !self.refill()? {
                                return Err(
                                    self.gap(format!("{INPUT_ENDS} inside a member header"))?
                                );
                            }
                        }
                        Err(detail) => return Err(self.gap(detail)?),
                    }
                }
                State::Body => {
                    if self.pos == self.end && !self.refill()? {
                        return Err(self.gap(format!("{INPUT_ENDS} inside a member"))?);
                    }
                    let before_in = self.inflate.total_in();
                    let before_out = self.inflate.total_out();
                    let status = self.inflate.decompress(
                        &self.buf[self.pos..self.end],
                        out,
                        FlushDecompress::None,
                    );
                    let used = (self.inflate.total_in() - before_in) as usize;
                    let made = (self.inflate.total_out() - before_out) as usize;
                    self.pos += used;
                    self.crc.update(&out[..made]);
                    self.size = self.size.wrapping_add(made as u32);
                    match status {
                        Ok(Status::StreamEnd) => self.state = State::Trailer,
                        Ok(_) => {}
                        // What the inflater wrote before it found the damage is good
                        // data (one backend reports the error with it, another only on
                        // the call after): the caller gets it before the gap.
                        Err(e) if made > 0 => {
                            self.pending = Some(format!("deflate: {e}"));
                            return Ok(made);
                        }
                        Err(e) => return Err(self.gap(format!("deflate: {e}"))?),
                    }
                    if made > 0 {
                        return Ok(made);
                    }
                    if used == 0 && !matches!(self.state, State::Trailer) && !self.refill()? {
                        return Err(self.gap(format!("{INPUT_ENDS} inside a member"))?);
                    }
                }
                State::Trailer => {
                    if self.end - self.pos < 8 {
                        if !self.refill()? {
                            return Err(self.gap(format!("{INPUT_ENDS} inside a member trailer"))?);
                        }
                        continue;
                    }
                    let t = &self.buf[self.pos..self.pos + 8];
                    let crc = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
                    let size = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
                    let want = std::mem::replace(&mut self.crc, crc32fast::Hasher::new());
                    if crc != want.finalize() || size != self.size {
                        return Err(self.gap("CRC or length mismatch".into())?);
                    }
                    self.pos += 8;
                    self.members += 1;
                    self.start_member();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn member(data: &[u8]) -> Vec<u8> {
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(data).expect("gzip");
        w.finish().expect("gzip")
    }

    /// Reads everything, collecting text between gaps.
    fn pieces(input: &[u8]) -> (Vec<Vec<u8>>, usize) {
        let mut r = GzMembers::new(input);
        let mut out = vec![Vec::new()];
        let mut gaps = 0;
        let mut chunk = [0u8; 7];
        loop {
            match r.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out
                    .last_mut()
                    .expect("piece")
                    .extend_from_slice(&chunk[..n]),
                Err(e) => {
                    assert!(Gap::from_io(&e).is_some(), "{e}");
                    gaps += 1;
                    out.push(Vec::new());
                }
            }
        }
        (out, gaps)
    }

    #[test]
    fn members_concatenate() {
        let mut input = member(b"hello ");
        input.extend(member(b""));
        input.extend(member(b"world"));
        let (out, gaps) = pieces(&input);
        assert_eq!(gaps, 0);
        assert_eq!(out[0], b"hello world");
    }

    #[test]
    fn truncated_member_in_the_middle_is_skipped() {
        let a = member(b"first record");
        let b = member(&b"second record that is long enough ".repeat(50));
        let c = member(b"third record");
        let mut input = a.clone();
        input.extend_from_slice(&b[..b.len() / 2]);
        input.extend(&c);
        let (out, gaps) = pieces(&input);
        assert_eq!(gaps, 1);
        assert!(out[0].starts_with(b"first record"));
        assert_eq!(out.last().expect("piece"), b"third record");
    }

    #[test]
    fn garbage_and_bad_crc() {
        let mut input = b"junk".to_vec();
        input.extend(member(b"one"));
        let mut bad = member(b"two");
        let n = bad.len();
        bad[n - 8] ^= 0xff;
        input.extend(bad);
        input.extend(member(b"three"));
        let (out, gaps) = pieces(&input);
        assert_eq!(gaps, 2);
        assert_eq!(out[1], b"onetwo");
        assert_eq!(out[2], b"three");
    }

    #[test]
    fn bytes_decoded_before_damage_come_before_the_gap() {
        // A member of two stored deflate blocks whose second header is broken (LEN
        // and NLEN disagree): the first block's bytes are good data, and one read has
        // room for them and the damage, so the inflater finds both in one call.
        let first = b"good bytes before the damage ".repeat(20);
        let len = first.len() as u16;
        let mut input = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff, 0x00];
        input.extend(len.to_le_bytes());
        input.extend((!len).to_le_bytes());
        input.extend(&first);
        input.extend([0x01, 5, 0, 5, 0]);
        input.extend(b"lost!");
        input.extend(member(b"next member"));
        let mut r = GzMembers::new(&input[..]);
        let mut buf = vec![0u8; 1 << 16];
        let mut got = Vec::new();
        let gap = loop {
            match r.read(&mut buf) {
                Ok(0) => panic!("no gap reported"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        assert!(Gap::from_io(&gap).is_some(), "{gap}");
        assert_eq!(got, first);
        let n = r.read(&mut buf).expect("the next member");
        assert_eq!(&buf[..n], b"next member");
    }

    #[test]
    fn truncated_at_the_end() {
        let mut input = member(b"one");
        let two = member(b"two two two");
        input.extend_from_slice(&two[..two.len() - 3]);
        let (out, gaps) = pieces(&input);
        assert_eq!(gaps, 1);
        assert!(out[0].starts_with(b"one"));
    }
}
