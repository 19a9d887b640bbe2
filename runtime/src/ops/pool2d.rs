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

    /// `select_and_scatter_add`: `out` (the operand's shape) is zero but, per window and
    /// channel, the first in-range element that no later one is `better` than gets the
    /// window's `src` value added. Split over images, and over output rows too when the
    /// windows do not overlap in H (each output row then owns a band of input rows, which
    /// it zeroes and scatters into in one pass).
    pub(super) fn scatter<T: num_traits::Float + Send + Sync>(
        &self,
        src: &[T],
        x: &[T],
        out: &mut [T],
        better: impl Fn(T, T) -> bool + Sync,
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
            (
                u / per_img * img + lo * p.w * p.c,
                u / per_img * img + hi * p.w * p.c,
            )
        };
        let run_units = |us: std::ops::Range<usize>, base: usize, dst: &mut [T]| {
            for u in us {
                // Zero the unit's band, then scatter into it while it is in cache.
                let (lo, hi) = band(u);
                dst[lo - base..hi - base].fill(T::zero());
                let (b, o0) = (u / per_img, u % per_img * per);
                let image = &x[b * img..(b + 1) * img];
                for o in o0..o0 + per {
                    let (i0, i1) = Pool2d::span(o, p.sh, p.kh, p.ph, p.h);
                    for q in 0..p.ow {
                        let (j0, j1) = Pool2d::span(q, p.sw, p.kw, p.pw, p.w);
                        if i0 == i1 || j0 == j1 {
                            continue;
                        }
                        let s = &src[((b * p.oh + o) * p.ow + q) * p.c..][..p.c];
                        // `dst` starts at `base` of the whole operand.
                        select_window(&p, image, (i0, i1, j0, j1), s, &better, |at, v| {
                            let k = b * img + at - base;
                            dst[k] = dst[k] + v;
                        });
                    }
                }
            }
        };
        let tasks = self.tasks(out.len() + src.len() * p.kh * p.kw, units);
        if tasks == 1 {
            run_units(0..units, 0, out);
            return;
        }
        // Each task takes the input bands of its run of units: contiguous and disjoint.
        let mut rest: &mut [T] = out;
        let mut done = 0;
        let mut slots = Vec::with_capacity(tasks);
        for t in 0..tasks {
            let us = crew::part(units, tasks, t);
            let (lo, hi) = if us.is_empty() {
                (done, done)
            } else {
                (band(us.start).0, band(us.end - 1).1)
            };
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(hi - done);
            debug_assert_eq!(lo, done);
            rest = tail;
            done = hi;
            slots.push(std::sync::Mutex::new(Some((us, lo, chunk))));
        }
        crew::run(tasks, &|t| {
            let taken = slots[t].lock().ok().and_then(|mut s| s.take());
            if let Some((us, lo, chunk)) = taken {
                run_units(us, lo, chunk);
            }
        });
    }
}

/// For window rows `i0..i1`, columns `j0..j1` of `image`: per channel the selected
/// element (the first, replaced only by a strictly `better` one), and `add(offset in the
/// image, s[channel])` for it.
fn select_window<T: num_traits::Float>(
    p: &Pool2d,
    image: &[T],
    (i0, i1, j0, j1): (usize, usize, usize, usize),
    s: &[T],
    better: &impl Fn(T, T) -> bool,
    mut add: impl FnMut(usize, T),
) {
    const BLOCK: usize = 64;
    let c = p.c;
    let mut c0 = 0;
    while c0 < c {
        let cb = BLOCK.min(c - c0);
        let first = (i0 * p.w + j0) * c + c0;
        let mut bv = [T::zero(); BLOCK];
        let mut bi = [first; BLOCK];
        bv[..cb].copy_from_slice(&image[first..first + cb]);
        for i in i0..i1 {
            for j in j0..j1 {
                let at = (i * p.w + j) * c + c0;
                let v = &image[at..at + cb];
                for ((bv, bi), &v) in bv[..cb].iter_mut().zip(&mut bi[..cb]).zip(v) {
                    if better(v, *bv) {
                        *bv = v;
                        *bi = at;
                    }
                }
            }
        }
        for (k, (&bi, &s)) in bi[..cb].iter().zip(&s[c0..c0 + cb]).enumerate() {
            add(bi + k, s);
        }
        c0 += cb;
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
                    ((s >> 33) % 5) as f32 - 2.0
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
        for &(n, h, w) in &[(1, 5, 5), (5, 7, 6), (1, 6, 7), (2, 1, 4), (5, 27, 27)] {
            for &c in &[1, 3, 32, 70] {
                for &(kh, kw) in &[(2, 2), (3, 3), (2, 3), (1, 1)] {
                    for &s in &[1, 2, 3] {
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
                                let src = data(no, checked + 1, 0);
                                for op in [ReduceOp::Max, ReduceOp::Min] {
                                    let nx = x.len();
                                    let (mut fast, mut slow) = (vec![9.0; nx], vec![9.0; nx]);
                                    p.scatter(&src, &x, &mut fast, better(op));
                                    scatter_generic(op, &src, &x, &xd, &od, &win, &mut slow);
                                    let what = format!("scatter {op:?} {xd:?} {win:?}");
                                    assert_eq!(bits(&fast), bits(&slow), "{what}");
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
