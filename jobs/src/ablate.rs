//! Ablations: a base pipeline and named variants of it, each trained into the same
//! model on the same token budget, so that their data can be judged by what it trains.
//!
//! ```toml
//! pipeline = "fixtures/pipeline.toml"   # the base: its steps, its [config.*]
//! output = "out/ablation"               # where the ablation runs (default: the base's)
//! tokens = 40960                        # tokens each variant's models train on
//! seeds = [1, 2]                        # one model per seed and variant (default [1])
//! # tokenizer = "s3://…/tokenizer.json" # default: the base's tokenize.train step, on
//! #                                     # the base's data, for every variant
//! [train]                               # over the base's [config.train]: one model config
//! preset = "tiny"
//!
//! [[variant]]
//! name = "clean"                        # the base as it is
//!
//! [[variant]]
//! name = "stricter-no-dedup"
//! remove = ["signatures", "buckets", "clusters", "deduped"]   # steps dropped
//! [variant.config.quality.gopher_quality]   # over the base's [config.quality]
//! min_doc_words = 100
//! [[variant.step]]                      # a step replaced (same name) or added
//! name = "text"
//! stages = ["extract", "langid", "quality", "pii"]
//! ```
//!
//! A variant is the base with its changes: `remove` drops steps (a step that read a
//! dropped step's documents reads what that step read), `[[variant.step]]` replaces the
//! base step of its name or adds one (right after the last step it names), and
//! `[variant.config.<stage>]` is merged key by key over the base's table for every step
//! of the variant that runs the stage.
//!
//! The variants become one pipeline, so that `mill run`, `mill submit`, `mill status`
//! and resuming work on it as on any other. Each step is named after its base name
//! and a key: the hash of what it runs, its settings and the keys of what it reads. Two
//! variants' steps that would do the same work are one step, which runs once. The
//! train step of the base becomes one train step per variant and seed, its
//! `[config.train]` the base's with `[train]` over it, the seed (`train.seed` and
//! `data.seed`) and the steps that make the budget. What the pipeline holds of each
//! variant is in its `ablation` table, which `mill report` reads.

use std::collections::{BTreeMap, BTreeSet};

use pipeline::{Error, Result, Storage};
use serde::{Deserialize, Serialize};

use crate::spec::{Kind, Pipeline, StepSpec, merge_toml};

/// An ablation file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ablation {
    /// The base pipeline file's address.
    pub pipeline: String,
    /// The ablation's run (default: the base pipeline's output).
    pub output: Option<String>,
    /// Tokens each variant's model trains on: its data is repeated or cut to them.
    pub tokens: u64,
    /// The seeds: one model per variant and seed.
    #[serde(default = "first_seed")]
    pub seeds: Vec<i64>,
    /// A `tokenizer.json` for every variant; default: the base's `tokenize.train` step,
    /// trained on the base's data.
    pub tokenizer: Option<String>,
    /// Settings over the base's `[config.train]`: the one model of every variant.
    #[serde(default)]
    pub train: toml::Table,
    /// What every model is measured on.
    #[serde(default)]
    pub eval: Eval,
    /// The variants, in the report's order.
    #[serde(rename = "variant")]
    pub variants: Vec<Variant>,
}

/// The ablation's `[eval]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Eval {
    /// Reference sets, by name: documents (Parquet or JSONL, an address as a step's
    /// input), encoded with the common tokenizer; every model's loss on each is
    /// measured at each of its evaluations (`eval_every`).
    #[serde(default)]
    pub validation: BTreeMap<String, String>,
    /// Multiple-choice tasks, by name: JSONL files of `{"context", "choices", "gold"}`
    /// (any address), scored at each evaluation as lm-eval-harness scores `acc` and
    /// `acc_norm`.
    #[serde(default)]
    pub tasks: BTreeMap<String, String>,
}

fn first_seed() -> Vec<i64> {
    vec![1]
}

/// One variant: the base with these changes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    /// Settings merged over the base's `[config.<stage>]`, for this variant's steps.
    #[serde(default)]
    pub config: BTreeMap<String, toml::Value>,
    /// Base steps this variant does without.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Steps that replace the base step of their name, or are added.
    #[serde(default, rename = "step")]
    pub steps: Vec<StepSpec>,
}

/// What the expanded pipeline holds of an ablation (its `[ablation]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Tokens each model trains on.
    pub tokens: u64,
    /// Tokens of one training step (the steps are the budget over it, rounded up).
    pub tokens_per_step: u64,
    pub steps: u64,
    pub seeds: Vec<i64>,
    /// The step whose tokenizer every variant's tokens use (none when the ablation
    /// names a tokenizer file).
    pub tokenizer_step: Option<String>,
    /// The variants in order.
    pub variants: Vec<PlannedVariant>,
}

/// A variant's steps in the expanded pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedVariant {
    pub name: String,
    /// Its steps in order: the base name and the step that runs it.
    pub steps: Vec<(String, String)>,
    /// The step whose token shards it trains on.
    pub tokens_step: String,
    /// Its train steps, one per seed, in the order of `seeds`.
    pub train_steps: Vec<String>,
}

/// Whether a parsed TOML file is an ablation (it has `[[variant]]`s).
pub fn is_ablation(value: &toml::Value) -> bool {
    value.get("variant").is_some()
}

impl Ablation {
    /// Reads the base pipeline and expands the variants into one pipeline (see the
    /// module's documentation). Every mistake is found here, before anything runs.
    pub fn expand(&self, storage: &Storage) -> Result<Pipeline> {
        let base = Pipeline::load(storage, &self.pipeline)?;
        // The tasks are read now, so that a bad line stops the ablation before it runs.
        for url in self.eval.tasks.values() {
            crate::tasks::read(storage, url)?;
        }
        self.expand_from(base)
    }

    /// [`Ablation::expand`] from the base pipeline, parsed.
    pub fn expand_from(&self, base: Pipeline) -> Result<Pipeline> {
        let usage = |m: String| Error::Usage(format!("ablation: {m}"));
        if self.variants.is_empty() {
            return Err(usage("give at least one [[variant]]".into()));
        }
        if self.seeds.is_empty() {
            return Err(usage("seeds is empty".into()));
        }
        if self.tokens == 0 {
            return Err(usage("tokens is 0".into()));
        }
        if base.ablation.is_some() {
            return Err(usage(format!(
                "the base pipeline {} is itself an ablation",
                self.pipeline
            )));
        }
        let mut names = BTreeSet::new();
        for v in &self.variants {
            if v.name.is_empty()
                || !v
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                return Err(usage(format!(
                    "variant name {:?}: use letters, digits and -",
                    v.name
                )));
            }
            if !names.insert(v.name.as_str()) {
                return Err(usage(format!("two variants are named {}", v.name)));
            }
        }
        let base = explicit(&base);
        let base_config = base.config.clone();
        let trains: Vec<&StepSpec> = base
            .steps
            .iter()
            .filter(|s| s.kind().ok() == Some(Kind::Train))
            .collect();
        let [train] = trains.as_slice() else {
            return Err(usage(format!(
                "the base pipeline needs one train step (phase = \"train\"); it has {}",
                trains.len()
            )));
        };
        let train = (*train).clone();
        let tokens_name = train.input.clone().unwrap_or_default();

        // Each variant's steps (the train step apart), checked as a pipeline of its own.
        let mut merged = Merged {
            base_config,
            steps: Vec::new(),
            names: BTreeSet::new(),
        };
        let mut planned = Vec::new();
        let tokenizer_step = self.tokenizer_step(&base)?;
        let shared_tokenizer = match &tokenizer_step {
            Some(name) => Some(merged.add(&without_train(&base), name, &mut BTreeMap::new())?),
            None => None,
        };
        for v in &self.variants {
            let p = self
                .variant(&base, v, shared_tokenizer.as_ref())
                .map_err(|e| usage(format!("variant {}: {e}", v.name)))?;
            let mut steps = Vec::new();
            let mut done = BTreeMap::new();
            for s in &p.steps {
                steps.push((s.name.clone(), merged.add(&p, &s.name, &mut done)?));
            }
            let tokens_step = steps
                .iter()
                .find(|(n, _)| *n == tokens_name)
                .map(|(_, k)| k.clone())
                .ok_or_else(|| {
                    usage(format!(
                        "variant {}: it has no step {tokens_name}, which the train step reads",
                        v.name
                    ))
                })?;
            planned.push(PlannedVariant {
                name: v.name.clone(),
                steps,
                tokens_step,
                train_steps: Vec::new(),
            });
        }

        // The reference sets, each encoded once with the common tokenizer.
        let mut eval_sets = toml::Table::new();
        for (name, url) in &self.eval.validation {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(usage(format!(
                    "[eval] validation {name:?}: name it with letters, digits, - and _"
                )));
            }
            let mut p = without_train(&base);
            let tokenizer = match (&self.tokenizer, &shared_tokenizer) {
                (Some(url), _) => url.clone(),
                (None, Some(step)) => format!("{SHARED}{step}"),
                (None, None) => return Err(usage("no tokenizer for the reference sets".into())),
            };
            p.steps = vec![StepSpec {
                name: format!("eval-{name}"),
                phase: Some("tokenize.encode".into()),
                input: Some(url.clone()),
                tokenizer: Some(tokenizer),
                ..StepSpec::default()
            }];
            let step = merged.add(&p, &format!("eval-{name}"), &mut BTreeMap::new())?;
            eval_sets.insert(name.clone(), toml::Value::String(step));
        }

        // The model: the base's [config.train] with [train] over it, the same for all.
        let mut model = base
            .config
            .get("train")
            .cloned()
            .unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
        merge_toml(&mut model, &toml::Value::Table(self.train.clone()));
        if !eval_sets.is_empty() {
            merge_toml(
                &mut model,
                &toml::Value::Table(toml::Table::from_iter([(
                    "eval_sets".to_string(),
                    toml::Value::Table(eval_sets),
                )])),
            );
        }
        if !self.eval.tasks.is_empty() {
            // Addresses that read the same from any folder (the train step may run
            // elsewhere).
            let cwd =
                std::env::current_dir().map_err(|e| usage(format!("the current folder: {e}")))?;
            let tasks = self
                .eval
                .tasks
                .iter()
                .map(|(name, url)| {
                    let url = match pipeline::Location::parse(url) {
                        Ok(pipeline::Location::Local(p)) if p.is_relative() => {
                            cwd.join(p).to_string_lossy().into_owned()
                        }
                        _ => url.clone(),
                    };
                    (name.clone(), toml::Value::String(url))
                })
                .collect();
            merge_toml(
                &mut model,
                &toml::Value::Table(toml::Table::from_iter([(
                    "eval_tasks".to_string(),
                    toml::Value::Table(tasks),
                )])),
            );
        }
        let world =
            u64::from(train.nodes.unwrap_or(1)) * u64::from(train.gpus_per_node.unwrap_or(1));
        let per_step = tokens_per_step(&model, world).map_err(usage)?;
        let steps = self.tokens.div_ceil(per_step);
        for (v, plan) in self.variants.iter().zip(&mut planned) {
            for &seed in &self.seeds {
                let mut config = model.clone();
                merge_toml(&mut config, &budget(seed, steps));
                let mut spec = train.clone();
                spec.name = format!("{}-{}-seed{seed}", train.name, v.name);
                spec.input = Some(plan.tokens_step.clone());
                spec.config = BTreeMap::from([("train".to_string(), config)]);
                plan.train_steps.push(spec.name.clone());
                merged.steps.push(spec);
            }
        }
        let mut out = Pipeline {
            output: self.output.clone().unwrap_or_else(|| base.output.clone()),
            steps: merged.steps,
            ablation: Some(Plan {
                tokens: self.tokens,
                tokens_per_step: per_step,
                steps,
                seeds: self.seeds.clone(),
                tokenizer_step: shared_tokenizer,
                variants: planned,
            }),
            ..base
        };
        out.config.remove("train");
        out.checked()
    }

    /// The base step whose tokenizer every variant uses, or `None` when the ablation
    /// names a tokenizer file.
    fn tokenizer_step(&self, base: &Pipeline) -> Result<Option<String>> {
        if self.tokenizer.is_some() {
            return Ok(None);
        }
        let trains: Vec<&StepSpec> = base
            .steps
            .iter()
            .filter(|s| s.kind().ok() == Some(Kind::TokenizeTrain))
            .collect();
        match trains.as_slice() {
            [one] => Ok(Some(one.name.clone())),
            _ => Err(Error::Usage(format!(
                "ablation: the base pipeline has {} tokenize.train steps; give the one \
                 tokenizer of every variant in `tokenizer`, or keep one such step",
                trains.len()
            ))),
        }
    }

    /// Variant `v` as a pipeline of its own (no train step): the base with its changes,
    /// every tokenize.encode step reading the common tokenizer.
    fn variant(
        &self,
        base: &Pipeline,
        v: &Variant,
        shared_tokenizer: Option<&String>,
    ) -> Result<Pipeline> {
        let mut p = without_train(base);
        for name in &v.remove {
            if !p.steps.iter().any(|s| &s.name == name) {
                return Err(Error::Usage(format!(
                    "remove: the base has no step {name} (its steps: {})",
                    step_names(&p)
                )));
            }
        }
        let removed: BTreeMap<String, Option<String>> = p
            .steps
            .iter()
            .filter(|s| v.remove.contains(&s.name))
            .map(|s| (s.name.clone(), s.input.clone()))
            .collect();
        p.steps.retain(|s| !removed.contains_key(&s.name));
        for s in &mut p.steps {
            // Documents a removed step read are read instead (through every removed
            // step in a row).
            while let Some(through) = s.input.as_ref().and_then(|i| removed.get(i)) {
                s.input.clone_from(through);
            }
            for (what, r) in [
                ("clusters", &s.clusters),
                ("tokenizer", &s.tokenizer),
                ("against", &s.against),
                ("threshold", &s.threshold),
            ] {
                if let Some(name) = r.as_ref().filter(|r| removed.contains_key(*r)) {
                    return Err(Error::Usage(format!(
                        "remove: step {} reads step {name} as its {what}; remove it too or replace it",
                        s.name
                    )));
                }
            }
        }
        for s in &v.steps {
            let mut s = s.clone();
            if s.kind()? == Kind::Train {
                return Err(Error::Usage(format!(
                    "step {}: the train step is the ablation's ([train], tokens, seeds)",
                    s.name
                )));
            }
            if let Some(at) = p.steps.iter().position(|o| o.name == s.name) {
                if s.input.is_none() {
                    s.input.clone_from(&p.steps[at].input);
                }
                p.steps[at] = s;
            } else {
                // Right after the last step it reads, so that what it reads comes first.
                let reads: Vec<&String> = [&s.input, &s.clusters, &s.tokenizer, &s.threshold]
                    .into_iter()
                    .flatten()
                    .collect();
                let at = p
                    .steps
                    .iter()
                    .rposition(|o| reads.contains(&&o.name))
                    .map_or(0, |i| i + 1);
                if s.input.is_none() {
                    s.input = Some(match at {
                        0 => p.input.clone(),
                        _ => p.steps[at - 1].name.clone(),
                    });
                }
                p.steps.insert(at, s);
            }
        }
        for (stage, value) in &v.config {
            // Settings no step would read are a mistake, not a no-op.
            if !p
                .steps
                .iter()
                .any(|s| s.config_stages().contains(&stage.as_str()))
            {
                return Err(Error::Usage(format!(
                    "[variant.config.{stage}]: no step of the variant runs {stage}"
                )));
            }
            match p.config.get_mut(stage) {
                Some(base_value) => merge_toml(base_value, value),
                None => {
                    p.config.insert(stage.clone(), value.clone());
                }
            }
        }
        if let Some(url) = &self.tokenizer {
            p.steps
                .retain(|s| s.kind().ok() != Some(Kind::TokenizeTrain));
            for s in &mut p.steps {
                if s.kind()? == Kind::TokenizeEncode {
                    s.tokenizer = Some(url.clone());
                }
            }
        } else if let Some(shared) = shared_tokenizer {
            // Every variant's tokens come from the base's tokenizer: the variant's own
            // tokenize.train step goes, and what named it names the shared one.
            let own: Vec<String> = p
                .steps
                .iter()
                .filter(|s| s.kind().ok() == Some(Kind::TokenizeTrain))
                .map(|s| s.name.clone())
                .collect();
            p.steps.retain(|s| !own.contains(&s.name));
            for s in &mut p.steps {
                if s.tokenizer.as_ref().is_some_and(|t| own.contains(t)) {
                    s.tokenizer = Some(format!("{SHARED}{shared}"));
                }
            }
        }
        p.clone().checked()
    }
}

/// A reference to a step of the merged pipeline already (the shared tokenizer), not
/// to a step of the variant.
const SHARED: &str = "@merged:";

/// Steps of the merged pipeline, each added once by its key.
struct Merged {
    /// The base's `[config]`, the merged pipeline's: a step keeps its own tables only
    /// where they differ.
    base_config: BTreeMap<String, toml::Value>,
    steps: Vec<StepSpec>,
    /// The merged names added.
    names: BTreeSet<String>,
}

impl Merged {
    /// Adds step `name` of `p` (and, first, the steps it reads), unless a step doing
    /// the same work is there; returns its name in the merged pipeline. `done` holds
    /// the steps of `p` already added, so that each is keyed once.
    fn add(
        &mut self,
        p: &Pipeline,
        name: &str,
        done: &mut BTreeMap<String, String>,
    ) -> Result<String> {
        if let Some(merged) = done.get(name) {
            return Ok(merged.clone());
        }
        let (i, spec) = p.step(name)?;
        let mut spec = spec.clone();
        // What it reads, by merged names.
        for r in [
            &mut spec.input,
            &mut spec.clusters,
            &mut spec.tokenizer,
            &mut spec.against,
            &mut spec.threshold,
        ] {
            let Some(x) = r.as_mut() else { continue };
            if let Some(merged) = x.strip_prefix(SHARED) {
                *x = merged.to_string();
            } else if p.steps.iter().any(|s| s.name == *x) {
                *x = self.add(p, x, done)?;
            }
        }
        // The settings it runs with (the variant's tables of its stages) are part of
        // its key; it keeps those that differ from the merged pipeline's [config].
        let view = p.for_step(i);
        let tables: BTreeMap<String, toml::Value> = spec
            .config_stages()
            .into_iter()
            .filter_map(|stage| Some((stage.to_string(), view.config.get(stage)?.clone())))
            .collect();
        let keyed = StepSpec {
            name: String::new(),
            config: tables.clone(),
            ..spec.clone()
        };
        let text =
            serde_json::to_string(&keyed).map_err(|e| Error::Usage(format!("step {name}: {e}")))?;
        let merged_name = format!(
            "{name}-{}",
            &pipeline::cli::sha256_hex(text.as_bytes())[..10]
        );
        if self.names.insert(merged_name.clone()) {
            spec.name = merged_name.clone();
            spec.config = tables
                .into_iter()
                .filter(|(stage, t)| self.base_config.get(stage) != Some(t))
                .collect();
            self.steps.push(spec);
        }
        done.insert(name.to_string(), merged_name.clone());
        Ok(merged_name)
    }
}

fn step_names(p: &Pipeline) -> String {
    p.steps
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The base with every step's input named (the previous step's or the pipeline's),
/// so that removing or adding steps does not change what the others read.
fn explicit(base: &Pipeline) -> Pipeline {
    let mut p = base.clone();
    for i in 0..p.steps.len() {
        if p.steps[i].input.is_none() {
            p.steps[i].input = Some(match i {
                0 => p.input.clone(),
                _ => p.steps[i - 1].name.clone(),
            });
        }
    }
    p
}

/// The pipeline without its train steps.
fn without_train(p: &Pipeline) -> Pipeline {
    let mut p = p.clone();
    p.steps.retain(|s| s.kind().ok() != Some(Kind::Train));
    p
}

/// The train settings that make a model of `steps` steps with `seed`.
fn budget(seed: i64, steps: u64) -> toml::Value {
    let steps = steps as i64;
    toml::Value::Table(toml::Table::from_iter([
        (
            "train".to_string(),
            toml::Value::Table(toml::Table::from_iter([
                ("seed".to_string(), toml::Value::Integer(seed)),
                ("steps".to_string(), toml::Value::Integer(steps)),
                (
                    "schedule".to_string(),
                    toml::Value::Table(toml::Table::from_iter([(
                        "total_steps".to_string(),
                        toml::Value::Integer(steps),
                    )])),
                ),
            ])),
        ),
        (
            "data".to_string(),
            toml::Value::Table(toml::Table::from_iter([(
                "seed".to_string(),
                toml::Value::Integer(seed),
            )])),
        ),
    ]))
}

/// Tokens of one step of the model's run file: `train.global_batch_tokens`, or
/// `train.micro_batch × data.seq_len × train.accumulation × world`. The ablation needs
/// them given (not the trainer's defaults) to turn its budget into steps.
fn tokens_per_step(model: &toml::Value, world: u64) -> std::result::Result<u64, String> {
    let get = |table: &str, key: &str| -> Option<i64> { model.get(table)?.get(key)?.as_integer() };
    if let Some(g) = get("train", "global_batch_tokens").filter(|&g| g > 0) {
        return Ok(g as u64);
    }
    let need = |table: &str, key: &str| {
        get(table, key).filter(|&x| x > 0).ok_or_else(|| {
            format!(
                "[train] needs {table}.{key} (or train.global_batch_tokens) to turn the \
                 token budget into steps"
            )
        })
    };
    let micro = need("train", "micro_batch")?;
    let seq_len = need("data", "seq_len")?;
    let accumulation = get("train", "accumulation").unwrap_or(1).max(1);
    Ok(micro as u64 * seq_len as u64 * accumulation as u64 * world)
}

/// What one variant's run gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantResult {
    pub name: String,
    /// Each step's documents in and out, in order (base names).
    pub funnel: Vec<FunnelStep>,
    /// Tokens of its shards.
    pub tokens: Option<u64>,
    /// Its data over the budget: above 1 it was cut to the budget, below 1 repeated.
    pub data_over_budget: Option<f64>,
    /// Per seed, in the order of the plan's seeds.
    pub seeds: Vec<SeedResult>,
}

/// A step of a variant's funnel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunnelStep {
    pub step: String,
    /// The merged pipeline's step that ran it (shared steps have one).
    pub ran_as: String,
    pub docs_in: u64,
    pub docs_out: u64,
}

/// What one model of a variant reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedResult {
    pub seed: i64,
    pub step: String,
    /// Steps trained and tokens seen (none before it trained).
    pub train_steps: Option<u64>,
    pub train_tokens: Option<u64>,
    /// The last step's training loss.
    pub train_loss: Option<f64>,
    /// The last validation loss (on the variant's own held-out share).
    pub val_loss: Option<f64>,
    /// The last loss on each reference set: the figures that compare variants.
    pub eval_losses: BTreeMap<String, f64>,
    /// The last accuracies on each multiple-choice task.
    pub tasks: BTreeMap<String, crate::train::TaskScore>,
}

/// Each variant's funnel, tokens and models, from the run's markers.
pub fn results(storage: &Storage, p: &Pipeline) -> Result<Vec<VariantResult>> {
    let plan = p
        .ablation
        .as_ref()
        .ok_or_else(|| Error::Usage(format!("{} is not an ablation's run", p.output)))?;
    let mut out = Vec::new();
    for v in &plan.variants {
        let mut funnel = Vec::new();
        for (name, ran_as) in &v.steps {
            let (_, spec) = p.step(ran_as)?;
            if !spec.kind()?.writes_documents() {
                continue;
            }
            let stats = crate::exec::marker_stats(storage, &p.step_output(ran_as)?)?.1;
            funnel.push(FunnelStep {
                step: name.clone(),
                ran_as: ran_as.clone(),
                docs_in: stats.docs_in,
                docs_out: stats.docs_out,
            });
        }
        let tokens = tokenize::read_manifest(storage, &p.step_output(&v.tokens_step)?)
            .ok()
            .map(|m| m.tokens);
        let mut seeds = Vec::new();
        for (&seed, step) in plan.seeds.iter().zip(&v.train_steps) {
            let stats = crate::exec::marker_stats(storage, &p.step_output(step)?)?.1;
            seeds.push(SeedResult {
                seed,
                step: step.clone(),
                train_steps: stats.counts.get("train_steps").copied(),
                train_tokens: stats.counts.get("train_tokens").copied(),
                train_loss: stats.values.get("train_loss").copied(),
                val_loss: stats.values.get("val_loss").copied(),
                eval_losses: stats
                    .values
                    .iter()
                    .filter_map(|(k, v)| {
                        Some((k.strip_prefix(crate::train::EVAL_LOSS)?.to_string(), *v))
                    })
                    .collect(),
                tasks: stats
                    .values
                    .iter()
                    .filter_map(|(k, &acc)| {
                        let name = k.strip_prefix(crate::train::TASK_ACC)?;
                        let norm = stats
                            .values
                            .get(&format!("{}{name}", crate::train::TASK_ACC_NORM))?;
                        Some((
                            name.to_string(),
                            crate::train::TaskScore {
                                acc,
                                acc_norm: *norm,
                            },
                        ))
                    })
                    .collect(),
            });
        }
        out.push(VariantResult {
            name: v.name.clone(),
            funnel,
            tokens,
            data_over_budget: tokens.map(|t| t as f64 / plan.tokens as f64),
            seeds,
        });
    }
    Ok(out)
}

/// The mean and the spread (largest less smallest) of the values present.
pub fn mean_spread(values: impl IntoIterator<Item = Option<f64>>) -> Option<(f64, f64)> {
    let v: Vec<f64> = values.into_iter().flatten().collect();
    if v.is_empty() {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let spread = v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - v.iter().copied().fold(f64::INFINITY, f64::min);
    Some((mean, spread))
}

/// The comparison table `mill ablate` prints: a row per variant, the loss on each
/// reference set (mean and spread over the seeds) after its documents and tokens.
pub fn table(results: &[VariantResult]) -> String {
    let sets: BTreeSet<&String> = results
        .iter()
        .flat_map(|r| r.seeds.iter().flat_map(|s| s.eval_losses.keys()))
        .collect();
    let mut s = format!(
        "{:<16} {:>9} {:>10} {:>12} {:>20} {:>20}",
        "variant", "docs", "tokens", "data/budget", "train loss (spread)", "own val (spread)"
    );
    for set in &sets {
        s.push_str(&format!(" {:>22}", format!("{set} loss (spread)")));
    }
    let tasks: BTreeSet<&String> = results
        .iter()
        .flat_map(|r| r.seeds.iter().flat_map(|s| s.tasks.keys()))
        .collect();
    for task in &tasks {
        s.push_str(&format!(
            " {:>20} {:>20}",
            format!("{task} acc"),
            format!("{task} acc_norm")
        ));
    }
    s.push('\n');
    let cell =
        |x: Option<(f64, f64)>| x.map_or("-".to_string(), |(m, d)| format!("{m:.4} ({d:.4})"));
    for r in results {
        let docs = r
            .funnel
            .last()
            .map_or("-".into(), |f| f.docs_out.to_string());
        s.push_str(&format!(
            "{:<16} {:>9} {:>10} {:>12} {:>20} {:>20}",
            r.name,
            docs,
            r.tokens.map_or("-".into(), |t| t.to_string()),
            r.data_over_budget.map_or("-".into(), |x| format!("{x:.2}")),
            cell(mean_spread(r.seeds.iter().map(|x| x.train_loss))),
            cell(mean_spread(r.seeds.iter().map(|x| x.val_loss))),
        ));
        for set in &sets {
            let v = mean_spread(r.seeds.iter().map(|x| x.eval_losses.get(*set).copied()));
            s.push_str(&format!(" {:>22}", cell(v)));
        }
        for task in &tasks {
            let acc = mean_spread(r.seeds.iter().map(|x| Some(x.tasks.get(*task)?.acc)));
            let norm = mean_spread(r.seeds.iter().map(|x| Some(x.tasks.get(*task)?.acc_norm)));
            s.push_str(&format!(" {:>20} {:>20}", cell(acc), cell(norm)));
        }
        s.push('\n');
    }
    s.push_str(
        "docs: the last document step's output; data/budget: above 1 the data was cut to the \
         budget, below 1 repeated; own val: the variant's own held-out share (not comparable \
         across variants); <set> loss: the reference set's; spread: largest less smallest \
         over the seeds\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
input = "in/"
output = "out/base"
[config.quality]
[config.tokenize.train]
vocab_size = 1000
[config.train]
preset = "tiny"
[config.train.data]
seq_len = 64
[config.train.train]
micro_batch = 4
[[step]]
name = "text"
stages = ["import", "quality"]
[[step]]
name = "signatures"
phase = "dedup.signatures"
[[step]]
name = "buckets"
phase = "dedup.buckets"
[[step]]
name = "clusters"
phase = "dedup.clusters"
[[step]]
name = "deduped"
phase = "dedup.filter"
input = "text"
clusters = "clusters"
[[step]]
name = "tokenizer"
phase = "tokenize.train"
[[step]]
name = "tokens"
phase = "tokenize.encode"
input = "deduped"
tokenizer = "tokenizer"
[[step]]
name = "model"
phase = "train"
input = "tokens"
"#;

    fn expand(ablation: &str) -> Result<Pipeline> {
        let a: Ablation = toml::from_str(ablation).map_err(|e| Error::Usage(e.to_string()))?;
        a.expand_from(Pipeline::parse(BASE)?)
    }

    fn steps_of<'a>(p: &'a Pipeline, variant: &str) -> BTreeMap<&'a str, &'a str> {
        let plan = p.ablation.as_ref().expect("plan");
        let v = plan
            .variants
            .iter()
            .find(|v| v.name == variant)
            .expect("variant");
        v.steps
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect()
    }

    #[test]
    fn variants_share_the_steps_their_changes_leave_alone() {
        let file = r#"
pipeline = "base.toml"
tokens = 1000
seeds = [1, 2]
[[variant]]
name = "base"
[[variant]]
name = "strict"
[variant.config.quality.gopher_quality]
min_doc_words = 80
[[variant]]
name = "no-dedup"
remove = ["signatures", "buckets", "clusters", "deduped"]
"#;
        let p = expand(file).expect("expands");
        // The same file, the same pipeline (names are keys of the work).
        assert_eq!(expand(file).expect("again"), p);
        let (base, strict, nodedup) = (
            steps_of(&p, "base"),
            steps_of(&p, "strict"),
            steps_of(&p, "no-dedup"),
        );
        // The quality change makes every step after it another; removing dedup keeps
        // the base's text step.
        assert_ne!(base["text"], strict["text"]);
        assert_ne!(base["deduped"], strict["deduped"]);
        assert_eq!(base["text"], nodedup["text"]);
        assert!(!nodedup.contains_key("deduped"));
        // no-dedup's tokens read its text step, through the removed steps.
        let (_, tokens) = p.step(nodedup["tokens"]).expect("tokens");
        assert_eq!(tokens.input.as_deref(), Some(base["text"]));
        // One tokenizer, the base's, for everyone.
        let plan = p.ablation.as_ref().expect("plan");
        let tokenizer = plan.tokenizer_step.clone().expect("shared tokenizer");
        let trainers = p
            .steps
            .iter()
            .filter(|s| s.phase.as_deref() == Some("tokenize.train"))
            .count();
        assert_eq!(trainers, 1);
        for v in ["base", "strict", "no-dedup"] {
            let (_, t) = p.step(steps_of(&p, v)["tokens"]).expect("tokens");
            assert_eq!(t.tokenizer.as_deref(), Some(tokenizer.as_str()), "{v}");
        }
        // The strict variant's text step keeps its own quality settings; the pipeline's
        // [config] stays the base's.
        let (i, _) = p.step(strict["text"]).expect("text");
        let q = p.for_step(i).config["quality"].clone();
        assert_eq!(q["gopher_quality"]["min_doc_words"].as_integer(), Some(80));
        assert!(p.config["quality"].get("gopher_quality").is_none());
        // A model per variant and seed, on the budget: 1,000 tokens of 256 a step.
        assert_eq!((plan.tokens_per_step, plan.steps), (256, 4));
        let models: Vec<&str> = p
            .steps
            .iter()
            .filter(|s| s.phase.as_deref() == Some("train"))
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(models.len(), 6);
        let (_, m) = p.step("model-strict-seed2").expect("model");
        let train = &m.config["train"];
        assert_eq!(train["train"]["seed"].as_integer(), Some(2));
        assert_eq!(train["data"]["seed"].as_integer(), Some(2));
        assert_eq!(train["train"]["steps"].as_integer(), Some(4));
        assert_eq!(m.input.as_deref(), Some(strict["tokens"]));
    }

    #[test]
    fn an_added_step_comes_after_what_it_reads() {
        let p = expand(
            r#"
pipeline = "base.toml"
tokens = 1000
[[variant]]
name = "scored"
[[variant.step]]
name = "pii"
stages = ["pii"]
input = "deduped"
[[variant.step]]
name = "tokens"
phase = "tokenize.encode"
input = "pii"
tokenizer = "tokenizer"
"#,
        )
        .expect("expands");
        let order: Vec<&str> = p.steps.iter().map(|s| s.name.as_str()).collect();
        let at = |prefix: &str| {
            order
                .iter()
                .position(|n| n.starts_with(prefix))
                .unwrap_or(usize::MAX)
        };
        assert!(
            at("deduped-") < at("pii-") && at("pii-") < at("tokens-"),
            "{order:?}"
        );
    }

    #[test]
    fn a_given_tokenizer_serves_every_variant() {
        let p = expand(
            "pipeline = \"base.toml\"\ntokens = 1000\ntokenizer = \"s3://b/tokenizer.json\"\n\
             [[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\nremove = [\"deduped\"]\n",
        )
        .expect("expands");
        assert!(
            p.steps
                .iter()
                .all(|s| s.phase.as_deref() != Some("tokenize.train"))
        );
        let encoders: Vec<&StepSpec> = p
            .steps
            .iter()
            .filter(|s| s.phase.as_deref() == Some("tokenize.encode"))
            .collect();
        assert_eq!(encoders.len(), 2);
        for s in encoders {
            assert_eq!(s.tokenizer.as_deref(), Some("s3://b/tokenizer.json"));
        }
        assert_eq!(
            p.ablation.as_ref().and_then(|a| a.tokenizer_step.clone()),
            None
        );
    }

    #[test]
    fn mistakes_are_named() {
        let head = "pipeline = \"base.toml\"\ntokens = 1000\n[[variant]]\nname = \"v\"\n";
        for (tail, says) in [
            (
                "remove = [\"clusters\"]\n",
                "reads step clusters as its clusters",
            ),
            ("remove = [\"nope\"]\n", "the base has no step nope"),
            (
                "[variant.config.pii]\nx = 1\n",
                "no step of the variant runs pii",
            ),
            (
                "[variant.config.quality.c4]\nenabled = false\n\
                 [[variant.step]]\nname = \"text\"\nstages = [\"import\"]\n",
                "no step of the variant runs quality",
            ),
            ("[variant.config.quality]\nnot_a_key = 1\n", "not_a_key"),
            (
                "[[variant.step]]\nname = \"model\"\nphase = \"train\"\n",
                "the train step is the ablation's",
            ),
        ] {
            let err = expand(&format!("{head}{tail}"))
                .expect_err(says)
                .to_string();
            assert!(err.contains(says), "{err} should say {says}");
        }
        let no_batch = BASE.replace("micro_batch = 4", "");
        let a: Ablation = toml::from_str(head).expect("parse");
        let err = a
            .expand_from(Pipeline::parse(&no_batch).expect("base"))
            .expect_err("no micro_batch")
            .to_string();
        assert!(err.contains("train.micro_batch"), "{err}");
    }
}
