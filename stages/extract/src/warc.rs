//! A WARC 1.0/1.1 record reader that keeps going through damage.
//!
//! We read WARC ourselves rather than through a crate: the robustness cases (a gzip
//! member cut short in the middle of a file, a Content-Length that lies, garbage
//! between records, a 50 MiB record) need resynchronising on the next `WARC/1.x` line
//! and a cap on what is held in memory, and the crates we looked at (`warc` 0.4) stop
//! at the first error. Each record comes out as a [`Item::Record`]; whatever cannot
//! become one is an [`Item::Skip`] with a named reason, counted by the caller.

use std::io::{self, Read};

use crate::gz::Gap;

const CHUNK: usize = 256 << 10;
/// Longest WARC header block we accept.
const MAX_HEADER: usize = 64 << 10;
/// Bytes kept back while streaming past a block, to see a record header whole.
const LOOK: usize = 256;

/// One WARC record: the header fields we use and the block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub warc_type: String,
    pub record_id: String,
    pub date: String,
    pub target_uri: String,
    pub content_type: String,
    /// The block (`Content-Length` bytes).
    pub block: Vec<u8>,
    /// Decompressed offset of the record's first byte.
    pub offset: u64,
}

/// What the reader found next.
#[derive(Debug)]
pub enum Item {
    Record(Record),
    /// Input that could not become a record (or a record too large to hold), with the
    /// drop reason and a detail for the log. `record`: whether it stands for a record
    /// (its header was found: a dropped record) or for bytes that hold none that could be
    /// read (garbage between records, damage between them: skipped bytes).
    Skip {
        reason: &'static str,
        detail: String,
        record: bool,
    },
}

/// What a reader has read so far, in decompressed bytes and records. Every byte read
/// is in [`WarcReader::consumed`] once the input is done, and each consumed byte is in
/// exactly one place: the item it was read with, [`Tally::skipped_bytes`] (bytes that
/// are no record, reported as a skip that is not a record) or [`Tally::dropped_bytes`]
/// (bytes skipped after a record already reported as dropped: the rest of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Decompressed bytes read from the input.
    pub read: u64,
    /// Bytes that belong to no record: garbage between records, trailing padding.
    pub skipped_bytes: u64,
    /// Bytes passed over after a record reported as dropped (its rest), and bytes
    /// buffered before a stretch of damage that could not be parsed.
    pub dropped_bytes: u64,
    /// Record headers found inside bytes that were skipped or streamed past (a record
    /// whose length ran over them): each a record lost, reported nowhere else.
    pub skipped_records: u64,
}

/// Reads records from a decompressed WARC stream (which may report gzip gaps).
#[derive(Debug)]
pub struct WarcReader<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Decompressed offset of `buf[0]`.
    base: u64,
    eof: bool,
    /// A gap arrived while filling: what is buffered is all there is before it. The
    /// next fill drops the unparsed rest (part of the damaged stretch) and reads on.
    gap_pending: bool,
    max_block: usize,
    /// Set once an unrecoverable decoder error has been reported.
    failed: bool,
    /// The bytes up to the next record belong to a record already reported as bad:
    /// skipping them is not counted again.
    quiet_junk: bool,
    /// Damage met while looking past a record's end, reported as the next item.
    pending_damage: Option<Damage>,
    tally: Tally,
}

/// What filling the buffer found.
enum Fill {
    More,
    End,
    Damage(Damage),
}

/// Damage in the compressed stream.
#[derive(Debug)]
struct Damage {
    detail: String,
    /// The stream ends with it (cut short, or a decoder error nothing follows).
    ends: bool,
}

impl<R: Read> WarcReader<R> {
    /// Reads records whose blocks are at most `max_block` bytes; larger ones are skipped
    /// as `oversized_record` without being held in memory.
    pub fn new(inner: R, max_block: usize) -> Self {
        WarcReader {
            inner,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            gap_pending: false,
            max_block,
            failed: false,
            quiet_junk: false,
            pending_damage: None,
            tally: Tally::default(),
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Decompressed bytes passed so far: the items read, and what was skipped.
    pub fn consumed(&self) -> u64 {
        self.offset()
    }

    /// The counters so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// Counts `bytes[from..to]` of the buffer as passed over: record headers found in
    /// them are lost records.
    fn pass_over(&mut self, from: usize, to: usize, dropped: bool) {
        if to <= from {
            return;
        }
        let n = (to - from) as u64;
        if dropped {
            self.tally.dropped_bytes += n;
        } else {
            self.tally.skipped_bytes += n;
        }
        let before = from.saturating_sub(1);
        self.tally.skipped_records += record_starts(&self.buf[before..to], to - before);
    }

    /// Appends input to the buffer. Storage failures are returned as errors; data
    /// damage (a gzip gap, a zstd error) is reported as [`Fill::Damage`].
    fn fill(&mut self) -> io::Result<Fill> {
        if self.gap_pending {
            self.gap_pending = false;
            self.pass_over(self.pos, self.end, true);
            self.base += self.end as u64;
            self.pos = 0;
            self.end = 0;
            self.quiet_junk = true;
        }
        if self.eof || self.failed {
            return Ok(Fill::End);
        }
        if self.pos > 0 && (self.pos == self.end || self.end + CHUNK > self.buf.len()) {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.base += self.pos as u64;
            self.pos = 0;
        }
        if self.buf.len() - self.end < CHUNK {
            self.buf.resize(self.end + CHUNK, 0);
        }
        match crate::gz::read_some(&mut self.inner, &mut self.buf[self.end..]) {
            Ok(0) => {
                self.eof = true;
                Ok(Fill::End)
            }
            Ok(n) => {
                self.tally.read += n as u64;
                self.end += n;
                Ok(Fill::More)
            }
            Err(e) => {
                if let Some(gap) = Gap::from_io(&e) {
                    self.gap_pending = true;
                    return Ok(Fill::Damage(Damage {
                        detail: gap.to_string(),
                        ends: gap.at_end,
                    }));
                }
                if pipeline::Error::from_io(&e).is_some() {
                    return Err(e);
                }
                // Any other decoder error ends the stream; an early end of its input
                // is a stream cut short.
                self.failed = true;
                Ok(Fill::Damage(Damage {
                    detail: format!("decompression failed: {e}"),
                    ends: e.kind() == io::ErrorKind::UnexpectedEof,
                }))
            }
        }
    }

    /// The record being read (or the bytes being skipped) ran into damage: it is
    /// counted, and parsing goes on after its first byte, within what was read before
    /// the damage (complete records there are still recovered). Damage that ends the
    /// input (a stream cut short) is `truncated_compression`: what it took is one
    /// dropped record; other damage is `corrupt_compression`, a record when `record`
    /// (its header was read).
    fn damaged(&mut self, damage: Damage, record: bool) -> Item {
        if self.pos < self.end {
            self.pos += 1;
        }
        self.quiet_junk = true;
        let Damage { detail, ends } = damage;
        Item::Skip {
            reason: if ends {
                "truncated_compression"
            } else {
                "corrupt_compression"
            },
            detail,
            record: record || ends,
        }
    }

    /// The next record or skip; `None` at the end of the input.
    pub fn next_item(&mut self) -> io::Result<Option<Item>> {
        if let Some(damage) = self.pending_damage.take() {
            // Found while looking past the end of the record before.
            return Ok(Some(self.damaged(damage, false)));
        }
        // Find the start of a record: a line beginning with "WARC/". Bytes passed over
        // that are not whitespace are junk: garbage of their own, or (quiet) the rest
        // of a record already reported.
        let mut junk = 0usize;
        loop {
            let hay = &self.buf[self.pos..self.end];
            let lead = hay
                .iter()
                .position(|b| !matches!(b, b'\r' | b'\n' | b' ' | b'\t' | 0))
                .unwrap_or(hay.len());
            if lead > 0 {
                self.pos += lead;
                continue;
            }
            if hay.len() >= 5 && hay.starts_with(b"WARC/") {
                break;
            }
            if hay.len() >= 5 || (self.eof && !hay.is_empty()) {
                // Junk: skip to the next line that starts a record.
                let from = self.pos;
                match memchr::memmem::find(&hay[1..], b"\nWARC/") {
                    Some(i) => self.pos += i + 2,
                    None => self.pos = self.end.saturating_sub(5).max(self.pos + 1),
                }
                junk += self.pos - from;
                self.count_junk(from, self.pos);
                if self.pos < self.end {
                    continue;
                }
            }
            match self.fill()? {
                Fill::More => {}
                Fill::End => {
                    self.pos = self.end;
                    let report = junk > 0 && !std::mem::take(&mut self.quiet_junk);
                    return Ok(report.then(|| self.garbage()));
                }
                Fill::Damage(damage) => {
                    self.pos = self.end;
                    // Skipping the rest of a record already counted: the damage is
                    // part of that loss. Otherwise the damaged member held a record
                    // or junk of its own.
                    if !self.quiet_junk || damage.ends {
                        return Ok(Some(self.damaged(damage, false)));
                    }
                }
            }
        }
        if junk > 0 && !std::mem::take(&mut self.quiet_junk) {
            return Ok(Some(self.garbage()));
        }

        self.quiet_junk = false;
        // The header block, up to the first blank line (LF or CRLF: a WARC/0.x header
        // with LF line ends is followed by an HTTP head with CRLF ones).
        let header_len = loop {
            let hay = &self.buf[self.pos..self.end];
            let crlf = memchr::memmem::find(hay, b"\r\n\r\n").map(|i| i + 4);
            let lf = memchr::memmem::find(hay, b"\n\n").map(|i| i + 2);
            if let Some(len) = match (crlf, lf) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            } {
                break len;
            }
            if hay.len() > MAX_HEADER {
                return Ok(Some(self.bad_header(format!(
                    "WARC header over {MAX_HEADER} bytes at offset {}",
                    self.offset()
                ))));
            }
            match self.fill()? {
                Fill::More => {}
                Fill::End => {
                    let offset = self.offset();
                    self.pos = self.end;
                    return Ok(Some(Item::Skip {
                        reason: "truncated_record",
                        detail: format!("input ends inside the WARC header at offset {offset}"),
                        record: true,
                    }));
                }
                Fill::Damage(damage) => return Ok(Some(self.damaged(damage, true))),
            }
        };
        if header_len > MAX_HEADER {
            return Ok(Some(self.bad_header(format!(
                "WARC header of {header_len} bytes at offset {}, over {MAX_HEADER}",
                self.offset()
            ))));
        }
        let start = self.pos;
        let offset = self.offset();
        let mut record = Record {
            offset,
            ..Default::default()
        };
        let mut length: Option<usize> = None;
        let header = String::from_utf8_lossy(&self.buf[start..start + header_len]).into_owned();
        for line in header.lines().skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "warc-type" => record.warc_type = value.to_ascii_lowercase(),
                "warc-record-id" => record.record_id = value.to_string(),
                "warc-date" => record.date = value.to_string(),
                "warc-target-uri" => {
                    record.target_uri = value.trim_matches(['<', '>']).to_string();
                }
                "content-type" => record.content_type = value.to_string(),
                "content-length" => length = value.parse().ok(),
                _ => {}
            }
        }
        let Some(length) = length else {
            return Ok(Some(self.bad_header(format!(
                "WARC header without a valid Content-Length at offset {offset}"
            ))));
        };

        if length > self.max_block {
            // A length over the cap may be a wrong one (a short record that says it
            // holds gigabytes): when the next record starts within the cap, this one
            // ends there, and the records after it are not skipped with it.
            if let Some(item) = self.resync(start, header_len, &mut record)? {
                return Ok(Some(item));
            }
            let from = self.pos + header_len;
            return self.skip_block(from, length, record);
        }

        // The block and the two CRLFs that end a record.
        let need = header_len + length;
        let mut damage = None;
        while self.end - self.pos < need + 4 {
            match self.fill()? {
                Fill::More => {}
                Fill::End => break,
                Fill::Damage(d) => {
                    damage = Some(d);
                    break;
                }
            }
        }
        if let Some(d) = damage {
            if self.end - self.pos < need {
                // Damage inside the block. A wrong length may still end at a next
                // record within what was read.
                if let Some(item) = self.resync(self.pos, header_len, &mut record)? {
                    self.pending_damage = Some(d);
                    return Ok(Some(item));
                }
                return Ok(Some(self.damaged(d, true)));
            }
            // The record is whole; the damage belongs to what follows it.
            self.pending_damage = Some(d);
        }
        // A record ended by one line end: a few more bytes show whether the next
        // record starts there. Damage after them belongs to what follows this record.
        let gap_ahead = self.buf[self.pos + need.min(self.end - self.pos)..self.end]
            .iter()
            .take(4)
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        if self.end - self.pos >= need
            && (1..4).contains(&gap_ahead)
            && !self.buf[self.pos + need..self.end].starts_with(b"\r\n\r\n")
        {
            while self.end - self.pos < need + 9 && self.pending_damage.is_none() {
                match self.fill()? {
                    Fill::More => {}
                    Fill::End => break,
                    Fill::Damage(d) => self.pending_damage = Some(d),
                }
            }
        }
        let start = self.pos;
        let have = self.end - start;
        if have < need {
            // A length past the end of the input may still be a wrong length: the
            // record may end at a next record, or (pre-1.0) at the end of the input.
            if let Some(item) = self.resync(start, header_len, &mut record)? {
                return Ok(Some(item));
            }
            self.pos += 1;
            self.quiet_junk = true;
            return Ok(Some(Item::Skip {
                reason: "truncated_record",
                detail: format!(
                    "record at offset {offset} ({}) declares {length} bytes, the input ends first",
                    record.record_id
                ),
                record: true,
            }));
        }
        let tail = &self.buf[start + need..self.end.min(start + need + 4)];
        // Older writers end a record with one line end instead of two CRLFs: that
        // is well ended too when the next record (or the input's end) follows.
        let after = &self.buf[start + need..self.end.min(start + need + 9)];
        let gap = tail
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        let well_ended = tail == b"\r\n\r\n"
            || (self.eof && b"\r\n\r\n".starts_with(tail))
            || tail.starts_with(b"\n\n")
            || (gap > 0
                && (after[gap..].starts_with(b"WARC/") || (self.eof && gap == after.len())));
        if !well_ended {
            // The declared length does not end where the record does: the record ends
            // where the next one starts, if one is found within the cap and what lies
            // between is a whole HTTP message; otherwise it is dropped and the search
            // for the next record starts after its header.
            if let Some(item) = self.resync(start, header_len, &mut record)? {
                return Ok(Some(item));
            }
            self.pos += header_len;
            self.quiet_junk = true;
            return Ok(Some(Item::Skip {
                reason: "bad_content_length",
                detail: format!(
                    "record at offset {offset} ({}) does not end after its Content-Length of {length}",
                    record.record_id
                ),
                record: true,
            }));
        }
        record.block = self.buf[start + header_len..start + need].to_vec();
        // The line ends that close the record are its own.
        self.pos = start + need + gap;
        Ok(Some(Item::Record(record)))
    }

    /// A skip for the junk just passed over (not a record).
    fn garbage(&self) -> Item {
        Item::Skip {
            reason: "garbage_between_records",
            detail: format!(
                "bytes that are not a WARC record before offset {}",
                self.offset()
            ),
            record: false,
        }
    }

    /// Junk `buf[from..to]` passed over while looking for a record: the rest of one
    /// already reported (quiet), or garbage of its own.
    fn count_junk(&mut self, from: usize, to: usize) {
        let quiet = self.quiet_junk;
        self.pass_over(from, to, quiet);
    }

    /// A header that cannot be read: the record is dropped, and the search for the next
    /// one starts inside it (a record start within is not skipped).
    fn bad_header(&mut self, detail: String) -> Item {
        self.pos += 1;
        self.quiet_junk = true;
        Item::Skip {
            reason: "bad_warc_header",
            detail,
            record: true,
        }
    }

    /// Resynchronises a record whose Content-Length is wrong: its block runs up to the
    /// next line that starts a WARC header (or, for a pre-1.0 record, to the end of
    /// the input). The record is kept when that block is a whole HTTP message (a
    /// status line and the blank line after the headers) or the record is not a
    /// response, and dropped as `bad_content_length` otherwise, reading on at the next
    /// record; `None` when no such end is found within the cap (the caller decides). The buffer may grow and move: the record starts at `self.pos`,
    /// which is `start` on entry.
    fn resync(
        &mut self,
        start: usize,
        header_len: usize,
        record: &mut Record,
    ) -> io::Result<Option<Item>> {
        debug_assert_eq!(start, self.pos);
        let mut searched = header_len;
        let next = loop {
            let from = self.pos + searched.saturating_sub(1);
            if let Some(at) = next_record_start(&self.buf[from..self.end]) {
                break Some(self.pos + searched.saturating_sub(1) + at);
            }
            // Keep a few bytes back: the marker may straddle the fill.
            searched = (self.end - self.pos)
                .saturating_sub(MAX_HEADER)
                .max(searched);
            if self.end - self.pos > header_len + self.max_block + MAX_HEADER {
                return Ok(None);
            }
            if self.gap_pending {
                // Damage follows what is buffered: the record cannot run past it.
                break None;
            }
            match self.fill()? {
                Fill::More => {}
                Fill::End => break None,
                Fill::Damage(_) => return Ok(None),
            }
        };
        let start = self.pos;
        let block_end = match next {
            Some(at) => at,
            None if self.eof && lenient_version(&self.buf[start..start + header_len]) => self.end,
            None => return Ok(None),
        };
        let mut block = &self.buf[start + header_len..block_end];
        while let [rest @ .., b'\r' | b'\n'] = block {
            block = rest;
        }
        if block.len() > self.max_block
            || (record.warc_type == "response" && !whole_http_message(block))
        {
            if next.is_none() {
                return Ok(None);
            }
            // Not a page, but the next record is found: reading goes on from there.
            self.pos = block_end;
            self.quiet_junk = false;
            return Ok(Some(Item::Skip {
                reason: "bad_content_length",
                detail: format!(
                    "record at offset {} ({}) does not end after its Content-Length",
                    record.offset, record.record_id
                ),
                record: true,
            }));
        }
        record.block = block.to_vec();
        self.pos = block_end;
        Ok(Some(Item::Record(std::mem::take(record))))
    }

    /// Streams past a block too large to hold; the record is reported as oversized
    /// (or by its type when it would not have been a document anyway).
    fn skip_block(
        &mut self,
        from: usize,
        length: usize,
        record: Record,
    ) -> io::Result<Option<Item>> {
        self.pos = from;
        let mut left = length;
        while left > 0 {
            // A line's worth is kept back until the input ends, so that a record header
            // across two reads is seen whole: the records the block runs over are lost.
            let avail = self.end - self.pos;
            let usable = if self.eof {
                avail
            } else {
                avail.saturating_sub(LOOK)
            };
            if usable == 0 {
                match self.fill()? {
                    Fill::More => continue,
                    // What was kept back is there to stream past.
                    Fill::End if self.end > self.pos => continue,
                    Fill::End => {
                        return Ok(Some(Item::Skip {
                            reason: "truncated_record",
                            detail: format!(
                                "record at offset {} declares {length} bytes, the input ends first",
                                record.offset
                            ),
                            record: true,
                        }));
                    }
                    Fill::Damage(damage) => return Ok(Some(self.damaged(damage, true))),
                }
            }
            let take = usable.min(left);
            let before = self.pos.saturating_sub(1);
            let window = &self.buf[before..self.end.min(self.pos + take + LOOK)];
            self.tally.skipped_records += record_starts(window, self.pos + take - before);
            self.pos += take;
            left -= take;
        }
        let reason = if record.warc_type == "response" {
            "oversized_record"
        } else {
            type_reason(&record.warc_type)
        };
        Ok(Some(Item::Skip {
            reason,
            detail: format!(
                "record at offset {} ({}) holds {length} bytes, over the cap of {}",
                record.offset, record.record_id, self.max_block
            ),
            record: true,
        }))
    }
}

/// Whether a WARC header block's version line is older than 1.0 (WARC/0.17, 0.18:
/// ClueWeb09 and other crawls of that time, whose lengths are often wrong).
fn lenient_version(header: &[u8]) -> bool {
    header.starts_with(b"WARC/0.")
}

/// Where the next WARC header starts in `hay` (the index of its `W`): a line
/// `WARC/<digits>.<digits>` followed by a header line naming a WARC field, so that
/// "WARC/1.0" in a page's text does not count. `hay` starts just before a line start.
fn next_record_start(hay: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = memchr::memmem::find(&hay[from..], b"\nWARC/") {
        let at = from + i + 1;
        from = at;
        let line_end = match memchr::memchr(b'\n', &hay[at..]) {
            Some(n) => at + n,
            None => return None,
        };
        let version = hay[at + 5..line_end]
            .strip_suffix(b"\r")
            .unwrap_or(&hay[at + 5..line_end]);
        let valid = version.split(|&b| b == b'.').count() == 2
            && version.iter().all(|b| b.is_ascii_digit() || *b == b'.')
            && !version.starts_with(b".")
            && !version.ends_with(b".");
        let next_line = &hay[line_end + 1..hay.len().min(line_end + 1 + 16)];
        if valid && next_line.len() >= 5 && next_line[..5].eq_ignore_ascii_case(b"WARC-") {
            return Some(at);
        }
        if valid && next_line.len() < 5 && line_end + 1 + next_line.len() == hay.len() {
            // The next line is not buffered yet.
            return None;
        }
    }
    None
}

/// How many record headers start in `hay[..limit]` (`hay` starts just before a line
/// start; a header whose next line is not in `hay` is not counted).
fn record_starts(hay: &[u8], limit: usize) -> u64 {
    let mut n = 0;
    let mut from = 0;
    while let Some(at) = next_record_start(&hay[from..]) {
        if from + at >= limit {
            break;
        }
        n += 1;
        from += at;
    }
    n
}

/// Whether a response block holds a status line and the end of the HTTP headers.
fn whole_http_message(block: &[u8]) -> bool {
    block.starts_with(b"HTTP/")
        && (memchr::memmem::find(block, b"\r\n\r\n").is_some()
            || memchr::memmem::find(block, b"\n\n").is_some())
}

/// The drop reason of a record that is not a response.
pub fn type_reason(warc_type: &str) -> &'static str {
    match warc_type {
        "warcinfo" => "warc_warcinfo",
        "request" => "warc_request",
        "metadata" => "warc_metadata",
        "revisit" => "warc_revisit",
        "resource" => "warc_resource",
        "conversion" => "warc_conversion",
        "continuation" => "warc_continuation",
        _ => "warc_unknown_type",
    }
}

impl<R: Read> Iterator for WarcReader<R> {
    type Item = io::Result<Item>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_item().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, body: &str) -> String {
        format!(
            "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <{id}>\r\nContent-Length: {}\r\n\r\n{body}\r\n\r\n",
            body.len()
        )
    }

    fn items(input: &[u8]) -> Vec<String> {
        WarcReader::new(input, 1 << 20)
            .map(|i| match i.expect("read") {
                Item::Record(r) => format!("{}:{}", r.record_id, String::from_utf8_lossy(&r.block)),
                Item::Skip { reason, .. } => reason.to_string(),
            })
            .collect()
    }

    #[test]
    fn plain_records() {
        let input = format!(
            "{}{}",
            rec("a", "x"),
            rec("b", "hello\r\n\r\nWARC/1.0 inside")
        );
        assert_eq!(
            items(input.as_bytes()),
            vec!["<a>:x", "<b>:hello\r\n\r\nWARC/1.0 inside"]
        );
    }

    #[test]
    fn garbage_between_records() {
        let input = format!("{}some junk\nmore junk\n{}", rec("a", "x"), rec("b", "y"));
        assert_eq!(
            items(input.as_bytes()),
            vec!["<a>:x", "garbage_between_records", "<b>:y"]
        );
    }

    #[test]
    fn wrong_content_length() {
        let short = rec("a", "0123456789").replace("Content-Length: 10", "Content-Length: 4");
        let long = rec("b", "0123456789").replace("Content-Length: 10", "Content-Length: 60");
        let input = format!("{short}{}{long}{}", rec("c", "c"), rec("d", "d"));
        assert_eq!(
            items(input.as_bytes()),
            vec!["bad_content_length", "<c>:c", "bad_content_length", "<d>:d"]
        );
    }

    #[test]
    fn zero_length_and_truncated() {
        let input = format!("{}{}", rec("z", ""), &rec("t", "0123456789")[..60]);
        assert_eq!(items(input.as_bytes()), vec!["<z>:", "truncated_record"]);
    }

    /// A WARC/0.18 record with LF line ends, a single LF after the block, and the
    /// given Content-Length.
    fn old_rec(id: &str, body: &str, length: usize) -> String {
        format!(
            "WARC/0.18\nWARC-Type: response\nWARC-Record-ID: <{id}>\nContent-Length: {length}\n\n{body}\n"
        )
    }

    #[test]
    fn old_dialect_lengths_are_resynchronised() {
        let page = "HTTP/1.1 200 OK\nContent-Type: text/html\n\n<p>caf\u{e9} \u{5ddd}</p>";
        let exact = old_rec("a", page, page.len());
        // Counts a CR per line that is not there: runs into the next record.
        let long = old_rec("b", page, page.len() + 3);
        // Counts characters, not bytes: ends inside the page.
        let short = old_rec("c", page, page.chars().count());
        // A head that never ends is not a whole HTTP message.
        let cut = old_rec("d", "HTTP/1.1 200 OK\nX-Cut: a", 40);
        // The last record's length runs past the end of the input.
        let last = old_rec("e", page, page.len() + 3);
        let input = format!("{exact}{long}{short}{cut}{last}");
        let want = ["<a>", "<b>", "<c>"]
            .iter()
            .map(|id| format!("{id}:{page}"))
            .chain(["bad_content_length".to_string(), format!("<e>:{page}")])
            .collect::<Vec<_>>();
        assert_eq!(items(input.as_bytes()), want);
    }

    #[test]
    fn a_wrong_length_around_a_whole_http_message_is_resynchronised() {
        let page = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>x</p>";
        let short = rec("a", page).replace(
            &format!("Content-Length: {}", page.len()),
            "Content-Length: 20",
        );
        let long = rec("b", page).replace(
            &format!("Content-Length: {}", page.len()),
            &format!("Content-Length: {}", page.len() + 30),
        );
        // A page quoting a WARC version line: not a record start.
        let quoting = "HTTP/1.1 200 OK\r\n\r\nsee\nWARC/1.0\nin the spec";
        let quoting_short = rec("q", quoting).replace(
            &format!("Content-Length: {}", quoting.len()),
            "Content-Length: 10",
        );
        let input = format!("{short}{long}{quoting_short}{}", rec("c", "c"));
        assert_eq!(
            items(input.as_bytes()),
            vec![
                format!("<a>:{page}"),
                format!("<b>:{page}"),
                format!("<q>:{quoting}"),
                "<c>:c".to_string()
            ]
        );
        // At the end of a WARC/1.0 input a long length is a truncated record.
        let input = format!("{}{long}", rec("c", "c"));
        assert_eq!(items(input.as_bytes()), vec!["<c>:c", "truncated_record"]);
    }

    /// Every byte of `input` lands in exactly one place, item by item.
    fn balanced(input: &[u8], max_block: usize) -> (Vec<String>, Tally) {
        let mut r = WarcReader::new(input, max_block);
        let mut spans = 0u64;
        let mut out = Vec::new();
        loop {
            let (before, tally) = (r.consumed(), r.tally());
            let item = r.next_item().expect("read");
            let after = r.tally();
            spans += r.consumed()
                - before
                - (after.skipped_bytes - tally.skipped_bytes)
                - (after.dropped_bytes - tally.dropped_bytes);
            match item {
                None => break,
                Some(Item::Record(rec)) => out.push(rec.record_id),
                Some(Item::Skip { reason, .. }) => out.push(reason.to_string()),
            }
        }
        let t = r.tally();
        assert_eq!(t.read, input.len() as u64);
        assert_eq!(r.consumed(), t.read);
        assert_eq!(spans + t.skipped_bytes + t.dropped_bytes, t.read);
        (out, t)
    }

    #[test]
    fn bytes_add_up_through_damage() {
        let short = rec("a", "0123456789").replace("Content-Length: 10", "Content-Length: 4");
        let input = format!(
            "{short}{}junk here\n{}{}",
            rec("b", "x"),
            rec("c", "y"),
            &rec("t", "0123456789")[..60]
        );
        let (items, tally) = balanced(input.as_bytes(), 1 << 20);
        assert_eq!(
            items,
            vec![
                "bad_content_length",
                "<b>",
                "garbage_between_records",
                "<c>",
                "truncated_record"
            ]
        );
        assert_eq!(tally.skipped_bytes, "junk here\n".len() as u64);
    }

    /// A WARC/0.18 header (LF) before an HTTP head (CRLF): the header ends at its own
    /// blank line, not at the HTTP head's, nor at a CRLF blank line far ahead.
    #[test]
    fn an_lf_header_ends_at_its_first_blank_line() {
        let page = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>x</p>";
        let input = format!(
            "{}{}",
            old_rec("a", page, page.len()),
            old_rec("b", page, page.len())
        );
        let got = items(input.as_bytes());
        assert_eq!(got, vec![format!("<a>:{page}"), format!("<b>:{page}")]);
    }

    /// A length over the cap that runs over records past where a resync looks (past
    /// what is buffered, and further than the cap and a header's worth): the block is
    /// streamed past, and the records inside are counted as lost. (Nearer, the record
    /// would end at the next one.)
    #[test]
    fn records_inside_a_streamed_block_are_counted() {
        let inner: String = (0..3).map(|i| rec(&format!("in{i}"), "z")).collect();
        let big = format!("{}\r\n\r\n{inner}", "x".repeat(600_000));
        let over = rec("big", &big).replace(
            &format!("Content-Length: {}", big.len()),
            &format!("Content-Length: {}", big.len() + 2_000),
        );
        let tail = "y".repeat(2_000 - 4);
        let input = format!("{over}{tail}\r\n\r\n{}", rec("after", "w"));
        let (items, tally) = balanced(input.as_bytes(), 1024);
        assert_eq!(items.first().map(String::as_str), Some("oversized_record"));
        assert_eq!(tally.skipped_records, 3, "{items:?}");
    }

    #[test]
    fn oversized_blocks_are_streamed_past() {
        let big = "x".repeat(3 << 20);
        let input = format!("{}{}", rec("big", &big), rec("b", "y"));
        assert_eq!(items(input.as_bytes()), vec!["oversized_record", "<b>:y"]);
    }
}
