//! `mill run --incremental`: reprocessing on a schedule, for a crawl prefix where new
//! WARC files keep arriving.
//!
//! Each call that finds new inputs makes an increment `NNNNN`:
//! - `<output>/_increments/NNNNN.inputs.json` lists the inputs no earlier increment
//!   had (an input list: the first step reads those files only);
//! - the pipeline runs on them into `<output>/inc-NNNNN/`, with three changes: the
//!   `dedup.buckets` steps deduplicate against `<output>/dedup-index/` (what earlier
//!   increments kept), the increments after the first encode with the first one's
//!   tokenizer (their `tokenize.train` steps are dropped, so every shard shares one
//!   vocabulary), and `train` steps are left out (training follows the manifest);
//! - the documents it kept are added to the dedup index (`mill-dedup index`, which only
//!   ever adds files);
//! - its token shards are appended to the run's manifest: `<output>/manifest.json`
//!   (shard names relative to `<output>/`, so the trainer reads `<output>/` as one
//!   corpus) and a copy `<output>/manifest-vNNNNN.json` per version. Earlier shards
//!   are never rewritten.
//!
//! The run lock of `mill run` covers the whole call. An increment that stopped half-way
//! is finished by the next call before a new one is made (`NNNNN.done` marks a
//! finished one).

use pipeline::runner::{INPUT_LIST_SUFFIX, InputList, ListedInput, RunOptions, list_inputs};
use pipeline::tokens::{MANIFEST, Manifest, ShardInfo};
use pipeline::{Error, Location, Result, Storage};

use crate::exec::{Flags, StepSummary};
use crate::spec::{Kind, Pipeline};

/// Folder of the increments' input lists and completion notes.
pub const INCREMENTS_DIR: &str = "_increments";
/// The dedup index of everything the increments kept.
pub const INDEX_DIR: &str = "dedup-index";

/// What one call did.
#[derive(Debug, Clone, Default)]
pub struct Increment {
    /// Its number, when there was anything to do.
    pub number: Option<u32>,
    pub inputs: usize,
    pub steps: Vec<StepSummary>,
    /// Shards in the run's manifest after it.
    pub shards: usize,
}

fn name(k: u32) -> String {
    format!("{k:05}")
}

/// The pipeline of increment `k` (see the module's text).
pub fn increment_pipeline(p: &Pipeline, k: u32, list: &Location) -> Result<Pipeline> {
    let root = p.run_location()?;
    let mut q = p.clone();
    q.output = root.join(&format!("inc-{}/", name(k))).to_string();
    q.input = list.to_string();
    let first = root.join("inc-00001/");
    let mut steps = Vec::new();
    for s in &p.steps {
        let mut s = s.clone();
        match s.kind()? {
            Kind::Train => continue,
            Kind::TokenizeTrain if k > 1 => continue,
            Kind::TokenizeEncode if k > 1 => {
                let train = s.tokenizer.clone().ok_or_else(|| {
                    Error::Usage(format!(
                        "step {}: an incremental run encodes with the first increment's tokenizer: name the train step in `tokenizer`",
                        s.name
                    ))
                })?;
                if p.steps.iter().any(|o| o.name == train) {
                    s.tokenizer = Some(
                        first
                            .join(&format!("{train}/"))
                            .join(tokenize::TOKENIZER_FILE)
                            .to_string(),
                    );
                }
            }
            Kind::DedupBuckets if k > 1 => {
                s.against = Some(root.join(&format!("{INDEX_DIR}/")).to_string());
            }
            _ => {}
        }
        steps.push(s);
    }
    q.steps = steps;
    Ok(q)
}

/// Runs the next increment of the pipeline `p`, if its input prefix holds files no
/// increment had (or finishes one that stopped).
pub fn run(storage: &Storage, p: &Pipeline, flags: &Flags) -> Result<Increment> {
    let root = p.run_location()?;
    let _lock = pipeline::lock::acquire(
        storage,
        &root,
        "mill run --incremental",
        std::time::Duration::from_secs(crate::exec::RUN_LEASE_SECS),
    )?;
    let dir = root.join(&format!("{INCREMENTS_DIR}/"));
    let mut seen = std::collections::BTreeSet::new();
    let (mut last, mut last_done) = (0u32, true);
    for meta in storage.list(&dir)? {
        let Some(stem) = meta.relative.strip_suffix(INPUT_LIST_SUFFIX) else {
            continue;
        };
        let k: u32 = stem.parse().map_err(|_| Error::Input {
            url: meta.location.to_string(),
            message: "not an increment's input list".into(),
        })?;
        let list: InputList =
            serde_json::from_slice(&storage.read(&meta.location)?).map_err(|e| Error::Input {
                url: meta.location.to_string(),
                message: format!("not an input list: {e}"),
            })?;
        seen.extend(list.inputs.into_iter().map(|i| i.relative));
        if k > last {
            last = k;
            last_done = storage.exists(&dir.join(&format!("{}.done", name(k))))?;
        }
    }
    let k = if last > 0 && !last_done {
        last
    } else {
        let input = Location::parse(&p.input)?;
        let new: Vec<ListedInput> = list_inputs(storage, &input)?
            .into_iter()
            .filter(|m| !seen.contains(&m.relative))
            .map(|m| ListedInput {
                relative: m.relative,
                size: m.size,
                etag: m.etag,
            })
            .collect();
        // Only files the first step takes count (a stray README is not new work).
        let warc = p
            .steps
            .first()
            .and_then(|s| s.stages.first())
            .is_some_and(|s| s == "extract");
        // The first step's settings (its own [step.config] over the pipeline's).
        let warc_source = extract::WarcSource::new(&p.for_step(0).stage_config("extract")?);
        let docs = pipeline::DocumentSource::default();
        let takes = |rel: &str| {
            use pipeline::Source;
            if warc {
                warc_source.stem(rel).is_some()
            } else {
                docs.stem(rel).is_some()
            }
        };
        let new: Vec<ListedInput> = new
            .into_iter()
            .filter(|i| {
                !i.relative.split('/').any(|x| x.starts_with(['_', '.'])) && takes(&i.relative)
            })
            .collect();
        if new.is_empty() {
            return Ok(Increment {
                shards: read_run_manifest(storage, &root)?.map_or(0, |m| m.shards.len()),
                ..Increment::default()
            });
        }
        let list = InputList {
            base: input.join("").to_string(),
            inputs: new,
        };
        let json = serde_json::to_vec_pretty(&list)
            .map_err(|e| Error::Usage(format!("serialising an input list: {e}")))?;
        storage.put(
            &dir.join(&format!("{}{INPUT_LIST_SUFFIX}", name(last + 1))),
            &json,
        )?;
        last + 1
    };
    let list_loc = dir.join(&format!("{}{INPUT_LIST_SUFFIX}", name(k)));
    let inputs = list_inputs(storage, &list_loc)?.len();
    let q = increment_pipeline(p, k, &list_loc)?;
    let steps = crate::exec::run(storage, &q, None, None, None, flags)?;
    // The documents this increment kept join the index that later ones meet.
    for (i, s) in q.steps.iter().enumerate() {
        if s.kind()? != Kind::DedupBuckets {
            continue;
        }
        let clusters = q
            .steps
            .iter()
            .skip(i + 1)
            .find(|c| c.kind().is_ok_and(|k| k == Kind::DedupClusters))
            .ok_or_else(|| Error::Usage(format!("step {}: no clusters step after it", s.name)))?;
        let opts = RunOptions {
            tasks: 1,
            task: 0,
            threads: flags.threads,
            force: false,
            ..RunOptions::new(q.input_of(i)?, root.join(&format!("{INDEX_DIR}/")))
        };
        dedup::index::index(
            storage,
            &opts,
            &q.for_step(i).stage_config("dedup")?,
            &q.step_output(&clusters.name)?,
        )?;
    }
    let shards = append_shards(storage, &root, &q, k)?;
    storage.put(&dir.join(&format!("{}.done", name(k))), b"{}")?;
    Ok(Increment {
        number: Some(k),
        inputs,
        steps,
        shards,
    })
}

fn read_run_manifest(storage: &Storage, root: &Location) -> Result<Option<Manifest>> {
    let loc = root.join(MANIFEST);
    if !storage.exists(&loc)? {
        return Ok(None);
    }
    pipeline::tokens::read_manifest(storage, root).map(Some)
}

/// Appends increment `k`'s token shards to the run's manifest (a new version).
fn append_shards(storage: &Storage, root: &Location, q: &Pipeline, k: u32) -> Result<usize> {
    let Some(tokens) = q
        .steps
        .iter()
        .rev()
        .find(|s| s.kind().is_ok_and(|k| k == Kind::TokenizeEncode))
    else {
        return Ok(0);
    };
    let inc = pipeline::tokens::read_manifest(storage, &q.step_output(&tokens.name)?)?;
    let prefix = format!("inc-{}/{}/", name(k), tokens.name);
    let mut run = match read_run_manifest(storage, root)? {
        Some(m) => m,
        None => Manifest {
            shards: Vec::new(),
            documents: 0,
            tokens: 0,
            ..inc.clone()
        },
    };
    if run.tokenizer_sha256 != inc.tokenizer_sha256 || run.dtype != inc.dtype {
        return Err(Error::Usage(format!(
            "increment {k} was encoded with tokenizer {} ({:?}); the run's shards with {} ({:?})",
            inc.tokenizer_sha256, inc.dtype, run.tokenizer_sha256, run.dtype
        )));
    }
    for s in &inc.shards {
        let name = format!("{prefix}{}", s.name);
        // A rerun of an increment that stopped after this point adds nothing twice.
        if run.shards.iter().any(|r| r.name == name) {
            continue;
        }
        run.documents += s.documents;
        run.tokens += s.tokens;
        run.shards.push(ShardInfo { name, ..s.clone() });
    }
    let json = serde_json::to_vec_pretty(&run)
        .map_err(|e| Error::Usage(format!("serialising the run's manifest: {e}")))?;
    storage.put(&root.join(&format!("manifest-v{}.json", name(k))), &json)?;
    storage.put(&root.join(MANIFEST), &json)?;
    Ok(run.shards.len())
}
