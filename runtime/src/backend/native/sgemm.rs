//! Single-precision matrix product for x86-64 with AVX-512 or AVX2+FMA: the f32 path of
//! every `dot_general` and convolution in a training step.
//!
//! The structure is the usual one (Goto / BLIS): blocks of `B` (`KC × NC`) and `A`
//! (`MC × KC`) are packed into panels the micro-kernel streams through, and the
//! micro-kernel keeps an `MR × NR` tile of `C` in vector registers while it walks `k`.
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

thread_local! {
    /// Packed panels of `A` and `B`, grown once and reused by every product on this thread.
    static PACK: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
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
/// with row stride `ldc`.
///
/// # Safety
/// The views must address `m×k` and `k×n` valid elements, `c` must be valid for writes of
/// `(m-1)·ldc + n` elements and alias neither input, and `isa` must be supported.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    isa: Isa,
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
    PACK.with(|p| {
        let mut p = p.borrow_mut();
        let (pa, pb) = &mut *p;
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
                unsafe { pack_b(b, pc, jc, kc, nc, nr, pb) };
                let acc = accumulate || pc > 0;
                let mut ic = 0;
                while ic < m {
                    let mc = MC.min(m - ic);
                    unsafe { pack_a(a, ic, pc, mc, kc, mr, pa) };
                    for jr in (0..nc).step_by(nr) {
                        for ir in (0..mc).step_by(mr) {
                            let (rows, cols) = (mr.min(mc - ir), nr.min(nc - jr));
                            let ap = pa[ir * kc..].as_ptr();
                            let bp = pb[jr * kc..].as_ptr();
                            // SAFETY: the tile lies inside `c` (rows and columns clipped).
                            let cp = unsafe { c.add((ic + ir) * ldc + jc + jr) };
                            unsafe { tile(isa, kc, ap, bp, cp, ldc, acc, rows, cols) };
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
        let base = p * kc * mr;
        let rows = mr.min(mc - p * mr);
        for k in 0..kc {
            let dst = &mut out[base + k * mr..base + (k + 1) * mr];
            for (r, d) in dst.iter_mut().enumerate() {
                // SAFETY: inside A for r < rows.
                *d = if r < rows {
                    unsafe { a.at(ic + p * mr + r, pc + k) }
                } else {
                    0.0
                };
            }
        }
    }
}

/// Packs `B[pc..pc+kc, jc..jc+nc]` into panels of `nr` columns: panel `p`, depth `k`,
/// column `c` at `(p·kc + k)·nr + c`, zero-padded past `nc`.
unsafe fn pack_b(b: View, pc: usize, jc: usize, kc: usize, nc: usize, nr: usize, out: &mut [f32]) {
    for p in 0..nc.div_ceil(nr) {
        let base = p * kc * nr;
        let cols = nr.min(nc - p * nr);
        for k in 0..kc {
            let dst = &mut out[base + k * nr..base + (k + 1) * nr];
            if b.cs == 1 && cols == nr {
                // SAFETY: a full contiguous row segment inside B.
                let src = unsafe {
                    std::slice::from_raw_parts(
                        b.ptr
                            .offset((pc + k) as isize * b.rs + (jc + p * nr) as isize),
                        nr,
                    )
                };
                dst.copy_from_slice(src);
            } else {
                for (c, d) in dst.iter_mut().enumerate() {
                    // SAFETY: inside B for c < cols.
                    *d = if c < cols {
                        unsafe { b.at(pc + k, jc + p * nr + c) }
                    } else {
                        0.0
                    };
                }
            }
        }
    }
}

/// One `rows × cols` tile of `C` from packed panels; partial tiles go through a buffer.
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    isa: Isa,
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    acc: bool,
    rows: usize,
    cols: usize,
) {
    let (mr, nr) = match isa {
        Isa::Avx512 => (MR512, NR512),
        Isa::Avx2 => (MR256, NR256),
    };
    let full = rows == mr && cols == nr;
    let mut buf = [0f32; MR512 * NR512];
    let (dst, ld, add) = if full {
        (c, ldc, acc)
    } else {
        (buf.as_mut_ptr(), nr, false)
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller checked the ISA; `dst` holds a full tile with row stride `ld`.
    unsafe {
        match isa {
            Isa::Avx512 => kernel_avx512(kc, a, b, dst, ld, add),
            Isa::Avx2 => kernel_avx2(kc, a, b, dst, ld, add),
        }
    }
    if !full {
        for r in 0..rows {
            for col in 0..cols {
                // SAFETY: r < rows and col < cols stay inside C's tile.
                let d = unsafe { c.add(r * ldc + col) };
                let v = buf[r * nr + col];
                unsafe { *d = if acc { *d + v } else { v } };
            }
        }
    }
}

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
unsafe fn kernel_avx512(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    acc: bool,
) {
    use std::arch::x86_64::*;
    let mut t = [[_mm512_setzero_ps(); 2]; MR512];
    let (mut ap, mut bp) = (a, b);
    for _ in 0..kc {
        // SAFETY: packed panels hold `kc` steps of MR512 and NR512 values.
        unsafe {
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            for (r, row) in t.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(r));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
            ap = ap.add(MR512);
            bp = bp.add(NR512);
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
unsafe fn kernel_avx2(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
    use std::arch::x86_64::*;
    let mut t = [[_mm256_setzero_ps(); 2]; MR256];
    let (mut ap, mut bp) = (a, b);
    for _ in 0..kc {
        // SAFETY: packed panels hold `kc` steps of MR256 and NR256 values.
        unsafe {
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for (r, row) in t.iter_mut().enumerate() {
                let av = _mm256_set1_ps(*ap.add(r));
                row[0] = _mm256_fmadd_ps(av, b0, row[0]);
                row[1] = _mm256_fmadd_ps(av, b1, row[1]);
            }
            ap = ap.add(MR256);
            bp = bp.add(NR256);
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
