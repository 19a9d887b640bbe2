//! The native backend's matrix product: the `gemm` crate (runtime-dispatched AVX-512 /
//! AVX2 / scalar kernels, multithreaded through rayon) behind a bounds-checked view.

use crate::ops::real::Real;
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

/// Products with at least this many multiply-adds use every core; smaller ones stay on
/// the calling thread, where a thread hand-off would cost more than it saves.
pub(crate) const PARALLEL_MIN_FLOPS: usize = 1 << 23;

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
    let par = if m * n * k >= PARALLEL_MIN_FLOPS && rayon::current_num_threads() > 1 {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the check above ensures that every element each view addresses lies inside
    // its slice, and `c` is borrowed mutably so it aliases neither input.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ldc as isize,
            accumulate,
            a.data.as_ptr().add(a.off),
            a.cs,
            a.rs,
            b.data.as_ptr().add(b.off),
            b.cs,
            b.rs,
            T::one(),
            T::one(),
            false,
            false,
            false,
            par,
        );
    }
    Ok(())
}
