//! The planner's one-pass sum of a product (`sum_of_products`): the bits of the plan that
//! writes the product out, on the shapes that sum in parts and in one pass, and the
//! rewrite taken only where the product has no other reader.

use super::executor::NativeExecutable;
use super::testing::without_sum_of_products;
use super::NativeBackend;
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{DType, Graph, ReduceOp, TensorType, Value};
use crate::Tensor;

/// `sum(x · y)` over the leading `lead` axes of `dims`, x and y parameters, with the
/// product an output too when `extra`. (Factors that are kernels' results: the
/// batch-normalized convnet of `train::plan_tests`.)
fn graph(dims: &[usize], lead: usize, dtype: DType, extra: bool) -> Graph {
    let mut g = Graph::new("sum_of_products");
    let x = g.parameter(TensorType::new(dtype, dims.to_vec()));
    let y = g.parameter(TensorType::new(dtype, dims.to_vec()));
    let m = g.mul(x, y).unwrap();
    let axes: Vec<usize> = (0..lead).collect();
    let s = g.reduce(ReduceOp::Sum, m, &axes).unwrap();
    let mut outs: Vec<Value> = vec![s];
    if extra {
        outs.push(m);
    }
    g.set_outputs(outs).unwrap();
    g
}

/// Compiles `g` with the rewrite or without: the executable and its plan's description.
fn compile(g: &Graph, fused: bool) -> (NativeExecutable, String) {
    let opts = CompileOptions::default();
    let mut exe = if fused {
        NativeExecutable::new(g, &opts).unwrap()
    } else {
        without_sum_of_products(|| NativeExecutable::new(g, &opts).unwrap())
    };
    let text = exe.plan_mut().describe();
    (exe, text)
}

/// Every output's bits, for inputs spread over six decades with both signs, run twice
/// (the second time over the first's stale slots, with other arguments).
fn run(exe: &mut dyn Executable, g: &Graph) -> Vec<Vec<u64>> {
    let be = NativeBackend::new();
    let mut outs = Vec::new();
    for scale in [1.0, -3.0] {
        let mut args: Vec<_> = g
            .param_types()
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let v: Vec<f64> = (0..t.numel())
                    .map(|i| {
                        let h = ((i as u64 + 7 * k as u64).wrapping_mul(2654435761) % 1_000_003)
                            as f64
                            / 1_000_003.0;
                        scale * (h - 0.5) * 10f64.powi((i % 7) as i32 - 3)
                    })
                    .collect();
                let tensor = if t.dtype == DType::F32 {
                    let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                    Tensor::from_vec(t.dims(), v).unwrap()
                } else {
                    Tensor::from_vec(t.dims(), v).unwrap()
                };
                be.upload(&tensor).unwrap()
            })
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
                    .map(|v| v.to_bits() as u64)
                    .collect(),
                _ => t
                    .to_vec::<f64>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect(),
            }
        })
        .collect()
}

#[test]
fn a_sum_of_products_is_the_written_products_sum_bit_for_bit() {
    for (dims, lead, dtype) in [
        // Batch normalization's scale gradient: split in parts.
        (vec![128, 26, 26, 32], 3, DType::F32),
        (vec![64, 11, 11, 64], 3, DType::F64),
        // One pass: small, wide rows, one column.
        (vec![10, 7, 5], 2, DType::F32),
        (vec![300, 400], 1, DType::F32),
        (vec![70_000], 1, DType::F32),
        (vec![4, 3, 2], 3, DType::F64),
        // Nothing to sum, and nothing to sum into.
        (vec![0, 3], 1, DType::F32),
        (vec![4, 0], 1, DType::F32),
    ] {
        let g = graph(&dims, lead, dtype, false);
        let (mut fused, text) = compile(&g, true);
        assert!(text.contains("(sum of products)"), "{dims:?}: {text}");
        let (mut plain, text) = compile(&g, false);
        assert!(!text.contains("(sum of products)"), "{dims:?}: {text}");
        assert_eq!(
            run(&mut fused, &g),
            run(&mut plain, &g),
            "{dims:?} over {lead}"
        );
    }
}

#[test]
fn a_product_read_elsewhere_or_a_sum_not_over_leading_axes_stays_unfused() {
    let g = graph(&[8, 4, 3], 2, DType::F32, true);
    assert!(!compile(&g, true).1.contains("(sum of products)"));
    let mut g = Graph::new("inner_axes");
    let x = g.parameter(TensorType::new(DType::F32, [8, 4, 3]));
    let m = g.mul(x, x).unwrap();
    let s = g.reduce(ReduceOp::Sum, m, &[1, 2]).unwrap();
    g.set_outputs(vec![s]).unwrap();
    assert!(!compile(&g, true).1.contains("(sum of products)"));
    let mut g = Graph::new("ints");
    let x = g.parameter(TensorType::new(DType::I32, [8, 4, 3]));
    let m = g.mul(x, x).unwrap();
    let s = g.reduce(ReduceOp::Sum, m, &[0]).unwrap();
    g.set_outputs(vec![s]).unwrap();
    assert!(!compile(&g, true).1.contains("(sum of products)"));
}
