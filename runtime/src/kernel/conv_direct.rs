//! A direct two-dimensional convolution (NHWC input, HWIO kernel, f32, AVX2 + FMA) for
//! layers with few input features: a network's first layer, on one to four channels.
//!
//! Through im2col such a layer is a matrix product of depth kernel positions × features
//! (9 for a 3×3 kernel on one channel): too shallow for the product's tile to repay its
//! loads and stores, and copying three-element runs into patches costs more than the
//! product. Here each output pixel's features are a few vector registers, and every tap of
//! the kernel is added into them straight from the input, `PIXELS` pixels at a time so
//! that a tap's weights, loaded once, serve all of them.
//!
//! The sum runs in the im2col product's order (kernel positions major, features minor, one
//! fused multiply-add per tap, starting from zero), so the result is that product's, bit
//! for bit; only the taps that fall on padding are skipped where the product adds a zero
//! (which can change nothing but the sign of a zero sum).

use crate::kernel::crew;
use crate::kernel::simd::{level, Level};
use crate::{Error, Result};

/// Input features this kernel is for: with more, the im2col product is deep enough.
pub(crate) const MAX_CIN: usize = 4;
/// Taps (kernel positions × input features) one output pixel may have: the tap list of a
/// row of pixels lives on the stack.
pub(crate) const MAX_TAPS: usize = 64;
/// Neighbouring output pixels computed together (three pixels × four vectors of features
/// are twelve accumulators, which with the broadcasts fill AVX2's sixteen registers).
const PIXELS: usize = 3;
/// Neighbouring output pixels computed together with AVX-512 (six pixels × two vectors
/// of sixteen features are twelve accumulators of its thirty-two registers, and each
/// tap's weights serve twice as many pixels).
const WIDE_PIXELS: usize = 6;
/// Output features per register block: four vectors of eight.
const BLOCK: usize = 32;
/// Tasks per core, so a core that finishes early takes work from one that started late.
const TASKS_PER_CORE: usize = 4;

/// The shapes of one convolution: batch, input `[h, w, cin]`, kernel `[kh, kw, cin,
/// cout]`, output `[oh, ow, cout]`, strides, kernel dilation and the low padding (top,
/// left; the high padding is implied by the output's size).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Direct2d {
    pub batch: usize,
    pub input: [usize; 2],
    pub cin: usize,
    pub kernel: [usize; 2],
    pub cout: usize,
    pub output: [usize; 2],
    pub strides: [usize; 2],
    pub dilation: [usize; 2],
    pub pad: [i64; 2],
}

impl Direct2d {
    /// Whether this kernel computes the convolution (and the CPU runs it).
    pub(crate) fn supported(&self) -> bool {
        thin(self.cin, self.kernel[0] * self.kernel[1])
            && self.cout > 0
            && self.strides.iter().all(|&s| s > 0)
            && self.dilation.iter().all(|&d| d > 0)
            && avx2()
    }

    /// Whether there is no padding and every kernel position of every output pixel lies
    /// inside the input, so that no tap is ever skipped: what the kernels that compute
    /// whole pooling windows in registers (`ops::pool2d`) rely on.
    pub(crate) fn taps_inside(&self) -> bool {
        (0..2).all(|axis| {
            let (o, k) = (self.output[axis], self.kernel[axis]);
            self.pad[axis] == 0
                && o > 0
                && k > 0
                && (o - 1) * self.strides[axis] + (k - 1) * self.dilation[axis] < self.input[axis]
        })
    }

    /// The output columns `lo..hi` whose kernel lies wholly inside the input's row (one
    /// run: both bounds on a column are monotonic in it).
    fn inner_columns(&self) -> (usize, usize) {
        let ow = self.output[1];
        let whole = |o: usize| (0..self.kernel[1]).all(|j| self.at(1, o, j).is_some());
        let lo = (0..ow).find(|&o| whole(o)).unwrap_or(ow);
        let hi = (lo..ow).find(|&o| !whole(o)).unwrap_or(ow);
        (lo, hi)
    }

    /// The input row (along `axis`) under kernel position `k` of output position `o`, if
    /// it is not padding.
    fn at(&self, axis: usize, o: usize, k: usize) -> Option<usize> {
        let q = (o * self.strides[axis] + k * self.dilation[axis]) as i64 - self.pad[axis];
        (q >= 0 && q < self.input[axis] as i64).then_some(q as usize)
    }
}

/// Whether a convolution of `positions` kernel positions on `cin` input features is thin
/// enough for this kernel (and the CPU runs it); its other conditions hold for any graph's
/// two-dimensional, ungrouped convolution without input dilation.
pub(crate) fn thin(cin: usize, positions: usize) -> bool {
    (1..=MAX_CIN).contains(&cin) && positions * cin <= MAX_TAPS && avx2()
}

fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `out = conv(x, w)` for a geometry that is [`Direct2d::supported`]; rows of output
/// pixels are split over the cores.
pub(crate) fn conv2d(g: &Direct2d, x: &[f32], w: &[f32], out: &mut [f32]) -> Result<()> {
    let [oh, ow] = g.output;
    if !operands_fit(g, x, w) || out.len() < g.batch * oh * ow * g.cout {
        return Err(mismatch());
    }
    let rows = g.batch * oh;
    let tasks = (crew::width() * TASKS_PER_CORE).min(rows).max(1);
    let out_at = out.as_mut_ptr() as usize;
    let row_len = ow * g.cout;
    let columns = g.inner_columns();
    crew::run(tasks, &|t| {
        for row in crew::part(rows, tasks, t) {
            // SAFETY: output row `row` (inside `out`, checked above) is this task's alone;
            // `out` stays borrowed until `run` returns.
            let dst = unsafe {
                std::slice::from_raw_parts_mut((out_at as *mut f32).add(row * row_len), row_len)
            };
            output_row(g, x, w, (row / oh, row % oh), columns, dst);
        }
    });
    Ok(())
}

/// Output rows `rows` of image `b` into `dst` (`[rows, ow, cout]`), each bit for bit as
/// [`conv2d`] writes it: for a caller that consumes a band of rows while it is in cache
/// (the fused convolution and pooling), on the calling thread.
pub(crate) fn conv2d_rows(
    g: &Direct2d,
    x: &[f32],
    w: &[f32],
    b: usize,
    rows: std::ops::Range<usize>,
    dst: &mut [f32],
) -> Result<()> {
    let row_len = g.output[1] * g.cout;
    if !operands_fit(g, x, w)
        || b >= g.batch
        || rows.end > g.output[0]
        || dst.len() < rows.len() * row_len
    {
        return Err(mismatch());
    }
    let columns = g.inner_columns();
    for (r, d) in rows.zip(dst.chunks_exact_mut(row_len.max(1))) {
        output_row(g, x, w, (b, r), columns, d);
    }
    Ok(())
}

/// Whether the CPU runs the kernel for `g` and the input and kernel hold what it reads.
fn operands_fit(g: &Direct2d, x: &[f32], w: &[f32]) -> bool {
    let [ih, iw] = g.input;
    g.supported()
        && x.len() >= g.batch * ih * iw * g.cin
        && w.len() >= g.kernel[0] * g.kernel[1] * g.cin * g.cout
}

fn mismatch() -> Error {
    Error::Backend {
        backend: "native",
        message: "internal: direct convolution operands do not match their geometry".into(),
    }
}

/// One tap: the input element's offset from the pixel's origin and the weights' offset.
type Tap = (isize, usize);

/// Output row `r` of image `b`; `lo..hi` are [`Direct2d::inner_columns`].
fn output_row(
    g: &Direct2d,
    x: &[f32],
    w: &[f32],
    (b, r): (usize, usize),
    (lo, hi): (usize, usize),
    dst: &mut [f32],
) {
    let [ih, iw] = g.input;
    let ow = g.output[1];
    let (kh, kw, cin, cout) = (g.kernel[0], g.kernel[1], g.cin, g.cout);
    let image = b * ih * iw * cin;
    // The taps of a pixel whose kernel lies inside the input along the row, as offsets
    // from the input pixel under the kernel's first column (`col0`), in the product's
    // order; a pixel near the left or right edge gets its own list.
    let mut taps = [(0isize, 0usize); MAX_TAPS];
    let mut inside = [(0isize, 0usize); MAX_TAPS];
    let mut n_inside = 0;
    for i in 0..kh {
        let Some(y) = g.at(0, r, i) else { continue };
        for j in 0..kw {
            for c in 0..cin {
                let off =
                    ((y * iw) as isize + (j * g.dilation[1]) as isize) * cin as isize + c as isize;
                inside[n_inside] = (off, ((i * kw + j) * cin + c) * cout);
                n_inside += 1;
            }
        }
    }
    let inside = &inside[..n_inside];
    let base = |o: usize| {
        image as isize + ((o * g.strides[1]) as isize - g.pad[1] as isize) * cin as isize
    };
    let step = (g.strides[1] * cin) as isize;
    if lo < hi {
        pixels(
            g,
            x,
            w,
            (base(lo), step, hi - lo),
            inside,
            &mut dst[lo * cout..hi * cout],
        );
    }
    for o in (0..lo).chain(hi..ow) {
        let mut n = 0;
        for &(off, wi) in inside {
            let j = (wi / cout / cin) % kw;
            if g.at(1, o, j).is_some() {
                taps[n] = (off, wi);
                n += 1;
            }
        }
        let one = (base(o), step, 1);
        pixels(g, x, w, one, &taps[..n], &mut dst[o * cout..(o + 1) * cout]);
    }
}

/// The pixels whose input origins are `first + q · step` for `q < count` (each tap's offset
/// added to them lies inside `x`), all output features, into `dst` (`[count, cout]`).
fn pixels(
    g: &Direct2d,
    x: &[f32],
    w: &[f32],
    (first, step, count): (isize, isize, usize),
    taps: &[Tap],
    dst: &mut [f32],
) {
    let cout = g.cout;
    debug_assert!(taps.iter().all(|&(off, wi)| wi + cout <= w.len()
        && (0..count as isize).all(|q| {
            let at = first + q * step + off;
            at >= 0 && (at as usize) < x.len()
        })));
    debug_assert!(dst.len() >= count * cout);
    let mut c0 = 0;
    while c0 < cout {
        let width = BLOCK.min(cout - c0);
        // Whole vectors of sixteen features with AVX-512, the rest with AVX2.
        let wide = if level() >= Level::Avx512 {
            width / 16 * 16
        } else {
            0
        };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `supported` checked AVX2 and FMA, and `level` AVX-512F where `wide > 0`;
        // the taps' offsets stay inside `x` and `w` (built from the geometry `conv2d`
        // checked the slices against); `dst` holds `count` rows of `cout`.
        unsafe {
            let (x, at) = (x.as_ptr(), (first, step, count));
            let (w, dst) = (w.as_ptr().add(c0), dst.as_mut_ptr().add(c0));
            if wide > 0 {
                block_avx512(x, at, taps, w, dst, cout, wide);
            }
            if wide < width {
                block_avx2(x, at, taps, w.add(wide), dst.add(wide), cout, width - wide);
            }
        };
        c0 += width;
    }
}

/// [`block_avx2`] for `width` (16 or 32) output features in AVX-512 vectors of sixteen:
/// `WIDE_PIXELS` at a time, each feature's sum in the same order (so the same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_avx512(
    x: *const f32,
    (first, step, count): (isize, isize, usize),
    taps: &[Tap],
    w: *const f32,
    dst: *mut f32,
    cout: usize,
    width: usize,
) {
    let at = |q: usize| first + q as isize * step;
    let bases = |q: usize| -> [isize; WIDE_PIXELS] { std::array::from_fn(|i| at(q + i)) };
    // SAFETY: forwarded from `pixels`.
    unsafe {
        macro_rules! vectors {
            ($v:literal) => {{
                let mut q = 0;
                while q + WIDE_PIXELS <= count {
                    kernel_avx512::<WIDE_PIXELS, $v>(x, bases(q), taps, w, dst.add(q * cout), cout);
                    q += WIDE_PIXELS;
                }
                let d = dst.add(q * cout);
                let b = bases(q);
                match count - q {
                    5 => {
                        kernel_avx512::<5, $v>(x, [b[0], b[1], b[2], b[3], b[4]], taps, w, d, cout)
                    }
                    4 => kernel_avx512::<4, $v>(x, [b[0], b[1], b[2], b[3]], taps, w, d, cout),
                    3 => kernel_avx512::<3, $v>(x, [b[0], b[1], b[2]], taps, w, d, cout),
                    2 => kernel_avx512::<2, $v>(x, [b[0], b[1]], taps, w, d, cout),
                    1 => kernel_avx512::<1, $v>(x, [b[0]], taps, w, d, cout),
                    _ => {}
                }
            }};
        }
        match width / 16 {
            2 => vectors!(2),
            1 => vectors!(1),
            _ => {}
        }
    }
}

/// One block of `width` (1..=BLOCK) output features of the pixels: `PIXELS` at a time in
/// the kernel for the block's vectors; the features past the last whole vector are
/// computed one at a time, in the same order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(
    x: *const f32,
    (first, step, count): (isize, isize, usize),
    taps: &[Tap],
    w: *const f32,
    dst: *mut f32,
    cout: usize,
    width: usize,
) {
    let at = |q: usize| first + q as isize * step;
    // SAFETY: forwarded from `pixels`.
    unsafe {
        macro_rules! vectors {
            ($v:literal) => {{
                let mut q = 0;
                while q + PIXELS <= count {
                    let b = [at(q), at(q + 1), at(q + 2)];
                    kernel_avx2::<PIXELS, $v>(x, b, taps, w, dst.add(q * cout), cout);
                    q += PIXELS;
                }
                if count - q == 2 {
                    kernel_avx2::<2, $v>(x, [at(q), at(q + 1)], taps, w, dst.add(q * cout), cout);
                } else if count - q == 1 {
                    kernel_avx2::<1, $v>(x, [at(q)], taps, w, dst.add(q * cout), cout);
                }
            }};
        }
        match width / 8 {
            4 => vectors!(4),
            3 => vectors!(3),
            2 => vectors!(2),
            1 => vectors!(1),
            _ => {}
        }
        for c in width / 8 * 8..width {
            for q in 0..count {
                let mut acc = 0.0f32;
                for &(off, wi) in taps {
                    acc = (*x.offset(at(q) + off)).mul_add(*w.add(wi + c), acc);
                }
                *dst.add(q * cout + c) = acc;
            }
        }
    }
}

/// `P` pixels × `V` vectors of output features: per tap, the weights' `V` vectors are
/// loaded once and the pixels' `P` inputs broadcast. One body for each vector width
/// (`$lanes` features a register), as its own function compiled for its instructions.
macro_rules! pixel_kernel {
    ($name:ident, $features:literal, $vec:ty, $lanes:literal,
     $zero:ident, $splat:ident, $load:ident, $fmadd:ident, $store:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const P: usize, const V: usize>(
            x: *const f32,
            bases: [isize; P],
            taps: &[Tap],
            w: *const f32,
            dst: *mut f32,
            cout: usize,
        ) {
            use std::arch::x86_64::*;
            let mut acc = [[$zero(); V]; P];
            for &(off, wi) in taps {
                // SAFETY: the caller's bounds.
                unsafe {
                    let xs: [$vec; P] = std::array::from_fn(|q| $splat(*x.offset(bases[q] + off)));
                    let wp = w.add(wi);
                    for v in 0..V {
                        let wv = $load(wp.add(v * $lanes));
                        for (row, &xq) in acc.iter_mut().zip(&xs) {
                            row[v] = $fmadd(xq, wv, row[v]);
                        }
                    }
                }
            }
            for (q, row) in acc.iter().enumerate() {
                for (v, &a) in row.iter().enumerate() {
                    // SAFETY: `dst` holds `P` rows of `cout` features, `V` vectors from here.
                    unsafe { $store(dst.add(q * cout + v * $lanes), a) };
                }
            }
        }
    };
}

pixel_kernel!(
    kernel_avx2,
    "avx2,fma",
    __m256,
    8,
    _mm256_setzero_ps,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_fmadd_ps,
    _mm256_storeu_ps
);
pixel_kernel!(
    kernel_avx512,
    "avx512f",
    __m512,
    16,
    _mm512_setzero_ps,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_fmadd_ps,
    _mm512_storeu_ps
);

/// Taps of one kernel row (kernel columns × input features) accumulated together by the
/// kernel gradient: as `PIXELS` in the forward, three × four vectors of accumulators.
const GRAD_TAPS: usize = 3;

/// The kernel gradient `dw[i, j, c, o] = Σ_{b, y, x} x_padded[b, y·s + i·d, x·s + j·d, c] ·
/// ct[b, y, x, o]` of a convolution this kernel computes (`Direct2d::supported`), into
/// `out` (`[kh, kw, cin, cout]`). The product of the im2col patches transposed with the
/// cotangent would be only `kh · kw · cin` rows tall; here each output row's cotangent
/// (in L1) is read once per kernel row, a few taps' accumulators held in registers across
/// the row. Each core sums its share of the rows into a partial of its own; the partials
/// are added in task order, so the result does not depend on which thread ran which share.
pub(crate) fn kernel_grad2d(
    g: &Direct2d,
    x: &[f32],
    ct: &[f32],
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) -> Result<()> {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let taps = g.kernel[0] * g.kernel[1] * g.cin;
    let partial = taps * g.cout;
    if !g.supported()
        || x.len() < g.batch * ih * iw * g.cin
        || ct.len() < g.batch * oh * ow * g.cout
        || out.len() < partial
    {
        return Err(Error::Backend {
            backend: "native",
            message: "internal: direct kernel gradient operands do not match their geometry".into(),
        });
    }
    let rows = g.batch * oh;
    // Several partials per core, as the forward's tasks: a core slowed by another process
    // leaves its later shares to the others.
    let tasks = (crew::width() * TASKS_PER_CORE).min(rows).max(1);
    if scratch.len() < tasks * partial {
        scratch.resize(tasks * partial, 0.0);
    }
    let partials = &mut scratch[..tasks * partial];
    let columns = g.inner_columns();
    crew::run_chunks(partials, tasks, partial, &|start, dst| {
        let t = start / partial;
        dst.fill(0.0);
        for row in crew::part(rows, tasks, t) {
            let ct_row = &ct[row * ow * g.cout..(row + 1) * ow * g.cout];
            grad_row(g, x, ct_row, (row / oh, row % oh), columns, dst);
        }
    });
    let (first, rest) = partials.split_at(partial);
    for (k, o) in out[..partial].iter_mut().enumerate() {
        let mut acc = first[k];
        for part in rest.chunks_exact(partial) {
            acc += part[k];
        }
        *o = acc;
    }
    Ok(())
}

/// Adds the share of output rows `rows` of image `b` in the kernel gradient into `dw`
/// (`[kh, kw, cin, cout]`, not zeroed), from those rows' cotangents `ct_rows` (`[rows,
/// ow, cout]`): [`kernel_grad2d`]'s sum over one band of rows, row by row in the same
/// order, for a caller that writes the cotangent a band at a time. Errs (adding nothing)
/// when the operands do not match the geometry.
pub(crate) fn kernel_grad_rows(
    g: &Direct2d,
    x: &[f32],
    ct_rows: &[f32],
    (b, rows): (usize, std::ops::Range<usize>),
    dw: &mut [f32],
) -> Result<()> {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let row = ow * g.cout;
    if !g.supported()
        || b >= g.batch
        || rows.end > oh
        || x.len() < g.batch * ih * iw * g.cin
        || ct_rows.len() != rows.len() * row
        || dw.len() < g.kernel[0] * g.kernel[1] * g.cin * g.cout
    {
        return Err(mismatch());
    }
    let columns = g.inner_columns();
    for (r, ct_row) in rows.zip(ct_rows.chunks_exact(row.max(1))) {
        grad_row(g, x, ct_row, (b, r), columns, dw);
    }
    Ok(())
}

/// Adds output row `r` of image `b`'s share of the kernel gradient into `dw`, from that
/// row's cotangent `ct_row` (`[ow, cout]`); `lo..hi` are [`Direct2d::inner_columns`].
fn grad_row(
    g: &Direct2d,
    x: &[f32],
    ct_row: &[f32],
    (b, r): (usize, usize),
    (lo, hi): (usize, usize),
    dw: &mut [f32],
) {
    let [ih, iw] = g.input;
    let ow = g.output[1];
    let (kh, kw, cin, cout) = (g.kernel[0], g.kernel[1], g.cin, g.cout);
    let col0 = |o: usize| (o * g.strides[1]) as isize - g.pad[1] as isize;
    let row_taps = kw * cin;
    // A kernel row's taps, as offsets from a pixel's first column.
    let mut offs = [0isize; MAX_TAPS];
    for (t, o) in offs[..row_taps].iter_mut().enumerate() {
        *o = ((t / cin * g.dilation[1]) * cin + t % cin) as isize;
    }
    for i in 0..kh {
        let Some(y) = g.at(0, r, i) else { continue };
        let line = (b * ih + y) * iw * cin;
        let dw_row = &mut dw[i * row_taps * cout..(i + 1) * row_taps * cout];
        for t0 in (0..row_taps).step_by(GRAD_TAPS) {
            let n = GRAD_TAPS.min(row_taps - t0);
            let dst = &mut dw_row[t0 * cout..(t0 + n) * cout];
            if lo < hi {
                let first = line as isize + col0(lo) * cin as isize;
                let step = (g.strides[1] * cin) as isize;
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `supported` checked AVX2 and FMA; pixels `lo..hi` read their taps
                // inside input row `y` (they lie wholly inside it), and `ct_row` holds
                // their cotangents.
                unsafe {
                    grad_taps_avx2(
                        x.as_ptr(),
                        first,
                        step,
                        &offs[t0..t0 + n],
                        &ct_row[lo * cout..hi * cout],
                        dst,
                    )
                };
            }
            // The pixels at the row's ends, tap by tap (a tap on padding adds nothing).
            for o in (0..lo).chain(hi..ow) {
                let ct_px = &ct_row[o * cout..(o + 1) * cout];
                for (k, d) in dst.chunks_exact_mut(cout).enumerate() {
                    let t = t0 + k;
                    let Some(col) = g.at(1, o, t / cin) else {
                        continue;
                    };
                    let v = x[line + col * cin + t % cin];
                    for (d, &c) in d.iter_mut().zip(ct_px) {
                        *d = v.mul_add(c, *d);
                    }
                }
            }
        }
    }
}

/// Adds, for `offs.len()` (1..=GRAD_TAPS) taps, `Σ_p x[first + p·step + off] · ct[p, ..]`
/// over the pixels `p` of `ct` (`[pixels, cout]`) into the taps' rows of `dst` (`[taps,
/// cout]`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn grad_taps_avx2(
    x: *const f32,
    first: isize,
    step: isize,
    offs: &[isize],
    ct: &[f32],
    dst: &mut [f32],
) {
    let cout = dst.len() / offs.len();
    let pixels = ct.len() / cout;
    let avx512 = level() >= Level::Avx512;
    let mut c0 = 0;
    // SAFETY: forwarded from `grad_row`; `ct` and `dst` are sliced to their extents;
    // AVX-512F where `avx512`.
    unsafe {
        while c0 < cout {
            let width = BLOCK.min(cout - c0);
            // Whole vectors of sixteen features with AVX-512, then of eight with AVX2.
            let wide = if avx512 { width / 16 * 16 } else { 0 };
            macro_rules! vectors {
                ($g:literal) => {{
                    let o: [isize; $g] = offs.try_into().expect("tap count");
                    let (c, d) = (ct.as_ptr().add(c0), dst.as_mut_ptr().add(c0));
                    match wide / 16 {
                        2 => grad_kernel_avx512::<$g, 2>(x, first, step, o, c, cout, pixels, d),
                        1 => grad_kernel_avx512::<$g, 1>(x, first, step, o, c, cout, pixels, d),
                        _ => {}
                    }
                    let (c, d) = (c.add(wide), d.add(wide));
                    match (width - wide) / 8 {
                        4 => grad_kernel_avx2::<$g, 4>(x, first, step, o, c, cout, pixels, d),
                        3 => grad_kernel_avx2::<$g, 3>(x, first, step, o, c, cout, pixels, d),
                        2 => grad_kernel_avx2::<$g, 2>(x, first, step, o, c, cout, pixels, d),
                        1 => grad_kernel_avx2::<$g, 1>(x, first, step, o, c, cout, pixels, d),
                        _ => {}
                    }
                }};
            }
            match offs.len() {
                3 => vectors!(3),
                2 => vectors!(2),
                _ => vectors!(1),
            }
            for c in c0 + wide + (width - wide) / 8 * 8..c0 + width {
                for (k, &off) in offs.iter().enumerate() {
                    let mut acc = 0.0f32;
                    for p in 0..pixels {
                        let v = *x.offset(first + p as isize * step + off);
                        acc = v.mul_add(ct[p * cout + c], acc);
                    }
                    dst[k * cout + c] += acc;
                }
            }
            c0 += width;
        }
    }
}

/// `G` taps × `V` vectors of output features, accumulated over `pixels` pixels in
/// registers, then added into `dst` (`G` rows of `cout`). One body for each vector width
/// (`$lanes` features a register); each feature's sum runs in the same order in both.
macro_rules! grad_kernel {
    ($name:ident, $features:literal, $vec:ty, $lanes:literal,
     $zero:ident, $splat:ident, $load:ident, $fmadd:ident, $add:ident, $store:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name<const G: usize, const V: usize>(
            x: *const f32,
            first: isize,
            step: isize,
            offs: [isize; G],
            ct: *const f32,
            cout: usize,
            pixels: usize,
            dst: *mut f32,
        ) {
            use std::arch::x86_64::*;
            let mut acc = [[$zero(); V]; G];
            let mut at = first;
            for p in 0..pixels {
                // SAFETY: the caller's bounds.
                unsafe {
                    let xs: [$vec; G] = std::array::from_fn(|k| $splat(*x.offset(at + offs[k])));
                    let cp = ct.add(p * cout);
                    for v in 0..V {
                        let cv = $load(cp.add(v * $lanes));
                        for (row, &xk) in acc.iter_mut().zip(&xs) {
                            row[v] = $fmadd(xk, cv, row[v]);
                        }
                    }
                }
                at += step;
            }
            for (k, row) in acc.iter().enumerate() {
                for (v, &a) in row.iter().enumerate() {
                    // SAFETY: `dst` holds `G` rows of `cout` features, `V` vectors from here.
                    unsafe {
                        let d = dst.add(k * cout + v * $lanes);
                        $store(d, $add($load(d), a));
                    }
                }
            }
        }
    };
}

grad_kernel!(
    grad_kernel_avx2,
    "avx2,fma",
    __m256,
    8,
    _mm256_setzero_ps,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps,
    _mm256_storeu_ps
);
grad_kernel!(
    grad_kernel_avx512,
    "avx512f",
    __m512,
    16,
    _mm512_setzero_ps,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps,
    _mm512_storeu_ps
);
