//! Global shuffle of token shards into fixed-size output shards, without holding the
//! corpus in memory: the two-pass shuffle.
//!
//! 1. **scatter** (per input dataset): every document draws an output shard from a
//!    seeded hash of (seed, dataset name, position); the dataset is rewritten under
//!    `_scatter/` with its documents grouped by output shard, and
//!    `_scatter/<name>.groups.json` says which range of documents goes where. Memory:
//!    one input dataset.
//! 2. **gather** (per output shard): one ranged read per input fetches that shard's
//!    group from each scattered dataset; the documents are put in a seeded random order
//!    and written as `shuffled-NNNNN.bin/.idx`. Memory: one output shard.
//!
//! A uniform random shard for each document, then a uniform random order within each
//! shard, is a uniform random order of the whole corpus. Shards hold `shard_tokens`
//! tokens on average; as documents are drawn at random, sizes spread by about the
//! square root of the documents per shard (a fraction of a percent at real sizes).
//! Both phases follow the task and resume rules: markers under `_scatter/_done/` and
//! `_done/`.

use serde::{Deserialize, Serialize};

use pipeline::marker::{marker_location, read_marker};
use pipeline::runner::{Plan, begin_input, finish_input, pool};
use pipeline::source::Batches;
use pipeline::{Error, Location, ObjectMeta, Report, Result, RunOptions, Source, Stats, Storage};
use rayon::prelude::*;

use crate::{MANIFEST, Manifest, ShardInfo};
use pipeline::tokens::{DatasetWriter, Dtype, Index, with_extension};

/// How the shuffle runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MergeConfig {
    /// Seed of the shard draw and of the order within shards.
    pub seed: u64,
    /// Tokens per output shard, on average (2^28: 1 GiB of int32 ids, the memory of
    /// one gather task).
    pub shard_tokens: u64,
}

impl Default for MergeConfig {
    fn default() -> Self {
        MergeConfig {
            seed: 0,
            shard_tokens: 1 << 28,
        }
    }
}

/// Which phase to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    Scatter,
    Gather,
    /// Both, one after the other (one task only).
    All,
}

const SCATTER_DIR: &str = "_scatter";
/// Step names in markers.
const SCATTER_STEP: &str = "tokenize.scatter";
pub const GATHER_STEP: &str = "tokenize.gather";

/// Megatron datasets, named by their `.idx`.
struct IdxSource;

impl Source for IdxSource {
    fn stem(&self, relative: &str) -> Option<String> {
        relative
            .strip_suffix(".idx")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }
    fn read(&self, _: &Storage, input: &ObjectMeta, _: &str) -> Result<Batches> {
        Err(Error::Usage(format!(
            "{} is a token dataset, not documents",
            input.location
        )))
    }
}

/// The input datasets (all tasks), sorted by name, with the output shard count.
fn layout(
    storage: &Storage,
    input: &Location,
    config: &MergeConfig,
) -> Result<(Vec<String>, usize, Dtype)> {
    let listing = storage.list(input)?;
    let mut names = Vec::new();
    let mut bin_bytes = 0u64;
    for m in &listing {
        if m.relative.split('/').any(|p| p.starts_with(['_', '.'])) {
            continue;
        }
        if let Some(stem) = m.relative.strip_suffix(".idx") {
            names.push(stem.to_string());
        } else if m.relative.ends_with(".bin") {
            bin_bytes += m.size;
        }
    }
    names.sort();
    let first = names
        .first()
        .ok_or_else(|| Error::Usage(format!("no token datasets (.idx) at {input}")))?;
    let dtype = Index::read(storage, &input.join(first))?.dtype;
    let tokens = bin_bytes / dtype.size() as u64;
    let shards = tokens.div_ceil(config.shard_tokens.max(1)).max(1);
    let shards =
        usize::try_from(shards).map_err(|_| Error::Usage("too many output shards".into()))?;
    Ok((names, shards, dtype))
}

/// SplitMix64: a fast, well-mixed 64-bit hash step.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Output shard of document `i` of dataset `name`.
fn draw(seed: u64, name: &str, i: usize, shards: usize) -> usize {
    let h = mix(mix(seed ^ name_hash(name)) ^ i as u64);
    ((u128::from(h) * shards as u128) >> 64) as usize
}

/// Document ranges of a scattered dataset: `ranges[k]` = (first, end) of output shard k.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Groups {
    shards: usize,
    ranges: Vec<(u64, u64)>,
}

/// Output shard name.
pub fn output_name(k: usize) -> String {
    format!("shuffled-{k:05}")
}

fn config_key(config: &MergeConfig, shards: usize) -> String {
    pipeline::cli::config_hash("tokenize-merge", &(config, shards))
}

/// Scatter: this task's input datasets, grouped by output shard.
pub fn scatter(storage: &Storage, opts: &RunOptions, config: &MergeConfig) -> Result<Stats> {
    let (_, shards, _) = layout(storage, &opts.input, config)?;
    let hash = config_key(config, shards);
    let scatter_root = opts.output.join(SCATTER_DIR);
    let plan_opts = RunOptions {
        output: scatter_root.clone(),
        ..opts.clone()
    };
    let plan: Plan = pipeline::plan(SCATTER_STEP, &IdxSource, &hash, storage, &plan_opts)?;
    if opts.dry_run {
        return Ok(Stats::default());
    }
    let results: Vec<Result<Stats>> = pool(opts.threads)?.install(|| {
        plan.todo
            .par_iter()
            .with_max_len(1)
            .map(|p| {
                let start = std::time::Instant::now();
                let marker_loc = begin_input(storage, &scatter_root, &p.stem)?;
                let prefix = opts.input.join(&p.stem);
                let idx = Index::read(storage, &prefix)?;
                let bin = storage.read(&with_extension(&prefix, "bin"))?;
                let mut order: Vec<(usize, usize)> = (0..idx.len())
                    .map(|i| (draw(config.seed, &p.stem, i, shards), i))
                    .collect();
                order.sort_unstable();
                let out = scatter_root.join(&p.stem);
                let mut w = DatasetWriter::create(storage, &out, idx.dtype)?;
                let mut ranges = vec![(0u64, 0u64); shards];
                let mut seen = vec![false; shards];
                let width = idx.dtype.size();
                for (n, &(k, i)) in order.iter().enumerate() {
                    let from = usize::try_from(idx.pointers[i]).unwrap_or(usize::MAX);
                    let to = from.saturating_add(idx.lengths[i] as usize * width);
                    let bytes = bin.get(from..to).ok_or_else(|| Error::Input {
                        url: with_extension(&prefix, "bin").to_string(),
                        message: format!("document {i} lies past the end of the file"),
                    })?;
                    w.push(&idx.dtype.decode(bytes))?;
                    if !seen[k] {
                        seen[k] = true;
                        ranges[k].0 = n as u64;
                    }
                    ranges[k].1 = n as u64 + 1;
                }
                let written = w.finish(storage)?;
                let groups = Groups { shards, ranges };
                let groups_rel = format!("{}.groups.json", p.stem);
                let json = serde_json::to_vec(&groups)
                    .map_err(|e| Error::Usage(format!("serialising groups: {e}")))?;
                // This input owns the name: a killed attempt's temporary goes first.
                let groups_loc = scatter_root.join(&groups_rel);
                storage.remove_stale_temporaries(&groups_loc)?;
                storage.put(&groups_loc, &json)?;
                let stats = Stats {
                    docs_in: idx.len() as u64,
                    docs_out: idx.len() as u64,
                    bytes_in: p.meta.size + bin.len() as u64,
                    bytes_out: written.bytes,
                    seconds: start.elapsed().as_secs_f64(),
                    ..Stats::default()
                };
                pipeline::runner::crash_point();
                finish_input(
                    storage,
                    &marker_loc,
                    SCATTER_STEP,
                    &hash,
                    p,
                    vec![
                        format!("{}.bin", p.stem),
                        format!("{}.idx", p.stem),
                        groups_rel,
                    ],
                    &stats,
                )?;
                Ok(stats)
            })
            .collect()
    });
    let mut total = Stats::default();
    for r in results {
        total.merge(&r?);
    }
    Ok(total)
}

/// Gather: this task's output shards, each a unit (`shuffled-NNNNN`; shard k belongs
/// to task k mod tasks), redone when the scattered datasets change.
pub fn gather(storage: &Storage, opts: &RunOptions, config: &MergeConfig) -> Result<Report> {
    let (names, shards, dtype) = layout(storage, &opts.input, config)?;
    let hash = config_key(config, shards);
    let scatter_root = opts.output.join(SCATTER_DIR);
    // Every input must be scattered under this configuration first.
    let mut groups: Vec<(String, Index, Groups)> = Vec::with_capacity(names.len());
    let mut scattered = Vec::with_capacity(names.len());
    for name in &names {
        let marker = read_marker(storage, &marker_location(&scatter_root, name))?
            .filter(|m| m.config_hash == hash)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "input {name} is not scattered yet: run `merge --phase scatter` over every input first"
                ))
            })?;
        scattered.push((name.clone(), marker.input_size, marker.input_etag));
        let g_loc = scatter_root.join(&format!("{name}.groups.json"));
        let g: Groups =
            serde_json::from_slice(&storage.read(&g_loc)?).map_err(|e| Error::Input {
                url: g_loc.to_string(),
                message: e.to_string(),
            })?;
        groups.push((
            name.clone(),
            Index::read(storage, &scatter_root.join(name))?,
            g,
        ));
    }
    let version = pipeline::cli::config_hash("tokenize-gather", &scattered);
    let units: Vec<pipeline::Unit> = (0..shards)
        .map(|k| pipeline::Unit {
            name: output_name(k),
            size: groups
                .iter()
                .map(|(_, _, g)| g.ranges[k].1 - g.ranges[k].0)
                .sum(),
            version: version.clone(),
        })
        .collect();
    let plan = pipeline::plan_units(GATHER_STEP, units, &hash, storage, opts)?;
    let report = pipeline::run_units(
        GATHER_STEP,
        plan,
        &hash,
        &opts.input.to_string(),
        storage,
        opts,
        |unit| {
            let k = (0..shards)
                .find(|&k| output_name(k) == unit.name)
                .ok_or_else(|| Error::Usage(format!("{} is no output shard", unit.name)))?;
            gather_one(storage, opts, config, &scatter_root, &groups, dtype, k)
        },
    )?;
    if !opts.dry_run {
        write_merge_manifest(storage, opts, shards)?;
    }
    Ok(report)
}

fn gather_one(
    storage: &Storage,
    opts: &RunOptions,
    config: &MergeConfig,
    scatter_root: &Location,
    groups: &[(String, Index, Groups)],
    dtype: Dtype,
    k: usize,
) -> Result<pipeline::UnitDone> {
    let name = output_name(k);
    let mut docs: Vec<Vec<u32>> = Vec::new();
    let mut bytes_in = 0u64;
    for (input, idx, g) in groups {
        let (first, end) = (g.ranges[k].0 as usize, g.ranges[k].1 as usize);
        let span = idx.documents(storage, &scatter_root.join(input), first, end.max(first))?;
        bytes_in += span
            .iter()
            .map(|d| (d.len() * dtype.size()) as u64)
            .sum::<u64>();
        docs.extend(span);
    }
    let mut rng =
        fastrand::Rng::with_seed(config.seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    rng.shuffle(&mut docs);
    let prefix = opts.output.join(&name);
    let mut w = DatasetWriter::create(storage, &prefix, dtype)?;
    for d in &docs {
        w.push(d)?;
    }
    let written = w.finish(storage)?;
    let info = ShardInfo {
        name: name.clone(),
        documents: written.documents,
        tokens: written.tokens,
        bytes: written.bytes,
    };
    let info_rel = format!("{}/{name}.json", crate::SHARDS_DIR);
    let json = serde_json::to_vec_pretty(&vec![info])
        .map_err(|e| Error::Usage(format!("serialising shard list: {e}")))?;
    storage.remove_stale_temporaries(&opts.output.join(&info_rel))?;
    storage.put(&opts.output.join(&info_rel), &json)?;
    let stats = Stats {
        docs_in: docs.len() as u64,
        docs_out: docs.len() as u64,
        bytes_in,
        bytes_out: written.bytes,
        ..Stats::default()
    };
    Ok(pipeline::UnitDone {
        outputs: vec![format!("{name}.bin"), format!("{name}.idx"), info_rel],
        stats,
    })
}

/// Writes the merged prefix's manifest once every output shard is done, carrying the
/// tokenizer facts of the input's manifest.
fn write_merge_manifest(storage: &Storage, opts: &RunOptions, shards: usize) -> Result<()> {
    let mut infos = Vec::with_capacity(shards);
    for k in 0..shards {
        let loc = opts
            .output
            .join(&format!("{}/{}.json", crate::SHARDS_DIR, output_name(k)));
        if !storage.exists(&loc)? {
            tracing::info!(shard = k, "manifest waits for the other tasks");
            return Ok(());
        }
        let list: Vec<ShardInfo> =
            serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
                url: loc.to_string(),
                message: e.to_string(),
            })?;
        infos.extend(list);
    }
    let source = crate::read_manifest(storage, &opts.input)?;
    let manifest = Manifest {
        documents: infos.iter().map(|s| s.documents).sum(),
        tokens: infos.iter().map(|s| s.tokens).sum(),
        shards: infos,
        ..source
    };
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| Error::Usage(format!("serialising the manifest: {e}")))?;
    storage.put(&opts.output.join(MANIFEST), &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_spread_evenly_and_fixed_by_the_seed() {
        let shards = 8;
        let mut counts = vec![0usize; shards];
        for i in 0..80_000 {
            counts[draw(7, "a-00000", i, shards)] += 1;
        }
        for c in &counts {
            assert!((9_500..10_500).contains(c), "{counts:?}");
        }
        assert_eq!(draw(7, "a", 5, 1000), draw(7, "a", 5, 1000));
        let differs = (0..100).filter(|&i| draw(7, "a", i, 1000) != draw(8, "a", i, 1000));
        assert!(differs.count() > 90);
    }
}
