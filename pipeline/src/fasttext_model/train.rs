//! fastText supervised training, shared by the stages that fit classifiers
//! (`mill-toxicity train`, `mill-classify train`): labelled documents from Parquet or
//! JSONL, a deterministic held-out share, fastText's own trainer (the `fasttext`
//! crate, its C++ code), and a report of precision, recall and F1 on the held-out
//! share. Behind the `fasttext-train` feature.
//!
//! The split is deterministic: a document is held out when the SHA-256 of (seed, id)
//! falls in the first `validation_share` of the hash space. The examples are written
//! in an order that depends only on the documents (each stage says which), and
//! training runs on one thread by default, which makes the model's bytes reproducible
//! (fastText's threads race).

use std::io::Write;

use arrow_array::{Array, RecordBatch, StringArray};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::source::{DocumentSource, Source};
use crate::storage::{Location, Storage};

/// fastText's training settings (`fasttext supervised`'s flags).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub epoch: i32,
    pub lr: f64,
    pub word_ngrams: i32,
    pub dim: i32,
    pub bucket: i32,
    pub min_count: i32,
    pub minn: i32,
    pub maxn: i32,
    pub threads: i32,
    pub quantize: Option<QuantizeConfig>,
}

/// fastText's quantisation settings (`fasttext quantize`): product quantisation of the
/// vectors, in sub-vectors of `dsub` dimensions; with `cutoff`, only that many rows of
/// the input matrix (the words and n-gram buckets of largest norm) are kept, and
/// `retrain` fine-tunes the classifier on what is left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuantizeConfig {
    /// Rows of the input matrix kept (0: all).
    pub cutoff: usize,
    /// Dimensions per product-quantised sub-vector (fastText's default, 2).
    pub dsub: usize,
    /// Quantise each vector's norm apart.
    pub qnorm: bool,
    /// Quantise the output matrix too.
    pub qout: bool,
    /// Fine-tune after the cutoff.
    pub retrain: bool,
}

impl Default for QuantizeConfig {
    fn default() -> Self {
        QuantizeConfig {
            cutoff: 0,
            dsub: 2,
            qnorm: false,
            qout: false,
            retrain: false,
        }
    }
}

/// How the held-out share is drawn and judged.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Labels that count as positive in the report.
    pub positive: Vec<String>,
    /// Threshold the report's precision, recall and F1 are computed at.
    pub threshold: f64,
    /// Share of documents held out.
    pub validation_share: f64,
    pub seed: u64,
}

/// One labelled document.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub id: String,
    pub text: String,
    /// The label, without `__label__`.
    pub label: String,
}

/// Precision, recall and F1 at one threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub threshold: f64,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// What training did (also written as `train.json` beside the model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    pub model: String,
    pub model_sha256: String,
    pub train_documents: usize,
    pub validation_documents: usize,
    /// Documents per label in the training share.
    pub labels: Vec<(String, usize)>,
    pub at_threshold: Scores,
    pub sweep: Vec<Scores>,
}

/// The classifier training writes below its output.
pub const MODEL_FILE: &str = "model.bin";
/// The same, quantised.
pub const QUANTIZED_MODEL_FILE: &str = "model.ftz";
/// What training reports, written beside the model.
pub const REPORT_FILE: &str = "train.json";

/// The file training writes the model to with `settings`.
pub fn model_file(settings: &Settings) -> &'static str {
    if settings.quantize.is_some() {
        QUANTIZED_MODEL_FILE
    } else {
        MODEL_FILE
    }
}

/// The `__label__` form of a label.
pub fn full_label(label: &str) -> String {
    if label.starts_with("__label__") {
        label.to_string()
    } else {
        format!("__label__{label}")
    }
}

/// Whether document `id` is held out of training.
pub fn held_out(seed: u64, id: &str, share: f64) -> bool {
    let h = Sha256::digest(format!("{seed}\0{id}").as_bytes());
    let x = u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
    (x as f64 / u64::MAX as f64) < share
}

/// A key that orders documents by a hash of (seed, id): the order training sees two
/// sets read one after the other in, mixed, and the same on every run.
pub fn shuffle_key(seed: u64, id: &str) -> [u8; 32] {
    Sha256::digest(format!("{seed}\u{1}{id}").as_bytes()).into()
}

/// Where a document's label comes from.
#[derive(Debug, Clone, Copy)]
pub enum Labels<'a> {
    /// A field of each document (a Parquet column, or a JSONL field).
    Field(&'a str),
    /// Every document has this label.
    All(&'a str),
}

/// The labels of a batch's rows: a `field` column, or that field of a JSON `metadata`
/// column (how JSONL fields other than the known ones arrive).
fn batch_labels(
    carry: Option<&RecordBatch>,
    field: &str,
    rows: usize,
    url: &str,
) -> Result<Vec<Option<String>>> {
    let bad = |message: String| Error::Input {
        url: url.to_string(),
        message,
    };
    let Some(batch) = carry else {
        return Err(bad(format!("no `{field}` field in the documents")));
    };
    if let Some(col) = batch.column_by_name(field) {
        let strings = arrow_array::cast::AsArray::as_string_opt::<i32>(col.as_ref()).map(
            |a: &StringArray| {
                (0..a.len())
                    .map(|i| (!a.is_null(i)).then(|| a.value(i).to_string()))
                    .collect::<Vec<_>>()
            },
        );
        return match strings {
            Some(v) => Ok(v),
            None => {
                let formatted = arrow_array::cast::AsArray::as_primitive_opt::<
                    arrow_array::types::Int64Type,
                >(col.as_ref())
                .map(|a| {
                    (0..a.len())
                        .map(|i| (!a.is_null(i)).then(|| a.value(i).to_string()))
                        .collect()
                });
                formatted
                    .ok_or_else(|| bad(format!("column `{field}` is neither text nor integer")))
            }
        };
    }
    let Some(meta) = batch
        .column_by_name("metadata")
        .and_then(|c| arrow_array::cast::AsArray::as_string_opt::<i32>(c.as_ref()))
    else {
        return Err(bad(format!("no `{field}` field in the documents")));
    };
    let mut out = Vec::with_capacity(rows);
    for i in 0..meta.len() {
        if meta.is_null(i) {
            out.push(None);
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(meta.value(i))
            .map_err(|e| bad(format!("row {i}: metadata is not JSON: {e}")))?;
        out.push(match &v[field] {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        });
    }
    Ok(out)
}

/// Labelled documents of every document shard at `input` (a prefix or one file), in
/// listing order. Malformed data is an error here: a training set is read whole.
pub fn read_examples(
    storage: &Storage,
    input: &Location,
    labels: Labels<'_>,
) -> Result<Vec<Example>> {
    let source = DocumentSource::default();
    let mut out = Vec::new();
    let listing = storage.list(input)?;
    for meta in &listing {
        let relative = if meta.relative.is_empty() {
            meta.location.file_name().to_string()
        } else {
            meta.relative.clone()
        };
        if relative.split('/').any(|p| p.starts_with(['_', '.']))
            || source.stem(&relative).is_none()
        {
            continue;
        }
        let url = meta.location.to_string();
        let mut row = 0usize;
        for batch in source.read(storage, meta, &relative)? {
            let batch = batch?;
            if batch.problem.is_some() || !batch.drops.is_empty() {
                return Err(Error::Input {
                    url: url.clone(),
                    message: format!(
                        "malformed labelled data after document {row}: {:?} {}",
                        batch.drops,
                        batch.problem.unwrap_or_default()
                    ),
                });
            }
            let found = match labels {
                Labels::Field(field) => {
                    batch_labels(batch.carry.as_ref(), field, batch.docs.len(), &url)?
                }
                Labels::All(label) => vec![Some(label.to_string()); batch.docs.len()],
            };
            for (doc, label) in batch.docs.into_iter().zip(found) {
                let label = label
                    .filter(|l| !l.trim().is_empty())
                    .ok_or_else(|| Error::Input {
                        url: url.clone(),
                        message: format!("document {row} (id {:?}) has no label", doc.id),
                    })?;
                out.push(Example {
                    id: doc.id,
                    text: doc.text,
                    label: label.trim().replace(char::is_whitespace, "_"),
                });
                row += 1;
            }
        }
    }
    if out.is_empty() {
        return Err(Error::Usage(format!("no labelled documents at {input}")));
    }
    Ok(out)
}

fn scores(pairs: &[(f64, bool)], threshold: f64) -> Scores {
    let tp = pairs.iter().filter(|(s, y)| *y && *s >= threshold).count() as f64;
    let fp = pairs.iter().filter(|(s, y)| !*y && *s >= threshold).count() as f64;
    let fneg = pairs.iter().filter(|(s, y)| *y && *s < threshold).count() as f64;
    let precision = if tp + fp > 0.0 { tp / (tp + fp) } else { 0.0 };
    let recall = if tp + fneg > 0.0 {
        tp / (tp + fneg)
    } else {
        0.0
    };
    let f1 = if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    };
    Scores {
        threshold,
        precision,
        recall,
        f1,
    }
}

fn usage(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Usage(format!("{what}: {e}"))
}

/// Trains on `examples` (in the order given), each text made a line by `line` (which
/// ends it with one newline); writes the model and [`REPORT_FILE`] below `output`.
pub fn train(
    storage: &Storage,
    examples: &[Example],
    line: impl Fn(&str) -> String,
    output: &Location,
    settings: &Settings,
    eval: &Evaluation,
) -> Result<TrainReport> {
    if !(0.0..1.0).contains(&eval.validation_share) {
        return Err(Error::Usage(format!(
            "[train].validation_share {} must be in [0, 1)",
            eval.validation_share
        )));
    }
    let dir = tempfile::tempdir().map_err(usage("a temporary folder"))?;
    let train_path = dir.path().join("train.txt");
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(&train_path).map_err(usage("writing the training file"))?,
    );
    let mut validation: Vec<&Example> = Vec::new();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    let mut train_n = 0;
    for ex in examples {
        if held_out(eval.seed, &ex.id, eval.validation_share) {
            validation.push(ex);
        } else {
            *counts.entry(ex.label.clone()).or_default() += 1;
            train_n += 1;
            write!(file, "{} {}", full_label(&ex.label), line(&ex.text))
                .map_err(usage("writing the training file"))?;
        }
    }
    file.flush().map_err(usage("writing the training file"))?;
    drop(file);
    if counts.len() < 2 {
        return Err(Error::Usage(format!(
            "training needs at least two labels; the training share has {:?}",
            counts.keys().collect::<Vec<_>>()
        )));
    }
    let path_str = |p: &std::path::Path| {
        p.to_str()
            .map(str::to_string)
            .ok_or_else(|| Error::Usage("temporary path is not UTF-8".into()))
    };
    let mut args = fasttext::Args::new();
    args.set_input(&path_str(&train_path)?)
        .map_err(Error::Usage)?;
    args.set_model(fasttext::ModelName::SUP);
    args.set_loss(fasttext::LossName::SOFTMAX);
    args.set_epoch(settings.epoch);
    args.set_lr(settings.lr);
    args.set_word_ngrams(settings.word_ngrams);
    args.set_dim(settings.dim);
    args.set_bucket(settings.bucket);
    args.set_min_count(settings.min_count);
    args.set_minn(settings.minn);
    args.set_maxn(settings.maxn);
    args.set_thread(settings.threads.max(1));
    args.set_verbose(0);
    let mut ft = fasttext::FastText::new();
    ft.train(&args)
        .map_err(|e| Error::Usage(format!("fastText training failed: {e}")))?;
    if let Some(q) = &settings.quantize {
        args.set_cutoff(q.cutoff);
        args.set_dsub(q.dsub);
        args.set_qnorm(q.qnorm);
        args.set_qout(q.qout);
        args.set_retrain(q.retrain);
        ft.quantize(&args)
            .map_err(|e| Error::Usage(format!("fastText quantisation failed: {e}")))?;
    }
    let file_name = model_file(settings);
    let model_path = dir.path().join(file_name);
    ft.save_model(&path_str(&model_path)?)
        .map_err(Error::Usage)?;
    let bytes = std::fs::read(&model_path).map_err(usage("reading the model back"))?;
    let model_loc = output.join(file_name);
    storage.remove_stale_temporaries(&model_loc)?;
    storage.put(&model_loc, &bytes)?;

    let positive: Vec<String> = eval.positive.iter().map(|l| full_label(l)).collect();
    let pairs: Vec<(f64, bool)> = validation
        .iter()
        .map(|ex| {
            let score = ft
                .predict(&line(&ex.text), -1, 0.0)
                .map(|ps| {
                    ps.iter()
                        .filter(|p| positive.contains(&p.label))
                        .map(|p| f64::from(p.prob))
                        .fold(0.0, f64::max)
                })
                .unwrap_or(0.0);
            (score, positive.contains(&full_label(&ex.label)))
        })
        .collect();
    let report = TrainReport {
        model: model_loc.to_string(),
        model_sha256: crate::cli::sha256_hex(&bytes),
        train_documents: train_n,
        validation_documents: validation.len(),
        labels: counts.into_iter().collect(),
        at_threshold: scores(&pairs, eval.threshold),
        sweep: (1..10)
            .map(|i| scores(&pairs, f64::from(i) / 10.0))
            .collect(),
    };
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| Error::Usage(format!("serialising the report: {e}")))?;
    storage.remove_stale_temporaries(&output.join(REPORT_FILE))?;
    storage.put(&output.join(REPORT_FILE), &json)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_stable_and_near_the_share() {
        let held = (0..10_000)
            .filter(|i| held_out(3, &i.to_string(), 0.1))
            .count();
        assert!((900..1100).contains(&held), "{held}");
        assert_eq!(held_out(3, "a", 0.1), held_out(3, "a", 0.1));
    }

    #[test]
    fn precision_recall_f1() {
        let s = scores(&[(0.9, true), (0.8, false), (0.1, true), (0.2, false)], 0.5);
        assert_eq!((s.precision, s.recall, s.f1), (0.5, 0.5, 0.5));
    }
}
