//! Splitting the sorted input listing among N tasks.

use crate::error::{Error, Result};
use crate::storage::ObjectMeta;

/// Environment variables that batch engines set to an array task's index, in the
/// order they are consulted.
pub const TASK_INDEX_VARS: [&str; 3] = [
    "SLURM_ARRAY_TASK_ID",
    "AWS_BATCH_JOB_ARRAY_INDEX",
    "JOB_COMPLETION_INDEX",
];

/// The first task index of an array when a step's tasks are split into several arrays
/// (every engine caps an array's size): added to the engine's index.
pub const TASK_OFFSET_VAR: &str = "TOKENMILL_TASK_OFFSET";

/// This task's index: the flag if given, else `TOKENMILL_TASK_OFFSET` plus the batch
/// engine's variable (0 when none is set).
/// Slurm arrays may start at 1 (`--array=1-N`): `SLURM_ARRAY_TASK_MIN` is subtracted.
pub fn task_index(flag: Option<usize>, tasks: usize) -> Result<usize> {
    let index = match flag {
        Some(i) => i,
        None => from_env(|k| std::env::var(k).ok())?,
    };
    if tasks == 0 {
        return Err(Error::Usage("--tasks must be at least 1".into()));
    }
    if index >= tasks {
        return Err(Error::Usage(format!(
            "task index {index} is out of range for --tasks {tasks}"
        )));
    }
    Ok(index)
}

fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<usize> {
    let offset = match get(TASK_OFFSET_VAR) {
        None => 0,
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|_| Error::Usage(format!("{TASK_OFFSET_VAR}={v:?} is not a task index")))?,
    };
    Ok(offset + engine_index(get)?)
}

fn engine_index(get: impl Fn(&str) -> Option<String>) -> Result<usize> {
    for var in TASK_INDEX_VARS {
        if let Some(v) = get(var) {
            let parse = |s: &str, name: &str| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| Error::Usage(format!("{name}={s:?} is not a task index")))
            };
            let mut index = parse(&v, var)?;
            if var == "SLURM_ARRAY_TASK_ID"
                && let Some(min) = get("SLURM_ARRAY_TASK_MIN")
            {
                index = index.saturating_sub(parse(&min, "SLURM_ARRAY_TASK_MIN")?);
            }
            return Ok(index);
        }
    }
    Ok(0)
}

/// The inputs of task `task` out of `tasks`: a deterministic, size-balanced split.
///
/// Inputs are taken largest first (ties by path) and each goes to the task with the
/// least bytes so far (ties to the lowest index); every input lands in exactly one
/// task. The result keeps listing order.
pub fn split(inputs: &[ObjectMeta], tasks: usize, task: usize) -> Vec<&ObjectMeta> {
    assignment(inputs, tasks)
        .into_iter()
        .zip(inputs)
        .filter(|(t, _)| *t == task)
        .map(|(_, input)| input)
        .collect()
}

/// The task each input goes to.
pub fn assignment(inputs: &[ObjectMeta], tasks: usize) -> Vec<usize> {
    let tasks = tasks.max(1);
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by(|&a, &b| {
        inputs[b]
            .size
            .cmp(&inputs[a].size)
            .then_with(|| inputs[a].relative.cmp(&inputs[b].relative))
    });
    // The least loaded task (bytes, then inputs, then index) comes off a heap: a
    // choice in log(tasks), so 10,000 tasks over 100,000 inputs plan in milliseconds.
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize, usize)>> = (0..tasks
        .min(inputs.len().max(1)))
        .map(|t| std::cmp::Reverse((0, 0, t)))
        .collect();
    let mut out = vec![0; inputs.len()];
    for i in order {
        let Some(std::cmp::Reverse((load, count, t))) = heap.pop() else {
            break;
        };
        out[i] = t;
        heap.push(std::cmp::Reverse((load + inputs[i].size, count + 1, t)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Location;
    use proptest::prelude::*;

    fn inputs(sizes: &[u64]) -> Vec<ObjectMeta> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| ObjectMeta {
                location: Location::Local(format!("in/{i:04}").into()),
                relative: format!("{i:04}"),
                size,
                etag: None,
            })
            .collect()
    }

    /// The assignment by a scan of every task (what the heap replaced).
    fn by_scan(inputs: &[ObjectMeta], tasks: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..inputs.len()).collect();
        order.sort_by(|&a, &b| {
            inputs[b]
                .size
                .cmp(&inputs[a].size)
                .then_with(|| inputs[a].relative.cmp(&inputs[b].relative))
        });
        let (mut load, mut count) = (vec![0u64; tasks], vec![0usize; tasks]);
        let mut out = vec![0; inputs.len()];
        for i in order {
            let t = (0..tasks)
                .min_by_key(|&t| (load[t], count[t], t))
                .unwrap_or(0);
            load[t] += inputs[i].size;
            count[t] += 1;
            out[i] = t;
        }
        out
    }

    proptest! {
        #[test]
        fn the_heap_assigns_as_a_scan_of_every_task(sizes in prop::collection::vec(0u64..1000, 0..80), tasks in 1usize..100) {
            let ins = inputs(&sizes);
            prop_assert_eq!(assignment(&ins, tasks), by_scan(&ins, tasks));
        }


        #[test]
        fn every_input_in_exactly_one_task(sizes in prop::collection::vec(0u64..1_000_000, 0..60), tasks in 1usize..12) {
            let inputs = inputs(&sizes);
            let mut seen = vec![0; inputs.len()];
            for t in 0..tasks {
                for input in split(&inputs, tasks, t) {
                    let i: usize = input.relative.parse().expect("numeric name");
                    seen[i] += 1;
                }
            }
            prop_assert!(seen.iter().all(|&n| n == 1));
        }

        #[test]
        fn balanced_within_the_largest_input(sizes in prop::collection::vec(1u64..1_000_000, 1..60), tasks in 1usize..8) {
            let inputs = inputs(&sizes);
            let loads: Vec<u64> = (0..tasks)
                .map(|t| split(&inputs, tasks, t).iter().map(|m| m.size).sum())
                .collect();
            let max = *loads.iter().max().expect("tasks >= 1");
            let min = *loads.iter().min().expect("tasks >= 1");
            let largest = *sizes.iter().max().expect("non-empty");
            prop_assert!(max - min <= largest);
        }
    }

    #[test]
    fn index_from_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(from_env(env(&[])).ok(), Some(0));
        assert_eq!(
            from_env(env(&[("JOB_COMPLETION_INDEX", "3")])).ok(),
            Some(3)
        );
        assert_eq!(
            from_env(env(&[("AWS_BATCH_JOB_ARRAY_INDEX", "5")])).ok(),
            Some(5)
        );
        assert_eq!(
            from_env(env(&[
                ("SLURM_ARRAY_TASK_ID", "4"),
                ("SLURM_ARRAY_TASK_MIN", "1")
            ]))
            .ok(),
            Some(3)
        );
        assert!(from_env(env(&[("JOB_COMPLETION_INDEX", "x")])).is_err());
        // The second array of a split step: its offset plus the engine's index, the
        // same way on every engine (and alone for a one-task job of Batch).
        for var in TASK_INDEX_VARS {
            let pairs: &'static [(&'static str, &'static str)] = match var {
                "SLURM_ARRAY_TASK_ID" => &[("SLURM_ARRAY_TASK_ID", "7"), (TASK_OFFSET_VAR, "11")],
                "AWS_BATCH_JOB_ARRAY_INDEX" => {
                    &[("AWS_BATCH_JOB_ARRAY_INDEX", "7"), (TASK_OFFSET_VAR, "11")]
                }
                _ => &[("JOB_COMPLETION_INDEX", "7"), (TASK_OFFSET_VAR, "11")],
            };
            assert_eq!(from_env(env(pairs)).ok(), Some(18), "{var}");
        }
        assert_eq!(
            from_env(env(&[(TASK_OFFSET_VAR, "10000")])).ok(),
            Some(10000)
        );
        assert!(from_env(env(&[(TASK_OFFSET_VAR, "-1")])).is_err());
        assert!(task_index(Some(2), 2).is_err());
        assert!(task_index(Some(0), 0).is_err());
    }
}
