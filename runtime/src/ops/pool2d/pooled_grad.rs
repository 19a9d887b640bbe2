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
            #[cfg(target_arch = "x86_64")]
            if simd == Simd::Avx2 && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
                // SAFETY: `T` is `f32` (checked above): the same slices, retyped.
                let (x, src, acc) = unsafe {
                    (
                        std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                        std::slice::from_raw_parts(src.as_ptr() as *const f32, src.len()),
                        std::slice::from_raw_parts_mut(acc.as_mut_ptr() as *mut f32, acc.len()),
                    )
                };
                let f = |v: T| v.to_f32().unwrap_or(0.0);
                let gate = ReluGate {
                    one: f(gate.one),
                    half: f(gate.half),
                    zero: f(gate.zero),
                    ct_first: gate.ct_first,
                };
                let part = (&p, conv, x, images, (src, index), &gate);
                let taps = conv.kh * conv.kw * conv.cin;
                // The sums in registers where they fit: one instance per tap count.
                macro_rules! in_registers {
                    ($($k:literal)*) => {
                        match taps {
                            // SAFETY: `simd` says the CPU has AVX2 and FMA.
                            $($k => unsafe { kernel_grad_part_regs::<$k>(part, acc) },)*
                            // SAFETY: as above.
                            _ => unsafe { kernel_grad_part_avx2(part, acc) },
                        }
                    };
                }
                in_registers!(1 2 3 4 5 6 7 8 9 10 11 12);
                return;
            }
            let _ = simd;
            kernel_grad_part_generic(&p, conv, x, images, (src, index), gate, acc);
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

/// One part of `pooled_kernel_grad`: the images `images` (`x` holds them) into `acc`.
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

/// `kernel_grad_part_generic` for `f32` on AVX2 and FMA: the channels in vectors of eight,
/// a cell's contributions a mask of the window's selected positions, each tap one
/// multiply-add per vector into accumulators that stay in L1.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_grad_part_avx2(
    (p, conv, x, images, (src, index), gate): Part<'_>,
    acc: &mut [f32],
) {
    use std::arch::x86_64::*;
    const L: usize = 8;
    let c = p.c;
    let taps = conv.kh * conv.kw * conv.cin;
    let img = conv.h * conv.w * conv.cin;
    let blocks = c.div_ceil(L);
    let zero = _mm256_setzero_ps();
    let mut sums = vec![zero; blocks * taps];
    // Per block of channels: the contributions and (where one is not zero) the selected
    // positions, else -1.
    let mut sel: Vec<(__m256, __m256i)> = vec![(zero, _mm256_set1_epi32(-1)); blocks];
    // The valid taps of a cell's pixel: (offset in the image, accumulator row).
    let mut reads: Vec<(usize, usize)> = vec![(0, 0); taps];
    let first = images.start;
    for b in images {
        let xb = &x[(b - first) * img..(b - first + 1) * img];
        for o in 0..p.oh {
            let (i0, i1) = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
            if i0 == i1 {
                continue;
            }
            for q in 0..p.ow {
                let (j0, j1) = Pool2d::span(q, p.sw, p.kw, p.pw, p.w);
                if j0 == j1 {
                    continue;
                }
                let so = ((b * p.oh + o) * p.ow + q) * c;
                for (k, s) in sel.iter_mut().enumerate() {
                    let c0 = k * L;
                    let cb = L.min(c - c0);
                    let (mut v, mut pos) = ([0.0f32; L], [-1i32; L]);
                    for l in 0..cb {
                        let bits = index[so + c0 + l];
                        v[l] = gate.apply(src[so + c0 + l], bits);
                        pos[l] = i32::from(bits & POS);
                    }
                    // SAFETY: loads of whole local arrays.
                    let (v, pos) = unsafe {
                        (
                            _mm256_loadu_ps(v.as_ptr()),
                            _mm256_loadu_si256(pos.as_ptr() as *const __m256i),
                        )
                    };
                    // Zero contributions select nothing (NaN, unordered, is kept).
                    let live = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_NEQ_UQ>(v, zero));
                    let none = _mm256_set1_epi32(-1);
                    *s = (v, _mm256_blendv_epi8(none, pos, live));
                }
                let wj = j1 - j0;
                for cell in 0..(i1 - i0) * wj {
                    let (i, j) = (i0 + cell / wj, j0 + cell % wj);
                    let mut n_reads = 0;
                    for ky in 0..conv.kh {
                        let py = (i * conv.strides[0] + ky * conv.dilation[0]) as i64 - conv.pad[0];
                        if py < 0 || py >= conv.h as i64 {
                            continue;
                        }
                        for kx in 0..conv.kw {
                            let px =
                                (j * conv.strides[1] + kx * conv.dilation[1]) as i64 - conv.pad[1];
                            if px < 0 || px >= conv.w as i64 {
                                continue;
                            }
                            let xo = (py as usize * conv.w + px as usize) * conv.cin;
                            let t = (ky * conv.kw + kx) * conv.cin;
                            for ci in 0..conv.cin {
                                reads[n_reads] = (xo + ci, t + ci);
                                n_reads += 1;
                            }
                        }
                    }
                    let here = _mm256_set1_epi32(cell as i32);
                    for (k, &(v, pos)) in sel.iter().enumerate() {
                        let m = _mm256_castsi256_ps(_mm256_cmpeq_epi32(pos, here));
                        if _mm256_movemask_ps(m) == 0 {
                            continue;
                        }
                        let w = _mm256_and_ps(m, v);
                        let rows = &mut sums[k * taps..(k + 1) * taps];
                        for &(xo, t) in &reads[..n_reads] {
                            rows[t] = _mm256_fmadd_ps(_mm256_set1_ps(xb[xo]), w, rows[t]);
                        }
                    }
                }
            }
        }
    }
    for (k, rows) in sums.chunks_exact(taps.max(1)).enumerate() {
        let c0 = k * L;
        let cb = L.min(c - c0);
        for (t, &r) in rows.iter().enumerate() {
            let mut lanes = [0.0f32; L];
            // SAFETY: a store into a whole local array.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), r) };
            acc[t * c + c0..t * c + c0 + cb].copy_from_slice(&lanes[..cb]);
        }
    }
}

/// One part of `pooled_kernel_grad` in `f32`: the pooling, the convolution, the part's
/// images (and their indices in the batch), the cotangent and index, the gate.
#[cfg(target_arch = "x86_64")]
type Part<'a> = (
    &'a Pool2d,
    &'a ConvTaps,
    &'a [f32],
    std::ops::Range<usize>,
    (&'a [f32], &'a [u8]),
    &'a ReluGate<f32>,
);

/// `kernel_grad_part_avx2` for `KT` taps (kernel positions times input features): each
/// block of eight channels walks every window of the part with its `KT` sums in
/// registers; a window's contributions and selected positions are computed in vectors.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_grad_part_regs<const KT: usize>(
    (p, conv, x, images, (src, index), gate): Part<'_>,
    acc: &mut [f32],
) {
    use std::arch::x86_64::*;
    const L: usize = 8;
    let c = p.c;
    let img = conv.h * conv.w * conv.cin;
    debug_assert_eq!(conv.kh * conv.kw * conv.cin, KT);
    // Per tap: its offset in the image from the patch's first element, and its rows and
    // columns below and right of that element.
    let (mut off, mut shift) = ([0usize; KT], [(0usize, 0usize); KT]);
    for ky in 0..conv.kh {
        for kx in 0..conv.kw {
            for ci in 0..conv.cin {
                let t = (ky * conv.kw + kx) * conv.cin + ci;
                let (dy, dx) = (ky * conv.dilation[0], kx * conv.dilation[1]);
                off[t] = (dy * conv.w + dx) * conv.cin + ci;
                shift[t] = (dy, dx);
            }
        }
    }
    let reach = (
        ((conv.kh - 1) * conv.dilation[0]) as i64,
        ((conv.kw - 1) * conv.dilation[1]) as i64,
    );
    let (h, w) = (conv.h as i64, conv.w as i64);
    let zero = _mm256_setzero_ps();
    let table = _mm256_setr_ps(gate.zero, gate.half, gate.one, gate.one, 0.0, 0.0, 0.0, 0.0);
    let positions = _mm256_set1_epi32(i32::from(POS));
    let none = _mm256_set1_epi32(-1);
    let first = images.start;
    for c0 in (0..c).step_by(L) {
        let cb = L.min(c - c0);
        let mut sums = [zero; KT];
        for b in images.clone() {
            let xb = &x[(b - first) * img..(b - first + 1) * img];
            p.each_window(b, |so, (i0, i1, j0, j1)| {
                let at = so + c0;
                let (g, bits) = if cb == L {
                    let (g, bits) = (&src[at..at + L], &index[at..at + L]);
                    // SAFETY: loads of eight floats and eight bytes, in bounds (just checked).
                    unsafe {
                        (
                            _mm256_loadu_ps(g.as_ptr()),
                            _mm256_cvtepu8_epi32(_mm_loadl_epi64(bits.as_ptr() as *const __m128i)),
                        )
                    }
                } else {
                    // The last block's channels, the lanes past them zero (no contribution).
                    let (mut g, mut bits) = ([0.0f32; L], [0u8; 16]);
                    g[..cb].copy_from_slice(&src[at..at + cb]);
                    bits[..cb].copy_from_slice(&index[at..at + cb]);
                    // SAFETY: loads of whole local arrays.
                    unsafe {
                        (
                            _mm256_loadu_ps(g.as_ptr()),
                            _mm256_cvtepu8_epi32(_mm_loadu_si128(bits.as_ptr() as *const __m128i)),
                        )
                    }
                };
                // `ReluGate::apply`: the gate looked up by the comparisons' bits, times `g`
                // (a product, the same bits in either order).
                let v = _mm256_mul_ps(
                    g,
                    _mm256_permutevar8x32_ps(table, _mm256_srli_epi32::<6>(bits)),
                );
                // Zero contributions select nothing (NaN, unordered, is kept).
                let live = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_NEQ_UQ>(v, zero));
                let pos = _mm256_blendv_epi8(none, _mm256_and_si256(bits, positions), live);
                // Cells in row-major order, as the index counts them.
                let mut cell = -1i32;
                for i in i0..i1 {
                    for j in j0..j1 {
                        cell += 1;
                        let m =
                            _mm256_castsi256_ps(_mm256_cmpeq_epi32(pos, _mm256_set1_epi32(cell)));
                        if _mm256_movemask_ps(m) == 0 {
                            continue;
                        }
                        let wv = _mm256_and_ps(m, v);
                        let y0 = (i * conv.strides[0]) as i64 - conv.pad[0];
                        let x0 = (j * conv.strides[1]) as i64 - conv.pad[1];
                        if y0 >= 0 && x0 >= 0 && y0 + reach.0 < h && x0 + reach.1 < w {
                            let base = (y0 as usize * conv.w + x0 as usize) * conv.cin;
                            let patch = &xb[base..=base + off[KT - 1]];
                            for t in 0..KT {
                                sums[t] =
                                    _mm256_fmadd_ps(_mm256_set1_ps(patch[off[t]]), wv, sums[t]);
                            }
                        } else {
                            // A patch over the padding: its taps there read zeros (skipped).
                            for t in 0..KT {
                                let (py, px) = (y0 + shift[t].0 as i64, x0 + shift[t].1 as i64);
                                if py >= 0 && px >= 0 && py < h && px < w {
                                    let xo = (py as usize * conv.w + px as usize) * conv.cin;
                                    let xv = xb[xo + t % conv.cin];
                                    sums[t] = _mm256_fmadd_ps(_mm256_set1_ps(xv), wv, sums[t]);
                                }
                            }
                        }
                    }
                }
            });
        }
        for (t, &r) in sums.iter().enumerate() {
            let mut lanes = [0.0f32; L];
            // SAFETY: a store into a whole local array.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), r) };
            acc[t * c + c0..t * c + c0 + cb].copy_from_slice(&lanes[..cb]);
        }
    }
}
