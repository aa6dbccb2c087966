//! The cache directory where setup scripts put models (`scripts/fetch-models.sh`) and
//! where configs find them by default. It does not depend on the working directory:
//! `$TOKENMILL_CACHE`, else `$XDG_CACHE_HOME/tokenmill`, else `~/.cache/tokenmill`.

use std::path::PathBuf;

/// Environment variable that names the cache directory outright.
pub const CACHE_ENV: &str = "TOKENMILL_CACHE";

/// The cache directory (see the module docs); `.cache/tokenmill` below the working
/// directory only when neither variable nor a home directory is set.
pub fn cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(CACHE_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = var("XDG_CACHE_HOME") {
        return PathBuf::from(xdg).join("tokenmill");
    }
    match var("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/tokenmill"),
        None => PathBuf::from(".cache/tokenmill"),
    }
}

/// A file under the cache's `models/` folder.
pub fn model_path(file: &str) -> PathBuf {
    cache_dir().join("models").join(file)
}
