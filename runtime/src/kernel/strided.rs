//! One strided-copy loop that broadcast, transpose, slice and reverse all reduce to.

use crate::types::MAX_RANK;

/// Index arrays live on the stack: the IR caps ranks at `MAX_RANK`, so kernels
/// allocate nothing per call.
pub(crate) type Dims = [usize; MAX_RANK];
pub(crate) type Strides = [isize; MAX_RANK];

/// `out[i] = src[base + Σ_d idx_d · strides[d]]` where `idx` is the row-major multi-index
/// of `i` over `dims`. Strides may be 0 (broadcast) or negative (reverse).
pub(crate) fn gather<T: Copy>(
    src: &[T],
    base: isize,
    strides: &[isize],
    dims: &[usize],
    out: &mut [T],
) {
    debug_assert_eq!(strides.len(), dims.len());
    let (dims, strides, n) = collapse(dims, strides);
    let dims = &dims[..n];
    let strides = &strides[..n];
    if out.is_empty() {
        return;
    }
    if n == 0 {
        out[0] = src[base as usize];
        return;
    }
    let inner = dims[n - 1];
    let inner_stride = strides[n - 1];
    let mut idx: Dims = [0; MAX_RANK];
    let mut offset = base;
    for row in out.chunks_exact_mut(inner) {
        let start = offset;
        match inner_stride {
            1 => row.copy_from_slice(&src[start as usize..start as usize + inner]),
            0 => row.fill(src[start as usize]),
            s => {
                for (k, o) in row.iter_mut().enumerate() {
                    *o = src[(start + k as isize * s) as usize];
                }
            }
        }
        // Advance the multi-index over the outer dimensions.
        let mut d = n - 1;
        loop {
            if d == 0 {
                break;
            }
            d -= 1;
            idx[d] += 1;
            offset += strides[d];
            if idx[d] < dims[d] {
                break;
            }
            offset -= strides[d] * dims[d] as isize;
            idx[d] = 0;
        }
    }
}

/// Merges neighbouring dimensions that are contiguous in the source (and drops size-1
/// dimensions), so most copies become a few long rows.
fn collapse(dims: &[usize], strides: &[isize]) -> (Dims, Strides, usize) {
    let mut od: Dims = [0; MAX_RANK];
    let mut os: Strides = [0; MAX_RANK];
    let mut n = 0;
    for (&d, &s) in dims.iter().zip(strides) {
        if d == 1 {
            continue;
        }
        if n > 0 && os[n - 1] == s * d as isize {
            od[n - 1] *= d;
            os[n - 1] = s;
            continue;
        }
        od[n] = d;
        os[n] = s;
        n += 1;
    }
    (od, os, n)
}

/// Row-major strides of `dims`, on the stack.
pub(crate) fn strides(dims: &[usize]) -> Strides {
    let mut s: Strides = [0; MAX_RANK];
    let mut acc = 1isize;
    for i in (0..dims.len()).rev() {
        s[i] = acc;
        acc *= dims[i] as isize;
    }
    s
}
