//! Training samples from token shards.
//!
//! The documents of every shard listed in the manifest, in manifest order and, within
//! a shard, in file order, form one token stream (each document already ends with the
//! end-of-document token). Sample `i` is the `seq_len + 1` tokens starting at
//! `i * seq_len`, across document boundaries, as Megatron builds GPT samples: inputs
//! are its first `seq_len` tokens, targets its last `seq_len`.
//!
//! A document belongs to the validation stream instead when the hash of (its shard's
//! name, its position in the shard, the seed) falls in the first `validation_share` of
//! the hash space: a fixed split, the same however the corpus is read.
//!
//! Epoch `e` visits the training samples in the order of a seeded permutation of
//! `0..samples`, a pure function of (seed, epoch, position): a Feistel network over
//! the next power of four, walked until it lands inside the range. Global position
//! `p` is sample `permute(p mod samples)` of epoch `p / samples`; rank `r` of a world of
//! `W` takes positions `r, r + W, r + 2W, ...` past the position it resumes from.
//!
//! Only the `.idx` files are held in memory (12 bytes per document); tokens are read
//! with one ranged request per run of adjacent documents of a shard, never a whole
//! `.bin`.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use pipeline::tokens::{Index, Manifest, read_manifest, with_extension};
use pipeline::{Error, Location, Result, Storage};

/// How samples are made and split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataConfig {
    /// Tokens per sample that the model sees (each sample reads one more, the last
    /// target).
    pub seq_len: usize,
    /// Seed of the shuffle and of the validation split.
    pub seed: u64,
    /// Share of documents held out for validation (0.5%: large enough for a stable
    /// loss on a real corpus, small enough not to matter to training).
    pub validation_share: f64,
    /// Batches the background thread reads ahead.
    pub prefetch: usize,
    /// Blocks read at once (concurrent ranged requests).
    pub read_threads: usize,
    /// Adjacent samples read in one request and shuffled among themselves (the
    /// shuffle is of blocks, then within groups of them): 256 samples of 2,048 int32
    /// tokens are a 2 MiB read, where a request per sample would leave an object store's
    /// per-request cost as the limit.
    pub block_samples: usize,
    /// Blocks whose samples are mixed together (a batch draws from this many places
    /// of the corpus, not from one).
    pub shuffle_blocks: usize,
    /// Blocks the loader keeps decoded (at least `shuffle_blocks`: a block serves every
    /// sample of it a rank takes).
    pub cached_blocks: usize,
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            seq_len: 2048,
            seed: 1234,
            validation_share: 0.005,
            prefetch: 4,
            read_threads: 8,
            block_samples: 256,
            shuffle_blocks: 16,
            cached_blocks: 32,
        }
    }
}

/// One shard: its address (without extension) and index.
#[derive(Debug)]
struct Shard {
    prefix: Location,
    index: Index,
}

/// A token stream: documents (shard, position) in order, and the tokens before each.
#[derive(Debug, Default)]
struct Stream {
    docs: Vec<(u32, u32)>,
    /// `starts[k]`: tokens before document `k`; one more entry than `docs`.
    starts: Vec<u64>,
}

impl Stream {
    fn push(&mut self, shard: u32, doc: u32, len: u32) {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        let end = self.starts[self.starts.len() - 1] + u64::from(len);
        self.docs.push((shard, doc));
        self.starts.push(end);
    }

    fn tokens(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    fn samples(&self, seq_len: usize) -> u64 {
        let seq = seq_len as u64;
        if seq == 0 || self.tokens() <= seq {
            return 0;
        }
        (self.tokens() - 1) / seq
    }
}

/// Which stream to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Train,
    Validation,
}

/// The token shards below a prefix, split and ready to read samples from.
#[derive(Debug)]
pub struct Corpus {
    storage: Storage,
    manifest: Manifest,
    shards: Vec<Shard>,
    train: Stream,
    validation: Stream,
    config: DataConfig,
}

impl Corpus {
    /// Opens the shards at `prefix` (the output of `mill-tokenize encode` or `merge`):
    /// reads the manifest and every `.idx`, checks each `.bin` holds what its index
    /// says, and splits the documents.
    pub fn open(storage: &Storage, prefix: &Location, config: &DataConfig) -> Result<Corpus> {
        if config.seq_len == 0 {
            return Err(Error::Usage("data: seq_len must be at least 1".into()));
        }
        if !(0.0..1.0).contains(&config.validation_share) {
            return Err(Error::Usage(format!(
                "data: validation_share {} must be in [0, 1)",
                config.validation_share
            )));
        }
        let manifest = read_manifest(storage, prefix)?;
        let mut shards = Vec::with_capacity(manifest.shards.len());
        let (mut train, mut validation) = (Stream::default(), Stream::default());
        for (s, info) in manifest.shards.iter().enumerate() {
            let shard_prefix = prefix.join(&info.name);
            let index = Index::read(storage, &shard_prefix)?;
            if index.dtype != manifest.dtype {
                return Err(Error::Input {
                    url: with_extension(&shard_prefix, "idx").to_string(),
                    message: format!(
                        "ids of type {:?} where the manifest says {:?}",
                        index.dtype, manifest.dtype
                    ),
                });
            }
            check_bin(storage, &shard_prefix, &index)?;
            let held_out = split_threshold(config.validation_share);
            for (d, &len) in index.lengths.iter().enumerate() {
                let doc = u32::try_from(d).map_err(|_| Error::Input {
                    url: with_extension(&shard_prefix, "idx").to_string(),
                    message: "more than 2^32 documents in one shard".into(),
                })?;
                let stream = if document_hash(&info.name, doc, config.seed) < held_out {
                    &mut validation
                } else {
                    &mut train
                };
                stream.push(s as u32, doc, len);
            }
            shards.push(Shard {
                prefix: shard_prefix,
                index,
            });
        }
        Ok(Corpus {
            storage: storage.clone(),
            manifest,
            shards,
            train,
            validation,
            config: config.clone(),
        })
    }

    /// How samples are made.
    pub fn config(&self) -> &DataConfig {
        &self.config
    }

    /// The manifest the shards came with.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Refuses shards a model cannot read: ids past its vocabulary, or another
    /// tokenizer than the one it was configured for. The message names both sides.
    pub fn check_model(&self, vocab_size: usize, tokenizer_sha256: Option<&str>) -> Result<()> {
        let m = &self.manifest;
        if m.vocab_size > vocab_size {
            return Err(Error::Usage(format!(
                "the shards' tokenizer {} has {} tokens; the model's vocabulary has {vocab_size}",
                m.tokenizer, m.vocab_size
            )));
        }
        if let Some(want) = tokenizer_sha256
            && want != m.tokenizer_sha256
        {
            return Err(Error::Usage(format!(
                "the shards were encoded with tokenizer {} (sha256 {}); the model expects sha256 {want}",
                m.tokenizer, m.tokenizer_sha256
            )));
        }
        Ok(())
    }

    fn stream(&self, split: Split) -> &Stream {
        match split {
            Split::Train => &self.train,
            Split::Validation => &self.validation,
        }
    }

    /// Samples in a split.
    pub fn samples(&self, split: Split) -> u64 {
        self.stream(split).samples(self.config.seq_len)
    }

    /// Tokens in a split.
    pub fn tokens(&self, split: Split) -> u64 {
        self.stream(split).tokens()
    }

    /// Documents in a split.
    pub fn documents(&self, split: Split) -> usize {
        self.stream(split).docs.len()
    }

    /// Sample `i` of a split (in stream order, before any shuffle): `seq_len + 1`
    /// tokens.
    pub fn sample(&self, split: Split, i: u64) -> Result<Vec<u32>> {
        let stream = self.stream(split);
        let seq = self.config.seq_len as u64;
        if i >= stream.samples(self.config.seq_len) {
            return Err(Error::Usage(format!(
                "sample {i} asked of a split of {} samples",
                stream.samples(self.config.seq_len)
            )));
        }
        self.read_tokens(split, i * seq, i * seq + seq + 1)
    }

    /// Tokens `from..to` of a split's stream, by ranged reads (one per run of adjacent
    /// documents of a shard).
    fn read_tokens(&self, split: Split, from: u64, to: u64) -> Result<Vec<u32>> {
        let stream = self.stream(split);
        let to = to.min(stream.tokens());
        if from >= to {
            return Ok(Vec::new());
        }
        // The document holding token `from`: the last start at or before it.
        let mut k = stream.starts.partition_point(|&s| s <= from) - 1;
        let mut out = Vec::with_capacity((to - from) as usize);
        // Pieces (shard, byte offset, bytes) of adjacent documents merge into one read.
        let mut run: Option<(u32, u64, u64)> = None;
        while k < stream.docs.len() && stream.starts[k] < to {
            let (shard, doc) = stream.docs[k];
            let index = &self.shards[shard as usize].index;
            let width = index.dtype.size() as u64;
            let skip = from.saturating_sub(stream.starts[k]);
            let take = (to.min(stream.starts[k + 1]) - stream.starts[k]) - skip;
            let offset = index.pointers[doc as usize] + skip * width;
            let bytes = take * width;
            run = match run {
                Some((s, start, len)) if s == shard && start + len == offset => {
                    Some((s, start, len + bytes))
                }
                Some(done) => {
                    self.read_run(done, &mut out)?;
                    Some((shard, offset, bytes))
                }
                None => Some((shard, offset, bytes)),
            };
            k += 1;
        }
        if let Some(done) = run {
            self.read_run(done, &mut out)?;
        }
        Ok(out)
    }

    fn read_run(&self, (shard, offset, len): (u32, u64, u64), out: &mut Vec<u32>) -> Result<()> {
        let shard = &self.shards[shard as usize];
        let bin = with_extension(&shard.prefix, "bin");
        let bytes = self.storage.read_range(&bin, offset, len)?;
        if bytes.len() as u64 != len {
            return Err(Error::Input {
                url: bin.to_string(),
                message: format!(
                    "{} bytes at {offset} where {len} were expected",
                    bytes.len()
                ),
            });
        }
        out.extend(shard.index.dtype.decode(&bytes));
        Ok(())
    }

    /// Where global position `p` reads from: (block, training sample). Epoch `p / n`
    /// draws the full blocks of `block_samples` adjacent samples in a seeded order,
    /// `shuffle_blocks` at a time, and visits the samples of each such group in a
    /// seeded order of their own (so a batch mixes samples of many blocks); then the
    /// samples past the last full block (the tail, block number `n / block_samples`).
    /// A bijection of every epoch onto the samples, and a pure function of `p`.
    pub fn locate(&self, p: u64) -> Result<(u64, u64)> {
        let n = self.samples(Split::Train);
        if n == 0 {
            return Err(Error::Usage(format!(
                "the shards hold {} training tokens: not one sample of {} + 1",
                self.tokens(Split::Train),
                self.config.seq_len
            )));
        }
        let (epoch, i) = (p / n, p % n);
        let b = self.block_samples();
        let full = n / b;
        let seed = self.config.seed;
        if i >= full * b {
            let tail = n - full * b;
            return Ok((full, full * b + permute(i - full * b, tail, seed, epoch)));
        }
        // Group `g` mixes the samples of `k` blocks drawn by the block permutation.
        let k = (self.config.shuffle_blocks as u64).max(1);
        let g = i / (k * b);
        let blocks = k.min(full - g * k);
        let j = permute(i - g * k * b, blocks * b, mix(seed ^ mix(g + 1)), epoch);
        let block = permute(g * k + j / b, full, seed, epoch);
        Ok((block, block * b + j % b))
    }

    /// Samples per block: `block_samples`, at most the training samples, at least 1.
    fn block_samples(&self) -> u64 {
        (self.config.block_samples as u64).clamp(1, self.samples(Split::Train).max(1))
    }

    /// The tokens of a block: its samples' spans, back to back (`seq_len` apart, one
    /// token more at the end), read in one go.
    pub fn read_block(&self, block: u64) -> Result<Vec<u32>> {
        let seq = self.config.seq_len as u64;
        let b = self.block_samples();
        let n = self.samples(Split::Train);
        let first = block * b;
        let end = ((block + 1) * b).min(n);
        if first >= end {
            return Err(Error::Usage(format!("block {block} of {n} samples")));
        }
        self.read_tokens(Split::Train, first * seq, end * seq + 1)
    }

    /// The training sample at global position `p` (see [`Corpus::locate`]).
    pub fn sample_at(&self, p: u64) -> Result<Vec<u32>> {
        let (_, sample) = self.locate(p)?;
        self.sample(Split::Train, sample)
    }
}

/// Checks that the `.bin` beside an index is as long as the index says.
fn check_bin(storage: &Storage, prefix: &Location, index: &Index) -> Result<()> {
    let bin = with_extension(prefix, "bin");
    let width = index.dtype.size() as u64;
    let expected = index
        .pointers
        .iter()
        .zip(&index.lengths)
        .map(|(&p, &l)| p + u64::from(l) * width)
        .max()
        .unwrap_or(0);
    let found = storage
        .head(&bin)?
        .ok_or_else(|| Error::Input {
            url: bin.to_string(),
            message: "missing: the index has no token file beside it".into(),
        })?
        .size;
    if found != expected {
        return Err(Error::Input {
            url: bin.to_string(),
            message: format!(
                "{found} bytes, but {} says {expected} (a truncated or mismatched shard)",
                with_extension(prefix, "idx")
            ),
        });
    }
    Ok(())
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash of one word.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The hash that decides a document's split.
fn document_hash(shard: &str, doc: u32, seed: u64) -> u64 {
    let mut h = mix(seed ^ 0x5eed_da7a);
    for chunk in shard.as_bytes().chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = mix(h ^ u64::from_le_bytes(word));
    }
    mix(h ^ u64::from(doc))
}

/// Hashes below this fall in the validation split.
fn split_threshold(share: f64) -> u64 {
    (share * u64::MAX as f64) as u64
}

/// A permutation of `0..n`, a pure function of (seed, epoch): a four-round Feistel
/// network over the smallest power of four at least `n`, walked until the value lands
/// inside the range (fewer than four steps on average).
pub fn permute(i: u64, n: u64, seed: u64, epoch: u64) -> u64 {
    debug_assert!(i < n);
    let bits = (64 - n.saturating_sub(1).leading_zeros())
        .max(2)
        .next_multiple_of(2);
    let half = bits / 2;
    let mask = (1u64 << half) - 1;
    let key = mix(seed ^ mix(epoch));
    let mut x = i;
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        for round in 0..4u64 {
            let f = mix(key ^ mix(round ^ (r << 8))) & mask;
            (l, r) = (r, l ^ f);
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}

/// Micro-batches for one rank: `batch` samples of `seq_len + 1` tokens, back to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub tokens: Vec<u32>,
    /// Global position after this batch, for every rank together: what a checkpoint
    /// records to resume from.
    pub next_position: u64,
}

/// The positions rank `rank` of `world` reads from `start` on, `batch` per step: step
/// `k` covers global positions `start + k * batch * world ..`, of which this rank takes
/// those `≡ rank (mod world)`.
fn batch_positions(start: u64, step: u64, batch: u64, world: u64, rank: u64) -> Vec<u64> {
    let base = start + step * batch * world;
    (0..batch).map(|j| base + j * world + rank).collect()
}

/// The samples at `positions`, back to back: the blocks they lie in come from `cache`
/// or are read (concurrently, on `readers`) and cached, oldest dropped first.
fn read_batch(
    corpus: &Corpus,
    readers: &rayon::ThreadPool,
    cache: &mut std::collections::VecDeque<(u64, Arc<Vec<u32>>)>,
    positions: &[u64],
) -> Result<Vec<u32>> {
    let located: Vec<(u64, u64)> = positions
        .iter()
        .map(|&p| corpus.locate(p))
        .collect::<Result<_>>()?;
    let mut missing: Vec<u64> = located
        .iter()
        .map(|&(block, _)| block)
        .filter(|b| !cache.iter().any(|(c, _)| c == b))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    let read: Vec<Result<Vec<u32>>> =
        readers.install(|| missing.par_iter().map(|&b| corpus.read_block(b)).collect());
    for (block, tokens) in missing.into_iter().zip(read) {
        cache.push_back((block, Arc::new(tokens?)));
    }
    let seq = corpus.config.seq_len;
    let b = corpus.block_samples();
    let mut out = Vec::with_capacity(positions.len() * (seq + 1));
    for (block, sample) in located {
        let tokens = cache
            .iter()
            .find(|(c, _)| *c == block)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| Error::Usage(format!("block {block} was not read")))?;
        let at = ((sample - block * b) as usize) * seq;
        out.extend_from_slice(&tokens[at..at + seq + 1]);
    }
    let keep = corpus
        .config
        .cached_blocks
        .max(corpus.config.shuffle_blocks)
        .max(positions.len().min(64));
    while cache.len() > keep {
        cache.pop_front();
    }
    Ok(out)
}

/// Reads batches for one rank on a background thread, `prefetch` ahead.
#[derive(Debug)]
pub struct Loader {
    receiver: Receiver<Result<Batch>>,
    waited: Duration,
}

impl Loader {
    /// Starts reading at global position `start` (0, or what a checkpoint recorded).
    pub fn start(
        corpus: Arc<Corpus>,
        start: u64,
        batch: usize,
        rank: usize,
        world: usize,
    ) -> Result<Loader> {
        if world == 0 || rank >= world || batch == 0 {
            return Err(Error::Usage(format!(
                "data: rank {rank} of world {world} with batch {batch}"
            )));
        }
        let depth = corpus.config.prefetch.max(1);
        let (sender, receiver): (SyncSender<Result<Batch>>, _) = sync_channel(depth);
        let readers = rayon::ThreadPoolBuilder::new()
            .num_threads(corpus.config.read_threads.max(1))
            .thread_name(move |i| format!("tokenmill-data-{rank}-{i}"))
            .build()
            .map_err(|e| Error::Usage(format!("starting the data readers: {e}")))?;
        std::thread::Builder::new()
            .name(format!("tokenmill-data-{rank}"))
            .spawn(move || {
                let mut cache: std::collections::VecDeque<(u64, Arc<Vec<u32>>)> =
                    std::collections::VecDeque::new();
                for step in 0u64.. {
                    let positions =
                        batch_positions(start, step, batch as u64, world as u64, rank as u64);
                    let next_position = start + (step + 1) * (batch * world) as u64;
                    let item =
                        read_batch(&corpus, &readers, &mut cache, &positions).map(|tokens| Batch {
                            tokens,
                            next_position,
                        });
                    let failed = item.is_err();
                    if sender.send(item).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|e| Error::Usage(format!("starting the data thread: {e}")))?;
        Ok(Loader {
            receiver,
            waited: Duration::ZERO,
        })
    }

    /// The next batch; the time spent waiting for it counts in [`Loader::waited`].
    pub fn next_batch(&mut self) -> Result<Batch> {
        let t = Instant::now();
        let item = self
            .receiver
            .recv()
            .map_err(|_| Error::Usage("the data thread stopped".into()))?;
        self.waited += t.elapsed();
        item
    }

    /// Time spent waiting for batches so far (data wait, for the metrics).
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_bijections_fixed_by_seed_and_epoch() {
        for n in [1u64, 2, 3, 5, 16, 17, 1000, 4097] {
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let j = permute(i, n, 7, 0);
                assert!(!seen[j as usize], "n={n}: {j} twice");
                seen[j as usize] = true;
                assert_eq!(j, permute(i, n, 7, 0));
            }
        }
        let order = |seed, epoch| {
            (0..1000)
                .map(|i| permute(i, 1000, seed, epoch))
                .collect::<Vec<_>>()
        };
        assert_ne!(order(7, 0), order(7, 1), "epochs reshuffle");
        assert_ne!(order(7, 0), order(8, 0), "seeds differ");
        // Not the identity, not a rotation: neighbours land far apart.
        let o = order(7, 0);
        let adjacent = o.windows(2).filter(|w| w[0].abs_diff(w[1]) == 1).count();
        assert!(adjacent < 20, "{adjacent} adjacent pairs");
    }

    #[test]
    fn ranks_split_each_step_without_overlap() {
        let one = batch_positions(10, 3, 4, 1, 0);
        assert_eq!(one, vec![22, 23, 24, 25]);
        let mut all: Vec<u64> = (0..3)
            .flat_map(|r| batch_positions(10, 2, 4, 3, r))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (34..46).collect::<Vec<_>>());
    }

    #[test]
    fn the_split_share_is_near_the_asked_share() {
        let t = split_threshold(0.05);
        let held = (0..20_000u32)
            .filter(|&d| document_hash("web-00000", d, 3) < t)
            .count();
        assert!((800..1200).contains(&held), "{held}");
        assert_eq!(split_threshold(0.0), 0);
    }
}
