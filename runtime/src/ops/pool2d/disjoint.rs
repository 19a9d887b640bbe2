//! The indexed max-pooling gradient for windows that never overlap (stride at least the
//! window, as `MaxPooling2D`'s default 2×2 stride 2): every input element belongs to at
//! most one window, so it is written exactly once, as the selected element's gradient or
//! zero, straight from the pooling's cotangent and the index its forward recorded. One
//! pass that only writes the operand-sized result, in input order, with whole vectors of
//! channels (instead of zeroing a band and adding into it element by element).
//!
//! Bit-identical to `Pool2d::scatter_with`'s: the selected element gets `0 + s` (gated as
//! there, `gate.apply(0 + s, bits)`), every other element `+0`.

use super::{Pool2d, ReluGate, Simd, POS};
use crate::kernel::crew;

impl Pool2d {
    /// Whether no two windows share an input element.
    pub(in crate::ops) fn disjoint(&self) -> bool {
        self.sh >= self.kh && self.sw >= self.kw
    }

    /// `scatter_indexed` (no `gate`: index bytes are whole positions) or
    /// `scatter_indexed_bias_relu` (`gate`: positions in the low bits) for `disjoint`
    /// windows, split over input rows.
    pub(super) fn scatter_indexed_disjoint<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        src: &[T],
        index: &[u8],
        out: &mut [T],
        gate: Option<&ReluGate<T>>,
    ) {
        debug_assert!(self.disjoint());
        let p = *self;
        let row = p.w * p.c;
        if row == 0 || p.h == 0 || p.n == 0 {
            return;
        }
        let simd = crate::kernel::simd::level();
        let rows = |start: usize, chunk: &mut [T]| {
            p.scatter_disjoint_rows(start / row, chunk, (src, index), gate, simd)
        };
        let tasks = self.tasks(out.len(), p.n * p.h);
        if tasks == 1 {
            rows(0, out);
        } else {
            crew::run_chunks(out, tasks, row, &rows);
        }
    }

    /// `scatter_indexed_disjoint`'s rows from row `first` (counted over the whole batch,
    /// `b · h + i`) on, as many as `out` holds: each element written once, from
    /// `(src, index)` and the `gate`. The one writer of those rows, whole or a band at a
    /// time (the pooled kernel gradient rebuilds the cotangent band by band).
    pub(super) fn scatter_disjoint_rows<T: num_traits::Float + 'static>(
        &self,
        first: usize,
        out: &mut [T],
        (src, index): (&[T], &[u8]),
        gate: Option<&ReluGate<T>>,
        simd: Simd,
    ) {
        let p = self;
        let row = p.w * p.c;
        if row == 0 {
            return;
        }
        let mask = if gate.is_some() { POS } else { u8::MAX };
        let rows = out.len() / row;
        let mut targets = [(0usize, 0u8); TARGETS];
        let mut r = 0;
        while r < rows {
            let (b, i) = ((first + r) / p.h, (first + r) % p.h);
            let (o, di) = ((i + p.ph) / p.sh, (i + p.ph) % p.sh);
            if di >= p.kh || o >= p.oh {
                out[r * row..(r + 1) * row].fill(T::zero());
                r += 1;
                continue;
            }
            let (i0, i1) = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
            debug_assert!(i0 <= i && i < i1);
            // The band's rows of this row of windows (one image's), written together: a
            // window's selected values are computed once for all its elements.
            let g = (i1 - i).min(rows - r);
            let group = &mut out[r * row..(r + g) * row];
            let zero_columns = |group: &mut [T], cols: std::ops::Range<usize>| {
                for line in group.chunks_exact_mut(row) {
                    line[cols.start * p.c..cols.end * p.c].fill(T::zero());
                }
            };
            // Window by window (their columns in order, none shared), the columns between
            // and after them zero: no division per pixel.
            let mut next = 0;
            for q in 0..p.ow {
                let (j0, j1) = Pool2d::span(q, p.sw, p.kw, p.pw, p.w);
                if j0 == j1 {
                    continue;
                }
                debug_assert!(next <= j0);
                zero_columns(group, next..j0);
                let so = ((b * p.oh + o) * p.ow + q) * p.c;
                let (s, ix) = (&src[so..so + p.c], &index[so..so + p.c]);
                // Each element's place in `group` and its position in its clipped window,
                // row-major (as recorded), at most `TARGETS` at a time.
                let mut n = 0;
                for (line, ii) in (i..i + g).enumerate() {
                    for j in j0..j1 {
                        let k = ((ii - i0) * (j1 - j0) + (j - j0)) as u8;
                        targets[n] = (line * row + j * p.c, k);
                        n += 1;
                        if n == TARGETS {
                            write_selected(simd, group, &targets, (s, ix), mask, gate);
                            n = 0;
                        }
                    }
                }
                if n > 0 {
                    write_selected(simd, group, &targets[..n], (s, ix), mask, gate);
                }
                next = j1;
            }
            zero_columns(group, next..p.w);
            r += g;
        }
    }
}

/// Elements of one window written per call of [`Selected`]'s writers (a 2×2 window's
/// four, an 8×8 one's in one call).
const TARGETS: usize = 64;

/// Writes one window's elements `targets` (their offsets in `out`, their positions) from
/// the window's cotangents `s` and index bytes `ix`.
#[inline(always)]
pub(super) fn write_selected<T: num_traits::Float + 'static>(
    simd: Simd,
    out: &mut [T],
    targets: &[(usize, u8)],
    (s, ix): (&[T], &[u8]),
    mask: u8,
    gate: Option<&ReluGate<T>>,
) {
    let sel = Selected {
        s,
        ix,
        targets,
        mask,
        gate,
    };
    // SAFETY: clamped to what the CPU supports, whatever the caller passed.
    unsafe { window(crate::kernel::simd::at_most(simd), out, sel) };
}

/// The value of each channel's selected element of one window, `gate.apply(0 + s, bits)`
/// from the window's cotangents and index bytes (what `scatter_disjoint_rows` writes
/// there), into `out`: the bias gradient's terms.
pub(super) fn selected_values<T: num_traits::Float + 'static>(
    simd: Simd,
    out: &mut [T],
    (s, ix): (&[T], &[u8]),
    gate: &ReluGate<T>,
) {
    // One target, every position selected: no bit of the index byte compared.
    write_selected(simd, out, &[(0, 0)], (s, ix), 0, Some(gate));
}

/// `acc[c] += gate.apply(0 + s[c], ix[c])` for every channel: one window's terms of the
/// bias gradient added in, as [`selected_values`] computes them (`v` is room for them).
pub(super) fn add_selected(
    simd: Simd,
    acc: &mut [f32],
    v: &mut [f32],
    (s, ix): (&[f32], &[u8]),
    gate: &ReluGate<f32>,
) {
    let c = acc.len();
    assert!(s.len() == c && ix.len() == c && v.len() == c);
    let mut from = 0;
    #[cfg(target_arch = "x86_64")]
    // The CPU is asked too: this safe function must not run AVX-512 on a caller's word.
    if simd == Simd::Avx512 && std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (detected); the lengths are asserted above.
        from = unsafe { add_selected_avx512(acc, (s, ix), gate) };
    }
    if from < c {
        selected_values(simd, &mut v[from..], (&s[from..], &ix[from..]), gate);
        for (a, &v) in acc[from..].iter_mut().zip(&v[from..]) {
            *a += v;
        }
    }
}

/// [`add_selected`]'s whole vectors of sixteen channels, the sums in registers; returns
/// how many channels it added.
///
/// # Safety
/// The CPU has AVX-512F; `s` and `ix` hold `acc.len()` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn add_selected_avx512(
    acc: &mut [f32],
    (s, ix): (&[f32], &[u8]),
    gate: &ReluGate<f32>,
) -> usize {
    use std::arch::x86_64::*;
    let gate = GateAvx512::new(gate);
    let wide = acc.len() / 16 * 16;
    for c0 in (0..wide).step_by(16) {
        // SAFETY: sixteen elements of each from `c0` (the caller's lengths).
        unsafe {
            let b = _mm512_cvtepu8_epi32(_mm_loadu_si128(ix.as_ptr().add(c0) as *const __m128i));
            let v = GateAvx512::value(Some(&gate), _mm512_loadu_ps(s.as_ptr().add(c0)), b);
            let a = acc.as_mut_ptr().add(c0);
            _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), v));
        }
    }
    wide
}

/// What one window's elements are written from: its cotangents `s` and index bytes `ix`
/// (a channel each), the elements' offsets in the output and positions in the window
/// (`targets`), which bits of an index byte are the position (`mask`), and the ReLU gate
/// if any.
#[derive(Clone, Copy)]
struct Selected<'a, T> {
    s: &'a [T],
    ix: &'a [u8],
    targets: &'a [(usize, u8)],
    mask: u8,
    gate: Option<&'a ReluGate<T>>,
}

impl<T> Selected<'_, T> {
    /// Whether every target's channels lie inside `out` and `ix` holds a byte per channel.
    fn fits(&self, out: &[T]) -> bool {
        let c = self.s.len();
        self.ix.len() == c && self.targets.iter().all(|&(off, _)| off + c <= out.len())
    }
}

/// One window's elements, all channels: for each target `(off, k)` and channel `c`,
/// `out[off + c] = (ix[c] & mask) == k ? gated(0 + s[c]) : +0`.
///
/// # Safety
/// `simd` must be supported by the CPU.
#[inline(always)]
unsafe fn window<T: num_traits::Float + 'static>(simd: Simd, out: &mut [T], sel: Selected<'_, T>) {
    assert!(sel.fits(out));
    #[cfg(target_arch = "x86_64")]
    if simd.avx2() && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        // SAFETY: T is f32 (checked above): the same memory, the same type; the CPU has
        // AVX2, and AVX-512F where `simd` says so (the caller's promise); the targets fit
        // (asserted).
        unsafe {
            let o = std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len());
            let sel = *(&sel as *const Selected<'_, T> as *const Selected<'_, f32>);
            return if simd == Simd::Avx512 {
                window_avx512(o, sel)
            } else {
                window_avx2(o, sel, 0)
            };
        }
    }
    let _ = simd;
    window_scalar(out, sel, 0);
}

/// [`window`] from channel `from` on, one channel at a time.
#[inline(always)]
fn window_scalar<T: num_traits::Float>(out: &mut [T], sel: Selected<'_, T>, from: usize) {
    for c in from..sel.s.len() {
        let b = sel.ix[c];
        let v = T::zero() + sel.s[c];
        let v = sel.gate.map_or(v, |g| g.apply(v, b));
        for &(off, k) in sel.targets {
            out[off + c] = if b & sel.mask == k { v } else { T::zero() };
        }
    }
}

/// [`window_avx2`] sixteen channels a vector, the comparisons in mask registers (each
/// selection one masked move); the channels past the last sixteen as [`window_avx2`].
///
/// # Safety
/// The CPU has AVX-512F; `sel.fits(out)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn window_avx512(out: &mut [f32], sel: Selected<'_, f32>) {
    use std::arch::x86_64::*;
    let Selected {
        s,
        ix,
        targets,
        mask,
        gate,
    } = sel;
    let c = s.len();
    let vmask = _mm512_set1_epi32(i32::from(mask));
    let gate = gate.map(|g| GateAvx512::new(g));
    let mut c0 = 0;
    while c0 + 16 <= c {
        // SAFETY: sixteen in-bounds elements of `s` and bytes of `ix` from `c0`, and of
        // `out` from each target's offset plus `c0` (the caller's `fits`).
        unsafe {
            let b = _mm512_cvtepu8_epi32(_mm_loadu_si128(ix.as_ptr().add(c0) as *const __m128i));
            let bm = _mm512_and_si512(b, vmask);
            let v = GateAvx512::value(gate.as_ref(), _mm512_loadu_ps(s.as_ptr().add(c0)), b);
            for &(off, k) in targets {
                let sel = _mm512_cmpeq_epi32_mask(bm, _mm512_set1_epi32(i32::from(k)));
                // A lane not selected is `+0`.
                _mm512_storeu_ps(out.as_mut_ptr().add(off + c0), _mm512_maskz_mov_ps(sel, v));
            }
        }
        c0 += 16;
    }
    if c0 < c {
        // SAFETY: the CPU has AVX2 (this function's features); the caller's `fits`.
        unsafe { window_avx2(out, sel, c0) };
    }
}

/// A ReLU gate's constants in AVX-512 vectors, for the selected values of sixteen
/// channels: one definition for the writer above and the kernel gradient that reads the
/// selections without writing them (`selected_grad`).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct GateAvx512 {
    one: std::arch::x86_64::__m512,
    half: std::arch::x86_64::__m512,
    zero: std::arch::x86_64::__m512,
    ct_first: bool,
}

#[cfg(target_arch = "x86_64")]
impl GateAvx512 {
    #[target_feature(enable = "avx512f")]
    pub(super) fn new(g: &ReluGate<f32>) -> Self {
        use std::arch::x86_64::*;
        GateAvx512 {
            one: _mm512_set1_ps(g.one),
            half: _mm512_set1_ps(g.half),
            zero: _mm512_set1_ps(g.zero),
            ct_first: g.ct_first,
        }
    }

    /// `0 + s`, times `a > gt ? one : a == eq ? half : zero` from the index bytes' two
    /// top bits `b` (widened to 32-bit lanes) where there is a gate: what the writer
    /// stores for a selected element, lane by lane as [`ReluGate::apply`].
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) fn value(
        gate: Option<&Self>,
        s: std::arch::x86_64::__m512,
        b: std::arch::x86_64::__m512i,
    ) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        let v = _mm512_add_ps(_mm512_setzero_ps(), s);
        let Some(g) = gate else { return v };
        let is_gt = _mm512_test_epi32_mask(b, _mm512_set1_epi32(i32::from(super::GT)));
        let is_eq = _mm512_test_epi32_mask(b, _mm512_set1_epi32(i32::from(super::EQ)));
        let w = _mm512_mask_blend_ps(is_gt, _mm512_mask_blend_ps(is_eq, g.zero, g.half), g.one);
        if g.ct_first {
            _mm512_mul_ps(v, w)
        } else {
            _mm512_mul_ps(w, v)
        }
    }
}

/// [`window_scalar`] for `f32` from channel `from` on, eight channels a vector: the
/// position compared as 32-bit lanes, the gate `a > gt ? one : a == eq ? half : zero` as
/// two blends, the result masked (a cleared lane is `+0`); the channels past the last
/// eight as [`window_scalar`].
///
/// # Safety
/// The CPU has AVX2 and FMA; `sel.fits(out)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn window_avx2(out: &mut [f32], sel: Selected<'_, f32>, from: usize) {
    use std::arch::x86_64::*;
    let Selected {
        s,
        ix,
        targets,
        mask,
        gate,
    } = sel;
    let c = s.len();
    let vmask = _mm256_set1_epi32(i32::from(mask));
    let (gt, eq) = (_mm256_set1_epi32(0x80), _mm256_set1_epi32(0x40));
    let zero = _mm256_setzero_ps();
    let consts = gate.map(|g| {
        (
            _mm256_set1_ps(g.one),
            _mm256_set1_ps(g.half),
            _mm256_set1_ps(g.zero),
            g.ct_first,
        )
    });
    let mut c0 = from;
    while c0 + 8 <= c {
        // SAFETY: eight in-bounds elements of `s` and bytes of `ix` from `c0`, and of
        // `out` from each target's offset plus `c0` (the caller's `fits`).
        unsafe {
            let b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(ix.as_ptr().add(c0) as *const __m128i));
            let bm = _mm256_and_si256(b, vmask);
            let v = _mm256_add_ps(zero, _mm256_loadu_ps(s.as_ptr().add(c0)));
            let v = match consts {
                None => v,
                Some((one, half, gzero, ct_first)) => {
                    let is_gt =
                        _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(b, gt), gt));
                    let is_eq =
                        _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(b, eq), eq));
                    let w = _mm256_blendv_ps(_mm256_blendv_ps(gzero, half, is_eq), one, is_gt);
                    if ct_first {
                        _mm256_mul_ps(v, w)
                    } else {
                        _mm256_mul_ps(w, v)
                    }
                }
            };
            for &(off, k) in targets {
                let sel = _mm256_cmpeq_epi32(bm, _mm256_set1_epi32(i32::from(k)));
                let r = _mm256_and_ps(_mm256_castsi256_ps(sel), v);
                _mm256_storeu_ps(out.as_mut_ptr().add(off + c0), r);
            }
        }
        c0 += 8;
    }
    window_scalar(out, sel, c0);
}
