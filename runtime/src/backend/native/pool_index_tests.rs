//! The planner's pairing of a max/min pooling with its gradient (`plan::pair_pools`):
//! the gradient read from the pooling's recorded selections must be bit-identical to the
//! gradient that selects again from the operand.

use super::testing::compile_pool_index;
use super::NativeBackend;
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{DType, Graph, ReduceOp, TensorType, Window};
use crate::Tensor;

fn window(k: usize, s: usize, pad: (usize, usize)) -> Window {
    Window {
        dims: vec![1, k, k, 1],
        strides: vec![1, s, s, 1],
        padding: vec![(0, 0), pad, pad, (0, 0)],
    }
}

/// Values with many ties (and -0.0 beside 0.0), a NaN every `nan_every`.
fn values(n: usize, seed: u64, nan_every: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            if nan_every > 0 && i % nan_every == 3 {
                f32::NAN
            } else {
                [-1.5, -0.0, 0.0, 0.5, 2.0, 2.0][((s >> 33) % 6) as usize]
            }
        })
        .collect()
}

/// The pooling of `x`, then its gradient with cotangent `ct` as the VJP rule of
/// `reduce_window` writes it (built here directly: the backend sits below the autodiff;
/// the op table's gradient checks cover the rule itself) (and, with
/// `extra`, a second gradient over the same operand by another window, which no pooling
/// in the graph computes). Outputs: the pooled value and each gradient.
fn graph(xd: [usize; 4], op: ReduceOp, w: &Window, extra: Option<&Window>) -> Graph {
    let mut g = Graph::new("pool_pair");
    let x = g.parameter(TensorType::new(DType::F32, xd));
    let y = g.reduce_window(op, x, w.clone()).unwrap();
    let ct = g.parameter(g.ty(y).clone());
    let dx = g.select_and_scatter_add(op, ct, x, w.clone()).unwrap();
    let mut outs = vec![y, dx];
    if let Some(w2) = extra {
        let y2 = g.reduce_window(op, x, w2.clone()).unwrap();
        let ct2 = g.parameter(g.ty(y2).clone());
        // The pooling itself is not an output: only its shape is used.
        let dx2 = g.select_and_scatter_add(op, ct2, x, w2.clone()).unwrap();
        let _ = y2;
        outs.push(dx2);
    }
    g.set_outputs(outs).unwrap();
    g
}

fn run(exe: &mut dyn Executable, g: &Graph, seed: u64, nan_every: usize) -> Vec<Vec<u32>> {
    let be = NativeBackend::new();
    let mut args: Vec<_> = g
        .param_types()
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let nan = if k == 0 { nan_every } else { 0 };
            let v = values(t.numel(), seed + k as u64, nan);
            be.upload(&Tensor::from_vec(t.dims(), v).unwrap()).unwrap()
        })
        .collect();
    // Twice: the second execution runs over the first's stale index and arena.
    let mut outs = exe.execute(&mut args).unwrap();
    for a in &mut args[1..] {
        let t = be.download(a).unwrap();
        let v: Vec<f32> = t.to_vec::<f32>().unwrap().iter().map(|x| x * 2.0).collect();
        *a = be.upload(&Tensor::from_vec(t.dims(), v).unwrap()).unwrap();
    }
    outs.extend(exe.execute(&mut args).unwrap());
    outs.iter()
        .map(|b| {
            let v = be.download(b).unwrap().to_vec::<f32>().unwrap();
            v.iter().map(|x| x.to_bits()).collect()
        })
        .collect()
}

#[test]
fn gradients_from_the_recorded_index_match_selecting_again() {
    let opts = CompileOptions::default();
    let cases = [
        ([2, 6, 6, 3], window(2, 2, (0, 0))),
        ([3, 11, 11, 5], window(2, 2, (0, 0))), // a row and column no window covers
        ([2, 9, 8, 4], window(3, 2, (1, 1))),   // overlapping, padded
        ([2, 7, 7, 3], window(2, 3, (0, 0))),   // gaps between windows
        ([1, 5, 5, 2], window(5, 1, (0, 0))),   // one window
        ([2, 19, 19, 17], window(9, 9, (0, 0))), // 81 elements a window, written in parts
        ([128, 26, 26, 32], window(2, 2, (0, 0))), // the first pooling (parallel)
        ([16, 27, 27, 8], window(3, 2, (0, 1))), // overlapping, parallel
    ];
    for (xd, w) in &cases {
        for op in [ReduceOp::Max, ReduceOp::Min] {
            for nan_every in [0, 5] {
                let extra = window(3, 1, (1, 1));
                let g = graph(*xd, op, w, Some(&extra));
                let (mut fast, paired) = compile_pool_index(&g, &opts, true);
                assert_eq!(paired, 1, "{xd:?} {w:?}: the gradient pairs");
                let (mut slow, none) = compile_pool_index(&g, &opts, false);
                assert_eq!(none, 0);
                let a = run(fast.as_mut(), &g, 7, nan_every);
                let b = run(slow.as_mut(), &g, 7, nan_every);
                assert_eq!(a.len(), b.len());
                for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                    assert!(
                        x == y,
                        "output {k} differs: {op:?} {xd:?} {w:?} nan {nan_every}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_gradient_without_its_pooling_selects_from_the_operand() {
    let mut g = Graph::new("lone_gradient");
    let w = window(2, 2, (0, 0));
    let x = g.parameter(TensorType::new(DType::F32, [2, 6, 6, 3]));
    let ct = g.parameter(TensorType::new(DType::F32, [2, 3, 3, 3]));
    let dx = g
        .select_and_scatter_add(ReduceOp::Max, ct, x, w.clone())
        .unwrap();
    // A pooling of the same operand by the same window, but a min: not the same selection.
    let y = g.reduce_window(ReduceOp::Min, x, w).unwrap();
    g.set_outputs(vec![dx, y]).unwrap();
    let (mut exe, paired) = compile_pool_index(&g, &CompileOptions::default(), true);
    assert_eq!(paired, 0);
    let (mut slow, _) = compile_pool_index(&g, &CompileOptions::default(), false);
    assert_eq!(run(exe.as_mut(), &g, 3, 4), run(slow.as_mut(), &g, 3, 4));
}
