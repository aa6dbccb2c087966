//! Multiple-choice tasks for the train step's evaluations: read from JSONL (one item a
//! line: `context`, `choices`, `gold`), encoded with the training data's tokenizer as
//! lm-eval-harness encodes a context and a continuation, and written as the trainer's
//! `tasks::TaskSet` (the trainer holds no tokenizer).

use serde::{Deserialize, Serialize};

use pipeline::{Error, Location, Result, Storage};

/// One line of a task file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    pub context: String,
    pub choices: Vec<String>,
    /// The index of the right choice.
    pub gold: usize,
}

/// An item tokenized: the trainer's `TaskItem`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tokenized {
    pub context: Vec<u32>,
    pub choices: Vec<Vec<u32>>,
    pub choice_bytes: Vec<u64>,
    pub gold: usize,
}

/// Reads a task file; a line that is not an item is an error naming the file and line.
pub fn read(storage: &Storage, url: &str) -> Result<Vec<Item>> {
    parse(url, &storage.read(&Location::parse(url)?)?)
}

/// The items of a task file's bytes (`url` names it in errors).
pub fn parse(url: &str, bytes: &[u8]) -> Result<Vec<Item>> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::Input {
        url: url.to_string(),
        message: format!("not UTF-8 at byte {}", e.valid_up_to()),
    })?;
    let mut items = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |m: String| Error::Input {
            url: url.to_string(),
            message: format!("line {}: {m}", n + 1),
        };
        let item: Item = serde_json::from_str(line).map_err(|e| {
            bad(format!(
                "{e} (each line: {{\"context\": …, \"choices\": […], \"gold\": index}})"
            ))
        })?;
        if item.choices.len() < 2 {
            return Err(bad("fewer than two choices".into()));
        }
        if item.gold >= item.choices.len() {
            return Err(bad(format!(
                "gold {} of {} choices",
                item.gold,
                item.choices.len()
            )));
        }
        if item.choices.iter().any(String::is_empty) {
            return Err(bad("an empty choice".into()));
        }
        items.push(item);
    }
    if items.is_empty() {
        return Err(Error::Input {
            url: url.to_string(),
            message: "no items".into(),
        });
    }
    Ok(items)
}

/// A context and its continuations as lm-eval-harness encodes each pair
/// (`_encode_pair`): the context's trailing whitespace moves to the continuation; a
/// continuation is what encoding both adds to encoding the context (encoded once, the
/// same for every choice). An empty context is the end-of-document token.
pub fn encode_choices(
    encode: &dyn Fn(&str) -> Result<Vec<u32>>,
    eod: u32,
    context: &str,
    choices: &[String],
) -> Result<(Vec<u32>, Vec<Vec<u32>>)> {
    if context.is_empty() {
        let choices = choices.iter().map(|c| encode(c)).collect::<Result<_>>()?;
        return Ok((vec![eod], choices));
    }
    let (context, moved) = context.split_at(context.trim_end().len());
    let head = encode(context)?;
    let choices = choices
        .iter()
        .map(|c| {
            let whole = encode(&format!("{context}{moved}{c}"))?;
            Ok(whole[head.len().min(whole.len())..].to_vec())
        })
        .collect::<Result<_>>()?;
    Ok((head, choices))
}

/// Every item encoded with `encode`.
pub fn tokenize(
    items: &[Item],
    encode: &dyn Fn(&str) -> Result<Vec<u32>>,
    eod: u32,
) -> Result<Vec<Tokenized>> {
    items
        .iter()
        .map(|item| {
            let (context, choices) = encode_choices(encode, eod, &item.context, &item.choices)?;
            Ok(Tokenized {
                context,
                choices,
                choice_bytes: item.choices.iter().map(|c| c.len() as u64).collect(),
                gold: item.gold,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tokenizer of one id per character (spaces too).
    fn chars(text: &str) -> Result<Vec<u32>> {
        Ok(text.chars().map(|c| c as u32).collect())
    }

    #[test]
    fn pairs_are_split_as_lm_eval_harness_splits_them() {
        let ids = |t: &str| chars(t).expect("ids");
        let (ctx, conts) =
            encode_choices(&chars, 0, "Q: sky? A: ", &["blue".into(), "red".into()]).expect("pair");
        // The context's trailing space goes with each continuation.
        assert_eq!(ctx, ids("Q: sky? A:"));
        assert_eq!(conts, vec![ids(" blue"), ids(" red")]);
        let (ctx, conts) = encode_choices(&chars, 7, "", &["blue".into()]).expect("pair");
        assert_eq!((ctx, conts), (vec![7], vec![ids("blue")]));
        let items = vec![Item {
            context: "2+2=".into(),
            choices: vec!["4".into(), "22".into()],
            gold: 0,
        }];
        let t = tokenize(&items, &chars, 0).expect("tokenize");
        assert_eq!(t[0].context, ids("2+2="));
        assert_eq!(t[0].choices, vec![ids("4"), ids("22")]);
        assert_eq!(t[0].choice_bytes, vec![1, 2]);
    }

    #[test]
    fn a_bad_line_is_named() {
        let dir = tempfile::tempdir().expect("tmp");
        let storage = Storage::new();
        for (text, says) in [
            (
                "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 0}\nnot json\n",
                "line 2",
            ),
            (
                "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 2}\n",
                "line 1: gold 2 of 2",
            ),
            (
                "{\"context\": \"a\", \"choices\": [\"b\"], \"gold\": 0}\n",
                "fewer than two",
            ),
            (
                "{\"context\": \"a\", \"choices\": [\"b\", \"c\"]}\n",
                "gold",
            ),
            ("\n", "no items"),
        ] {
            let f = dir.path().join("t.jsonl");
            std::fs::write(&f, text).expect("write");
            let err = read(&storage, &f.to_string_lossy())
                .expect_err(says)
                .to_string();
            assert!(
                err.contains(says) && err.contains("t.jsonl"),
                "{err} should say {says}"
            );
        }
    }
}
