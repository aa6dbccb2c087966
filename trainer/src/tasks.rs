//! Multiple-choice tasks, scored as lm-eval-harness scores them: each choice's summed
//! log-likelihood after the context (`acc`: the gold choice has the largest), and the
//! same divided by the choice's length in bytes (`acc_norm`). The items come tokenized
//! (`mill` encodes them with the training data's tokenizer, context and continuation as
//! lm-eval-harness splits them): the trainer holds no tokenizer.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use pipeline::{Error, Location, Result, Storage};

use crate::model::Model;

/// One question: the context's ids, each choice's ids (its continuation) and length in
/// bytes, and the index of the right one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskItem {
    pub context: Vec<u32>,
    pub choices: Vec<Vec<u32>>,
    pub choice_bytes: Vec<u64>,
    pub gold: usize,
}

/// A task: its questions, tokenized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSet {
    pub items: Vec<TaskItem>,
}

impl TaskSet {
    /// Reads a tokenized task (JSON) and checks every item.
    pub fn read(storage: &Storage, url: &str) -> Result<TaskSet> {
        let loc = Location::parse(url)?;
        let bytes = storage.read(&loc)?;
        let set: TaskSet = serde_json::from_slice(&bytes).map_err(|e| Error::Input {
            url: url.to_string(),
            message: format!("a tokenized task: {e}"),
        })?;
        for (i, item) in set.items.iter().enumerate() {
            let bad = |m: &str| Error::Input {
                url: url.to_string(),
                message: format!("item {i}: {m}"),
            };
            if item.choices.is_empty() || item.gold >= item.choices.len() {
                return Err(bad("no choices, or gold past them"));
            }
            if item.choice_bytes.len() != item.choices.len() {
                return Err(bad("a byte length per choice"));
            }
            if item.choices.iter().any(Vec::is_empty) {
                return Err(bad("a choice of no tokens"));
            }
        }
        Ok(set)
    }
}

/// A task's accuracies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TaskScore {
    pub acc: f64,
    pub acc_norm: f64,
}

/// The summed log-probability of `continuation` after `context`, as lm-eval-harness
/// takes it: the last `max_seq_len + 1` tokens of both, the model reading all but the
/// last, the continuation's tokens scored in f32.
pub fn loglikelihood(
    net: &Model,
    context: &[u32],
    continuation: &[u32],
    device: Device,
) -> Result<f64> {
    let tch_err = |e: tch::TchError| Error::Usage(format!("libtorch: {e}"));
    let mut seq: Vec<i64> = context
        .iter()
        .chain(continuation)
        .map(|&t| i64::from(t))
        .collect();
    let keep = net.config.max_seq_len + 1;
    if seq.len() > keep {
        seq.drain(..seq.len() - keep);
    }
    let n = continuation.len().min(seq.len() - 1);
    if n == 0 {
        return Err(Error::Usage("a continuation of no tokens".into()));
    }
    let inputs = Tensor::from_slice(&seq[..seq.len() - 1])
        .f_view([1, -1])
        .map_err(tch_err)?
        .f_to_device(device)
        .map_err(tch_err)?;
    let targets = Tensor::from_slice(&seq[seq.len() - n..])
        .f_view([-1, 1])
        .map_err(tch_err)?
        .f_to_device(device)
        .map_err(tch_err)?;
    let _guard = tch::no_grad_guard();
    let t = (seq.len() - 1) as i64;
    let logp = net
        .forward(&inputs)?
        .f_to_kind(Kind::Float)
        .map_err(tch_err)?
        .f_log_softmax(-1, Kind::Float)
        .map_err(tch_err)?
        .f_squeeze_dim(0)
        .map_err(tch_err)?
        .f_narrow(0, t - n as i64, n as i64)
        .map_err(tch_err)?;
    logp.f_gather(1, &targets, false)
        .map_err(tch_err)?
        .f_to_kind(Kind::Double)
        .map_err(tch_err)?
        .f_sum(Kind::Double)
        .map_err(tch_err)?
        .f_double_value(&[])
        .map_err(tch_err)
}

/// Every choice's log-likelihood, by item, and the task's accuracies (a tie goes to the
/// first choice, as `numpy.argmax` gives it).
pub fn score(net: &Model, set: &TaskSet, device: Device) -> Result<(TaskScore, Vec<Vec<f64>>)> {
    let mut all = Vec::with_capacity(set.items.len());
    let (mut right, mut right_norm) = (0usize, 0usize);
    for item in &set.items {
        let lls = item
            .choices
            .iter()
            .map(|c| loglikelihood(net, &item.context, c, device))
            .collect::<Result<Vec<f64>>>()?;
        let best = |f: &dyn Fn(usize) -> f64| {
            (0..lls.len()).fold(0, |b, i| if f(i) > f(b) { i } else { b })
        };
        right += usize::from(best(&|i| lls[i]) == item.gold);
        right_norm +=
            usize::from(best(&|i| lls[i] / item.choice_bytes[i].max(1) as f64) == item.gold);
        all.push(lls);
    }
    let n = set.items.len().max(1) as f64;
    Ok((
        TaskScore {
            acc: right as f64 / n,
            acc_norm: right_norm as f64 / n,
        },
        all,
    ))
}
