//! `mill-train export`: a checkpoint as a Hugging Face Llama folder — `config.json`,
//! `model.safetensors` under Hugging Face's tensor names, and the shards' tokenizer
//! (`tokenizer.json`, `tokenizer_config.json`), loadable with `transformers`'
//! `LlamaForCausalLM` and `AutoTokenizer`. The weights are the f32 masters.
//!
//! Our layout already matches Hugging Face's: linear weights are `[out, in]`, heads are
//! contiguous rows of the projections, and rotary embeddings rotate the two halves of
//! each head (`rotate_half`), so tensors are renamed, never permuted.

use serde_json::json;
use tch::{Device, Tensor, nn};

use pipeline::{Error, Location, Result, Storage};

use crate::checkpoint::{self, Loaded, TokenizerRef};
use crate::model::{Model, ModelConfig};

/// Hugging Face's name of one of our parameters.
pub fn hf_name(name: &str) -> Option<String> {
    match name {
        "embed" => return Some("model.embed_tokens.weight".into()),
        "norm" => return Some("model.norm.weight".into()),
        "head.weight" => return Some("lm_head.weight".into()),
        _ => {}
    }
    let rest = name.strip_prefix("layers.")?;
    let (layer, part) = rest.split_once('.')?;
    layer.parse::<usize>().ok()?;
    let hf = match part {
        "attn_norm" => "input_layernorm.weight",
        "ffn_norm" => "post_attention_layernorm.weight",
        "wq.weight" => "self_attn.q_proj.weight",
        "wk.weight" => "self_attn.k_proj.weight",
        "wv.weight" => "self_attn.v_proj.weight",
        "wo.weight" => "self_attn.o_proj.weight",
        "w_gate.weight" => "mlp.gate_proj.weight",
        "w_up.weight" => "mlp.up_proj.weight",
        "w_down.weight" => "mlp.down_proj.weight",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}"))
}

/// `config.json` of a `LlamaForCausalLM` of shape `m`.
pub fn hf_config(m: &ModelConfig, tokenizer: Option<&TokenizerRef>) -> serde_json::Value {
    let eos = tokenizer.map(|t| t.end_of_document_id);
    json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": m.vocab_size,
        "hidden_size": m.dim,
        "intermediate_size": m.ffn_dim,
        "num_hidden_layers": m.layers,
        "num_attention_heads": m.heads,
        "num_key_value_heads": m.kv_heads,
        "head_dim": m.dim / m.heads,
        "hidden_act": "silu",
        "max_position_embeddings": m.max_seq_len,
        "rms_norm_eps": m.norm_eps,
        "rope_theta": m.rope_theta,
        "rope_scaling": null,
        "attention_bias": false,
        "attention_dropout": 0.0,
        "mlp_bias": false,
        "tie_word_embeddings": m.tie_embeddings,
        "bos_token_id": eos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
        "use_cache": true,
    })
}

/// The checkpoint at `at`: a `step-…/` folder, or a checkpoint folder (its newest).
pub fn resolve(storage: &Storage, at: &Location) -> Result<Location> {
    let dir = at.join("");
    if storage.exists(&dir.join("state.json"))? {
        return Ok(dir);
    }
    checkpoint::latest(storage, &dir)?.ok_or_else(|| Error::Input {
        url: at.to_string(),
        message: "neither a checkpoint (no state.json) nor a folder of them (no latest)".into(),
    })
}

/// The model shape a checkpoint was trained with.
pub fn model_config(loaded: &Loaded, url: &str) -> Result<ModelConfig> {
    serde_json::from_value(loaded.state.config["model"].clone()).map_err(|e| Error::Input {
        url: url.to_string(),
        message: format!("the checkpoint's model configuration: {e}"),
    })
}

/// The model of a loaded checkpoint, its weights in f32 on `device`.
pub fn model(loaded: &Loaded, url: &str, device: Device) -> Result<(nn::VarStore, Model)> {
    let config = model_config(loaded, url)?;
    let mut vs = nn::VarStore::new(device);
    let net = Model::new(&vs, &config)?;
    let saved: std::collections::HashMap<String, Tensor> = loaded
        .params
        .iter()
        .map(|(n, t)| (n.clone(), t.shallow_clone()))
        .collect();
    let missing: Vec<String> = vs
        .variables()
        .keys()
        .filter(|k| !saved.contains_key(*k))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(Error::Input {
            url: url.to_string(),
            message: format!("the checkpoint lacks {missing:?}"),
        });
    }
    {
        let _guard = tch::no_grad_guard();
        for (name, mut var) in vs.variables() {
            if let Some(source) = saved.get(&name) {
                if source.size() != var.size() {
                    return Err(Error::Input {
                        url: url.to_string(),
                        message: format!(
                            "tensor {name} is {:?}, the model's {:?}",
                            source.size(),
                            var.size()
                        ),
                    });
                }
                var.f_copy_(source).map_err(crate::tch_err)?;
            }
        }
    }
    vs.freeze();
    Ok((vs, net))
}

/// What [`export`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub checkpoint: Location,
    pub tensors: usize,
    pub tokenizer: bool,
}

/// Writes the checkpoint at `at` as a Hugging Face Llama folder `out`. The tokenizer is
/// the shards' (its address recorded in the checkpoint, its SHA-256 checked), or
/// `tokenizer` when given; without either, the folder holds the model only.
pub fn export(
    storage: &Storage,
    at: &Location,
    out: &Location,
    tokenizer: Option<&Location>,
) -> Result<Exported> {
    let at = resolve(storage, at)?;
    let loaded = checkpoint::load(storage, &at)?;
    let config = model_config(&loaded, &at.to_string())?;
    let mut tensors = Vec::with_capacity(loaded.params.len());
    for (name, t) in &loaded.params {
        let hf = hf_name(name).ok_or_else(|| Error::Input {
            url: at.to_string(),
            message: format!("tensor {name} has no Hugging Face name"),
        })?;
        let t = t
            .f_to_kind(tch::Kind::Float)
            .and_then(|t| t.f_contiguous())
            .map_err(crate::tch_err)?;
        tensors.push((hf, t));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let out = out.join("");
    storage.put(
        &out.join("model.safetensors"),
        &checkpoint::to_bytes(&tensors)?,
    )?;
    let tok = loaded.state.tokenizer.as_ref();
    let json = |v: &serde_json::Value| {
        serde_json::to_vec_pretty(v).map_err(|e| Error::Usage(format!("serialising JSON: {e}")))
    };
    storage.put(&out.join("config.json"), &json(&hf_config(&config, tok))?)?;
    let source = match (tokenizer, tok) {
        (Some(t), _) => Some((t.clone(), None)),
        (None, Some(t)) => Some((Location::parse(&t.url)?, Some(t.sha256.clone()))),
        (None, None) => None,
    };
    if let Some((loc, sha)) = &source {
        let bytes = storage.read(loc)?;
        if let Some(sha) = sha
            && &pipeline::cli::sha256_hex(&bytes) != sha
        {
            return Err(Error::Input {
                url: loc.to_string(),
                message: format!(
                    "its SHA-256 is not {sha}, the one the shards were encoded with; pass the right tokenizer with --tokenizer"
                ),
            });
        }
        storage.put(&out.join("tokenizer.json"), &bytes)?;
        let eos = tok.map(|t| t.end_of_document.clone());
        storage.put(
            &out.join("tokenizer_config.json"),
            &json(&json!({
                "tokenizer_class": "PreTrainedTokenizerFast",
                "model_max_length": config.max_seq_len,
                "eos_token": eos,
                "bos_token": eos,
                "clean_up_tokenization_spaces": false,
            }))?,
        )?;
    }
    Ok(Exported {
        checkpoint: at,
        tensors: tensors.len(),
        tokenizer: source.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_has_a_hugging_face_name() -> Result<()> {
        for tie in [true, false] {
            let config = ModelConfig {
                vocab_size: 50,
                tie_embeddings: tie,
                ..ModelConfig::preset("tiny")?
            };
            let vs = nn::VarStore::new(Device::Cpu);
            Model::new(&vs, &config)?;
            let names: Vec<String> = vs.variables().keys().cloned().collect();
            let mut hf: Vec<String> = names.iter().filter_map(|n| hf_name(n)).collect();
            assert_eq!(hf.len(), names.len(), "{names:?}");
            hf.sort();
            hf.dedup();
            assert_eq!(hf.len(), names.len());
            assert_eq!(hf.contains(&"lm_head.weight".to_string()), !tie);
            assert!(hf.contains(&"model.layers.1.mlp.down_proj.weight".to_string()));
        }
        assert_eq!(hf_name("layers.x.wq.weight"), None);
        Ok(())
    }
}
