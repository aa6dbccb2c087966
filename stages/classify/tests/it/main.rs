//! mill-classify: scores equal to Hugging Face transformers' and to fastText's own,
//! the stage's conformance, keep_top over a whole corpus, training, and clear errors
//! for bad models.

mod common;
mod errors;
mod fasttext;
mod parity;
mod top;
