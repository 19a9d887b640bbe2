//! Numeric gradient checks for every differentiable primitive (f64, central differences
//! along a random direction and along single coordinates), and a test that fails when a
//! primitive is in neither this table nor the list of ones without gradients.

use strata_runtime::autodiff::gradcheck::GradCheck;
use strata_runtime::ir::{
    BinaryOp, Comparison, ConvParams, DType, DotDims, Graph, OpKind, ReduceOp, UnaryOp, Value,
    Window,
};
use strata_runtime::random::Rng;
use strata_runtime::{Result, Tensor};

type Build = Box<dyn Fn(&mut Graph, &[Value]) -> Result<Value>>;

struct Check {
    name: String,
    kind: OpKind,
    inputs: Vec<Tensor>,
    wrt: Vec<usize>,
    build: Build,
    config: GradCheck,
}

/// Random f64 tensor with entries in `[lo, hi)`.
fn rand(dims: &[usize], lo: f64, hi: f64, seed: u64) -> Tensor {
    let mut r = Rng::new(seed);
    let n: usize = dims.iter().product();
    Tensor::from_vec(
        dims,
        (0..n)
            .map(|_| lo + (hi - lo) * r.next_f64())
            .collect::<Vec<f64>>(),
    )
    .unwrap()
}

fn check(
    name: impl Into<String>,
    kind: OpKind,
    inputs: Vec<Tensor>,
    wrt: &[usize],
    build: impl Fn(&mut Graph, &[Value]) -> Result<Value> + 'static,
) -> Check {
    Check {
        name: name.into(),
        kind,
        inputs,
        wrt: wrt.to_vec(),
        build: Box::new(build),
        config: GradCheck::default(),
    }
}

fn win(dims: &[usize], strides: &[usize], padding: &[(usize, usize)]) -> Window {
    Window {
        dims: dims.to_vec(),
        strides: strides.to_vec(),
        padding: padding.to_vec(),
    }
}

fn table() -> Vec<Check> {
    let mut t = Vec::new();
    for op in UnaryOp::ALL {
        let (lo, hi) = match op {
            UnaryOp::Not => continue, // bool: no gradient
            UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Log1p => (0.5, 2.0),
            // Away from the jumps, where the derivative is 0.
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Sign => (0.1, 0.4),
            UnaryOp::Abs => (0.2, 1.0),
            _ => (-1.5, 1.5),
        };
        let x = rand(&[2, 3], lo, hi, op as u64);
        let x = if op == UnaryOp::Abs {
            // both signs
            Tensor::F64(
                x.array::<f64>()
                    .unwrap()
                    .mapv(|v| if v > 0.6 { -v } else { v }),
            )
        } else {
            x
        };
        t.push(check(
            format!("unary {op:?}"),
            OpKind::Unary,
            vec![x],
            &[0],
            move |g, p| g.unary(op, p[0]),
        ));
    }
    for op in BinaryOp::ALL {
        let (a, b) = match op {
            BinaryOp::And | BinaryOp::Or => continue,
            BinaryOp::Div => (rand(&[2, 3], -2.0, 2.0, 1), rand(&[2, 3], 0.5, 2.0, 2)),
            BinaryOp::Pow => (rand(&[2, 3], 0.5, 2.0, 3), rand(&[2, 3], -1.5, 1.5, 4)),
            _ => (rand(&[2, 3], -2.0, 2.0, 5), rand(&[2, 3], -2.0, 2.0, 6)),
        };
        t.push(check(
            format!("binary {op:?}"),
            OpKind::Binary,
            vec![a, b],
            &[0, 1],
            move |g, p| g.binary(op, p[0], p[1]),
        ));
    }
    t.push(check(
        "select",
        OpKind::Select,
        vec![
            rand(&[4], -1.0, 1.0, 7),
            rand(&[4], -1.0, 1.0, 8),
            rand(&[4], -1.0, 1.0, 9),
        ],
        &[1, 2],
        |g, p| {
            let pred = g.compare(Comparison::Gt, p[0], p[1])?;
            g.select(pred, p[1], p[2])
        },
    ));
    let mut c = check(
        "convert f64 -> f32 -> f64",
        OpKind::Convert,
        vec![rand(&[3], -1.0, 1.0, 10)],
        &[0],
        |g, p| {
            let f = g.convert(p[0], DType::F32)?;
            let sq = g.mul(f, f)?;
            g.convert(sq, DType::F64)
        },
    );
    // f32 rounding: a larger step keeps it small beside the difference.
    c.config = GradCheck {
        eps: 1e-3,
        rtol: 1e-3,
        atol: 1e-5,
        ..GradCheck::default()
    };
    t.push(c);
    t.push(check(
        "broadcast_in_dim",
        OpKind::BroadcastInDim,
        vec![rand(&[3], -1.0, 1.0, 11), rand(&[2, 1], -1.0, 1.0, 12)],
        &[0, 1],
        |g, p| {
            let a = g.broadcast_in_dim(p[0], [2, 3], &[1])?;
            let b = g.broadcast_in_dim(p[1], [2, 3], &[0, 1])?;
            g.mul(a, b)
        },
    ));
    t.push(check(
        "reshape",
        OpKind::Reshape,
        vec![rand(&[2, 3], -1.0, 1.0, 13)],
        &[0],
        |g, p| {
            let r = g.reshape(p[0], [3, 2])?;
            g.mul(r, r)
        },
    ));
    t.push(check(
        "transpose",
        OpKind::Transpose,
        vec![rand(&[2, 3, 4], -1.0, 1.0, 14)],
        &[0],
        |g, p| g.transpose(p[0], &[2, 0, 1]),
    ));
    t.push(check(
        "reverse",
        OpKind::Reverse,
        vec![rand(&[2, 3], -1.0, 1.0, 15)],
        &[0],
        |g, p| g.reverse(p[0], &[1]),
    ));
    t.push(check(
        "slice",
        OpKind::Slice,
        vec![rand(&[4, 5], -1.0, 1.0, 16)],
        &[0],
        |g, p| g.slice(p[0], &[1, 0], &[4, 5], &[2, 3]),
    ));
    t.push(check(
        "dynamic_slice",
        OpKind::DynamicSlice,
        vec![rand(&[4, 5], -1.0, 1.0, 41)],
        &[0],
        |g, p| {
            let (a, b) = (
                g.constant(Tensor::from_vec(&[], vec![1i32]).unwrap()),
                g.constant(Tensor::from_vec(&[], vec![9i32]).unwrap()),
            );
            g.dynamic_slice(p[0], &[a, b], &[2, 3])
        },
    ));
    t.push(check(
        "dynamic_update_slice (operand and update)",
        OpKind::DynamicUpdateSlice,
        vec![rand(&[4, 5], -1.0, 1.0, 42), rand(&[2, 3], -1.0, 1.0, 43)],
        &[0, 1],
        |g, p| {
            let (a, b) = (
                g.constant(Tensor::from_vec(&[], vec![-2i32]).unwrap()),
                g.constant(Tensor::from_vec(&[], vec![1i32]).unwrap()),
            );
            let y = g.dynamic_update_slice(p[0], p[1], &[a, b])?;
            g.mul(y, y)
        },
    ));
    t.push(check(
        "concatenate",
        OpKind::Concatenate,
        vec![rand(&[2, 2], -1.0, 1.0, 17), rand(&[2, 3], -1.0, 1.0, 18)],
        &[0, 1],
        |g, p| g.concatenate(&[p[0], p[1]], 1),
    ));
    t.push(check(
        "pad (operand and value)",
        OpKind::Pad,
        vec![rand(&[3, 4], -1.0, 1.0, 19), rand(&[], -1.0, 1.0, 20)],
        &[0, 1],
        |g, p| {
            let padded = g.pad(p[0], p[1], &[1, -1], &[2, 0], &[1, 2])?;
            g.mul(padded, padded)
        },
    ));
    t.push(check(
        "dot_general matmul",
        OpKind::DotGeneral,
        vec![rand(&[3, 4], -1.0, 1.0, 21), rand(&[4, 2], -1.0, 1.0, 22)],
        &[0, 1],
        |g, p| g.dot_general(p[0], p[1], DotDims::matmul()),
    ));
    t.push(check(
        "dot_general batched, transposed, batch in the middle",
        OpKind::DotGeneral,
        vec![
            rand(&[3, 2, 4], -1.0, 1.0, 23),
            rand(&[2, 5, 4], -1.0, 1.0, 24),
        ],
        &[0, 1],
        |g, p| {
            g.dot_general(
                p[0],
                p[1],
                DotDims {
                    lhs_batch: vec![1],
                    rhs_batch: vec![0],
                    lhs_contract: vec![2],
                    rhs_contract: vec![2],
                },
            )
        },
    ));
    t.push(check(
        "dot_general two contracting dims",
        OpKind::DotGeneral,
        vec![
            rand(&[2, 3, 4], -1.0, 1.0, 25),
            rand(&[4, 3, 2], -1.0, 1.0, 26),
        ],
        &[0, 1],
        |g, p| {
            g.dot_general(
                p[0],
                p[1],
                DotDims {
                    lhs_batch: vec![],
                    rhs_batch: vec![],
                    lhs_contract: vec![1, 2],
                    rhs_contract: vec![1, 0],
                },
            )
        },
    ));
    for (op, axes) in [
        (ReduceOp::Sum, vec![0, 2]),
        (ReduceOp::Max, vec![1]),
        (ReduceOp::Min, vec![0, 1, 2]),
    ] {
        t.push(check(
            format!("reduce {op:?} {axes:?}"),
            OpKind::Reduce,
            vec![rand(&[2, 3, 4], -1.0, 1.0, 27)],
            &[0],
            move |g, p| g.reduce(op, p[0], &axes),
        ));
    }
    for (dims, axes) in [
        (vec![3, 2, 2, 3], vec![0, 1, 2]),
        (vec![2, 3, 4], vec![2]),
        (vec![2, 3, 4], vec![0, 2]),
    ] {
        t.push(check(
            format!("moments {dims:?} over {axes:?}"),
            OpKind::Moments,
            vec![rand(&dims, -1.0, 1.0, 41)],
            &[0],
            move |g, p| g.moments(p[0], &axes),
        ));
    }
    t.push(check(
        "reduce_window sum, strided and padded",
        OpKind::ReduceWindow,
        vec![rand(&[2, 7, 5, 3], -1.0, 1.0, 28)],
        &[0],
        |g, p| {
            g.reduce_window(
                ReduceOp::Sum,
                p[0],
                win(
                    &[1, 3, 2, 1],
                    &[1, 2, 2, 1],
                    &[(0, 0), (1, 2), (1, 0), (0, 0)],
                ),
            )
        },
    ));
    t.push(check(
        "reduce_window max (pooling)",
        OpKind::ReduceWindow,
        vec![rand(&[1, 6, 6, 2], -1.0, 1.0, 29)],
        &[0],
        |g, p| {
            g.reduce_window(
                ReduceOp::Max,
                p[0],
                win(
                    &[1, 2, 3, 1],
                    &[1, 2, 2, 1],
                    &[(0, 0), (0, 0), (1, 1), (0, 0)],
                ),
            )
        },
    ));
    t.push(check(
        "reduce_window max, 3x3/2 same (overlapping windows)",
        OpKind::ReduceWindow,
        vec![rand(&[2, 7, 5, 3], -1.0, 1.0, 31)],
        &[0],
        |g, p| {
            g.reduce_window(
                ReduceOp::Max,
                p[0],
                win(
                    &[1, 3, 3, 1],
                    &[1, 2, 2, 1],
                    &[(0, 0), (1, 1), (1, 1), (0, 0)],
                ),
            )
        },
    ));
    t.push(check(
        "reduce_window min",
        OpKind::ReduceWindow,
        vec![rand(&[8], -1.0, 1.0, 30)],
        &[0],
        |g, p| g.reduce_window(ReduceOp::Min, p[0], win(&[3], &[2], &[(0, 0)])),
    ));
    let conv =
        |s: &[usize], pad: &[(i64, i64)], ld: &[usize], rd: &[usize], groups: usize| ConvParams {
            strides: s.to_vec(),
            padding: pad.to_vec(),
            lhs_dilation: ld.to_vec(),
            rhs_dilation: rd.to_vec(),
            feature_groups: groups,
        };
    let cases = [
        (
            "2d strided, padded",
            vec![2, 7, 6, 3],
            vec![3, 2, 3, 4],
            conv(&[2, 1], &[(1, 1), (0, 1)], &[1, 1], &[1, 1], 1),
        ),
        (
            "2d grouped",
            vec![1, 5, 5, 4],
            vec![2, 2, 2, 6],
            conv(&[1, 2], &[(0, 0), (1, 0)], &[1, 1], &[1, 1], 2),
        ),
        (
            "1d dilated kernel",
            vec![2, 9, 2],
            vec![3, 2, 3],
            conv(&[2], &[(2, 1)], &[1], &[2], 1),
        ),
        (
            "1d dilated input",
            vec![1, 4, 2],
            vec![2, 2, 2],
            conv(&[1], &[(1, 0)], &[2], &[1], 1),
        ),
        (
            "2d pointwise",
            vec![2, 3, 3, 4],
            vec![1, 1, 4, 5],
            ConvParams::simple(2),
        ),
    ];
    for (i, (name, xs, ws, params)) in cases.into_iter().enumerate() {
        t.push(check(
            format!("convolution {name}"),
            OpKind::Convolution,
            vec![
                rand(&xs, -1.0, 1.0, 31 + i as u64),
                rand(&ws, -1.0, 1.0, 41 + i as u64),
            ],
            &[0, 1],
            move |g, p| g.convolution(p[0], p[1], params.clone()),
        ));
    }
    t.push(check(
        "gather (embedding rows, and batched label pick)",
        OpKind::Gather,
        vec![
            rand(&[5, 3], -1.0, 1.0, 50),
            Tensor::from_vec(&[4], vec![4i32, 0, 4, 2]).unwrap(),
            rand(&[4, 5], -1.0, 1.0, 51),
        ],
        &[0, 2],
        |g, p| {
            let rows = g.gather(p[0], p[1], 0, 0)?; // [4, 3]
            let picked = g.gather(p[2], p[1], 1, 1)?; // [4]
            let picked = g.reshape(picked, [4, 1])?;
            g.mul(rows, picked)
        },
    ));
    t.push(check(
        "scatter_add (operand and updates)",
        OpKind::ScatterAdd,
        vec![
            rand(&[5, 3], -1.0, 1.0, 52),
            Tensor::from_vec(&[4], vec![1i32, 1, 3, 0]).unwrap(),
            rand(&[4, 3], -1.0, 1.0, 53),
        ],
        &[0, 2],
        |g, p| {
            let s = g.scatter_add(p[0], p[1], p[2], 0, 0)?;
            g.mul(s, s)
        },
    ));
    t.push(check(
        "all_reduce_sum (one replica)",
        OpKind::AllReduceSum,
        vec![rand(&[3], -1.0, 1.0, 54)],
        &[0],
        |g, p| {
            let s = g.all_reduce_sum(p[0])?;
            g.mul(s, s)
        },
    ));
    // A loop is differentiable when a scan built it (a plain `while`, with a run-time trip
    // count, is refused as in JAX: `tests/scan.rs`, which also checks many more scans).
    let mut step = Graph::new("cell");
    let h = step.parameter(f64_ty(&[2]));
    let w = step.parameter(f64_ty(&[2, 2]));
    let x = step.parameter(f64_ty(&[2]));
    let hr = step.reshape(h, vec![1, 2]).unwrap();
    let hw = step.matmul(hr, w).unwrap();
    let hw = step.reshape(hw, vec![2]).unwrap();
    let pre = step.add(hw, x).unwrap();
    let next = step.tanh(pre).unwrap();
    step.set_outputs(vec![next, w, next]).unwrap();
    t.push(check(
        "while (a scan: a tanh cell, its weight carried)",
        OpKind::While,
        vec![
            rand(&[2], -1.0, 1.0, 55),
            rand(&[2, 2], -1.0, 1.0, 56),
            rand(&[4, 2], -1.0, 1.0, 57),
        ],
        &[0, 1, 2],
        move |g, p| {
            let (c, ys) = g.scan(&[p[0], p[1]], &[p[2]], &step)?;
            let s = g.sum_all(ys[0])?;
            let f = g.sum_all(c[0])?;
            g.add(s, f)
        },
    ));
    t
}

fn f64_ty(dims: &[usize]) -> strata_runtime::ir::TensorType {
    strata_runtime::ir::TensorType::new(DType::F64, dims.to_vec())
}

/// Primitives without a gradient rule, and why.
const NOT_DIFFERENTIABLE: &[(OpKind, &str)] = &[
    (OpKind::Parameter, "an input"),
    (OpKind::Constant, "no inputs"),
    (OpKind::Iota, "no inputs"),
    (OpKind::Compare, "boolean result"),
    (OpKind::StopGradient, "its gradient is zero by definition"),
    (OpKind::RandomUniform, "integer key"),
    (OpKind::ReplicaId, "no inputs"),
    (
        OpKind::SelectAndScatterAdd,
        "itself a gradient; second derivatives of pooling are not supported",
    ),
];

#[test]
fn every_differentiable_primitive_passes_gradcheck() {
    let mut failures = Vec::new();
    for c in table() {
        if let Err(e) = c.config.run(&c.inputs, &c.wrt, &c.build) {
            failures.push(format!("{}: {e}", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_primitive_is_gradchecked_or_listed_as_not_differentiable() {
    let t = table();
    for &kind in OpKind::ALL {
        let checked = t.iter().any(|c| c.kind == kind);
        let exempt = NOT_DIFFERENTIABLE.iter().any(|(k, _)| *k == kind);
        assert!(
            checked ^ exempt,
            "{kind:?}: gradchecked = {checked}, listed as not differentiable = {exempt}"
        );
    }
    for op in UnaryOp::ALL {
        assert!(
            op == UnaryOp::Not || t.iter().any(|c| c.name == format!("unary {op:?}")),
            "{op:?}"
        );
    }
    for op in BinaryOp::ALL {
        let logical = matches!(op, BinaryOp::And | BinaryOp::Or);
        assert!(
            logical || t.iter().any(|c| c.name == format!("binary {op:?}")),
            "{op:?}"
        );
    }
}

#[test]
fn gradcheck_catches_a_wrong_gradient() {
    // round(x·10⁶)/10⁶ has a recorded gradient of 0, but at the check's step of 10⁻⁶ its
    // slope is 1: the check must report the mismatch.
    let x = rand(&[3], 0.6, 0.9, 99);
    let res = GradCheck::default().run(&[x], &[0], |g, p| {
        let s = g.mul_scalar(p[0], 1e6)?;
        let r = g.unary(UnaryOp::Round, s)?;
        g.mul_scalar(r, 1e-6)
    });
    assert!(res.is_err(), "a wrong gradient passed the check");
}
