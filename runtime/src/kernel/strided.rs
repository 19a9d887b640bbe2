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
    gather_rows(src, base, strides, dims, 0, out);
}

/// `gather` over collapsed `dims` of output rows `first..` (rows of the innermost
/// dimension), into `out`.
fn gather_rows<T: Copy>(
    src: &[T],
    base: isize,
    strides: &[isize],
    dims: &[usize],
    first: usize,
    out: &mut [T],
) {
    let n = dims.len();
    let inner = dims[n - 1];
    let inner_stride = strides[n - 1];
    let mut idx: Dims = [0; MAX_RANK];
    let mut offset = base;
    let mut rest = first;
    for d in (0..n - 1).rev() {
        idx[d] = rest % dims[d];
        rest /= dims[d];
        offset += idx[d] as isize * strides[d];
    }
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

/// Below this many elements a permutation runs on the calling thread (a copy is fast per
/// element: in the issue-16 CNN a 100,352-element transpose split over the crew took
/// several times longer than on one thread).
const PARALLEL_MIN: usize = 1 << 18;
/// Side of the square tiles a permutation moves when the source's contiguous axis is not
/// the output's: each tile reads `TILE` source rows and writes `TILE` output rows, whole
/// cache lines both ways.
const TILE: usize = 16;

/// `gather` from `base` 0 for a permutation (every stride non-negative, every source
/// element read once): split over the crew, and in tiles when the source's contiguous
/// axis is not the output's innermost (a transpose), where an element-by-element walk
/// would touch a new cache line per element read.
pub(crate) fn permute<T: Copy + Send + Sync>(
    src: &[T],
    strides: &[isize],
    dims: &[usize],
    out: &mut [T],
) {
    debug_assert!(strides.iter().all(|&s| s >= 0));
    let (cd, cs, n) = collapse(dims, strides);
    if out.is_empty() || n == 0 {
        return gather(src, 0, strides, dims, out);
    }
    let (cd, cs) = (&cd[..n], &cs[..n]);
    let width = crate::kernel::crew::width();
    let parallel = width >= 2 && out.len() >= PARALLEL_MIN;
    let contiguous = (0..n - 1).find(|&k| cs[k] == 1);
    let Some(d) = contiguous.filter(|_| cs[n - 1] != 1) else {
        if !parallel {
            return gather_rows(src, 0, cs, cd, 0, out);
        }
        let inner = cd[n - 1];
        let tasks = (width * 4).min(out.len() / inner).max(1);
        crate::kernel::crew::run_chunks(out, tasks, inner, &|start, chunk| {
            gather_rows(src, 0, cs, cd, start / inner, chunk)
        });
        return;
    };
    // Output strides; a unit is one TILE-run along `d` of every other dimension's index
    // but the innermost, moved in TILE x TILE tiles.
    let mut os: Strides = [0; MAX_RANK];
    let mut acc = 1isize;
    for k in (0..n).rev() {
        os[k] = acc;
        acc *= cd[k] as isize;
    }
    let (len, step) = (cd[n - 1], cs[n - 1]);
    let blocks = cd[d].div_ceil(TILE);
    let units = out.len() / len / cd[d] * blocks;
    let total = out.len();
    let dst = out.as_mut_ptr() as usize;
    let run_units = |us: std::ops::Range<usize>| {
        for u in us {
            let (block, mut rest) = (u % blocks, u / blocks);
            let (mut s, mut o) = (0isize, 0isize);
            for k in (0..n - 1).rev().filter(|&k| k != d) {
                let i = (rest % cd[k]) as isize;
                rest /= cd[k];
                s += i * cs[k];
                o += i * os[k];
            }
            let i0 = block * TILE;
            let rows = TILE.min(cd[d] - i0);
            s += i0 as isize; // cs[d] == 1
            o += i0 as isize * os[d];
            let mut l0 = 0;
            while l0 < len {
                let cols = TILE.min(len - l0);
                let at = |i: usize| (o + i as isize * os[d]) as usize + l0;
                assert!(at(rows - 1) + cols <= total);
                let from = |l: usize| s as usize + (l0 + l) * step as usize;
                #[cfg(target_arch = "x86_64")]
                if rows == TILE && cols == TILE && std::mem::size_of::<T>() == 4 {
                    assert!(from(TILE - 1) + TILE <= src.len());
                    // SAFETY: the tile's reads are in `src` and its writes in `out` (both
                    // checked above), and no other task writes them (see below); the
                    // elements are 4 bytes, moved as they are (shuffles, no arithmetic).
                    unsafe {
                        tile_4byte(
                            src.as_ptr().add(from(0)) as *const f32,
                            step as usize,
                            (dst as *mut T).add(at(0)) as *mut f32,
                            os[d] as usize,
                        );
                    }
                    l0 += cols;
                    continue;
                }
                if rows == TILE && cols == TILE {
                    // Read TILE source rows whole, write TILE output rows whole.
                    let mut tile = [[src[from(0)]; TILE]; TILE];
                    for (l, t) in tile.iter_mut().enumerate() {
                        *t = src[from(l)..from(l) + TILE]
                            .try_into()
                            .expect("a row of TILE elements");
                    }
                    #[allow(clippy::needless_range_loop)] // `i` is a column of `tile`
                    for i in 0..TILE {
                        let row: [T; TILE] = std::array::from_fn(|l| tile[l][i]);
                        // SAFETY: `at(i)..at(i) + TILE` is in `out` (checked above), and
                        // each output element belongs to exactly one unit, so no two
                        // tasks write it; `out` stays mutably borrowed until every task
                        // is done.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                row.as_ptr(),
                                (dst as *mut T).add(at(i)),
                                TILE,
                            );
                        }
                    }
                } else {
                    for i in 0..rows {
                        for l in 0..cols {
                            // SAFETY: as above.
                            unsafe {
                                *(dst as *mut T).add(at(i) + l) = src[from(l) + i];
                            }
                        }
                    }
                }
                l0 += cols;
            }
        }
    };
    if !parallel {
        return run_units(0..units);
    }
    let tasks = (width * 4).min(units).max(1);
    crate::kernel::crew::run(tasks, &|t| {
        run_units(crate::kernel::crew::part(units, tasks, t))
    });
}

/// One TILE x TILE tile of 4-byte elements, in 4 x 4 blocks of SSE shuffles:
/// `dst[i·dst_stride + l] = src[l·src_stride + i]`.
///
/// # Safety
/// Every `src[l·src_stride + i]` and `dst[i·dst_stride + l]` (`i, l < TILE`) must be in
/// bounds, and no one else may access the written elements meanwhile.
#[cfg(target_arch = "x86_64")]
unsafe fn tile_4byte(src: *const f32, src_stride: usize, dst: *mut f32, dst_stride: usize) {
    use std::arch::x86_64::*;
    for bl in (0..TILE).step_by(4) {
        for bi in (0..TILE).step_by(4) {
            let r = |l: usize| _mm_loadu_ps(src.add((bl + l) * src_stride + bi));
            let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
            let t0 = _mm_unpacklo_ps(r0, r1);
            let t1 = _mm_unpacklo_ps(r2, r3);
            let t2 = _mm_unpackhi_ps(r0, r1);
            let t3 = _mm_unpackhi_ps(r2, r3);
            let w = |k: usize, v| _mm_storeu_ps(dst.add((bi + k) * dst_stride + bl), v);
            w(0, _mm_movelh_ps(t0, t1));
            w(1, _mm_movehl_ps(t1, t0));
            w(2, _mm_movelh_ps(t2, t3));
            w(3, _mm_movehl_ps(t3, t2));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `out[i] = src[Σ idx_d · strides[d]]`, one element at a time.
    fn reference(src: &[u32], strides: &[isize], dims: &[usize]) -> Vec<u32> {
        let n: usize = dims.iter().product();
        (0..n)
            .map(|mut i| {
                let mut off = 0isize;
                for d in (0..dims.len()).rev() {
                    off += (i % dims[d]) as isize * strides[d];
                    i /= dims[d];
                }
                src[off as usize]
            })
            .collect()
    }

    /// Every permutation of small and odd shapes, and the large transposes of a CNN's
    /// filter gradient (tiled and split over the crew), against the element walk.
    #[test]
    fn permute_matches_the_element_walk() {
        let shapes: [&[usize]; 7] = [
            &[5],
            &[3, 7],
            &[17, 33],
            &[2, 3, 4, 5],
            &[1, 19, 1, 23],
            &[128, 13, 13, 32],
            &[40, 9, 33, 17],
        ];
        let mut checked = 0;
        for xd in shapes {
            let r = xd.len();
            let src: Vec<u32> = (0..xd.iter().product::<usize>() as u32).collect();
            let xs = strides(xd);
            // Every permutation (Heap's algorithm).
            let mut perm: Vec<usize> = (0..r).collect();
            let mut c = vec![0usize; r];
            let mut visit = |perm: &[usize]| {
                let st: Vec<isize> = perm.iter().map(|&p| xs[p]).collect();
                let od: Vec<usize> = perm.iter().map(|&p| xd[p]).collect();
                let mut out = vec![u32::MAX; src.len()];
                permute(&src, &st, &od, &mut out);
                assert_eq!(out, reference(&src, &st, &od), "{xd:?} {perm:?}");
                checked += 1;
            };
            visit(&perm);
            let mut i = 0;
            while i < r {
                if c[i] < i {
                    perm.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
                    visit(&perm);
                    c[i] += 1;
                    i = 0;
                } else {
                    c[i] = 0;
                    i += 1;
                }
            }
        }
        assert_eq!(checked, 1 + 2 + 2 + 24 + 24 + 24 + 24);
    }
}
