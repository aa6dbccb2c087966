//! `mill-toxicity train`: fits a supervised fastText classifier on labelled documents
//! (Parquet or JSONL with `text` and a label field) and reports how it does on a
//! held-out share.
//!
//! The split is deterministic: a document is held out when the SHA-256 of (seed, id)
//! falls in the first `validation_share` of the hash space. Training runs on one thread
//! by default, which makes the model itself reproducible (fastText's threads race).

use std::io::Write;

use arrow_array::{Array, RecordBatch, StringArray};
use pipeline::{DocumentSource, Error, Location, Result, Source, Storage};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::full_label;
use crate::normalize::Normalize;

/// Training settings (`[train]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// The field holding each document's label (a Parquet column, or a JSONL field).
    pub label_field: String,
    /// Labels that count as positive in the report.
    pub positive: Vec<String>,
    /// Threshold the report's precision, recall and F1 are computed at (dolma's 0.4).
    pub threshold: f64,
    /// Share of documents held out for validation.
    pub validation_share: f64,
    pub seed: u64,
    /// fastText settings, as fastText's text-classification tutorial tunes them
    /// (`-lr 1.0 -epoch 25 -wordNgrams 2 -bucket 200000 -dim 50`); minimum count 1.
    pub epoch: i32,
    pub lr: f64,
    pub word_ngrams: i32,
    pub dim: i32,
    pub bucket: i32,
    pub min_count: i32,
    /// Character n-grams of words, from `minn` to `maxn` characters (0, 0: none, as
    /// the tutorial): they give misspelt and disguised words a vector.
    pub minn: i32,
    pub maxn: i32,
    /// Training threads (1: a reproducible model).
    pub threads: i32,
    /// The form the texts are trained on (the classifier must score the same form).
    pub normalize: Normalize,
    /// Quantise the model (fastText's `quantize`): a `.ftz` file a fraction of the size.
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

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            label_field: "label".into(),
            positive: vec!["toxic".into()],
            threshold: 0.4,
            validation_share: 0.1,
            seed: 0,
            epoch: 25,
            lr: 1.0,
            word_ngrams: 2,
            dim: 50,
            bucket: 200_000,
            min_count: 1,
            minn: 0,
            maxn: 0,
            threads: 1,
            normalize: Normalize::Raw,
            quantize: None,
        }
    }
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

fn held_out(seed: u64, id: &str, share: f64) -> bool {
    let h = Sha256::digest(format!("{seed}\0{id}").as_bytes());
    let x = u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
    (x as f64 / u64::MAX as f64) < share
}

/// The labels of a batch's rows: a `label_field` column, or that field of a JSON
/// `metadata` column (how JSONL fields other than the known ones arrive).
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

/// Labelled texts of every document shard at `input`, in listing order.
fn labelled(
    storage: &Storage,
    input: &Location,
    field: &str,
) -> Result<Vec<(String, String, String)>> {
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
            let labels = batch_labels(batch.carry.as_ref(), field, batch.docs.len(), &url)?;
            for (doc, label) in batch.docs.into_iter().zip(labels) {
                let label = label
                    .filter(|l| !l.trim().is_empty())
                    .ok_or_else(|| Error::Input {
                        url: url.clone(),
                        message: format!("document {row} (id {:?}) has no `{field}`", doc.id),
                    })?;
                out.push((
                    doc.id,
                    doc.text,
                    label.trim().replace(char::is_whitespace, "_"),
                ));
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

/// Trains on the labelled documents at `input`; writes `<output>/model.bin` and
/// `<output>/train.json`.
pub fn train(
    storage: &Storage,
    input: &Location,
    output: &Location,
    config: &TrainConfig,
) -> Result<TrainReport> {
    if !(0.0..1.0).contains(&config.validation_share) {
        return Err(Error::Usage(format!(
            "[train].validation_share {} must be in [0, 1)",
            config.validation_share
        )));
    }
    let docs = labelled(storage, input, &config.label_field)?;
    let dir = tempfile::tempdir().map_err(|e| Error::Usage(format!("a temporary folder: {e}")))?;
    let train_path = dir.path().join("train.txt");
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(&train_path)
            .map_err(|e| Error::Usage(format!("writing the training file: {e}")))?,
    );
    let mut validation: Vec<(&str, &str)> = Vec::new();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    let mut train_n = 0;
    for (id, text, label) in &docs {
        if held_out(config.seed, id, config.validation_share) {
            validation.push((text, label));
        } else {
            *counts.entry(label.clone()).or_default() += 1;
            train_n += 1;
            write!(
                file,
                "{} {}",
                full_label(label),
                config.normalize.line(text)
            )
            .map_err(|e| Error::Usage(format!("writing the training file: {e}")))?;
        }
    }
    file.flush()
        .map_err(|e| Error::Usage(format!("writing the training file: {e}")))?;
    drop(file);
    if counts.len() < 2 {
        return Err(Error::Usage(format!(
            "training needs at least two labels; the training share has {:?}",
            counts.keys().collect::<Vec<_>>()
        )));
    }
    let mut args = fasttext::Args::new();
    let path_str = |p: &std::path::Path| {
        p.to_str()
            .map(str::to_string)
            .ok_or_else(|| Error::Usage("temporary path is not UTF-8".into()))
    };
    args.set_input(&path_str(&train_path)?)
        .map_err(Error::Usage)?;
    args.set_model(fasttext::ModelName::SUP);
    args.set_loss(fasttext::LossName::SOFTMAX);
    args.set_epoch(config.epoch);
    args.set_lr(config.lr);
    args.set_word_ngrams(config.word_ngrams);
    args.set_dim(config.dim);
    args.set_bucket(config.bucket);
    args.set_min_count(config.min_count);
    args.set_minn(config.minn);
    args.set_maxn(config.maxn);
    args.set_thread(config.threads.max(1));
    args.set_verbose(0);
    let mut ft = fasttext::FastText::new();
    ft.train(&args)
        .map_err(|e| Error::Usage(format!("fastText training failed: {e}")))?;
    if let Some(q) = &config.quantize {
        args.set_cutoff(q.cutoff);
        args.set_dsub(q.dsub);
        args.set_qnorm(q.qnorm);
        args.set_qout(q.qout);
        args.set_retrain(q.retrain);
        ft.quantize(&args)
            .map_err(|e| Error::Usage(format!("fastText quantisation failed: {e}")))?;
    }
    let file_name = model_file(config);
    let model_path = dir.path().join(file_name);
    ft.save_model(&path_str(&model_path)?)
        .map_err(Error::Usage)?;
    let bytes = std::fs::read(&model_path)
        .map_err(|e| Error::Usage(format!("reading the model back: {e}")))?;
    let model_loc = output.join(file_name);
    storage.remove_stale_temporaries(&model_loc)?;
    storage.put(&model_loc, &bytes)?;

    let positive: Vec<String> = config.positive.iter().map(|l| full_label(l)).collect();
    let pairs: Vec<(f64, bool)> = validation
        .iter()
        .map(|(text, label)| {
            let score = ft
                .predict(&config.normalize.line(text), -1, 0.0)
                .map(|ps| {
                    ps.iter()
                        .filter(|p| positive.contains(&p.label))
                        .map(|p| f64::from(p.prob))
                        .fold(0.0, f64::max)
                })
                .unwrap_or(0.0);
            (score, positive.contains(&full_label(label)))
        })
        .collect();
    let report = TrainReport {
        model: model_loc.to_string(),
        model_sha256: pipeline::cli::sha256_hex(&bytes),
        train_documents: train_n,
        validation_documents: validation.len(),
        labels: counts.into_iter().collect(),
        at_threshold: scores(&pairs, config.threshold),
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

/// The classifier `train` writes below its output.
pub const MODEL_FILE: &str = "model.bin";
/// The same, quantised (`[train.quantize]`).
pub const QUANTIZED_MODEL_FILE: &str = "model.ftz";

/// The file `train` writes the model to with `config`.
pub fn model_file(config: &TrainConfig) -> &'static str {
    if config.quantize.is_some() {
        QUANTIZED_MODEL_FILE
    } else {
        MODEL_FILE
    }
}
/// What `train` reports, written beside the model.
pub const REPORT_FILE: &str = "train.json";
/// Step name of `train` in its marker.
pub const TRAIN_STEP: &str = "toxicity.train";
/// The unit `train` is: its marker is `<output>/_done/train.json`.
pub const TRAIN_UNIT: &str = "train";

/// [`train`] as a resumable step of one unit: skipped when its marker names the same
/// configuration and the same listing of `opts.input`; `--force`, `--dry-run` and the
/// task split (task 0 trains) apply as to any step. Returns the run's report and, when
/// it trained, what training reported.
pub fn train_step(
    storage: &Storage,
    opts: &pipeline::RunOptions,
    config: &TrainConfig,
) -> Result<(pipeline::Report, Option<TrainReport>)> {
    let hash = pipeline::cli::config_hash(TRAIN_STEP, config);
    pipeline::runner::run_over_listing(TRAIN_STEP, TRAIN_UNIT, &hash, storage, opts, || {
        let r = train(storage, &opts.input, &opts.output, config)?;
        let documents = (r.train_documents + r.validation_documents) as u64;
        let stats = pipeline::Stats {
            docs_in: documents,
            docs_out: documents,
            ..pipeline::Stats::default()
        };
        let outputs = vec![model_file(config).into(), REPORT_FILE.into()];
        Ok((r, pipeline::UnitDone { outputs, stats }))
    })
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
