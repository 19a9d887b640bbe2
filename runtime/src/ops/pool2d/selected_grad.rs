//! The pooled kernel gradient's sums for one row of the convolution's output at a time,
//! its cotangent `dY` never written, not even a band of it (AVX-512, a 3×3 kernel on one
//! feature: a grayscale network's first layer).
//!
//! `pooled_kernel_grad` rebuilds `dY` band by band and hands each band to the direct
//! kernel gradient, which reads each pixel's cotangent once per kernel row. Here each
//! pixel's cotangent is made in registers from its window's selected values (computed
//! once per window and row) and compared position, and all nine taps are accumulated
//! from it at once. Each tap's sum over a row runs as the direct kernel gradient's does
//! (pixels in order from zero, one fused multiply-add each, then added into the part's
//! sum) with the very values the band would hold, so the result is the same bits.

use super::disjoint::GateAvx512;
use super::{Pool2d, ReluGate, POS};
use crate::kernel::conv_direct::Direct2d;

/// Kernel taps (positions × input features) this path accumulates at once.
const TAPS: usize = 3 * 3;

impl Pool2d {
    /// Whether [`Pool2d::selected_grad_rows`] computes `conv`'s kernel gradient from this
    /// (disjoint) pooling's cotangent: AVX-512, a 3×3 kernel on one input feature (its
    /// `TAPS`), whole vectors of output features, and every kernel position of every
    /// output pixel inside the input (no padding), so that no tap is skipped.
    pub(super) fn selected_grad_fits(&self, conv: &Direct2d, x: &[f32]) -> bool {
        let g = conv;
        crate::kernel::simd::level() >= crate::kernel::simd::Level::Avx512
            && g.supported()
            && self.disjoint()
            && g.kernel == [3, 3]
            && g.cin == 1
            && g.cout == self.c
            && self.c.is_multiple_of(16)
            && g.batch == self.n
            && g.output == [self.h, self.w]
            && g.taps_inside()
            && x.len() >= g.batch * g.input[0] * g.input[1] * g.cin
    }

    /// Adds the kernel gradient's share of the convolution's output rows `rows` (counted
    /// over the batch, `b · h + i`), in order, into `acc` (`[kh, kw, cin, c]`), from the
    /// pooling's cotangent `src`, its `index` and the ReLU's `gate`. The caller checked
    /// [`Pool2d::selected_grad_fits`].
    pub(super) fn selected_grad_rows(
        &self,
        conv: &Direct2d,
        x: &[f32],
        (src, index): (&[f32], &[u8]),
        gate: &ReluGate<f32>,
        rows: std::ops::Range<usize>,
        acc: &mut [f32],
    ) {
        let (p, g) = (self, conv);
        assert!(self.selected_grad_fits(g, x));
        assert!(rows.end <= p.n * p.h && acc.len() >= TAPS * p.c);
        assert!(src.len() >= p.n * p.oh * p.ow * p.c && index.len() >= src.len());
        let [ih, iw] = g.input;
        // Each tap's input, from a pixel's first input element.
        let mut taps = [0isize; TAPS];
        for (t, off) in taps.iter_mut().enumerate() {
            let (i, j, ci) = (t / g.cin / g.kernel[1], t / g.cin % g.kernel[1], t % g.cin);
            *off = (((i * g.dilation[0]) * iw + j * g.dilation[1]) * g.cin + ci) as isize;
        }
        for r in rows {
            let (b, i) = (r / p.h, r % p.h);
            let first = ((b * ih + i * g.strides[0]) * iw * g.cin) as isize;
            let (o, di) = ((i + p.ph) / p.sh, (i + p.ph) % p.sh);
            // The pooled row whose windows cover this row, and the row's place in them.
            let covered = (di < p.kh && o < p.oh).then(|| {
                let (i0, _) = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
                let at = (b * p.oh + o) * p.ow * p.c;
                (i - i0, at)
            });
            let row = Row {
                first,
                step: (g.strides[1] * g.cin) as isize,
                taps: &taps,
                covered,
            };
            let mut c0 = 0;
            while c0 < p.c {
                // SAFETY: AVX-512F (`fits`); every tap of every pixel of the row lies inside
                // `x` (`fits`: no padding, the kernel inside the input), the row's windows
                // inside `src` and `index` (asserted), and `c0 + 16·V <= c`.
                unsafe {
                    if c0 + 32 <= p.c {
                        self.row_avx512::<2>(x, (src, index), gate, &row, c0, acc);
                        c0 += 32;
                    } else {
                        self.row_avx512::<1>(x, (src, index), gate, &row, c0, acc);
                        c0 += 16;
                    }
                }
            }
        }
    }

    /// One output row's share for features `c0..c0 + 16·V`, added into `acc`.
    ///
    /// # Safety
    /// As at the call in [`Pool2d::selected_grad_rows`].
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn row_avx512<const V: usize>(
        &self,
        x: &[f32],
        (src, index): (&[f32], &[u8]),
        gate: &ReluGate<f32>,
        row: &Row<'_>,
        c0: usize,
        acc: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        let p = self;
        let x = x.as_ptr();
        let zero = [_mm512_setzero_ps(); V];
        let mut sums = [[_mm512_setzero_ps(); V]; TAPS];
        // Adds pixel `j`'s products (its taps' inputs times its cotangent) to the sums.
        macro_rules! pixel {
            ($j:expr, $ct:expr) => {{
                let at = row.first + $j as isize * row.step;
                for (sum, &off) in sums.iter_mut().zip(row.taps) {
                    // SAFETY: the caller's (every tap inside `x`).
                    let xv = _mm512_set1_ps(unsafe { *x.offset(at + off) });
                    for v in 0..V {
                        sum[v] = _mm512_fmadd_ps(xv, $ct[v], sum[v]);
                    }
                }
            }};
        }
        let mut j = 0;
        if let Some((rowpos, at)) = row.covered {
            let gate = GateAvx512::new(gate);
            let positions = _mm512_set1_epi32(i32::from(POS));
            for q in 0..p.ow {
                let (j0, j1) = Pool2d::span(q, p.sw, p.kw, p.pw, p.w);
                if j0 == j1 {
                    continue;
                }
                while j < j0 {
                    pixel!(j, zero);
                    j += 1;
                }
                // The window's selected values and positions, as the writer computes them.
                let so = at + q * p.c + c0;
                let mut values = zero;
                let mut bytes = [_mm512_setzero_si512(); V];
                for v in 0..V {
                    // SAFETY: sixteen features of the window inside `src` and `index`.
                    let (s, b) = unsafe {
                        (
                            _mm512_loadu_ps(src.as_ptr().add(so + 16 * v)),
                            _mm_loadu_si128(index.as_ptr().add(so + 16 * v) as *const __m128i),
                        )
                    };
                    let b = _mm512_cvtepu8_epi32(b);
                    values[v] = GateAvx512::value(Some(&gate), s, b);
                    bytes[v] = _mm512_and_si512(b, positions);
                }
                for jj in j0..j1 {
                    let k = _mm512_set1_epi32((rowpos * (j1 - j0) + (jj - j0)) as i32);
                    let mut ct = zero;
                    for v in 0..V {
                        // A lane not selected is `+0`, as the writer stores it.
                        let selected = _mm512_cmpeq_epi32_mask(bytes[v], k);
                        ct[v] = _mm512_maskz_mov_ps(selected, values[v]);
                    }
                    pixel!(jj, ct);
                }
                j = j1;
            }
        }
        while j < p.w {
            pixel!(j, zero);
            j += 1;
        }
        for (t, sum) in sums.iter().enumerate() {
            for (v, &s) in sum.iter().enumerate() {
                let d = &mut acc[t * p.c + c0 + 16 * v..][..16];
                // SAFETY: sixteen elements of `d`.
                unsafe {
                    _mm512_storeu_ps(
                        d.as_mut_ptr(),
                        _mm512_add_ps(_mm512_loadu_ps(d.as_ptr()), s),
                    )
                };
            }
        }
    }
}

/// One output row of the convolution: its first pixel's first input element, the step
/// between pixels, the taps' offsets, and, if a row of windows covers it, its position in
/// them and the offset of their cotangents.
struct Row<'a> {
    first: isize,
    step: isize,
    taps: &'a [isize; TAPS],
    covered: Option<(usize, usize)>,
}
