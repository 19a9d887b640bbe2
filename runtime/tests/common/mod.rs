//! The op conformance table: every primitive, with hand-computed expected outputs.
//! Every backend runs this same list (`native_ops.rs`, and the XLA tests).

#![allow(dead_code)]

use strata_runtime::backend::Backend;
use strata_runtime::ir::{
    BinaryOp, Comparison, ConvParams, DType, DotDims, Graph, OpKind, ReduceOp, TensorType, UnaryOp,
    Value, Window,
};
use strata_runtime::{Result, Tensor};

pub type Build = Box<dyn Fn(&mut Graph, &[Value]) -> Result<Vec<Value>>>;

pub struct Case {
    pub name: String,
    pub inputs: Vec<Tensor>,
    pub build: Build,
    pub expected: Vec<Tensor>,
    /// Allowed |got - want| <= atol + rtol·|want| for float outputs.
    pub rtol: f64,
    pub atol: f64,
}

pub fn f32t(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}
pub fn f64t(dims: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}
pub fn i32t(dims: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}
pub fn i64t(dims: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}
pub fn boolt(dims: &[usize], v: &[bool]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}

fn case(
    name: impl Into<String>,
    inputs: Vec<Tensor>,
    expected: Vec<Tensor>,
    build: impl Fn(&mut Graph, &[Value]) -> Result<Vec<Value>> + 'static,
) -> Case {
    Case {
        name: name.into(),
        inputs,
        build: Box::new(build),
        expected,
        rtol: 1e-6,
        atol: 1e-6,
    }
}

fn unary(op: UnaryOp, x: Tensor, want: Tensor) -> Case {
    case(
        format!("{} {}", op.name(), x.dtype()),
        vec![x],
        vec![want],
        move |g, p| Ok(vec![g.unary(op, p[0])?]),
    )
}

fn binary(op: BinaryOp, a: Tensor, b: Tensor, want: Tensor) -> Case {
    case(
        format!("{} {}", op.name(), a.dtype()),
        vec![a, b],
        vec![want],
        move |g, p| Ok(vec![g.binary(op, p[0], p[1])?]),
    )
}

fn window(dims: &[usize], strides: &[usize], padding: &[(usize, usize)]) -> Window {
    Window {
        dims: dims.to_vec(),
        strides: strides.to_vec(),
        padding: padding.to_vec(),
    }
}

pub fn cases() -> Vec<Case> {
    use std::f32::consts::E;
    let mut c = vec![
        // ---- unary, f32
        unary(
            UnaryOp::Neg,
            f32t(&[3], &[1.0, -2.0, 0.5]),
            f32t(&[3], &[-1.0, 2.0, -0.5]),
        ),
        unary(
            UnaryOp::Abs,
            f32t(&[3], &[-1.5, 2.0, 0.0]),
            f32t(&[3], &[1.5, 2.0, 0.0]),
        ),
        unary(
            UnaryOp::Sign,
            f32t(&[3], &[-3.0, 0.0, 2.5]),
            f32t(&[3], &[-1.0, 0.0, 1.0]),
        ),
        unary(
            UnaryOp::Exp,
            f32t(&[3], &[0.0, 1.0, -1.0]),
            f32t(&[3], &[1.0, E, 1.0 / E]),
        ),
        unary(
            UnaryOp::Expm1,
            f32t(&[3], &[0.0, 1e-5, 1.0]),
            f32t(&[3], &[0.0, 1.000005e-5, E - 1.0]),
        ),
        unary(
            UnaryOp::Log,
            f32t(&[3], &[1.0, E, 0.5]),
            f32t(&[3], &[0.0, 1.0, -std::f32::consts::LN_2]),
        ),
        unary(
            UnaryOp::Log1p,
            f32t(&[3], &[0.0, 1e-5, 1.0]),
            f32t(&[3], &[0.0, 9.99995e-6, std::f32::consts::LN_2]),
        ),
        unary(
            UnaryOp::Tanh,
            f32t(&[3], &[0.0, 1.0, -2.0]),
            f32t(&[3], &[0.0, 0.761_594_2, -0.964_027_6]),
        ),
        unary(
            UnaryOp::Logistic,
            f32t(&[3], &[0.0, 2.0, -40.0]),
            f32t(&[3], &[0.5, 0.880_797_1, 4.248_354e-18]),
        ),
        unary(
            UnaryOp::Sqrt,
            f32t(&[3], &[4.0, 2.0, 0.0]),
            f32t(&[3], &[2.0, std::f32::consts::SQRT_2, 0.0]),
        ),
        unary(
            UnaryOp::Rsqrt,
            f32t(&[3], &[4.0, 0.25, 1.0]),
            f32t(&[3], &[0.5, 2.0, 1.0]),
        ),
        unary(
            UnaryOp::Floor,
            f32t(&[3], &[1.5, -1.5, 2.0]),
            f32t(&[3], &[1.0, -2.0, 2.0]),
        ),
        unary(
            UnaryOp::Ceil,
            f32t(&[3], &[1.5, -1.5, 2.0]),
            f32t(&[3], &[2.0, -1.0, 2.0]),
        ),
        unary(
            UnaryOp::Round,
            f32t(&[4], &[0.5, -0.5, 1.4, 2.5]),
            f32t(&[4], &[1.0, -1.0, 1.0, 3.0]),
        ),
        unary(
            UnaryOp::Erf,
            f32t(&[3], &[0.0, 0.5, -1.0]),
            f32t(&[3], &[0.0, 0.520_499_9, -0.842_700_8]),
        ),
        unary(
            UnaryOp::Not,
            boolt(&[2], &[true, false]),
            boolt(&[2], &[false, true]),
        ),
        // ---- unary, other types
        unary(UnaryOp::Neg, i32t(&[2], &[3, -4]), i32t(&[2], &[-3, 4])),
        unary(UnaryOp::Abs, i64t(&[2], &[-5, 6]), i64t(&[2], &[5, 6])),
        unary(
            UnaryOp::Sign,
            i32t(&[3], &[-7, 0, 9]),
            i32t(&[3], &[-1, 0, 1]),
        ),
        unary(
            UnaryOp::Exp,
            f64t(&[1], &[1.0]),
            f64t(&[1], &[std::f64::consts::E]),
        ),
        // ---- binary
        binary(
            BinaryOp::Add,
            f32t(&[2, 2], &[1.0, -2.0, 3.0, 4.0]),
            f32t(&[2, 2], &[2.0, 5.0, -1.0, 0.5]),
            f32t(&[2, 2], &[3.0, 3.0, 2.0, 4.5]),
        ),
        binary(
            BinaryOp::Sub,
            f32t(&[4], &[1.0, -2.0, 3.0, 4.0]),
            f32t(&[4], &[2.0, 5.0, -1.0, 0.5]),
            f32t(&[4], &[-1.0, -7.0, 4.0, 3.5]),
        ),
        binary(
            BinaryOp::Mul,
            f32t(&[4], &[1.0, -2.0, 3.0, 4.0]),
            f32t(&[4], &[2.0, 5.0, -1.0, 0.5]),
            f32t(&[4], &[2.0, -10.0, -3.0, 2.0]),
        ),
        binary(
            BinaryOp::Div,
            f32t(&[4], &[1.0, -2.0, 3.0, 4.0]),
            f32t(&[4], &[2.0, 5.0, -1.0, 0.5]),
            f32t(&[4], &[0.5, -0.4, -3.0, 8.0]),
        ),
        binary(
            BinaryOp::Max,
            f32t(&[4], &[1.0, -2.0, 3.0, 4.0]),
            f32t(&[4], &[2.0, 5.0, -1.0, 0.5]),
            f32t(&[4], &[2.0, 5.0, 3.0, 4.0]),
        ),
        binary(
            BinaryOp::Min,
            f32t(&[4], &[1.0, -2.0, 3.0, 4.0]),
            f32t(&[4], &[2.0, 5.0, -1.0, 0.5]),
            f32t(&[4], &[1.0, -2.0, -1.0, 0.5]),
        ),
        binary(
            BinaryOp::Max,
            f32t(&[2], &[f32::NAN, 1.0]),
            f32t(&[2], &[0.0, f32::NAN]),
            f32t(&[2], &[f32::NAN, f32::NAN]),
        ),
        binary(
            BinaryOp::Pow,
            f32t(&[3], &[2.0, 9.0, 4.0]),
            f32t(&[3], &[3.0, 0.5, -1.0]),
            f32t(&[3], &[8.0, 3.0, 0.25]),
        ),
        binary(
            BinaryOp::And,
            boolt(&[4], &[true, true, false, false]),
            boolt(&[4], &[true, false, true, false]),
            boolt(&[4], &[true, false, false, false]),
        ),
        binary(
            BinaryOp::Or,
            boolt(&[4], &[true, true, false, false]),
            boolt(&[4], &[true, false, true, false]),
            boolt(&[4], &[true, true, true, false]),
        ),
        binary(
            BinaryOp::Div,
            i32t(&[3], &[7, -7, 9]),
            i32t(&[3], &[2, 2, -1]),
            i32t(&[3], &[3, -3, -9]),
        ),
        binary(
            BinaryOp::Pow,
            i32t(&[3], &[2, 3, -2]),
            i32t(&[3], &[10, 0, 3]),
            i32t(&[3], &[1024, 1, -8]),
        ),
        binary(
            BinaryOp::Add,
            i64t(&[2], &[1 << 40, -3]),
            i64t(&[2], &[5, 3]),
            i64t(&[2], &[(1 << 40) + 5, 0]),
        ),
        binary(
            BinaryOp::Max,
            i32t(&[2], &[1, -5]),
            i32t(&[2], &[0, -2]),
            i32t(&[2], &[1, -2]),
        ),
    ];

    // ---- compare and select
    let cmp_cases = [
        (Comparison::Lt, [true, false, false]),
        (Comparison::Le, [true, true, false]),
        (Comparison::Gt, [false, false, true]),
        (Comparison::Ge, [false, true, true]),
        (Comparison::Eq, [false, true, false]),
        (Comparison::Ne, [true, false, true]),
    ];
    for (cmp, want) in cmp_cases {
        c.push(case(
            format!("compare {cmp:?}"),
            vec![f32t(&[3], &[1.0, 2.0, 3.0]), f32t(&[3], &[2.0, 2.0, 2.0])],
            vec![boolt(&[3], &want)],
            move |g, p| Ok(vec![g.compare(cmp, p[0], p[1])?]),
        ));
    }
    c.push(case(
        "compare nan",
        vec![f32t(&[1], &[f32::NAN]), f32t(&[1], &[f32::NAN])],
        vec![boolt(&[1], &[false]), boolt(&[1], &[true])],
        |g, p| {
            Ok(vec![
                g.compare(Comparison::Eq, p[0], p[1])?,
                g.compare(Comparison::Ne, p[0], p[1])?,
            ])
        },
    ));
    c.push(case(
        "compare i64",
        vec![i64t(&[2], &[5, -1]), i64t(&[2], &[4, 0])],
        vec![boolt(&[2], &[true, false])],
        |g, p| Ok(vec![g.compare(Comparison::Gt, p[0], p[1])?]),
    ));
    c.push(case(
        "select",
        vec![
            boolt(&[3], &[true, false, true]),
            f32t(&[3], &[1.0, 2.0, 3.0]),
            f32t(&[3], &[10.0, 20.0, 30.0]),
        ],
        vec![f32t(&[3], &[1.0, 20.0, 3.0])],
        |g, p| Ok(vec![g.select(p[0], p[1], p[2])?]),
    ));
    c.push(case(
        "select scalar predicate",
        vec![
            boolt(&[], &[false]),
            i32t(&[2], &[1, 2]),
            i32t(&[2], &[3, 4]),
        ],
        vec![i32t(&[2], &[3, 4])],
        |g, p| Ok(vec![g.select(p[0], p[1], p[2])?]),
    ));

    // ---- convert
    c.push(case(
        "convert f32 to i32 truncates and saturates",
        vec![f32t(&[4], &[1.7, -1.7, 3e10, f32::NAN])],
        vec![i32t(&[4], &[1, -1, i32::MAX, 0])],
        |g, p| Ok(vec![g.convert(p[0], DType::I32)?]),
    ));
    c.push(case(
        "convert i32 and bool to f32",
        vec![i32t(&[2], &[3, -2]), boolt(&[2], &[true, false])],
        vec![f32t(&[2], &[3.0, -2.0]), f32t(&[2], &[1.0, 0.0])],
        |g, p| {
            Ok(vec![
                g.convert(p[0], DType::F32)?,
                g.convert(p[1], DType::F32)?,
            ])
        },
    ));
    c.push(case(
        "convert f32 to bool, i64 to i32 wraps",
        vec![f32t(&[2], &[0.0, 2.5]), i64t(&[1], &[(1 << 33) + 5])],
        vec![boolt(&[2], &[false, true]), i32t(&[1], &[5])],
        |g, p| {
            Ok(vec![
                g.convert(p[0], DType::Bool)?,
                g.convert(p[1], DType::I32)?,
            ])
        },
    ));
    c.push(case(
        "convert through bf16 rounds to nearest even",
        vec![f32t(&[2], &[1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0])],
        vec![f32t(&[2], &[1.0, 1.015_625])],
        |g, p| {
            let b = g.convert(p[0], DType::BF16)?;
            Ok(vec![g.convert(b, DType::F32)?])
        },
    ));
    c.push(case(
        "convert f64 to f32",
        vec![f64t(&[1], &[0.1])],
        vec![f32t(&[1], &[0.1])],
        |g, p| Ok(vec![g.convert(p[0], DType::F32)?]),
    ));

    // ---- sources
    c.push(case(
        "constant",
        vec![],
        vec![f32t(&[2], &[1.5, -2.0])],
        |g, _| Ok(vec![g.constant(f32t(&[2], &[1.5, -2.0]))]),
    ));
    c.push(case(
        "iota",
        vec![],
        vec![
            i32t(&[2, 3], &[0, 1, 2, 0, 1, 2]),
            i32t(&[2, 3], &[0, 0, 0, 1, 1, 1]),
            f32t(&[4], &[0.0, 1.0, 2.0, 3.0]),
        ],
        |g, _| {
            Ok(vec![
                g.iota(TensorType::new(DType::I32, [2, 3]), 1)?,
                g.iota(TensorType::new(DType::I32, [2, 3]), 0)?,
                g.iota(TensorType::new(DType::F32, [4]), 0)?,
            ])
        },
    ));

    // ---- movement
    c.push(case(
        "broadcast_in_dim row, column, size-1, scalar",
        vec![
            f32t(&[3], &[1.0, 2.0, 3.0]),
            f32t(&[2], &[7.0, 8.0]),
            f32t(&[1, 3], &[4.0, 5.0, 6.0]),
            f32t(&[], &[9.0]),
        ],
        vec![
            f32t(&[2, 3], &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0]),
            f32t(&[2, 3], &[7.0, 7.0, 7.0, 8.0, 8.0, 8.0]),
            f32t(&[2, 3], &[4.0, 5.0, 6.0, 4.0, 5.0, 6.0]),
            f32t(&[2, 2], &[9.0; 4]),
        ],
        |g, p| {
            Ok(vec![
                g.broadcast_in_dim(p[0], [2, 3], &[1])?,
                g.broadcast_in_dim(p[1], [2, 3], &[0])?,
                g.broadcast_in_dim(p[2], [2, 3], &[0, 1])?,
                g.broadcast_in_dim(p[3], [2, 2], &[])?,
            ])
        },
    ));
    c.push(case(
        "broadcast_in_dim middle dimension of rank 3",
        vec![i32t(&[2], &[1, 2])],
        vec![i32t(&[2, 2, 2], &[1, 1, 2, 2, 1, 1, 2, 2])],
        |g, p| Ok(vec![g.broadcast_in_dim(p[0], [2, 2, 2], &[1])?]),
    ));
    c.push(case(
        "numpy broadcasting add",
        vec![f32t(&[2, 1], &[1.0, 2.0]), f32t(&[3], &[10.0, 20.0, 30.0])],
        vec![f32t(&[2, 3], &[11.0, 21.0, 31.0, 12.0, 22.0, 32.0])],
        |g, p| Ok(vec![g.add(p[0], p[1])?]),
    ));
    c.push(case(
        "reshape",
        vec![
            f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            f32t(&[1], &[4.0]),
        ],
        vec![
            f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            f32t(&[], &[4.0]),
        ],
        |g, p| Ok(vec![g.reshape(p[0], [3, 2])?, g.reshape(p[1], [])?]),
    ));
    c.push(case(
        "stop_gradient",
        vec![f32t(&[2], &[1.0, -2.0])],
        vec![f32t(&[2], &[1.0, -2.0])],
        |g, p| Ok(vec![g.stop_gradient(p[0])?]),
    ));
    c.push(case(
        "transpose",
        vec![
            f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            i32t(&[2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]),
        ],
        vec![
            f32t(&[3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]),
            i32t(&[2, 2, 2], &[0, 2, 4, 6, 1, 3, 5, 7]),
        ],
        |g, p| {
            Ok(vec![
                g.transpose(p[0], &[1, 0])?,
                g.transpose(p[1], &[2, 0, 1])?,
            ])
        },
    ));
    c.push(case(
        "reverse",
        vec![f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])],
        vec![
            f32t(&[2, 3], &[3.0, 2.0, 1.0, 6.0, 5.0, 4.0]),
            f32t(&[2, 3], &[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]),
        ],
        |g, p| Ok(vec![g.reverse(p[0], &[1])?, g.reverse(p[0], &[0, 1])?]),
    ));
    c.push(case(
        "slice with stride",
        vec![i32t(&[2, 4], &[0, 1, 2, 3, 4, 5, 6, 7])],
        vec![i32t(&[2, 2], &[1, 3, 5, 7]), i32t(&[1, 1], &[6])],
        |g, p| {
            Ok(vec![
                g.slice(p[0], &[0, 1], &[2, 4], &[1, 2])?,
                g.slice(p[0], &[1, 2], &[2, 3], &[1, 1])?,
            ])
        },
    ));
    // Starts from parameters (run-time values): in range, past the end (clamped back so
    // the window fits) and negative (clamped to 0); i64 starts too.
    c.push(case(
        "dynamic_slice (starts clamped into range)",
        vec![
            i32t(&[3, 4], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
            i32t(&[], &[1]),
            i32t(&[], &[2]),
            i32t(&[], &[7]),
            i32t(&[], &[-3]),
        ],
        vec![
            i32t(&[2, 2], &[6, 7, 10, 11]),
            i32t(&[2, 3], &[4, 5, 6, 8, 9, 10]),
            f32t(&[1, 2], &[6.0, 7.0]),
        ],
        |g, p| {
            let wide = g.convert(p[0], DType::F32)?;
            let (a, b) = (g.convert(p[1], DType::I64)?, g.convert(p[2], DType::I64)?);
            Ok(vec![
                g.dynamic_slice(p[0], &[p[1], p[2]], &[2, 2])?,
                g.dynamic_slice(p[0], &[p[3], p[4]], &[2, 3])?,
                g.dynamic_slice(wide, &[a, b], &[1, 2])?,
            ])
        },
    ));
    // A rank-0 operand takes no starts: the window is the whole value, and an update
    // replaces it (the StableHLO printer once spelled the empty slice_sizes so that XLA
    // refused the module).
    c.push(case(
        "dynamic_slice and dynamic_update_slice of a rank-0 operand",
        vec![f32t(&[], &[3.0]), f32t(&[], &[7.0]), i32t(&[], &[-4])],
        vec![f32t(&[], &[3.0]), f32t(&[], &[7.0]), i32t(&[], &[-4])],
        |g, p| {
            Ok(vec![
                g.dynamic_slice(p[0], &[], &[])?,
                g.dynamic_update_slice(p[0], p[1], &[])?,
                g.dynamic_slice(p[2], &[], &[])?,
            ])
        },
    ));
    c.push(case(
        "dynamic_update_slice (starts clamped into range)",
        vec![
            f32t(&[3, 4], &[0.0; 12]),
            f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            i32t(&[], &[1]),
            i32t(&[], &[9]),
        ],
        vec![
            f32t(
                &[3, 4],
                &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 4.0],
            ),
            f32t(
                &[3, 4],
                &[1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            ),
        ],
        |g, p| {
            let zero = g.constant(Tensor::from_vec(&[], vec![0i32]).unwrap());
            Ok(vec![
                g.dynamic_update_slice(p[0], p[1], &[p[2], p[3]])?,
                g.dynamic_update_slice(p[0], p[1], &[zero, zero])?,
            ])
        },
    ));
    c.push(case(
        "concatenate",
        vec![
            f32t(&[1, 2], &[1.0, 2.0]),
            f32t(&[1, 1], &[3.0]),
            f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
        ],
        vec![
            f32t(&[1, 3], &[1.0, 2.0, 3.0]),
            f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 1.0, 2.0]),
        ],
        |g, p| {
            Ok(vec![
                g.concatenate(&[p[0], p[1]], 1)?,
                g.concatenate(&[p[2], p[0]], 0)?,
            ])
        },
    ));
    c.push(case(
        "pad edges, interior, negative",
        vec![
            f32t(&[2], &[1.0, 2.0]),
            f32t(&[4], &[1.0, 2.0, 3.0, 4.0]),
            f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
        ],
        vec![
            f32t(&[6], &[0.0, 1.0, 0.0, 2.0, 0.0, 0.0]),
            f32t(&[2], &[2.0, 3.0]),
            f32t(&[3, 3], &[9.0, 1.0, 2.0, 9.0, 3.0, 4.0, 9.0, 9.0, 9.0]),
        ],
        |g, p| {
            let z = g.scalar(0.0, DType::F32);
            let nine = g.scalar(9.0, DType::F32);
            Ok(vec![
                g.pad(p[0], z, &[1], &[2], &[1])?,
                g.pad(p[1], z, &[-1], &[-1], &[0])?,
                g.pad(p[2], nine, &[0, 1], &[1, 0], &[0, 0])?,
            ])
        },
    ));

    // ---- dot_general
    c.push(case(
        "dot_general matmul",
        vec![
            f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            f32t(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]),
        ],
        vec![f32t(&[2, 2], &[58.0, 64.0, 139.0, 154.0])],
        |g, p| Ok(vec![g.dot_general(p[0], p[1], DotDims::matmul())?]),
    ));
    c.push(case(
        "dot_general batched",
        vec![
            f32t(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]),
            f32t(&[2, 2, 1], &[1.0, 1.0, 2.0, 1.0]),
        ],
        vec![f32t(&[2, 1, 1], &[3.0, 10.0])],
        |g, p| Ok(vec![g.matmul(p[0], p[1])?]),
    ));
    c.push(case(
        "dot_general transposed lhs",
        vec![
            f64t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            f64t(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
        ],
        vec![f64t(&[2, 2], &[6.0, 8.0, 8.0, 10.0])],
        |g, p| {
            Ok(vec![g.dot_general(
                p[0],
                p[1],
                DotDims {
                    lhs_batch: vec![],
                    rhs_batch: vec![],
                    lhs_contract: vec![0],
                    rhs_contract: vec![0],
                },
            )?])
        },
    ));
    c.push(case(
        "dot_general batch dimension in the middle",
        vec![
            f32t(&[2, 2, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
            f32t(&[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]),
        ],
        vec![f32t(&[2, 2, 1], &[2.0, 14.0, 18.0, 46.0])],
        |g, p| {
            Ok(vec![g.dot_general(
                p[0],
                p[1],
                DotDims {
                    lhs_batch: vec![1],
                    rhs_batch: vec![0],
                    lhs_contract: vec![2],
                    rhs_contract: vec![1],
                },
            )?])
        },
    ));

    // ---- reduce
    c.push(case(
        "reduce sum, max, min over axes",
        vec![f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])],
        vec![
            f32t(&[3], &[5.0, 7.0, 9.0]),
            f32t(&[2], &[6.0, 15.0]),
            f32t(&[], &[21.0]),
            f32t(&[2], &[3.0, 6.0]),
            f32t(&[3], &[1.0, 2.0, 3.0]),
        ],
        |g, p| {
            Ok(vec![
                g.reduce(ReduceOp::Sum, p[0], &[0])?,
                g.reduce(ReduceOp::Sum, p[0], &[1])?,
                g.reduce(ReduceOp::Sum, p[0], &[0, 1])?,
                g.reduce(ReduceOp::Max, p[0], &[1])?,
                g.reduce(ReduceOp::Min, p[0], &[0])?,
            ])
        },
    ));
    c.push(case(
        "reduce over non-adjacent axes, ints",
        vec![
            f32t(&[2, 3, 2], &(0..12).map(|v| v as f32).collect::<Vec<_>>()),
            i32t(&[3], &[1, 2, 3]),
        ],
        vec![f32t(&[3], &[14.0, 22.0, 30.0]), i32t(&[], &[6])],
        |g, p| {
            Ok(vec![
                g.reduce(ReduceOp::Sum, p[0], &[0, 2])?,
                g.reduce(ReduceOp::Sum, p[1], &[0])?,
            ])
        },
    ));

    // ---- moments
    c.push(case(
        "moments over columns, rows, everything",
        vec![f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])],
        vec![
            f32t(&[2, 3], &[2.5, 3.5, 4.5, 2.25, 2.25, 2.25]),
            f32t(&[2, 2], &[2.0, 5.0, 2.0 / 3.0, 2.0 / 3.0]),
            f32t(&[2], &[3.5, 17.5 / 6.0]),
        ],
        |g, p| {
            Ok(vec![
                g.moments(p[0], &[0])?,
                g.moments(p[0], &[1])?,
                g.moments(p[0], &[0, 1])?,
            ])
        },
    ));
    c.push(case(
        "moments channels last (f64), over non-adjacent axes",
        vec![
            f64t(&[2, 2, 2], &(0..8).map(f64::from).collect::<Vec<_>>()),
            f32t(&[2, 3, 2], &(0..12).map(|v| v as f32).collect::<Vec<_>>()),
        ],
        vec![
            f64t(&[2, 2], &[3.0, 4.0, 5.0, 5.0]),
            f32t(&[2, 3], &[3.5, 5.5, 7.5, 9.25, 9.25, 9.25]),
        ],
        |g, p| Ok(vec![g.moments(p[0], &[0, 1])?, g.moments(p[1], &[0, 2])?]),
    ));

    c.push(case(
        "reduce max and min propagate NaN",
        vec![f32t(&[2, 2], &[1.0, f32::NAN, 3.0, 4.0])],
        vec![f32t(&[2], &[f32::NAN, 4.0]), f32t(&[2], &[1.0, f32::NAN])],
        |g, p| {
            Ok(vec![
                g.reduce(ReduceOp::Max, p[0], &[1])?,
                g.reduce(ReduceOp::Min, p[0], &[0])?,
            ])
        },
    ));

    // ---- pooling
    c.push(case(
        "reduce_window max, sum with padding, min",
        vec![
            f32t(&[1, 4, 1], &[1.0, 3.0, 2.0, 5.0]),
            f32t(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]),
            f32t(
                &[1, 3, 3, 1],
                &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
            ),
            f32t(&[4], &[4.0, 1.0, 3.0, 2.0]),
        ],
        vec![
            f32t(&[1, 2, 1], &[3.0, 5.0]),
            f32t(&[3], &[3.0, 9.0, 9.0]),
            f32t(&[1, 2, 2, 1], &[5.0, 6.0, 8.0, 9.0]),
            f32t(&[2], &[1.0, 2.0]),
        ],
        |g, p| {
            Ok(vec![
                g.reduce_window(
                    ReduceOp::Max,
                    p[0],
                    window(&[1, 2, 1], &[1, 2, 1], &[(0, 0); 3]),
                )?,
                g.reduce_window(ReduceOp::Sum, p[1], window(&[3], &[2], &[(1, 1)]))?,
                g.reduce_window(
                    ReduceOp::Max,
                    p[2],
                    window(&[1, 2, 2, 1], &[1; 4], &[(0, 0); 4]),
                )?,
                g.reduce_window(ReduceOp::Min, p[3], window(&[2], &[2], &[(0, 0)]))?,
            ])
        },
    ));
    // NHWC 2-D windows, which the native backend runs on its own fast path: 2x2/2 valid
    // max, 3x3/2 same (padded) sum and max, with ties inside windows.
    let nhwc = || {
        f32t(
            &[1, 3, 4, 2],
            &[
                1.0, 0.0, 5.0, -1.0, 2.0, 3.0, 2.0, 3.0, //
                5.0, 2.0, 3.0, 2.0, 2.0, -4.0, 0.0, 1.0, //
                4.0, 6.0, 1.0, -2.0, 7.0, 0.0, 7.0, 8.0,
            ],
        )
    };
    c.push(case(
        "reduce_window NHWC 2x2/2 valid max, 3x3/2 same sum and max",
        vec![nhwc()],
        vec![
            f32t(&[1, 1, 2, 2], &[5.0, 2.0, 2.0, 3.0]),
            f32t(&[1, 2, 2, 2], &[18.0, 2.0, 6.0, 3.0, 22.0, 4.0, 16.0, 5.0]),
            f32t(&[1, 2, 2, 2], &[5.0, 3.0, 2.0, 3.0, 7.0, 6.0, 7.0, 8.0]),
        ],
        |g, p| {
            let same = window(
                &[1, 3, 3, 1],
                &[1, 2, 2, 1],
                &[(0, 0), (1, 1), (0, 1), (0, 0)],
            );
            Ok(vec![
                g.reduce_window(
                    ReduceOp::Max,
                    p[0],
                    window(&[1, 2, 2, 1], &[1, 2, 2, 1], &[(0, 0); 4]),
                )?,
                g.reduce_window(ReduceOp::Sum, p[0], same.clone())?,
                g.reduce_window(ReduceOp::Max, p[0], same)?,
            ])
        },
    ));
    c.push(case(
        "select_and_scatter_add NHWC 2x2/2 valid, ties go to the first",
        vec![nhwc(), f32t(&[1, 1, 2, 2], &[10.0, 20.0, 30.0, 40.0])],
        vec![f32t(
            &[1, 3, 4, 2],
            &[
                0.0, 0.0, 10.0, 0.0, 30.0, 40.0, 0.0, 0.0, //
                0.0, 20.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, //
                0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            ],
        )],
        |g, p| {
            Ok(vec![g.select_and_scatter_add(
                ReduceOp::Max,
                p[1],
                p[0],
                window(&[1, 2, 2, 1], &[1, 2, 2, 1], &[(0, 0); 4]),
            )?])
        },
    ));
    c.push(case(
        "select_and_scatter_add",
        vec![
            f32t(&[4], &[1.0, 3.0, 2.0, 5.0]),
            f32t(&[2], &[10.0, 20.0]),
            f32t(&[3], &[1.0, 3.0, 2.0]),
        ],
        vec![
            f32t(&[4], &[0.0, 10.0, 0.0, 20.0]),
            f32t(&[3], &[0.0, 30.0, 0.0]),
            f32t(&[3], &[10.0, 0.0, 20.0]),
        ],
        |g, p| {
            Ok(vec![
                g.select_and_scatter_add(ReduceOp::Max, p[1], p[0], window(&[2], &[2], &[(0, 0)]))?,
                g.select_and_scatter_add(ReduceOp::Max, p[1], p[2], window(&[2], &[1], &[(0, 0)]))?,
                g.select_and_scatter_add(ReduceOp::Min, p[1], p[2], window(&[2], &[1], &[(0, 0)]))?,
            ])
        },
    ));

    // ---- convolution
    let conv = |strides: &[usize],
                padding: &[(i64, i64)],
                lhs_d: &[usize],
                rhs_d: &[usize],
                groups: usize| ConvParams {
        strides: strides.to_vec(),
        padding: padding.to_vec(),
        lhs_dilation: lhs_d.to_vec(),
        rhs_dilation: rhs_d.to_vec(),
        feature_groups: groups,
    };
    c.push(case(
        "convolution 1d, padded and strided",
        vec![
            f32t(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]),
            f32t(&[2, 1, 1], &[1.0, -1.0]),
        ],
        vec![
            f32t(&[1, 3, 1], &[-1.0, -1.0, -1.0]),
            f32t(&[1, 3, 1], &[-1.0, -1.0, 4.0]),
        ],
        move |g, p| {
            Ok(vec![
                g.convolution(p[0], p[1], ConvParams::simple(1))?,
                g.convolution(p[0], p[1], conv(&[2], &[(1, 1)], &[1], &[1], 1))?,
            ])
        },
    ));
    // More output pixels than input pixels (an input gradient's form): the native kernel
    // multiplies each input pixel once and gathers (`conv_native`'s gather form).
    c.push(case(
        "convolution 1d, input-dilated and padded",
        vec![
            f32t(&[1, 2, 1], &[1.0, 2.0]),
            f32t(&[2, 1, 1], &[1.0, 10.0]),
        ],
        vec![f32t(&[1, 4, 1], &[10.0, 1.0, 20.0, 2.0])],
        move |g, p| {
            Ok(vec![g.convolution(
                p[0],
                p[1],
                conv(&[1], &[(1, 1)], &[2], &[1], 1),
            )?])
        },
    ));
    c.push(case(
        "convolution 2d",
        vec![
            f32t(
                &[1, 3, 3, 1],
                &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
            ),
            f32t(&[2, 2, 1, 1], &[1.0, 0.0, 0.0, 1.0]),
        ],
        vec![f32t(&[1, 2, 2, 1], &[6.0, 8.0, 12.0, 14.0])],
        |g, p| Ok(vec![g.convolution(p[0], p[1], ConvParams::simple(2))?]),
    ));
    c.push(case(
        "convolution pointwise, multi-channel",
        vec![
            f32t(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]),
            f32t(&[1, 2, 3], &[1.0, 0.0, 1.0, 0.0, 1.0, 1.0]),
        ],
        vec![f32t(&[1, 2, 3], &[1.0, 2.0, 3.0, 3.0, 4.0, 7.0])],
        |g, p| Ok(vec![g.convolution(p[0], p[1], ConvParams::simple(1))?]),
    ));
    c.push(case(
        "convolution grouped, dilated",
        vec![
            f32t(&[1, 1, 4], &[1.0, 2.0, 3.0, 4.0]),
            f32t(&[1, 2, 2], &[1.0, 10.0, 2.0, 20.0]),
            f32t(&[1, 5, 1], &[1.0, 2.0, 3.0, 4.0, 5.0]),
            f32t(&[2, 1, 1], &[1.0, 1.0]),
            f32t(&[1, 3, 1], &[1.0, 2.0, 3.0]),
        ],
        vec![
            f32t(&[1, 1, 2], &[5.0, 110.0]),
            f32t(&[1, 3, 1], &[4.0, 6.0, 8.0]),
            f32t(&[1, 4, 1], &[1.0, 2.0, 2.0, 3.0]),
        ],
        move |g, p| {
            Ok(vec![
                g.convolution(p[0], p[1], conv(&[1], &[(0, 0)], &[1], &[1], 2))?,
                g.convolution(p[2], p[3], conv(&[1], &[(0, 0)], &[1], &[2], 1))?,
                g.convolution(p[4], p[3], conv(&[1], &[(0, 0)], &[2], &[1], 1))?,
            ])
        },
    ));

    // ---- gather / scatter
    c.push(case(
        "gather rows, columns, batched, clamped",
        vec![
            f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            i32t(&[2], &[2, 0]),
            i64t(&[1], &[1]),
            f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            i32t(&[2], &[5, -1]),
        ],
        vec![
            f32t(&[2, 2], &[5.0, 6.0, 1.0, 2.0]),
            f32t(&[3, 1], &[2.0, 4.0, 6.0]),
            f32t(&[2], &[3.0, 4.0]),
            f32t(&[2, 2], &[5.0, 6.0, 1.0, 2.0]),
        ],
        |g, p| {
            Ok(vec![
                g.gather(p[0], p[1], 0, 0)?,
                g.gather(p[0], p[2], 1, 0)?,
                g.gather(p[3], p[1], 1, 1)?,
                g.gather(p[0], p[4], 0, 0)?,
            ])
        },
    ));
    c.push(case(
        "scatter_add repeated and batched",
        vec![
            f32t(&[3, 2], &[0.0; 6]),
            i32t(&[2], &[0, 0]),
            f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
            f32t(&[2, 3], &[0.0; 6]),
            i32t(&[2], &[2, 0]),
            f32t(&[2], &[1.0, 2.0]),
        ],
        vec![
            f32t(&[3, 2], &[4.0, 6.0, 0.0, 0.0, 0.0, 0.0]),
            f32t(&[2, 3], &[0.0, 0.0, 1.0, 2.0, 0.0, 0.0]),
        ],
        |g, p| {
            Ok(vec![
                g.scatter_add(p[0], p[1], p[2], 0, 0)?,
                g.scatter_add(p[3], p[4], p[5], 1, 1)?,
            ])
        },
    ));

    // ---- random, collectives
    c.push(case(
        "random_uniform (Threefry-2x32 known answers)",
        vec![i32t(&[2], &[0, 0])],
        vec![f32t(&[2], &[0.418_457_03, 0.216_295_36])],
        |g, p| {
            Ok(vec![
                g.random_uniform(p[0], TensorType::new(DType::F32, [2]))?
            ])
        },
    ));
    c.push(case(
        "all_reduce_sum and replica_id on one replica",
        vec![f32t(&[2], &[1.0, 2.0])],
        vec![f32t(&[2], &[1.0, 2.0]), i32t(&[], &[0])],
        |g, p| Ok(vec![g.all_reduce_sum(p[0])?, g.replica_id()]),
    ));
    c.extend(while_cases());
    c
}

/// [`while_cases`] with element 0 of every expected output off by one: each output must
/// fail.
pub fn wrong_while_cases() -> Vec<Case> {
    let mut cases = while_cases();
    for c in &mut cases {
        for t in &mut c.expected {
            *t = match &*t {
                Tensor::F32(a) => {
                    let mut v: Vec<f32> = a.iter().copied().collect();
                    v[0] += 1.0;
                    Tensor::from_vec(a.shape(), v).unwrap()
                }
                Tensor::I32(a) => {
                    let mut v: Vec<i32> = a.iter().copied().collect();
                    v[0] += 1;
                    Tensor::from_vec(a.shape(), v).unwrap()
                }
                Tensor::Bool(a) => {
                    let mut v: Vec<bool> = a.iter().copied().collect();
                    v[0] = !v[0];
                    Tensor::from_vec(a.shape(), v).unwrap()
                }
                other => panic!("no wrong value made for {}", other.ty()),
            };
        }
    }
    cases
}

/// A region: a graph of `types` in, what `f` builds out.
pub fn region(
    name: &str,
    types: &[TensorType],
    f: impl FnOnce(&mut Graph, &[Value]) -> Result<Vec<Value>>,
) -> Result<Graph> {
    let mut g = Graph::new(name);
    let p: Vec<Value> = types.iter().map(|t| g.parameter(t.clone())).collect();
    let outs = f(&mut g, &p)?;
    g.set_outputs(outs)?;
    Ok(g)
}

/// `carried[0] < n` over an i32 counter first in the carried values.
pub fn count_below(types: &[TensorType], n: i32) -> Result<Graph> {
    region("cond", types, |g, p| {
        let limit = g.scalar(n as f64, DType::I32);
        Ok(vec![g.compare(Comparison::Lt, p[0], limit)?])
    })
}

fn types_of(g: &Graph, vs: &[Value]) -> Vec<TensorType> {
    vs.iter().map(|&v| g.ty(v).clone()).collect()
}

/// The while loop's cases: a counted loop, one that never runs its body, one carrying a
/// matrix through a matrix product, the scan pattern (row `i` read with dynamic_slice,
/// written with dynamic_update_slice), a bool flag carried and updated in place, and a loop
/// inside a loop's body.
pub fn while_cases() -> Vec<Case> {
    let i0 = || i32t(&[], &[0]);
    vec![
        // i < 10: acc += x * i; i += 1. Only two of the three carried values are used.
        case(
            "while counting to 10 (acc += x*i)",
            vec![i0(), f32t(&[3], &[0.0; 3]), f32t(&[3], &[1.0, 2.0, -0.5])],
            vec![i32t(&[], &[10]), f32t(&[3], &[45.0, 90.0, -22.5])],
            |g, p| {
                let ts = types_of(g, p);
                let body = region("body", &ts, |b, q| {
                    let fi = b.convert(q[0], DType::F32)?;
                    let fi = b.broadcast_in_dim(fi, [3], &[])?;
                    let xi = b.mul(q[2], fi)?;
                    let acc = b.add(q[1], xi)?;
                    let one = b.scalar(1.0, DType::I32);
                    Ok(vec![b.add(q[0], one)?, acc, q[2]])
                })?;
                let w = g.while_loop(p, count_below(&ts, 10)?, body)?;
                Ok(vec![w[0], w[1]])
            },
        ),
        // The condition is false at once: the initial values come back, the body (which
        // would double them) never runs.
        case(
            "while with zero iterations",
            vec![i32t(&[], &[5]), f32t(&[2], &[1.5, -2.0])],
            vec![i32t(&[], &[5]), f32t(&[2], &[1.5, -2.0])],
            |g, p| {
                let ts = types_of(g, p);
                let body = region("body", &ts, |b, q| {
                    let one = b.scalar(1.0, DType::I32);
                    Ok(vec![b.add(q[0], one)?, b.add(q[1], q[1])?])
                })?;
                g.while_loop(p, count_below(&ts, 3)?, body)
            },
        ),
        // m := m . a three times: m0 a^3 with a = [[1, 1], [0, 1]], a^3 = [[1, 3], [0, 1]].
        case(
            "while carrying a matrix through dot_general",
            vec![
                i0(),
                f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
                f32t(&[2, 2], &[1.0, 1.0, 0.0, 1.0]),
            ],
            vec![
                i32t(&[], &[3]),
                f32t(&[2, 2], &[1.0, 5.0, 3.0, 13.0]),
                f32t(&[2, 2], &[1.0, 1.0, 0.0, 1.0]),
            ],
            |g, p| {
                let ts = types_of(g, p);
                let body = region("body", &ts, |b, q| {
                    let one = b.scalar(1.0, DType::I32);
                    let m = b.dot_general(q[1], q[2], DotDims::matmul())?;
                    Ok(vec![b.add(q[0], one)?, m, q[2]])
                })?;
                g.while_loop(p, count_below(&ts, 3)?, body)
            },
        ),
        // A scan: h += xs[i]; ys[i] = h. The running sums of the rows, stacked.
        case(
            "while as a scan (dynamic_slice row i, dynamic_update_slice row i)",
            vec![
                i0(),
                f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                f32t(&[3, 2], &[0.0; 6]),
                f32t(&[1, 2], &[0.0; 2]),
            ],
            vec![
                f32t(&[3, 2], &[1.0, 2.0, 4.0, 6.0, 9.0, 12.0]),
                f32t(&[1, 2], &[9.0, 12.0]),
            ],
            |g, p| {
                let ts = types_of(g, p);
                let body = region("body", &ts, |b, q| {
                    let zero = b.scalar(0.0, DType::I32);
                    let row = b.dynamic_slice(q[1], &[q[0], zero], &[1, 2])?;
                    let h = b.add(q[3], row)?;
                    let ys = b.dynamic_update_slice(q[2], h, &[q[0], zero])?;
                    let one = b.scalar(1.0, DType::I32);
                    Ok(vec![b.add(q[0], one)?, q[1], ys, h])
                })?;
                let w = g.while_loop(p, count_below(&ts, 3)?, body)?;
                Ok(vec![w[2], w[3]])
            },
        ),
        // The body returns its parameters swapped: results must be gathered before any
        // becomes current. Three swaps leave them swapped.
        case(
            "while swapping its carried values",
            vec![i0(), f32t(&[2], &[1.0, 2.0]), f32t(&[2], &[3.0, 4.0])],
            vec![
                i32t(&[], &[3]),
                f32t(&[2], &[3.0, 4.0]),
                f32t(&[2], &[1.0, 2.0]),
            ],
            |g, p| {
                let ts = types_of(g, p);
                let body = region("body", &ts, |b, q| {
                    let one = b.scalar(1.0, DType::I32);
                    Ok(vec![b.add(q[0], one)?, q[2], q[1]])
                })?;
                g.while_loop(p, count_below(&ts, 3)?, body)
            },
        ),
        // The condition is a carried bool, returned as it came; the body computes the
        // next one (a do-while: the body runs at least once if the flag starts true).
        case(
            "while whose condition is a carried bool",
            vec![boolt(&[], &[true]), i32t(&[], &[0])],
            vec![boolt(&[], &[false]), i32t(&[], &[5])],
            |g, p| {
                let ts = types_of(g, p);
                let cond = region("cond", &ts, |_, q| Ok(vec![q[0]]))?;
                let body = region("body", &ts, |b, q| {
                    let one = b.scalar(1.0, DType::I32);
                    let five = b.scalar(5.0, DType::I32);
                    let i = b.add(q[1], one)?;
                    Ok(vec![b.compare(Comparison::Lt, i, five)?, i])
                })?;
                g.while_loop(p, cond, body)
            },
        ),
        bool_flag_while_case(3),
        // for i in 0..3 { for j in 0..4 { acc += 1 } }, the body's results swapped around
        // a parameter returned as it came (acc passes through the inner loop).
        case(
            "while inside a while's body",
            vec![i0(), f32t(&[], &[0.5])],
            vec![i32t(&[], &[3]), f32t(&[], &[12.5])],
            |g, p| {
                let ts = types_of(g, p);
                let body = region("outer_body", &ts, |b, q| {
                    let j0 = b.scalar(0.0, DType::I32);
                    let inner_ts = vec![ts[0].clone(), ts[1].clone()];
                    let inner = region("inner_body", &inner_ts, |c, r| {
                        let one = c.scalar(1.0, DType::I32);
                        let fone = c.scalar(1.0, DType::F32);
                        Ok(vec![c.add(r[0], one)?, c.add(r[1], fone)?])
                    })?;
                    let w = b.while_loop(&[j0, q[1]], count_below(&inner_ts, 4)?, inner)?;
                    let one = b.scalar(1.0, DType::I32);
                    Ok(vec![b.add(q[0], one)?, w[1]])
                })?;
                g.while_loop(p, count_below(&ts, 3)?, body)
            },
        ),
    ]
}

/// A bool flag a plain while loop carries, updated in place by a fused elementwise kernel
/// (the native planner aliases the carried flag's slot with the kernel's output), over `n`
/// elements: for i in 0..3 { flag |= v > i; v -= 1 }. From `v = k mod 7` the flag ends
/// `v > 0` (step 0 decides it) and `v` ends 3 less. At 40,000 elements the native kernel
/// is split across the worker crew.
pub fn bool_flag_while_case(n: usize) -> Case {
    let v: Vec<f32> = (0..n).map(|k| (k % 7) as f32).collect();
    let flags: Vec<bool> = v.iter().map(|&x| x > 0.0).collect();
    let v3: Vec<f32> = v.iter().map(|&x| x - 3.0).collect();
    case(
        format!("while carrying a bool flag updated in place, n={n}"),
        vec![
            i32t(&[], &[0]),
            boolt(&[n], &vec![false; n]),
            f32t(&[n], &v),
        ],
        vec![i32t(&[], &[3]), boolt(&[n], &flags), f32t(&[n], &v3)],
        move |g, p| {
            let ts = types_of(g, p);
            let body = region("body", &ts, |b, q| {
                let fi = b.convert(q[0], DType::F32)?;
                let fi = b.broadcast_in_dim(fi, [n], &[])?;
                let gt = b.compare(Comparison::Gt, q[2], fi)?;
                let flag = b.binary(BinaryOp::Or, q[1], gt)?;
                let v = b.add_scalar(q[2], -1.0)?;
                let one = b.scalar(1.0, DType::I32);
                Ok(vec![b.add(q[0], one)?, flag, v])
            })?;
            g.while_loop(p, count_below(&ts, 3)?, body)
        },
    )
}

/// The primitives a case's graph uses.
pub fn kinds_used(case: &Case) -> Vec<OpKind> {
    let mut g = Graph::new(&case.name);
    let params: Vec<Value> = case.inputs.iter().map(|t| g.parameter(t.ty())).collect();
    let _ = (case.build)(&mut g, &params).unwrap();
    let mut k: Vec<OpKind> = g.nodes().iter().map(|n| n.op.kind()).collect();
    k.dedup();
    k
}

fn close(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.ty() != want.ty() {
        return Err(format!("type {} != expected {}", got.ty(), want.ty()));
    }
    let as_f64 = |t: &Tensor| -> Vec<f64> {
        match t {
            Tensor::F32(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::F64(a) => a.iter().copied().collect(),
            Tensor::BF16(a) => a.iter().map(|v| v.to_f64()).collect(),
            Tensor::I32(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::I64(a) => a.iter().map(|&v| v as f64).collect(),
            Tensor::Bool(a) => a.iter().map(|&v| v as u8 as f64).collect(),
        }
    };
    let exact = !got.dtype().is_float();
    for (i, (g, w)) in as_f64(got).iter().zip(as_f64(want)).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if exact {
            *g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        if !ok {
            return Err(format!("element {i}: got {g}, expected {w}"));
        }
    }
    Ok(())
}

/// Runs every case on `backend`; returns the failures.
pub fn run_all(backend: &dyn Backend, cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let mut g = Graph::new(case.name.replace(' ', "_"));
        let params: Vec<Value> = case.inputs.iter().map(|t| g.parameter(t.ty())).collect();
        let outs = match (case.build)(&mut g, &params) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{}: build failed: {e}", case.name));
                continue;
            }
        };
        g.set_outputs(outs).unwrap();
        match backend.run(&g, &case.inputs) {
            Ok(got) => {
                if got.len() != case.expected.len() {
                    failures.push(format!(
                        "{}: {} outputs, expected {}",
                        case.name,
                        got.len(),
                        case.expected.len()
                    ));
                }
                for (k, (gt, w)) in got.iter().zip(&case.expected).enumerate() {
                    if let Err(e) = close(gt, w, case.rtol, case.atol) {
                        failures.push(format!("{} output {k}: {e}", case.name));
                    }
                }
            }
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
    }
    failures
}
