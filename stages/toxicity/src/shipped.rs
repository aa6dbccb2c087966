//! The shipped classifier, `models/toxicity-en-v1.ftz` (its card: `toxicity-en-v1.md`
//! beside it), compiled into the binaries: `classifier = "default"` (or
//! `model = "default"` in a `[classifier]` table) finds it from any folder, on any
//! machine, without a download.
//!
//! The settings that go with it were chosen on the figures of its card: `document` mode
//! at 0.5 drops 1 of 1,487 ordinary web pages (WCXB dev, extracted by `mill-extract`),
//! where `fraction` mode at 0.5 drops 8%.

use crate::{ClassifierConfig, Mode, Normalize, Unit};

/// The name that selects the shipped model.
pub const NAME: &str = "default";
/// The file it ships as.
pub const FILE: &str = "toxicity-en-v1.ftz";
/// Its bytes.
pub static BYTES: &[u8] = include_bytes!("../../../models/toxicity-en-v1.ftz");
/// The threshold the default config uses (see the module docs).
pub const THRESHOLD: f64 = 0.5;
/// The mode the default config uses.
pub const MODE: Mode = Mode::Document;

/// SHA-256 of [`BYTES`], written out: every configuration that names the shipped model
/// holds it, and hashing the 1.9 MB on each parse took about a fifth of the CPU of a
/// step with little work (`mill run --only clusters` on the fixture crawl). A test checks
/// it against the bytes; loading the model checks it again.
pub const SHA256: &str = "582be6a11d73d7516486de6c29fdf9bcfe7e4a57bb8c3cd77bf102bc8221a7e1";

/// SHA-256 of the shipped model.
pub fn sha256() -> String {
    SHA256.to_string()
}

/// What `classifier = "default"` stands for.
pub fn config() -> ClassifierConfig {
    ClassifierConfig {
        model: NAME.into(),
        model_sha256: Some(sha256()),
        labels: vec!["toxic".into()],
        threshold: THRESHOLD,
        mode: MODE,
        unit: Unit::Sentence,
        max_toxic_fraction: 0.1,
        normalize: Some(Normalize::Words),
    }
}

/// Loads the shipped model through a temporary file (fastText reads only files),
/// checking it against `sha256` when a config names one.
pub(crate) fn load(
    storage: &pipeline::Storage,
    sha256: Option<&str>,
) -> pipeline::Result<pipeline::fasttext_model::Model> {
    use std::io::Write;
    let error = |e: std::io::Error| pipeline::Error::Config {
        url: FILE.into(),
        message: format!("writing the shipped model to a temporary file: {e}"),
    };
    let mut tmp = tempfile::Builder::new()
        .suffix(".ftz")
        .tempfile()
        .map_err(error)?;
    tmp.write_all(BYTES).map_err(error)?;
    tmp.flush().map_err(error)?;
    let path = tmp
        .path()
        .to_str()
        .ok_or_else(|| pipeline::Error::Usage("the temporary folder's path is not UTF-8".into()))?
        .to_string();
    let hint = format!("`default` is the shipped {FILE}");
    pipeline::fasttext_model::Model::load(storage, &path, sha256, &hint)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_written_out_sha256_is_the_models() {
        assert_eq!(super::SHA256, pipeline::cli::sha256_hex(super::BYTES));
    }
}
