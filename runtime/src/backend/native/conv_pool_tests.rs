//! The planner's fusion of a convolution (direct, or Winograd's tiles) into the bias
//! and ReLU max pooling that alone reads it (`conv_pool`): every output, forward and
//! gradient, bit-identical to the plan without it (the convolution stored, then pooled by
//! the fused bias and ReLU pooling) and to the wholly unfused plan; taken where it
//! applies, left where it does not.

use super::bias_relu_pool::Fused;
use super::bias_relu_pool_tests::run;
use super::executor::NativeExecutable;
use super::testing::{without_bias_relu_pool, without_conv_pool};
use crate::backend::CompileOptions;
use crate::ir::{BinaryOp, ConvParams, DType, Graph, ReduceOp, TensorType, Window};

/// A pooling window of `k` rows and columns, strides `s`, padding `pad` (low, high) on
/// both spatial axes.
fn window(k: [usize; 2], s: [usize; 2], pad: [(usize, usize); 2]) -> Window {
    Window {
        dims: vec![1, k[0], k[1], 1],
        strides: vec![1, s[0], s[1], 1],
        padding: vec![(0, 0), pad[0], pad[1], (0, 0)],
    }
}

/// A convolution of input `[n, h, w, cin]` by a `k[0]×k[1]` kernel to `cout` features.
#[derive(Clone, Debug)]
struct Conv {
    input: [usize; 4],
    k: [usize; 2],
    cout: usize,
    params: ConvParams,
    /// The bias added as `bias + y` instead of `y + bias`.
    bias_first: bool,
}

fn conv(input: [usize; 4], k: [usize; 2], cout: usize) -> Conv {
    Conv {
        input,
        k,
        cout,
        params: ConvParams::simple(2),
        bias_first: false,
    }
}

impl Conv {
    fn bias_first(mut self) -> Conv {
        self.bias_first = true;
        self
    }
    fn strides(mut self, s: [usize; 2]) -> Conv {
        self.params.strides = s.to_vec();
        self
    }
    fn padding(mut self, p: [(i64, i64); 2]) -> Conv {
        self.params.padding = p.to_vec();
        self
    }
    fn dilation(mut self, d: [usize; 2]) -> Conv {
        self.params.rhs_dilation = d.to_vec();
        self
    }
}

/// `p = max_pool(relu(conv(x, k) + bias))` as `Conv2D(relu)` and `MaxPooling2D` write it,
/// and with `training` the gradients of `p` (cotangent a parameter) with respect to the
/// bias, `x` and `k`, by the ops' VJP rules as the autodiff chains them. With `expose`
/// the convolution's output is a graph output too.
fn graph(c: &Conv, w: &Window, training: bool, expose: bool, dtype: DType) -> Graph {
    let mut g = Graph::new("conv_pool");
    let x = g.parameter(TensorType::new(dtype, c.input));
    let k = g.parameter(TensorType::new(dtype, [c.k[0], c.k[1], c.input[3], c.cout]));
    let y = g.convolution(x, k, c.params.clone()).unwrap();
    let bias = g.parameter(TensorType::new(dtype, [c.cout]));
    let a = if c.bias_first {
        g.add(bias, y)
    } else {
        g.add(y, bias)
    }
    .unwrap();
    let z = g.zeros_like(a).unwrap();
    let r = g.max(a, z).unwrap();
    let p = g.reduce_window(ReduceOp::Max, r, w.clone()).unwrap();
    let mut outs = vec![p];
    if training {
        let ct = g.parameter(g.ty(p).clone());
        let ct_r = crate::ops::reduce_window::vjp(&mut g, ReduceOp::Max, r, w, ct).unwrap();
        let (ct_a, _) = crate::ops::binary::vjp(&mut g, BinaryOp::Max, a, z, r, ct_r).unwrap();
        let ct_bias = g.reduce(ReduceOp::Sum, ct_a, &[0, 1, 2]).unwrap();
        let (dx, dk) = crate::ops::convolution::vjp(&mut g, x, k, &c.params, ct_a).unwrap();
        outs.extend([ct_bias, dx, dk]);
    }
    if expose {
        outs.push(y);
    }
    g.set_outputs(outs).unwrap();
    g
}

/// How a plan came out: its convolution kernels and fused poolings (all, and those that
/// compute their convolution), and its description.
struct Planned {
    exe: NativeExecutable,
    convolutions: usize,
    pools: usize,
    conv_pools: usize,
    text: String,
}

fn compile(make: impl FnOnce() -> NativeExecutable) -> Planned {
    let mut exe = make();
    let plan = exe.plan_mut();
    let text = plan.describe();
    let fused = plan.fused_pools.iter().flatten();
    let conv_pools = fused
        .clone()
        .filter(|f| matches!(f, Fused::ConvPool { .. }))
        .count();
    Planned {
        convolutions: text.matches(" convolution -> ").count(),
        pools: fused.count(),
        conv_pools,
        text,
        exe,
    }
}

/// The three plans of `g`: with every fusion, without `conv_pool`, without either.
fn plans(g: &Graph) -> [Planned; 3] {
    let opts = CompileOptions::default();
    let make = || NativeExecutable::new(g, &opts).unwrap();
    [
        compile(make),
        compile(|| without_conv_pool(make)),
        compile(|| without_bias_relu_pool(make)),
    ]
}

/// Every plan's outputs, bit for bit, over two runs (stale arena and index the second
/// time), with and without NaNs in the input.
fn same_outputs(g: &Graph, plans: &mut [Planned; 3], what: &str) {
    for nan_every in [0, 5] {
        let want = run(&mut plans[2].exe, g, 7, nan_every);
        for p in plans[..2].iter_mut() {
            let got = run(&mut p.exe, g, 7, nan_every);
            assert_eq!(got.len(), want.len());
            for (k, (x, y)) in got.iter().zip(&want).enumerate() {
                let differ = x.iter().zip(y).position(|(p, q)| p != q);
                assert!(
                    differ.is_none(),
                    "output {k} differs at {differ:?}: {what} nan {nan_every}\n{}",
                    p.text
                );
            }
        }
    }
}

/// `g` (of `c` pooled by `w`) fused where the direct kernel computes the convolution,
/// and every plan's outputs equal.
fn check(c: &Conv, w: &Window, training: bool) {
    let thin = crate::kernel::conv_direct::thin(c.input[3], c.k[0] * c.k[1]);
    check_fused(c, w, training, thin);
}

/// `g` (of `c` pooled by `w`) fused if `fused`, and every plan's outputs equal.
fn check_fused(c: &Conv, w: &Window, training: bool, fused: bool) {
    let g = graph(c, w, training, false, DType::F32);
    let mut p = plans(&g);
    let what = format!("{c:?} {w:?} training {training}");
    if !fused {
        assert_eq!(p[0].conv_pools, 0, "{what}\n{}", p[0].text);
    } else {
        assert_eq!(p[0].conv_pools, 1, "{what}\n{}", p[0].text);
        assert!(
            p[0].text
                .contains("reduce_window (records index) (bias+relu fused) (convolution fused)"),
            "{}",
            p[0].text
        );
        // The forward convolution is gone, and nothing else.
        assert_eq!(p[0].convolutions + 1, p[1].convolutions, "{}", p[0].text);
        assert_eq!(p[0].pools, p[1].pools, "{what}\n{}", p[0].text);
    }
    assert_eq!(p[1].conv_pools, 0, "{}", p[1].text);
    assert_eq!(p[2].pools, 0, "{}", p[2].text);
    same_outputs(&g, &mut p, &what);
}

/// Keras' `same` padding of a pooling.
fn same(len: usize, k: usize, s: usize) -> (usize, usize) {
    let out = len.div_ceil(s);
    let total = ((out - 1) * s + k).saturating_sub(len);
    (total / 2, total - total / 2)
}

#[test]
fn a_convolution_pooled_in_bands_matches_the_stored_convolution() {
    let cases = [
        // A row and a column no window covers; one feature vector.
        (
            conv([2, 9, 9, 1], [3, 3], 8),
            window([2, 2], [2, 2], [(0, 0); 2]),
        ),
        // `same` convolution and `same` pooling on odd sizes; features past the vectors.
        (
            conv([3, 11, 12, 2], [3, 3], 5).padding([(1, 1), (1, 1)]),
            window([2, 2], [2, 2], [same(11, 2, 2), same(12, 2, 2)]),
        ),
        // Strided, dilated, unevenly padded; a 3×2 window of stride 3×2.
        (
            conv([2, 17, 13, 3], [3, 2], 12)
                .strides([2, 1])
                .dilation([1, 2])
                .padding([(1, 0), (0, 2)]),
            window([3, 2], [3, 2], [(1, 1), (0, 0)]),
        ),
        // Gaps between windows; a block of 32 features and one of 8.
        (
            conv([2, 12, 12, 4], [2, 2], 40).padding([(0, 1), (1, 0)]),
            window([2, 2], [3, 3], [(0, 0); 2]),
        ),
        // A cropping (negative) padding; windows overlapping across columns only.
        (
            conv([2, 10, 10, 1], [3, 3], 16).padding([(-1, 0), (0, -1)]),
            window([2, 3], [2, 1], [(0, 0); 2]),
        ),
        // The `cnn` workload's first layer (parallel).
        (
            conv([16, 28, 28, 1], [3, 3], 32),
            window([2, 2], [2, 2], [(0, 0); 2]),
        ),
        // Pooled in registers (2×2 windows of stride 2, no padding, whole vectors of
        // features): an odd number of windows a row, a row and a column no window covers,
        // two and one vectors of features; a strided and dilated convolution on two
        // features; a 2×2 kernel on four.
        (
            conv([3, 9, 13, 1], [3, 3], 48),
            window([2, 2], [2, 2], [(0, 0); 2]),
        ),
        (
            conv([2, 17, 15, 2], [3, 3], 16)
                .strides([2, 1])
                .dilation([1, 2]),
            window([2, 2], [2, 2], [(0, 0); 2]),
        ),
        (
            conv([2, 10, 10, 4], [2, 2], 32),
            window([2, 2], [2, 2], [(0, 0); 2]),
        ),
        // The bias added first.
        (
            conv([3, 9, 13, 1], [3, 3], 48).bias_first(),
            window([2, 2], [2, 2], [(0, 0); 2]),
        ),
    ];
    for (c, w) in &cases {
        check(c, w, true);
        check(c, w, false);
    }
}

#[test]
fn a_convolution_pooled_in_winograd_tiles_matches_the_stored_convolution() {
    let pool = |k: [usize; 2]| window(k, k, [(0, 0); 2]);
    let cases = [
        // The `cnn` workload's second layer (4×4 tiles, parallel): a row and a column no
        // window covers, and tiles past the output's edge.
        (conv([16, 13, 13, 32], [3, 3], 64), pool([2, 2])),
        // `same` padding on 4×4 tiles; features past the vectors (36: 32 and 4).
        (
            conv([2, 11, 11, 32], [3, 3], 36).padding([(1, 1), (1, 1)]),
            pool([2, 2]),
        ),
        // `same` padding on odd sizes, where 4×4 tiles do not pay: 2×2 ones.
        (
            conv([2, 11, 9, 36], [3, 3], 40).padding([(1, 1), (1, 1)]),
            pool([2, 2]),
        ),
        // Windows as large as the tiles, all inside the output, or with rows and columns
        // none covers.
        (conv([2, 14, 14, 32], [3, 3], 48), pool([4, 4])),
        (conv([2, 13, 13, 32], [3, 3], 48), pool([4, 4])),
        // Windows longer than they are high, on 4×4 tiles and on 2×2 ones (too many
        // feature pairs for 4×4 tiles).
        (conv([2, 13, 13, 32], [3, 3], 48), pool([2, 4])),
        (conv([2, 12, 11, 32], [3, 3], 160), pool([1, 2])),
        (conv([2, 12, 11, 32], [3, 3], 160), pool([2, 2])),
        // The bias added first.
        (conv([3, 13, 13, 32], [3, 3], 32).bias_first(), pool([2, 2])),
    ];
    for (c, w) in &cases {
        check_fused(c, w, true, true);
        check_fused(c, w, false, true);
    }
    // The transforms and the pooling on every instruction set.
    crate::kernel::simd::for_each_level(|_| {
        for (c, w) in &cases[1..3] {
            check_fused(c, w, true, true);
        }
    });
}

#[test]
fn windows_across_the_tiles_leave_the_winograd_convolution_stored() {
    let c = conv([2, 13, 13, 32], [3, 3], 64);
    let cases = [
        // Overlapping windows; windows the tiles' edge is no multiple of; a padded
        // pooling; windows apart from each other.
        window([3, 3], [2, 2], [(0, 0); 2]),
        window([3, 3], [3, 3], [(0, 0); 2]),
        window([2, 2], [2, 2], [(1, 0), (1, 0)]),
        window([2, 2], [3, 3], [(0, 0); 2]),
    ];
    for w in &cases {
        check_fused(&c, w, true, false);
    }
    // Windows of 4×4 over 2×2 tiles (too many feature pairs for 4×4 ones).
    let two = conv([2, 12, 11, 32], [3, 3], 160);
    check_fused(&two, &window([4, 4], [4, 4], [(0, 0); 2]), true, false);
    // An f64 convolution.
    let g = graph(
        &c,
        &window([2, 2], [2, 2], [(0, 0); 2]),
        true,
        false,
        DType::F64,
    );
    let mut p = plans(&g);
    assert_eq!(p[0].conv_pools, 0, "{}", p[0].text);
    same_outputs(&g, &mut p, "f64 Winograd");
    // The convolution's output read elsewhere (here: returned).
    let g = graph(
        &c,
        &window([2, 2], [2, 2], [(0, 0); 2]),
        true,
        true,
        DType::F32,
    );
    let mut p = plans(&g);
    assert_eq!(p[0].conv_pools, 0, "{}", p[0].text);
    same_outputs(&g, &mut p, "returned Winograd convolution");
    // The input gradient's form (more output tiles than input tiles) scatters the tiles.
    let full = conv([2, 9, 9, 32], [3, 3], 32).padding([(2, 2), (2, 2)]);
    check_fused(&full, &window([2, 2], [2, 2], [(0, 0); 2]), true, false);
}

#[test]
fn what_the_band_pooling_does_not_take_stays_a_stored_convolution() {
    let disjoint = window([2, 2], [2, 2], [(0, 0); 2]);
    // Windows overlapping across rows would compute rows twice; too many input features
    // for the direct kernel; f64, which it does not compute.
    let cases = [
        (
            conv([2, 9, 9, 1], [3, 3], 8),
            window([3, 3], [2, 2], [(0, 0); 2]),
            DType::F32,
        ),
        (conv([2, 9, 9, 8], [3, 3], 8), disjoint.clone(), DType::F32),
        (conv([2, 9, 9, 1], [3, 3], 8), disjoint.clone(), DType::F64),
    ];
    for (c, w, dtype) in &cases {
        let g = graph(c, w, true, false, *dtype);
        let mut p = plans(&g);
        assert_eq!(p[0].conv_pools, 0, "{c:?} {w:?}\n{}", p[0].text);
        assert_eq!(p[0].pools, 2, "{c:?} {w:?}\n{}", p[0].text);
        same_outputs(&g, &mut p, &format!("{c:?} {w:?} {dtype}"));
    }
    // The convolution's output read elsewhere (here: returned).
    let c = conv([2, 9, 9, 1], [3, 3], 8);
    let g = graph(&c, &disjoint, true, true, DType::F32);
    let mut p = plans(&g);
    assert_eq!(p[0].conv_pools, 0, "{}", p[0].text);
    same_outputs(&g, &mut p, "returned convolution");
}

#[test]
fn a_pooled_kernel_gradient_is_not_taken_for_a_convolution() {
    // The kernel gradient's node is a convolution of the image by the cotangent that
    // computes something else (`conv_grad`); pooling it must pool what it computes.
    let mut g = Graph::new("pooled_kernel_gradient");
    let x = g.parameter(TensorType::new(DType::F32, [3, 5, 5, 1]));
    let k = g.parameter(TensorType::new(DType::F32, [3, 3, 1, 8]));
    let ct = g.parameter(TensorType::new(DType::F32, [3, 3, 3, 8]));
    let (_, dk) = crate::ops::convolution::vjp(&mut g, x, k, &ConvParams::simple(2), ct).unwrap();
    let bias = g.parameter(TensorType::new(DType::F32, [8]));
    let a = g.add(dk, bias).unwrap();
    let z = g.zeros_like(a).unwrap();
    let r = g.max(a, z).unwrap();
    let p = g.reduce_window(ReduceOp::Max, r, window([2, 1], [2, 1], [(0, 0); 2]));
    let p = p.unwrap();
    g.set_outputs(vec![p]).unwrap();
    let mut plans = plans(&g);
    assert_eq!(plans[0].conv_pools, 0, "{}", plans[0].text);
    same_outputs(&g, &mut plans, "pooled kernel gradient");
}
