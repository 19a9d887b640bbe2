//! A loop reads the values its body never changes where they already are, and a donated
//! parameter that only the loop reads moves in and back out holding the result: the
//! same bits as copying every carried value in and out, and every caller's buffer left
//! as the graph says.

use super::executor::NativeExecutable;
use super::loop_entry::Entry;
use super::plan::{plan, Step};
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{DType, Graph, TensorType};
use crate::Tensor;

const ROWS: usize = 5;

/// `c + x * w` over the rows `x` of a stack: the scan of `a_scan_writes_its_stacks...`.
fn weighted_sum() -> Graph {
    let v = TensorType::new(DType::F32, [2]);
    let mut step = Graph::new("weighted_sum");
    let c = step.parameter(v.clone());
    let w = step.parameter(v.clone());
    let x = step.parameter(v);
    let xw = step.mul(x, w).unwrap();
    let next = step.add(c, xw).unwrap();
    step.set_outputs(vec![next, w, next]).unwrap();
    step
}

/// Parameters `(c0, w0, xs)`; with `computed_xs` the loop scans `1.5 * xs` (a value in
/// an arena slot) instead of `xs` itself. Outputs: the final carry, the stacked carries,
/// the final weight, and the scanned stack doubled (read again after the loop).
fn scan_read_again(computed_xs: bool) -> Graph {
    let v = TensorType::new(DType::F32, [2]);
    let mut g = Graph::new("scan");
    let c0 = g.parameter(v.clone());
    let w0 = g.parameter(v);
    let xs = g.parameter(TensorType::new(DType::F32, [ROWS, 2]));
    let xs = if computed_xs {
        g.mul_scalar(xs, 1.5).unwrap()
    } else {
        xs
    };
    let (finals, ys) = g.scan(&[c0, w0], &[xs], &weighted_sum()).unwrap();
    let again = g.mul_scalar(xs, 2.0).unwrap();
    g.set_outputs(vec![finals[0], ys[0], finals[1], again])
        .unwrap();
    g
}

fn inputs() -> Vec<Tensor> {
    vec![
        Tensor::from_vec(&[2], vec![1f32, -1.0]).unwrap(),
        Tensor::from_vec(&[2], vec![2f32, 3.0]).unwrap(),
        Tensor::from_vec(&[ROWS, 2], (0..ROWS * 2).map(|i| i as f32 * 0.1).collect()).unwrap(),
    ]
}

/// The entries of the plan's only loop step.
fn entries(exe: &mut NativeExecutable) -> &mut Vec<Entry> {
    let p = exe.plan_mut();
    let at = p.steps.iter().position(|s| matches!(s, Step::Loop { .. }));
    match at.map(|i| &mut p.steps[i]) {
        Some(Step::Loop { entry, .. }) => entry,
        _ => panic!("no loop step"),
    }
}

/// Runs `g` `calls` times on the same arguments (each call's updates feeding the next),
/// with every carried value copied in when `copying`; returns the last call's outputs and
/// the arguments after it.
fn run(
    g: &Graph,
    options: &CompileOptions,
    copying: bool,
    calls: usize,
) -> (Vec<Tensor>, Vec<Tensor>, Vec<Entry>) {
    let backend = super::NativeBackend::new();
    let mut exe = NativeExecutable::new(g, options).unwrap();
    let planned = entries(&mut exe).clone();
    if copying {
        for e in entries(&mut exe).iter_mut() {
            if *e != Entry::Unread {
                *e = Entry::Copy;
            }
        }
    }
    let mut args: Vec<_> = inputs()
        .iter()
        .map(|t| backend.upload(t).unwrap())
        .collect();
    let mut out = Vec::new();
    for _ in 0..calls {
        out = exe.execute(&mut args).unwrap();
    }
    let down = |bs: &[crate::backend::Buffer]| -> Vec<Tensor> {
        bs.iter().map(|b| backend.download(b).unwrap()).collect()
    };
    (down(&out), down(&args), planned)
}

fn bits(ts: &[Tensor]) -> Vec<Vec<u32>> {
    ts.iter()
        .map(|t| {
            let a = t.array::<f32>().unwrap();
            a.iter().map(|v| v.to_bits()).collect()
        })
        .collect()
}

#[test]
fn a_read_only_stack_is_borrowed_and_still_read_after_the_loop() {
    for computed_xs in [false, true] {
        let g = scan_read_again(computed_xs);
        let options = CompileOptions::default();
        let (out, args, entry) = run(&g, &options, false, 2);
        // The count, the carry, the weight, the stack, the stacked carries, the residuals.
        assert_eq!(
            entry,
            [
                Entry::Copy,
                Entry::Copy,
                Entry::Borrow,
                Entry::Borrow,
                Entry::Copy,
                Entry::Unread
            ],
            "{}",
            plan(&g, &options).describe()
        );
        let scale = if computed_xs { 1.5 } else { 1.0 };
        let xs: Vec<f32> = inputs()[2]
            .array::<f32>()
            .unwrap()
            .iter()
            .map(|v| v * scale)
            .collect();
        let mut c = [1f32, -1.0];
        let mut stacked = Vec::new();
        for row in xs.chunks(2) {
            c = [c[0] + row[0] * 2.0, c[1] + row[1] * 3.0];
            stacked.extend(c);
        }
        assert_eq!(out[0], Tensor::from_vec(&[2], c.to_vec()).unwrap());
        assert_eq!(out[1], Tensor::from_vec(&[ROWS, 2], stacked).unwrap());
        assert_eq!(out[2], inputs()[1]);
        let doubled = xs.iter().map(|v| v * 2.0).collect();
        assert_eq!(out[3], Tensor::from_vec(&[ROWS, 2], doubled).unwrap());
        // Nothing is donated: the caller's buffers are as they were.
        assert_eq!(args, inputs());
        let (copied, copied_args, _) = run(&g, &options, true, 2);
        assert_eq!(bits(&out), bits(&copied));
        assert_eq!(copied_args, args);
    }
}

/// The carry donated (updated by the loop's final carry): it moves into the loop and
/// back, over calls that each start from the last one's result.
#[test]
fn a_donated_carry_moves_in_and_out_bit_identical_to_copying() {
    let g = scan_read_again(false);
    let options = CompileOptions {
        updates: vec![(0, 0)],
    };
    let p = plan(&g, &options);
    assert!(p.homes.iter().any(|h| h.0 == 0), "{}", p.describe());
    for calls in [1, 3] {
        let (out, args, entry) = run(&g, &options, false, calls);
        assert_eq!(entry[1], Entry::Move, "{}", p.describe());
        let (copied, copied_args, _) = run(&g, &options, true, calls);
        assert_eq!(bits(&out), bits(&copied));
        assert_eq!(bits(&args), bits(&copied_args));
        // The update is the carry the loop ended with, returned as stacked too.
        let stacked = out[0].array::<f32>().unwrap();
        let last: Vec<f32> = stacked.iter().skip((ROWS - 1) * 2).copied().collect();
        assert_eq!(args[0], Tensor::from_vec(&[2], last).unwrap());
        assert_eq!(&args[1..], &inputs()[1..]);
    }
}

/// A donated parameter read again after the loop keeps its own memory: copied in.
#[test]
fn a_donated_parameter_read_after_the_loop_is_copied() {
    let v = TensorType::new(DType::F32, [2]);
    let mut g = Graph::new("scan");
    let c0 = g.parameter(v.clone());
    let w0 = g.parameter(v);
    let xs = g.parameter(TensorType::new(DType::F32, [ROWS, 2]));
    let (finals, _) = g.scan(&[c0, w0], &[xs], &weighted_sum()).unwrap();
    let later = g.add(c0, finals[0]).unwrap();
    g.set_outputs(vec![finals[0], later]).unwrap();
    let options = CompileOptions {
        updates: vec![(0, 0)],
    };
    let (out, args, entry) = run(&g, &options, false, 1);
    assert_eq!(entry[1], Entry::Copy);
    let (copied, copied_args, _) = run(&g, &options, true, 1);
    assert_eq!(bits(&out), bits(&copied));
    assert_eq!(bits(&args), bits(&copied_args));
    // The update is the final carry; the one output reads the carry it started from.
    let c = args[0].array::<f32>().unwrap();
    let sum: Vec<f32> = c.iter().zip([1f32, -1.0]).map(|(a, b)| b + a).collect();
    assert_eq!(out[0], Tensor::from_vec(&[2], sum).unwrap());
}

/// A loop inside a loop's body borrows a value its body reads only: from the outer loop's
/// buffer, itself borrowed from the caller's argument.
#[test]
fn a_nested_loop_borrows_from_its_enclosing_loop() {
    let v = TensorType::new(DType::F32, [2]);
    let mut inner = Graph::new("inner");
    let c = inner.parameter(v.clone());
    let row = inner.parameter(v.clone());
    let next = inner.add(c, row).unwrap();
    inner.set_outputs(vec![next, next]).unwrap();
    let mut step = Graph::new("outer");
    let c = step.parameter(v.clone());
    let m = step.parameter(TensorType::new(DType::F32, [ROWS, 2]));
    let x = step.parameter(v.clone());
    let (finals, _) = step.scan(&[c], &[m], &inner).unwrap();
    let next = step.add(finals[0], x).unwrap();
    step.set_outputs(vec![next, m, next]).unwrap();
    let mut g = Graph::new("nested");
    let c0 = g.parameter(v.clone());
    let m0 = g.parameter(TensorType::new(DType::F32, [ROWS, 2]));
    let xs = g.parameter(TensorType::new(DType::F32, [3, 2]));
    let (finals, _) = g.scan(&[c0, m0], &[xs], &step).unwrap();
    g.set_outputs(vec![finals[0]]).unwrap();

    let p = plan(&g, &CompileOptions::default());
    let Some(Step::Loop { entry, .. }) = p.steps.iter().find(|s| matches!(s, Step::Loop { .. }))
    else {
        panic!("no loop\n{}", p.describe())
    };
    assert_eq!(entry[2], Entry::Borrow, "{}", p.describe());
    let body = &p.loops[0].body;
    let inner_entry = body.steps.iter().find_map(|s| match s {
        Step::Loop { entry, .. } => Some(entry.clone()),
        _ => None,
    });
    assert_eq!(
        inner_entry.as_ref().map(|e| e[2]),
        Some(Entry::Borrow),
        "{}",
        body.describe()
    );

    let backend = super::NativeBackend::new();
    let m: Vec<f32> = (0..ROWS * 2).map(|i| i as f32 * 0.25).collect();
    let args = [
        Tensor::from_vec(&[2], vec![1f32, -1.0]).unwrap(),
        Tensor::from_vec(&[ROWS, 2], m.clone()).unwrap(),
        Tensor::from_vec(&[3, 2], vec![0.5f32, 1.0, 1.5, 2.0, 2.5, 3.0]).unwrap(),
    ];
    let mut bufs: Vec<_> = args.iter().map(|t| backend.upload(t).unwrap()).collect();
    let mut exe = NativeExecutable::new(&g, &CompileOptions::default()).unwrap();
    let out = exe.execute(&mut bufs).unwrap();
    let mut c = [1f32, -1.0];
    for x in [[0.5f32, 1.0], [1.5, 2.0], [2.5, 3.0]] {
        for r in m.chunks(2) {
            c = [c[0] + r[0], c[1] + r[1]];
        }
        c = [c[0] + x[0], c[1] + x[1]];
    }
    assert_eq!(
        backend.download(&out[0]).unwrap(),
        Tensor::from_vec(&[2], c.to_vec()).unwrap()
    );
    let after: Vec<Tensor> = bufs.iter().map(|b| backend.download(b).unwrap()).collect();
    assert_eq!(after, args);
}
