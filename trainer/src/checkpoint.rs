//! Checkpoints on disk or S3 (through `pipeline`'s storage): `<dir>/step-NNNNNNNN/`
//! holds `model.safetensors` (the parameters by name), `optim.safetensors` (AdamW's
//! moments, `m.<name>` and `v.<name>`) and `state.json` (step, optimiser step, data
//! position, the generator's seed, configuration and its hash, the tokenizer);
//! `<dir>/latest` names the newest complete one and is written last, so a checkpoint
//! killed half-way is never the one resumed from. The last `keep` checkpoints stay;
//! older ones are deleted only after a newer one is complete.
//! `<dir>/metrics/step-NNNNNNNN.jsonl` holds the step records since the checkpoint
//! before (kept with every checkpoint: the run's loss curve).

use serde::{Deserialize, Serialize};
use tch::Tensor;

use pipeline::{Error, Location, Result, Storage};

/// File naming the newest complete checkpoint.
pub const LATEST: &str = "latest";

/// What a checkpoint records besides tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// Steps done.
    pub step: u64,
    /// AdamW's own step count (bias correction).
    pub optim_step: u64,
    /// Global data position to read on from.
    pub position: u64,
    /// The seed libtorch's generator gets before the next step (`step_seed(seed,
    /// step)`): the generator is reseeded every step, so this is its whole state.
    #[serde(default)]
    pub rng_seed: i64,
    /// Hash of everything that must not change across a resume.
    pub config_hash: String,
    /// That configuration, for people reading the checkpoint.
    pub config: serde_json::Value,
    /// The tokenizer of the shards trained on (for the export).
    #[serde(default)]
    pub tokenizer: Option<TokenizerRef>,
}

/// Which tokenizer made the shards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenizerRef {
    /// Address of its `tokenizer.json`.
    pub url: String,
    pub sha256: String,
    pub end_of_document: String,
    pub end_of_document_id: u32,
}

impl TokenizerRef {
    pub fn of(m: &pipeline::tokens::Manifest) -> TokenizerRef {
        TokenizerRef {
            url: m.tokenizer.clone(),
            sha256: m.tokenizer_sha256.clone(),
            end_of_document: m.end_of_document.clone(),
            end_of_document_id: m.end_of_document_id,
        }
    }
}

fn tch(e: tch::TchError) -> Error {
    Error::Usage(format!("libtorch: {e}"))
}

fn step_name(step: u64) -> String {
    format!("step-{step:08}")
}

/// Serialises named tensors in the safetensors format.
pub(crate) fn to_bytes(tensors: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let dir = tempfile::tempdir().map_err(|e| Error::Usage(format!("a temporary folder: {e}")))?;
    let path = dir.path().join("t.safetensors");
    Tensor::write_safetensors(tensors, &path).map_err(tch)?;
    std::fs::read(&path).map_err(|e| Error::Usage(format!("reading {}: {e}", path.display())))
}

fn from_bytes(bytes: &[u8], url: &str) -> Result<Vec<(String, Tensor)>> {
    let dir = tempfile::tempdir().map_err(|e| Error::Usage(format!("a temporary folder: {e}")))?;
    let path = dir.path().join("t.safetensors");
    std::fs::write(&path, bytes)
        .map_err(|e| Error::Usage(format!("writing {}: {e}", path.display())))?;
    Tensor::read_safetensors(&path).map_err(|e| Error::Input {
        url: url.to_string(),
        message: format!("not a readable safetensors file: {e}"),
    })
}

/// Writes the step records since the checkpoint before, then a checkpoint of `params`
/// (named) and the optimiser's moments, then points `latest` at it, then deletes all
/// but the last `keep`.
pub fn save(
    storage: &Storage,
    dir: &Location,
    params: &[(String, Tensor)],
    moments: (&[Tensor], &[Tensor]),
    state: &State,
    records: &[crate::StepRecord],
    keep: usize,
) -> Result<()> {
    let name = step_name(state.step);
    let mut lines = Vec::new();
    for r in records {
        serde_json::to_writer(&mut lines, r)
            .map_err(|e| Error::Usage(format!("serialising metrics: {e}")))?;
        lines.push(b'\n');
    }
    storage.put(&dir.join(&format!("metrics/{name}.jsonl")), &lines)?;
    let at = dir.join(&format!("{name}/"));
    storage.put(&at.join("model.safetensors"), &to_bytes(params)?)?;
    let mut optim = Vec::with_capacity(2 * params.len());
    for ((n, _), (m, v)) in params.iter().zip(moments.0.iter().zip(moments.1)) {
        optim.push((format!("m.{n}"), m.shallow_clone()));
        optim.push((format!("v.{n}"), v.shallow_clone()));
    }
    storage.put(&at.join("optim.safetensors"), &to_bytes(&optim)?)?;
    let json = serde_json::to_vec_pretty(state)
        .map_err(|e| Error::Usage(format!("serialising the checkpoint state: {e}")))?;
    storage.put(&at.join("state.json"), &json)?;
    storage.put(&dir.join(LATEST), name.as_bytes())?;
    // Older checkpoints go only now that a newer one is complete.
    let mut steps: Vec<String> = storage
        .list(dir)?
        .into_iter()
        .filter_map(|m| {
            let first = m.relative.split('/').next()?.to_string();
            first.starts_with("step-").then_some(first)
        })
        .collect();
    steps.sort();
    steps.dedup();
    let drop = steps.len().saturating_sub(keep.max(1));
    for old in &steps[..drop] {
        let folder = dir.join(&format!("{old}/"));
        for m in storage.list(&folder)? {
            storage.delete(&m.location)?;
        }
        // On disk the emptied folder goes too (object stores have none).
        if let Location::Local(path) = &folder {
            let _ = std::fs::remove_dir(path);
        }
    }
    Ok(())
}

/// A loaded checkpoint.
#[derive(Debug)]
pub struct Loaded {
    pub state: State,
    pub params: Vec<(String, Tensor)>,
    pub optim: Vec<(String, Tensor)>,
}

/// The folder of the newest complete checkpoint below `dir`, if any.
pub fn latest(storage: &Storage, dir: &Location) -> Result<Option<Location>> {
    Ok(latest_name(storage, dir)?.map(|name| dir.join(&format!("{name}/"))))
}

/// The name (`step-…`) of the newest complete checkpoint below `dir`, if any.
fn latest_name(storage: &Storage, dir: &Location) -> Result<Option<String>> {
    let latest = dir.join(LATEST);
    if !storage.exists(&latest)? {
        return Ok(None);
    }
    let name = String::from_utf8_lossy(&storage.read(&latest)?)
        .trim()
        .to_string();
    if !name.starts_with("step-") || name.contains('/') {
        return Err(Error::Input {
            url: latest.to_string(),
            message: format!("names {name:?}, not a checkpoint folder"),
        });
    }
    Ok(Some(name))
}

/// The `state.json` of the checkpoint in folder `at`.
fn read_state(storage: &Storage, at: &Location) -> Result<State> {
    let loc = at.join("state.json");
    serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
        url: loc.to_string(),
        message: format!("unreadable checkpoint state: {e}"),
    })
}

/// Reads the checkpoint in folder `at` (a `step-…/` folder).
pub fn load(storage: &Storage, at: &Location) -> Result<Loaded> {
    let state = read_state(storage, at)?;
    let model = at.join("model.safetensors");
    let optim = at.join("optim.safetensors");
    Ok(Loaded {
        params: from_bytes(&storage.read(&model)?, &model.to_string())?,
        optim: from_bytes(&storage.read(&optim)?, &optim.to_string())?,
        state,
    })
}

/// The step records of the run whose checkpoints are below `dir`, up to its newest
/// complete checkpoint, in step order.
pub fn read_metrics(storage: &Storage, dir: &Location) -> Result<Vec<crate::StepRecord>> {
    let Some(newest) = latest_name(storage, dir)? else {
        return Ok(Vec::new());
    };
    let mut files: Vec<_> = storage
        .list(&dir.join("metrics/"))?
        .into_iter()
        .filter(|m| {
            m.relative.ends_with(".jsonl")
                && m.relative.trim_end_matches(".jsonl") <= newest.as_str()
        })
        .collect();
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    let mut out: Vec<crate::StepRecord> = Vec::new();
    for f in files {
        let bytes = storage.read(&f.location)?;
        for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let r: crate::StepRecord = serde_json::from_slice(line).map_err(|e| Error::Input {
                url: f.location.to_string(),
                message: format!("line {}: not a step record: {e}", n + 1),
            })?;
            // A run killed after its metrics but before `latest` wrote them again.
            if out.last().is_none_or(|l| l.step < r.step) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// The checkpoint `latest` names, if there is one; refused when it was written for
/// another configuration.
pub fn load_latest(storage: &Storage, dir: &Location, config_hash: &str) -> Result<Option<Loaded>> {
    let Some(at) = latest(storage, dir)? else {
        return Ok(None);
    };
    let state = read_state(storage, &at)?;
    if state.config_hash != config_hash {
        return Err(Error::Usage(format!(
            "checkpoint {at} was written for configuration {}; this run's is {config_hash}: \
             resume with the same configuration, or train into another folder",
            state.config_hash
        )));
    }
    load(storage, &at).map(Some)
}
