//! The classify stage's transformers on libtorch: the same BERT and XLM-RoBERTa
//! sequence classifiers as its CPU encoder (`classify::transformer`), run by
//! `mill-classify-gpu` on GPUs in bf16 (f32 on the CPU, where tests check it against
//! the CPU encoder). Batches are padded to their longest sequence (they come sorted by
//! length) and masked; attention is PyTorch's `scaled_dot_product_attention`.
//!
//! One copy of the weights per GPU; a batch runs on the GPU of the thread that asks
//! for it (thread `i` on GPU `i mod n`), one batch at a time per GPU, so the run's
//! threads keep every GPU busy while others read, tokenize and write.

use std::sync::Mutex;

use classify::transformer::{Arch, Backend, ModelConfig, Weights};
use tch::{Device, Kind, Tensor};

/// Padded tokens per batch on a GPU: 64 sequences of 512.
pub const GPU_BATCH_TOKENS: usize = 64 * 512;

struct Layer {
    qkv: (Tensor, Tensor),
    attention_out: (Tensor, Tensor),
    attention_norm: (Tensor, Tensor),
    up: (Tensor, Tensor),
    down: (Tensor, Tensor),
    output_norm: (Tensor, Tensor),
}

/// The weights on one device.
struct Net {
    device: Device,
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    embedding_norm: (Tensor, Tensor),
    layers: Vec<Layer>,
    head_dense: (Tensor, Tensor),
    head_out: (Tensor, Tensor),
}

/// A sequence classifier on libtorch devices.
pub struct TorchEncoder {
    config: ModelConfig,
    nets: Vec<Mutex<Net>>,
    kind: Kind,
}

impl std::fmt::Debug for TorchEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TorchEncoder")
            .field("devices", &self.nets.len())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

fn tensor(t: &classify::transformer::Tensor, kind: Kind, device: Device) -> Tensor {
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    Tensor::from_slice(&t.data)
        .view(shape.as_slice())
        .to_kind(kind)
        .to(device)
}

fn pair(
    p: &(classify::transformer::Tensor, classify::transformer::Tensor),
    kind: Kind,
    device: Device,
) -> (Tensor, Tensor) {
    (tensor(&p.0, kind, device), tensor(&p.1, kind, device))
}

impl TorchEncoder {
    /// The model on `devices` (bf16 on CUDA, f32 on the CPU).
    pub fn new(config: &ModelConfig, w: &Weights, devices: &[Device]) -> TorchEncoder {
        let kind = if devices.iter().any(|d| d.is_cuda()) {
            Kind::BFloat16
        } else {
            Kind::Float
        };
        let _guard = tch::no_grad_guard();
        let nets = devices
            .iter()
            .map(|&device| {
                let layers = w
                    .layers
                    .iter()
                    .map(|l| {
                        let qkv_w = Tensor::cat(
                            &[
                                tensor(&l.query.0, kind, device),
                                tensor(&l.key.0, kind, device),
                                tensor(&l.value.0, kind, device),
                            ],
                            0,
                        );
                        let qkv_b = Tensor::cat(
                            &[
                                tensor(&l.query.1, kind, device),
                                tensor(&l.key.1, kind, device),
                                tensor(&l.value.1, kind, device),
                            ],
                            0,
                        );
                        Layer {
                            qkv: (qkv_w, qkv_b),
                            attention_out: pair(&l.attention_out, kind, device),
                            attention_norm: pair(&l.attention_norm, kind, device),
                            up: pair(&l.up, kind, device),
                            down: pair(&l.down, kind, device),
                            output_norm: pair(&l.output_norm, kind, device),
                        }
                    })
                    .collect();
                Mutex::new(Net {
                    device,
                    word: tensor(&w.word, kind, device),
                    position: tensor(&w.position, kind, device),
                    token_type: tensor(&w.token_type, kind, device).get(0),
                    embedding_norm: pair(&w.embedding_norm, kind, device),
                    layers,
                    head_dense: pair(&w.head_dense, kind, device),
                    head_out: pair(&w.head_out, kind, device),
                })
            })
            .collect();
        TorchEncoder {
            config: config.clone(),
            nets,
            kind,
        }
    }

    fn forward(&self, net: &Net, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, tch::TchError> {
        let c = &self.config;
        let _guard = tch::no_grad_guard();
        let b = batch.len() as i64;
        let len = batch.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let pad = i64::from(c.pad_token_id);
        let mut ids = vec![pad; batch.len() * len];
        let mut real = vec![0u8; batch.len() * len];
        for (i, seq) in batch.iter().enumerate() {
            // An empty sequence is one padding token, as on the CPU.
            real[i * len] = 1;
            for (j, &t) in seq.iter().enumerate() {
                ids[i * len + j] = i64::from(t);
                real[i * len + j] = 1;
            }
        }
        let l = len as i64;
        let ids = Tensor::from_slice(&ids).view([b, l]).to(net.device);
        let real = Tensor::from_slice(&real)
            .view([b, l])
            .to(net.device)
            .to_kind(Kind::Bool);
        let positions = match c.arch {
            Arch::Bert => Tensor::arange(l, (Kind::Int64, net.device))
                .unsqueeze(0)
                .expand([b, l], false),
            // transformers' create_position_ids_from_input_ids: tokens that are not
            // padding count from the padding id plus one; padding sits at the id.
            Arch::XlmRoberta => {
                let not_pad = ids.f_ne(pad)?.to_kind(Kind::Int64);
                not_pad
                    .f_cumsum(1, Kind::Int64)?
                    .f_mul(&not_pad)?
                    .f_add_scalar(pad)?
            }
        };
        let h = c.hidden as i64;
        let heads = c.heads as i64;
        let d = h / heads;
        let eps = f64::from(c.layer_norm_eps);
        let act = match c.activation {
            classify::transformer::Activation::Gelu => "none",
            _ => "tanh",
        };
        let norm = |x: &Tensor, (w, bias): &(Tensor, Tensor)| {
            x.f_layer_norm([h], Some(w), Some(bias), eps, true)
        };
        let mut x = Tensor::f_embedding(&net.word, &ids, -1, false, false)?
            .f_add(&Tensor::f_embedding(
                &net.position,
                &positions,
                -1,
                false,
                false,
            )?)?
            .f_add(&net.token_type)?;
        x = norm(&x, &net.embedding_norm)?;
        let mask = real.view([b, 1, 1, l]);
        for layer in &net.layers {
            let qkv = x
                .f_linear(&layer.qkv.0, Some(&layer.qkv.1))?
                .view([b, l, 3, heads, d])
                .permute([2, 0, 3, 1, 4]);
            let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
            let ctx = Tensor::f_scaled_dot_product_attention(
                &q,
                &k,
                &v,
                Some(&mask),
                0.0,
                false,
                None,
                false,
            )?
            .transpose(1, 2)
            .reshape([b, l, h]);
            let attended = ctx.f_linear(&layer.attention_out.0, Some(&layer.attention_out.1))?;
            x = norm(&x.f_add(&attended)?, &layer.attention_norm)?;
            let up = x.f_linear(&layer.up.0, Some(&layer.up.1))?;
            let up = if c.activation == classify::transformer::Activation::Relu {
                up.f_relu()?
            } else {
                up.f_gelu(act)?
            };
            let down = up.f_linear(&layer.down.0, Some(&layer.down.1))?;
            x = norm(&x.f_add(&down)?, &layer.output_norm)?;
        }
        let first = x.select(1, 0);
        let pooled = first
            .f_linear(&net.head_dense.0, Some(&net.head_dense.1))?
            .f_tanh()?;
        let logits = pooled
            .f_linear(&net.head_out.0, Some(&net.head_out.1))?
            .to_kind(Kind::Float)
            .to(Device::Cpu)
            .contiguous();
        let labels = c.labels.len();
        let flat: Vec<f32> = Vec::<f32>::try_from(logits.view([-1]))?;
        Ok(flat.chunks_exact(labels).map(<[f32]>::to_vec).collect())
    }
}

impl Backend for TorchEncoder {
    fn logits(&self, batch: &[&[u32]]) -> Vec<Vec<f32>> {
        let i = rayon::current_thread_index().unwrap_or(0) % self.nets.len().max(1);
        let net = match self.nets[i].lock() {
            Ok(n) => n,
            Err(poisoned) => poisoned.into_inner(),
        };
        match self.forward(&net, batch) {
            Ok(l) => l,
            // A device that fails (out of memory, a lost GPU) fails the task, which
            // a rerun resumes from its markers.
            Err(e) => panic!(
                "mill-classify-gpu: the model failed on {:?} (a batch of {} sequences): {e}",
                net.device,
                batch.len()
            ),
        }
    }

    fn batch_tokens(&self) -> usize {
        if self.kind == Kind::BFloat16 {
            GPU_BATCH_TOKENS
        } else {
            classify::transformer::cpu::BATCH_TOKENS
        }
    }

    fn packed(&self) -> bool {
        false
    }

    fn parallel(&self) -> bool {
        true
    }
}

/// The factory `classify::step_with_backend` takes: the model on `devices`.
pub fn factory(devices: Vec<Device>) -> classify::BackendFactory {
    std::sync::Arc::new(move |config, weights| {
        Ok(Box::new(TorchEncoder::new(config, &weights, &devices)) as Box<dyn Backend>)
    })
}
