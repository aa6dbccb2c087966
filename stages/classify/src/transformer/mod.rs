//! Transformer sequence classifiers in the Hugging Face layout: a folder (on disk or
//! S3) with `config.json`, `model.safetensors` and `tokenizer.json`, as
//! `save_pretrained` writes it. BERT (`BertForSequenceClassification`: FineWeb-Edu's
//! classifier is one, a regression head on an embedding model) and XLM-RoBERTa
//! (`XLMRobertaForSequenceClassification`, and RoBERTa's, which is the same network).
//!
//! Loading checks everything before a document is read: the three files are there,
//! the architecture is one of these, every weight the network needs is present with
//! its shape, and the head's outputs match the labels `config.json` names. The network
//! runs on a [`Backend`]: [`cpu::CpuEncoder`] here (f32, no libtorch), or one a GPU
//! binary brings (the trainer's libtorch, bf16 on CUDA).
//!
//! Texts are tokenized with the model's own `tokenizer.json` (the `tokenizers` crate,
//! which is what transformers' fast tokenizers run), with their special tokens, cut to
//! the model's maximum length (512 tokens for BERT and XLM-R) as FineWeb-Edu's
//! annotation did; documents are sorted by length and batched so that a batch wastes
//! little on padding.

pub mod cpu;
pub mod kernels;

use std::sync::Arc;

use pipeline::{Error, Location, Result, Storage};
use serde_json::Value as Json;

pub use kernels::Activation;

/// The files a model folder must hold.
pub const CONFIG_FILE: &str = "config.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// Read when present: transformers takes the maximum length from it.
pub const TOKENIZER_CONFIG_FILE: &str = "tokenizer_config.json";

/// The networks this module runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Bert,
    /// XLM-RoBERTa and RoBERTa: BERT's encoder with positions counted from the padding
    /// id plus one, and the head on the first token without BERT's pooler.
    XlmRoberta,
}

/// How the head's outputs become scores (`problem_type` in `config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// One output, the score itself (FineWeb-Edu's educational value).
    Regression,
    /// Softmax over the labels.
    SingleLabel,
    /// A sigmoid per label.
    MultiLabel,
}

/// What `config.json` says about the network.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub arch: Arch,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub vocab: usize,
    pub positions: usize,
    pub type_vocab: usize,
    pub layer_norm_eps: f32,
    pub activation: Activation,
    pub pad_token_id: u32,
    /// The labels, by output index (`id2label`).
    pub labels: Vec<String>,
    pub problem: Problem,
}

impl ModelConfig {
    /// The position of a sequence's first token in the position table.
    pub fn position_offset(&self) -> usize {
        match self.arch {
            Arch::Bert => 0,
            Arch::XlmRoberta => self.pad_token_id as usize + 1,
        }
    }

    /// The longest sequence the position table allows.
    pub fn max_tokens(&self) -> usize {
        self.positions.saturating_sub(self.position_offset())
    }

    /// Parses `config.json`; `url` names it in errors.
    pub fn parse(text: &[u8], url: &str) -> Result<ModelConfig> {
        let bad = |message: String| Error::Config {
            url: url.to_string(),
            message,
        };
        let json: Json = serde_json::from_slice(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let architecture = json["architectures"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(Json::as_str)
            .unwrap_or("");
        let model_type = json["model_type"].as_str().unwrap_or("");
        let arch = match (architecture, model_type) {
            ("BertForSequenceClassification", _) => Arch::Bert,
            ("XLMRobertaForSequenceClassification" | "RobertaForSequenceClassification", _) => {
                Arch::XlmRoberta
            }
            ("", "bert") => Arch::Bert,
            ("", "xlm-roberta" | "roberta") => Arch::XlmRoberta,
            _ => {
                return Err(bad(format!(
                    "unknown architecture {architecture:?} (model_type {model_type:?}): \
                     tokenmill runs BertForSequenceClassification, \
                     XLMRobertaForSequenceClassification and RobertaForSequenceClassification"
                )));
            }
        };
        let size = |key: &str| -> Result<usize> {
            json[key]
                .as_u64()
                .filter(|&v| v > 0)
                .map(|v| v as usize)
                .ok_or_else(|| bad(format!("`{key}` is missing or not a positive integer")))
        };
        let hidden = size("hidden_size")?;
        let heads = size("num_attention_heads")?;
        if hidden % heads != 0 {
            return Err(bad(format!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            )));
        }
        let activation = match json["hidden_act"].as_str().unwrap_or("gelu") {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => return Err(bad(format!("unknown hidden_act {other:?}"))),
        };
        match json["position_embedding_type"].as_str() {
            None | Some("absolute") => {}
            Some(other) => {
                return Err(bad(format!(
                    "position_embedding_type {other:?}: only absolute positions are supported"
                )));
            }
        }
        // id2label: {"0": "LABEL_0", ...}; absent, transformers makes two labels.
        let labels: Vec<String> = match json["id2label"].as_object() {
            Some(map) => {
                let mut pairs: Vec<(usize, String)> = Vec::with_capacity(map.len());
                for (k, v) in map {
                    let i: usize = k
                        .parse()
                        .map_err(|_| bad(format!("id2label key {k:?} is not an index")))?;
                    let name = v
                        .as_str()
                        .ok_or_else(|| bad(format!("id2label[{k}] is not a string")))?;
                    pairs.push((i, name.to_string()));
                }
                pairs.sort();
                if pairs.iter().enumerate().any(|(i, (k, _))| i != *k) {
                    return Err(bad("id2label's indexes are not 0..n".into()));
                }
                pairs.into_iter().map(|(_, n)| n).collect()
            }
            None => {
                let n = json["num_labels"].as_u64().unwrap_or(2) as usize;
                (0..n).map(|i| format!("LABEL_{i}")).collect()
            }
        };
        if labels.is_empty() {
            return Err(bad("the model names no labels".into()));
        }
        let problem = match json["problem_type"].as_str() {
            Some("regression") => Problem::Regression,
            Some("single_label_classification") => Problem::SingleLabel,
            Some("multi_label_classification") => Problem::MultiLabel,
            None if labels.len() == 1 => Problem::Regression,
            None => Problem::SingleLabel,
            Some(other) => return Err(bad(format!("unknown problem_type {other:?}"))),
        };
        Ok(ModelConfig {
            arch,
            hidden,
            layers: size("num_hidden_layers")?,
            heads,
            intermediate: size("intermediate_size")?,
            vocab: size("vocab_size")?,
            positions: size("max_position_embeddings")?,
            type_vocab: json["type_vocab_size"].as_u64().unwrap_or(2).max(1) as usize,
            layer_norm_eps: json["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32,
            activation,
            pad_token_id: json["pad_token_id"].as_u64().unwrap_or(match arch {
                Arch::Bert => 0,
                Arch::XlmRoberta => 1,
            }) as u32,
            labels,
            problem,
        })
    }
}

/// A weight in f32, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// One encoder layer's weights (linear weights as `[out, in]`, as PyTorch keeps them).
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub query: (Tensor, Tensor),
    pub key: (Tensor, Tensor),
    pub value: (Tensor, Tensor),
    pub attention_out: (Tensor, Tensor),
    pub attention_norm: (Tensor, Tensor),
    pub up: (Tensor, Tensor),
    pub down: (Tensor, Tensor),
    pub output_norm: (Tensor, Tensor),
}

/// Every weight of a sequence classifier. Both heads are `out(tanh(dense(h₀)))` on
/// the first token's state: BERT's pooler then classifier, XLM-R's classification
/// head.
#[derive(Debug, Clone)]
pub struct Weights {
    pub word: Tensor,
    pub position: Tensor,
    pub token_type: Tensor,
    pub embedding_norm: (Tensor, Tensor),
    pub layers: Vec<LayerWeights>,
    pub head_dense: (Tensor, Tensor),
    pub head_out: (Tensor, Tensor),
}

/// Reads `model.safetensors` into [`Weights`], checking every name and shape against
/// `config`; `url` names the file in errors.
pub fn read_weights(bytes: &[u8], config: &ModelConfig, url: &str) -> Result<Weights> {
    let bad = |message: String| Error::Config {
        url: url.to_string(),
        message,
    };
    let file = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| bad(format!("not a safetensors file: {e:?}")))?;
    let names: std::collections::BTreeSet<String> = file.names().into_iter().cloned().collect();
    // The encoder's prefix: `bert.` / `roberta.` in a *ForSequenceClassification
    // checkpoint; none in a bare encoder's.
    let base = match config.arch {
        Arch::Bert => "bert.",
        Arch::XlmRoberta => "roberta.",
    };
    let prefix = if names.iter().any(|n| n.starts_with(base)) {
        base
    } else {
        ""
    };
    let get = |name: &str, shape: &[usize]| -> Result<Tensor> {
        let view = file.tensor(name).map_err(|_| {
            bad(format!(
                "no weight {name} (a {:?} sequence classifier needs it)",
                config.arch
            ))
        })?;
        if view.shape() != shape {
            return Err(bad(format!(
                "weight {name} has shape {:?}; config.json makes it {shape:?}",
                view.shape()
            )));
        }
        let data = to_f32(view.dtype(), view.data())
            .ok_or_else(|| bad(format!("weight {name} is {:?}, not a float", view.dtype())))?;
        Ok(Tensor {
            shape: shape.to_vec(),
            data,
        })
    };
    // LayerNorm weights are `weight`/`bias`, or `gamma`/`beta` in old checkpoints.
    let norm = |stem: &str, width: usize| -> Result<(Tensor, Tensor)> {
        let (w, b) = if names.contains(&format!("{stem}.weight"))
            || !names.contains(&format!("{stem}.gamma"))
        {
            ("weight", "bias")
        } else {
            ("gamma", "beta")
        };
        Ok((
            get(&format!("{stem}.{w}"), &[width])?,
            get(&format!("{stem}.{b}"), &[width])?,
        ))
    };
    let linear = |stem: &str, out: usize, inp: usize| -> Result<(Tensor, Tensor)> {
        Ok((
            get(&format!("{stem}.weight"), &[out, inp])?,
            get(&format!("{stem}.bias"), &[out])?,
        ))
    };
    let h = config.hidden;
    let e = format!("{prefix}embeddings");
    let mut layers = Vec::with_capacity(config.layers);
    for i in 0..config.layers {
        let l = format!("{prefix}encoder.layer.{i}");
        layers.push(LayerWeights {
            query: linear(&format!("{l}.attention.self.query"), h, h)?,
            key: linear(&format!("{l}.attention.self.key"), h, h)?,
            value: linear(&format!("{l}.attention.self.value"), h, h)?,
            attention_out: linear(&format!("{l}.attention.output.dense"), h, h)?,
            attention_norm: norm(&format!("{l}.attention.output.LayerNorm"), h)?,
            up: linear(&format!("{l}.intermediate.dense"), config.intermediate, h)?,
            down: linear(&format!("{l}.output.dense"), h, config.intermediate)?,
            output_norm: norm(&format!("{l}.output.LayerNorm"), h)?,
        });
    }
    let labels = config.labels.len();
    // BERT: its pooler, then `classifier`; XLM-R: the classification head's two layers.
    let (dense, out) = match config.arch {
        Arch::Bert => (format!("{prefix}pooler.dense"), "classifier"),
        Arch::XlmRoberta => ("classifier.dense".to_string(), "classifier.out_proj"),
    };
    // The head's size against the labels, said plainly (the commonest mismatch: a
    // config edited to other labels than the head was trained with).
    if let Ok(view) = file.tensor(&format!("{out}.weight"))
        && view.shape().first() != Some(&labels)
    {
        return Err(bad(format!(
            "the head {out} has {} outputs, but config.json names {labels} labels ({:?})",
            view.shape().first().copied().unwrap_or(0),
            config.labels
        )));
    }
    Ok(Weights {
        word: get(&format!("{e}.word_embeddings.weight"), &[config.vocab, h])?,
        position: get(
            &format!("{e}.position_embeddings.weight"),
            &[config.positions, h],
        )?,
        token_type: get(
            &format!("{e}.token_type_embeddings.weight"),
            &[config.type_vocab, h],
        )?,
        embedding_norm: norm(&format!("{e}.LayerNorm"), h)?,
        layers,
        head_dense: linear(&dense, h, h)?,
        head_out: linear(out, labels, h)?,
    })
}

fn to_f32(dtype: safetensors::Dtype, bytes: &[u8]) -> Option<Vec<f32>> {
    use safetensors::Dtype;
    Some(match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::F64 => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32)
            .collect(),
        _ => return None,
    })
}

/// Runs the network on batches of token ids.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The head's outputs (logits) for each sequence of a batch, in order. Sequences
    /// hold their special tokens and are at most the model's maximum length.
    fn logits(&self, batch: &[&[u32]]) -> Vec<Vec<f32>>;
    /// How many tokens one batch should hold (padding included where the backend pads).
    fn batch_tokens(&self) -> usize;
    /// Whether a batch's sequences are packed one after another (no padding: the CPU
    /// encoder); otherwise each is padded to the longest.
    fn packed(&self) -> bool;
    /// Whether several batches may run side by side on the run's threads; otherwise
    /// one at a time.
    fn parallel(&self) -> bool;
}

/// Makes the backend of a loaded model (the CPU's by default; a GPU binary gives its
/// own).
pub type BackendFactory =
    Arc<dyn Fn(&ModelConfig, Weights) -> Result<Box<dyn Backend>> + Send + Sync>;

/// The CPU backend's factory.
pub fn cpu_backend() -> BackendFactory {
    Arc::new(|config, weights| Ok(Box::new(cpu::CpuEncoder::new(config, weights)?)))
}

/// A loaded model: its configuration, tokenizer and backend.
pub struct Model {
    pub config: ModelConfig,
    tokenizer: tokenizers::Tokenizer,
    max_tokens: usize,
    backend: Box<dyn Backend>,
    /// SHA-256 of the three files, in order (part of the step's configuration hash).
    pub sha256: String,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("arch", &self.config.arch)
            .field("labels", &self.config.labels)
            .field("max_tokens", &self.max_tokens)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Reads one file of a model folder (local or S3).
fn read_file(storage: &Storage, folder: &Location, name: &str) -> Result<Option<Vec<u8>>> {
    let loc = folder.join(name);
    if !storage.exists(&loc)? {
        return Ok(None);
    }
    storage.read(&loc).map(Some)
}

impl Model {
    /// Loads the model folder at `url` (disk or S3). `max_tokens` overrides the
    /// maximum length (else `tokenizer_config.json`'s `model_max_length` when it is a
    /// real one, capped by the position table: 512 for BERT and XLM-R).
    pub fn load(
        storage: &Storage,
        url: &str,
        max_tokens: Option<usize>,
        backend: &BackendFactory,
    ) -> Result<Model> {
        let folder = Location::parse(&format!("{}/", url.trim_end_matches('/')))?;
        let mut files = Vec::new();
        for name in [CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE] {
            match read_file(storage, &folder, name)? {
                Some(bytes) => files.push(bytes),
                None => {
                    return Err(Error::Config {
                        url: folder.join(name).to_string(),
                        message: format!(
                            "the model folder has no {name} (a Hugging Face model folder \
                             holds {CONFIG_FILE}, {WEIGHTS_FILE} and {TOKENIZER_FILE}, as \
                             save_pretrained writes them)"
                        ),
                    });
                }
            }
        }
        let config = ModelConfig::parse(&files[0], &folder.join(CONFIG_FILE).to_string())?;
        let tokenizer_url = folder.join(TOKENIZER_FILE).to_string();
        let mut tokenizer =
            tokenizers::Tokenizer::from_bytes(&files[2]).map_err(|e| Error::Config {
                url: tokenizer_url.clone(),
                message: format!("not a tokenizers tokenizer.json: {e}"),
            })?;
        let vocab = tokenizer.get_vocab_size(true);
        if vocab > config.vocab {
            return Err(Error::Config {
                url: tokenizer_url,
                message: format!(
                    "the tokenizer has {vocab} tokens but the model's embedding table {}",
                    config.vocab
                ),
            });
        }
        let from_tokenizer = match read_file(storage, &folder, TOKENIZER_CONFIG_FILE)? {
            Some(bytes) => serde_json::from_slice::<Json>(&bytes)
                .ok()
                .and_then(|j| j["model_max_length"].as_u64())
                .map(|v| v as usize),
            None => None,
        };
        let limit = config.max_tokens();
        let max_tokens = max_tokens
            .or(from_tokenizer.filter(|&m| m <= limit))
            .unwrap_or(limit)
            .min(limit);
        if max_tokens < 2 {
            return Err(Error::Config {
                url: url.to_string(),
                message: format!("a maximum length of {max_tokens} tokens leaves no room"),
            });
        }
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| Error::Config {
                url: tokenizer_url.clone(),
                message: format!("setting truncation: {e}"),
            })?;
        tokenizer.with_padding(None);
        let weights_url = folder.join(WEIGHTS_FILE).to_string();
        let weights = read_weights(&files[1], &config, &weights_url)?;
        let mut hasher = Vec::new();
        for f in &files {
            hasher.push(pipeline::cli::sha256_hex(f));
        }
        let backend = backend(&config, weights)?;
        Ok(Model {
            config,
            tokenizer,
            max_tokens,
            backend,
            sha256: pipeline::cli::sha256_hex(hasher.join("\n").as_bytes()),
        })
    }

    /// The maximum length texts are cut to, in tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The token ids of `text` with special tokens, cut to the maximum length. A long
    /// text is first tried on a prefix cut at a space: when the prefix alone already
    /// fills the maximum length, its first tokens are the whole text's (the
    /// pre-tokenizers of these models split at spaces, so the words before the cut are
    /// tokenized alike), and the rest of the text is never tokenized.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        // Words average about 5 bytes and at least one token; 12 bytes a token of
        // room makes a prefix that fills the length the common case.
        let budget = self.max_tokens * 12;
        if text.len() > budget * 2 {
            let mut cut = budget;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            if let Some(space) = text[cut..].find(' ') {
                let prefix = &text[..cut + space];
                let ids = self.encode(prefix);
                if ids.len() >= self.max_tokens {
                    return ids;
                }
            }
        }
        self.encode(text)
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        match self.tokenizer.encode(text, true) {
            Ok(e) => e.get_ids().to_vec(),
            // The tokenizers crate fails on no text we give it; should it, the document
            // is scored as an empty one.
            Err(_) => match self.tokenizer.encode("", true) {
                Ok(e) => e.get_ids().to_vec(),
                Err(_) => Vec::new(),
            },
        }
    }

    /// The head's outputs for each text, in order: tokenized on the run's threads,
    /// sorted by length into batches, run on the backend.
    pub fn logits(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        use rayon::prelude::*;
        let ids: Vec<Vec<u32>> = texts.par_iter().map(|t| self.tokenize(t)).collect();
        let batches = plan_batches(&ids, self.backend.batch_tokens(), self.backend.packed());
        let run = |b: &Vec<usize>| {
            let seqs: Vec<&[u32]> = b.iter().map(|&i| ids[i].as_slice()).collect();
            self.backend.logits(&seqs)
        };
        let outputs: Vec<Vec<Vec<f32>>> = if self.backend.parallel() {
            batches.par_iter().with_max_len(1).map(run).collect()
        } else {
            batches.iter().map(run).collect()
        };
        let mut out = vec![Vec::new(); texts.len()];
        for (b, logits) in batches.iter().zip(outputs) {
            for (&i, l) in b.iter().zip(logits) {
                out[i] = l;
            }
        }
        out
    }
}

/// Batches of sequence indexes, sorted by length (stably: equal lengths keep their
/// order), each at most `tokens` tokens counted as the backend pays for them (every
/// sequence of a padded batch costs the longest one's length).
pub fn plan_batches(ids: &[Vec<u32>], tokens: usize, packed: bool) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| ids[i].len());
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut cost = 0usize;
    for i in order {
        let len = ids[i].len().max(1);
        // Sorted ascending: the newest sequence is the longest of its batch.
        let next = if packed {
            cost + len
        } else {
            len * (current.len() + 1)
        };
        if !current.is_empty() && next > tokens {
            batches.push(std::mem::take(&mut current));
            cost = 0;
        }
        cost += len;
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// Scores from a head's outputs: the regression output, or each label's probability
/// (softmax over the labels, or a sigmoid per label).
pub fn probabilities(problem: Problem, logits: &[f32]) -> Vec<f32> {
    match problem {
        Problem::Regression => logits.to_vec(),
        Problem::MultiLabel => logits.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect(),
        Problem::SingleLabel => {
            let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = logits.iter().map(|&x| (x - m).exp()).collect();
            let s: f32 = e.iter().sum();
            e.into_iter().map(|x| x / s).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_sorted_and_bounded() {
        let ids: Vec<Vec<u32>> = [5, 1, 3, 5, 2, 9].iter().map(|&n| vec![0; n]).collect();
        let packed = plan_batches(&ids, 8, true);
        assert_eq!(packed, vec![vec![1, 4, 2], vec![0], vec![3], vec![5]]);
        let padded = plan_batches(&ids, 10, false);
        // [1 2 3] costs 3×3 = 9; adding a 5 would cost 20.
        assert_eq!(padded, vec![vec![1, 4, 2], vec![0, 3], vec![5]]);
        assert!(plan_batches(&[], 8, true).is_empty());
    }

    #[test]
    fn config_errors_name_the_problem() {
        let base = r#"{"architectures":["BertForSequenceClassification"],"hidden_size":8,
            "num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":16,
            "vocab_size":10,"max_position_embeddings":16,"id2label":{"0":"a","1":"b"}}"#;
        let c = ModelConfig::parse(base.as_bytes(), "config.json").expect("parses");
        assert_eq!(
            (c.arch, c.problem, c.labels.len()),
            (Arch::Bert, Problem::SingleLabel, 2)
        );
        let gpt = base.replace(
            "BertForSequenceClassification",
            "GPT2ForSequenceClassification",
        );
        let err = ModelConfig::parse(gpt.as_bytes(), "m/config.json").expect_err("unknown");
        assert!(err.to_string().contains("unknown architecture"), "{err}");
        assert!(err.to_string().contains("m/config.json"), "{err}");
        let odd = base.replace("\"hidden_size\":8", "\"hidden_size\":9");
        assert!(ModelConfig::parse(odd.as_bytes(), "c").is_err());
    }

    #[test]
    fn probabilities_follow_the_problem() {
        let p = probabilities(Problem::SingleLabel, &[0.0, 0.0]);
        assert_eq!(p, vec![0.5, 0.5]);
        assert_eq!(probabilities(Problem::Regression, &[2.7]), vec![2.7]);
        let s = probabilities(Problem::MultiLabel, &[0.0]);
        assert_eq!(s, vec![0.5]);
    }
}
