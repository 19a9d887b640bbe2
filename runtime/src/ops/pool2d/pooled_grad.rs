//! A convolution's kernel and bias gradients straight from the pooled cotangent of the
//! fused bias, ReLU and max pooling after it (see the native planner's `conv_pool_grad`).
//!
//! The convolution's output cotangent `dY` is the pooling gradient gated by the ReLU's
//! (`Pool2d::scatter_indexed_bias_relu`): per pooled output and channel one element of
//! the window gets `gate · g`, every other element zero. The kernel gradient is
//! `dW[tap, ci, co] = Σ x[patch(pixel) + tap, ci] · dY[pixel, co]` and the bias gradient
//! `db[co] = Σ dY[pixel, co]`, so both follow from the selected elements alone: per window
//! cell a vector over channels holding `gate · g` where that cell was selected (zero
//! elsewhere) adds its patch's products into `dW`, and `db` adds `gate · g` per pooled
//! output. `dY` is never written.
//!
//! Scatter-add is linear, so overlapping windows that select an element twice add its two
//! contributions separately; only the order of the sums differs from the unfused plan.
//! The sums are deterministic: the batch is cut into parts that depend on the shape
//! alone, each part summed on its own, the parts then added in order.
//!
//! A zero contribution is skipped, which changes nothing while the image is finite; an
//! image holding an infinity or NaN makes `0 · x` NaN in the unfused product, so then the
//! kernel gradient takes the dense path over every pixel of `dY` (written in full).

use super::{Pool2d, ReluGate, Simd, POS};
use crate::kernel::crew;

/// Parts the batch is cut into (at most; never more than the images).
const PARTS: usize = 16;

/// The geometry of a convolution `y = conv(x, k)` as its kernel gradient walks it: the
/// image `[n, h, w, cin]`, the kernel's `kh × kw` taps, strides, dilation and low padding
/// (negative: cropped) of the two spatial axes. `y`'s pixels and features are the
/// pooling's operand (`Pool2d`'s `h`, `w` and `c`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvTaps {
    pub h: usize,
    pub w: usize,
    pub cin: usize,
    pub kh: usize,
    pub kw: usize,
    pub strides: [usize; 2],
    pub dilation: [usize; 2],
    pub pad: [i64; 2],
}

impl ConvTaps {
    /// Adds `x[patch(i, j) + tap, ci] · wv[co]` into `acc[tap, ci, co]` for the output
    /// pixel `(i, j)` of image `x` (taps off the image read the zero padding: skipped).
    #[inline(always)]
    fn add_pixel<T: num_traits::Float>(
        &self,
        x: &[T],
        (i, j): (usize, usize),
        wv: &[T],
        acc: &mut [T],
    ) {
        let c = wv.len();
        for ky in 0..self.kh {
            let py = (i * self.strides[0] + ky * self.dilation[0]) as i64 - self.pad[0];
            if py < 0 || py >= self.h as i64 {
                continue;
            }
            for kx in 0..self.kw {
                let px = (j * self.strides[1] + kx * self.dilation[1]) as i64 - self.pad[1];
                if px < 0 || px >= self.w as i64 {
                    continue;
                }
                let xo = (py as usize * self.w + px as usize) * self.cin;
                let t = (ky * self.kw + kx) * self.cin;
                for (ci, &xv) in x[xo..xo + self.cin].iter().enumerate() {
                    let row = &mut acc[(t + ci) * c..(t + ci + 1) * c];
                    for (a, &w) in row.iter_mut().zip(wv) {
                        *a = *a + xv * w;
                    }
                }
            }
        }
    }
}

impl Pool2d {
    /// The kernel gradient `[kh, kw, cin, c]` of the convolution `conv` of `image` whose
    /// output this pooling pooled, from the pooling's cotangent `src` and the `index`
    /// `reduce_index_bias_relu` recorded (the ReLU's gradient `gate`).
    pub(in crate::ops) fn pooled_kernel_grad<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        conv: &ConvTaps,
        image: &[T],
        (src, index): (&[T], &[u8]),
        gate: &ReluGate<T>,
        out: &mut [T],
    ) {
        let p = *self;
        let len = conv.kh * conv.kw * conv.cin * p.c;
        debug_assert_eq!(out.len(), len);
        let img = conv.h * conv.w * conv.cin;
        if !image.iter().all(|v| v.is_finite()) {
            return self.dense_kernel_grad(conv, image, (src, index), gate, out);
        }
        let parts = p.n.min(PARTS);
        if parts == 0 || len == 0 {
            out.fill(T::zero());
            return;
        }
        let simd = Simd::detect();
        let mut partial = vec![T::zero(); parts * len];
        crew::run_chunks(&mut partial, parts, len, &|start, acc: &mut [T]| {
            let images = crew::part(p.n, parts, start / len);
            let x = &image[images.start * img..images.end * img];
            // SAFETY: `simd` is what the CPU supports.
            unsafe { kernel_grad_part(simd, &p, conv, x, images, (src, index), gate, acc) };
        });
        add_parts(&partial, out);
    }

    /// `pooled_kernel_grad` over every pixel of `dY`, written in full (as the unfused plan
    /// does), for images that are not finite.
    fn dense_kernel_grad<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        conv: &ConvTaps,
        image: &[T],
        (src, index): (&[T], &[u8]),
        gate: &ReluGate<T>,
        out: &mut [T],
    ) {
        let p = *self;
        let mut dy = vec![T::zero(); p.n * p.h * p.w * p.c];
        self.scatter_indexed_bias_relu(src, index, &mut dy, gate);
        out.fill(T::zero());
        let img = conv.h * conv.w * conv.cin;
        for (b, x) in image.chunks_exact(img.max(1)).take(p.n).enumerate() {
            for i in 0..p.h {
                for j in 0..p.w {
                    let at = ((b * p.h + i) * p.w + j) * p.c;
                    conv.add_pixel(x, (i, j), &dy[at..at + p.c], out);
                }
            }
        }
    }

    /// The bias gradient `[c]` (`dY` summed over all but its channels) from the pooling's
    /// cotangent `src` and `index`, as `pooled_kernel_grad`.
    pub(in crate::ops) fn pooled_bias_grad<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        (src, index): (&[T], &[u8]),
        gate: &ReluGate<T>,
        out: &mut [T],
    ) {
        let p = *self;
        let parts = p.n.min(PARTS);
        if parts == 0 || p.c == 0 {
            out.fill(T::zero());
            return;
        }
        let mut partial = vec![T::zero(); parts * p.c];
        crew::run_chunks(&mut partial, parts, p.c, &|start, acc: &mut [T]| {
            for b in crew::part(p.n, parts, start / p.c) {
                p.each_window(b, |so, _| {
                    let (s, ix) = (&src[so..so + p.c], &index[so..so + p.c]);
                    for ((a, &g), &bits) in acc.iter_mut().zip(s).zip(ix) {
                        *a = *a + gate.apply(g, bits);
                    }
                });
            }
        });
        add_parts(&partial, out);
    }

    /// Calls `f(offset of the window's outputs in the cotangent, clipped window)` for each
    /// window of image `b` that covers an element (empty windows select nothing).
    #[inline(always)]
    fn each_window(&self, b: usize, mut f: impl FnMut(usize, super::Win)) {
        let p = self;
        for o in 0..p.oh {
            let (i0, i1) = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
            if i0 == i1 {
                continue;
            }
            for q in 0..p.ow {
                let (j0, j1) = Pool2d::span(q, p.sw, p.kw, p.pw, p.w);
                if j0 != j1 {
                    f(((b * p.oh + o) * p.ow + q) * p.c, (i0, i1, j0, j1));
                }
            }
        }
    }
}

/// `out` = the `out.len()`-long parts of `partial` added in order.
fn add_parts<T: num_traits::Float>(partial: &[T], out: &mut [T]) {
    let len = out.len();
    out.copy_from_slice(&partial[..len]);
    for part in partial[len..].chunks_exact(len) {
        for (o, &v) in out.iter_mut().zip(part) {
            *o = *o + v;
        }
    }
}

/// One part of `pooled_kernel_grad`: the images `images` (`x` holds them) into `acc`, on
/// the instructions `simd` names.
///
/// # Safety
/// `simd` must be supported by the CPU.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_grad_part<T: num_traits::Float>(
    simd: Simd,
    p: &Pool2d,
    conv: &ConvTaps,
    x: &[T],
    images: std::ops::Range<usize>,
    cot: (&[T], &[u8]),
    gate: &ReluGate<T>,
    acc: &mut [T],
) {
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked the CPU.
        Simd::Avx2 => unsafe { kernel_grad_part_avx2(p, conv, x, images, cot, gate, acc) },
        _ => kernel_grad_part_generic(p, conv, x, images, cot, gate, acc),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_grad_part_avx2<T: num_traits::Float>(
    p: &Pool2d,
    conv: &ConvTaps,
    x: &[T],
    images: std::ops::Range<usize>,
    cot: (&[T], &[u8]),
    gate: &ReluGate<T>,
    acc: &mut [T],
) {
    kernel_grad_part_generic(p, conv, x, images, cot, gate, acc)
}

#[inline(always)]
fn kernel_grad_part_generic<T: num_traits::Float>(
    p: &Pool2d,
    conv: &ConvTaps,
    x: &[T],
    images: std::ops::Range<usize>,
    (src, index): (&[T], &[u8]),
    gate: &ReluGate<T>,
    acc: &mut [T],
) {
    let c = p.c;
    let img = conv.h * conv.w * conv.cin;
    let zero = T::zero();
    // Per cell of a window: its channels' contributions, and whether any is not zero.
    let mut cells = vec![zero; p.kh * p.kw * c];
    let mut used = vec![false; p.kh * p.kw];
    let first = images.start;
    for b in images {
        let x = &x[(b - first) * img..(b - first + 1) * img];
        p.each_window(b, |so, (i0, i1, j0, j1)| {
            let wj = j1 - j0;
            let n_cells = (i1 - i0) * wj;
            let cells = &mut cells[..n_cells * c];
            cells.fill(zero);
            used[..n_cells].fill(false);
            let (s, ix) = (&src[so..so + c], &index[so..so + c]);
            for (ch, (&g, &bits)) in s.iter().zip(ix).enumerate() {
                let v = gate.apply(g, bits);
                let k = usize::from(bits & POS);
                // NaN compares unequal to zero: it is kept.
                if v != zero && k < n_cells {
                    cells[k * c + ch] = v;
                    used[k] = true;
                }
            }
            for k in (0..n_cells).filter(|&k| used[k]) {
                let pixel = (i0 + k / wj, j0 + k % wj);
                conv.add_pixel(x, pixel, &cells[k * c..(k + 1) * c], acc);
            }
        });
    }
}
