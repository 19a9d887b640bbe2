//! Edge cases of the loop primitives: `dynamic_slice` / `dynamic_update_slice` with
//! starts out of range, of every integer type, over empty windows and other dtypes, on
//! native and XLA CPU; a scan over bool and bf16 rows; a while loop carrying a large bool
//! flag. (Their rank-0 and small-flag cases are in the shared op table,
//! `common::cases()`; reverse mode through scan in odd shapes is in `scan.rs`.)

mod backends;
mod common;

use backends::backends;
use strata_runtime::autodiff::gradcheck::GradCheck;
use strata_runtime::ir::{BinaryOp, DType, Graph, TensorType, Value};
use strata_runtime::random::Rng;
use strata_runtime::Tensor;

fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims.to_vec())
}

fn rand(dims: &[usize], seed: u64) -> Tensor {
    let mut r = Rng::new(seed);
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n).map(|_| r.next_f64() - 0.5).collect();
    Tensor::from_vec(dims, v).unwrap()
}

/// The first element at which two tensors of one type differ, for a failure's message
/// (a tensor's `Debug` elides all but a few elements of a large array).
fn first_difference(x: &Tensor, y: &Tensor) -> String {
    fn find<'a, T: PartialEq + std::fmt::Debug + 'a>(
        a: impl Iterator<Item = &'a T>,
        b: impl Iterator<Item = &'a T>,
    ) -> String {
        match a.zip(b).enumerate().find(|(_, (p, q))| p != q) {
            Some((i, (p, q))) => format!("first difference at element {i}: {p:?} vs {q:?}"),
            None => "no element differs".into(),
        }
    }
    match (x, y) {
        (Tensor::F32(a), Tensor::F32(b)) => find(a.iter(), b.iter()),
        (Tensor::F64(a), Tensor::F64(b)) => find(a.iter(), b.iter()),
        (Tensor::BF16(a), Tensor::BF16(b)) => find(a.iter(), b.iter()),
        (Tensor::I32(a), Tensor::I32(b)) => find(a.iter(), b.iter()),
        (Tensor::I64(a), Tensor::I64(b)) => find(a.iter(), b.iter()),
        (Tensor::Bool(a), Tensor::Bool(b)) => find(a.iter(), b.iter()),
        _ => format!("types {} and {}", x.ty(), y.ty()),
    }
}

/// Runs `g` on both backends and checks that the outputs are equal, every element of
/// every output. Exact on purpose: every graph given here moves data (slices, updates,
/// converts of small integers, selects of rows), computes bools, or does float arithmetic
/// on small integers, which both backends compute without rounding; a graph that rounds
/// would need a tolerance instead.
fn same_on_both(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    let mut results = Vec::new();
    for (name, b) in backends() {
        let out = b.run(g, inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        results.push((name, out));
    }
    let (_, a) = &results[0];
    let (_, b) = &results[1];
    assert_eq!(a.len(), b.len(), "number of outputs");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.ty(), y.ty(), "output {i}");
        assert!(x == y, "output {i}: {}", first_difference(x, y));
    }
    results.remove(0).1
}

#[test]
fn dynamic_slice_clamps_starts_of_both_integer_types_alike() {
    let data: Vec<f32> = (0..20).map(|v| v as f32).collect();
    let x = Tensor::from_vec(&[4, 5], data).unwrap();
    for (r, c) in [
        (-3i64, -100i64),
        (2, 3),
        (3, 4),
        (100, 100),
        (i64::MAX, i64::MIN),
        (i32::MIN as i64, i32::MAX as i64),
    ] {
        for dtype in [DType::I32, DType::I64] {
            let mut g = Graph::new("ds");
            let xv = g.parameter(ty(DType::F32, &[4, 5]));
            let rs = g.parameter(TensorType::scalar(dtype));
            let cs = g.parameter(TensorType::scalar(dtype));
            let s = g.dynamic_slice(xv, &[rs, cs], &[2, 3]).unwrap();
            let u = g.constant(Tensor::from_vec(&[1, 2], vec![-1.0f32, -2.0]).unwrap());
            let w = g.dynamic_update_slice(xv, u, &[rs, cs]).unwrap();
            g.set_outputs(vec![s, w]).unwrap();
            let (rt, ct) = if dtype == DType::I32 {
                (
                    Tensor::scalar(r.clamp(i32::MIN as i64, i32::MAX as i64) as i32),
                    Tensor::scalar(c.clamp(i32::MIN as i64, i32::MAX as i64) as i32),
                )
            } else {
                (Tensor::scalar(r), Tensor::scalar(c))
            };
            let out = same_on_both(&g, &[x.clone(), rt, ct]);
            // The window clamped into range: rows r..r+2 of 0..=2, columns of 0..=2.
            let (r0, c0) = (r.clamp(0, 2) as usize, c.clamp(0, 2) as usize);
            let want: Vec<f32> = (0..2)
                .flat_map(|i| (0..3).map(move |j| ((r0 + i) * 5 + c0 + j) as f32))
                .collect();
            assert_eq!(out[0].to_vec::<f32>().unwrap(), want, "{r} {c} {dtype:?}");
        }
    }
}

/// (A rank-0 operand is a case of the shared op table.)
#[test]
fn dynamic_slice_of_empty_windows_and_other_dtypes() {
    // A zero-size window, and a zero-size operand.
    let mut g = Graph::new("empty");
    let x = g.parameter(ty(DType::F32, &[3, 0]));
    let y = g.parameter(ty(DType::F32, &[3, 4]));
    let i = g.parameter(TensorType::scalar(DType::I32));
    let z = g.constant(Tensor::scalar(0i32));
    let a = g.dynamic_slice(x, &[i, z], &[2, 0]).unwrap();
    let b = g.dynamic_slice(y, &[i, i], &[0, 2]).unwrap();
    let e = g.constant(Tensor::from_vec(&[2, 0], Vec::<f32>::new()).unwrap());
    let c = g.dynamic_update_slice(y, e, &[i, i]).unwrap();
    g.set_outputs(vec![a, b, c]).unwrap();
    let yv = Tensor::from_vec(&[3, 4], (0..12).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
    let out = same_on_both(
        &g,
        &[
            Tensor::from_vec(&[3, 0], Vec::<f32>::new()).unwrap(),
            yv.clone(),
            Tensor::scalar(1i32),
        ],
    );
    assert_eq!(out[0].dims(), [2, 0]);
    assert_eq!(out[1].dims(), [0, 2]);
    assert_eq!(out[2].to_vec::<f32>().unwrap(), yv.to_vec::<f32>().unwrap());

    // Integer, bool and bf16 operands.
    for dtype in [DType::I32, DType::I64, DType::Bool, DType::BF16, DType::F64] {
        let mut g = Graph::new("dtypes");
        let x = g.parameter(ty(DType::F32, &[4]));
        let xc = g.convert(x, dtype).unwrap();
        let i = g.parameter(TensorType::scalar(DType::I32));
        let s = g.dynamic_slice(xc, &[i], &[2]).unwrap();
        let z = z_of(&mut g);
        let w = g.dynamic_update_slice(xc, s, &[z]).unwrap();
        let sf = g.convert(s, DType::F32).unwrap();
        let wf = g.convert(w, DType::F32).unwrap();
        g.set_outputs(vec![sf, wf]).unwrap();
        let out = same_on_both(
            &g,
            &[
                Tensor::from_vec(&[4], vec![0.0f32, 1.0, 2.0, 3.0]).unwrap(),
                Tensor::scalar(2i32),
            ],
        );
        let want: &[f32] = if dtype == DType::Bool {
            &[1.0, 1.0]
        } else {
            &[2.0, 3.0]
        };
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want, "{dtype:?}");
    }
}

fn z_of(g: &mut Graph) -> Value {
    g.constant(Tensor::scalar(0i32))
}

#[test]
fn dynamic_slice_shape_errors_are_typed() {
    let mut g = Graph::new("bad");
    let x = g.parameter(ty(DType::F32, &[4, 5]));
    let i = g.parameter(TensorType::scalar(DType::I32));
    let l = g.parameter(TensorType::scalar(DType::I64));
    let f = g.parameter(TensorType::scalar(DType::F32));
    let v = g.parameter(ty(DType::I32, &[1]));
    assert!(g.dynamic_slice(x, &[i], &[1, 1]).is_err());
    assert!(g.dynamic_slice(x, &[i, l], &[1, 1]).is_err());
    assert!(g.dynamic_slice(x, &[i, f], &[1, 1]).is_err());
    assert!(g.dynamic_slice(x, &[i, v], &[1, 1]).is_err());
    assert!(g.dynamic_slice(x, &[i, i], &[5, 1]).is_err());
    assert!(g.dynamic_slice(x, &[i, i], &[1]).is_err());
    let u = g.parameter(ty(DType::F32, &[5, 1]));
    assert!(g.dynamic_update_slice(x, u, &[i, i]).is_err());
    let u64 = g.parameter(ty(DType::F64, &[1, 1]));
    assert!(g.dynamic_update_slice(x, u64, &[i, i]).is_err());
    let u1 = g.parameter(ty(DType::F32, &[1]));
    assert!(g.dynamic_update_slice(x, u1, &[i, i]).is_err());
}

/// The slice's and update's gradients at clamped positions agree with central
/// differences (the cotangent goes back to the clamped window).
#[test]
fn dynamic_slice_gradients_at_clamped_starts() {
    for start in [-4i32, 0, 2, 9] {
        let r = GradCheck::default().run(
            &[rand(&[5, 3], 1), rand(&[2, 2], 2), Tensor::scalar(start)],
            &[0, 1],
            |g, p| {
                let s = g.dynamic_slice(p[0], &[p[2], p[2]], &[3, 2])?;
                let s2 = g.mul(s, s)?;
                let u = g.dynamic_update_slice(p[0], p[1], &[p[2], p[2]])?;
                let t = g.tanh(u)?;
                let a = g.sum_all(s2)?;
                let b = g.sum_all(t)?;
                g.add(a, b)
            },
        );
        r.unwrap_or_else(|e| panic!("start {start}: {e}"));
    }
}

/// A scan of bool and bf16 rows (carried and stacked), no gradient asked.
#[test]
fn scan_over_bool_and_bf16_rows() {
    let mut step = Graph::new("mixed");
    let c = step.parameter(ty(DType::BF16, &[2]));
    let any = step.parameter(ty(DType::Bool, &[2]));
    let x = step.parameter(ty(DType::BF16, &[2]));
    let m = step.parameter(ty(DType::Bool, &[2]));
    // bf16 is a storage type (no arithmetic): the carry becomes the row, the row is stacked.
    let _ = c;
    let o = step.binary(BinaryOp::Or, any, m).unwrap();
    step.set_outputs(vec![x, o, o, x]).unwrap();
    let mut g = Graph::new("g");
    let c0 = g.parameter(ty(DType::F32, &[2]));
    let xs = g.parameter(ty(DType::F32, &[3, 2]));
    let c0b = g.convert(c0, DType::BF16).unwrap();
    let xsb = g.convert(xs, DType::BF16).unwrap();
    let zero = g.constant(Tensor::scalar(0.5f32));
    let zero = g.broadcast_in_dim(zero, vec![3, 2], &[]).unwrap();
    let ms = g
        .compare(strata_runtime::ir::Comparison::Gt, xs, zero)
        .unwrap();
    let f = g.constant(Tensor::from_vec(&[2], vec![false, false]).unwrap());
    let (c, ys) = g.scan(&[c0b, f], &[xsb, ms], &step).unwrap();
    let cf = g.convert(c[0], DType::F32).unwrap();
    let yf = g.convert(ys[0], DType::F32).unwrap();
    let xf = g.convert(ys[1], DType::F32).unwrap();
    g.set_outputs(vec![cf, yf, xf]).unwrap();
    let out = same_on_both(
        &g,
        &[
            Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap(),
            Tensor::from_vec(&[3, 2], vec![0.0f32, 1.0, 1.0, 0.0, 0.0, 0.0]).unwrap(),
        ],
    );
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [0.0, 0.0]);
    assert_eq!(
        out[2].to_vec::<f32>().unwrap(),
        [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        [0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    );
}

/// The shared table's bool flag that a plain `while` carries and updates in place, at a
/// size the native backend splits across its crew, on both backends.
#[test]
fn a_while_loop_carrying_a_large_bool_flag_updates_it_in_place() {
    let case = common::bool_flag_while_case(40_000);
    for (name, b) in backends() {
        let failures = common::run_all(&*b, std::slice::from_ref(&case));
        assert!(failures.is_empty(), "{name}: {}", failures.join("\n"));
    }
}
