//! The builder's shape errors (one per rule), the verifier, the printer and autodiff's
//! own errors.

use strata_runtime::autodiff;
use strata_runtime::ir::{
    BinaryOp, Comparison, ConvParams, DType, DotDims, Graph, Node, Op, ReduceOp, Region,
    TensorType, UnaryOp, Value, Window,
};
use strata_runtime::{Error, Tensor};

fn f32p(g: &mut Graph, dims: &[usize]) -> Value {
    g.parameter(TensorType::new(DType::F32, dims))
}

/// Asserts a shape error from `op` whose message mentions every fragment.
#[track_caller]
fn shape_err<T: std::fmt::Debug>(r: Result<T, Error>, op: &str, fragments: &[&str]) {
    match r {
        Err(Error::Shape { op: o, message, .. }) => {
            assert_eq!(o, op, "wrong op in error: {message}");
            for f in fragments {
                assert!(message.contains(f), "`{message}` does not mention `{f}`");
            }
        }
        other => panic!("expected a shape error from {op}, got {other:?}"),
    }
}

#[test]
fn shape_errors_carry_the_operand_types() {
    let mut g = Graph::new("t");
    let a = f32p(&mut g, &[2, 3]);
    let b = f32p(&mut g, &[3, 2]);
    let want = [
        TensorType::new(DType::F32, [2, 3]),
        TensorType::new(DType::F32, [3, 2]),
    ];
    // A primitive's rule (through the builder) and a composite's own check alike.
    for r in [g.binary(BinaryOp::Add, a, b), g.add(a, b), g.matmul(a, a)] {
        match r {
            Err(Error::Shape { operands, .. }) if operands.len() == 2 => {
                assert_eq!(operands[0], want[0]);
                assert!(operands[1] == want[1] || operands[1] == want[0]);
            }
            other => panic!("expected a shape error with two operand types, got {other:?}"),
        }
    }
}

#[test]
fn elementwise_shape_errors() {
    let mut g = Graph::new("t");
    let a = f32p(&mut g, &[2, 3]);
    let b = f32p(&mut g, &[3, 2]);
    let i = g.parameter(TensorType::new(DType::I32, [2, 3]));
    let p = g.parameter(TensorType::new(DType::Bool, [2, 3]));
    let h = g.parameter(TensorType::new(DType::BF16, [2, 3]));
    shape_err(
        g.binary(BinaryOp::Add, a, b),
        "add",
        &["f32[2, 3]", "f32[3, 2]"],
    );
    shape_err(
        g.binary(BinaryOp::Mul, a, i),
        "multiply",
        &["f32[2, 3]", "i32[2, 3]"],
    );
    shape_err(g.binary(BinaryOp::And, a, a), "and", &["bool"]);
    shape_err(g.binary(BinaryOp::Add, h, h), "add", &["bf16[2, 3]"]);
    shape_err(
        g.unary(UnaryOp::Exp, i),
        "exponential",
        &["f32 or f64", "i32[2, 3]"],
    );
    shape_err(g.unary(UnaryOp::Not, a), "not", &["bool"]);
    shape_err(
        g.compare(Comparison::Lt, a, b),
        "compare",
        &["f32[2, 3]", "f32[3, 2]"],
    );
    shape_err(g.select(a, a, a), "select", &["bool"]);
    shape_err(g.select(p, a, b), "select", &["same type"]);
    // NumPy broadcasting helpers name both shapes.
    shape_err(g.add(a, b), "add", &["[2, 3]", "[3, 2]"]);
}

#[test]
fn movement_shape_errors() {
    let mut g = Graph::new("t");
    let a = f32p(&mut g, &[2, 3]);
    let s = g.parameter(TensorType::scalar(DType::F32));
    shape_err(
        g.broadcast_in_dim(a, [4, 3], &[0, 1]),
        "broadcast_in_dim",
        &["size 2", "[4, 3]"],
    );
    shape_err(
        g.broadcast_in_dim(a, [2, 3], &[1, 0]),
        "broadcast_in_dim",
        &["increasing"],
    );
    shape_err(
        g.broadcast_in_dim(a, [2, 3, 4], &[0]),
        "broadcast_in_dim",
        &["rank 2"],
    );
    shape_err(
        g.reshape(a, [4, 2]),
        "reshape",
        &["6 elements", "8 elements"],
    );
    shape_err(g.transpose(a, &[0, 0]), "transpose", &["permutation"]);
    shape_err(g.reverse(a, &[2]), "reverse", &["axis 2"]);
    shape_err(
        g.slice(a, &[0, 0], &[3, 3], &[1, 1]),
        "slice",
        &["dimension 0"],
    );
    shape_err(
        g.slice(a, &[0, 0], &[2, 3], &[1, 0]),
        "slice",
        &["stride >= 1"],
    );
    shape_err(g.slice(a, &[0], &[2], &[1]), "slice", &["rank 2"]);
    let i0 = g.parameter(TensorType::new(DType::I32, []));
    let l0 = g.parameter(TensorType::new(DType::I64, []));
    let f0 = g.parameter(TensorType::scalar(DType::F32));
    shape_err(
        g.dynamic_slice(a, &[i0], &[1, 1]),
        "dynamic_slice",
        &["rank 2", "got 1"],
    );
    shape_err(
        g.dynamic_slice(a, &[i0, f0], &[1, 1]),
        "dynamic_slice",
        &["start index 1", "f32[]"],
    );
    shape_err(
        g.dynamic_slice(a, &[i0, l0], &[1, 1]),
        "dynamic_slice",
        &["start index 1", "i64[]"],
    );
    shape_err(
        g.dynamic_slice(a, &[i0, i0], &[3, 1]),
        "dynamic_slice",
        &["[3, 1]", "f32[2, 3]"],
    );
    let big = f32p(&mut g, &[3, 3]);
    shape_err(
        g.dynamic_update_slice(a, big, &[i0, i0]),
        "dynamic_update_slice",
        &["f32[3, 3]", "fit inside"],
    );
    let b = f32p(&mut g, &[3, 3]);
    shape_err(
        g.concatenate(&[a, b], 1),
        "concatenate",
        &["axis 1", "f32[2, 3]", "f32[3, 3]"],
    );
    shape_err(g.concatenate(&[], 0), "concatenate", &["at least one"]);
    shape_err(g.pad(a, a, &[0, 0], &[0, 0], &[0, 0]), "pad", &["scalar"]);
    shape_err(
        g.pad(a, s, &[-2, 0], &[-1, 0], &[0, 0]),
        "pad",
        &["negative size"],
    );
    shape_err(g.pad(a, s, &[0], &[0], &[0]), "pad", &["rank 2"]);
    let t = TensorType::new(DType::F32, [2]);
    shape_err(g.iota(t.clone(), 1), "iota", &["dimension 1"]);
    shape_err(
        g.iota(TensorType::new(DType::Bool, [2]), 0),
        "iota",
        &["bool"],
    );
    let k = g.parameter(TensorType::new(DType::I32, [3]));
    shape_err(g.random_uniform(k, t), "random_uniform", &["i32[2]"]);
}

#[test]
fn contraction_and_window_shape_errors() {
    let mut g = Graph::new("t");
    let a = f32p(&mut g, &[2, 3]);
    let b = f32p(&mut g, &[4, 5]);
    shape_err(
        g.dot_general(a, b, DotDims::matmul()),
        "dot_general",
        &["contracting dimension 1 (size 3)", "(size 4)"],
    );
    let i = g.parameter(TensorType::new(DType::I32, [3, 2]));
    shape_err(g.moments(i, &[0]), "moments", &["f32 or f64", "i32[3, 2]"]);
    let h = g.parameter(TensorType::new(DType::BF16, [3, 2]));
    shape_err(g.moments(h, &[0]), "moments", &["f32 or f64", "bf16[3, 2]"]);
    shape_err(g.moments(a, &[2]), "moments", &["axis 2 out of range"]);
    shape_err(g.moments(a, &[1, 1]), "moments", &["axis 1 listed twice"]);
    shape_err(
        g.dot_general(a, i, DotDims::matmul()),
        "dot_general",
        &["f32"],
    );
    shape_err(g.matmul(a, a), "dot_general", &["size 3", "size 2"]);
    shape_err(g.reduce(ReduceOp::Sum, a, &[2]), "reduce", &["axis 2"]);
    shape_err(g.reduce(ReduceOp::Sum, a, &[0, 0]), "reduce", &["twice"]);
    let w = Window {
        dims: vec![3, 1],
        strides: vec![1, 1],
        padding: vec![(0, 0), (0, 0)],
    };
    shape_err(
        g.reduce_window(ReduceOp::Max, a, w),
        "reduce_window",
        &["size 3", "dimension 0"],
    );
    let w = Window {
        dims: vec![1, 1],
        strides: vec![0, 1],
        padding: vec![(0, 0), (0, 0)],
    };
    shape_err(
        g.reduce_window(ReduceOp::Max, a, w),
        "reduce_window",
        &[">= 1"],
    );
    let w = Window {
        dims: vec![1, 1],
        strides: vec![1, 1],
        padding: vec![(0, 0), (0, 0)],
    };
    shape_err(
        g.select_and_scatter_add(ReduceOp::Max, b, a, w.clone()),
        "select_and_scatter_add",
        &["pooled shape"],
    );
    shape_err(
        g.select_and_scatter_add(ReduceOp::Sum, a, a, w),
        "select_and_scatter_add",
        &["Max or Min"],
    );

    let x = f32p(&mut g, &[1, 5, 5, 3]);
    let k = f32p(&mut g, &[3, 3, 4, 8]);
    shape_err(
        g.convolution(x, k, ConvParams::simple(2)),
        "convolution",
        &["3 features", "4"],
    );
    let k = f32p(&mut g, &[6, 3, 3, 8]);
    shape_err(
        g.convolution(x, k, ConvParams::simple(2)),
        "convolution",
        &["does not fit", "spatial dimension 0"],
    );
    let v = f32p(&mut g, &[5, 3]);
    let k2 = f32p(&mut g, &[3, 3, 8]);
    shape_err(
        g.convolution(v, k2, ConvParams::simple(1)),
        "convolution",
        &["rank >= 3"],
    );
    let k = f32p(&mut g, &[3, 3, 3, 8]);
    shape_err(
        g.convolution(x, k, ConvParams::simple(1)),
        "convolution",
        &["need 2 entries"],
    );

    let table = f32p(&mut g, &[10, 4]);
    let fidx = f32p(&mut g, &[3]);
    shape_err(g.gather(table, fidx, 0, 0), "gather", &["i32 or i64"]);
    let idx = g.parameter(TensorType::new(DType::I32, [3]));
    shape_err(g.gather(table, idx, 2, 0), "gather", &["axis 2"]);
    shape_err(g.gather(table, idx, 1, 1), "gather", &["batch"]);
    let upd = f32p(&mut g, &[3, 5]);
    shape_err(
        g.scatter_add(table, idx, upd, 0, 0),
        "scatter_add",
        &["f32[3, 4]"],
    );
    let bools = g.parameter(TensorType::new(DType::Bool, [2]));
    shape_err(g.all_reduce_sum(bools), "all_reduce_sum", &["bool"]);
}

#[test]
fn foreign_values_are_rejected() {
    let mut small = Graph::new("small");
    let mut big = Graph::new("big");
    for _ in 0..5 {
        f32p(&mut big, &[1]);
    }
    let v = Value::clone(&big.params()[4]);
    let a = f32p(&mut small, &[1]);
    shape_err(small.add(a, v), "add", &["does not exist"]);
    shape_err(
        small.unary(UnaryOp::Exp, v),
        "exponential",
        &["does not exist"],
    );
    shape_err(small.sum_all(v), "sum_all", &["does not exist"]);
    shape_err(small.matmul(a, v), "matmul", &["does not exist"]);
    assert!(small.set_outputs(vec![v]).is_err());
}

#[test]
fn verifier_rejects_malformed_graphs() {
    let mut g = Graph::new("ok");
    let x = f32p(&mut g, &[2]);
    let y = g.unary(UnaryOp::Exp, x).unwrap();
    g.set_outputs(vec![y]).unwrap();
    g.verify().unwrap();
    let nodes = g.nodes().to_vec();
    let params = g.params().to_vec();

    // A result type that contradicts the rule.
    let mut bad = nodes.clone();
    bad[1].ty = TensorType::new(DType::F32, [3]);
    let e = Graph::from_parts("bad_type", bad, params.clone(), vec![y])
        .verify()
        .unwrap_err();
    assert!(matches!(e, Error::Verify { node: 1, .. }), "{e}");
    assert!(e.to_string().contains("f32[3]"), "{e}");

    // A use before definition.
    let mut bad = nodes.clone();
    bad.swap(0, 1);
    let e = Graph::from_parts("use_before_def", bad, params.clone(), vec![y])
        .verify()
        .unwrap_err();
    assert!(e.to_string().contains("not defined before"), "{e}");

    // A parameter missing from the parameter list.
    let e = Graph::from_parts("lost_param", nodes.clone(), vec![], vec![y])
        .verify()
        .unwrap_err();
    assert!(e.to_string().contains("parameter 0"), "{e}");

    // An output that does not exist.
    let e = Graph::from_parts(
        "bad_output",
        nodes.clone(),
        params.clone(),
        vec![y, Value::clone(&y)],
    )
    .verify()
    .map(|_| ());
    assert!(e.is_ok());
    let mut extra = Graph::new("other");
    for _ in 0..4 {
        f32p(&mut extra, &[1]);
    }
    let far = extra.params()[3];
    let e = Graph::from_parts("bad_output", nodes.clone(), params.clone(), vec![far])
        .verify()
        .unwrap_err();
    assert!(e.to_string().contains("missing value"), "{e}");

    // A constant whose declared type differs from its literal.
    let bad = vec![Node {
        op: Op::Constant {
            value: Tensor::scalar(1.0f32),
        },
        ty: TensorType::new(DType::F32, [2]),
    }];
    let e = Graph::from_parts("bad_const", bad, vec![], vec![])
        .verify()
        .unwrap_err();
    assert!(e.to_string().contains("declared result type"), "{e}");
}

#[test]
fn printer_shows_ops_types_and_attributes() {
    let mut g = Graph::new("mlp");
    let x = f32p(&mut g, &[32, 784]);
    let w = f32p(&mut g, &[784, 128]);
    let h = g.matmul(x, w).unwrap();
    let r = g.reduce(ReduceOp::Sum, h, &[0]).unwrap();
    g.set_outputs(vec![r]).unwrap();
    let text = g.to_string();
    assert_eq!(
        text,
        "graph mlp(%0: f32[32, 784], %1: f32[784, 128]) -> (%3) {\n\
         \x20 %2 = dot_general(%0, %1) batch=[]/[] contract=[1]/[0] : f32[32, 128]\n\
         \x20 %3 = reduce(%2) sum axes=[0] : f32[128]\n\
         }\n"
    );
}

#[test]
fn autodiff_rejects_bad_requests() {
    let mut g = Graph::new("t");
    let x = f32p(&mut g, &[2]);
    let i = g.parameter(TensorType::new(DType::I32, [2]));
    let y = g.unary(UnaryOp::Exp, x).unwrap();
    assert!(
        matches!(autodiff::grad(&g, y, &[x]), Err(Error::Autodiff { .. })),
        "non-scalar output"
    );
    let s = g.sum_all(y).unwrap();
    assert!(
        matches!(autodiff::grad(&g, s, &[i]), Err(Error::Autodiff { .. })),
        "integer wrt"
    );
    // A value the output does not depend on gets a zero gradient.
    let z = f32p(&mut g, &[3]);
    let gg = autodiff::grad(&g, s, &[x, z]).unwrap();
    assert_eq!(gg.outputs().len(), 2);
    assert_eq!(gg.ty(gg.outputs()[1]), &TensorType::new(DType::F32, [3]));
}

// ---- while loops

/// A region graph: `types` in, what `f` builds out.
fn region(types: &[TensorType], f: impl FnOnce(&mut Graph, &[Value]) -> Vec<Value>) -> Graph {
    let mut g = Graph::new("region");
    let p: Vec<Value> = types.iter().map(|t| g.parameter(t.clone())).collect();
    let outs = f(&mut g, &p);
    g.set_outputs(outs).unwrap();
    g
}

/// `(i32[], f32[3])`, a condition `p0 < 10` and a body `(p0 + 1, p1 * 2)` over them.
fn loop_parts() -> (Vec<TensorType>, Graph, Graph) {
    let ts = vec![
        TensorType::scalar(DType::I32),
        TensorType::new(DType::F32, [3]),
    ];
    let cond = region(&ts, |g, p| {
        let ten = g.scalar(10.0, DType::I32);
        vec![g.compare(Comparison::Lt, p[0], ten).unwrap()]
    });
    let body = region(&ts, |g, p| {
        let one = g.scalar(1.0, DType::I32);
        vec![g.add(p[0], one).unwrap(), g.add(p[1], p[1]).unwrap()]
    });
    (ts, cond, body)
}

#[test]
fn while_loop_gives_one_sibling_per_carried_value() {
    let (ts, cond, body) = loop_parts();
    let mut g = Graph::new("t");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g.while_loop(&init, cond, body).unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(g.ty(w[0]), &ts[0]);
    assert_eq!(g.ty(w[1]), &ts[1]);
    for (k, &v) in w.iter().enumerate() {
        match &g.node(v).op {
            Op::While {
                init: i, result, ..
            } => {
                assert_eq!(i, &init);
                assert_eq!(*result, k);
            }
            other => panic!("expected a while sibling, got {other:?}"),
        }
    }
    // Siblings differ only in `result`, so they are different values.
    assert_ne!(g.node(w[0]).op, g.node(w[1]).op);
    g.set_outputs(w).unwrap();
    g.verify().unwrap();
}

#[test]
fn while_loop_shape_errors() {
    let (ts, cond, body) = loop_parts();
    let mut g = Graph::new("t");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let f = g.parameter(TensorType::new(DType::F32, [4]));

    shape_err(
        g.while_loop(&[], cond.clone(), body.clone()),
        "while",
        &["at least one"],
    );
    // The regions' parameters are the carried types.
    shape_err(
        g.while_loop(&[init[0], f], cond.clone(), body.clone()),
        "while",
        &[
            "condition's parameters",
            "(i32[], f32[4])",
            "(i32[], f32[3])",
        ],
    );
    let short = region(&ts[..1], |g, p| {
        let ten = g.scalar(10.0, DType::I32);
        vec![g.compare(Comparison::Lt, p[0], ten).unwrap()]
    });
    shape_err(
        g.while_loop(&init, cond.clone(), short),
        "while",
        &["body's parameters", "(i32[])"],
    );
    // The condition gives exactly one bool scalar.
    let not_bool = region(&ts, |_, p| vec![p[0]]);
    shape_err(
        g.while_loop(&init, not_bool, body.clone()),
        "while",
        &["condition must return one bool[]", "got (i32[])"],
    );
    let two = region(&ts, |g, p| {
        let ten = g.scalar(10.0, DType::I32);
        let c = g.compare(Comparison::Lt, p[0], ten).unwrap();
        vec![c, c]
    });
    shape_err(
        g.while_loop(&init, two, body.clone()),
        "while",
        &["one bool[]", "got (bool[], bool[])"],
    );
    let vector_pred = region(&ts, |g, p| {
        let z = g.scalar(0.0, DType::F32);
        let z = g.broadcast_in_dim(z, [3], &[]).unwrap();
        vec![g.compare(Comparison::Lt, p[1], z).unwrap()]
    });
    shape_err(
        g.while_loop(&init, vector_pred, body.clone()),
        "while",
        &["one bool[]", "got (bool[3])"],
    );
    // The body gives the carried types back.
    let wrong_body = region(&ts, |g, p| vec![p[0], g.sum_all(p[1]).unwrap()]);
    shape_err(
        g.while_loop(&init, cond.clone(), wrong_body),
        "while",
        &["body must return the carried types", "got (i32[], f32[])"],
    );
    let swapped = region(&ts, |_, p| vec![p[1], p[0]]);
    shape_err(
        g.while_loop(&init, cond.clone(), swapped),
        "while",
        &["body must return", "(f32[3], i32[])"],
    );
    // A result that is no carried value.
    let op = Op::While {
        init: init.clone(),
        result: 2,
        cond: Region::new(cond.clone()),
        body: Region::new(body.clone()),
        scan: None,
    };
    shape_err(g.push(op), "while", &["result 2", "carries 2"]);
    // A region that is not a well-formed graph: a node reads a value after it.
    let mut scratch = Graph::new("values");
    let v: Vec<Value> = (0..4).map(|_| f32p(&mut scratch, &[])).collect();
    let bad = Graph::from_parts(
        "bad",
        vec![
            Node {
                op: Op::Parameter { index: 0 },
                ty: ts[0].clone(),
            },
            Node {
                op: Op::Parameter { index: 1 },
                ty: ts[1].clone(),
            },
            Node {
                op: Op::Unary {
                    op: UnaryOp::Neg,
                    x: v[3],
                },
                ty: ts[1].clone(),
            },
        ],
        vec![v[0], v[1]],
        vec![v[0], v[2]],
    );
    shape_err(
        g.while_loop(&init, cond, bad),
        "while",
        &["body is not a well-formed graph", "%3"],
    );
}

#[test]
fn verifier_rejects_a_while_sibling_of_the_wrong_type() {
    let (ts, cond, body) = loop_parts();
    let mut g = Graph::new("t");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g.while_loop(&init, cond, body).unwrap();
    g.set_outputs(w.clone()).unwrap();
    let mut nodes = g.nodes().to_vec();
    nodes[w[1].index()].ty = ts[0].clone(); // sibling 1 is the f32[3]
    let bad = Graph::from_parts("t", nodes, g.params().to_vec(), w);
    match bad.verify() {
        Err(Error::Verify { node, message, .. }) => {
            assert_eq!(node, 3);
            assert!(
                message.contains("i32[]") && message.contains("f32[3]"),
                "{message}"
            );
        }
        other => panic!("expected a verify error, got {other:?}"),
    }
}

#[test]
fn while_loop_prints_its_regions_and_reads_back() {
    let (ts, cond, body) = loop_parts();
    let mut g = Graph::new("t");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g.while_loop(&init, cond, body).unwrap();
    g.set_outputs(w).unwrap();
    let text = g.to_string();
    for fragment in [
        "%2 = while(%0, %1) result=0 cond={",
        "graph region(%0: i32[], %1: f32[3]) -> (%3) {",
        "%3 = compare(%0, %2) lt : bool[]",
        "} body={",
        "%4 = add(%1, %1) : f32[3]",
        "} : i32[]",
        // A later sibling names the first instead of repeating its regions.
        "%3 = while(%0, %1) result=1 regions_of=%2 : f32[3]",
    ] {
        assert!(text.contains(fragment), "no `{fragment}` in\n{text}");
    }
    assert_eq!(text.matches("cond={").count(), 1, "{text}");
    // It reads back into the same graph, the later sibling sharing the first's regions.
    let back = Graph::parse(&text).unwrap();
    assert_eq!(back, g);
    match (&back.nodes()[2].op, &back.nodes()[3].op) {
        (Op::While { cond: a, .. }, Op::While { cond: b, .. }) => {
            assert!(std::sync::Arc::ptr_eq(&a.0, &b.0))
        }
        other => panic!("expected two loop siblings, got {other:?}"),
    }
    assert_eq!(back.to_string(), text);
    // Text cut inside a region, or a sibling naming no loop, is an IR text error.
    let cut: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
    match Graph::parse(&cut) {
        Err(Error::IrText { message, .. }) => assert!(message.contains("ends"), "{message}"),
        other => panic!("expected an IR text error, got {other:?}"),
    }
    let orphan = text.replace("regions_of=%2", "regions_of=%1");
    match Graph::parse(&orphan) {
        Err(Error::IrText { line, message, .. }) => {
            assert!(message.contains("not a loop"), "{message}");
            assert_eq!(line, text.lines().count() - 1);
        }
        other => panic!("expected an IR text error, got {other:?}"),
    }
}

#[test]
fn autodiff_refuses_to_differentiate_through_a_while_loop() {
    let (ts, cond, body) = loop_parts();
    let mut g = Graph::new("t");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g.while_loop(&init, cond, body).unwrap();
    let loss = g.sum_all(w[1]).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    match autodiff::grad(&g, loss, &[init[1]]) {
        Err(Error::Autodiff { message }) => {
            assert!(message.contains("while"), "{message}");
            assert!(message.contains("trip count"), "{message}");
        }
        other => panic!("expected an autodiff error, got {other:?}"),
    }
}

#[test]
fn deeply_nested_loop_text_is_an_error_not_a_crash() {
    let mut text = String::from("graph t(%0: i32[]) -> (%1) {\n");
    let depth = 100_000;
    for _ in 0..depth {
        text.push_str("%1 = while(%0) result=0 cond={\ngraph c(%0: i32[]) -> (%1) {\n");
    }
    match Graph::parse(&text) {
        Err(Error::IrText { message, .. }) => assert!(message.contains("nested"), "{message}"),
        other => panic!("expected an IR text error, got {other:?}"),
    }
}
