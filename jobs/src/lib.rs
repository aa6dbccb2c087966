//! The `mill` command: a pipeline file names the steps of a run (chains of per-document
//! stages fused in one pass, and the phases of dedup and tokenize); `mill run` runs them
//! in order on this machine, `mill step` runs one task of one step as a fleet array job
//! does, `mill status` and `mill report` read a run's markers.

pub mod ablate;
pub mod classify_gpu;
pub mod exec;
pub mod incremental;
pub mod plan;
pub mod report;
pub mod spec;
pub mod stages;
pub mod status;
pub mod submit;
pub mod tasks;
pub mod train;

pub use exec::{Flags, StepSummary, run, run_task, summary_table};
pub use spec::{Pipeline, StepSpec};
