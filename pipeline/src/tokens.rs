//! Token shards: Megatron-LM indexed datasets and the manifest that lists them, as the
//! tokenize stage writes them and the trainer reads them (from disk or S3, with ranged
//! reads: an index, then the documents it points at, never a whole `.bin`).
//!
//! `<name>.bin` holds the token ids of every document back
//! to back (little endian); `<name>.idx` says where each document starts and how long it
//! is. The layout is the one `megatron/core/datasets/indexed_dataset.py` reads (index
//! version 1, no sequence modes):
//!
//! ```text
//! magic            9 bytes   "MMIDIDX\0\0"
//! version          u64       1
//! dtype code       u8        8 = uint16, 4 = int32
//! sequence count   u64       n
//! document count   u64       n + 1 (the document index has a leading 0)
//! sequence lengths i32 × n   tokens per sequence
//! pointers         i64 × n   byte offset of each sequence in the .bin
//! document index   i64 × n+1 0, 1, …, n: here every document is one sequence
//! ```

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::{Location, Storage, Writer};

/// Magic bytes at the start of every `.idx`.
pub const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// The index version written and read.
pub const VERSION: u64 = 1;
const HEADER_BYTES: usize = 9 + 8 + 1 + 8 + 8;

/// The integer type of the ids in a `.bin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    U16,
    I32,
}

impl Dtype {
    /// Megatron's choice: uint16 while every id fits below 65,500, int32 above
    /// (`DType.optimal_dtype` in Megatron-LM).
    pub fn for_vocab(vocab_size: usize) -> Dtype {
        if vocab_size < 65_500 {
            Dtype::U16
        } else {
            Dtype::I32
        }
    }

    /// The code Megatron stores in the index.
    pub fn code(self) -> u8 {
        match self {
            Dtype::U16 => 8,
            Dtype::I32 => 4,
        }
    }

    fn from_code(code: u8) -> Option<Dtype> {
        match code {
            8 => Some(Dtype::U16),
            4 => Some(Dtype::I32),
            _ => None,
        }
    }

    /// Bytes per id.
    pub fn size(self) -> usize {
        match self {
            Dtype::U16 => 2,
            Dtype::I32 => 4,
        }
    }

    /// Appends `ids` in this type, little endian.
    pub fn extend(self, out: &mut Vec<u8>, ids: &[u32]) {
        match self {
            Dtype::U16 => {
                for &id in ids {
                    out.extend_from_slice(&(id as u16).to_le_bytes());
                }
            }
            Dtype::I32 => {
                for &id in ids {
                    out.extend_from_slice(&(id as i32).to_le_bytes());
                }
            }
        }
    }

    /// Reads ids of this type.
    pub fn decode(self, bytes: &[u8]) -> Vec<u32> {
        match self {
            Dtype::U16 => bytes
                .chunks_exact(2)
                .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            Dtype::I32 => bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u32)
                .collect(),
        }
    }
}

/// The `.idx` bytes for documents of these lengths (in tokens).
pub fn index_bytes(dtype: Dtype, lengths: &[u32]) -> Vec<u8> {
    let n = lengths.len();
    let mut out = Vec::with_capacity(HEADER_BYTES + n * 20 + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(dtype.code());
    out.extend_from_slice(&(n as u64).to_le_bytes());
    out.extend_from_slice(&(n as u64 + 1).to_le_bytes());
    for &len in lengths {
        out.extend_from_slice(&(len as i32).to_le_bytes());
    }
    let mut pointer = 0i64;
    for &len in lengths {
        out.extend_from_slice(&pointer.to_le_bytes());
        pointer += i64::from(len) * dtype.size() as i64;
    }
    for i in 0..=n as i64 {
        out.extend_from_slice(&i.to_le_bytes());
    }
    out
}

/// A parsed `.idx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    pub dtype: Dtype,
    /// Tokens per document.
    pub lengths: Vec<u32>,
    /// Byte offset of each document in the `.bin`.
    pub pointers: Vec<u64>,
}

impl Index {
    /// Parses an `.idx`; `url` names it in errors.
    pub fn parse(bytes: &[u8], url: &str) -> Result<Index> {
        let bad = |what: &str| Error::Input {
            url: url.to_string(),
            message: format!("not a Megatron index: {what}"),
        };
        if bytes.len() < HEADER_BYTES || &bytes[..9] != MAGIC {
            return Err(bad("no MMIDIDX header"));
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        if u64_at(9) != VERSION {
            return Err(bad(&format!("version {} (1 expected)", u64_at(9))));
        }
        let dtype =
            Dtype::from_code(bytes[17]).ok_or_else(|| bad(&format!("dtype code {}", bytes[17])))?;
        let n = usize::try_from(u64_at(18)).map_err(|_| bad("sequence count"))?;
        let docs = usize::try_from(u64_at(26)).map_err(|_| bad("document count"))?;
        let need = n
            .checked_mul(12)
            .and_then(|x| x.checked_add(docs.checked_mul(8)?))
            .and_then(|x| x.checked_add(HEADER_BYTES))
            .ok_or_else(|| bad("counts overflow"))?;
        if bytes.len() < need {
            return Err(bad(&format!(
                "{} bytes, {need} needed for {n} sequences",
                bytes.len()
            )));
        }
        let mut at = HEADER_BYTES;
        let mut lengths = Vec::with_capacity(n);
        for _ in 0..n {
            let mut b = [0u8; 4];
            b.copy_from_slice(&bytes[at..at + 4]);
            let len = i32::from_le_bytes(b);
            lengths.push(u32::try_from(len).map_err(|_| bad("negative length"))?);
            at += 4;
        }
        let mut pointers = Vec::with_capacity(n);
        for _ in 0..n {
            pointers.push(u64_at(at));
            at += 8;
        }
        if docs != n + 1 {
            return Err(bad(&format!(
                "{docs} document entries for {n} sequences: only one sequence per document is read"
            )));
        }
        Ok(Index {
            dtype,
            lengths,
            pointers,
        })
    }

    /// Reads the `.idx` of the dataset at `prefix` (the address without extension).
    pub fn read(storage: &Storage, prefix: &Location) -> Result<Index> {
        let loc = with_extension(prefix, "idx");
        Index::parse(&storage.read(&loc)?, &loc.to_string())
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether there are no documents.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// Total tokens.
    pub fn tokens(&self) -> u64 {
        self.lengths.iter().map(|&l| u64::from(l)).sum()
    }

    /// The ids of document `i`, read with one ranged request.
    pub fn document(&self, storage: &Storage, prefix: &Location, i: usize) -> Result<Vec<u32>> {
        let bin = with_extension(prefix, "bin");
        let len = u64::from(self.lengths[i]) * self.dtype.size() as u64;
        if len == 0 {
            return Ok(Vec::new());
        }
        let bytes = storage.read_range(&bin, self.pointers[i], len)?;
        Ok(self.dtype.decode(&bytes))
    }

    /// The ids of documents `first..end`, read with one ranged request (documents are
    /// back to back in the `.bin`).
    pub fn documents(
        &self,
        storage: &Storage,
        prefix: &Location,
        first: usize,
        end: usize,
    ) -> Result<Vec<Vec<u32>>> {
        let bin = with_extension(prefix, "bin");
        if end > self.len() || first > end {
            return Err(Error::Input {
                url: bin.to_string(),
                message: format!(
                    "documents {first}..{end} asked of a dataset of {}",
                    self.len()
                ),
            });
        }
        if first == end {
            return Ok(Vec::new());
        }
        let width = self.dtype.size();
        let len: u64 = self.lengths[first..end]
            .iter()
            .map(|&l| u64::from(l) * width as u64)
            .sum();
        let bytes = if len == 0 {
            Default::default()
        } else {
            storage.read_range(&bin, self.pointers[first], len)?
        };
        if bytes.len() as u64 != len {
            return Err(Error::Input {
                url: bin.to_string(),
                message: format!("{} bytes where the index says {len}", bytes.len()),
            });
        }
        let mut at = 0;
        Ok(self.lengths[first..end]
            .iter()
            .map(|&l| {
                let n = l as usize * width;
                let ids = self.dtype.decode(&bytes[at..at + n]);
                at += n;
                ids
            })
            .collect())
    }
}

/// File name of the manifest below a token-shard prefix.
pub const MANIFEST: &str = "manifest.json";

/// One finished token shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardInfo {
    /// Dataset name below the output prefix (without `.bin`/`.idx`).
    pub name: String,
    pub documents: u64,
    pub tokens: u64,
    /// Bytes of `.bin` plus `.idx`.
    pub bytes: u64,
}

/// The manifest of a token-shard prefix: the tokenizer the ids belong to and every
/// shard, written once all of them are complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub tokenizer: String,
    pub tokenizer_sha256: String,
    pub vocab_size: usize,
    pub dtype: Dtype,
    pub end_of_document: String,
    pub end_of_document_id: u32,
    pub documents: u64,
    pub tokens: u64,
    pub shards: Vec<ShardInfo>,
}

/// Reads the manifest below `prefix`.
pub fn read_manifest(storage: &Storage, prefix: &Location) -> Result<Manifest> {
    let loc = prefix.join(MANIFEST);
    serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
        url: loc.to_string(),
        message: format!("unreadable manifest: {e}"),
    })
}

/// `<prefix>.<ext>`.
pub fn with_extension(prefix: &Location, ext: &str) -> Location {
    prefix.with_suffix(&format!(".{ext}"))
}

/// Writes one dataset: ids stream into the `.bin` as they come; the `.idx` is written
/// when the dataset is finished (a few bytes per document are held until then).
pub struct DatasetWriter {
    bin: Writer,
    idx: Location,
    dtype: Dtype,
    lengths: Vec<u32>,
    tokens: u64,
    buf: Vec<u8>,
}

impl std::fmt::Debug for DatasetWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetWriter")
            .field("bin", self.bin.location())
            .field("documents", &self.lengths.len())
            .finish()
    }
}

/// What a finished dataset holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub documents: u64,
    pub tokens: u64,
    pub bytes: u64,
}

impl DatasetWriter {
    /// Starts `<prefix>.bin` / `<prefix>.idx`, clearing what a killed run left.
    pub fn create(storage: &Storage, prefix: &Location, dtype: Dtype) -> Result<DatasetWriter> {
        let bin_loc = with_extension(prefix, "bin");
        let idx = with_extension(prefix, "idx");
        storage.remove_stale_temporaries(&bin_loc)?;
        storage.remove_stale_temporaries(&idx)?;
        Ok(DatasetWriter {
            bin: storage.create(&bin_loc)?,
            idx,
            dtype,
            lengths: Vec::new(),
            tokens: 0,
            buf: Vec::new(),
        })
    }

    /// Appends one document.
    pub fn push(&mut self, ids: &[u32]) -> Result<()> {
        let len = u32::try_from(ids.len())
            .ok()
            .filter(|&l| l <= i32::MAX as u32)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "a document of {} tokens does not fit a Megatron index ({})",
                    ids.len(),
                    self.bin.location()
                ))
            })?;
        self.buf.clear();
        self.dtype.extend(&mut self.buf, ids);
        let url = self.bin.location().to_string();
        self.bin
            .write_all(&self.buf)
            .map_err(|e| Error::from_io_error("writing", url, e))?;
        self.lengths.push(len);
        self.tokens += u64::from(len);
        Ok(())
    }

    /// Documents so far.
    pub fn documents(&self) -> u64 {
        self.lengths.len() as u64
    }

    /// Tokens so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Bytes of `.bin` so far.
    pub fn bin_bytes(&self) -> u64 {
        self.bin.written()
    }

    /// Completes the `.bin`, then writes the `.idx`: a dataset whose `.idx` exists is whole.
    pub fn finish(self, storage: &Storage) -> Result<Written> {
        let bin_bytes = self.bin.finish()?;
        let idx = index_bytes(self.dtype, &self.lengths);
        storage.put(&self.idx, &idx)?;
        Ok(Written {
            documents: self.lengths.len() as u64,
            tokens: self.tokens,
            bytes: bin_bytes + idx.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_round_trip() {
        for dtype in [Dtype::U16, Dtype::I32] {
            let lengths = [3u32, 0, 7, 1];
            let bytes = index_bytes(dtype, &lengths);
            assert_eq!(bytes.len(), HEADER_BYTES + 4 * 4 + 4 * 8 + 5 * 8);
            let idx = Index::parse(&bytes, "t").expect("parses");
            assert_eq!(idx.dtype, dtype);
            assert_eq!(idx.lengths, lengths);
            let s = dtype.size() as u64;
            assert_eq!(idx.pointers, vec![0, 3 * s, 3 * s, 10 * s]);
            assert_eq!(idx.tokens(), 11);
        }
    }

    #[test]
    fn header_fields_sit_where_megatron_reads_them() {
        let bytes = index_bytes(Dtype::I32, &[5, 6]);
        assert_eq!(&bytes[..9], b"MMIDIDX\x00\x00");
        assert_eq!(bytes[9..17], 1u64.to_le_bytes());
        assert_eq!(bytes[17], 4);
        assert_eq!(bytes[18..26], 2u64.to_le_bytes());
        assert_eq!(bytes[26..34], 3u64.to_le_bytes());
        assert_eq!(bytes[34..38], 5i32.to_le_bytes());
        // Document index: 0, 1, 2.
        assert_eq!(bytes[bytes.len() - 8..], 2i64.to_le_bytes());
    }

    #[test]
    fn rejects_what_is_not_an_index() {
        assert!(Index::parse(b"garbage", "x").is_err());
        let mut bytes = index_bytes(Dtype::U16, &[1, 2]);
        bytes.truncate(bytes.len() - 1);
        assert!(Index::parse(&bytes, "x").is_err());
        let mut bytes = index_bytes(Dtype::U16, &[1]);
        bytes[17] = 99;
        assert!(Index::parse(&bytes, "x").is_err());
    }

    #[test]
    fn dtype_by_vocabulary() {
        assert_eq!(Dtype::for_vocab(50_257), Dtype::U16);
        assert_eq!(Dtype::for_vocab(65_500), Dtype::I32);
        assert_eq!(Dtype::for_vocab(256_000), Dtype::I32);
        let mut out = Vec::new();
        Dtype::U16.extend(&mut out, &[1, 65_000]);
        assert_eq!(Dtype::U16.decode(&out), vec![1, 65_000]);
    }
}
