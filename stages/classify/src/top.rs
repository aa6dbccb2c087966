//! `keep_top`: a share of the whole corpus, the highest scores, as DCLM-Baseline kept
//! the top 10% by its fastText score.
//!
//! 1. Scoring: the classify stage declares each `keep_top` classifier's score as a
//!    measure with a sketch, so the runner keeps, for every input, a quantile sketch
//!    of the scores of the documents it wrote ([`pipeline::sketch`]), in
//!    `_sketches/<stem>/<name>_score.kll` beside the input's marker.
//! 2. `classify.threshold` ([`threshold_step`]), one unit: merges the sketches of every
//!    input with a marker, in the order of their names, and writes `threshold.json`:
//!    per classifier the threshold (the score of the document at rank `⌈p n⌉` from
//!    the top), its rank error bound at 99% confidence, the documents counted and a
//!    histogram. The inputs' sketches and their order depend on the inputs alone, so
//!    the threshold is the same at any task count and on a rerun.
//! 3. `classify.filter` ([`filter_step`]): per input, reads the score columns of the
//!    shard and keeps the documents scoring at or over every threshold
//!    (`<name>_below_top` otherwise; `<name>_unscored` for a document without a score).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{Array, Float32Array, Float64Array, StringArray};
use pipeline::marker::list_markers;
use pipeline::shard::ShardOptions;
use pipeline::sketch::Sketch;
use pipeline::{
    Column, Document, DocumentSource, Error, InputStage, Location, Planned, Report, Result,
    RowStage, RunOptions, Step, Storage, Unit, UnitDone, Verdict,
};
use serde::{Deserialize, Serialize};

use crate::{ClassifierConfig, Config};

/// Part of the scoring step's configuration hash: a change to how sketches are kept
/// redoes the scoring.
pub const SKETCH_VERSION: u32 = 1;
/// What the threshold unit writes.
pub const THRESHOLD_FILE: &str = "threshold.json";
/// Step names in markers.
pub const THRESHOLD_STEP: &str = "classify.threshold";
pub const FILTER_STEP: &str = "classify.filter";
/// Bins of the histogram in `threshold.json`.
const BINS: usize = 20;

/// Where the runner keeps the sketch of `column` for input `stem`.
pub fn sketch_path(stem: &str, column: &str) -> String {
    format!("{}/{stem}/{column}.kll", pipeline::runner::SKETCH_DIR)
}

/// A histogram over `[lo, hi]` in equal bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
}

/// One classifier's threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    pub name: String,
    /// The score column.
    pub column: String,
    pub keep_top: f64,
    /// Documents scoring at or over this are kept.
    pub threshold: f32,
    /// Bound on the error of the threshold's normalised rank, at 99% confidence (0:
    /// the sketches were exact).
    pub rank_error: f64,
    /// Scores summarised (documents the scoring step wrote).
    pub documents: u64,
    /// Scores that were NaN (not in the sketch).
    pub nan: u64,
    pub min: f32,
    pub max: f32,
    pub histogram: Histogram,
}

/// `threshold.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    pub classifiers: Vec<Threshold>,
}

fn keep_top(config: &Config) -> Vec<&ClassifierConfig> {
    config
        .classifiers
        .iter()
        .filter(|c| c.keep_top.is_some())
        .collect()
}

/// The seed of a merged sketch: fixed per classifier.
fn merge_seed(name: &str) -> u64 {
    let h = pipeline::cli::sha256_hex(name.as_bytes());
    u64::from_str_radix(&h[..16], 16).unwrap_or(0)
}

/// Merges the sketches of `column` of every input of the scoring step at `input`.
/// `markers` are the step's, in the order of their names ([`list_markers`]).
pub fn merged_sketch(
    storage: &Storage,
    input: &Location,
    markers: &[(String, pipeline::marker::Marker)],
    name: &str,
    column: &str,
) -> Result<Sketch> {
    let mut merged = Sketch::new(pipeline::sketch::DEFAULT_K, merge_seed(name));
    for (stem, marker) in markers {
        let rel = sketch_path(stem, column);
        if !marker.outputs.contains(&rel) {
            return Err(Error::Usage(format!(
                "input {stem} of {input} has no score sketch for classifier {name}: run the \
                 scoring step with keep_top set for it (its marker lists no {rel})"
            )));
        }
        let loc = input.join(&rel);
        let bytes = storage.read(&loc)?;
        merged.merge(&Sketch::from_bytes(&bytes, &loc.to_string())?);
    }
    Ok(merged)
}

/// The threshold keeping the top `share` of a sketch's values: the value at rank
/// `⌈share n⌉` from the top.
pub fn threshold_of(sketch: &Sketch, share: f64) -> Option<f32> {
    let n = sketch.count();
    let top = ((share * n as f64).ceil() as u64).clamp(1, n.max(1));
    sketch.at_rank(n + 1 - top)
}

/// `classify.threshold`: one unit over the scoring step's output at `opts.input`,
/// writing [`THRESHOLD_FILE`] to `opts.output`.
pub fn threshold_step(storage: &Storage, opts: &RunOptions, config: &Config) -> Result<Report> {
    let chosen = keep_top(config);
    if chosen.is_empty() {
        return Err(Error::Usage(
            "classify.threshold: no classifier sets keep_top".into(),
        ));
    }
    let settings: Vec<(&str, f64)> = chosen
        .iter()
        .map(|c| (c.name.as_str(), c.keep_top.unwrap_or(1.0)))
        .collect();
    let hash = pipeline::cli::config_hash(THRESHOLD_STEP, &(settings, SKETCH_VERSION));
    // Read once: what the unit's version hashes and what its sketches are found by.
    let markers = list_markers(storage, &opts.input)?;
    if markers.is_empty() {
        return Err(Error::Usage(format!(
            "classify.threshold: no scored inputs at {} (run the scoring step first)",
            opts.input
        )));
    }
    let listed: Vec<(&str, &str, u64, Option<&str>)> = markers
        .iter()
        .map(|(stem, m)| {
            (
                stem.as_str(),
                m.config_hash.as_str(),
                m.input_size,
                m.input_etag.as_deref(),
            )
        })
        .collect();
    let unit = Unit {
        name: "threshold".into(),
        size: markers.len() as u64,
        version: pipeline::cli::config_hash("markers", &listed),
    };
    let input = opts.input.to_string();
    let (report, _) =
        pipeline::run_unit(THRESHOLD_STEP, unit, &hash, &input, storage, opts, || {
            let mut out = Vec::new();
            let mut stats = pipeline::Stats::default();
            for c in &chosen {
                let column = format!("{}_score", c.name);
                let sketch = merged_sketch(storage, &opts.input, &markers, &c.name, &column)?;
                let share = c.keep_top.unwrap_or(1.0);
                let threshold = threshold_of(&sketch, share).ok_or_else(|| {
                    Error::Usage(format!(
                        "classify.threshold: classifier {} scored no documents at {}",
                        c.name, opts.input
                    ))
                })?;
                let (min, max) = sketch.range().unwrap_or((threshold, threshold));
                let (lo, hi) = if min >= 0.0 && max <= 1.0 {
                    (0.0, 1.0)
                } else {
                    (f64::from(min), f64::from(max))
                };
                stats
                    .values
                    .insert(format!("{}_threshold", c.name), f64::from(threshold));
                stats
                    .values
                    .insert(format!("{}_rank_error", c.name), sketch.rank_error());
                stats.values.insert(format!("{}_keep_top", c.name), share);
                stats.docs_in = stats.docs_in.max(sketch.count());
                out.push(Threshold {
                    name: c.name.clone(),
                    column,
                    keep_top: share,
                    threshold,
                    rank_error: sketch.rank_error(),
                    documents: sketch.count(),
                    nan: sketch.nan_count(),
                    min,
                    max,
                    histogram: Histogram {
                        lo,
                        hi,
                        counts: sketch.histogram(lo, hi, BINS),
                    },
                });
            }
            stats.docs_out = stats.docs_in;
            let json = serde_json::to_vec_pretty(&Thresholds { classifiers: out })
                .map_err(|e| Error::Usage(format!("serialising the thresholds: {e}")))?;
            let loc = opts.output.join(THRESHOLD_FILE);
            storage.remove_stale_temporaries(&loc)?;
            storage.put(&loc, &json)?;
            stats.bytes_out = json.len() as u64;
            let done = UnitDone {
                outputs: vec![THRESHOLD_FILE.into()],
                stats,
            };
            Ok(((), done))
        })?;
    Ok(report)
}

/// Reads `threshold.json` from a threshold step's output (or the file itself).
pub fn read_thresholds(storage: &Storage, url: &str) -> Result<(Thresholds, Vec<u8>)> {
    let loc = if url.ends_with(".json") {
        Location::parse(url)?
    } else {
        Location::parse(&format!("{}/", url.trim_end_matches('/')))?.join(THRESHOLD_FILE)
    };
    let bytes = storage.read(&loc).map_err(|e| Error::Input {
        url: loc.to_string(),
        message: format!("the thresholds of a classify.threshold step: {e}"),
    })?;
    let t: Thresholds = serde_json::from_slice(&bytes).map_err(|e| Error::Input {
        url: loc.to_string(),
        message: format!("not a thresholds file: {e}"),
    })?;
    Ok((t, bytes))
}

#[derive(Debug)]
struct Cut {
    column: &'static str,
    threshold: f32,
    below: &'static str,
    unscored: &'static str,
}

/// The per-input part of `classify.filter`.
#[derive(Debug)]
struct TopFilter {
    cuts: Arc<Vec<Cut>>,
}

/// Scores of one input, by row, with the ids that check the rows line up.
struct Bound {
    cuts: Arc<Vec<Cut>>,
    ids: Vec<Option<String>>,
    /// Scores per cut, by row.
    scores: Vec<Vec<Option<f32>>>,
    /// Row of each id, for documents whose row the source numbered otherwise (rows it
    /// dropped as unreadable shift the rest): made the first time a row does not
    /// line up, which in a shard the classify stage wrote is never.
    by_id: std::sync::OnceLock<BTreeMap<String, usize>>,
}

impl InputStage for TopFilter {
    fn name(&self) -> &'static str {
        "classify_top"
    }

    fn columns(&self) -> Vec<Column> {
        Vec::new()
    }

    fn bind(&self, storage: &Storage, input: &Planned) -> Result<Box<dyn RowStage>> {
        let mut names: Vec<&str> = vec!["id"];
        names.extend(self.cuts.iter().map(|c| c.column));
        let url = input.meta.location.to_string();
        let batches = match pipeline::shard::read_columns(storage, &input.meta, &names) {
            Ok(b) => b,
            // A shard that is not readable Parquet: the source counts its rows as
            // dropped (corrupt_parquet); none reaches this stage.
            Err(Error::Parquet { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut ids: Vec<Option<String>> = Vec::new();
        let mut scores: Vec<Vec<Option<f32>>> = vec![Vec::new(); self.cuts.len()];
        for batch in &batches {
            let id = batch
                .column_by_name("id")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>());
            let rows = batch.num_rows();
            for r in 0..rows {
                ids.push(id.and_then(|a| (!a.is_null(r)).then(|| a.value(r).to_string())));
            }
            for (cut, out) in self.cuts.iter().zip(scores.iter_mut()) {
                let col = batch.column_by_name(cut.column).ok_or_else(|| Error::Input {
                    url: url.clone(),
                    message: format!(
                        "no column {}: classify.filter reads the scores the classify stage wrote",
                        cut.column
                    ),
                })?;
                if let Some(a) = col.as_any().downcast_ref::<Float32Array>() {
                    out.extend((0..rows).map(|r| (!a.is_null(r)).then(|| a.value(r))));
                } else if let Some(a) = col.as_any().downcast_ref::<Float64Array>() {
                    out.extend((0..rows).map(|r| (!a.is_null(r)).then(|| a.value(r) as f32)));
                } else {
                    return Err(Error::Input {
                        url: url.clone(),
                        message: format!("column {} is not a float column", cut.column),
                    });
                }
            }
        }
        Ok(Box::new(Bound {
            cuts: self.cuts.clone(),
            ids,
            scores,
            by_id: std::sync::OnceLock::new(),
        }))
    }
}

impl RowStage for Bound {
    fn process(&self, doc: &mut Document, row: u64) -> Verdict {
        let row = row as usize;
        let at = if self.ids.get(row).and_then(Option::as_deref) == Some(doc.id.as_str()) {
            Some(row)
        } else {
            let by_id = self.by_id.get_or_init(|| {
                self.ids
                    .iter()
                    .enumerate()
                    .filter_map(|(i, id)| id.clone().map(|id| (id, i)))
                    .collect()
            });
            by_id.get(&doc.id).copied()
        };
        for (cut, scores) in self.cuts.iter().zip(&self.scores) {
            match at.and_then(|i| scores.get(i).copied().flatten()) {
                Some(s) if s >= cut.threshold => {}
                Some(_) => return Verdict::Drop(cut.below),
                None => return Verdict::Drop(cut.unscored),
            }
        }
        Verdict::Keep
    }
}

/// `classify.filter`: keeps the documents at or over every threshold of the
/// `classify.threshold` output at `thresholds` (its folder or the file).
pub fn filter_step(storage: &Storage, config: &Config, thresholds: &str) -> Result<Step> {
    let (t, bytes) = read_thresholds(storage, thresholds)?;
    let mut cuts = Vec::new();
    for c in keep_top(config) {
        let found = t.classifiers.iter().find(|x| x.name == c.name).ok_or_else(|| {
            Error::Usage(format!(
                "classify.filter: {thresholds} has no threshold for classifier {} (rerun classify.threshold)",
                c.name
            ))
        })?;
        if found.keep_top != c.keep_top.unwrap_or(1.0) {
            return Err(Error::Usage(format!(
                "classify.filter: {thresholds} keeps {} of classifier {}, the configuration {}: rerun classify.threshold",
                found.keep_top,
                c.name,
                c.keep_top.unwrap_or(1.0)
            )));
        }
        cuts.push(Cut {
            column: crate::leak(found.column.clone()),
            threshold: found.threshold,
            below: crate::leak(format!("{}_below_top", c.name)),
            unscored: crate::leak(format!("{}_unscored", c.name)),
        });
    }
    if cuts.is_empty() {
        return Err(Error::Usage(
            "classify.filter: no classifier sets keep_top".into(),
        ));
    }
    Ok(Step {
        name: FILTER_STEP.into(),
        stages: Vec::new(),
        source: Box::new(DocumentSource::default()),
        config_hash: pipeline::cli::config_hash(
            FILTER_STEP,
            &(pipeline::cli::sha256_hex(&bytes), SKETCH_VERSION),
        ),
        shard: ShardOptions::default(),
        partition: None,
        per_input: Some(Box::new(TopFilter {
            cuts: Arc::new(cuts),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_keeps_the_share() {
        let mut s = Sketch::new(4096, 1);
        for i in 0..1000 {
            s.add(i as f32);
        }
        // The top 10% of 0..999 is 900..999.
        assert_eq!(threshold_of(&s, 0.1), Some(900.0));
        assert_eq!(threshold_of(&s, 1.0), Some(0.0));
        assert_eq!(threshold_of(&s, 0.0001), Some(999.0));
        assert_eq!(threshold_of(&Sketch::new(8, 1), 0.1), None);
    }
}
