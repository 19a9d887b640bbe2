//! The planner's fusion of a bias add and ReLU into max pooling and of the ReLU's gradient
//! into the pooling's (`bias_relu_pool`): every output, forward and gradient, bit-identical
//! to the unfused plan's, and the fused kernels actually picked.

use super::executor::NativeExecutable;
use super::testing::without_bias_relu_pool;
use super::NativeBackend;
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{BinaryOp, ConvParams, DType, Graph, ReduceOp, TensorType, Window};
use crate::Tensor;

fn window(k: usize, s: usize, pad: (usize, usize)) -> Window {
    Window {
        dims: vec![1, k, k, 1],
        strides: vec![1, s, s, 1],
        padding: vec![(0, 0), pad, pad, (0, 0)],
    }
}

/// Values with many ties, zeros of both signs and pre-activations that are exactly zero
/// (`x + bias` for `x` and `bias` of opposite values), a NaN every `nan_every`.
fn values(n: usize, seed: u64, nan_every: usize, set: &[f64]) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            if nan_every > 0 && i % nan_every == 3 {
                f64::NAN
            } else {
                set[((s >> 33) % set.len() as u64) as usize]
            }
        })
        .collect()
}

/// How the pooled tensor is made.
#[derive(Clone, Copy, Debug)]
enum Front {
    /// The pooled pre-activation is a parameter plus the bias.
    Param,
    /// It is a 3×3 convolution (stride 1, `same` padding) of a 2-channel input plus the bias.
    Conv,
}

/// `p = max_pool(relu(c + bias))` as `Conv2D(relu)` and `MaxPooling2D` write it, and with
/// `training` the gradients of `p` (cotangent a parameter) with respect to `c`, the bias
/// and the convolution's input and kernel, by the ops' VJP rules as the autodiff chains
/// them (built here directly: the backend sits below the autodiff). Outputs: `p`, then
/// the gradients.
fn graph(cd: [usize; 4], w: &Window, front: Front, training: bool, dtype: DType) -> Graph {
    let mut g = Graph::new("bias_relu_pool");
    let c_ch = cd[3];
    let mut params = ConvParams::simple(2);
    params.padding = vec![(1, 1), (1, 1)];
    let (c, conv) = match front {
        Front::Param => (g.parameter(TensorType::new(dtype, cd)), None),
        Front::Conv => {
            let x = g.parameter(TensorType::new(dtype, [cd[0], cd[1], cd[2], 2]));
            let k = g.parameter(TensorType::new(dtype, [3, 3, 2, c_ch]));
            (g.convolution(x, k, params.clone()).unwrap(), Some((x, k)))
        }
    };
    let bias = g.parameter(TensorType::new(dtype, [c_ch]));
    let a = g.add(c, bias).unwrap();
    let z = g.zeros_like(a).unwrap();
    let r = g.max(a, z).unwrap();
    let p = g.reduce_window(ReduceOp::Max, r, w.clone()).unwrap();
    let mut outs = vec![p];
    if training {
        let ct = g.parameter(g.ty(p).clone());
        let ct_r = crate::ops::reduce_window::vjp(&mut g, ReduceOp::Max, r, w, ct).unwrap();
        let (ct_a, _) = crate::ops::binary::vjp(&mut g, BinaryOp::Max, a, z, r, ct_r).unwrap();
        let ct_bias = g.reduce(ReduceOp::Sum, ct_a, &[0, 1, 2]).unwrap();
        outs.extend([ct_a, ct_bias]);
        if let Some((x, k)) = conv {
            let (dx, dk) = crate::ops::convolution::vjp(&mut g, x, k, &params, ct_a).unwrap();
            outs.extend([dx, dk]);
        }
    }
    g.set_outputs(outs).unwrap();
    g
}

/// Compiles `g`, with the fusion or without; the plan's description and how many nodes
/// it fused.
fn compile(g: &Graph, fused: bool) -> (NativeExecutable, String, usize) {
    let opts = CompileOptions::default();
    let mut exe = if fused {
        NativeExecutable::new(g, &opts).unwrap()
    } else {
        without_bias_relu_pool(|| NativeExecutable::new(g, &opts).unwrap())
    };
    let plan = exe.plan_mut();
    let (count, text) = (plan.fused_pools.iter().flatten().count(), plan.describe());
    (exe, text, count)
}

/// Runs twice (the second time over the first's stale arena and index, with other
/// arguments); every output's bits.
pub(super) fn run(
    exe: &mut dyn Executable,
    g: &Graph,
    seed: u64,
    nan_every: usize,
) -> Vec<Vec<u64>> {
    let be = NativeBackend::new();
    let sets: [&[f64]; 2] = [
        &[-1.5, -0.0, 0.0, 0.5, 2.0, 2.0, -2.0],
        &[1.5, -0.5, 0.0, -2.0, 0.25],
    ];
    let upload = |k: usize, t: &TensorType, scale: f64| {
        let nan = if k == 0 { nan_every } else { 0 };
        let set = sets[usize::from(k + 1 == g.param_types().len() || t.rank() == 1)];
        let v: Vec<f64> = values(t.numel(), seed + k as u64, nan, set)
            .iter()
            .map(|x| x * scale)
            .collect();
        let tensor = if t.dtype == DType::F32 {
            let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            Tensor::from_vec(t.dims(), v).unwrap()
        } else {
            Tensor::from_vec(t.dims(), v).unwrap()
        };
        be.upload(&tensor).unwrap()
    };
    let mut outs = Vec::new();
    for scale in [1.0, 2.0] {
        let mut args: Vec<_> = g
            .param_types()
            .iter()
            .enumerate()
            .map(|(k, t)| upload(k, t, scale))
            .collect();
        outs.extend(exe.execute(&mut args).unwrap());
    }
    outs.iter()
        .map(|b| {
            let t = be.download(b).unwrap();
            match t.dtype() {
                DType::F32 => t
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits() as u64)
                    .collect(),
                _ => t
                    .to_vec::<f64>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect(),
            }
        })
        .collect()
}

fn check(cd: [usize; 4], w: &Window, front: Front, training: bool, dtype: DType) {
    let g = graph(cd, w, front, training, dtype);
    let (mut fast, plan, fused) = compile(&g, true);
    let want = if training { 2 } else { 1 };
    assert_eq!(fused, want, "{cd:?} {w:?} {front:?}: fused nodes\n{plan}");
    assert!(
        plan.contains("reduce_window (records index) (bias+relu fused)"),
        "{plan}"
    );
    if training {
        assert!(
            plan.contains("select_and_scatter_add (from index) (relu gradient fused)"),
            "{plan}"
        );
    }
    // No full-size elementwise pass is left: the add, ReLU and gate were the only ones.
    let full = cd.iter().product::<usize>();
    assert!(!plan.contains(&format!("fused n={full} ")), "{plan}");
    let (mut slow, slow_plan, none) = compile(&g, false);
    assert_eq!(none, 0, "{slow_plan}");
    for nan_every in [0, 7] {
        let a = run(&mut fast, &g, 11, nan_every);
        let b = run(&mut slow, &g, 11, nan_every);
        assert_eq!(a.len(), b.len());
        for (k, (x, y)) in a.iter().zip(&b).enumerate() {
            let differ = x.iter().zip(y).position(|(p, q)| p != q);
            assert!(
                differ.is_none(),
                "output {k} differs at {differ:?}: {cd:?} {w:?} {front:?} {dtype} nan {nan_every}"
            );
        }
    }
}

/// Keras' `same` padding of a pooling.
fn same(len: usize, k: usize, s: usize) -> (usize, usize) {
    let out = len.div_ceil(s);
    let total = ((out - 1) * s + k).saturating_sub(len);
    (total / 2, total - total / 2)
}

#[test]
fn fused_bias_relu_pooling_and_gradients_match_the_unfused_plan() {
    let cases = [
        ([2, 6, 6, 3], window(2, 2, (0, 0))),
        ([3, 11, 11, 5], window(2, 2, (0, 0))), // a row and column no window covers
        ([2, 7, 7, 9], window(2, 2, same(7, 2, 2))), // `same` on an odd size
        ([2, 9, 8, 4], window(3, 2, (1, 1))),   // overlapping, padded
        ([2, 9, 9, 3], window(3, 2, (0, 0))),   // overlapping
        ([2, 7, 7, 3], window(2, 3, (0, 0))),   // gaps between windows
        ([1, 5, 5, 2], window(5, 1, (0, 0))),   // one window of 25
        ([16, 27, 27, 8], window(3, 2, (0, 1))), // overlapping, parallel
        ([64, 26, 26, 32], window(2, 2, (0, 0))), // the first pooling (parallel)
        // Sixteen channels a vector and the rest after them, on other windows.
        ([2, 9, 8, 21], window(3, 2, (1, 1))), // overlapping, padded
        ([1, 5, 5, 16], window(5, 1, (0, 0))), // one window of 25
        ([2, 7, 7, 33], window(2, 3, (0, 0))), // gaps between windows
    ];
    for (cd, w) in &cases {
        for front in [Front::Param, Front::Conv] {
            check(*cd, w, front, true, DType::F32);
        }
        check(*cd, w, Front::Param, false, DType::F32);
    }
    check(
        [2, 9, 8, 4],
        &window(3, 2, (1, 1)),
        Front::Conv,
        true,
        DType::F64,
    );
    check(
        [2, 6, 6, 3],
        &window(2, 2, (0, 0)),
        Front::Param,
        true,
        DType::F64,
    );
}

#[test]
fn a_pre_activation_read_elsewhere_stays_unfused() {
    let mut g = Graph::new("read_elsewhere");
    let x = g.parameter(TensorType::new(DType::F32, [2, 6, 6, 3]));
    let bias = g.parameter(TensorType::new(DType::F32, [3]));
    let a = g.add(x, bias).unwrap();
    let z = g.zeros_like(a).unwrap();
    let r = g.max(a, z).unwrap();
    let p = g
        .reduce_window(ReduceOp::Max, r, window(2, 2, (0, 0)))
        .unwrap();
    g.set_outputs(vec![p, a]).unwrap();
    let (mut fast, plan, fused) = compile(&g, true);
    assert_eq!(fused, 0, "{plan}");
    let (mut slow, _, _) = compile(&g, false);
    assert_eq!(run(&mut fast, &g, 3, 4), run(&mut slow, &g, 3, 4));
}
