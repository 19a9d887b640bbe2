//! Fast paths of `reduce_window` and `select_and_scatter_add` for 2-D pooling over NHWC
//! (what `MaxPooling2D`/`AveragePooling2D` produce): window `[1, kh, kw, 1]`, strides
//! `[1, sh, sw, 1]`, padding only on H and W. The channel axis is innermost and contiguous,
//! so each window element is a run of `C` values combined with a loop over channels that
//! the compiler vectorises; window positions are clipped per row and column once, never
//! per element. Results are bit-identical to the generic walk in `reduce_window.rs`: the
//! same elements are combined in the same (row-major window) order, and the gradient goes
//! to the same element of each window.

use crate::ir::Window;
use crate::kernel::crew;
// The instructions the pooling kernels run on, picked at run time (one binary, wide
// vectors where they exist).
use crate::kernel::simd::Level as Simd;

mod conv_band;
#[cfg(target_arch = "x86_64")]
mod conv_pool_direct;
mod conv_tiles;
mod disjoint;
#[cfg(all(test, target_arch = "x86_64"))]
mod fits_tests;
mod pooled_grad;
#[cfg(target_arch = "x86_64")]
mod selected_grad;
mod tile_grad;

/// Below this many touched elements a pooling runs on the calling thread.
const PARALLEL_MIN: usize = 1 << 15;

/// An NHWC 2-D pooling's geometry.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pool2d {
    n: usize,
    h: usize,
    w: usize,
    c: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    /// Low padding of H and W (the high padding only shows in `oh`, `ow`).
    ph: usize,
    pw: usize,
}

impl Pool2d {
    /// The geometry, when operand `xd` pooled to `od` by `w` is a 2-D NHWC pooling.
    pub(super) fn of(xd: &[usize], od: &[usize], w: &Window) -> Option<Pool2d> {
        if xd.len() != 4 || od.len() != 4 {
            return None;
        }
        let unit = |d: usize| w.dims[d] == 1 && w.strides[d] == 1 && w.padding[d] == (0, 0);
        if !unit(0) || !unit(3) || od[0] != xd[0] || od[3] != xd[3] {
            return None;
        }
        Some(Pool2d {
            n: xd[0],
            h: xd[1],
            w: xd[2],
            c: xd[3],
            oh: od[1],
            ow: od[2],
            kh: w.dims[1],
            kw: w.dims[2],
            sh: w.strides[1],
            sw: w.strides[2],
            ph: w.padding[1].0,
            pw: w.padding[2].0,
        })
    }

    /// The in-range input rows (or columns) of window `o`: `[lo, hi)`.
    fn span(o: usize, s: usize, k: usize, pad: usize, len: usize) -> (usize, usize) {
        let start = o * s;
        let lo = start.saturating_sub(pad).min(len);
        let hi = (start + k).saturating_sub(pad).min(len);
        (lo, hi)
    }

    fn tasks(&self, work: usize, units: usize) -> usize {
        let width = crew::width();
        if width < 2 || work < PARALLEL_MIN {
            1
        } else {
            (width * 4).min(units).max(1)
        }
    }

    /// `out = init`, then `*acc = f(*acc, v)` over each window's in-range elements in
    /// row-major window order (as the generic kernel), split over output rows.
    pub(super) fn reduce<T: Copy + Send + Sync>(
        &self,
        x: &[T],
        out: &mut [T],
        init: T,
        f: impl Fn(T, T) -> T + Sync,
    ) {
        let p = *self;
        let (c, row) = (p.c, p.ow * p.c);
        if row == 0 || out.is_empty() {
            out.fill(init);
            return;
        }
        let rows = |start: usize, chunk: &mut [T]| {
            for (r, orow) in (start / row..).zip(chunk.chunks_exact_mut(row)) {
                let (b, o) = (r / p.oh, r % p.oh);
                let (i0, i1) = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
                let img = &x[b * p.h * p.w * c..(b + 1) * p.h * p.w * c];
                for (q, acc) in orow.chunks_exact_mut(c).enumerate() {
                    let (j0, j1) = Pool2d::span(q, p.sw, p.kw, p.pw, p.w);
                    acc.fill(init);
                    for i in i0..i1 {
                        let xrow = &img[(i * p.w + j0) * c..(i * p.w + j1) * c];
                        for v in xrow.chunks_exact(c) {
                            for (a, &v) in acc.iter_mut().zip(v) {
                                *a = f(*a, v);
                            }
                        }
                    }
                }
            }
        };
        let tasks = self.tasks(out.len() * p.kh * p.kw, p.n * p.oh);
        if tasks == 1 {
            rows(0, out);
        } else {
            crew::run_chunks(out, tasks, row, &rows);
        }
    }

    /// Whether window positions fit the `u8` index [`Pool2d::reduce_index`] records.
    pub(super) fn indexable(&self) -> bool {
        self.kh * self.kw <= 256
    }

    /// `reduce` of max or min pooling that also records, per output element, which
    /// element of its (clipped, row-major) window `select_and_scatter_add` would select
    /// (the first, replaced only by a strictly `better` one), for
    /// [`Pool2d::scatter_indexed`]. `out` is bit-identical to `reduce`'s.
    pub(super) fn reduce_index<T: Copy + Send + Sync>(
        &self,
        x: &[T],
        out: &mut [T],
        index: &mut [u8],
        init: T,
        f: impl Fn(T, T) -> T + Sync,
        better: impl Fn(T, T) -> bool + Sync,
    ) {
        debug_assert!(self.indexable() && index.len() == out.len());
        self.walk_indexed(x, out, index, init, |img, offs, acc, ix| {
            let c = acc.len();
            let mut c0 = 0;
            while c0 + LANES <= c {
                let (a, ix) = (&mut acc[c0..c0 + LANES], &mut ix[c0..c0 + LANES]);
                record::<T, LANES>(img, offs, c0, init, &f, &better, a, ix);
                c0 += LANES;
            }
            while c0 < c {
                let (a, ix) = (&mut acc[c0..c0 + 1], &mut ix[c0..c0 + 1]);
                record::<T, 1>(img, offs, c0, init, &f, &better, a, ix);
                c0 += 1;
            }
        });
    }

    /// `reduce_index` of max pooling (min with `min`), as `native_recording` runs it: for
    /// `f32` on AVX2, eight channels a vector (the generic loop stayed scalar: 2.5x the
    /// time of the fused bias and ReLU pooling's vector loop on the `cnn` workload's
    /// pooling); bit-identical to `reduce_index` with `max_of`/`above` (`min_of`/`below`).
    pub(super) fn reduce_index_minmax<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        x: &[T],
        out: &mut [T],
        index: &mut [u8],
        min: bool,
    ) {
        use super::reduce_window::{above, below, max_of, min_of};
        #[cfg(target_arch = "x86_64")]
        if crate::kernel::simd::level().avx2()
            && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
        {
            // SAFETY: T is f32 (checked above): the same memory, the same type.
            let (x, out) = unsafe {
                (
                    std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                    std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len()),
                )
            };
            let init = if min {
                f32::INFINITY
            } else {
                f32::NEG_INFINITY
            };
            self.walk_indexed(x, out, index, init, |img, offs, acc, ix| {
                // SAFETY: the CPU has AVX2 (detected above).
                unsafe {
                    if min {
                        window_minmax_avx2::<true>(img, offs, acc, ix)
                    } else {
                        window_minmax_avx2::<false>(img, offs, acc, ix)
                    }
                }
            });
            return;
        }
        if min {
            self.reduce_index(x, out, index, T::infinity(), min_of, below)
        } else {
            self.reduce_index(x, out, index, T::neg_infinity(), max_of, above)
        }
    }

    /// Whether a pooling fits [`Pool2d::reduce_index_bias_relu`]'s index: window
    /// positions in the low six bits, the ReLU gradient's two comparisons in the top two.
    pub(super) fn bias_relu_indexable(&self) -> bool {
        self.kh * self.kw <= usize::from(POS) + 1
    }

    /// Max pooling of `relu(x + bias)` (per channel, computed per element exactly as the
    /// unfused add and max compute it: `act`) without that tensor in memory, recording
    /// per output element the selected window position (as `reduce_index` for the
    /// activation) and, in its top bits, the two comparisons of the activation's
    /// pre-ReLU value that the ReLU's gradient makes, for
    /// [`Pool2d::scatter_indexed_bias_relu`].
    pub(super) fn reduce_index_bias_relu<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        x: &[T],
        bias: &[T],
        out: &mut [T],
        index: &mut [u8],
        act: &BiasRelu<T>,
    ) {
        debug_assert!(self.bias_relu_indexable() && index.len() == out.len());
        debug_assert!(bias.len() == self.c);
        let simd = crate::kernel::simd::level();
        self.walk_indexed(x, out, index, T::neg_infinity(), |img, offs, a, ix| {
            // SAFETY: `simd` is what the CPU supports.
            unsafe { bias_relu_window(simd, (img, offs, bias, act), a, ix) }
        });
    }

    /// The walk of the recording poolings: output rows split over the crew; per window
    /// its elements' offsets, then `block(image, offsets, acc, index)`, `acc` and `index`
    /// the window's outputs (all channels). Empty windows (all padding) are `init` and
    /// record nothing.
    fn walk_indexed<T: Copy + Send + Sync>(
        &self,
        x: &[T],
        out: &mut [T],
        index: &mut [u8],
        init: T,
        block: impl Fn(&[T], &[usize], &mut [T], &mut [u8]) + Sync,
    ) {
        let p = *self;
        let (c, row) = (p.c, p.ow * p.c);
        if row == 0 || out.is_empty() {
            out.fill(init);
            return;
        }
        let rows = |r0: usize, chunk: &mut [T], ichunk: &mut [u8]| {
            // Offsets in the image of a window's elements, row-major (initialised once:
            // zeroing it per window cost more than a small window's work).
            let mut offs = [0usize; 256];
            let orows = chunk
                .chunks_exact_mut(row)
                .zip(ichunk.chunks_exact_mut(row));
            for (r, (orow, irow)) in (r0..).zip(orows) {
                let (b, o) = (r / p.oh, r % p.oh);
                let span = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
                let img = &x[b * p.h * p.w * c..(b + 1) * p.h * p.w * c];
                p.row_indexed(img, span, (orow, irow), &mut offs, init, &block);
            }
        };
        let tasks = self.tasks(out.len() * p.kh * p.kw, p.n * p.oh);
        let units = p.n * p.oh;
        if tasks == 1 {
            rows(0, out, index);
            return;
        }
        let (ob, ib) = (out.as_mut_ptr() as usize, index.as_mut_ptr() as usize);
        crew::run(tasks, &|t| {
            let us = crew::part(units, tasks, t);
            if us.is_empty() {
                return;
            }
            let (lo, len) = (us.start * row, us.len() * row);
            // SAFETY: tasks take disjoint runs of output rows of `out` and `index`, which
            // stay mutably borrowed (unused by anyone else) until `run` returns.
            let (o, i) = unsafe {
                (
                    std::slice::from_raw_parts_mut((ob as *mut T).add(lo), len),
                    std::slice::from_raw_parts_mut((ib as *mut u8).add(lo), len),
                )
            };
            rows(us.start, o, i);
        });
    }

    /// One output row of the recording poolings: the windows over rows `i0..i1` of `img`
    /// (the rows the row's windows cover, clipped), each `block`ed as `walk_indexed`
    /// says. `offs` is room for a window's offsets.
    fn row_indexed<T: Copy>(
        &self,
        img: &[T],
        (i0, i1): (usize, usize),
        (orow, irow): (&mut [T], &mut [u8]),
        offs: &mut [usize; 256],
        init: T,
        block: &impl Fn(&[T], &[usize], &mut [T], &mut [u8]),
    ) {
        let c = self.c;
        let cells = orow.chunks_exact_mut(c).zip(irow.chunks_exact_mut(c));
        // The first column and width of the window whose offsets `offs` holds: a window
        // as wide further right reads the image from its own first column with them.
        let mut filled: Option<(usize, usize)> = None;
        for (q, (acc, ix)) in cells.enumerate() {
            let (j0, j1) = Pool2d::span(q, self.sw, self.kw, self.pw, self.w);
            if i0 == i1 || j0 == j1 {
                acc.fill(init);
                continue;
            }
            let shift = match filled {
                Some((f0, width)) if width == j1 - j0 => (j0 - f0) * c,
                _ => {
                    fill_offsets(offs, (i0, i1, j0, j1), self.w, c, 0);
                    filled = Some((j0, j1 - j0));
                    0
                }
            };
            let cells = (i1 - i0) * (j1 - j0);
            block(&img[shift..], &offs[..cells], acc, ix);
        }
    }

    /// `select_and_scatter_add`: `out` (the operand's shape) is zero but, per window and
    /// channel, the first in-range element that no later one is `better` than gets the
    /// window's `src` value added.
    pub(super) fn scatter<T: num_traits::Float + Send + Sync>(
        &self,
        src: &[T],
        x: &[T],
        out: &mut [T],
        better: impl Fn(T, T) -> bool + Sync,
    ) {
        let img = self.h * self.w * self.c;
        self.scatter_with(src, out, None, |b, win, c0, cb, _, bk| {
            select_block(self, &x[b * img..(b + 1) * img], win, c0, cb, &better, bk);
        });
    }

    /// `select_and_scatter_add` from the window positions `reduce_index` recorded for the
    /// same operand: reads only `src` and `index`, never the operand.
    pub(super) fn scatter_indexed<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        src: &[T],
        index: &[u8],
        out: &mut [T],
    ) {
        if self.disjoint() {
            return self.scatter_indexed_disjoint(src, index, out, None);
        }
        self.scatter_with(src, out, None, |_, _, c0, cb, o, bk| {
            for (d, &k) in bk[..cb].iter_mut().zip(&index[o + c0..o + c0 + cb]) {
                *d = k as u32;
            }
        });
    }

    /// The gradient of [`Pool2d::reduce_index_bias_relu`]'s pooling with respect to its
    /// pre-bias operand `x`, from its index: the pooling gradient (`scatter_indexed`'s
    /// sums), times the ReLU's gradient at each selected element (`gate`, from the
    /// comparisons the index recorded); elements no window selected are zero, as the
    /// unfused product of a zero with a gate (finite and not negative: see `ReluGate`).
    pub(super) fn scatter_indexed_bias_relu<T: num_traits::Float + Send + Sync + 'static>(
        &self,
        src: &[T],
        index: &[u8],
        out: &mut [T],
        gate: &ReluGate<T>,
    ) {
        if self.disjoint() {
            return self.scatter_indexed_disjoint(src, index, out, Some(gate));
        }
        self.scatter_with(src, out, Some(gate), |_, _, c0, cb, o, bk| {
            for (d, &k) in bk[..cb].iter_mut().zip(&index[o + c0..o + c0 + cb]) {
                *d = k as u32;
            }
        });
    }

    /// The gradient's walk: split over images, and over output rows too when the windows
    /// do not overlap in H (each output row then owns a band of input rows, which it
    /// zeroes and scatters into in one pass). `select(image, window, c0, cb, output offset, positions)`
    /// gives, per channel of the block, the selected position in the clipped window.
    ///
    /// With a `gate`, the positions carry the ReLU gradient's comparisons in their top
    /// bits (see `reduce_index_bias_relu`) and each selected element's sum is gated once,
    /// after its last addition: at once where windows do not overlap, else from a mark
    /// per element of the unit's band.
    fn scatter_with<T: num_traits::Float + Send + Sync>(
        &self,
        src: &[T],
        out: &mut [T],
        gate: Option<&ReluGate<T>>,
        select: impl Fn(usize, Win, usize, usize, usize, &mut [u32; BLOCK]) + Sync,
    ) {
        let p = *self;
        if p.oh == 0 || p.ow == 0 || p.c == 0 || p.h == 0 || p.w == 0 {
            out.fill(T::zero());
            return;
        }
        // A unit is `per` output rows of one image; bands of input rows split the same way.
        let per = if p.sh >= p.kh { 1 } else { p.oh };
        let per_img = p.oh / per;
        let units = p.n * per_img;
        let img = p.h * p.w * p.c;
        let wc = p.w * p.c;
        // The input rows unit `u` owns (in its image): its windows' rows, and for the first
        // and last band of an image the rows before and after every window.
        let band = |u: usize| {
            let o = u % per_img;
            let lo = if o == 0 {
                0
            } else {
                Pool2d::span(o * per, p.sh, p.kh, p.ph, p.h).0
            };
            let hi = if o + 1 == per_img {
                p.h
            } else {
                Pool2d::span((o + 1) * per, p.sh, p.kh, p.ph, p.h).0
            };
            (u / per_img * img + lo * wc, u / per_img * img + hi * wc)
        };
        let zero = T::zero();
        let disjoint = p.sh >= p.kh && p.sw >= p.kw;
        let run_units = |us: std::ops::Range<usize>, base: usize, dst: &mut [T]| {
            let mut bk = [0u32; BLOCK];
            let mut offs = [0usize; 256];
            // Kept per thread, so that a steady state allocates nothing.
            let mut marks = MARKS.with(|m| m.take());
            for u in us {
                // Zero the unit's band, then add into it while it is in cache. (Measured
                // on the CNN: 2.6x faster than writing each element of disjoint
                // windows once as a select between the value and zero, which the compiler
                // left scalar and branching.)
                let (lo, hi) = band(u);
                dst[lo - base..hi - base].fill(zero);
                let marking = gate.is_some() && !disjoint;
                if marking {
                    marks.clear();
                    marks.resize(hi - lo, 0u8);
                }
                let (b, o0) = (u / per_img, u % per_img * per);
                for o in o0..o0 + per {
                    let (i0, i1) = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
                    for q in 0..p.ow {
                        let (j0, j1) = Pool2d::span(q, p.sw, p.kw, p.pw, p.w);
                        if i0 == i1 || j0 == j1 {
                            continue;
                        }
                        let so = ((b * p.oh + o) * p.ow + q) * p.c;
                        let win = (i0, i1, j0, j1);
                        let cells = (i1 - i0) * (j1 - j0);
                        let off_of = |k: usize| {
                            let (i, j) = (i0 + k / (j1 - j0), j0 + k % (j1 - j0));
                            b * img + (i * p.w + j) * p.c - base
                        };
                        // Offsets of the window's elements, looked up rather than divided
                        // out per channel (windows of over 256 elements divide).
                        let table = cells <= offs.len();
                        if table {
                            fill_offsets(&mut offs, win, p.w, p.c, b * img);
                            for off in &mut offs[..cells] {
                                *off -= base; // `dst` starts at `base` of the operand
                            }
                        }
                        let off_of = |k: usize| if table { offs[k] } else { off_of(k) };
                        let mut c0 = 0;
                        while c0 < p.c {
                            let cb = BLOCK.min(p.c - c0);
                            select(b, win, c0, cb, so, &mut bk);
                            let s = &src[so + c0..so + c0 + cb];
                            let pairs = bk[..cb].iter().zip(s).enumerate();
                            match gate {
                                None => {
                                    for (ch, (&k, &s)) in pairs {
                                        let at = off_of(k as usize) + c0 + ch;
                                        dst[at] = dst[at] + s;
                                    }
                                }
                                Some(g) if disjoint => {
                                    for (ch, (&k, &s)) in pairs {
                                        let at = off_of((k as u8 & POS) as usize) + c0 + ch;
                                        dst[at] = g.apply(dst[at] + s, k as u8);
                                    }
                                }
                                Some(_) => {
                                    for (ch, (&k, &s)) in pairs {
                                        let at = off_of((k as u8 & POS) as usize) + c0 + ch;
                                        dst[at] = dst[at] + s;
                                        marks[at + base - lo] = (k as u8 & (GT | EQ)) | MARK;
                                    }
                                }
                            }
                            c0 += cb;
                        }
                    }
                }
                if let (Some(g), true) = (gate, marking) {
                    for (d, &m) in dst[lo - base..hi - base].iter_mut().zip(&marks) {
                        if m != 0 {
                            *d = g.apply(*d, m);
                        }
                    }
                }
            }
            MARKS.with(|m| m.replace(marks));
        };
        let tasks = self.tasks(out.len() + src.len() * p.kh * p.kw, units);
        if tasks == 1 {
            run_units(0..units, 0, out);
            return;
        }
        // Each task takes the input bands of its run of units: contiguous and disjoint.
        let total = out.len();
        let base_ptr = out.as_mut_ptr() as usize;
        crew::run(tasks, &|t| {
            let us = crew::part(units, tasks, t);
            if us.is_empty() {
                return;
            }
            let (lo, hi) = (band(us.start).0, band(us.end - 1).1);
            assert!(lo <= hi && hi <= total);
            // SAFETY: the bands of different tasks' units are disjoint ranges of `out`,
            // which stays mutably borrowed (unused by anyone else) until `run` returns.
            let chunk =
                unsafe { std::slice::from_raw_parts_mut((base_ptr as *mut T).add(lo), hi - lo) };
            run_units(us, lo, chunk);
        });
    }
}

/// Bits of a [`Pool2d::reduce_index_bias_relu`] index byte: the window position, and
/// whether the selected element's pre-ReLU value compared greater than the gradient's
/// `gt` and equal to its `eq` (`MARK` flags a selected element in the overlapping
/// gradient's marks).
const POS: u8 = 0x3f;
const GT: u8 = 0x80;
const EQ: u8 = 0x40;
const MARK: u8 = 0x01;

/// What the unfused graph computes from a pooled convolution's output `x` before the
/// pooling: `a = x + bias` (or `bias + x`, per channel), `max(a, floor)` (the floor not
/// NaN); and the two comparisons its gradient makes of `a`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BiasRelu<T> {
    pub bias_first: bool,
    pub floor: T,
    pub gt: T,
    pub eq: T,
}

/// The ReLU's gradient as the unfused graph computes it from the comparisons:
/// `ct · select(a > gt, one, select(a == eq, half, zero))` (or the gate times `ct`).
/// The planner fuses it only when all three are finite and not negative, so that the
/// zero cotangent of an unselected element stays `+0` whatever its gate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReluGate<T> {
    pub one: T,
    pub half: T,
    pub zero: T,
    pub ct_first: bool,
}

impl<T: num_traits::Float> ReluGate<T> {
    #[inline(always)]
    fn apply(&self, ct: T, bits: u8) -> T {
        // `a > gt ? one : a == eq ? half : zero`, looked up rather than branched on (the
        // comparisons follow the data's signs, which no predictor guesses).
        const _: () = assert!(GT == 0x80 && EQ == 0x40);
        let w = [self.zero, self.half, self.one, self.one][usize::from(bits >> 6)];
        if self.ct_first {
            ct * w
        } else {
            w * ct
        }
    }
}

thread_local! {
    /// The overlapping gated gradient's marks (see `scatter_with`).
    static MARKS: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Channels are handled in blocks of this many, their running state on the stack.
const BLOCK: usize = 64;
/// Channels that the innermost loops handle together, in arrays of this fixed length
/// (which the compiler keeps in vector registers).
const LANES: usize = 8;

/// `offs[k] = base + (i·w + j)·c` for the `k`-th element `(i, j)` of window `win` in
/// row-major order (counted, not divided out: a division per element cost more than the
/// rest of a small window's work).
fn fill_offsets(offs: &mut [usize; 256], (i0, i1, j0, j1): Win, w: usize, c: usize, base: usize) {
    let mut k = 0;
    for i in i0..i1 {
        for j in j0..j1 {
            offs[k] = base + (i * w + j) * c;
            k += 1;
        }
    }
}

/// For channels `c0..c0 + L` of the window whose elements are at `offs` in `img`: the
/// pooled value (`f` over the elements in order from `init`) into `acc`, and the position
/// in `offs` of the element selected for the gradient (the first, replaced only by a
/// strictly `better` one) into `index`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn record<T: Copy, const L: usize>(
    img: &[T],
    offs: &[usize],
    c0: usize,
    init: T,
    f: &impl Fn(T, T) -> T,
    better: &impl Fn(T, T) -> bool,
    acc: &mut [T],
    index: &mut [u8],
) {
    let lanes = |off: usize| -> &[T; L] {
        img[off + c0..off + c0 + L]
            .try_into()
            .expect("a slice of L elements")
    };
    let mut a = [init; L];
    let mut bv = *lanes(offs[0]);
    let mut bk = [0u32; L];
    for (k, &off) in offs.iter().enumerate() {
        let v = lanes(off);
        for l in 0..L {
            a[l] = f(a[l], v[l]);
            let b = better(v[l], bv[l]);
            bv[l] = if b { v[l] } else { bv[l] };
            bk[l] = if b { k as u32 } else { bk[l] };
        }
    }
    acc.copy_from_slice(&a);
    for (d, &k) in index.iter_mut().zip(&bk) {
        *d = k as u8;
    }
}

/// One window of the fused bias, ReLU and max pooling, all channels: `w` is the image,
/// the window's offsets in it, the bias and the constants.
type BiasReluWindow<'a, T> = (&'a [T], &'a [usize], &'a [T], &'a BiasRelu<T>);

#[inline(always)]
fn window_bias_relu<T: num_traits::Float, const BIAS_FIRST: bool>(
    (img, offs, bias, act): BiasReluWindow<'_, T>,
    acc: &mut [T],
    ix: &mut [u8],
) {
    let c = acc.len();
    let mut c0 = 0;
    while c0 + LANES <= c {
        let b = bias[c0..c0 + LANES].try_into().expect("LANES");
        let (a, i) = (&mut acc[c0..c0 + LANES], &mut ix[c0..c0 + LANES]);
        record_bias_relu::<T, LANES, BIAS_FIRST>(img, offs, c0, b, act, a, i);
        c0 += LANES;
    }
    while c0 < c {
        let b = bias[c0..c0 + 1].try_into().expect("one");
        let (a, i) = (&mut acc[c0..c0 + 1], &mut ix[c0..c0 + 1]);
        record_bias_relu::<T, 1, BIAS_FIRST>(img, offs, c0, b, act, a, i);
        c0 += 1;
    }
}

/// One window of [`Pool2d::reduce_index_bias_relu`], all channels, on the instructions
/// `simd`.
///
/// # Safety
/// The CPU supports `simd`.
#[inline(always)]
unsafe fn bias_relu_window<T: num_traits::Float + 'static>(
    simd: Simd,
    w: BiasReluWindow<'_, T>,
    a: &mut [T],
    ix: &mut [u8],
) {
    // SAFETY: the caller's.
    unsafe {
        match (simd, w.3.bias_first) {
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx512, false) => window_bias_relu_avx512::<T, false>(w, a, ix),
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx512, true) => window_bias_relu_avx512::<T, true>(w, a, ix),
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx2, false) => window_bias_relu_avx2::<T, false>(w, a, ix),
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx2, true) => window_bias_relu_avx2::<T, true>(w, a, ix),
            (_, false) => window_bias_relu::<T, false>(w, a, ix),
            (_, true) => window_bias_relu::<T, true>(w, a, ix),
        }
    }
}

/// [`window_bias_relu_avx2`] with AVX-512 for blocks of sixteen channels: the comparisons
/// land in mask registers and each selection is one masked move, where AVX2 spends two
/// instructions on every blend.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn window_bias_relu_avx512<T: num_traits::Float + 'static, const BIAS_FIRST: bool>(
    w: BiasReluWindow<'_, T>,
    acc: &mut [T],
    ix: &mut [u8],
) {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return window_bias_relu::<T, BIAS_FIRST>(w, acc, ix);
    }
    let c = acc.len();
    let wide = c / 16 * 16;
    if wide > 0 {
        let (img, offs, bias, act) = w;
        // SAFETY: T is f32 (checked above): the same memory, the same type.
        let (img, bias, act, out) = unsafe {
            (
                std::slice::from_raw_parts(img.as_ptr() as *const f32, img.len()),
                std::slice::from_raw_parts(bias.as_ptr() as *const f32, bias.len()),
                &*(act as *const BiasRelu<T> as *const BiasRelu<f32>),
                std::slice::from_raw_parts_mut(acc.as_mut_ptr() as *mut f32, wide),
            )
        };
        for c0 in (0..wide).step_by(16) {
            // SAFETY: the CPU has AVX-512F (this function's features).
            unsafe {
                record_bias_relu_avx512::<BIAS_FIRST>(
                    img,
                    offs,
                    c0,
                    &bias[c0..c0 + 16],
                    act,
                    &mut out[c0..c0 + 16],
                    &mut ix[c0..c0 + 16],
                )
            };
        }
    }
    if wide < c {
        let (img, offs, bias, act) = w;
        // The channels past the last sixteen, from their own offsets in the image.
        let rest = (&img[wide..], offs, &bias[wide..], act);
        // SAFETY: the CPU has AVX2 (this function's features).
        unsafe { window_bias_relu_avx2::<T, BIAS_FIRST>(rest, &mut acc[wide..], &mut ix[wide..]) };
    }
}

/// [`record_bias_relu_avx2`] for sixteen `f32` channels, lane by lane the same results
/// with the ReLU taken once after the window instead of per element: `relu(x) = x <=
/// floor ? floor : x` (NaN kept) commutes with `max_of` (`a >= r ? a : r`), the floor's
/// bits included, so the pooled value is the ReLU of the pre-ReLU maximum. The selected
/// element (the first strictly greater one, ordered comparisons) is the same as among the
/// ReLU's outputs whenever that maximum is above the floor or the first element is NaN;
/// otherwise every output is the floor and the first element is selected.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn record_bias_relu_avx512<const BIAS_FIRST: bool>(
    img: &[f32],
    offs: &[usize],
    c0: usize,
    bias: &[f32],
    act: &BiasRelu<f32>,
    acc: &mut [f32],
    index: &mut [u8],
) {
    use std::arch::x86_64::*;
    assert!(bias.len() == 16 && acc.len() == 16 && index.len() == 16 && !offs.is_empty());
    let load = |k: usize| -> __m512 {
        let v = &img[offs[k] + c0..offs[k] + c0 + 16];
        // SAFETY: sixteen in-bounds elements.
        unsafe { _mm512_loadu_ps(v.as_ptr()) }
    };
    // SAFETY: sixteen elements (asserted).
    let b = unsafe { _mm512_loadu_ps(bias.as_ptr()) };
    let (a, bits) = select_bias_relu_avx512::<BIAS_FIRST>(offs.len(), load, b, act);
    // SAFETY: sixteen writable elements and bytes (asserted).
    unsafe {
        _mm512_storeu_ps(acc.as_mut_ptr(), a);
        _mm_storeu_si128(index.as_mut_ptr() as *mut __m128i, bits);
    }
}

/// The core of [`record_bias_relu_avx512`], for a window of `n` (at least one) elements
/// whose pre-bias values `load(k)` gives in window order: the pooled values and the index
/// bytes (position | GT if the selected pre-activation `> gt` | EQ if `== eq`, as the AVX2
/// kernel). One definition for the pooling of a stored tensor and the convolution pooled
/// in registers (`conv_pool_direct`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn select_bias_relu_avx512<const BIAS_FIRST: bool>(
    n: usize,
    load: impl Fn(usize) -> std::arch::x86_64::__m512,
    b: std::arch::x86_64::__m512,
    act: &BiasRelu<f32>,
) -> (std::arch::x86_64::__m512, std::arch::x86_64::__m128i) {
    use std::arch::x86_64::*;
    debug_assert!(n > 0, "a window of no elements selects nothing");
    let floor = _mm512_set1_ps(act.floor);
    let at = |v: __m512| -> __m512 {
        if BIAS_FIRST {
            _mm512_add_ps(b, v)
        } else {
            _mm512_add_ps(v, b)
        }
    };
    // max_of(acc, r): `acc >= r ? acc : r`
    let max_of = |a: __m512, r: __m512| {
        let ge = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(a, r);
        _mm512_mask_blend_ps(ge, r, a)
    };
    let s0 = at(load(0));
    let mut a = max_of(_mm512_set1_ps(f32::NEG_INFINITY), s0);
    let (mut bs, mut bk) = (s0, _mm512_setzero_si512());
    for k in 1..n {
        let s = at(load(k));
        a = max_of(a, s);
        let gt = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(s, bs);
        bs = _mm512_mask_blend_ps(gt, bs, s);
        bk = _mm512_mask_blend_epi32(gt, bk, _mm512_set1_epi32(k as i32));
    }
    // The ReLU: `a <= floor ? floor : a`; where the largest is not above the floor, every
    // ReLU output ties at the floor and the first element is selected.
    let a = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LE_OQ>(a, floor), a, floor);
    let low = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(bs, floor);
    let (bs, bk) = (
        _mm512_mask_blend_ps(low, bs, s0),
        _mm512_mask_blend_epi32(low, bk, _mm512_setzero_si512()),
    );
    let above = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(bs, _mm512_set1_ps(act.gt));
    let equal = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(bs, _mm512_set1_ps(act.eq));
    let bits = _mm512_mask_or_epi32(bk, above, bk, _mm512_set1_epi32(i32::from(GT)));
    let bits = _mm512_mask_or_epi32(bits, equal, bits, _mm512_set1_epi32(i32::from(EQ)));
    // Each lane's low byte, in order.
    (a, _mm512_cvtepi32_epi8(bits))
}

/// [`window_bias_relu`] with AVX2: for `f32`, each block of eight channels in one vector
/// (the compiler left the generic loop scalar), the rest as the generic one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn window_bias_relu_avx2<T: num_traits::Float + 'static, const BIAS_FIRST: bool>(
    w: BiasReluWindow<'_, T>,
    acc: &mut [T],
    ix: &mut [u8],
) {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return window_bias_relu::<T, BIAS_FIRST>(w, acc, ix);
    }
    let (img, offs, bias, act) = w;
    // SAFETY: T is f32 (checked above): the same memory, the same type.
    let (img, bias, act, out) = unsafe {
        (
            std::slice::from_raw_parts(img.as_ptr() as *const f32, img.len()),
            std::slice::from_raw_parts(bias.as_ptr() as *const f32, bias.len()),
            &*(act as *const BiasRelu<T> as *const BiasRelu<f32>),
            std::slice::from_raw_parts_mut(acc.as_mut_ptr() as *mut f32, acc.len()),
        )
    };
    let c = out.len();
    let mut c0 = 0;
    while c0 + 8 <= c {
        // SAFETY: the CPU has AVX2 (this function's features).
        unsafe {
            record_bias_relu_avx2::<BIAS_FIRST>(
                img,
                offs,
                c0,
                &bias[c0..c0 + 8],
                act,
                &mut out[c0..c0 + 8],
                &mut ix[c0..c0 + 8],
            )
        };
        c0 += 8;
    }
    while c0 < c {
        let b = bias[c0..c0 + 1].try_into().expect("one");
        let (a, i) = (&mut out[c0..c0 + 1], &mut ix[c0..c0 + 1]);
        record_bias_relu::<f32, 1, BIAS_FIRST>(img, offs, c0, b, act, a, i);
        c0 += 1;
    }
}

/// [`record_bias_relu`] for eight `f32` channels in AVX2 registers, the same
/// comparisons and selections lane by lane (ordered, quiet comparisons: false on NaN, as
/// Rust's operators).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn record_bias_relu_avx2<const BIAS_FIRST: bool>(
    img: &[f32],
    offs: &[usize],
    c0: usize,
    bias: &[f32],
    act: &BiasRelu<f32>,
    acc: &mut [f32],
    index: &mut [u8],
) {
    use std::arch::x86_64::*;
    assert!(bias.len() == 8 && acc.len() == 8 && index.len() == 8 && !offs.is_empty());
    let load = |off: usize| -> __m256 {
        let v = &img[off + c0..off + c0 + 8];
        // SAFETY: eight in-bounds elements.
        unsafe { _mm256_loadu_ps(v.as_ptr()) }
    };
    let b = _mm256_loadu_ps(bias.as_ptr());
    let floor = _mm256_set1_ps(act.floor);
    let at = |v: __m256| -> (__m256, __m256) {
        let s = if BIAS_FIRST {
            _mm256_add_ps(b, v)
        } else {
            _mm256_add_ps(v, b)
        };
        // `s <= floor ? floor : s`
        let le = _mm256_cmp_ps::<_CMP_LE_OQ>(s, floor);
        (s, _mm256_blendv_ps(s, floor, le))
    };
    // max_of(acc, r): `acc >= r ? acc : r`
    let max_of = |a: __m256, r: __m256| {
        let ge = _mm256_cmp_ps::<_CMP_GE_OQ>(a, r);
        _mm256_blendv_ps(r, a, ge)
    };
    let (s, r) = at(load(offs[0]));
    let mut a = max_of(_mm256_set1_ps(f32::NEG_INFINITY), r);
    // The position as 32-bit integers in float lanes (blended as floats, never computed on).
    let (mut br, mut bs, mut bk) = (r, s, _mm256_setzero_ps());
    for (k, &off) in offs.iter().enumerate().skip(1) {
        let (s, r) = at(load(off));
        a = max_of(a, r);
        let gt = _mm256_cmp_ps::<_CMP_GT_OQ>(r, br);
        br = _mm256_blendv_ps(br, r, gt);
        bs = _mm256_blendv_ps(bs, s, gt);
        let kv = _mm256_castsi256_ps(_mm256_set1_epi32(k as i32));
        bk = _mm256_blendv_ps(bk, kv, gt);
    }
    _mm256_storeu_ps(acc.as_mut_ptr(), a);
    // The index bytes: position | GT if `a > gt` | EQ if `a == eq`, packed in vectors (a
    // lane-by-lane loop over the comparison masks cost as much as the window's loads).
    let above = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(bs, _mm256_set1_ps(act.gt)));
    let equal = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_EQ_OQ>(bs, _mm256_set1_ps(act.eq)));
    let bits = _mm256_or_si256(
        _mm256_castps_si256(bk),
        _mm256_or_si256(
            _mm256_and_si256(above, _mm256_set1_epi32(i32::from(GT))),
            _mm256_and_si256(equal, _mm256_set1_epi32(i32::from(EQ))),
        ),
    );
    store_low_bytes(bits, index);
}

/// One window of `reduce_index_minmax`'s AVX2 path, all channels: [`record`] with
/// `max_of`/`above` (`min_of`/`below` with `MIN`), eight channels a vector, the rest as
/// the generic one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn window_minmax_avx2<const MIN: bool>(
    img: &[f32],
    offs: &[usize],
    acc: &mut [f32],
    ix: &mut [u8],
) {
    use super::reduce_window::{above, below, max_of, min_of};
    use std::arch::x86_64::*;
    let c = acc.len();
    assert!(ix.len() == c && !offs.is_empty());
    let init = if MIN {
        f32::INFINITY
    } else {
        f32::NEG_INFINITY
    };
    let load = |off: usize, c0: usize| -> __m256 {
        let v = &img[off + c0..off + c0 + 8];
        // SAFETY: eight in-bounds elements.
        unsafe { _mm256_loadu_ps(v.as_ptr()) }
    };
    let mut c0 = 0;
    while c0 + 8 <= c {
        // `acc >= v ? acc : v` (`<=` with MIN), as `max_of`: NaN in `v` wins, NaN in `acc`
        // is replaced.
        let combine = |a: __m256, v: __m256| {
            let keep = if MIN {
                _mm256_cmp_ps::<_CMP_LE_OQ>(a, v)
            } else {
                _mm256_cmp_ps::<_CMP_GE_OQ>(a, v)
            };
            _mm256_blendv_ps(v, a, keep)
        };
        let first = load(offs[0], c0);
        let mut a = combine(_mm256_set1_ps(init), first);
        let (mut bv, mut bk) = (first, _mm256_setzero_ps());
        for (k, &off) in offs.iter().enumerate().skip(1) {
            let v = load(off, c0);
            a = combine(a, v);
            let better = if MIN {
                _mm256_cmp_ps::<_CMP_LT_OQ>(v, bv)
            } else {
                _mm256_cmp_ps::<_CMP_GT_OQ>(v, bv)
            };
            bv = _mm256_blendv_ps(bv, v, better);
            let kv = _mm256_castsi256_ps(_mm256_set1_epi32(k as i32));
            bk = _mm256_blendv_ps(bk, kv, better);
        }
        // SAFETY: eight in-bounds elements; the CPU has AVX2 (this function's features).
        unsafe {
            _mm256_storeu_ps(acc[c0..c0 + 8].as_mut_ptr(), a);
            store_low_bytes(_mm256_castps_si256(bk), &mut ix[c0..c0 + 8]);
        }
        c0 += 8;
    }
    while c0 < c {
        let (a, i) = (&mut acc[c0..c0 + 1], &mut ix[c0..c0 + 1]);
        if MIN {
            record::<f32, 1>(img, offs, c0, init, &min_of, &below, a, i);
        } else {
            record::<f32, 1>(img, offs, c0, init, &max_of, &above, a, i);
        }
        c0 += 1;
    }
}

/// Stores the low byte of each of `v`'s eight 32-bit lanes into `out` (eight bytes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn store_low_bytes(v: std::arch::x86_64::__m256i, out: &mut [u8]) {
    use std::arch::x86_64::*;
    assert!(out.len() == 8);
    // Per 128-bit half: bytes 0, 4, 8, 12 to the front; then the halves' first words.
    let pick = _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, //
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    );
    let p = _mm256_shuffle_epi8(v, pick);
    let (lo, hi) = (_mm256_castsi256_si128(p), _mm256_extracti128_si256::<1>(p));
    // SAFETY: eight writable bytes (asserted).
    unsafe { _mm_storel_epi64(out.as_mut_ptr() as *mut __m128i, _mm_unpacklo_epi32(lo, hi)) };
}

/// [`record`] for the fused bias, ReLU and max pooling: each element is first
/// `max(x + bias, floor)` exactly as the unfused add and max compute it (`bias + x` with
/// `BIAS_FIRST`), and the index byte also carries the pre-ReLU value's comparisons (see
/// [`POS`]). Branch-free over the lanes, so that the compiler keeps them in vectors.
#[inline(always)]
fn record_bias_relu<T: num_traits::Float, const L: usize, const BIAS_FIRST: bool>(
    img: &[T],
    offs: &[usize],
    c0: usize,
    bias: &[T; L],
    act: &BiasRelu<T>,
    acc: &mut [T],
    index: &mut [u8],
) {
    let lanes = |off: usize| -> &[T; L] {
        img[off + c0..off + c0 + L]
            .try_into()
            .expect("a slice of L elements")
    };
    let floor = act.floor;
    // The pre-ReLU value and the activation: `binary::apply_real`'s max, `s` when it is
    // NaN or above the floor, which (the floor not NaN: see `BiasRelu`) is one comparison,
    // and no branch.
    let at = |v: T, b: T| -> (T, T) {
        let s = if BIAS_FIRST { b + v } else { v + b };
        (s, if s <= floor { floor } else { s })
    };
    let mut a = [T::neg_infinity(); L];
    let mut br = [T::zero(); L];
    let mut bs = [T::zero(); L];
    let mut bk = [0u32; L];
    // The first element is selected whatever it is (a NaN too), as `record`'s.
    let v = lanes(offs[0]);
    for l in 0..L {
        let (s, r) = at(v[l], bias[l]);
        a[l] = super::reduce_window::max_of(a[l], r);
        (br[l], bs[l]) = (r, s);
    }
    for (k, &off) in offs.iter().enumerate().skip(1) {
        let v = lanes(off);
        for l in 0..L {
            let (s, r) = at(v[l], bias[l]);
            a[l] = super::reduce_window::max_of(a[l], r);
            // As `record` with `above`: replaced only by a strictly greater one.
            let b = r > br[l];
            br[l] = if b { r } else { br[l] };
            bs[l] = if b { s } else { bs[l] };
            bk[l] = if b { k as u32 } else { bk[l] };
        }
    }
    acc.copy_from_slice(&a);
    for ((d, &k), &s) in index.iter_mut().zip(&bk).zip(&bs) {
        let bits = (u8::from(s > act.gt) << 7) | (u8::from(s == act.eq) << 6);
        *d = k as u8 | bits;
    }
}

/// A window's in-range rows `i0..i1` and columns `j0..j1`.
type Win = (usize, usize, usize, usize);

/// For channels `c0..c0 + cb` of window `win` of `image`: per channel the position
/// (row-major in the clipped window) of the selected element, the first, replaced only by
/// a strictly `better` one.
fn select_block<T: num_traits::Float>(
    p: &Pool2d,
    image: &[T],
    (i0, i1, j0, j1): Win,
    c0: usize,
    cb: usize,
    better: &impl Fn(T, T) -> bool,
    bk: &mut [u32; BLOCK],
) {
    let c = p.c;
    let first = (i0 * p.w + j0) * c + c0;
    let mut bv = [T::zero(); BLOCK];
    bv[..cb].copy_from_slice(&image[first..first + cb]);
    bk[..cb].fill(0);
    let mut k = 0u32;
    for i in i0..i1 {
        for j in j0..j1 {
            let at = (i * p.w + j) * c + c0;
            let v = &image[at..at + cb];
            for ((bv, bk), &v) in bv[..cb].iter_mut().zip(&mut bk[..cb]).zip(v) {
                if better(v, *bv) {
                    *bv = v;
                    *bk = k;
                }
            }
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::reduce_window::{better, combine, pool_generic, scatter_generic};
    use super::*;
    use crate::ir::ReduceOp;

    /// Values from a small set (many ties inside windows), some NaN where asked.
    fn data(len: usize, seed: u64, nan_every: usize) -> Vec<f32> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if nan_every > 0 && i % nan_every == nan_every / 2 {
                    f32::NAN
                } else {
                    // -0.0 and 0.0 compare equal: ties of different bits.
                    [-2.0, -1.0, -0.0, 0.0, 1.0, 2.0][((s >> 33) % 6) as usize]
                }
            })
            .collect()
    }

    /// `same` padding as Keras computes it, or none.
    fn pad(len: usize, k: usize, s: usize, same: bool) -> (usize, usize) {
        if !same {
            return (0, 0);
        }
        let out = len.div_ceil(s);
        let total = ((out - 1) * s + k).saturating_sub(len);
        (total / 2, total - total / 2)
    }

    fn out_dims(xd: &[usize], w: &Window) -> Option<Vec<usize>> {
        (0..4)
            .map(|d| {
                let padded = xd[d] + w.padding[d].0 + w.padding[d].1;
                (padded >= w.dims[d]).then(|| (padded - w.dims[d]) / w.strides[d] + 1)
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The fast paths against the generic walk, bit for bit, over many geometries.
    #[test]
    fn fast_paths_match_the_generic_walk() {
        let mut checked = 0;
        for &(n, h, w) in &[
            (1, 5, 5),
            (5, 7, 6),
            (1, 6, 7),
            (2, 1, 4),
            (5, 27, 27),
            (3, 11, 11),
            (2, 8, 9),
        ] {
            for &c in &[1, 3, 32, 70] {
                for &(kh, kw) in &[(2, 2), (3, 3), (2, 3), (1, 1), (5, 4)] {
                    for &s in &[1, 2, 3, 4] {
                        for same in [false, true] {
                            for nan_every in [0, 7] {
                                let xd = [n, h, w, c];
                                let (ph, pw) = (pad(h, kh, s, same), pad(w, kw, s, same));
                                let win = Window {
                                    dims: vec![1, kh, kw, 1],
                                    strides: vec![1, s, s, 1],
                                    padding: vec![(0, 0), ph, pw, (0, 0)],
                                };
                                let Some(od) = out_dims(&xd, &win) else {
                                    continue;
                                };
                                let p = Pool2d::of(&xd, &od, &win).expect("an NHWC pooling");
                                let x = data(xd.iter().product(), checked, nan_every);
                                let no: usize = od.iter().product();
                                for (op, init) in [
                                    (ReduceOp::Max, f32::NEG_INFINITY),
                                    (ReduceOp::Min, f32::INFINITY),
                                    (ReduceOp::Sum, 0.0),
                                ] {
                                    let (mut fast, mut slow) = (vec![9.0; no], vec![9.0; no]);
                                    p.reduce(&x, &mut fast, init, combine(op));
                                    pool_generic(op, &x, &xd, &od, &win, init, &mut slow);
                                    let what = format!("{op:?} {xd:?} {win:?}");
                                    assert_eq!(bits(&fast), bits(&slow), "{what}");
                                }
                                let src = data(no, checked + 1, 0); // with -0.0: `0 + s` is not `s`
                                for op in [ReduceOp::Max, ReduceOp::Min] {
                                    let nx = x.len();
                                    let (mut fast, mut slow) = (vec![9.0; nx], vec![9.0; nx]);
                                    p.scatter(&src, &x, &mut fast, better(op));
                                    scatter_generic(op, &src, &x, &xd, &od, &win, &mut slow);
                                    let what = format!("scatter {op:?} {xd:?} {win:?}");
                                    assert_eq!(bits(&fast), bits(&slow), "{what}");
                                    // The pooling that records its selections, and the
                                    // gradient from them (over stale memory, as in a plan).
                                    let (mut pooled, mut want) = (vec![9.0; no], vec![9.0; no]);
                                    let mut index = vec![77u8; no];
                                    let init = [f32::NEG_INFINITY, f32::INFINITY]
                                        [(op == ReduceOp::Min) as usize];
                                    p.reduce_index(
                                        &x,
                                        &mut pooled,
                                        &mut index,
                                        init,
                                        combine(op),
                                        better(op),
                                    );
                                    pool_generic(op, &x, &xd, &od, &win, init, &mut want);
                                    assert_eq!(bits(&pooled), bits(&want), "index {what}");
                                    // The vector path of the recording max/min pooling.
                                    let mut vpooled = vec![9.0; no];
                                    let mut vindex = vec![77u8; no];
                                    let min = op == ReduceOp::Min;
                                    p.reduce_index_minmax(&x, &mut vpooled, &mut vindex, min);
                                    assert_eq!(bits(&vpooled), bits(&want), "minmax {what}");
                                    assert_eq!(vindex, index, "minmax index {what}");
                                    let mut fast = vec![9.0; nx];
                                    p.scatter_indexed(&src, &index, &mut fast);
                                    assert_eq!(bits(&fast), bits(&slow), "indexed {what}");
                                }
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 500, "{checked}");
    }

    /// The fused pooling and its gated gradient: the kernels for disjoint windows (one
    /// pass, whole vectors) against the banded walk, bit for bit, with NaNs, ties, signed
    /// zeros, odd sizes, padding, batch 1 and channel counts around the vector width.
    #[test]
    fn disjoint_gradients_match_the_banded_walk() {
        crate::kernel::simd::for_each_level(disjoint_gradients_match_on_this_level);
    }

    fn disjoint_gradients_match_on_this_level(level: crate::kernel::simd::Level) {
        let mut checked = 0;
        for &(n, h, w) in &[(1, 5, 5), (2, 7, 6), (1, 26, 26), (3, 11, 11), (1, 1, 4)] {
            for &c in &[1, 7, 8, 32, 70] {
                for &(kh, kw, sh, sw) in &[
                    (2, 2, 2, 2),
                    (3, 3, 3, 3),
                    (2, 3, 2, 3),
                    (1, 1, 2, 2),
                    (2, 2, 3, 3),
                    (3, 3, 2, 2), // overlapping: the banded walk itself
                ] {
                    for same in [false, true] {
                        let xd = [n, h, w, c];
                        let win = Window {
                            dims: vec![1, kh, kw, 1],
                            strides: vec![1, sh, sw, 1],
                            padding: vec![
                                (0, 0),
                                pad(h, kh, sh, same),
                                pad(w, kw, sw, same),
                                (0, 0),
                            ],
                        };
                        let Some(od) = out_dims(&xd, &win) else {
                            continue;
                        };
                        let p = Pool2d::of(&xd, &od, &win).expect("an NHWC pooling");
                        let no: usize = od.iter().product();
                        let x = data(xd.iter().product(), checked, 5);
                        let bias = data(c, checked + 2, 0);
                        let src = data(no, checked + 1, 9);
                        let what = format!("{xd:?} {win:?}");
                        for (floor, gt, eq, ct_first) in
                            [(0.0, 0.0, 0.0, true), (-1.0, 1.0, 0.0, false)]
                        {
                            let act = BiasRelu {
                                bias_first: !ct_first,
                                floor,
                                gt,
                                eq,
                            };
                            let gate = ReluGate {
                                one: 1.0,
                                half: 0.5,
                                zero: 0.0,
                                ct_first,
                            };
                            let (mut o, mut ix) = (vec![9.0; no], vec![0u8; no]);
                            p.reduce_index_bias_relu(&x, &bias, &mut o, &mut ix, &act);
                            let nx = x.len();
                            let (mut fast, mut slow) = (vec![9.0; nx], vec![9.0; nx]);
                            p.scatter_indexed_bias_relu(&src, &ix, &mut fast, &gate);
                            p.scatter_with(&src, &mut slow, Some(&gate), banded_select(&ix));
                            assert_eq!(bits(&fast), bits(&slow), "{level:?} gated {what}");
                            let mut plain = vec![f32::NAN; no];
                            let mut pix = vec![0u8; no];
                            p.reduce_index(
                                &x,
                                &mut plain,
                                &mut pix,
                                f32::NEG_INFINITY,
                                max_of_f32,
                                above_f32,
                            );
                            p.scatter_indexed(&src, &pix, &mut fast);
                            p.scatter_with(&src, &mut slow, None, banded_select(&pix));
                            assert_eq!(bits(&fast), bits(&slow), "{level:?} plain {what}");
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 250, "{checked}");
    }

    /// The fused bias, ReLU and max pooling gives the portable kernel's outputs and index
    /// bytes on every instruction set the CPU has (channel counts around both vector
    /// widths, NaNs, ties, padding, overlapping windows).
    #[test]
    fn bias_relu_pooling_is_the_same_on_every_instruction_set() {
        let mut checked = 0;
        for &(n, h, w) in &[(1, 5, 5), (2, 7, 6), (1, 26, 26)] {
            for &c in &[1, 7, 8, 15, 16, 17, 24, 32, 70] {
                for &(kh, kw, sh, sw) in &[(2, 2, 2, 2), (3, 3, 2, 2), (2, 3, 1, 2)] {
                    for same in [false, true] {
                        let xd = [n, h, w, c];
                        let win = Window {
                            dims: vec![1, kh, kw, 1],
                            strides: vec![1, sh, sw, 1],
                            padding: vec![
                                (0, 0),
                                pad(h, kh, sh, same),
                                pad(w, kw, sw, same),
                                (0, 0),
                            ],
                        };
                        let Some(od) = out_dims(&xd, &win) else {
                            continue;
                        };
                        let p = Pool2d::of(&xd, &od, &win).expect("an NHWC pooling");
                        let no: usize = od.iter().product();
                        // Integers on a coarse grid tie often; NaNs every fifth element.
                        let x: Vec<f32> = data(xd.iter().product(), checked, 5)
                            .iter()
                            .map(|v| (v * 4.0).round() / 4.0)
                            .collect();
                        let bias = data(c, checked + 2, 0);
                        for (floor, gt, eq, bias_first) in
                            [(0.0, 0.0, 0.0, false), (-1.0, 1.0, 0.0, true)]
                        {
                            let act = BiasRelu {
                                bias_first,
                                floor,
                                gt,
                                eq,
                            };
                            let mut want = None;
                            crate::kernel::simd::for_each_level(|simd| {
                                let (mut o, mut ix) = (vec![9.0; no], vec![0u8; no]);
                                p.reduce_index_bias_relu(&x, &bias, &mut o, &mut ix, &act);
                                let got = (bits(&o), ix);
                                match &want {
                                    None => want = Some((simd, got)),
                                    Some((first, w)) => assert!(
                                        w == &got,
                                        "{simd:?} against {first:?}: {xd:?} {win:?} {act:?}"
                                    ),
                                }
                            });
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }

    /// Times the recording poolings on the `cnn` workload's first pooling (run with
    /// `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_recording_poolings() {
        let xd = [128, 26, 26, 32];
        let square = |k: usize, s: usize, pad: usize| Window {
            dims: vec![1, k, k, 1],
            strides: vec![1, s, s, 1],
            padding: vec![(0, 0), (pad, pad), (pad, pad), (0, 0)],
        };
        let win = square(2, 2, 0);
        let od = out_dims(&xd, &win).expect("fits");
        let p = Pool2d::of(&xd, &od, &win).expect("an NHWC pooling");
        let x = data(xd.iter().product(), 3, 0);
        let bias = data(32, 4, 0);
        let no: usize = od.iter().product();
        let (mut o, mut ix) = (vec![0.0f32; no], vec![0u8; no]);
        let act = BiasRelu {
            bias_first: false,
            floor: 0.0,
            gt: 0.0,
            eq: 0.0,
        };
        // The fastest of 30 calls: on a shared machine the mean measures the neighbours.
        let time = |f: &mut dyn FnMut()| {
            let mut best = f64::INFINITY;
            for _ in 0..30 {
                let t = std::time::Instant::now();
                f();
                best = best.min(t.elapsed().as_secs_f64() * 1e3);
            }
            best
        };
        let plain = time(&mut || {
            p.reduce_index(
                &x,
                &mut o,
                &mut ix,
                f32::NEG_INFINITY,
                max_of_f32,
                above_f32,
            )
        });
        let vector = time(&mut || p.reduce_index_minmax(&x, &mut o, &mut ix, false));
        let fused = time(&mut || p.reduce_index_bias_relu(&x, &bias, &mut o, &mut ix, &act));
        let gate = ReluGate {
            one: 1.0,
            half: 0.5,
            zero: 0.0,
            ct_first: true,
        };
        let src = data(no, 5, 0);
        let mut dx = vec![0.0f32; x.len()];
        let scatter = time(&mut || p.scatter_indexed(&src, &ix, &mut dx));
        let gated = time(&mut || p.scatter_indexed_bias_relu(&src, &ix, &mut dx, &gate));
        let banded = time(&mut || p.scatter_with(&src, &mut dx, Some(&gate), banded_select(&ix)));
        let copy = time(&mut || dx.copy_from_slice(&x));
        // Overlapping windows, 3x3 stride 2 (`same`): the banded walk.
        let win3 = square(3, 2, 1);
        let od3 = out_dims(&xd, &win3).expect("fits");
        let p3 = Pool2d::of(&xd, &od3, &win3).expect("an NHWC pooling");
        let no3: usize = od3.iter().product();
        let (mut o3, mut ix3) = (vec![0.0f32; no3], vec![0u8; no3]);
        let forward3 = time(&mut || p3.reduce_index_minmax(&x, &mut o3, &mut ix3, false));
        let src3 = data(no3, 6, 0);
        let overlapping = time(&mut || p3.scatter_indexed(&src3, &ix3, &mut dx));
        eprintln!(
            "ms: reduce_index {plain:.3} (minmax {vector:.3}), with bias+relu {fused:.3}; scatter_indexed {scatter:.3}, \
             gated {gated:.3} (banded {banded:.3}); copying the operand {copy:.3}; \
             3x3/2: reduce_index_minmax {forward3:.3}, scatter_indexed {overlapping:.3}"
        );
    }

    /// `scatter_with`'s selection from an index, as the indexed gradients before the
    /// disjoint pass (the banded walk, kept for overlapping windows).
    fn banded_select(
        index: &[u8],
    ) -> impl Fn(usize, Win, usize, usize, usize, &mut [u32; BLOCK]) + Sync + '_ {
        move |_, _, c0, cb, o, bk| {
            for (d, &k) in bk[..cb].iter_mut().zip(&index[o + c0..o + c0 + cb]) {
                *d = k as u32;
            }
        }
    }

    fn max_of_f32(a: f32, b: f32) -> f32 {
        super::super::reduce_window::max_of(a, b)
    }

    fn above_f32(a: f32, b: f32) -> bool {
        a > b
    }

    #[test]
    fn integer_and_f64_pooling_match_the_generic_walk() {
        let xd = [3, 7, 5, 4];
        let win = Window {
            dims: vec![1, 3, 3, 1],
            strides: vec![1, 2, 2, 1],
            padding: vec![(0, 0), (1, 1), (1, 1), (0, 0)],
        };
        let od = out_dims(&xd, &win).expect("fits");
        let p = Pool2d::of(&xd, &od, &win).expect("an NHWC pooling");
        let x = data(xd.iter().product(), 3, 0);
        let no: usize = od.iter().product();
        let xi: Vec<i32> = x.iter().map(|&v| v as i32).collect();
        let xf: Vec<f64> = x.iter().map(|&v| v as f64 * 0.1).collect();
        for (op, init) in [(ReduceOp::Max, i32::MIN), (ReduceOp::Sum, 0)] {
            let (mut fast, mut slow) = (vec![7; no], vec![7; no]);
            p.reduce(&xi, &mut fast, init, combine(op));
            pool_generic(op, &xi, &xd, &od, &win, init, &mut slow);
            assert_eq!(fast, slow, "{op:?}");
        }
        let (mut fast, mut slow) = (vec![7.0; no], vec![7.0; no]);
        p.reduce(&xf, &mut fast, 0.0, combine(ReduceOp::Sum));
        pool_generic(ReduceOp::Sum, &xf, &xd, &od, &win, 0.0, &mut slow);
        assert_eq!(fast, slow);
    }

    #[test]
    fn only_nhwc_windows_take_the_fast_path() {
        let w = |dims: Vec<usize>, strides: Vec<usize>| Window {
            padding: vec![(0, 0); dims.len()],
            dims,
            strides,
        };
        let x = [2, 4, 4, 3];
        assert!(Pool2d::of(&x, &[2, 2, 2, 3], &w(vec![1, 2, 2, 1], vec![1, 2, 2, 1])).is_some());
        assert!(Pool2d::of(&x, &[2, 2, 2, 1], &w(vec![1, 2, 2, 3], vec![1, 2, 2, 1])).is_none());
        assert!(Pool2d::of(&x, &[1, 2, 2, 3], &w(vec![2, 2, 2, 1], vec![1, 2, 2, 1])).is_none());
        assert!(Pool2d::of(&[2, 4, 4], &[2, 2, 2], &w(vec![1, 2, 2], vec![1, 2, 2])).is_none());
    }
}
