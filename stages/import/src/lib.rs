//! Stage `import`: brings documents from elsewhere into tokenmill shards.
//!
//! Reads JSONL (plain, `.gz`, `.zst`; FineWeb, dolma and datatrove layouts) or Parquet
//! documents and writes tokenmill Parquet shards: known columns typed, every other
//! field kept. Documents with no text left are dropped as `empty_text`.

use pipeline::shard::ShardOptions;
use pipeline::{Document, DocumentSource, Stage, Step, Verdict};
use serde::{Deserialize, Serialize};

/// Configuration of the import stage (`--config`, TOML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Drop documents whose text is empty or only whitespace (`empty_text`), as every
    /// datatrove reader does by default.
    #[serde(default = "default_true")]
    pub drop_empty: bool,
    /// Value for the `dump` column of documents that have none.
    #[serde(default)]
    pub dump: Option<String>,
    /// Row group size of the output shards, in bytes of encoded data.
    #[serde(default = "default_row_group_bytes")]
    pub row_group_bytes: usize,
}

fn default_true() -> bool {
    true
}

fn default_row_group_bytes() -> usize {
    ShardOptions::default().row_group_bytes
}

impl Default for Config {
    fn default() -> Self {
        Config {
            drop_empty: true,
            dump: None,
            row_group_bytes: default_row_group_bytes(),
        }
    }
}

/// The import stage.
#[derive(Debug, Clone)]
pub struct Import {
    config: Config,
}

impl Import {
    pub fn new(config: Config) -> Self {
        Import { config }
    }
}

impl Stage for Import {
    fn name(&self) -> &'static str {
        "import"
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        if self.config.drop_empty && doc.text.trim().is_empty() {
            return Verdict::Drop("empty_text");
        }
        if doc.dump.is_none() {
            doc.dump.clone_from(&self.config.dump);
        }
        Verdict::Keep
    }
}

/// The step `mill-import` runs.
pub fn step(config: &Config) -> Step {
    Step {
        name: "import".into(),
        stages: vec![Box::new(Import::new(config.clone()))],
        source: Box::new(DocumentSource::default()),
        config_hash: pipeline::cli::config_hash("import", config),
        shard: ShardOptions {
            row_group_bytes: config.row_group_bytes,
            ..ShardOptions::default()
        },
        partition: None,
        per_input: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(config: Config, text: &str, expected: Verdict) {
        let mut doc = Document::new("id", text);
        assert_eq!(Import::new(config).process(&mut doc), expected, "{text:?}");
    }

    #[test]
    fn drops_empty_text() {
        check(Config::default(), "", Verdict::Drop("empty_text"));
        check(Config::default(), " \n\t", Verdict::Drop("empty_text"));
        check(Config::default(), "hello", Verdict::Keep);
        let keep_all = Config {
            drop_empty: false,
            ..Config::default()
        };
        check(keep_all, "", Verdict::Keep);
    }

    #[test]
    fn fills_dump() {
        let stage = Import::new(Config {
            dump: Some("CC-MAIN-2024-10".into()),
            ..Config::default()
        });
        let mut doc = Document::new("a", "text");
        stage.process(&mut doc);
        assert_eq!(doc.dump.as_deref(), Some("CC-MAIN-2024-10"));
        let mut doc = Document {
            dump: Some("mine".into()),
            ..Document::new("b", "text")
        };
        stage.process(&mut doc);
        assert_eq!(doc.dump.as_deref(), Some("mine"));
    }

    #[test]
    fn config_rejects_unknown_fields() {
        assert!(toml::from_str::<Config>("dump = \"x\"\nbogus = 1").is_err());
        let c: Config = toml::from_str("").expect("empty config is the default");
        assert_eq!(c, Config::default());
    }
}
