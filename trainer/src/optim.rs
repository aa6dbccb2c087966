//! AdamW with decoupled weight decay (Loshchilov & Hutter 2019), our own so that its
//! state (step, first and second moments) can be saved and restored exactly. Weight
//! decay applies to matrices, not to norm gains.

use serde::{Deserialize, Serialize};
use tch::Tensor;

use pipeline::{Error, Result};

/// AdamW settings (defaults as Llama's pretraining: β = (0.9, 0.95), ε = 1e-8, decay 0.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
        }
    }
}

fn tch(e: tch::TchError) -> Error {
    Error::Usage(format!("libtorch: {e}"))
}

/// The optimiser and its state, one pair of moments per parameter.
#[derive(Debug)]
pub struct AdamW {
    pub config: AdamWConfig,
    pub step: u64,
    pub m: Vec<Tensor>,
    pub v: Vec<Tensor>,
}

impl AdamW {
    pub fn new(params: &[Tensor], config: &AdamWConfig) -> Result<AdamW> {
        let zeros = || -> Result<Vec<Tensor>> {
            params
                .iter()
                .map(|p| p.f_zeros_like().map_err(tch))
                .collect()
        };
        Ok(AdamW {
            config: config.clone(),
            step: 0,
            m: zeros()?,
            v: zeros()?,
        })
    }

    /// One update of `params` (f32: the master weights) from `grads` (f32, one per
    /// parameter; an undefined one leaves its parameter alone) at learning rate `lr`.
    pub fn update(&mut self, params: &mut [Tensor], grads: &[Tensor], lr: f64) -> Result<()> {
        self.step += 1;
        let c = &self.config;
        let t = self.step as i32;
        let (bc1, bc2) = (1.0 - c.beta1.powi(t), 1.0 - c.beta2.powi(t));
        // In-place ops return an alias of their target: the `let _` drop only that.
        let _guard = tch::no_grad_guard();
        for (((p, g), m), v) in params
            .iter_mut()
            .zip(grads)
            .zip(&mut self.m)
            .zip(&mut self.v)
        {
            if !g.defined() {
                continue;
            }
            if p.dim() >= 2 && c.weight_decay > 0.0 {
                let _ = p.f_mul_scalar_(1.0 - lr * c.weight_decay).map_err(tch)?;
            }
            let _ = m.f_mul_scalar_(c.beta1).map_err(tch)?;
            let _ = m
                .f_add_(&g.f_mul_scalar(1.0 - c.beta1).map_err(tch)?)
                .map_err(tch)?;
            let _ = v.f_mul_scalar_(c.beta2).map_err(tch)?;
            let _ = v
                .f_add_(
                    &g.f_mul(g)
                        .map_err(tch)?
                        .f_mul_scalar(1.0 - c.beta2)
                        .map_err(tch)?,
                )
                .map_err(tch)?;
            let denom = v
                .f_div_scalar(bc2)
                .map_err(tch)?
                .f_sqrt()
                .map_err(tch)?
                .f_add_scalar(c.eps)
                .map_err(tch)?;
            let step = m
                .f_div_scalar(bc1)
                .map_err(tch)?
                .f_div(&denom)
                .map_err(tch)?
                .f_mul_scalar(lr)
                .map_err(tch)?;
            let _ = p.f_sub_(&step).map_err(tch)?;
        }
        Ok(())
    }
}
