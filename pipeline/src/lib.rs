//! `pipeline`: the one library every tokenmill stage shares.
//!
//! It owns everything but the stage logic: addresses and storage ([`storage`]), the
//! [`Document`] and its Parquet/JSONL shards ([`shard`]), input sources ([`source`]),
//! splitting inputs among tasks ([`tasks`]), the per-document runner with per-input
//! resume markers ([`runner`], [`marker`]), counters ([`stats`]), progress, the shared
//! command line ([`cli`]) and the conformance harness every stage's tests call
//! ([`testing`]). A stage author writes a [`Stage`] and a config.

pub mod cache;
pub mod cli;
pub mod document;
pub mod error;
#[cfg(feature = "fasttext")]
pub mod fasttext_model;
pub mod languages;
pub mod lists;
pub mod lock;
pub mod marker;
pub mod progress;
pub mod runner;
pub mod shard;
pub mod sketch;
pub mod source;
pub mod stats;
pub mod storage;
pub mod tasks;
pub mod testing;
pub mod text;
pub mod tokens;
pub mod world;

pub use document::{Column, ColumnKind, Document, Payload, Value};
pub use error::{Error, Result};
pub use runner::{
    InputStage, Measure, Partition, Plan, Planned, Report, RowStage, RunOptions, Stage, Step, Unit,
    UnitDone, UnitPlan, Verdict, plan, plan_units, run, run_unit, run_units,
};
pub use source::{DocBatch, DocumentSource, Source};
pub use stats::Stats;
pub use storage::{Location, ObjectMeta, Storage};
