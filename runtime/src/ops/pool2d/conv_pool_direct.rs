//! The recording 2×2 max pooling of `relu(conv(x, w) + bias)` with each window's four
//! convolution outputs computed in registers (AVX-512, no padding): a network's first
//! `Conv2D(relu)` → `MaxPooling2D()`, its convolution's output never stored, not even a
//! band of it.
//!
//! `conv_band` computes a band of the convolution's rows into a scratch buffer and pools it
//! with the generic window walk, which costs more than the convolution when the layer is
//! this thin (one input feature). Here two windows' eight pixels are sixteen vectors of
//! accumulators; each tap's weights, loaded once, serve all eight, and the pooling takes
//! them straight from the registers. Each pixel's sum runs as the direct kernel's
//! (`kernel::conv_direct`: the taps in the product's order from zero, one fused
//! multiply-add each), and the pooling is `select_bias_relu_avx512`, the stored pooling's
//! own: output and index are the band path's bits.

use super::conv_band::TASKS_PER_CORE;
use super::{select_bias_relu_avx512, BiasRelu, Pool2d};
use crate::kernel::conv_direct::{Direct2d, MAX_TAPS};
use crate::kernel::crew;

impl Pool2d {
    /// Whether [`Pool2d::conv_pool_direct`] computes this pooling of `g`'s output: AVX-512,
    /// 2×2 windows of stride 2 without padding, whole vectors of features, and a
    /// convolution without padding whose every tap lies inside the input.
    pub(super) fn conv_pool_direct_fits(&self, g: &Direct2d, x: &[f32], w: &[f32]) -> bool {
        let taps = g.kernel[0] * g.kernel[1] * g.cin;
        crate::kernel::simd::level() >= crate::kernel::simd::Level::Avx512
            && g.supported()
            && (1..=MAX_TAPS).contains(&taps)
            && [self.kh, self.kw, self.sh, self.sw] == [2, 2, 2, 2]
            && [self.ph, self.pw] == [0, 0]
            && 2 * self.oh <= self.h
            && 2 * self.ow <= self.w
            && self.c.is_multiple_of(16)
            && g.cout == self.c
            && g.batch == self.n
            && g.output == [self.h, self.w]
            && g.taps_inside()
            && x.len() >= g.batch * g.input[0] * g.input[1] * g.cin
            && w.len() >= taps * g.cout
    }

    /// `conv_reduce_index_bias_relu` where [`Pool2d::conv_pool_direct_fits`] holds (the
    /// caller checked it and the outputs' lengths): pooled rows split over the crew.
    pub(super) fn conv_pool_direct(
        &self,
        g: &Direct2d,
        (x, w, bias): (&[f32], &[f32], &[f32]),
        (out, index): (&mut [f32], &mut [u8]),
        act: &BiasRelu<f32>,
    ) {
        let p = *self;
        assert!(p.conv_pool_direct_fits(g, x, w));
        let row = p.ow * p.c;
        assert!(bias.len() == p.c && out.len() == p.n * p.oh * row && index.len() == out.len());
        let [_, iw] = g.input;
        // Each tap's input from a pixel's first input element, and its weights' offset.
        let mut taps = [(0isize, 0usize); MAX_TAPS];
        let mut n = 0;
        for i in 0..g.kernel[0] {
            for j in 0..g.kernel[1] {
                for ci in 0..g.cin {
                    let off = ((i * g.dilation[0]) * iw + j * g.dilation[1]) * g.cin + ci;
                    taps[n] = (off as isize, ((i * g.kernel[1] + j) * g.cin + ci) * g.cout);
                    n += 1;
                }
            }
        }
        let taps = &taps[..n];
        let units = p.n * p.oh;
        let tasks = (crew::width() * TASKS_PER_CORE).min(units).max(1);
        let (ob, ib) = (out.as_mut_ptr() as usize, index.as_mut_ptr() as usize);
        crew::run(tasks, &|t| {
            for r in crew::part(units, tasks, t) {
                // SAFETY: tasks take disjoint pooled rows of `out` and `index` (of the
                // lengths asserted above), which stay mutably borrowed until `run` returns.
                let (orow, irow) = unsafe {
                    (
                        std::slice::from_raw_parts_mut((ob as *mut f32).add(r * row), row),
                        std::slice::from_raw_parts_mut((ib as *mut u8).add(r * row), row),
                    )
                };
                p.pooled_row(g, (x, w, bias), taps, r, (orow, irow), act);
            }
        });
    }

    /// Pooled row `r` (`b · oh + oy`): its windows two at a time, then the odd one, each in
    /// blocks of thirty-two and sixteen features.
    fn pooled_row(
        &self,
        g: &Direct2d,
        (x, w, bias): (&[f32], &[f32], &[f32]),
        taps: &[(isize, usize)],
        r: usize,
        (orow, irow): (&mut [f32], &mut [u8]),
        act: &BiasRelu<f32>,
    ) {
        let p = self;
        let [ih, iw] = g.input;
        let (b, oy) = (r / p.oh, r % p.oh);
        // The first input element of window `ox`'s pixel `k` (row-major in the window).
        let origin = |ox: usize, k: usize| -> isize {
            let (y, xx) = (2 * oy + k / 2, 2 * ox + k % 2);
            (((b * ih + y * g.strides[0]) * iw + xx * g.strides[1]) * g.cin) as isize
        };
        let mut ox = 0;
        while ox < p.ow {
            let pair = ox + 2 <= p.ow;
            let mut c0 = 0;
            while c0 < p.c {
                let wide = c0 + 32 <= p.c;
                let at = ox * p.c + c0;
                // SAFETY: AVX-512F (`fits`); every tap of every pixel inside `x` and every
                // tap's weights inside `w` (`fits`: no padding, the kernel inside the input);
                // the windows' features `c0..c0 + 16·V` inside `bias`, `orow` and `irow`.
                unsafe {
                    let dst = (orow.as_mut_ptr().add(at), irow.as_mut_ptr().add(at));
                    let src = (x.as_ptr(), w.as_ptr().add(c0), bias.as_ptr().add(c0));
                    macro_rules! go {
                        ($first:literal, $v:literal, $p:literal) => {
                            windows_avx512::<$first, $v, $p>(
                                src,
                                taps,
                                std::array::from_fn(|i| origin(ox + i / 4, i % 4)),
                                act,
                                dst,
                                p.c,
                            )
                        };
                    }
                    match (act.bias_first, wide, pair) {
                        (false, true, true) => go!(false, 2, 2),
                        (false, true, false) => go!(false, 2, 1),
                        (false, false, true) => go!(false, 1, 2),
                        (false, false, false) => go!(false, 1, 1),
                        (true, true, true) => go!(true, 2, 2),
                        (true, true, false) => go!(true, 2, 1),
                        (true, false, true) => go!(true, 1, 2),
                        (true, false, false) => go!(true, 1, 1),
                    }
                }
                c0 += if wide { 32 } else { 16 };
            }
            ox += if pair { 2 } else { 1 };
        }
    }
}

/// `P` windows' `16·V` features: their `4·P` pixels (input origins `origins`, window by
/// window, each window's pixels row-major) convolved in registers, then each window pooled
/// into `out` and `index` (window `q` at `q · c`).
///
/// # Safety
/// AVX-512F; every `origins[i] + tap offset` inside `x`, every tap's `16·V` weights from its
/// offset inside `w`, `16·V` biases, and `16·V` elements (and bytes) of `P` windows of `c`
/// from `out` and `index`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::type_complexity)]
unsafe fn windows_avx512<const BIAS_FIRST: bool, const V: usize, const P: usize>(
    (x, w, bias): (*const f32, *const f32, *const f32),
    taps: &[(isize, usize)],
    origins: [isize; 8],
    act: &BiasRelu<f32>,
    (out, index): (*mut f32, *mut u8),
    c: usize,
) {
    use std::arch::x86_64::*;
    let mut acc = [[[_mm512_setzero_ps(); V]; 4]; P];
    for &(off, wo) in taps {
        // SAFETY: the caller's bounds.
        unsafe {
            let wv: [__m512; V] = std::array::from_fn(|v| _mm512_loadu_ps(w.add(wo + 16 * v)));
            for (q, window) in acc.iter_mut().enumerate() {
                for (k, px) in window.iter_mut().enumerate() {
                    let xv = _mm512_set1_ps(*x.offset(origins[4 * q + k] + off));
                    for v in 0..V {
                        px[v] = _mm512_fmadd_ps(xv, wv[v], px[v]);
                    }
                }
            }
        }
    }
    for (q, window) in acc.iter().enumerate() {
        // `v` picks the same vector of each of the window's four pixels.
        #[allow(clippy::needless_range_loop)]
        for v in 0..V {
            // SAFETY: the caller's bounds.
            unsafe {
                let b = _mm512_loadu_ps(bias.add(16 * v));
                let (a, bits) = select_bias_relu_avx512::<BIAS_FIRST>(4, |k| window[k][v], b, act);
                _mm512_storeu_ps(out.add(q * c + 16 * v), a);
                _mm_storeu_si128(index.add(q * c + 16 * v) as *mut __m128i, bits);
            }
        }
    }
}
