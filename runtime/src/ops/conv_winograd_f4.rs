//! F(4×4, 3×3): tiles of 4×4 output pixels, each from a 6×6 input window, `y = Aᵀ [(G g
//! Gᵀ) ⊙ (Bᵀ d B)] A` with the interpolation points 0, ±1, ±2 and ∞; the kernel gradient
//! and the scatter form by the same identity transposed, as for F(2×2).
//! 36 products per tile of 16 outputs against F(2×2)'s 16 per 4: 2.25 multiply-adds per
//! output pixel and feature pair instead of 4, and as many fewer transformed values to
//! write and read. The transforms multiply by 2, 4, 5 and 8 (exact) and the kernel's by
//! ¼, ½ and ⅙, so the rounding is some ten times F(2×2)'s (the tests' f32 bound is
//! 1e-5 of the terms' magnitudes against 1e-6).

use super::{
    from_rows, kernel_grad_lanes, kernel_lanes, tile_rows, to_pixels, Form, Level, Products, Real,
    Tiles,
};

/// The window's positions: 6×6.
const POS: usize = 36;

/// F(4×4, 3×3).
pub(in crate::ops) struct F4;

impl_form!(F4, 4);

/// `G g` of a kernel column: `G = [[¼, 0, 0], [−⅙, −⅙, −⅙], [−⅙, ⅙, −⅙], [1/24, 1/12, ⅙],
/// [1/24, −1/12, ⅙], [0, 0, 1]]`.
fn g6<T: Real>(g0: T, g1: T, g2: T) -> [T; 6] {
    let two = T::one() + T::one();
    let (half, quarter, sixth) = (
        T::one() / two,
        T::one() / (two + two),
        T::one() / (two + two + two),
    );
    let s = g0 + g2;
    let t = g0 * quarter + g2;
    [
        g0 * quarter,
        T::zero() - (s + g1) * sixth,
        T::zero() - (s - g1) * sixth,
        (t + g1 * half) * sixth,
        (t - g1 * half) * sixth,
        g2,
    ]
}

/// `Gᵀ v` of six values along one axis (the kernel gradient's transform).
fn gt6<T: Real>([v0, v1, v2, v3, v4, v5]: [T; 6]) -> [T; 3] {
    let two = T::one() + T::one();
    let (half, quarter, sixth) = (
        T::one() / two,
        T::one() / (two + two),
        T::one() / (two + two + two),
    );
    let (s12, d21, s34, d34) = (v1 + v2, v2 - v1, v3 + v4, v3 - v4);
    [
        v0 * quarter + (s34 * quarter - s12) * sixth,
        (d21 + d34 * half) * sixth,
        (s34 - s12) * sixth + v5,
    ]
}

/// `U = G g Gᵀ` for every (in, out) pair: `w` is `[3, 3, pairs]`, `u` `[36, pairs]`.
/// With `flip`, of the kernel turned by 180° (`g[2 − kh, 2 − kw]`).
fn transform_kernel<T: Real>(w: &[T], pairs: usize, flip: bool, u: &mut [T]) {
    kernel_lanes(w, pairs, flip, u, g6)
}

/// `dg = Gᵀ M G` for every (in, out) pair: `m` is `[36, pairs]`, `out` `[3, 3, pairs]`.
fn transform_kernel_grad<T: Real>(m: &[T], pairs: usize, out: &mut [T]) {
    kernel_grad_lanes(m, pairs, out, gt6)
}

/// `Bᵀ d` of six values along one axis of a window: `Bᵀ = [[4, 0, −5, 0, 1, 0], [0, −4,
/// −4, 1, 1, 0], [0, 4, −4, −1, 1, 0], [0, −2, −1, 2, 1, 0], [0, 2, −1, −2, 1, 0], [0, 4,
/// 0, −5, 0, 1]]`. (The vector twins in `narrow` and `wide` compute the same operations
/// in the same order, so the same bits.)
#[inline(always)]
fn bt<T: Real>([d0, d1, d2, d3, d4, d5]: [T; 6]) -> [T; 6] {
    let two = T::one() + T::one();
    let four = two + two;
    let five = four + T::one();
    [
        d0 * four - d2 * five + d4,
        (d3 + d4) - (d1 + d2) * four,
        (d4 - d3) + (d1 - d2) * four,
        (d4 - d2) + (d3 - d1) * two,
        (d4 - d2) - (d3 - d1) * two,
        d1 * four - d3 * five + d5,
    ]
}

/// `Aᵀ m` of six products along one axis: `Aᵀ = [[1, 1, 1, 1, 1, 0], [0, 1, −1, 2, −2,
/// 0], [0, 1, 1, 4, 4, 0], [0, 1, −1, 8, −8, 1]]`.
#[inline(always)]
fn at<T: Real>([m0, m1, m2, m3, m4, m5]: [T; 6]) -> [T; 4] {
    let two = T::one() + T::one();
    let four = two + two;
    let eight = four + four;
    let (s12, d12, s34, d34) = (m1 + m2, m1 - m2, m3 + m4, m3 - m4);
    [
        m0 + s12 + s34,
        d12 + d34 * two,
        s12 + s34 * four,
        d12 + d34 * eight + m5,
    ]
}

/// `A y` of a tile's four values along one axis: `A` is `Aᵀ` transposed.
#[inline(always)]
fn a6<T: Real>([y0, y1, y2, y3]: [T; 4]) -> [T; 6] {
    let two = T::one() + T::one();
    let four = two + two;
    let (e, o) = (y0 + y2, y1 + y3);
    let (e4, o4) = (y0 + y2 * four, y1 + y3 * four);
    [y0, e + o, e - o, e4 + o4 * two, e4 - o4 * two, y3]
}

/// `B z` of six products along one axis: `B` is `Bᵀ` transposed.
#[inline(always)]
fn b6<T: Real>([z0, z1, z2, z3, z4, z5]: [T; 6]) -> [T; 6] {
    let two = T::one() + T::one();
    let four = two + two;
    let five = four + T::one();
    let (s12, d21, s34, d43) = (z1 + z2, z2 - z1, z3 + z4, z4 - z3);
    [
        z0 * four,
        (d21 + z5) * four + d43 * two,
        T::zero() - (z0 * five + s12 * four + s34),
        (z1 - z2) + (z3 - z4) * two - z5 * five,
        z0 + s12 + s34,
        z5,
    ]
}

/// `W = A y Aᵀ` of one 4×4 tile (`rows`: a cotangent's, or the scatter form's input's)
/// into `dst[p · stride + at ..]` for each position `p` of the 6×6 array.
fn transform_cotangent<T: Real>(
    simd: Level,
    rows: &[&[T]; 16],
    dst: &mut [T],
    stride: usize,
    at: usize,
) -> bool {
    // SAFETY: the vector paths are this transform's.
    unsafe {
        from_rows::<T, 16, POS, 4, 6>(simd, rows, dst, (stride, at), a6, vector_paths!(cotangent))
    }
}

/// `z = B M Bᵀ` of one tile's 36 products (`m[p · stride + at ..]` for each position
/// `p`) added into its 6×6 window's output pixels (`None` outside the output).
fn transform_scatter<T: Real>(
    simd: Level,
    m: &[T],
    stride: usize,
    at: usize,
    pixels: [Option<&mut [T]>; POS],
) -> bool {
    let paths = vector_paths!(scatter);
    // SAFETY: the vector paths are this transform's.
    unsafe { to_pixels::<T, POS, POS, 6, 6>(simd, m, (stride, at), pixels, true, b6, paths) }
}

/// `V = Bᵀ d B` of one tile's 6×6 window (`rows`) into `dst[p · stride + at ..]` for each
/// position `p`, with the vectors `simd` allows.
fn transform_input<T: Real>(
    simd: Level,
    rows: &[&[T]; POS],
    dst: &mut [T],
    stride: usize,
    at: usize,
) -> bool {
    // SAFETY: the vector paths are this transform's.
    unsafe {
        from_rows::<T, POS, POS, 6, 6>(simd, rows, dst, (stride, at), bt, vector_paths!(input))
    }
}

/// `y = Aᵀ M A` of one tile's 36 products (`m[p · stride + at ..]` for each position
/// `p`) into its 16 output pixels (`None` past the output's edge).
fn transform_output<T: Real>(
    simd: Level,
    m: &[T],
    stride: usize,
    at: usize,
    pixels: [Option<&mut [T]>; 16],
) -> bool {
    let paths = vector_paths!(output);
    // SAFETY: the vector paths are this transform's.
    unsafe { to_pixels::<T, POS, 16, 6, 4>(simd, m, (stride, at), pixels, false, self::at, paths) }
}

/// The transforms on f32 features a vector at a time, for one instruction set: the
/// scalar transforms' operations in the same order, so the same bits.
#[cfg(target_arch = "x86_64")]
macro_rules! vector_transforms {
    ($name:ident, $feature:literal, $lanes:literal, $v:ty, $load:ident, $store:ident,
     $add:ident, $sub:ident, $mul:ident, $set1:ident) => {
        mod $name {
            use std::arch::x86_64::*;
            use std::ops::Range;

            #[inline]
            #[target_feature(enable = $feature)]
            fn bt([d0, d1, d2, d3, d4, d5]: [$v; 6]) -> [$v; 6] {
                let (two, four, five) = ($set1(2.0), $set1(4.0), $set1(5.0));
                [
                    $add($sub($mul(d0, four), $mul(d2, five)), d4),
                    $sub($add(d3, d4), $mul($add(d1, d2), four)),
                    $add($sub(d4, d3), $mul($sub(d1, d2), four)),
                    $add($sub(d4, d2), $mul($sub(d3, d1), two)),
                    $sub($sub(d4, d2), $mul($sub(d3, d1), two)),
                    $add($sub($mul(d1, four), $mul(d3, five)), d5),
                ]
            }

            #[inline]
            #[target_feature(enable = $feature)]
            fn at([m0, m1, m2, m3, m4, m5]: [$v; 6]) -> [$v; 4] {
                let (two, four, eight) = ($set1(2.0), $set1(4.0), $set1(8.0));
                let (s12, d12) = ($add(m1, m2), $sub(m1, m2));
                let (s34, d34) = ($add(m3, m4), $sub(m3, m4));
                [
                    $add($add(m0, s12), s34),
                    $add(d12, $mul(d34, two)),
                    $add(s12, $mul(s34, four)),
                    $add($add(d12, $mul(d34, eight)), m5),
                ]
            }

            #[inline]
            #[target_feature(enable = $feature)]
            fn a6([y0, y1, y2, y3]: [$v; 4]) -> [$v; 6] {
                let (two, four) = ($set1(2.0), $set1(4.0));
                let (e, o) = ($add(y0, y2), $add(y1, y3));
                let (e4, o4) = ($add(y0, $mul(y2, four)), $add(y1, $mul(y3, four)));
                [
                    y0,
                    $add(e, o),
                    $sub(e, o),
                    $add(e4, $mul(o4, two)),
                    $sub(e4, $mul(o4, two)),
                    y3,
                ]
            }

            #[inline]
            #[target_feature(enable = $feature)]
            fn b6([z0, z1, z2, z3, z4, z5]: [$v; 6]) -> [$v; 6] {
                let (two, four, five) = ($set1(2.0), $set1(4.0), $set1(5.0));
                let (s12, d21) = ($add(z1, z2), $sub(z2, z1));
                let (s34, d43) = ($add(z3, z4), $sub(z4, z3));
                [
                    $mul(z0, four),
                    $add($mul($add(d21, z5), four), $mul(d43, two)),
                    $sub($set1(0.0), $add($add($mul(z0, five), $mul(s12, four)), s34)),
                    $sub($add($sub(z1, z2), $mul($sub(z3, z4), two)), $mul(z5, five)),
                    $add($add(z0, s12), s34),
                    z5,
                ]
            }

            /// `super::transform_cotangent` on features `cs`.
            ///
            /// # Safety
            /// As for [`input`], with 16 rows.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn cotangent(
                rows: &[*const f32; 16],
                cs: Range<usize>,
                dst: *mut f32,
                stride: usize,
            ) {
                for c in cs.step_by($lanes) {
                    let d = |p: usize| unsafe { $load(rows[p].add(c)) };
                    let mut cols = [[$set1(0.0); 6]; 4];
                    for (j, col) in cols.iter_mut().enumerate() {
                        *col = a6([d(j), d(4 + j), d(8 + j), d(12 + j)]);
                    }
                    for r in 0..6 {
                        let row = a6([cols[0][r], cols[1][r], cols[2][r], cols[3][r]]);
                        for (k, val) in row.into_iter().enumerate() {
                            unsafe { $store(dst.add((6 * r + k) * stride + c), val) };
                        }
                    }
                }
            }

            /// `super::transform_scatter` on features `cs`.
            ///
            /// # Safety
            /// As for [`output`], with 36 pixels.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn scatter(
                m: *const f32,
                stride: usize,
                cs: Range<usize>,
                pixels: &[*mut f32; 36],
            ) {
                for c in cs.step_by($lanes) {
                    let v = |p: usize| unsafe { $load(m.add(p * stride + c)) };
                    let mut cols = [[$set1(0.0); 6]; 6];
                    for (j, col) in cols.iter_mut().enumerate() {
                        *col = b6([v(j), v(6 + j), v(12 + j), v(18 + j), v(24 + j), v(30 + j)]);
                    }
                    for r in 0..6 {
                        let row = b6([
                            cols[0][r], cols[1][r], cols[2][r], cols[3][r], cols[4][r], cols[5][r],
                        ]);
                        for (k, val) in row.into_iter().enumerate() {
                            let px = pixels[6 * r + k];
                            if !px.is_null() {
                                unsafe { $store(px.add(c), $add($load(px.add(c)), val)) };
                            }
                        }
                    }
                }
            }

            /// `super::transform_input` on features `cs` (a multiple of the lanes long).
            ///
            /// # Safety
            /// The CPU has the instructions; each row holds `cs.end` elements, and `dst`
            /// the 36 rows of as many, `stride` apart.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn input(
                rows: &[*const f32; 36],
                cs: Range<usize>,
                dst: *mut f32,
                stride: usize,
            ) {
                for c in cs.step_by($lanes) {
                    let d = |p: usize| unsafe { $load(rows[p].add(c)) };
                    let mut cols = [[$set1(0.0); 6]; 6];
                    for (j, col) in cols.iter_mut().enumerate() {
                        *col = bt([d(j), d(6 + j), d(12 + j), d(18 + j), d(24 + j), d(30 + j)]);
                    }
                    for r in 0..6 {
                        let row = bt([
                            cols[0][r], cols[1][r], cols[2][r], cols[3][r], cols[4][r], cols[5][r],
                        ]);
                        for (k, val) in row.into_iter().enumerate() {
                            unsafe { $store(dst.add((6 * r + k) * stride + c), val) };
                        }
                    }
                }
            }

            /// `super::transform_output` on features `cs`.
            ///
            /// # Safety
            /// The CPU has the instructions; `m` holds the 36 rows of `cs.end` elements,
            /// `stride` apart; each pixel is null or holds `cs.end` elements.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn output(
                m: *const f32,
                stride: usize,
                cs: Range<usize>,
                pixels: &[*mut f32; 16],
            ) {
                for c in cs.step_by($lanes) {
                    let v = |p: usize| unsafe { $load(m.add(p * stride + c)) };
                    let mut cols = [[$set1(0.0); 4]; 6];
                    for (j, col) in cols.iter_mut().enumerate() {
                        *col = at([v(j), v(6 + j), v(12 + j), v(18 + j), v(24 + j), v(30 + j)]);
                    }
                    for r in 0..4 {
                        let row = at([
                            cols[0][r], cols[1][r], cols[2][r], cols[3][r], cols[4][r], cols[5][r],
                        ]);
                        for (k, val) in row.into_iter().enumerate() {
                            let px = pixels[4 * r + k];
                            if !px.is_null() {
                                unsafe { $store(px.add(c), val) };
                            }
                        }
                    }
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
vector_transforms!(
    narrow,
    "avx2",
    8,
    __m256,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_add_ps,
    _mm256_sub_ps,
    _mm256_mul_ps,
    _mm256_set1_ps
);

#[cfg(target_arch = "x86_64")]
vector_transforms!(
    wide,
    "avx512f",
    16,
    __m512,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_add_ps,
    _mm512_sub_ps,
    _mm512_mul_ps,
    _mm512_set1_ps
);
