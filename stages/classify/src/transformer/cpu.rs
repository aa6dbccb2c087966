//! The encoder on the CPU, in f32: a batch's sequences packed one after another (no
//! padding), the dense layers as one matrix product over every token of the batch,
//! attention per sequence and head. Each batch runs on the thread that asks for it, so
//! batches run side by side on the run's threads and the thread count cannot change a
//! score. The last layer works on the first token of each sequence only (the head
//! reads nothing else): its keys and values need every token, its query, attention
//! output and feed-forward layer only that row.

use pipeline::Result;

use super::kernels::{self, Activation, View, ViewMut};
use super::{ModelConfig, Tensor, Weights};

/// Tokens per batch: enough rows for the matrix products to run near the CPU's peak,
/// few enough that a batch's activations stay a few tens of MB.
pub const BATCH_TOKENS: usize = 2048;

#[derive(Debug)]
struct Layer {
    /// Query, key and value weights stacked: `[3h, h]`, and their biases.
    qkv: Vec<f32>,
    qkv_bias: Vec<f32>,
    attention_out: Vec<f32>,
    attention_out_bias: Vec<f32>,
    attention_norm: (Vec<f32>, Vec<f32>),
    up: Vec<f32>,
    up_bias: Vec<f32>,
    down: Vec<f32>,
    down_bias: Vec<f32>,
    output_norm: (Vec<f32>, Vec<f32>),
}

/// The CPU encoder of one model.
#[derive(Debug)]
pub struct CpuEncoder {
    hidden: usize,
    heads: usize,
    intermediate: usize,
    eps: f32,
    activation: Activation,
    /// XLM-R's padding id: its positions count the tokens that are not padding,
    /// from the padding id plus one, and a padding token sits at the padding id
    /// (transformers' `create_position_ids_from_input_ids`). BERT: none, positions
    /// from 0.
    padding: Option<u32>,
    positions: usize,
    vocab: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Row 0 of the token-type table: every sequence is one segment.
    token_type: Vec<f32>,
    embedding_norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
    head_dense: (Vec<f32>, Vec<f32>),
    head_out: (Vec<f32>, Vec<f32>),
    labels: usize,
}

fn pair((a, b): (Tensor, Tensor)) -> (Vec<f32>, Vec<f32>) {
    (a.data, b.data)
}

impl CpuEncoder {
    pub fn new(config: &ModelConfig, w: Weights) -> Result<CpuEncoder> {
        let h = config.hidden;
        let layers = w
            .layers
            .into_iter()
            .map(|l| {
                let mut qkv = Vec::with_capacity(3 * h * h);
                let mut qkv_bias = Vec::with_capacity(3 * h);
                for (weight, bias) in [&l.query, &l.key, &l.value] {
                    qkv.extend_from_slice(&weight.data);
                    qkv_bias.extend_from_slice(&bias.data);
                }
                let (attention_out, attention_out_bias) = pair(l.attention_out);
                let (up, up_bias) = pair(l.up);
                let (down, down_bias) = pair(l.down);
                Layer {
                    qkv,
                    qkv_bias,
                    attention_out,
                    attention_out_bias,
                    attention_norm: pair(l.attention_norm),
                    up,
                    up_bias,
                    down,
                    down_bias,
                    output_norm: pair(l.output_norm),
                }
            })
            .collect();
        Ok(CpuEncoder {
            hidden: h,
            heads: config.heads,
            intermediate: config.intermediate,
            eps: config.layer_norm_eps,
            activation: config.activation,
            padding: (config.arch == super::Arch::XlmRoberta).then_some(config.pad_token_id),
            positions: config.positions,
            vocab: config.vocab,
            token_type: w.token_type.data[..h].to_vec(),
            word: w.word.data,
            position: w.position.data,
            embedding_norm: pair(w.embedding_norm),
            layers,
            head_dense: pair(w.head_dense),
            head_out: pair(w.head_out),
            labels: config.labels.len(),
        })
    }

    /// `out[rows × n] = x[rows × k] · wᵀ + bias`, `w` being `[n, k]`.
    fn linear(&self, x: &[f32], rows: usize, k: usize, w: &[f32], bias: &[f32]) -> Vec<f32> {
        let n = bias.len();
        let mut out = vec![0f32; rows * n];
        kernels::matmul_t(
            ViewMut::dense(&mut out, rows, n),
            View::dense(x, rows, k),
            View::dense(w, n, k),
            false,
        );
        kernels::add_bias(&mut out, bias);
        out
    }

    /// The embedding of every token of the batch, normalised: `[tokens, h]`.
    fn embed(&self, batch: &[&[u32]]) -> Vec<f32> {
        let h = self.hidden;
        let total: usize = batch.iter().map(|s| s.len()).sum();
        let mut x = vec![0f32; total * h];
        let mut row = 0;
        for seq in batch {
            let mut counted = 0usize;
            for (i, &id) in seq.iter().enumerate() {
                let pos = match self.padding {
                    None => i,
                    Some(pad) if id == pad => pad as usize,
                    Some(pad) => {
                        counted += 1;
                        pad as usize + counted
                    }
                };
                let out = &mut x[row * h..(row + 1) * h];
                // Ids past the table (a tokenizer larger than the model was refused at
                // load) and positions past it (sequences are cut to fit) cannot occur;
                // clamped rather than trusted.
                let id = (id as usize).min(self.vocab - 1);
                let pos = pos.min(self.positions - 1);
                let word = &self.word[id * h..(id + 1) * h];
                let position = &self.position[pos * h..(pos + 1) * h];
                for j in 0..h {
                    out[j] = word[j] + position[j] + self.token_type[j];
                }
                row += 1;
            }
        }
        kernels::layer_norm(
            &mut x,
            h,
            &self.embedding_norm.0,
            &self.embedding_norm.1,
            self.eps,
        );
        x
    }

    /// Self-attention of one layer: for each sequence (`starts[s]`, `lens[s]`) and
    /// head, softmax(Q Kᵀ / √d) V for the query rows `queries` picks (every row, or
    /// the first of each sequence), written to `[query rows, h]`.
    fn attend(&self, qkv: &[f32], starts: &[usize], lens: &[usize], first_only: bool) -> Vec<f32> {
        let h = self.hidden;
        let d = h / self.heads;
        let scale = 1.0 / (d as f32).sqrt();
        let rows: usize = if first_only {
            lens.len()
        } else {
            lens.iter().sum()
        };
        let mut ctx = vec![0f32; rows * h];
        let all = View {
            data: qkv,
            offset: 0,
            rows: starts.last().map_or(0, |s| s + lens[lens.len() - 1]),
            cols: 3 * h,
            row_stride: 3 * h,
        };
        let mut scores: Vec<f32> = Vec::new();
        let mut out_row = 0;
        for (&start, &len) in starts.iter().zip(lens) {
            let q_rows = if first_only { 1 } else { len };
            scores.clear();
            scores.resize(q_rows * len, 0.0);
            for head in 0..self.heads {
                let q = all.block(start, q_rows, head * d, d);
                let k = all.block(start, len, h + head * d, d);
                let v = all.block(start, len, 2 * h + head * d, d);
                kernels::matmul_t(ViewMut::dense(&mut scores, q_rows, len), q, k, false);
                kernels::softmax(&mut scores, len, scale);
                let out = ViewMut {
                    data: &mut ctx,
                    offset: out_row * h + head * d,
                    rows: q_rows,
                    cols: d,
                    row_stride: h,
                };
                kernels::matmul(out, View::dense(&scores, q_rows, len), v, false);
            }
            out_row += q_rows;
        }
        ctx
    }

    /// Attention output, residual and norm, then the feed-forward layer, residual and
    /// norm, on `rows` rows of `x` given their attention context.
    fn finish_layer(&self, layer: &Layer, x: &mut [f32], ctx: &[f32], rows: usize) {
        let h = self.hidden;
        let attended = self.linear(
            ctx,
            rows,
            h,
            &layer.attention_out,
            &layer.attention_out_bias,
        );
        for (a, b) in x.iter_mut().zip(&attended) {
            *a += b;
        }
        kernels::layer_norm(
            x,
            h,
            &layer.attention_norm.0,
            &layer.attention_norm.1,
            self.eps,
        );
        let mut up = self.linear(x, rows, h, &layer.up, &layer.up_bias);
        kernels::activate(&mut up, self.activation);
        let down = self.linear(&up, rows, self.intermediate, &layer.down, &layer.down_bias);
        for (a, b) in x.iter_mut().zip(&down) {
            *a += b;
        }
        kernels::layer_norm(x, h, &layer.output_norm.0, &layer.output_norm.1, self.eps);
    }

    /// The head's outputs of each sequence of a batch.
    pub fn forward(&self, batch: &[&[u32]]) -> Vec<Vec<f32>> {
        let h = self.hidden;
        let lens: Vec<usize> = batch.iter().map(|s| s.len().max(1)).collect();
        // An empty sequence (a tokenizer without special tokens, an empty text) is
        // scored as one padding token.
        let padded: Vec<Vec<u32>> = batch
            .iter()
            .map(|s| if s.is_empty() { vec![0] } else { s.to_vec() })
            .collect();
        let seqs: Vec<&[u32]> = padded.iter().map(Vec::as_slice).collect();
        let mut starts = Vec::with_capacity(lens.len());
        let mut total = 0;
        for &l in &lens {
            starts.push(total);
            total += l;
        }
        let mut x = self.embed(&seqs);
        let last = self.layers.len().saturating_sub(1);
        let mut first: Vec<f32> = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            let qkv = self.linear(&x, total, h, &layer.qkv, &layer.qkv_bias);
            if i < last {
                let ctx = self.attend(&qkv, &starts, &lens, false);
                self.finish_layer(layer, &mut x, &ctx, total);
            } else {
                let ctx = self.attend(&qkv, &starts, &lens, true);
                first = starts
                    .iter()
                    .flat_map(|&s| x[s * h..(s + 1) * h].iter().copied())
                    .collect();
                self.finish_layer(layer, &mut first, &ctx, lens.len());
            }
        }
        if self.layers.is_empty() {
            first = starts
                .iter()
                .flat_map(|&s| x[s * h..(s + 1) * h].iter().copied())
                .collect();
        }
        let mut pooled = self.linear(
            &first,
            lens.len(),
            h,
            &self.head_dense.0,
            &self.head_dense.1,
        );
        kernels::tanh(&mut pooled);
        let logits = self.linear(&pooled, lens.len(), h, &self.head_out.0, &self.head_out.1);
        logits
            .chunks_exact(self.labels)
            .map(<[f32]>::to_vec)
            .collect()
    }
}

impl super::Backend for CpuEncoder {
    fn logits(&self, batch: &[&[u32]]) -> Vec<Vec<f32>> {
        self.forward(batch)
    }
    fn batch_tokens(&self) -> usize {
        BATCH_TOKENS
    }
    fn packed(&self) -> bool {
        true
    }
    fn parallel(&self) -> bool {
        true
    }
}
