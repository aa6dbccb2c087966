//! A Llama-style decoder on libtorch (through `tch`): token embeddings, blocks of
//! RMSNorm → grouped-query attention with rotary positions (through
//! `scaled_dot_product_attention`, causal) → RMSNorm → SwiGLU feed-forward, a final
//! RMSNorm and the output projection (tied to the embeddings or not). Rotary embeddings
//! rotate the two halves of each head, as Hugging Face's Llama does.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Reduction, Tensor, nn};

use pipeline::{Error, Result};

/// The shape of a model; a preset (`ModelConfig::preset`) with any field overridden.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Tokens of the vocabulary: 256,000 by default, as Jurassic-1's.
    pub vocab_size: usize,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    /// Key/value heads (grouped-query attention); divides `heads`.
    pub kv_heads: usize,
    /// Hidden width of the SwiGLU feed-forward.
    pub ffn_dim: usize,
    /// Longest sequence the rotary tables cover.
    pub max_seq_len: usize,
    pub rope_theta: f64,
    pub norm_eps: f64,
    /// The output projection is the embedding matrix.
    pub tie_embeddings: bool,
}

impl ModelConfig {
    /// A named size: `tiny` (tests, a few hundred thousand parameters at a small
    /// vocabulary), `125m`, `350m`, `1b`, `7b` (Llama-like shapes).
    pub fn preset(name: &str) -> Result<ModelConfig> {
        let base = |dim, layers, heads, kv_heads, ffn_dim| ModelConfig {
            vocab_size: 256_000,
            dim,
            layers,
            heads,
            kv_heads,
            ffn_dim,
            max_seq_len: 2048,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
            tie_embeddings: true,
        };
        Ok(match name {
            "tiny" => ModelConfig {
                max_seq_len: 256,
                ..base(64, 2, 4, 2, 176)
            },
            "125m" => base(768, 12, 12, 4, 2048),
            "350m" => base(1024, 24, 16, 8, 2816),
            "1b" => base(2048, 16, 32, 8, 5632),
            "7b" => ModelConfig {
                tie_embeddings: false,
                max_seq_len: 4096,
                ..base(4096, 32, 32, 8, 11008)
            },
            other => {
                return Err(Error::Usage(format!(
                    "no model preset {other:?} (tiny, 125m, 350m, 1b, 7b)"
                )));
            }
        })
    }

    /// Checks the shape.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Usage(format!("model: {m}")));
        if self.heads == 0
            || !self.dim.is_multiple_of(self.heads)
            || !(self.dim / self.heads).is_multiple_of(2)
        {
            return bad(format!(
                "dim {} must split into {} heads of an even width",
                self.dim, self.heads
            ));
        }
        if self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return bad(format!(
                "kv_heads {} must divide heads {}",
                self.kv_heads, self.heads
            ));
        }
        if self.vocab_size == 0 || self.layers == 0 || self.ffn_dim == 0 {
            return bad("vocab_size, layers and ffn_dim must be positive".into());
        }
        Ok(())
    }

    fn head_dim(&self) -> i64 {
        (self.dim / self.heads) as i64
    }

    /// Parameters, embeddings included (counted once when tied).
    pub fn parameters(&self) -> u64 {
        let (d, v, f) = (self.dim as u64, self.vocab_size as u64, self.ffn_dim as u64);
        let hd = self.head_dim() as u64;
        let (h, kv) = (self.heads as u64, self.kv_heads as u64);
        let block = d * h * hd * 2 + d * kv * hd * 2 + 3 * d * f + 2 * d;
        let head = if self.tie_embeddings { 0 } else { v * d };
        v * d + self.layers as u64 * block + d + head
    }

    /// Training FLOPs per token at sequence length `seq` (forward and backward): 6 per
    /// weight of every matrix product, the output projection included, plus the
    /// attention scores and their use, 12 × layers × dim × seq (PaLM, appendix B).
    pub fn flops_per_token(&self, seq: usize) -> f64 {
        let (d, v, f) = (self.dim as f64, self.vocab_size as f64, self.ffn_dim as f64);
        let hd = self.head_dim() as f64;
        let (h, kv) = (self.heads as f64, self.kv_heads as f64);
        let matmul =
            self.layers as f64 * (d * h * hd * 2.0 + d * kv * hd * 2.0 + 3.0 * d * f) + v * d;
        6.0 * matmul + 12.0 * self.layers as f64 * d * seq as f64
    }
}

fn tch(e: tch::TchError) -> Error {
    Error::Usage(format!("libtorch: {e}"))
}

fn linear(p: nn::Path<'_>, input: usize, output: usize) -> nn::Linear {
    let config = nn::LinearConfig {
        bias: false,
        ws_init: nn::Init::Randn {
            mean: 0.0,
            stdev: 0.02,
        },
        ..Default::default()
    };
    nn::linear(p, input as i64, output as i64, config)
}

#[derive(Debug)]
struct Block {
    attn_norm: Tensor,
    wq: nn::Linear,
    wk: nn::Linear,
    wv: nn::Linear,
    wo: nn::Linear,
    ffn_norm: Tensor,
    w_gate: nn::Linear,
    w_up: nn::Linear,
    w_down: nn::Linear,
}

/// The decoder, its parameters in a `VarStore`.
#[derive(Debug)]
pub struct Model {
    pub config: ModelConfig,
    embed: Tensor,
    blocks: Vec<Block>,
    norm: Tensor,
    head: Option<nn::Linear>,
    cos: Tensor,
    sin: Tensor,
}

impl Model {
    /// Creates the parameters under `vs` (seeded by libtorch's generator).
    pub fn new(vs: &nn::VarStore, config: &ModelConfig) -> Result<Model> {
        config.validate()?;
        let root = vs.root();
        let d = config.dim;
        let hd = config.head_dim() as usize;
        let embed = root.var(
            "embed",
            &[config.vocab_size as i64, d as i64],
            nn::Init::Randn {
                mean: 0.0,
                stdev: 0.02,
            },
        );
        let ones = |p: &nn::Path<'_>, name: &str| p.var(name, &[d as i64], nn::Init::Const(1.0));
        let blocks = (0..config.layers)
            .map(|i| {
                let p = &root / "layers" / i;
                Block {
                    attn_norm: ones(&p, "attn_norm"),
                    wq: linear(&p / "wq", d, config.heads * hd),
                    wk: linear(&p / "wk", d, config.kv_heads * hd),
                    wv: linear(&p / "wv", d, config.kv_heads * hd),
                    wo: linear(&p / "wo", config.heads * hd, d),
                    ffn_norm: ones(&p, "ffn_norm"),
                    w_gate: linear(&p / "w_gate", d, config.ffn_dim),
                    w_up: linear(&p / "w_up", d, config.ffn_dim),
                    w_down: linear(&p / "w_down", config.ffn_dim, d),
                }
            })
            .collect();
        let norm = ones(&root, "norm");
        let head = (!config.tie_embeddings).then(|| linear(&root / "head", d, config.vocab_size));
        // Rotary tables: angle t * theta^(-2i/hd), the halves repeated.
        let half = (hd / 2) as i64;
        let inv = Tensor::f_arange(half, (Kind::Float, Device::Cpu))
            .map_err(tch)?
            .f_mul_scalar(-2.0 / hd as f64 * config.rope_theta.ln())
            .map_err(tch)?
            .f_exp()
            .map_err(tch)?;
        let t =
            Tensor::f_arange(config.max_seq_len as i64, (Kind::Float, Device::Cpu)).map_err(tch)?;
        let angles = t.f_outer(&inv).map_err(tch)?;
        let angles = Tensor::f_cat(&[&angles, &angles], -1)
            .map_err(tch)?
            .f_to_device(vs.device())
            .map_err(tch)?;
        Ok(Model {
            config: config.clone(),
            cos: angles.f_cos().map_err(tch)?,
            sin: angles.f_sin().map_err(tch)?,
            embed,
            blocks,
            norm,
            head,
        })
    }

    /// Logits `[batch, seq, vocab]` for token ids `[batch, seq]` (int64).
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let size = ids.size();
        let (b, t) = (size[0], size[1]);
        if t as usize > self.config.max_seq_len {
            return Err(Error::Usage(format!(
                "sequence of {t} tokens; the model covers {}",
                self.config.max_seq_len
            )));
        }
        let c = &self.config;
        let (hd, heads, kv) = (c.head_dim(), c.heads as i64, c.kv_heads as i64);
        // The tables in the compute precision (bf16 when the weights are).
        let kind = self.embed.kind();
        let cos = self
            .cos
            .f_narrow(0, 0, t)
            .map_err(tch)?
            .f_to_kind(kind)
            .map_err(tch)?;
        let sin = self
            .sin
            .f_narrow(0, 0, t)
            .map_err(tch)?
            .f_to_kind(kind)
            .map_err(tch)?;
        let rope = |x: &Tensor| -> Result<Tensor> {
            let x1 = x.f_narrow(-1, 0, hd / 2).map_err(tch)?;
            let x2 = x.f_narrow(-1, hd / 2, hd / 2).map_err(tch)?;
            let rotated = Tensor::f_cat(&[&x2.f_neg().map_err(tch)?, &x1], -1).map_err(tch)?;
            (x * &cos).f_add(&(rotated * &sin)).map_err(tch)
        };
        let norm = |x: &Tensor, w: &Tensor| x.f_rms_norm([c.dim as i64], Some(w), c.norm_eps);
        let mut x = Tensor::f_embedding(&self.embed, ids, -1, false, false).map_err(tch)?;
        for blk in &self.blocks {
            let h = norm(&x, &blk.attn_norm).map_err(tch)?;
            let split = |lin: &nn::Linear, n: i64| -> Result<Tensor> {
                h.apply(lin)
                    .f_view([b, t, n, hd])
                    .map_err(tch)?
                    .f_transpose(1, 2)
                    .map_err(tch)
            };
            let q = rope(&split(&blk.wq, heads)?)?;
            let k = rope(&split(&blk.wk, kv)?)?;
            let v = split(&blk.wv, kv)?;
            let att = Tensor::f_scaled_dot_product_attention::<Tensor>(
                &q, &k, &v, None, 0.0, true, None, true,
            )
            .map_err(tch)?
            .f_transpose(1, 2)
            .map_err(tch)?
            .f_reshape([b, t, heads * hd])
            .map_err(tch)?;
            x = x.f_add(&att.apply(&blk.wo)).map_err(tch)?;
            let h = norm(&x, &blk.ffn_norm).map_err(tch)?;
            let gate = h.apply(&blk.w_gate).f_silu().map_err(tch)?;
            let ffn = (gate * h.apply(&blk.w_up)).apply(&blk.w_down);
            x = x.f_add(&ffn).map_err(tch)?;
        }
        let x = norm(&x, &self.norm).map_err(tch)?;
        match &self.head {
            Some(head) => Ok(x.apply(head)),
            None => x.f_matmul(&self.embed.f_tr().map_err(tch)?).map_err(tch),
        }
    }

    /// Mean next-token cross-entropy of samples `[batch, seq + 1]` (inputs are the
    /// first `seq` tokens, targets the last `seq`).
    pub fn loss(&self, samples: &Tensor) -> Result<Tensor> {
        let n = samples.size()[1];
        let inputs = samples.f_narrow(1, 0, n - 1).map_err(tch)?;
        let targets = samples.f_narrow(1, 1, n - 1).map_err(tch)?;
        // Cross-entropy in f32 whatever the compute precision (as Megatron does).
        let logits = self.forward(&inputs)?.f_to_kind(Kind::Float).map_err(tch)?;
        let v = self.config.vocab_size as i64;
        logits
            .f_view([-1, v])
            .map_err(tch)?
            .f_cross_entropy_loss::<Tensor>(
                &targets.f_reshape([-1]).map_err(tch)?,
                None,
                Reduction::Mean,
                -100,
                0.0,
            )
            .map_err(tch)
    }
}
