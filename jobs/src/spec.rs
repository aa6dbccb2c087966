//! The pipeline file: input and output, the steps in order, each stage's configuration.
//!
//! ```toml
//! input = "fixtures/warc"          # the first step's input
//! output = "out/pipeline"          # the run: step `x` writes <output>/x/
//! tasks = 1                        # tasks per step in `mill run` (--tasks overrides)
//!
//! [config.extract]                 # one table per stage, its own TOML schema
//! dump = "CC-MAIN-2024-10"
//!
//! [[step]]
//! name = "text"
//! stages = ["extract", "langid", "quality", "toxicity"]   # fused, one pass
//!
//! [[step]]
//! name = "signatures"
//! phase = "dedup.signatures"       # input: the previous step's output
//! ```
//!
//! A step is a chain of per-document stages fused in one pass (`stages`), or one phase
//! of a multi-phase stage (`phase`: `dedup.signatures`, `dedup.buckets`,
//! `dedup.clusters`, `dedup.filter`, `dedup.index`, `dedup.substring`,
//! `dedup.substring_filter`, `tokenize.train`,
//! `tokenize.encode`, `decontam.index`, `classify.threshold`, `classify.filter`, `train`). `input` names an earlier step (its output) or an address;
//! phases that need a second input name it the same way: `clusters` (dedup.filter,
//! dedup.index), `tokenizer` (tokenize.encode), `against` (dedup.buckets), `threshold`
//! (classify.filter).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use pipeline::{Error, Location, Result, Storage};

/// A parsed pipeline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// The first step's input.
    pub input: String,
    /// The run's address; step `x` writes below `<output>/x/`.
    pub output: String,
    /// Tasks per step for `mill run` (run one after another on this machine).
    #[serde(default = "one")]
    pub tasks: usize,
    /// Worker threads per task (0: every core).
    #[serde(default)]
    pub threads: usize,
    /// Each stage's configuration, by stage name (`extract`, `langid`, `quality`,
    /// `pii`, `decontam`, `toxicity`, `import`, `dedup`, `tokenize`).
    #[serde(default)]
    pub config: BTreeMap<String, toml::Value>,
    /// The steps, in order.
    #[serde(rename = "step")]
    pub steps: Vec<StepSpec>,
    /// How `mill submit` runs the steps on a batch engine (`[submit]`,
    /// `[submit.slurm]`, `[submit.aws-batch]`, `[submit.k8s]`).
    #[serde(default)]
    pub submit: crate::submit::SubmitConfig,
    /// Set in a pipeline expanded from an ablation file: its variants and their steps
    /// ([`crate::ablate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ablation: Option<crate::ablate::Plan>,
}

fn one() -> usize {
    1
}

/// One step of a pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// Names the step and its output folder.
    pub name: String,
    /// Per-document stages fused in one pass, in order.
    #[serde(default)]
    pub stages: Vec<String>,
    /// Or one phase of a multi-phase stage.
    pub phase: Option<String>,
    /// An earlier step's name or an address (default: the previous step's output, or
    /// the pipeline's input for the first step).
    pub input: Option<String>,
    /// dedup.filter, dedup.index: the clusters step.
    pub clusters: Option<String>,
    /// tokenize.encode: the train step (its tokenizer.json) or a tokenizer address.
    pub tokenizer: Option<String>,
    /// dedup.buckets: an index of earlier runs to deduplicate against.
    pub against: Option<String>,
    /// classify.filter: the classify.threshold step (its `threshold.json`), or an
    /// address.
    pub threshold: Option<String>,
    /// Tasks for this step (default: the pipeline's).
    pub tasks: Option<usize>,
    /// CPUs per task on a batch engine (default: `[submit] cpus`).
    pub cpus: Option<u32>,
    /// Memory per task on a batch engine, MiB (default: `[submit] memory_mib`): the
    /// clusters phase needs memory more than cores.
    pub memory_mib: Option<u64>,
    /// The train phase: machines it runs on (default 1). `mill submit` asks the engine
    /// for them as one job (Slurm `--nodes`, an AWS Batch multi-node parallel job, a
    /// Kubernetes Indexed Job of one pod per node behind a headless Service).
    pub nodes: Option<u32>,
    /// The train phase: GPUs per machine, one training process each (default 1; `mill
    /// run` starts this many ranks on its own machine). A chain of the classify stage
    /// alone: GPUs per task, its transformers on them (`mill-classify-gpu`, bf16).
    pub gpus_per_node: Option<u32>,
    /// Keep dropped documents under `_rejected/` (per-document steps).
    #[serde(default)]
    pub keep_rejected: bool,
    /// This step's own settings of the stages it runs (`[step.config.quality]`),
    /// merged key by key over the pipeline's `[config.<stage>]`: what an ablation's
    /// variants change (see [`crate::ablate`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, toml::Value>,
}

/// What a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chain,
    DedupSignatures,
    DedupBuckets,
    DedupClusters,
    DedupFilter,
    DedupIndex,
    /// Exact-substring dedup: the cuts per input (`phase = "dedup.substring"`).
    DedupSubstring,
    /// The cuts applied (`phase = "dedup.substring_filter"`, `clusters` names the
    /// substring step).
    DedupSubstringFilter,
    TokenizeTrain,
    TokenizeEncode,
    /// The n-gram index of evaluation sets (`phase = "decontam.index"`).
    DecontamIndex,
    /// The bundled trainer on a tokens step's shards (`phase = "train"`).
    Train,
    /// The thresholds of the classifiers that keep a top share, from the scoring
    /// step's sketches (`phase = "classify.threshold"`).
    ClassifyThreshold,
    /// The documents at or over the thresholds (`phase = "classify.filter"`,
    /// `threshold` names the threshold step).
    ClassifyFilter,
}

impl Kind {
    /// Whether the step runs once, whatever the task count (task 0 does it). The dedup
    /// clusters phase is not: past `clusters_memory_bytes` its rounds are shared by all
    /// of its tasks (below it, task 0 runs its one unit and the others end at once).
    pub fn single_task(self) -> bool {
        matches!(
            self,
            Kind::TokenizeTrain | Kind::Train | Kind::DecontamIndex | Kind::ClassifyThreshold
        )
    }

    /// Whether the step writes documents (its output is the next step's input).
    pub fn writes_documents(self) -> bool {
        matches!(
            self,
            Kind::Chain | Kind::DedupFilter | Kind::DedupSubstringFilter | Kind::ClassifyFilter
        )
    }
}

impl StepSpec {
    /// The configuration tables this step reads: its stages' (a chain), its phase's
    /// stage (`dedup` for `dedup.filter`), or `train`.
    pub fn config_stages(&self) -> Vec<&str> {
        match &self.phase {
            Some(p) => vec![p.split('.').next().unwrap_or(p)],
            None => self.stages.iter().map(String::as_str).collect(),
        }
    }

    /// Whether this step is the classify stage alone with `gpus_per_node` set: its
    /// transformers run on GPUs, in `mill-classify-gpu`.
    pub fn classify_on_gpus(&self) -> bool {
        self.gpus_per_node.is_some() && self.stages.len() == 1 && self.stages[0] == "classify"
    }

    /// What this step runs.
    pub fn kind(&self) -> Result<Kind> {
        let bad = |m: String| Err(Error::Usage(format!("step {}: {m}", self.name)));
        match (&self.phase, self.stages.is_empty()) {
            (Some(_), false) => bad("give `stages` or `phase`, not both".into()),
            (None, true) => bad("give `stages` (a chain) or `phase`".into()),
            (None, false) => {
                for (i, s) in self.stages.iter().enumerate() {
                    match crate::stages::chain_stage(s) {
                        None => {
                            return bad(format!(
                                "unknown stage {s:?} (chains hold {:?})",
                                crate::stages::chain_names()
                            ));
                        }
                        Some(stage) if stage.starts_chain && i > 0 => {
                            return bad(format!("{s} reads raw inputs: it can only start a chain"));
                        }
                        Some(_) => {}
                    }
                }
                Ok(Kind::Chain)
            }
            (Some(p), true) => Ok(match p.as_str() {
                "dedup.signatures" => Kind::DedupSignatures,
                "dedup.buckets" => Kind::DedupBuckets,
                "dedup.clusters" => Kind::DedupClusters,
                "dedup.filter" => Kind::DedupFilter,
                "dedup.index" => Kind::DedupIndex,
                "dedup.substring" => Kind::DedupSubstring,
                "dedup.substring_filter" => Kind::DedupSubstringFilter,
                "tokenize.train" => Kind::TokenizeTrain,
                "tokenize.encode" => Kind::TokenizeEncode,
                "decontam.index" => Kind::DecontamIndex,
                "train" => Kind::Train,
                "classify.threshold" => Kind::ClassifyThreshold,
                "classify.filter" => Kind::ClassifyFilter,
                other => return bad(format!("unknown phase {other:?}")),
            }),
        }
    }
}

impl Pipeline {
    /// Reads and checks a pipeline file from any address. A run's copy
    /// (`<run>/_pipeline.toml`) names its run by where it lies, wherever it is read from.
    /// An ablation file (one with `[[variant]]`s) is read as the one pipeline of its
    /// variants ([`crate::ablate`]).
    pub fn load(storage: &Storage, url: &str) -> Result<Pipeline> {
        let value: toml::Value = pipeline::cli::load_toml(storage, Some(url))?;
        let as_config = |e: Error| Error::Config {
            url: url.to_string(),
            message: e.to_string(),
        };
        let from = |e: toml::de::Error| Error::Config {
            url: url.to_string(),
            message: e.to_string(),
        };
        if crate::ablate::is_ablation(&value) {
            let ablation: crate::ablate::Ablation = value.try_into().map_err(from)?;
            return ablation.expand(storage).map_err(as_config);
        }
        let mut p: Pipeline = value.try_into().map_err(from)?;
        p.check().map_err(as_config)?;
        let copy = crate::exec::PIPELINE_COPY;
        if let Some(run) = url.strip_suffix(&format!("/{copy}")) {
            p.output = run.to_string();
        } else if url == copy {
            p.output = ".".into();
        }
        Ok(p)
    }

    /// This pipeline with every relative local address (the input, the output, a
    /// step's `input`, `clusters`, `tokenizer` or `against` that names no step) made
    /// absolute against `base`: what a run records, so that it reads the same from any
    /// folder and any machine of a shared file system.
    pub fn with_absolute_addresses(&self, base: &std::path::Path) -> Pipeline {
        let absolute = |s: &str| -> String {
            match Location::parse(s) {
                Ok(Location::Local(path)) if path.is_relative() => {
                    base.join(s).to_string_lossy().into_owned()
                }
                _ => s.to_string(),
            }
        };
        let names: Vec<String> = self.steps.iter().map(|s| s.name.clone()).collect();
        let reference = |r: &mut Option<String>| {
            if let Some(x) = r.as_mut()
                && !names.contains(x)
            {
                *x = absolute(x);
            }
        };
        let mut p = self.clone();
        p.input = absolute(&p.input);
        p.output = absolute(&p.output);
        for s in &mut p.steps {
            reference(&mut s.input);
            reference(&mut s.clusters);
            reference(&mut s.tokenizer);
            reference(&mut s.against);
            reference(&mut s.threshold);
        }
        p
    }

    /// Parses a pipeline from TOML text.
    pub fn parse(text: &str) -> Result<Pipeline> {
        let p: Pipeline = toml::from_str(text).map_err(|e| Error::Config {
            url: "(pipeline)".into(),
            message: e.to_string(),
        })?;
        p.check()?;
        Ok(p)
    }

    /// This pipeline, checked as [`Pipeline::parse`] checks a file.
    pub(crate) fn checked(self) -> Result<Pipeline> {
        self.check()?;
        Ok(self)
    }

    fn check(&self) -> Result<()> {
        if self.steps.is_empty() {
            return Err(Error::Usage("the pipeline has no [[step]]".into()));
        }
        let mut seen: Vec<&str> = Vec::new();
        for s in &self.steps {
            if s.name.is_empty()
                || s.name.starts_with(['_', '.'])
                || !s
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(Error::Usage(format!(
                    "step name {:?}: use letters, digits, - and _ (not first)",
                    s.name
                )));
            }
            if seen.contains(&s.name.as_str()) {
                return Err(Error::Usage(format!("two steps are named {}", s.name)));
            }
            let kind = s.kind()?;
            if s.nodes.is_some() && kind != Kind::Train {
                return Err(Error::Usage(format!(
                    "step {}: nodes is a setting of the train phase",
                    s.name
                )));
            }
            if s.gpus_per_node.is_some() && kind != Kind::Train && !s.classify_on_gpus() {
                return Err(Error::Usage(format!(
                    "step {}: gpus_per_node is a setting of the train phase, and of a chain of \
                     the classify stage alone (stages = [\"classify\"])",
                    s.name
                )));
            }
            if s.nodes == Some(0) || s.gpus_per_node == Some(0) {
                return Err(Error::Usage(format!(
                    "step {}: nodes and gpus_per_node are at least 1",
                    s.name
                )));
            }
            for r in [&s.input, &s.clusters, &s.tokenizer, &s.threshold]
                .into_iter()
                .flatten()
            {
                if self.steps.iter().any(|o| &o.name == r) && !seen.contains(&r.as_str()) {
                    return Err(Error::Usage(format!(
                        "step {} uses step {r}, which does not come before it",
                        s.name
                    )));
                }
            }
            seen.push(&s.name);
        }
        for stage in self.config.keys() {
            stage_check(stage)?(self)?;
        }
        // A step's own settings: only of the stages it runs, and checked merged.
        for (i, s) in self.steps.iter().enumerate() {
            if s.config.is_empty() {
                continue;
            }
            let runs = s.config_stages();
            let view = self.for_step(i);
            for stage in s.config.keys() {
                if !runs.contains(&stage.as_str()) {
                    return Err(Error::Usage(format!(
                        "step {}: [step.config.{stage}] is not a stage this step runs ({})",
                        s.name,
                        runs.join(", ")
                    )));
                }
                stage_check(stage)?(&view)
                    .map_err(|e| Error::Usage(format!("step {}: {e}", s.name)))?;
            }
        }
        Ok(())
    }

    /// This pipeline as step `i` sees it: each `[step.config.<stage>]` of the step
    /// merged over `[config.<stage>]` (tables key by key, other values replaced).
    pub fn for_step(&self, i: usize) -> std::borrow::Cow<'_, Pipeline> {
        let own = &self.steps[i].config;
        if own.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut p = self.clone();
        for (stage, value) in own {
            let merged = match p.config.remove(stage) {
                Some(mut base) => {
                    merge_toml(&mut base, value);
                    base
                }
                None => value.clone(),
            };
            p.config.insert(stage.clone(), merged);
        }
        std::borrow::Cow::Owned(p)
    }

    /// The run's address.
    pub fn run_location(&self) -> Result<Location> {
        Location::parse(&self.output)
    }

    /// The output folder of step `name`.
    pub fn step_output(&self, name: &str) -> Result<Location> {
        Ok(self.run_location()?.join(&format!("{name}/")))
    }

    /// The step named `name`.
    pub fn step(&self, name: &str) -> Result<(usize, &StepSpec)> {
        self.steps
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "no step {name}; the steps are {}",
                    self.steps
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// Resolves a reference: an earlier step's output, or an address.
    pub fn resolve(&self, reference: &str) -> Result<Location> {
        if self.steps.iter().any(|s| s.name == reference) {
            self.step_output(reference)
        } else {
            Location::parse(reference)
        }
    }

    /// The input of step `i`.
    pub fn input_of(&self, i: usize) -> Result<Location> {
        let s = &self.steps[i];
        match &s.input {
            Some(r) => self.resolve(r),
            None if i == 0 => Location::parse(&self.input),
            None => {
                // The previous step that writes documents, or the previous step.
                let prev = &self.steps[i - 1];
                self.step_output(&prev.name)
            }
        }
    }

    /// The configuration of `stage`, typed (defaults when the table is absent).
    pub fn stage_config<C: serde::de::DeserializeOwned>(&self, stage: &str) -> Result<C> {
        let value = self
            .config
            .get(stage)
            .cloned()
            .unwrap_or_else(|| toml::Value::Table(toml::map::Map::new()));
        value
            .try_into()
            .map_err(|e: toml::de::Error| Error::Config {
                url: format!("[config.{stage}]"),
                message: e.to_string(),
            })
    }

    /// Tasks of step `i` (`--tasks` overrides everything).
    pub fn tasks_of(&self, i: usize, flag: Option<usize>) -> usize {
        flag.or(self.steps[i].tasks).unwrap_or(self.tasks).max(1)
    }
}

/// The check of `[config.<stage>]`.
fn stage_check(stage: &str) -> Result<crate::stages::ConfigCheck> {
    match crate::stages::chain_stage(stage) {
        Some(s) => Ok(s.check),
        None => match crate::stages::PHASED.iter().find(|(n, _)| *n == stage) {
            Some((_, check)) => Ok(*check),
            None => Err(Error::Usage(format!("[config.{stage}]: no such stage"))),
        },
    }
}

/// `over` merged into `base`: tables key by key (recursively), any other value
/// replaced.
pub fn merge_toml(base: &mut toml::Value, over: &toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) => merge_toml(existing, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
input = "in/"
output = "out/run"
[config.dedup]
kind = "exact"
[[step]]
name = "text"
stages = ["import", "quality"]
[[step]]
name = "sig"
phase = "dedup.signatures"
[[step]]
name = "final"
phase = "dedup.filter"
input = "text"
clusters = "sig"
"#;

    #[test]
    fn parses_and_resolves() {
        let p = Pipeline::parse(GOOD).expect("parse");
        assert_eq!(p.steps.len(), 3);
        assert_eq!(
            p.input_of(0).expect("in").to_string(),
            Location::parse("in/").expect("l").to_string()
        );
        let text = p.step_output("text").expect("out").to_string();
        assert!(text.contains("out/run/text"), "{text}");
        assert_eq!(p.input_of(1).expect("in").to_string(), text);
        assert_eq!(p.input_of(2).expect("in").to_string(), text);
        let c: dedup::Config = p.stage_config("dedup").expect("config");
        assert_eq!(c.kind, dedup::Kind::Exact);
    }

    #[test]
    fn a_step_changes_its_stages_settings_for_itself() {
        let text = GOOD.replace(
            "stages = [\"import\", \"quality\"]",
            "stages = [\"import\", \"quality\"]\n[step.config.quality.gopher_quality]\nmin_doc_words = 80",
        );
        let p = Pipeline::parse(&text).expect("parse");
        let mine: quality::Config = p.for_step(0).stage_config("quality").expect("config");
        let theirs: quality::Config = p.for_step(1).stage_config("quality").expect("config");
        assert_eq!(mine.gopher_quality.min_doc_words, 80);
        assert_eq!(
            theirs.gopher_quality.min_doc_words,
            quality::Config::default().gopher_quality.min_doc_words
        );
        // Tables merge key by key: the dedup table's other keys stay.
        let dedup = GOOD.replace(
            "clusters = \"sig\"",
            "clusters = \"sig\"\n[step.config.dedup]\nbands = 7",
        );
        let p = Pipeline::parse(&dedup).expect("parse");
        let c: dedup::Config = p.for_step(2).stage_config("dedup").expect("config");
        assert_eq!((c.kind, c.bands), (dedup::Kind::Exact, 7));
        // Only the stages the step runs, and checked as their configuration.
        for (bad, says) in [
            (
                GOOD.replace(
                    "stages = [\"import\", \"quality\"]",
                    "stages = [\"import\", \"quality\"]\n[step.config.pii]",
                ),
                "not a stage this step runs",
            ),
            (
                GOOD.replace(
                    "stages = [\"import\", \"quality\"]",
                    "stages = [\"import\", \"quality\"]\n[step.config.quality]\nnope = 1",
                ),
                "nope",
            ),
        ] {
            let err = Pipeline::parse(&bad).expect_err(says).to_string();
            assert!(err.contains(says), "{err} should say {says}");
        }
    }

    #[test]
    fn refuses_mistakes() {
        for (bad, why) in [
            (GOOD.replace("dedup.filter", "dedup.nope"), "unknown phase"),
            (
                GOOD.replace("[\"import\", \"quality\"]", "[\"quality\", \"extract\"]"),
                "start a chain",
            ),
            (
                GOOD.replace("name = \"sig\"", "name = \"text\""),
                "two steps",
            ),
            (
                GOOD.replace(
                    "clusters = \"sig\"",
                    "clusters = \"sig\"\ntokenizer = \"final\"",
                ),
                "does not come before",
            ),
            (
                GOOD.replace("[config.dedup]", "[config.nope]"),
                "no such stage",
            ),
            (
                GOOD.replace("kind = \"exact\"", "kind = \"exact\"\nbogus = 1"),
                "",
            ),
        ] {
            let r = Pipeline::parse(&bad)
                .and_then(|p| p.stage_config::<dedup::Config>("dedup").map(|_| p));
            let err = r.expect_err(why).to_string();
            assert!(err.contains(why), "{err} should say {why}");
        }
        // A stage's table is parsed as its configuration when the file is read: a
        // misspelt key is refused before anything runs.
        let typo = GOOD.replace("kind = \"exact\"", "kind = \"exact\"\nbands_typo = 3");
        let err = Pipeline::parse(&typo).expect_err("typo").to_string();
        assert!(
            err.contains("[config.dedup]") && err.contains("bands_typo"),
            "{err}"
        );
    }
}
