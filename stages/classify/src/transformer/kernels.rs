//! The numeric kernels of the CPU encoder: matrix products (the `gemm` crate, which
//! picks AVX-512, AVX2 or plain code at run time), and the row-wise steps around them
//! (layer norm, softmax, GELU) written once and compiled for AVX-512 and AVX2 besides
//! the baseline, chosen when the CPU is seen to have them.
//!
//! Every reduction sums in 16 interleaved partial sums, in a fixed order, so the
//! vector and plain copies give the same bits.

/// A matrix view into a slice: element `(i, j)` at `offset + i * row_stride + j`.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}

impl<'a> View<'a> {
    /// A dense row-major `rows × cols` matrix.
    pub fn dense(data: &'a [f32], rows: usize, cols: usize) -> View<'a> {
        View {
            data,
            offset: 0,
            rows,
            cols,
            row_stride: cols,
        }
    }

    /// Columns `from..from + cols` of rows `row..row + rows`.
    pub fn block(self, row: usize, rows: usize, from: usize, cols: usize) -> View<'a> {
        View {
            data: self.data,
            offset: self.offset + row * self.row_stride + from,
            rows,
            cols,
            row_stride: self.row_stride,
        }
    }

    /// Whether every element lies inside `data`.
    fn fits(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || self.offset + (self.rows - 1) * self.row_stride + self.cols <= self.data.len()
    }
}

/// A mutable matrix view, as [`View`].
#[derive(Debug)]
pub struct ViewMut<'a> {
    pub data: &'a mut [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}

impl<'a> ViewMut<'a> {
    pub fn dense(data: &'a mut [f32], rows: usize, cols: usize) -> ViewMut<'a> {
        ViewMut {
            data,
            offset: 0,
            rows,
            cols,
            row_stride: cols,
        }
    }

    fn fits(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || self.offset + (self.rows - 1) * self.row_stride + self.cols <= self.data.len()
    }
}

/// `out = a · bᵀ` (`a`: m × k, `b`: n × k, `out`: m × n), as a linear layer multiplies
/// by its weight; `out` is overwritten, or added to when `accumulate`.
pub fn matmul_t(out: ViewMut<'_>, a: View<'_>, b: View<'_>, accumulate: bool) {
    assert!(
        a.cols == b.cols && out.rows == a.rows && out.cols == b.rows,
        "matmul_t shapes: {}x{} by ({}x{})ᵀ into {}x{}",
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        out.rows,
        out.cols
    );
    // bᵀ is b read with its strides swapped.
    product(out, a, (b, true), accumulate);
}

/// `out = a · b` (`a`: m × k, `b`: k × n, `out`: m × n).
pub fn matmul(out: ViewMut<'_>, a: View<'_>, b: View<'_>, accumulate: bool) {
    assert!(
        a.cols == b.rows && out.rows == a.rows && out.cols == b.cols,
        "matmul shapes: {}x{} by {}x{} into {}x{}",
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        out.rows,
        out.cols
    );
    product(out, a, (b, false), accumulate);
}

fn product(out: ViewMut<'_>, a: View<'_>, (b, transposed): (View<'_>, bool), accumulate: bool) {
    assert!(
        out.fits() && a.fits() && b.fits(),
        "a matrix view reaches past its slice"
    );
    let (m, k) = (a.rows, a.cols);
    let n = out.cols;
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                let row = out.offset + i * out.row_stride;
                out.data[row..row + n].fill(0.0);
            }
        }
        return;
    }
    // (column stride, row stride) of b as the k × n right-hand side.
    let (rhs_cs, rhs_rs) = if transposed {
        (b.row_stride as isize, 1)
    } else {
        (1, b.row_stride as isize)
    };
    let dst = out.data[out.offset..].as_mut_ptr();
    let lhs = a.data[a.offset..].as_ptr();
    let rhs = b.data[b.offset..].as_ptr();
    #[allow(unsafe_code)]
    // SAFETY: `fits` checked that every element each view addresses (offset plus row and
    // column strides, for its rows and columns) lies inside its slice, the shapes were
    // checked by the callers, and `out` is borrowed mutably so it aliases neither input.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            out.row_stride as isize,
            accumulate,
            lhs,
            1,
            a.row_stride as isize,
            rhs,
            rhs_cs,
            rhs_rs,
            if accumulate { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Adds `bias` to every row of the `rows × bias.len()` matrix `x`.
pub fn add_bias(x: &mut [f32], bias: &[f32]) {
    if bias.is_empty() {
        return;
    }
    for row in x.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

const LANES: usize = 16;

/// The sum of `xs` in 16 interleaved partial sums, added up in a fixed order.
#[inline(always)]
fn sum(xs: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            acc[i] += c[i];
        }
    }
    for (i, x) in chunks.remainder().iter().enumerate() {
        acc[i] += x;
    }
    let mut s = 0.0;
    for a in acc {
        s += a;
    }
    s
}

#[inline(always)]
fn max(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            acc[i] = acc[i].max(c[i]);
        }
    }
    for (i, x) in chunks.remainder().iter().enumerate() {
        acc[i] = acc[i].max(*x);
    }
    acc.into_iter().fold(f32::NEG_INFINITY, f32::max)
}

/// `e^x` for `x` in f32, within 2 ulp, without branches (so loops of it vectorise):
/// `x = n ln 2 + r`, `e^r` by a degree-6 polynomial on `|r| ≤ ln 2 / 2`, then `2^n`
/// put in the exponent. Under about -87.3 it gives 0; over 88 it stays at `e^88`
/// (callers take it of values at most 0, or where a large value's size does not matter).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const LOW: f32 = -87.336_55;
    let c = x.clamp(LOW, 88.0);
    let n = (c * LOG2E).round();
    let r = c - n * LN2_HI - n * LN2_LO;
    // Taylor-like coefficients of e^r (Cephes' expf polynomial).
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5e-1;
    let e = p * r * r + r + 1.0;
    // n is in [-126, 127] after the clamp: 2^n is a normal number.
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if x < LOW { 0.0 } else { e * scale }
}

/// `erf(x)` within 1.5e-7 (Abramowitz and Stegun 7.1.26), branch-free.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let y = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_8) * t - 0.284_496_74) * t
        + 0.254_829_6)
        * t;
    let r = 1.0 - y * exp(-a * a);
    r.copysign(x)
}

/// The activation of the feed-forward layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `x Φ(x)` with the exact error function (`gelu`, BERT's and XLM-R's).
    Gelu,
    /// The tanh approximation (`gelu_new`, `gelu_pytorch_tanh`).
    GeluTanh,
    Relu,
}

#[inline(always)]
fn activate_into(x: &mut [f32], act: Activation) {
    match act {
        Activation::Gelu => {
            for v in x.iter_mut() {
                *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
            }
        }
        Activation::GeluTanh => {
            const C: f32 = 0.797_884_6; // sqrt(2 / π)
            for v in x.iter_mut() {
                let u = C * (*v + 0.044_715 * *v * *v * *v);
                // tanh(u) = 1 - 2 / (e^{2u} + 1)
                let t = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
                *v = 0.5 * *v * (1.0 + t);
            }
        }
        Activation::Relu => {
            for v in x.iter_mut() {
                *v = v.max(0.0);
            }
        }
    }
}

#[inline(always)]
fn layer_norm_into(x: &mut [f32], width: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(width) {
        let mean = sum(row) / width as f32;
        for v in row.iter_mut() {
            *v -= mean;
        }
        let mut sq = [0f32; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for c in &mut chunks {
            for i in 0..LANES {
                sq[i] += c[i] * c[i];
            }
        }
        for (i, v) in chunks.remainder().iter().enumerate() {
            sq[i] += v * v;
        }
        let var = sum(&sq) / width as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = *v * inv * g + b;
        }
    }
}

#[inline(always)]
fn softmax_into(x: &mut [f32], width: usize, scale: f32) {
    for row in x.chunks_exact_mut(width) {
        for v in row.iter_mut() {
            *v *= scale;
        }
        let m = max(row);
        for v in row.iter_mut() {
            *v = exp(*v - m);
        }
        let inv = 1.0 / sum(row);
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

#[inline(always)]
fn tanh_into(x: &mut [f32]) {
    for v in x.iter_mut() {
        // Exact enough through std: the head applies it to one row per document.
        *v = v.tanh();
    }
}

/// Runs `$body` compiled for AVX-512 or AVX2 when the CPU has them, else as it is.
macro_rules! dispatch {
    ($name:ident ( $($arg:ident : $ty:ty),* ) => $inner:ident) => {
        pub fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma,avx2")]
                fn wide($($arg: $ty),*) {
                    $inner($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) {
                    $inner($($arg),*)
                }
                if features().0 {
                    #[allow(unsafe_code)]
                    // SAFETY: the CPU has the features `wide` is compiled for.
                    unsafe { wide($($arg),*) };
                    return;
                }
                if features().1 {
                    #[allow(unsafe_code)]
                    // SAFETY: the CPU has the features `avx2` is compiled for.
                    unsafe { avx2($($arg),*) };
                    return;
                }
            }
            $inner($($arg),*)
        }
    };
}

/// (AVX-512, AVX2 with FMA) on this CPU, looked up once.
#[cfg(target_arch = "x86_64")]
fn features() -> (bool, bool) {
    use std::sync::OnceLock;
    static FEATURES: OnceLock<(bool, bool)> = OnceLock::new();
    *FEATURES.get_or_init(|| {
        let avx2 = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        let wide = avx2
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl");
        (wide, avx2)
    })
}

dispatch!(activate(x: &mut [f32], act: Activation) => activate_into);
dispatch!(layer_norm(x: &mut [f32], width: usize, gamma: &[f32], beta: &[f32], eps: f32) => layer_norm_into);
dispatch!(softmax(x: &mut [f32], width: usize, scale: f32) => softmax_into);
dispatch!(tanh(x: &mut [f32]) => tanh_into);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_close_to_std() {
        let mut worst = 0f32;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (a, b) = (exp(x), x.exp());
            worst = worst.max(((a - b) / b).abs());
            x += 0.0137;
        }
        assert!(worst < 3e-7, "{worst}");
        assert_eq!(exp(-200.0), 0.0);
        assert!(exp(-100.0) >= 0.0 && exp(-100.0) < 1e-40);
    }

    #[test]
    fn gelu_is_close_to_the_exact_one() {
        let xs: Vec<f32> = (-500..500).map(|i| i as f32 / 100.0).collect();
        let mut ys = xs.clone();
        activate(&mut ys, Activation::Gelu);
        for (x, y) in xs.iter().zip(&ys) {
            let exact = 0.5 * f64::from(*x) * (1.0 + libm_erf(f64::from(*x) / 2f64.sqrt()));
            assert!((f64::from(*y) - exact).abs() < 2e-6, "{x}: {y} vs {exact}");
        }
    }

    /// erf in f64 by its Taylor series (exact to about 1e-11 for |x| < 3.6).
    fn libm_erf(x: f64) -> f64 {
        let mut term = x;
        let mut s = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            s += term / (2 * n + 1) as f64;
        }
        s * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn matmul_matches_a_plain_loop() {
        let (m, k, n) = (7, 13, 5);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
        let b: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 * 0.5).collect();
        let mut out = vec![0f32; m * n];
        matmul_t(
            ViewMut::dense(&mut out, m, n),
            View::dense(&a, m, k),
            View::dense(&b, n, k),
            false,
        );
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|t| a[i * k + t] * b[j * k + t]).sum();
                assert!((out[i * n + j] - want).abs() < 1e-4);
            }
        }
        // Accumulating adds the product again.
        let before = out.clone();
        matmul_t(
            ViewMut::dense(&mut out, m, n),
            View::dense(&a, m, k),
            View::dense(&b, n, k),
            true,
        );
        for (x, y) in out.iter().zip(&before) {
            assert!((x - 2.0 * y).abs() < 1e-3);
        }
    }

    #[test]
    fn softmax_and_layer_norm() {
        let mut x = vec![1.0, 2.0, 3.0, 1.0, 1.0, 1.0];
        softmax(&mut x, 3, 1.0);
        assert!((x[0] + x[1] + x[2] - 1.0).abs() < 1e-6);
        assert!((x[3] - 1.0 / 3.0).abs() < 1e-6);
        let mut y = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut y, 4, &[1.0; 4], &[0.0; 4], 1e-12);
        assert!((y.iter().sum::<f32>()).abs() < 1e-5);
        assert!((y[3] - 1.341_640_8).abs() < 1e-5);
    }
}
