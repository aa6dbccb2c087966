//! Stage classify: learned quality scores, as DCLM-Baseline and FineWeb-Edu were
//! chosen. Each configured classifier scores every document and writes its scores as
//! columns; it drops a document only when its configuration says so.
//!
//! - fastText classifiers of any labels ([`fasttext`]): DCLM's `fasttext-oh-eli5`,
//!   or one `mill-classify train` fits. The same predictor as langid and toxicity.
//! - Transformer sequence classifiers in the Hugging Face layout ([`transformer`]):
//!   BERT (FineWeb-Edu's classifier) and XLM-RoBERTa, on the CPU here, or on GPUs
//!   through the trainer's libtorch (`mill-classify-gpu`).
//!
//! Columns of a classifier named `edu`: `edu_score` (float32: the chosen label's
//! probability, or the regression output), `edu_int_score` for a regression head
//! (rounded half to even and clamped, as FineWeb-Edu's `int_score`), `edu_label` (the
//! top label, when no label is chosen and the model has several), and with
//! `all_labels`, `edu_prob_<label>` for every label.
//!
//! Drops: `min_score`, `max_score` and `min_int_score` drop documents in the scoring
//! pass (`<name>_below_min`, `<name>_above_max`, `<name>_int_below_min`); `keep_top`
//! keeps a share of the whole corpus, in two more phases ([`top`]): every input's
//! scores are summarised in a mergeable quantile sketch beside its marker, a
//! `classify.threshold` unit merges them into the threshold, and `classify.filter`
//! keeps the documents at or over it.

pub mod fasttext;
pub mod text;
pub mod top;
pub mod train;
pub mod transformer;

use pipeline::shard::ShardOptions;
use pipeline::{
    Column, ColumnKind, Document, DocumentSource, Error, Measure, Result, Stage, Step, Storage,
    Value, Verdict,
};
use serde::{Deserialize, Serialize};

pub use text::TextForm;
pub use transformer::{BackendFactory, cpu_backend};

/// The whole configuration (`[config.classify]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The classifiers (`[[classifier]]`), each writing its own columns, run in order.
    #[serde(rename = "classifier")]
    pub classifiers: Vec<ClassifierConfig>,
    /// Settings of `mill-classify train`.
    pub train: train::TrainConfig,
}

/// The kinds of classifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A supervised fastText model (`.bin` or `.ftz`).
    Fasttext,
    /// A Hugging Face sequence classifier folder.
    Transformer,
}

/// One classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// Names its columns (`<name>_score`, …): lowercase letters, digits and `_`.
    pub name: String,
    pub kind: Kind,
    /// fastText: the model file; transformer: the model folder. A path or storage URL.
    pub model: String,
    /// Expected SHA-256 of the model file (fastText) or of `model.safetensors`
    /// (transformer), checked when given.
    #[serde(default)]
    pub model_sha256: Option<String>,
    /// The label whose probability is the score, with or without `__label__` (DCLM's
    /// `hq`). Unset: the top label's probability, and the label in `<name>_label`. A
    /// regression head has no labels to choose.
    #[serde(default)]
    pub label: Option<String>,
    /// Also write every label's probability (`<name>_prob_<label>`).
    #[serde(default)]
    pub all_labels: bool,
    /// Drop documents scoring under this.
    #[serde(default)]
    pub min_score: Option<f64>,
    /// Drop documents scoring over this.
    #[serde(default)]
    pub max_score: Option<f64>,
    /// Regression heads: drop documents whose `int_score` is under this (FineWeb-Edu
    /// keeps 3 and over).
    #[serde(default)]
    pub min_int_score: Option<i64>,
    /// Keep this share of the whole corpus, the highest scores (DCLM-Baseline keeps
    /// 0.1), through the `classify.threshold` and `classify.filter` phases.
    #[serde(default)]
    pub keep_top: Option<f64>,
    /// fastText: the form texts are scored in, the form the model was trained on.
    #[serde(default)]
    pub text: TextForm,
    /// Transformer: cut texts to this many tokens (default: the tokenizer's
    /// `model_max_length`, at most the position table, 512 for BERT and XLM-R).
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// Regression heads: `int_score` is the score rounded and clamped to this range
    /// (FineWeb-Edu's 0 to 5).
    #[serde(default = "default_int_range")]
    pub int_score_range: [i64; 2],
}

fn default_int_range() -> [i64; 2] {
    [0, 5]
}

impl ClassifierConfig {
    /// A classifier of `kind` named `name` on `model`, every other setting at its
    /// default.
    pub fn new(name: &str, kind: Kind, model: &str) -> ClassifierConfig {
        ClassifierConfig {
            name: name.into(),
            kind,
            model: model.into(),
            model_sha256: None,
            label: None,
            all_labels: false,
            min_score: None,
            max_score: None,
            min_int_score: None,
            keep_top: None,
            text: TextForm::default(),
            max_tokens: None,
            int_score_range: default_int_range(),
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |m: String| {
            Err(Error::Config {
                url: format!("[classifier] {}", self.name),
                message: m,
            })
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return bad(format!(
                "name {:?}: use lowercase letters, digits and _ (it names columns)",
                self.name
            ));
        }
        if let Some(p) = self.keep_top
            && !(p > 0.0 && p <= 1.0)
        {
            return bad(format!("keep_top {p} is not a share in (0, 1]"));
        }
        if let (Some(lo), Some(hi)) = (self.min_score, self.max_score)
            && lo > hi
        {
            return bad(format!("min_score {lo} is over max_score {hi}"));
        }
        if self.int_score_range[0] > self.int_score_range[1] {
            return bad(format!(
                "int_score_range {:?} is empty",
                self.int_score_range
            ));
        }
        Ok(())
    }
}

/// A `&'static str` made once per configured name: columns and drop reasons are
/// static names in the pipeline, and a classifier's are built when its stage is.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The model behind a classifier.
#[derive(Debug)]
enum Scorer {
    Fasttext(Box<fasttext::FastText>),
    Transformer(Box<transformer::Model>),
}

/// The names a classifier writes and drops under.
#[derive(Debug)]
struct Names {
    score: &'static str,
    int_score: &'static str,
    label: &'static str,
    probs: Vec<&'static str>,
    below_min: &'static str,
    above_max: &'static str,
    int_below_min: &'static str,
}

/// One loaded classifier.
#[derive(Debug)]
pub struct Classifier {
    config: ClassifierConfig,
    scorer: Scorer,
    /// The labels, without `__label__` (a regression head: none).
    labels: Vec<String>,
    /// Index of the chosen label, if one is chosen.
    chosen: Option<usize>,
    regression: bool,
    names: Names,
    /// SHA-256 of the model's files.
    sha256: String,
}

/// The scores of one document by one classifier.
#[derive(Debug, Clone, PartialEq)]
pub struct Scores {
    pub score: f32,
    /// Every label's probability (or the regression output), by label index.
    pub all: Vec<f32>,
}

impl Classifier {
    /// Loads the model and checks the settings against it (the label exists, the head
    /// fits): every error names the file, before any document is read.
    pub fn new(
        storage: &Storage,
        config: &ClassifierConfig,
        backend: &BackendFactory,
    ) -> Result<Classifier> {
        config.check()?;
        let (scorer, labels, regression, sha256) = match config.kind {
            Kind::Fasttext => {
                let ft = fasttext::FastText::load(storage, config)?;
                let labels = ft.labels();
                let sha = ft.sha256().to_string();
                (Scorer::Fasttext(Box::new(ft)), labels, false, sha)
            }
            Kind::Transformer => {
                let model =
                    transformer::Model::load(storage, &config.model, config.max_tokens, backend)?;
                if let Some(expected) = &config.model_sha256 {
                    let url = format!(
                        "{}/{}",
                        config.model.trim_end_matches('/'),
                        transformer::WEIGHTS_FILE
                    );
                    let bytes = storage.read(&pipeline::Location::parse(&url)?)?;
                    let digest = pipeline::cli::sha256_hex(&bytes);
                    if &digest != expected {
                        return Err(Error::Config {
                            url,
                            message: format!(
                                "SHA-256 is {digest}, expected {expected}: the file is corrupt or another model"
                            ),
                        });
                    }
                }
                let regression = model.config.problem == transformer::Problem::Regression;
                let labels = if regression {
                    Vec::new()
                } else {
                    model.config.labels.clone()
                };
                let sha = model.sha256.clone();
                (
                    Scorer::Transformer(Box::new(model)),
                    labels,
                    regression,
                    sha,
                )
            }
        };
        let chosen = match (&config.label, regression) {
            (Some(l), true) => {
                return Err(Error::Config {
                    url: config.model.clone(),
                    message: format!(
                        "classifier {}: label {l:?} given, but the model is a regression head (its output is the score)",
                        config.name
                    ),
                });
            }
            (Some(l), false) => {
                let bare = l.strip_prefix("__label__").unwrap_or(l);
                Some(labels.iter().position(|x| x == bare).ok_or_else(|| {
                    Error::Config {
                        url: config.model.clone(),
                        message: format!(
                            "classifier {}: the model has no label {bare:?}; its labels are {labels:?}",
                            config.name
                        ),
                    }
                })?)
            }
            (None, _) => None,
        };
        if config.min_int_score.is_some() && !regression {
            return Err(Error::Config {
                url: config.model.clone(),
                message: format!(
                    "classifier {}: min_int_score applies to regression heads; this model has labels {labels:?}",
                    config.name
                ),
            });
        }
        let n = &config.name;
        let names = Names {
            score: leak(format!("{n}_score")),
            int_score: leak(format!("{n}_int_score")),
            label: leak(format!("{n}_label")),
            probs: labels
                .iter()
                .map(|l| leak(format!("{n}_prob_{}", column_safe(l))))
                .collect(),
            below_min: leak(format!("{n}_below_min")),
            above_max: leak(format!("{n}_above_max")),
            int_below_min: leak(format!("{n}_int_below_min")),
        };
        Ok(Classifier {
            config: config.clone(),
            scorer,
            labels,
            chosen,
            regression,
            names,
            sha256,
        })
    }

    /// The classifier's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The model's labels (none for a regression head), by output index.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Whether its model is a transformer (scored in batches).
    fn batched(&self) -> bool {
        matches!(self.scorer, Scorer::Transformer(_))
    }

    /// Scores of texts: every label's probability (or the regression output), and the
    /// score.
    /// A transformer's texts go to its model together (sorted into batches); a
    /// fastText model scores them one by one.
    pub fn score_texts(&self, texts: &[&str]) -> Vec<Scores> {
        match &self.scorer {
            Scorer::Fasttext(_) => texts.iter().map(|t| self.score(t)).collect(),
            Scorer::Transformer(m) => m
                .logits(texts)
                .into_iter()
                .map(|l| self.scores(transformer::probabilities(m.config.problem, &l)))
                .collect(),
        }
    }

    /// The scores of one text.
    pub fn score(&self, text: &str) -> Scores {
        match &self.scorer {
            Scorer::Fasttext(ft) => self.scores(ft.probabilities(text)),
            Scorer::Transformer(_) => self
                .score_texts(&[text])
                .pop()
                .unwrap_or_else(|| self.scores(Vec::new())),
        }
    }

    /// The score among every label's probability (or the regression output).
    fn scores(&self, all: Vec<f32>) -> Scores {
        let score = match (self.regression, self.chosen) {
            (true, _) => all.first().copied().unwrap_or(f32::NAN),
            (false, Some(i)) => all.get(i).copied().unwrap_or(0.0),
            (false, None) => all.iter().copied().fold(0.0, f32::max),
        };
        Scores { score, all }
    }

    /// FineWeb-Edu's `int_score`: `int(round(max(0, min(score, 5))))`, Python's round
    /// being half to even.
    pub fn int_score(&self, score: f32) -> i64 {
        let [lo, hi] = self.config.int_score_range;
        let clamped = f64::from(score).clamp(lo as f64, hi as f64);
        if clamped.is_nan() {
            return lo;
        }
        clamped.round_ties_even() as i64
    }

    fn columns(&self) -> Vec<Column> {
        let mut cols = vec![Column {
            name: self.names.score,
            kind: ColumnKind::F32,
        }];
        if self.regression {
            cols.push(Column {
                name: self.names.int_score,
                kind: ColumnKind::I64,
            });
        }
        if self.chosen.is_none() && self.labels.len() > 1 {
            cols.push(Column {
                name: self.names.label,
                kind: ColumnKind::Str,
            });
        }
        if self.config.all_labels {
            for &p in &self.names.probs {
                cols.push(Column {
                    name: p,
                    kind: ColumnKind::F32,
                });
            }
        }
        cols
    }

    fn measure(&self) -> Measure {
        let (lo, hi, bins) = if self.regression {
            // Half-point bins around each integer score.
            let [lo, hi] = self.config.int_score_range;
            (
                lo as f64 - 0.5,
                hi as f64 + 0.5,
                (2 * (hi - lo + 1)).clamp(2, 200) as usize,
            )
        } else {
            (0.0, 1.0, 20)
        };
        Measure {
            name: self.names.score,
            lo,
            hi,
            bins,
            sketch: self.config.keep_top.is_some(),
        }
    }

    /// Writes one document's scores and says whether the configured bounds keep it.
    fn apply(&self, doc: &mut Document, s: &Scores) -> Verdict {
        doc.annotate(self.names.score, Value::F32(s.score));
        doc.measure(self.names.score, s.score);
        if self.regression {
            doc.annotate(self.names.int_score, Value::I64(self.int_score(s.score)));
        } else if self.chosen.is_none() && self.labels.len() > 1 {
            let top = s
                .all
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |best, (i, &p)| {
                    if p > best.1 { (i, p) } else { best }
                })
                .0;
            doc.annotate(self.names.label, Value::Str(self.labels[top].clone()));
        }
        if self.config.all_labels {
            for (&col, &p) in self.names.probs.iter().zip(&s.all) {
                doc.annotate(col, Value::F32(p));
            }
        }
        let score = f64::from(s.score);
        if let Some(lo) = self.config.min_score
            && score.partial_cmp(&lo).is_none_or(|o| o.is_lt())
        {
            return Verdict::Drop(self.names.below_min);
        }
        if let Some(hi) = self.config.max_score
            && score.partial_cmp(&hi).is_none_or(|o| o.is_gt())
        {
            return Verdict::Drop(self.names.above_max);
        }
        if let Some(min) = self.config.min_int_score
            && self.int_score(s.score) < min
        {
            return Verdict::Drop(self.names.int_below_min);
        }
        Verdict::Keep
    }
}

/// A label as part of a column name: lowercase letters, digits and `_`.
fn column_safe(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The classifiers of a configuration as one stage.
#[derive(Debug)]
pub struct Classify {
    classifiers: Vec<Classifier>,
}

impl Classify {
    /// Loads every classifier of `config` with the CPU backend.
    pub fn new(storage: &Storage, config: &Config) -> Result<Classify> {
        Classify::with_backend(storage, config, &cpu_backend())
    }

    /// Loads every classifier, transformers on `backend`.
    pub fn with_backend(
        storage: &Storage,
        config: &Config,
        backend: &BackendFactory,
    ) -> Result<Classify> {
        if config.classifiers.is_empty() {
            return Err(Error::Usage(
                "nothing to do: configure a [[classifier]] (name, kind, model)".into(),
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for c in &config.classifiers {
            if !names.insert(c.name.as_str()) {
                return Err(Error::Usage(format!(
                    "two classifiers are named {}",
                    c.name
                )));
            }
        }
        let classifiers = config
            .classifiers
            .iter()
            .map(|c| Classifier::new(storage, c, backend))
            .collect::<Result<Vec<_>>>()?;
        Ok(Classify { classifiers })
    }

    /// The loaded classifiers.
    pub fn classifiers(&self) -> &[Classifier] {
        &self.classifiers
    }
}

impl Stage for Classify {
    fn name(&self) -> &'static str {
        "classify"
    }

    fn columns(&self) -> Vec<Column> {
        self.classifiers.iter().flat_map(|c| c.columns()).collect()
    }

    fn measures(&self) -> Vec<Measure> {
        self.classifiers.iter().map(Classifier::measure).collect()
    }

    fn batched(&self) -> bool {
        self.classifiers.iter().any(Classifier::batched)
    }

    fn process(&self, doc: &mut Document) -> Verdict {
        for c in &self.classifiers {
            let s = c.score(&doc.text);
            let verdict = c.apply(doc, &s);
            if verdict != Verdict::Keep {
                return verdict;
            }
        }
        Verdict::Keep
    }

    fn process_batch(&self, docs: &mut [&mut Document]) -> Vec<Verdict> {
        use rayon::prelude::*;
        let mut verdicts = vec![Verdict::Keep; docs.len()];
        for c in &self.classifiers {
            // Documents an earlier classifier dropped are not scored again.
            let alive: Vec<usize> = (0..docs.len())
                .filter(|&i| verdicts[i] == Verdict::Keep)
                .collect();
            let scores: Vec<Scores> = if c.batched() {
                let texts: Vec<&str> = alive.iter().map(|&i| docs[i].text.as_str()).collect();
                c.score_texts(&texts)
            } else {
                alive.par_iter().map(|&i| c.score(&docs[i].text)).collect()
            };
            for (&i, s) in alive.iter().zip(&scores) {
                verdicts[i] = c.apply(docs[i], s);
            }
        }
        verdicts
    }
}

/// What a run did, as a GPU child (`mill-classify-gpu --report FILE`) hands it to
/// `mill`, which shows it as its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub processed: Vec<String>,
    pub skipped: Vec<String>,
    pub stats: pipeline::Stats,
    pub not_inputs: u64,
}

impl RunReport {
    /// The parts of a run's report `mill` shows.
    pub fn of(r: &pipeline::Report) -> RunReport {
        RunReport {
            processed: r.processed.clone(),
            skipped: r.skipped.clone(),
            stats: r.stats.clone(),
            not_inputs: r.not_inputs,
        }
    }

    /// Back to a run's report.
    pub fn into_report(self) -> pipeline::Report {
        pipeline::Report {
            processed: self.processed,
            skipped: self.skipped,
            stats: self.stats,
            not_inputs: self.not_inputs,
            ..pipeline::Report::default()
        }
    }
}

/// The step `mill-classify` runs: every classifier, in order, in one pass.
pub fn step(storage: &Storage, config: &Config) -> Result<Step> {
    step_with_backend(storage, config, &cpu_backend())
}

/// [`step`] with transformers on `backend` (`mill-classify-gpu` gives libtorch's).
/// The configuration hash does not depend on the backend: a rerun on the other
/// kind of machine skips what is done.
pub fn step_with_backend(
    storage: &Storage,
    config: &Config,
    backend: &BackendFactory,
) -> Result<Step> {
    let classify = Classify::with_backend(storage, config, backend)?;
    let fingerprint: Vec<(String, String)> = classify
        .classifiers
        .iter()
        .map(|c| (c.config.name.clone(), c.sha256.clone()))
        .collect();
    Ok(Step {
        name: "classify".into(),
        config_hash: pipeline::cli::config_hash(
            "classify",
            &(&config.classifiers, fingerprint, top::SKETCH_VERSION),
        ),
        stages: vec![Box::new(classify)],
        source: Box::new(DocumentSource::default()),
        shard: ShardOptions::default(),
        partition: None,
        per_input: None,
    })
}
