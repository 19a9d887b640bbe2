//! Which geometries the register paths take (`conv_pool_direct`, `selected_grad`): where
//! the CPU has AVX-512, exactly theirs, so that the tests comparing them with the band
//! paths run them there.

use super::Pool2d;
use crate::ir::Window;
use crate::kernel::conv_direct::Direct2d;
use crate::kernel::simd::{level, Level};

/// A valid `k×k` convolution of `[n, h, w, cin]` to `cout` features, pooled by `k2×k2`
/// windows of stride `s2` padded `p2` on each side: the two geometries.
fn geometry(
    [n, h, w, cin]: [usize; 4],
    k: usize,
    cout: usize,
    (k2, s2, p2): (usize, usize, usize),
    pad: i64,
) -> (Direct2d, Pool2d) {
    let out = |len: usize| (len as i64 + 2 * pad - k as i64 + 1) as usize;
    let (oh, ow) = (out(h), out(w));
    let pooled = |len: usize| (len + 2 * p2 - k2) / s2 + 1;
    let d = Direct2d {
        batch: n,
        input: [h, w],
        cin,
        kernel: [k, k],
        cout,
        output: [oh, ow],
        strides: [1, 1],
        dilation: [1, 1],
        pad: [pad, pad],
    };
    let window = Window {
        dims: vec![1, k2, k2, 1],
        strides: vec![1, s2, s2, 1],
        padding: vec![(0, 0), (p2, p2), (p2, p2), (0, 0)],
    };
    let p = Pool2d::of(
        &[n, oh, ow, cout],
        &[n, pooled(oh), pooled(ow), cout],
        &window,
    )
    .expect("a 2-D pooling");
    (d, p)
}

/// The geometries the register path is for take it wherever the CPU has AVX-512 (so
/// the tests comparing it with the band path run it there), and the others never do.
#[test]
fn the_register_path_takes_exactly_its_geometries() {
    let avx512 = level() >= Level::Avx512;
    let two = (2, 2, 0);
    for (input, k, cout, pool, pad, want) in [
        ([16, 28, 28, 1], 3, 32, two, 0, avx512),
        ([3, 9, 13, 1], 3, 48, two, 0, avx512),
        ([2, 10, 10, 4], 2, 32, two, 0, avx512),
        ([2, 9, 9, 1], 3, 8, two, 0, false), // features past the vectors
        ([2, 9, 9, 1], 3, 16, two, 1, false), // a padded convolution
        ([2, 9, 9, 1], 3, 16, (3, 2, 0), 0, false), // overlapping windows
        ([2, 9, 9, 1], 3, 16, (2, 2, 1), 0, false), // a padded pooling
    ] {
        let (d, p) = geometry(input, k, cout, pool, pad);
        let x = vec![0.0; input.iter().product()];
        let w = vec![0.0; k * k * input[3] * cout];
        assert_eq!(
            p.conv_pool_direct_fits(&d, &x, &w),
            want,
            "{input:?} {k} {cout} {pool:?}"
        );
    }
}

/// The kernel gradient from selected cotangents takes a 3×3 one-feature convolution under
/// disjoint windows wherever the CPU has AVX-512, and nothing else.
#[test]
fn the_selected_gradient_takes_exactly_its_geometries() {
    let avx512 = level() >= Level::Avx512;
    let two = (2, 2, 0);
    for (input, k, cout, pool, pad, want) in [
        ([16, 28, 28, 1], 3, 32, two, 0, avx512),
        ([1, 6, 14, 1], 3, 16, (2, 3, 0), 0, avx512), // gaps between windows
        ([2, 9, 9, 1], 3, 16, (2, 2, 1), 0, avx512),  // a padded pooling
        ([2, 9, 9, 1], 3, 8, two, 0, false),          // features past the vectors
        ([2, 9, 9, 1], 3, 16, two, 1, false),         // a padded convolution
        ([2, 9, 9, 2], 3, 16, two, 0, false),         // two input features
        ([2, 9, 9, 1], 2, 16, two, 0, false),         // a 2×2 kernel
        ([2, 9, 9, 1], 3, 16, (3, 2, 0), 0, false),   // overlapping windows
    ] {
        let (d, p) = geometry(input, k, cout, pool, pad);
        let x = vec![0.0; input.iter().product()];
        assert_eq!(
            p.selected_grad_fits(&d, &x),
            want,
            "{input:?} {k} {cout} {pool:?}"
        );
    }
}
