//! Loading a fastText model (`.bin` or `.ftz`) from any storage address, for the stages
//! that classify text (language ID, toxicity). Behind the `fasttext` feature.

use std::io::Write;
use std::path::{Path, PathBuf};

use ::fasttext::FastText;

use crate::error::{Error, Result};
use crate::storage::{Location, Storage};

/// A loaded model; `_local` keeps a downloaded copy alive while the model is used.
pub struct Model {
    pub fasttext: FastText,
    /// SHA-256 of the model file (part of a step's config hash).
    pub sha256: String,
    _local: Option<tempfile::TempPath>,
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
        let (path, local): (PathBuf, Option<tempfile::TempPath>) = match &loc {
            Location::Local(p) => {
                if !p.is_file() {
                    return Err(error("model file not found".into()));
                }
                (p.clone(), None)
            }
            Location::S3 { .. } => {
                let bytes = storage.read(&loc)?;
                let mut tmp = tempfile::NamedTempFile::new()
                    .map_err(|e| error(format!("creating a local copy: {e}")))?;
                tmp.write_all(&bytes)
                    .map_err(|e| error(format!("writing a local copy: {e}")))?;
                let tmp = tmp.into_temp_path();
                (tmp.to_path_buf(), Some(tmp))
            }
        };
        let bytes = std::fs::read(&path).map_err(|e| error(e.to_string()))?;
        let digest = crate::cli::sha256_hex(&bytes);
        drop(bytes);
        if let Some(expected) = sha256
            && digest != expected
        {
            return Err(error(format!(
                "SHA-256 is {digest}, expected {expected}: the file is corrupt or another model"
            )));
        }
        let fasttext =
            load_fasttext(&path).map_err(|e| error(format!("not a fastText model: {e}")))?;
        Ok(Model {
            fasttext,
            sha256: digest,
            _local: local,
        })
    }
}

fn load_fasttext(path: &Path) -> std::result::Result<FastText, String> {
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
