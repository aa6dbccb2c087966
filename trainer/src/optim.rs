//! AdamW with decoupled weight decay (Loshchilov & Hutter 2019), our own so that its
//! state (step, first and second moments) can be saved and restored exactly. Weight
//! decay applies to matrices, not to norm gains.
//!
//! Fused: the f32 master weights, the moments and the gradients each live in one
//! contiguous buffer ([`Flat`]), matrices first, and the per-parameter tensors are
//! views into them. A step is then nine element-wise operations over flat
//! tensors, no allocation, whatever the number of parameters, instead of a dozen per parameter (on a
//! GPU, kernel launches), mostly in place; every element goes through the same
//! operations as in the per-parameter form ([`AdamW::update_each`], kept as the
//! reference), so the two give the same bits.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

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

/// Where each parameter lies in a flat buffer: decayed ones (matrices) first.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Per parameter (in the caller's order): its shape and its first element.
    pub shapes: Vec<Vec<i64>>,
    pub offsets: Vec<i64>,
    /// Elements in all; the first `decayed` belong to matrices.
    pub total: i64,
    pub decayed: i64,
}

impl Layout {
    /// The layout of tensors of these shapes.
    pub fn of(shapes: Vec<Vec<i64>>) -> Layout {
        let numel = |s: &[i64]| s.iter().product::<i64>();
        let mut offsets = vec![0i64; shapes.len()];
        let mut at = 0i64;
        for pass_matrices in [true, false] {
            for (i, s) in shapes.iter().enumerate() {
                if (s.len() >= 2) == pass_matrices {
                    offsets[i] = at;
                    at += numel(s);
                }
            }
        }
        let decayed = shapes
            .iter()
            .filter(|s| s.len() >= 2)
            .map(|s| numel(s))
            .sum();
        Layout {
            shapes,
            offsets,
            total: at,
            decayed,
        }
    }
}

/// One contiguous buffer and, per parameter, a view of its part.
#[derive(Debug)]
pub struct Flat {
    pub flat: Tensor,
    pub views: Vec<Tensor>,
}

impl Flat {
    /// A zeroed buffer of `kind` on `device` with `layout`'s views.
    pub fn zeros(layout: &Layout, kind: Kind, device: Device) -> Result<Flat> {
        let flat = Tensor::f_zeros([layout.total], (kind, device)).map_err(tch)?;
        let views = views(&flat, layout)?;
        Ok(Flat { flat, views })
    }

    /// A buffer holding copies of `tensors` (laid out by `layout`).
    pub fn copy_of(tensors: &[Tensor], layout: &Layout, kind: Kind) -> Result<Flat> {
        let device = tensors.first().map_or(Device::Cpu, Tensor::device);
        let out = Flat::zeros(layout, kind, device)?;
        let _guard = tch::no_grad_guard();
        for (v, t) in out.views.iter().zip(tensors) {
            v.shallow_clone().f_copy_(t).map_err(tch)?;
        }
        Ok(out)
    }
}

/// Per parameter, a view of its part of `flat` (laid out by `layout`).
pub fn views(flat: &Tensor, layout: &Layout) -> Result<Vec<Tensor>> {
    layout
        .shapes
        .iter()
        .zip(&layout.offsets)
        .map(|(shape, &at)| {
            let n: i64 = shape.iter().product();
            flat.f_narrow(0, at, n)
                .and_then(|t| t.f_view(shape.as_slice()))
                .map_err(tch)
        })
        .collect()
}

/// `tensors` laid out by `layout` in one new flat f32 tensor (a gradient list into
/// the optimiser's order): one copy.
pub fn flatten(tensors: &[Tensor], layout: &Layout) -> Result<Tensor> {
    Tensor::f_cat(&in_layout_order(tensors, layout)?, 0).map_err(tch)
}

/// [`flatten`] into `out` (a buffer kept from step to step: no allocation).
pub fn flatten_into(tensors: &[Tensor], layout: &Layout, out: &Tensor) -> Result<()> {
    let _ = Tensor::f_cat_out(out, &in_layout_order(tensors, layout)?, 0).map_err(tch)?;
    Ok(())
}

fn in_layout_order(tensors: &[Tensor], layout: &Layout) -> Result<Vec<Tensor>> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| layout.offsets[i]);
    order
        .iter()
        .map(|&i| tensors[i].f_reshape([-1]).map_err(tch))
        .collect()
}

/// The optimiser and its state: the moments in flat buffers, `m` and `v` their
/// per-parameter views (what checkpoints save and restore, by name).
#[derive(Debug)]
pub struct AdamW {
    pub config: AdamWConfig,
    pub step: u64,
    pub layout: Layout,
    m_flat: Tensor,
    v_flat: Tensor,
    pub m: Vec<Tensor>,
    pub v: Vec<Tensor>,
    /// Room for the step's two temporaries, kept from step to step (a fresh buffer
    /// the size of the model each step costs its page faults on the CPU).
    scratch_flat: Tensor,
    scratch: Vec<Tensor>,
}

impl AdamW {
    /// For parameters shaped and placed as `params` (f32).
    pub fn new(params: &[Tensor], config: &AdamWConfig) -> Result<AdamW> {
        let layout = Layout::of(params.iter().map(Tensor::size).collect());
        let device = params.first().map_or(Device::Cpu, Tensor::device);
        let m = Flat::zeros(&layout, Kind::Float, device)?;
        let v = Flat::zeros(&layout, Kind::Float, device)?;
        let scratch = Flat::zeros(&layout, Kind::Float, device)?;
        Ok(AdamW {
            config: config.clone(),
            step: 0,
            layout,
            m_flat: m.flat,
            v_flat: v.flat,
            m: m.views,
            v: v.views,
            scratch_flat: scratch.flat,
            scratch: scratch.views,
        })
    }

    /// One update of the flat master weights `params` (f32, laid out by
    /// [`AdamW::layout`]) from the flat gradient `grad` at learning rate `lr`.
    pub fn update(&mut self, params: &Tensor, grad: &Tensor, lr: f64) -> Result<()> {
        self.step += 1;
        let c = self.config.clone();
        let (bc1, bc2) = self.corrections();
        let _guard = tch::no_grad_guard();
        if c.weight_decay > 0.0 && self.layout.decayed > 0 {
            let _ = params
                .f_narrow(0, 0, self.layout.decayed)
                .map_err(tch)?
                .f_mul_scalar_(1.0 - lr * c.weight_decay)
                .map_err(tch)?;
        }
        let mut p = params.shallow_clone();
        let (mut m, mut v) = (self.m_flat.shallow_clone(), self.v_flat.shallow_clone());
        let mut scratch = self.scratch_flat.shallow_clone();
        moments_and_step(
            &mut p,
            grad,
            &mut m,
            &mut v,
            &mut scratch,
            &c,
            (bc1, bc2, lr),
        )
    }

    fn corrections(&self) -> (f64, f64) {
        let c = &self.config;
        let t = self.step as i32;
        (1.0 - c.beta1.powi(t), 1.0 - c.beta2.powi(t))
    }

    /// The same update one parameter at a time (`params` and `grads` per parameter,
    /// an undefined gradient leaving its parameter alone): the unfused form, the
    /// reference of the fused one and the "before" of its benchmark.
    pub fn update_each(&mut self, params: &mut [Tensor], grads: &[Tensor], lr: f64) -> Result<()> {
        self.step += 1;
        let c = self.config.clone();
        let (bc1, bc2) = self.corrections();
        let _guard = tch::no_grad_guard();
        for ((((p, g), m), v), scratch) in params
            .iter_mut()
            .zip(grads)
            .zip(&mut self.m)
            .zip(&mut self.v)
            .zip(&mut self.scratch)
        {
            if !g.defined() {
                continue;
            }
            if p.dim() >= 2 && c.weight_decay > 0.0 {
                let _ = p.f_mul_scalar_(1.0 - lr * c.weight_decay).map_err(tch)?;
            }
            moments_and_step(p, g, m, v, scratch, &c, (bc1, bc2, lr))?;
        }
        Ok(())
    }
}

/// Adam's moments and step on `p` (after decay), element-wise: the same operations,
/// fused or not, in place; `scratch` (as large as `p`) holds the temporaries.
/// m ← m + (1−β1)(g − m); v ← β2·v + g·(1−β2)g; p ← p + m / (−(√v/√bc2 + ε)·bc1/lr).
/// `(bc1, bc2, lr)`: the bias corrections and the learning rate.
fn moments_and_step(
    p: &mut Tensor,
    g: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
    scratch: &mut Tensor,
    c: &AdamWConfig,
    (bc1, bc2, lr): (f64, f64, f64),
) -> Result<()> {
    // In-place ops return an alias of their target: the `let _` drop only that.
    let _ = m.f_lerp_(g, 1.0 - c.beta1).map_err(tch)?;
    let _ = v.f_mul_scalar_(c.beta2).map_err(tch)?;
    let _ = g.f_mul_scalar_out(scratch, 1.0 - c.beta2).map_err(tch)?;
    let _ = v.f_addcmul_(g, scratch).map_err(tch)?;
    if lr == 0.0 {
        return Ok(());
    }
    let _ = v.f_sqrt_out(scratch).map_err(tch)?;
    let _ = scratch.f_div_scalar_(bc2.sqrt()).map_err(tch)?;
    let _ = scratch.f_add_scalar_(c.eps).map_err(tch)?;
    // addcdiv adds m / scratch: the step's size (and its sign) goes into the divisor.
    let _ = scratch.f_mul_scalar_(-bc1 / lr).map_err(tch)?;
    let _ = p.f_addcdiv_(m, scratch).map_err(tch)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Vec<Tensor> {
        tch::manual_seed(7);
        vec![
            Tensor::randn([5], (Kind::Float, Device::Cpu)),
            Tensor::randn([4, 3], (Kind::Float, Device::Cpu)),
            Tensor::randn([2], (Kind::Float, Device::Cpu)),
            Tensor::randn([3, 2, 2], (Kind::Float, Device::Cpu)),
        ]
    }

    #[test]
    fn the_layout_puts_matrices_first_and_covers_every_element_once() {
        let l = Layout::of(params().iter().map(Tensor::size).collect());
        assert_eq!(l.total, 5 + 12 + 2 + 12);
        assert_eq!(l.decayed, 24);
        assert_eq!(l.offsets, [24, 0, 29, 12]);
    }

    #[test]
    fn fused_equals_one_parameter_at_a_time_bit_for_bit() -> Result<()> {
        let config = AdamWConfig::default();
        let mut each = params();
        let mut opt_each = AdamW::new(&each, &config)?;
        let fused_params = params();
        let mut opt = AdamW::new(&fused_params, &config)?;
        let masters = Flat::copy_of(&fused_params, &opt.layout, Kind::Float)?;
        for step in 0..5 {
            tch::manual_seed(100 + step);
            let grads: Vec<Tensor> = each
                .iter()
                .map(|p| Tensor::randn(p.size(), (Kind::Float, Device::Cpu)))
                .collect();
            let lr = 1e-2 * (step + 1) as f64;
            opt_each.update_each(&mut each, &grads, lr)?;
            opt.update(&masters.flat, &flatten(&grads, &opt.layout)?, lr)?;
        }
        for (i, (a, b)) in each.iter().zip(&masters.views).enumerate() {
            assert!(a.equal(b), "parameter {i} differs");
            assert!(opt_each.m[i].equal(&opt.m[i]) && opt_each.v[i].equal(&opt.v[i]));
        }
        Ok(())
    }
}
