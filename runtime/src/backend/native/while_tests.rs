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
    // The new sum owns its slot and changes places with the carried buffer; `x`, returned
    // as it came (a parameter), is copied.
    assert_eq!(p.loops[0].swap, [true, true, false], "{}", p.describe());
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
