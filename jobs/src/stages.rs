//! The one table of what a pipeline file may name: the per-document stages a chain may
//! hold, each with the configuration table it reads and the builder of its step, and
//! the stages whose phases are steps of their own. Adding a stage is one entry here.

use pipeline::{Result, Step, Storage};

use crate::spec::Pipeline;

/// Parses a stage's `[config.<name>]` table as its configuration type.
pub type ConfigCheck = fn(&Pipeline) -> Result<()>;

/// A per-document stage a chain may hold.
#[derive(Debug)]
pub struct ChainStage {
    /// Its name in `stages = [...]` and its `[config.<name>]` table.
    pub name: &'static str,
    /// It reads raw inputs (WARC), so it can only start a chain.
    pub starts_chain: bool,
    /// Parses `[config.<name>]` as the stage's configuration type.
    pub check: ConfigCheck,
    /// Builds the stage's step from its configuration.
    pub build: fn(&Storage, &Pipeline) -> Result<Step>,
}

/// Every stage a chain may hold.
pub const CHAIN: &[ChainStage] = &[
    ChainStage {
        name: "extract",
        starts_chain: true,
        check: |p| p.stage_config::<extract::Config>("extract").map(drop),
        build: |s, p| extract::step(s, &p.stage_config("extract")?),
    },
    ChainStage {
        name: "import",
        starts_chain: false,
        check: |p| p.stage_config::<import::Config>("import").map(drop),
        build: |_, p| Ok(import::step(&p.stage_config("import")?)),
    },
    ChainStage {
        name: "langid",
        starts_chain: false,
        check: |p| p.stage_config::<langid::Config>("langid").map(drop),
        build: |s, p| langid::step(s, &p.stage_config("langid")?),
    },
    ChainStage {
        name: "quality",
        starts_chain: false,
        check: |p| p.stage_config::<quality::Config>("quality").map(drop),
        build: |s, p| quality::step(s, &p.stage_config("quality")?),
    },
    ChainStage {
        name: "decontam",
        starts_chain: false,
        check: |p| p.stage_config::<decontam::Config>("decontam").map(drop),
        build: |s, p| decontam::step(s, &decontam_config(p)?),
    },
    ChainStage {
        name: "pii",
        starts_chain: false,
        check: |p| p.stage_config::<pii::Config>("pii").map(drop),
        build: |_, p| pii::step(&p.stage_config("pii")?),
    },
    ChainStage {
        name: "classify",
        starts_chain: false,
        check: |p| p.stage_config::<classify::Config>("classify").map(drop),
        build: |s, p| classify::step(s, &p.stage_config("classify")?),
    },
    ChainStage {
        name: "toxicity",
        starts_chain: false,
        check: |p| p.stage_config::<toxicity::Config>("toxicity").map(drop),
        build: |s, p| toxicity::step(s, &p.stage_config("toxicity")?),
    },
];

/// Stages run as phases (`phase = "<stage>.<phase>"`), with the check of their
/// `[config.<stage>]` table.
pub const PHASED: &[(&str, ConfigCheck)] = &[
    ("dedup", |p| {
        p.stage_config::<dedup::Config>("dedup").map(drop)
    }),
    ("decontam", |p| {
        p.stage_config::<decontam::Config>("decontam").map(drop)
    }),
    ("tokenize", |p| {
        p.stage_config::<tokenize::Config>("tokenize").map(drop)
    }),
    // The trainer's run file: `mill-train` checks its fields when the step starts
    // (`mill` does not link the trainer); here, that it is a table.
    ("train", |p| {
        p.stage_config::<toml::Table>("train").map(drop)
    }),
];

/// `[config.decontam]` with its `index` resolved: the name of a `decontam.index` step
/// stands for that step's output.
pub fn decontam_config(p: &Pipeline) -> Result<decontam::Config> {
    let mut config: decontam::Config = p.stage_config("decontam")?;
    if let Some(index) = &config.index {
        config.index = Some(p.resolve(index)?.to_string());
    }
    Ok(config)
}

/// The chain stage named `name`.
pub fn chain_stage(name: &str) -> Option<&'static ChainStage> {
    CHAIN.iter().find(|s| s.name == name)
}

/// Names of the chain stages, for messages.
pub fn chain_names() -> Vec<&'static str> {
    CHAIN.iter().map(|s| s.name).collect()
}
