//! `trainer`: trains a decoder on the token shards the pipeline writes.
//!
//! Built so far: [`data`], the loader that turns `mill-tokenize` output (Megatron
//! `.bin/.idx` datasets and their manifest, on disk or S3) into training samples:
//! ranged reads, a seeded shuffle that is a pure function of its position, ranks that
//! take every W-th sample, a validation split held out by document, and prefetching
//! on a background thread. The model, optimiser, checkpoints and `mill-train` come
//! next (see the README).

pub mod data;
