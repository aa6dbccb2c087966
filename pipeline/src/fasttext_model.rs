//! Loading a fastText model (`.bin` or `.ftz`) from any storage address, for the stages
//! that classify text (language ID, toxicity, quality classifiers). Behind the
//! `fasttext` feature; their training ([`train`]) behind `fasttext-train`.

pub mod infer;
#[cfg(feature = "fasttext-train")]
pub mod train;

use crate::error::{Error, Result};
use crate::storage::{Location, Storage};

pub use infer::Predictor;

/// A loaded model.
pub struct Model {
    /// The model, read into tokenmill's own predictor (the same scores as fastText's).
    pub predictor: Predictor,
    /// SHA-256 of the model file (part of a step's config hash).
    pub sha256: String,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// Loads a fastText model from a path or storage URL, checking its SHA-256 when one
    /// is given. `hint` (how to get the model) ends every error message.
    pub fn load(storage: &Storage, url: &str, sha256: Option<&str>, hint: &str) -> Result<Model> {
        let error = |message: String| Error::Config {
            url: url.to_string(),
            message: if hint.is_empty() {
                message
            } else {
                format!("{message} ({hint})")
            },
        };
        let loc = Location::parse(url)?;
        let bytes = match &loc {
            Location::Local(p) => {
                if !p.is_file() {
                    return Err(error("model file not found".into()));
                }
                std::fs::read(p).map_err(|e| error(e.to_string()))?
            }
            Location::S3 { .. } => storage.read(&loc)?,
        };
        let digest = crate::cli::sha256_hex(&bytes);
        if let Some(expected) = sha256
            && digest != expected
        {
            return Err(error(format!(
                "SHA-256 is {digest}, expected {expected}: the file is corrupt or another model"
            )));
        }
        let predictor = Predictor::from_bytes(&bytes)
            .map_err(|e| error(format!("not a fastText model: {e}")))?;
        Ok(Model {
            predictor,
            sha256: digest,
        })
    }
}

/// fastText's input line for a text: newlines (and NULs, which end a C string) become
/// spaces, as FineWeb and dolma prepare text; one trailing newline.
pub fn prepare(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 1);
    let mut rest = text;
    while let Some(i) = rest.find(['\n', '\0']) {
        s.push_str(&rest[..i]);
        s.push(' ');
        rest = &rest[i + 1..];
    }
    s.push_str(rest);
    s.push('\n');
    s
}
