//! A convolution's kernel and bias gradients straight from the pooled cotangent of the
//! fused bias, ReLU and max pooling after it (see the native planner's `conv_pool_grad`),
//! without the convolution output's cotangent `dY` (the network's largest tensor) in
//! memory.
//!
//! `dY` is the pooling gradient gated by the ReLU's (`Pool2d::scatter_indexed_bias_relu`).
//! For windows that never overlap, each of its rows follows from its pooling's cotangent
//! and index alone (`Pool2d::scatter_disjoint_rows`), so the kernel gradient rebuilds `dY`
//! a band of rows at a time in a buffer that stays in cache, with the very code that
//! writes it in full, and hands each band to the direct kernel gradient
//! (`conv_direct::kernel_grad_rows`): every element and every product is the unfused
//! plan's, so an image holding an infinity or NaN gives the unfused plan's NaN, and the
//! sum differs from the unfused one only in how the batch's rows are cut into parts.
//! The bias gradient `db[co] = Σ dY[pixel, co]` adds per pooled output the value of its
//! selected element (`gate · (0 + g)`, as the scatter writes it).
//!
//! Where `selected_grad` takes the convolution (AVX-512, a 3×3 kernel on one feature, no
//! padding), not even a band of `dY` is written: each pixel's cotangent is made in
//! registers, with the same bits.
//!
//! The sums are deterministic: the rows are cut into parts that depend on the shape
//! alone, each part summed on its own, the parts then added in order.

use super::{Pool2d, ReluGate};
use crate::kernel::conv_direct::{self, Direct2d};
use crate::kernel::crew;
use crate::Result;

/// Parts the batch's rows are cut into (at most; never more than the rows). The direct
/// kernel gradient cuts them into four tasks per core: on four cores the two sums are
/// the same bits.
const PARTS: usize = 16;

/// Elements of `dY` rebuilt at a time: a band of rows that stays in L1 while the kernel
/// gradient reads it once per kernel row.
const BAND: usize = 4096;

impl Pool2d {
    /// The kernel gradient `[kh, kw, cin, c]` of the convolution `conv` of `image` whose
    /// output this (`disjoint`) pooling pooled, from the pooling's cotangent `src` and the
    /// `index` `reduce_index_bias_relu` recorded (the ReLU's gradient `gate`). The parts'
    /// sums and bands live in `scratch` (grown once, kept by the caller).
    pub(in crate::ops) fn pooled_kernel_grad(
        &self,
        conv: &Direct2d,
        image: &[f32],
        (src, index): (&[f32], &[u8]),
        gate: &ReluGate<f32>,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
    ) -> Result<()> {
        let p = *self;
        let bad = || {
            crate::Error::shape(
                "convolution",
                "a pooled kernel gradient's operands do not match their geometry",
            )
        };
        if !p.disjoint() {
            return Err(bad());
        }
        let row = p.w * p.c;
        let rows = p.n * p.h;
        let len = out.len();
        let parts = rows.min(PARTS);
        if parts == 0 || len == 0 || row == 0 {
            out.fill(0.0);
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        let selected = p.selected_grad_fits(conv, image);
        #[cfg(not(target_arch = "x86_64"))]
        let selected = false;
        let band = (BAND / row).max(1);
        // Per part: its sums, then its band of `dY` (none where no band is written).
        let stride = len + if selected { 0 } else { band * row };
        if scratch.len() < parts * stride {
            scratch.resize(parts * stride, 0.0);
        }
        let scratch = &mut scratch[..parts * stride];
        let simd = crate::kernel::simd::level();
        let failed = std::sync::atomic::AtomicBool::new(false);
        crew::run_chunks(scratch, parts, stride, &|start, chunk: &mut [f32]| {
            let (acc, dy) = chunk.split_at_mut(len);
            acc.fill(0.0);
            let mut r = crew::part(rows, parts, start / stride);
            #[cfg(target_arch = "x86_64")]
            if selected {
                p.selected_grad_rows(conv, image, (src, index), gate, r, acc);
                return;
            }
            while !r.is_empty() {
                // A band inside one image.
                let (b, i) = (r.start / p.h, r.start % p.h);
                let m = band.min(r.len()).min(p.h - i);
                let dy = &mut dy[..m * row];
                p.scatter_disjoint_rows(r.start, dy, (src, index), Some(gate), simd);
                if conv_direct::kernel_grad_rows(conv, image, dy, (b, i..i + m), acc).is_err() {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                r.start += m;
            }
        });
        if failed.into_inner() {
            return Err(bad());
        }
        add_parts(scratch, stride, out);
        Ok(())
    }

    /// The bias gradient `[c]` (`dY` summed over all but its channels) from the pooling's
    /// cotangent `src` and `index`, as `pooled_kernel_grad`.
    pub(in crate::ops) fn pooled_bias_grad(
        &self,
        (src, index): (&[f32], &[u8]),
        gate: &ReluGate<f32>,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
    ) {
        let p = *self;
        let parts = p.n.min(PARTS);
        if parts == 0 || p.c == 0 {
            out.fill(0.0);
            return;
        }
        // Per part: its sums, then a window's values.
        let stride = 2 * p.c;
        if scratch.len() < parts * stride {
            scratch.resize(parts * stride, 0.0);
        }
        let scratch = &mut scratch[..parts * stride];
        let simd = crate::kernel::simd::level();
        crew::run_chunks(scratch, parts, stride, &|start, chunk: &mut [f32]| {
            let (acc, v) = chunk.split_at_mut(p.c);
            acc.fill(0.0);
            for b in crew::part(p.n, parts, start / stride) {
                p.each_window(b, |so, _| {
                    let window = (&src[so..so + p.c], &index[so..so + p.c]);
                    super::disjoint::add_selected(simd, acc, v, window, gate);
                });
            }
        });
        add_parts(scratch, stride, out);
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

/// `out` = the first `out.len()` elements of each `stride`-long part of `parts` (a part's
/// sums), added in order.
fn add_parts(parts: &[f32], stride: usize, out: &mut [f32]) {
    let len = out.len();
    out.copy_from_slice(&parts[..len]);
    for part in parts[stride..].chunks_exact(stride) {
        for (o, &v) in out.iter_mut().zip(&part[..len]) {
            *o += v;
        }
    }
}
