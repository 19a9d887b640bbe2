//! Dynamic slices read where they lie (`window`) give the copying plan's results, bit for
//! bit, and are planned only where the operand's memory cannot change.

use super::executor::NativeExecutable;
use super::plan::{plan, Loc, Plan, Step};
use super::testing::without_windows;
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{DType, Graph, TensorType, Value};
use crate::Tensor;

fn run(g: &Graph, options: &CompileOptions, inputs: &[Tensor]) -> Vec<Tensor> {
    let backend = super::NativeBackend::new();
    let mut exe = NativeExecutable::new(g, options).unwrap();
    let mut args: Vec<_> = inputs.iter().map(|t| backend.upload(t).unwrap()).collect();
    let out = exe.execute(&mut args).unwrap();
    out.iter().map(|b| backend.download(b).unwrap()).collect()
}

/// Windows in `p` and, recursively, in its loops' bodies.
fn windows(p: &Plan) -> usize {
    p.windows.len() + p.loops.iter().map(|l| windows(&l.body)).sum::<usize>()
}

/// Whether some step of `p` reads a window.
fn reads_a_window(p: &Plan) -> bool {
    p.steps.iter().any(|s| match s {
        Step::Kernel { ins, .. } | Step::Fused { ins, .. } | Step::Loop { ins, .. } => {
            ins.iter().any(|l| matches!(l, Loc::Window(_)))
        }
    })
}

/// Runs `g` with windows and with copies: the same bits; returns the windows planned.
fn same_as_copies(g: &Graph, options: &CompileOptions, inputs: &[Tensor]) -> usize {
    let with = run(g, options, inputs);
    let without = without_windows(|| run(g, options, inputs));
    assert_eq!(with, without, "graph {}", g.name());
    assert_eq!(windows(&without_windows(|| plan(g, options))), 0);
    windows(&plan(g, options))
}

fn iota(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    Tensor::from_vec(dims, (0..n).map(|v| v as f32 * 0.5 - 3.0).collect()).unwrap()
}

/// Slices of an argument at starts computed in the graph (so held in slots until the
/// window's reader runs), in range, past either end (clamped), as i32 and i64, read by a
/// product, a fused elementwise kernel and a reduction; and windows that are not one run
/// of memory (a middle axis cut), which are copied.
#[test]
fn windows_of_arguments_equal_their_copies() {
    let dims = [5usize, 3, 4];
    for (at, sizes, contiguous) in [
        ([2i64, 0, 0], [2usize, 3, 4], true),
        ([7, 0, 0], [1, 3, 4], true),
        ([-3, 0, 0], [1, 3, 4], true),
        ([4, 1, 0], [1, 2, 4], true),
        ([3, 2, 1], [1, 1, 3], true),
        ([0, 0, 0], [5, 3, 4], true),
        ([1, 1, 0], [2, 2, 4], false),
        ([0, 0, 1], [5, 3, 2], false),
    ] {
        for dtype in [DType::I32, DType::I64] {
            let mut g = Graph::new("windows");
            let x = g.parameter(TensorType::new(DType::F32, dims));
            let w = g.parameter(TensorType::new(DType::F32, [sizes[2], 2]));
            let base = g.parameter(TensorType::scalar(dtype));
            let starts: Vec<Value> = at
                .iter()
                .map(|&a| {
                    let shift = g.scalar(a as f64, dtype);
                    g.add(base, shift).unwrap()
                })
                .collect();
            let s = g.dynamic_slice(x, &starts, &sizes).unwrap();
            let rows = sizes[0] * sizes[1];
            let flat = g.reshape(s, vec![rows, sizes[2]]).unwrap();
            let product = g.matmul(flat, w).unwrap();
            let scaled = g.mul_scalar(s, 3.0).unwrap();
            let total = g.sum_all(s).unwrap();
            g.set_outputs(vec![product, scaled, total]).unwrap();
            let zero = match dtype {
                DType::I64 => Tensor::from_vec(&[], vec![0i64]).unwrap(),
                _ => Tensor::from_vec(&[], vec![0i32]).unwrap(),
            };
            let inputs = [iota(&dims), iota(&[sizes[2], 2]), zero];
            let planned = same_as_copies(&g, &CompileOptions::default(), &inputs);
            assert_eq!(planned, usize::from(contiguous), "{at:?} {sizes:?}");
            let p = plan(&g, &CompileOptions::default());
            assert_eq!(reads_a_window(&p), contiguous, "{}", p.describe());
        }
    }
}

/// A slice that is itself an output, or of a value computed in the graph, is copied.
#[test]
fn outputs_and_computed_operands_are_copied() {
    let mut g = Graph::new("copied");
    let x = g.parameter(TensorType::new(DType::F32, [4, 3]));
    let at = g.parameter(TensorType::scalar(DType::I32));
    let zero = g.scalar(0.0, DType::I32);
    let out = g.dynamic_slice(x, &[at, zero], &[2, 3]).unwrap();
    let doubled = g.mul_scalar(x, 2.0).unwrap();
    let of_computed = g.dynamic_slice(doubled, &[at, zero], &[1, 3]).unwrap();
    let read = g.mul_scalar(of_computed, 1.5).unwrap();
    g.set_outputs(vec![out, read]).unwrap();
    let inputs = [iota(&[4, 3]), Tensor::from_vec(&[], vec![1i32]).unwrap()];
    assert_eq!(same_as_copies(&g, &CompileOptions::default(), &inputs), 0);
}

/// An argument donated and updated in place changes while the plan runs: a slice of it
/// read before the update is copied, and gives the old values.
#[test]
fn a_slice_of_an_argument_updated_in_place_is_copied() {
    let mut g = Graph::new("donated");
    let x = g.parameter(TensorType::new(DType::F32, [4, 3]));
    let u = g.parameter(TensorType::new(DType::F32, [1, 3]));
    let at = g.parameter(TensorType::scalar(DType::I32));
    let zero = g.scalar(0.0, DType::I32);
    let old = g.dynamic_slice(x, &[at, zero], &[1, 3]).unwrap();
    let old = g.mul_scalar(old, 1.0).unwrap();
    let updated = g.dynamic_update_slice(x, u, &[at, zero]).unwrap();
    g.set_outputs(vec![updated, old]).unwrap();
    let options = CompileOptions {
        updates: vec![(0, 0)],
    };
    let p = plan(&g, &options);
    assert_eq!(p.homes.len(), 1, "updated in place: {}", p.describe());
    let inputs = [
        iota(&[4, 3]),
        Tensor::from_vec(&[1, 3], vec![9f32; 3]).unwrap(),
        Tensor::from_vec(&[], vec![2i32]).unwrap(),
    ];
    assert_eq!(same_as_copies(&g, &options, &inputs), 0);
    // The update is the parameter's new value, not returned: the old row is.
    let got = run(&g, &options, &inputs);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].to_vec::<f32>().unwrap(), vec![0.0, 0.5, 1.0]);
}

/// A scan's body reads its stacked inputs' rows where they lie, and gives the copying
/// plan's results.
#[test]
fn a_scan_reads_its_rows_in_place() {
    let (rows, batch, features) = (6, 3, 4);
    let mut step = Graph::new("step");
    let c = step.parameter(TensorType::new(DType::F32, [batch, 2]));
    let w = step.parameter(TensorType::new(DType::F32, [features, 2]));
    let x = step.parameter(TensorType::new(DType::F32, [batch, features]));
    let xw = step.matmul(x, w).unwrap();
    let next = step.add(c, xw).unwrap();
    let next = step.tanh(next).unwrap();
    step.set_outputs(vec![next, w, next]).unwrap();
    let mut g = Graph::new("scan");
    let c0 = g.parameter(TensorType::new(DType::F32, [batch, 2]));
    let w0 = g.parameter(TensorType::new(DType::F32, [features, 2]));
    let xs = g.parameter(TensorType::new(DType::F32, [rows, batch, features]));
    let (finals, ys) = g.scan(&[c0, w0], &[xs], &step).unwrap();
    g.set_outputs(vec![finals[0], ys[0]]).unwrap();
    let inputs = [
        iota(&[batch, 2]),
        Tensor::from_vec(
            &[features, 2],
            vec![0.1f32, -0.2, 0.3, 0.05, -0.1, 0.2, 0.0, 0.4],
        )
        .unwrap(),
        iota(&[rows, batch, features]),
    ];
    let planned = same_as_copies(&g, &CompileOptions::default(), &inputs);
    assert!(
        planned >= 1,
        "{}",
        plan(&g, &CompileOptions::default()).describe()
    );
}
