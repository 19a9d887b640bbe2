//! Single-precision matrix product for x86-64 with AVX-512 or AVX2+FMA: the f32 path of
//! every `dot_general` and convolution in a training step.
//!
//! The structure is the usual one (Goto / BLIS): blocks of `B` (`KC × NC`) and `A`
//! (`MC × KC`) are walked in panels, and the micro-kernel keeps an `MR × NR` tile of `C`
//! in vector registers while it walks `k`. Unlike BLIS, operands whose layout already
//! suits the kernel are read in place (a row-major `B`, a row-major `A`): packing them
//! cost more than it saved at this workload's sizes (measured).
//! We write it ourselves rather than calling the `gemm` crate for f32 because that crate
//! allocates its packing buffers on every call, and a training step must allocate
//! nothing; here the buffers are per thread and reused. (f64 and other CPUs still use the
//! `gemm` crate: they are not on the training path.)

use std::cell::RefCell;

/// Depth of a packed block: `KC` rows of `B` and columns of `A` stay in L1/L2 together.
const KC: usize = 256;
/// Rows of `A` per packed block.
const MC: usize = 144;
/// Columns of `B` per packed block.
const NC: usize = 2048;

/// Packed panels of `A` and `B`, grown once and reused by every product on this thread,
/// and which block of `A` the panels hold: (product, A, ic, pc, mc, kc).
struct Pack {
    a: Vec<f32>,
    b: Vec<f32>,
    a_key: Option<(u64, usize, usize, usize, usize, usize)>,
}

thread_local! {
    static PACK: RefCell<Pack> = const {
        RefCell::new(Pack { a: Vec::new(), b: Vec::new(), a_key: None })
    };
}

/// Sizes this thread's packed panels for the largest block any product packs, so that a
/// thread meeting a wider product for the first time, many steps into training, does not
/// allocate then (the crew's workers call this when they start).
pub(crate) fn reserve_panels() {
    let (mr, nr) = (MR512.max(MR256), NR512.max(NR256));
    PACK.with(|p| {
        let mut p = p.borrow_mut();
        let (need_a, need_b) = (MC.div_ceil(mr) * mr * KC, NC.div_ceil(nr) * nr * KC);
        if p.a.len() < need_a {
            p.a.resize(need_a, 0.0);
        }
        if p.b.len() < need_b {
            p.b.resize(need_b, 0.0);
        }
    });
}

/// The instruction sets with a kernel here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx512,
    Avx2,
}

/// The best kernel this CPU runs, if any.
pub(crate) fn isa() -> Option<Isa> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some(Isa::Avx512);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some(Isa::Avx2);
        }
    }
    None
}

/// A strided read-only matrix: element `(i, j)` is at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub(crate) struct View {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

impl View {
    #[inline(always)]
    unsafe fn at(&self, i: usize, j: usize) -> f32 {
        // SAFETY: the caller stays inside the matrix the view was made for.
        unsafe { *self.ptr.offset(i as isize * self.rs + j as isize * self.cs) }
    }
}

/// `C = A·B` (or `C += A·B` with `accumulate`) for `A: m×k`, `B: k×n`, `C: m×n` row-major
/// with row stride `ldc`. `call` names the product this is a block of: blocks of one
/// product on the same thread share `A`'s packed panels instead of packing them again.
///
/// # Safety
/// The views must address `m×k` and `k×n` valid elements, `c` must be valid for writes of
/// `(m-1)·ldc + n` elements and alias neither input, and `isa` must be supported. `A`'s
/// elements must not change between two calls with the same `call`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    isa: Isa,
    call: u64,
    m: usize,
    n: usize,
    k: usize,
    a: View,
    b: View,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    let (mr, nr) = match isa {
        Isa::Avx512 => (MR512, NR512),
        Isa::Avx2 => (MR256, NR256),
    };
    // Operands already laid out as the kernel reads them are read in place. A row-major
    // B: each `k` step reads `nr` contiguous values, `b.rs` apart, so a panel's `kc × nr`
    // block occupies as many cache lines as a packed one and the copy (all of B, per block
    // of A) is gone. A row-major A: each step broadcasts one value from each of the tile's
    // rows, and a row's cache lines serve 16 steps (packing it gathered element by
    // element); a transposed A: each step's `mr` values are contiguous. Operands whose
    // steps are a multiple of 4 KiB apart are packed: read in place, all of a panel's
    // steps map to the same L1 sets and evict each other (1024³ measured ~5% slower).
    let aliasing = |stride: isize| stride.unsigned_abs().is_multiple_of(1024);
    let direct_b = b.cs == 1 && !aliasing(b.rs);
    let direct_a =
        (a.cs == 1 && a.rs > 0 && !aliasing(a.rs)) || (a.rs == 1 && a.cs > 0 && !aliasing(a.cs));
    PACK.with(|p| {
        let mut p = p.borrow_mut();
        let Pack {
            a: pa,
            b: pb,
            a_key,
        } = &mut *p;
        let need_a = MC.div_ceil(mr) * mr * KC;
        let need_b = NC.min(n).div_ceil(nr) * nr * KC;
        if pa.len() < need_a {
            pa.resize(need_a, 0.0);
        }
        if pb.len() < need_b {
            pb.resize(need_b, 0.0);
        }
        let mut jc = 0;
        while jc < n {
            let nc = NC.min(n - jc);
            let mut pc = 0;
            while pc < k {
                let kc = KC.min(k - pc);
                // SAFETY: the packed buffers were sized for these blocks above.
                if direct_b {
                    if !nc.is_multiple_of(nr) {
                        let last = nc / nr * nr;
                        unsafe {
                            pack_b(b, pc, jc + last, kc, nc - last, nr, &mut pb[last * kc..])
                        };
                    }
                } else {
                    unsafe { pack_b(b, pc, jc, kc, nc, nr, pb) };
                }
                let acc = accumulate || pc > 0;
                let mut ic = 0;
                while ic < m {
                    let mc = MC.min(m - ic);
                    let key = (call, a.ptr as usize, ic, pc, mc, kc);
                    if !direct_a && *a_key != Some(key) {
                        unsafe { pack_a(a, ic, pc, mc, kc, mr, pa) };
                        *a_key = Some(key);
                    }
                    for jr in (0..nc).step_by(nr) {
                        let cols = nr.min(nc - jr);
                        let (bp, bs) = if direct_b && cols == nr {
                            // SAFETY: a full panel inside B.
                            let p =
                                unsafe { b.ptr.offset(pc as isize * b.rs + (jc + jr) as isize) };
                            (p, b.rs as usize)
                        } else {
                            (pb[jr * kc..].as_ptr(), nr)
                        };
                        for ir in (0..mc).step_by(mr) {
                            let rows = mr.min(mc - ir);
                            let (ap, a_strides) = if direct_a {
                                // SAFETY: rows `ic+ir..+rows`, depths `pc..pc+kc` lie in A.
                                let p = unsafe {
                                    a.ptr.offset((ic + ir) as isize * a.rs + pc as isize * a.cs)
                                };
                                (p, (a.rs as usize, a.cs as usize))
                            } else {
                                (pa[ir * kc..].as_ptr(), (1, mr))
                            };
                            // SAFETY: the tile lies inside `c` (rows and columns clipped).
                            let cp = unsafe { c.add((ic + ir) * ldc + jc + jr) };
                            unsafe {
                                tile(isa, kc, ap, a_strides, bp, bs, cp, ldc, acc, rows, cols)
                            };
                        }
                    }
                    ic += mc;
                }
                pc += kc;
            }
            jc += nc;
        }
    });
}

/// Packs `A[ic..ic+mc, pc..pc+kc]` into panels of `mr` rows: panel `p`, depth `k`, row `r`
/// at `(p·kc + k)·mr + r`, zero-padded past `mc`.
unsafe fn pack_a(a: View, ic: usize, pc: usize, mc: usize, kc: usize, mr: usize, out: &mut [f32]) {
    for p in 0..mc.div_ceil(mr) {
        let rows = mr.min(mc - p * mr);
        let panel = &mut out[p * kc * mr..(p + 1) * kc * mr];
        // SAFETY: rows `ic+p·mr..+rows` and depths `pc..pc+kc` lie in A.
        unsafe { pack_panel(a, ic + p * mr, pc, rows, mr, panel) };
    }
}

/// Packs `B[pc..pc+kc, jc..jc+nc]` into panels of `nr` columns: panel `p`, depth `k`,
/// column `c` at `(p·kc + k)·nr + c`, zero-padded past `nc`. B's transpose is packed as
/// A's panels are, with rows and columns swapped.
unsafe fn pack_b(b: View, pc: usize, jc: usize, kc: usize, nc: usize, nr: usize, out: &mut [f32]) {
    let bt = View {
        ptr: b.ptr,
        rs: b.cs,
        cs: b.rs,
    };
    for p in 0..nc.div_ceil(nr) {
        let cols = nr.min(nc - p * nr);
        let panel = &mut out[p * kc * nr..(p + 1) * kc * nr];
        // SAFETY: columns `jc+p·nr..+cols` and depths `pc..pc+kc` lie in B.
        unsafe { pack_panel(bt, jc + p * nr, pc, cols, nr, panel) };
    }
}

/// One panel of `panel.len() / w` depths: `panel[k·w + r] = m[i0 + r, d0 + k]` for
/// `r < n`, zero for `n ≤ r < w` (the padding written once, not tested per element).
/// When a depth's `n` values are contiguous (a transposed A, a row-major B) each is one
/// copy; otherwise the panel is written in order, reading `n` rows in step, each row's
/// cache lines used over 16 depths (measured faster than walking each row and scattering
/// into the panel).
unsafe fn pack_panel(m: View, i0: usize, d0: usize, n: usize, w: usize, panel: &mut [f32]) {
    if n < w {
        panel.fill(0.0);
    }
    if m.rs == 1 {
        // Each depth's `n` values are contiguous.
        for (k, dst) in panel.chunks_exact_mut(w).enumerate() {
            // SAFETY: the caller's bounds.
            let src = unsafe {
                std::slice::from_raw_parts(m.ptr.offset(i0 as isize + (d0 + k) as isize * m.cs), n)
            };
            dst[..n].copy_from_slice(src);
        }
    } else {
        for (k, dst) in panel.chunks_exact_mut(w).enumerate() {
            for (r, d) in dst[..n].iter_mut().enumerate() {
                // SAFETY: the caller's bounds.
                *d = unsafe { m.at(i0 + r, d0 + k) };
            }
        }
    }
}

/// One `rows × cols` tile of `C` from a packed panel of `A` and a panel of `B` whose `k`
/// steps are `bs` apart. Short tiles run a kernel for exactly their rows; narrow ones go
/// through a buffer.
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    isa: Isa,
    kc: usize,
    a: *const f32,
    a_strides: (usize, usize),
    b: *const f32,
    bs: usize,
    c: *mut f32,
    ldc: usize,
    acc: bool,
    rows: usize,
    cols: usize,
) {
    let nr = match isa {
        Isa::Avx512 => NR512,
        Isa::Avx2 => NR256,
    };
    let full = cols == nr;
    // Only a narrow tile goes through the buffer; it is written whole by the kernel, so
    // it needs no zeroing (a full tile's call would otherwise clear 1.5 KB for nothing).
    let mut buf = std::mem::MaybeUninit::<[f32; MR512 * NR512]>::uninit();
    let (dst, ld, add) = if full {
        (c, ldc, acc)
    } else {
        (buf.as_mut_ptr().cast::<f32>(), nr, false)
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller checked the ISA; `dst` holds `rows` full rows with stride `ld`.
    unsafe {
        match isa {
            Isa::Avx512 => rows_avx512(rows, kc, a, a_strides, b, bs, dst, ld, add),
            Isa::Avx2 => rows_avx2(rows, kc, a, a_strides, b, bs, dst, ld, add),
        }
    }
    if !full {
        let buf = buf.as_ptr().cast::<f32>();
        for r in 0..rows {
            for col in 0..cols {
                // SAFETY: r < rows and col < cols stay inside C's tile, and the kernel wrote
                // rows `0..rows` of the buffer in full (`nr` columns each).
                let d = unsafe { c.add(r * ldc + col) };
                let v = unsafe { *buf.add(r * nr + col) };
                unsafe { *d = if acc { *d + v } else { v } };
            }
        }
    }
}

/// Dispatches `rows` (1..=MR) to the kernel computing exactly that many rows.
macro_rules! by_rows {
    ($name:ident, $kernel:ident, $($r:literal)*) => {
        #[cfg(target_arch = "x86_64")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            rows: usize,
            kc: usize,
            a: *const f32,
            a_strides: (usize, usize),
            b: *const f32,
            bs: usize,
            c: *mut f32,
            ldc: usize,
            acc: bool,
        ) {
            // SAFETY: forwarded from `tile`.
            unsafe {
                match rows {
                    $($r => $kernel::<$r>(kc, a, a_strides, b, bs, c, ldc, acc),)*
                    _ => unreachable!("tile rows out of range"),
                }
            }
        }
    };
}
by_rows!(rows_avx512, kernel_avx512, 1 2 3 4 5 6 7 8 9 10 11 12);
by_rows!(rows_avx2, kernel_avx2, 1 2 3 4 5 6);

/// AVX-512 tile: 12 rows × 32 columns (24 accumulators), one FMA per register per `k`.
const MR512: usize = 12;
const NR512: usize = 32;
/// AVX2 tile: 6 rows × 16 columns (12 accumulators), the classic shape.
const MR256: usize = 6;
const NR256: usize = 16;

// The tiles live in fixed-size arrays indexed by constants after full unrolling, which
// LLVM keeps in vector registers (checked in the assembly: no spills in the k loop).

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512<const R: usize>(
    kc: usize,
    a: *const f32,
    (ars, acs): (usize, usize),
    b: *const f32,
    bs: usize,
    c: *mut f32,
    ldc: usize,
    acc: bool,
) {
    use std::arch::x86_64::*;
    let mut t = [[_mm512_setzero_ps(); 2]; R];
    let (mut ap, mut bp) = (a, b);
    for _ in 0..kc {
        // SAFETY: A's panel holds `kc` steps of MR512 values; B's `kc` steps of NR512
        // values, `bs` apart.
        unsafe {
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            for (r, row) in t.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(r * ars));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
            ap = ap.add(acs);
            bp = bp.add(bs);
        }
    }
    for (r, row) in t.iter().enumerate() {
        // SAFETY: the tile's rows are `ldc` apart inside C.
        unsafe {
            let cp = c.add(r * ldc);
            let (mut v0, mut v1) = (row[0], row[1]);
            if acc {
                v0 = _mm512_add_ps(v0, _mm512_loadu_ps(cp));
                v1 = _mm512_add_ps(v1, _mm512_loadu_ps(cp.add(16)));
            }
            _mm512_storeu_ps(cp, v0);
            _mm512_storeu_ps(cp.add(16), v1);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2<const R: usize>(
    kc: usize,
    a: *const f32,
    (ars, acs): (usize, usize),
    b: *const f32,
    bs: usize,
    c: *mut f32,
    ldc: usize,
    acc: bool,
) {
    use std::arch::x86_64::*;
    let mut t = [[_mm256_setzero_ps(); 2]; R];
    let (mut ap, mut bp) = (a, b);
    for _ in 0..kc {
        // SAFETY: A's panel holds `kc` steps of MR256 values; B's `kc` steps of NR256
        // values, `bs` apart.
        unsafe {
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for (r, row) in t.iter_mut().enumerate() {
                let av = _mm256_set1_ps(*ap.add(r * ars));
                row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                row[1] = _mm256_fmadd_ps(av, b1, row[1]);
            }
            ap = ap.add(acs);
            bp = bp.add(bs);
        }
    }
    for (r, row) in t.iter().enumerate() {
        // SAFETY: the tile's rows are `ldc` apart inside C.
        unsafe {
            let cp = c.add(r * ldc);
            let (mut v0, mut v1) = (row[0], row[1]);
            if acc {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cp));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cp.add(8)));
            }
            _mm256_storeu_ps(cp, v0);
            _mm256_storeu_ps(cp.add(8), v1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel this CPU runs, every layout of A and B (row-major, transposed: read in
    /// place or packed), ragged edges and a depth past one block, with and without
    /// accumulation, against a plain f64 product.
    #[test]
    fn products_match_a_plain_loop_for_every_layout() {
        let isas: Vec<Isa> = match isa() {
            Some(Isa::Avx512) => vec![Isa::Avx512, Isa::Avx2],
            Some(Isa::Avx2) => vec![Isa::Avx2],
            None => vec![],
        };
        // The second shape's row-major A has rows 4 KiB apart: packed, not read in place.
        for (m, n, k) in [(37, 45, 300), (13, 40, 1024)] {
            check_products(&isas, m, n, k);
        }
    }

    fn check_products(isas: &[Isa], m: usize, n: usize, k: usize) {
        let val = |i: usize| ((i * 7919) % 101) as f32 / 50.0 - 1.0;
        let a: Vec<f32> = (0..m * k).map(val).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i + 13)).collect();
        for &isa in isas {
            for a_t in [false, true] {
                for b_t in [false, true] {
                    for acc in [false, true] {
                        // The same logical A (m×k) and B (k×n), stored either way.
                        let (av, bv) = (
                            if a_t { transpose(&a, m, k) } else { a.clone() },
                            if b_t { transpose(&b, k, n) } else { b.clone() },
                        );
                        let view = |d: &[f32], t: bool, rows: usize, cols: usize| View {
                            ptr: d.as_ptr(),
                            rs: if t { 1 } else { cols as isize },
                            cs: if t { rows as isize } else { 1 },
                        };
                        let ldc = n + 3;
                        let mut c = vec![0.5f32; m * ldc];
                        // SAFETY: the views address exactly A and B; C holds m rows of ldc.
                        unsafe {
                            sgemm(
                                isa,
                                u64::MAX - 1,
                                m,
                                n,
                                k,
                                view(&av, a_t, m, k),
                                view(&bv, b_t, k, n),
                                c.as_mut_ptr(),
                                ldc,
                                acc,
                            )
                        };
                        for i in 0..m {
                            for j in 0..n {
                                let want: f64 = (0..k)
                                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                                    .sum::<f64>()
                                    + if acc { 0.5 } else { 0.0 };
                                let got = c[i * ldc + j] as f64;
                                assert!(
                                    (got - want).abs() < 1e-3,
                                    "{isa:?} a_t={a_t} b_t={b_t} acc={acc} ({i},{j}): {got} vs {want}"
                                );
                            }
                            // Past column n the row is untouched.
                            assert_eq!(&c[i * ldc + n..(i + 1) * ldc], &[0.5; 3]);
                        }
                    }
                }
            }
        }
    }

    fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let mut t = vec![0.0; x.len()];
        for r in 0..rows {
            for c in 0..cols {
                t[c * rows + r] = x[r * cols + c];
            }
        }
        t
    }
}
