//! The native backend's matrix product: the `gemm` crate (runtime-dispatched AVX-512 /
//! AVX2 / scalar kernels) behind a bounds-checked view, split across the crew's cores.

use crate::kernel::real::Real;
use crate::{Error, Result};

/// A strided matrix view into a slice: element `(i, j)` is `data[off + i*rs + j*cs]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat<'a, T> {
    pub data: &'a [T],
    pub off: usize,
    pub rs: isize,
    pub cs: isize,
}

impl<T> Mat<'_, T> {
    /// Whether every element of an `rows × cols` view lies inside the slice.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        if rows == 0 || cols == 0 {
            return true;
        }
        let corner =
            |i: usize, j: usize| self.off as isize + i as isize * self.rs + j as isize * self.cs;
        let cs = [
            corner(0, 0),
            corner(rows - 1, 0),
            corner(0, cols - 1),
            corner(rows - 1, cols - 1),
        ];
        cs.iter().all(|&c| c >= 0 && (c as usize) < self.data.len())
    }
}

/// Products with at least this many multiply-adds are split across the crew's cores;
/// smaller ones stay on the calling thread, where a hand-off would cost more than it saves.
pub(crate) const PARALLEL_MIN_FLOPS: usize = 1 << 20;

/// Rows (of C, or depths of a product split along k) are split in multiples of this.
const ROW_UNIT: usize = 4;
/// Products with at most this many outputs may be split along k (see `matmul`).
const SPLIT_K_MAX_OUTPUT: usize = 1 << 16;

thread_local! {
    /// The partial products of a product split along k, grown once per thread.
    static SPLIT_K: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `c = a·b` (or `c += a·b` when `accumulate`) for `a: m×k`, `b: k×n`, `c: m×n` row-major
/// with row stride `ldc`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul<T: Real>(
    m: usize,
    n: usize,
    k: usize,
    a: Mat<'_, T>,
    b: Mat<'_, T>,
    c: &mut [T],
    ldc: usize,
    accumulate: bool,
) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if !(a.fits(m, k) && b.fits(k, n) && (m - 1) * ldc + n <= c.len()) {
        return Err(Error::Backend {
            backend: "native",
            message: format!("internal: matmul views {m}x{k} · {k}x{n} out of bounds"),
        });
    }
    if k == 0 {
        if !accumulate {
            for r in 0..m {
                c[r * ldc..r * ldc + n].fill(T::zero());
            }
        }
        return Ok(());
    }
    let a_ptr = a.data[a.off..].as_ptr() as usize;
    let b_ptr = b.data[b.off..].as_ptr() as usize;
    let c_ptr = c.as_mut_ptr() as usize;
    let width = super::crew::width();
    let parallel = m * n * k >= PARALLEL_MIN_FLOPS && width > 1;
    let isa = super::sgemm::isa();
    let f32_kernel = isa.is_some() && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>();
    // Names this product, so blocks on one thread share A's packing (A is not written
    // while the product runs).
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // SAFETY (of every `View` below): `off` stays inside the checked views.
    let view = |p: usize, off: isize, rs: isize, cs: isize| super::sgemm::View {
        ptr: unsafe { (p as *const f32).offset(off) },
        rs,
        cs,
    };
    // A short product through a deep operand (a small batch through a wide layer:
    // [32×784]·[784×128]) is split along k instead (see `split_k`).
    if parallel && f32_kernel && m * n <= SPLIT_K_MAX_OUTPUT && k >= (8 * m).max(256) {
        let isa = isa.expect("checked above");
        let (a, b) = (view(a_ptr, 0, a.rs, a.cs), view(b_ptr, 0, b.rs, b.cs));
        // SAFETY: T is f32 (checked above), the views and `c` were checked at the top.
        unsafe {
            split_k(
                isa,
                call,
                m,
                n,
                k,
                a,
                b,
                c_ptr as *mut f32,
                ldc,
                accumulate,
                width,
            )
        };
        return Ok(());
    }
    // One column block (or row block) per core for large products; column blocks are
    // multiples of 32 so every block keeps whole vector registers. A few blocks per core:
    // a core that finishes early steals from one that started late.
    let tasks = if parallel { width * 3 } else { 1 };
    // Split the longer side: each block packs all of the other operand, so splitting the
    // short side would make every core pack (and read) the whole long one.
    let by_cols = n >= 32 && n >= m;
    let (extent, unit) = if by_cols { (n, 32) } else { (m, ROW_UNIT) };
    let units = extent.div_ceil(unit);
    let tasks = tasks.min(units).max(1);
    let block = |t: usize| {
        let r = super::crew::part(units, tasks, t);
        let (lo, hi) = ((r.start * unit).min(extent), (r.end * unit).min(extent));
        if lo == hi {
            return;
        }
        let (mm, nn, a_off, b_off, c_off) = if by_cols {
            (m, hi - lo, 0isize, lo as isize * b.cs, lo as isize)
        } else {
            (hi - lo, n, lo as isize * a.rs, 0, (lo * ldc) as isize)
        };
        // f32 on x86-64 takes our own kernels (no allocation per call); see `sgemm`.
        if let (Some(isa), true) = (isa, f32_kernel) {
            // SAFETY: as for the `gemm` call below; T is f32 (checked just above).
            unsafe {
                super::sgemm::sgemm(
                    isa,
                    call,
                    mm,
                    nn,
                    k,
                    view(a_ptr, a_off, a.rs, a.cs),
                    view(b_ptr, b_off, b.rs, b.cs),
                    (c_ptr as *mut f32).offset(c_off),
                    ldc,
                    accumulate,
                );
            }
            return;
        }
        // SAFETY: the views were checked to lie inside their slices above; blocks write
        // disjoint columns (or rows) of `c`, which no one else touches while they run, and
        // `crew::run` returns only when every block is done.
        unsafe {
            gemm::gemm(
                mm,
                nn,
                k,
                (c_ptr as *mut T).offset(c_off),
                1,
                ldc as isize,
                accumulate,
                (a_ptr as *const T).offset(a_off),
                a.cs,
                a.rs,
                (b_ptr as *const T).offset(b_off),
                b.cs,
                b.rs,
                T::one(),
                T::one(),
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
    };
    if tasks == 1 {
        block(0);
    } else {
        super::crew::run(tasks, &block);
    }
    Ok(())
}

/// `c = a·b` (or `+=`) split along k, one share of B's rows per core: the rows of the
/// layer's weights whose gradient rows and optimizer update run on that core (the same
/// `crew::part` of the same extent), so they stay in its cache. The partial products are
/// added in task order: the result does not depend on which thread ran which share.
///
/// # Safety
/// As for [`super::sgemm::sgemm`] with these arguments.
#[allow(clippy::too_many_arguments)]
unsafe fn split_k(
    isa: super::sgemm::Isa,
    call: u64,
    m: usize,
    n: usize,
    k: usize,
    a: super::sgemm::View,
    b: super::sgemm::View,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    width: usize,
) {
    let units = k.div_ceil(ROW_UNIT);
    let parts = width.min(units);
    // Addresses and strides, so the closures may be shared between threads.
    let (a_at, b_at, c_ptr) = (
        (a.ptr as usize, a.rs, a.cs),
        (b.ptr as usize, b.rs, b.cs),
        c as usize,
    );
    SPLIT_K.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let need = (parts - 1) * m * n;
        if scratch.len() < need {
            scratch.resize(need, 0.0);
        }
        let s_ptr = scratch.as_mut_ptr() as usize;
        super::crew::run(parts, &|t| {
            let r = super::crew::part(units, parts, t);
            let (k0, k1) = ((r.start * ROW_UNIT).min(k), (r.end * ROW_UNIT).min(k));
            // Share 0 goes straight to C, the others to their own scratch.
            let (dst, ld, add) = if t == 0 {
                (c_ptr as *mut f32, ldc, accumulate)
            } else {
                ((s_ptr as *mut f32).wrapping_add((t - 1) * m * n), n, false)
            };
            // A view starting at depth `k0`.
            let from_k0 = |(p, rs, cs): (usize, isize, isize), step: isize| super::sgemm::View {
                ptr: (p as *const f32).wrapping_offset(k0 as isize * step),
                rs,
                cs,
            };
            // SAFETY: the caller's views and `c`; each share writes its own destination,
            // the scratch holds `parts - 1` outputs of `m × n`, and the shares cover depths
            // `k0..k1` of the views (`parts ≤ units`, so none is empty).
            unsafe {
                super::sgemm::sgemm(
                    isa,
                    call,
                    m,
                    n,
                    k1 - k0,
                    from_k0(a_at, a_at.2),
                    from_k0(b_at, b_at.1),
                    dst,
                    ld,
                    add,
                );
            }
        });
        // Each output row adds the shares in task order; with more than two shares the
        // rows are split over the crew too (one core adding fifteen partial products would
        // cost as much as its share of the product).
        let partials = &scratch[..need];
        let add_rows = |rows: std::ops::Range<usize>| {
            for i in rows {
                // SAFETY: row `i` of C lies in `c` (the caller's contract), and tasks add
                // into disjoint rows.
                let row =
                    unsafe { std::slice::from_raw_parts_mut((c_ptr as *mut f32).add(i * ldc), n) };
                for partial in partials.chunks_exact(m * n) {
                    for (d, &x) in row.iter_mut().zip(&partial[i * n..(i + 1) * n]) {
                        *d += x;
                    }
                }
            }
        };
        if parts <= 2 {
            add_rows(0..m);
        } else {
            super::crew::run(parts, &|t| add_rows(super::crew::part(m, parts, t)));
        }
    });
}
