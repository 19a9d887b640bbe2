//! A loop is one computation however many of its siblings are used: one plan step, run
//! once per execution.

use super::executor::NativeExecutable;
use super::plan::{plan, Step};
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{Comparison, DType, Graph, TensorType, Value};
use crate::Tensor;

fn region(types: &[TensorType], f: impl FnOnce(&mut Graph, &[Value]) -> Vec<Value>) -> Graph {
    let mut g = Graph::new("region");
    let p: Vec<Value> = types.iter().map(|t| g.parameter(t.clone())).collect();
    let outs = f(&mut g, &p);
    g.set_outputs(outs).unwrap();
    g
}

/// `i < 10: (i + 1, a + x, x)` over `(i32[], f32[4], f32[4])`, with `outputs` chosen
/// among the three siblings.
fn counting_loop(outputs: &[usize]) -> Graph {
    let ts = vec![
        TensorType::scalar(DType::I32),
        TensorType::new(DType::F32, [4]),
        TensorType::new(DType::F32, [4]),
    ];
    let cond = region(&ts, |g, p| {
        let ten = g.scalar(10.0, DType::I32);
        vec![g.compare(Comparison::Lt, p[0], ten).unwrap()]
    });
    let body = region(&ts, |g, p| {
        let one = g.scalar(1.0, DType::I32);
        // Two elementwise ops: one fused kernel inside the body, as outside.
        let s = g.add(p[1], p[2]).unwrap();
        let s = g.mul_scalar(s, 1.0).unwrap();
        vec![g.add(p[0], one).unwrap(), s, p[2]]
    });
    let mut g = Graph::new("loop");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g.while_loop(&init, cond, body).unwrap();
    g.set_outputs(outputs.iter().map(|&k| w[k]).collect())
        .unwrap();
    g
}

fn inputs() -> Vec<Tensor> {
    vec![
        Tensor::from_vec(&[], vec![0i32]).unwrap(),
        Tensor::from_vec(&[4], vec![0f32; 4]).unwrap(),
        Tensor::from_vec(&[4], vec![1f32, 2.0, 3.0, 4.0]).unwrap(),
    ]
}

#[test]
fn all_siblings_are_one_loop_step_run_once_per_execution() {
    let g = counting_loop(&[0, 1, 2]);
    let p = plan(&g, &CompileOptions::default());
    let loops = p
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Loop { .. }))
        .count();
    assert_eq!(loops, 1, "{}", p.describe());
    assert_eq!(p.steps.len(), 1, "{}", p.describe());
    let Step::Loop { outs, .. } = &p.steps[0] else {
        unreachable!()
    };
    assert_eq!(outs.iter().map(|o| o.0).collect::<Vec<_>>(), [0, 1, 2]);
    // The body is planned like any graph: its elementwise ops are one fused kernel.
    // The new count owns its slot and changes places with the carried buffer; the sum,
    // the last to read `a`, is written over it where it lives; `x`, returned as it came,
    // stays in its buffer.
    assert!(p.loops[0].swap[0], "{}", p.describe());
    assert_eq!(p.loops[0].kept, [false, true, true], "{}", p.describe());
    let body = &p.loops[0].body;
    assert!(
        body.steps.iter().any(|s| matches!(s, Step::Fused { .. })),
        "{}",
        body.describe()
    );

    let backend = super::NativeBackend::new();
    let mut exe = NativeExecutable::new(&g, &CompileOptions::default()).unwrap();
    let mut args: Vec<_> = inputs()
        .iter()
        .map(|t| backend.upload(t).unwrap())
        .collect();
    let out = exe.execute(&mut args).unwrap();
    assert_eq!(exe.loop_iterations(), [10]);
    let got: Vec<Tensor> = out.iter().map(|b| backend.download(b).unwrap()).collect();
    assert_eq!(got[0], Tensor::from_vec(&[], vec![10i32]).unwrap());
    assert_eq!(
        got[1],
        Tensor::from_vec(&[4], vec![10f32, 20.0, 30.0, 40.0]).unwrap()
    );
    assert_eq!(got[2], inputs()[2]);
    // A second execution runs the loop once more, from the new arguments.
    let _ = exe.execute(&mut args).unwrap();
    assert_eq!(exe.loop_iterations(), [20]);
}

#[test]
fn one_sibling_used_still_runs_the_whole_loop() {
    let g = counting_loop(&[1]);
    let backend = super::NativeBackend::new();
    let mut exe = NativeExecutable::new(&g, &CompileOptions::default()).unwrap();
    let mut args: Vec<_> = inputs()
        .iter()
        .map(|t| backend.upload(t).unwrap())
        .collect();
    let out = exe.execute(&mut args).unwrap();
    assert_eq!(exe.loop_iterations(), [10]);
    assert_eq!(
        backend.download(&out[0]).unwrap(),
        Tensor::from_vec(&[4], vec![10f32, 20.0, 30.0, 40.0]).unwrap()
    );
}

fn run(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    let backend = super::NativeBackend::new();
    let mut exe = NativeExecutable::new(g, &CompileOptions::default()).unwrap();
    let mut args: Vec<_> = inputs.iter().map(|t| backend.upload(t).unwrap()).collect();
    let out = exe.execute(&mut args).unwrap();
    out.iter().map(|b| backend.download(b).unwrap()).collect()
}

/// A scan's loop keeps its weight, its stacked input, its stacked output and its residual
/// stack in their buffers: the body writes one row of the output's stack where it lives,
/// and none of the residuals' (nothing differentiates this loop: nothing reads them).
#[test]
fn a_scan_writes_its_stacks_in_place_and_keeps_its_weights() {
    let v = TensorType::new(DType::F32, [2]);
    let mut step = Graph::new("weighted_sum");
    let c = step.parameter(v.clone());
    let w = step.parameter(v.clone());
    let x = step.parameter(v.clone());
    let xw = step.mul(x, w).unwrap();
    let next = step.add(c, xw).unwrap();
    step.set_outputs(vec![next, w, next]).unwrap();
    let rows = 5;
    let mut g = Graph::new("scan");
    let c0 = g.parameter(v.clone());
    let w0 = g.parameter(v.clone());
    let xs = g.parameter(TensorType::new(DType::F32, [rows, 2]));
    let (finals, ys) = g.scan(&[c0, w0], &[xs], &step).unwrap();
    g.set_outputs(vec![finals[0], ys[0]]).unwrap();

    let p = plan(&g, &CompileOptions::default());
    let lp = &p.loops[0];
    // The count, the carry, the weight, the stacked input, the stacked output, the
    // carry's residual stack.
    assert_eq!(lp.carried.len(), 6, "{}", p.describe());
    assert_eq!(&lp.kept[2..], [true; 4], "{}", p.describe());
    assert_eq!(lp.unread, [false, false, false, false, false, true]);
    let homed: Vec<usize> = lp.body.homes.iter().map(|h| h.0).collect();
    assert!(
        homed.contains(&4) && !homed.contains(&5),
        "the output's stack written in place, the residuals' not at all: {homed:?}\n{}",
        lp.body.describe()
    );

    let xs_values: Vec<f32> = (0..rows * 2).map(|i| i as f32).collect();
    let got = run(
        &g,
        &[
            Tensor::from_vec(&[2], vec![1f32, -1.0]).unwrap(),
            Tensor::from_vec(&[2], vec![2f32, 3.0]).unwrap(),
            Tensor::from_vec(&[rows, 2], xs_values.clone()).unwrap(),
        ],
    );
    let mut c = [1f32, -1.0];
    let mut stacked = Vec::new();
    for row in xs_values.chunks(2) {
        c = [c[0] + row[0] * 2.0, c[1] + row[1] * 3.0];
        stacked.extend(c);
    }
    assert_eq!(got[0], Tensor::from_vec(&[2], c.to_vec()).unwrap());
    assert_eq!(got[1], Tensor::from_vec(&[rows, 2], stacked).unwrap());
}

/// `(i, v, total)` over four iterations: `v` gets `i + 1` written at `i`, and `total`
/// adds up `v`'s elements as the iteration found them. With the sum made before the write
/// the write is in place; made after it (so scheduled after it), the write must leave the
/// old `v` for the sum to read.
fn summing_loop(sum_first: bool) -> Graph {
    let ts = vec![
        TensorType::scalar(DType::I32),
        TensorType::new(DType::F32, [4]),
        TensorType::scalar(DType::F32),
    ];
    let cond = region(&ts, |g, p| {
        let four = g.scalar(4.0, DType::I32);
        vec![g.compare(Comparison::Lt, p[0], four).unwrap()]
    });
    let body = region(&ts, |g, p| {
        let one = g.scalar(1.0, DType::I32);
        let next = g.add(p[0], one).unwrap();
        let value = g.convert(next, DType::F32).unwrap();
        let row = g.reshape(value, vec![1]).unwrap();
        let (sum, written) = if sum_first {
            let sum = g.sum_all(p[1]).unwrap();
            (sum, g.dynamic_update_slice(p[1], row, &[p[0]]).unwrap())
        } else {
            let written = g.dynamic_update_slice(p[1], row, &[p[0]]).unwrap();
            (g.sum_all(p[1]).unwrap(), written)
        };
        vec![next, written, g.add(p[2], sum).unwrap()]
    });
    let mut g = Graph::new("loop");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g.while_loop(&init, cond, body).unwrap();
    g.set_outputs(vec![w[1], w[2]]).unwrap();
    g
}

#[test]
fn a_window_is_written_in_place_only_after_the_last_read_of_the_old_value() {
    for sum_first in [true, false] {
        let g = summing_loop(sum_first);
        let p = plan(&g, &CompileOptions::default());
        let homed = p.loops[0].body.homes.iter().any(|h| h.0 == 1);
        assert_eq!(homed, sum_first, "{}", p.loops[0].body.describe());
        let got = run(
            &g,
            &[
                Tensor::from_vec(&[], vec![0i32]).unwrap(),
                Tensor::from_vec(&[4], vec![0f32; 4]).unwrap(),
                Tensor::from_vec(&[], vec![0f32]).unwrap(),
            ],
        );
        assert_eq!(
            got[0],
            Tensor::from_vec(&[4], vec![1f32, 2.0, 3.0, 4.0]).unwrap()
        );
        // 0 + 1 + (1 + 2) + (1 + 2 + 3): each sum before that iteration's write.
        assert_eq!(got[1], Tensor::from_vec(&[], vec![10f32]).unwrap());
    }
}

/// Outside loops, a `dynamic_update_slice` whose operand is not read afterwards writes its
/// window into the operand's slot; one whose operand is read later copies it.
#[test]
fn a_window_update_takes_over_its_dying_operand() {
    for read_later in [false, true] {
        let mut g = Graph::new("update");
        let a = g.parameter(TensorType::new(DType::F32, [4]));
        let u = g.parameter(TensorType::new(DType::F32, [1]));
        let x = g.mul_scalar(a, 2.0).unwrap();
        let at = g.scalar(1.0, DType::I32);
        let y = g.dynamic_update_slice(x, u, &[at]).unwrap();
        let mut outs = vec![y];
        if read_later {
            outs.push(g.mul_scalar(x, 3.0).unwrap());
        }
        g.set_outputs(outs).unwrap();
        let p = plan(&g, &CompileOptions::default());
        let in_place = p.steps.iter().any(|s| match s {
            Step::Kernel { out, ins, .. } => ins.first() == Some(&super::plan::Loc::Slot(*out)),
            Step::Loop { .. } | Step::Fused { .. } => false,
        });
        assert_eq!(in_place, !read_later, "{}", p.describe());
        let got = run(
            &g,
            &[
                Tensor::from_vec(&[4], vec![1f32, 2.0, 3.0, 4.0]).unwrap(),
                Tensor::from_vec(&[1], vec![-1f32]).unwrap(),
            ],
        );
        assert_eq!(
            got[0],
            Tensor::from_vec(&[4], vec![2f32, -1.0, 6.0, 8.0]).unwrap()
        );
        if read_later {
            assert_eq!(
                got[1],
                Tensor::from_vec(&[4], vec![6f32, 12.0, 18.0, 24.0]).unwrap()
            );
        }
    }
}
