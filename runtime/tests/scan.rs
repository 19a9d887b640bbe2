//! `Graph::scan` (JAX's `lax.scan`, a while loop slicing stacked inputs and writing
//! stacked outputs) on the native backend and on XLA CPU, against the same recurrences
//! computed step by step on the host; and its typed errors.

mod backends;

use backends::backends;
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::Tensor;

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// Running sums: carry `c`, `c' = c + x_t`, output `c'` (ys is the cumulative sum).
#[test]
fn a_running_sum_gives_every_partial_sum_and_the_total() {
    let (steps, width) = (5, 3);
    let mut step = Graph::new("add_row");
    let c = step.parameter(TensorType::new(DType::F32, [width]));
    let x = step.parameter(TensorType::new(DType::F32, [width]));
    let s = step.add(c, x).unwrap();
    step.set_outputs(vec![s, s]).unwrap();

    let mut g = Graph::new("cumsum");
    let init = g.parameter(TensorType::new(DType::F32, [width]));
    let xs = g.parameter(TensorType::new(DType::F32, [steps, width]));
    let (carry, ys) = g.scan(&[init], &[xs], &step).unwrap();
    g.set_outputs(vec![carry[0], ys[0]]).unwrap();

    let init_v = Tensor::from_vec(&[width], vec![10.0f32, 0.0, -1.0]).unwrap();
    let xs_v: Vec<f32> = (0..steps * width).map(|v| v as f32).collect();
    let mut want_ys = Vec::new();
    let mut acc = [10.0f32, 0.0, -1.0];
    for row in xs_v.chunks(width) {
        for (a, x) in acc.iter_mut().zip(row) {
            *a += x;
        }
        want_ys.extend(acc);
    }
    let xs_t = Tensor::from_vec(&[steps, width], xs_v).unwrap();
    for (name, b) in backends() {
        let out = b.run(&g, &[init_v.clone(), xs_t.clone()]).unwrap();
        assert_eq!(f32s(&out[0]), acc, "{name}: final carry");
        assert_eq!(out[1].dims(), [steps, width], "{name}");
        assert_eq!(f32s(&out[1]), want_ys, "{name}: stacked outputs");
    }
}

/// A recurrent cell, `h' = tanh(h·W + x_t)` with `W` carried (a region sees only what it
/// carries), its outputs `h'` and `2·h'`: two outputs, a matrix product in the body.
#[test]
fn a_recurrent_cell_matches_the_unrolled_recurrence() {
    let (steps, n) = (7, 4);
    let mut step = Graph::new("cell");
    let h = step.parameter(TensorType::new(DType::F32, [1, n]));
    let w = step.parameter(TensorType::new(DType::F32, [n, n]));
    let x = step.parameter(TensorType::new(DType::F32, [n]));
    let hw = step.matmul(h, w).unwrap();
    let x = step.reshape(x, vec![1, n]).unwrap();
    let pre = step.add(hw, x).unwrap();
    let next = step.tanh(pre).unwrap();
    let twice = step.mul_scalar(next, 2.0).unwrap();
    step.set_outputs(vec![next, w, next, twice]).unwrap();

    let mut g = Graph::new("rnn");
    let h0 = g.parameter(TensorType::new(DType::F32, [1, n]));
    let wv = g.parameter(TensorType::new(DType::F32, [n, n]));
    let xs = g.parameter(TensorType::new(DType::F32, [steps, n]));
    let (carry, ys) = g.scan(&[h0, wv], &[xs], &step).unwrap();
    assert_eq!(ys.len(), 2);
    g.set_outputs(vec![carry[0], ys[0], ys[1]]).unwrap();

    let w_host: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
        .collect();
    let x_host: Vec<f32> = (0..steps * n)
        .map(|i| ((i * 5 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let mut hs = vec![0.5f32, -0.25, 0.0, 1.0];
    let mut want = Vec::new();
    for row in x_host.chunks(n) {
        let next: Vec<f32> = (0..n)
            .map(|c| {
                let dot: f32 = (0..n).map(|r| hs[r] * w_host[r * n + c]).sum();
                (dot + row[c]).tanh()
            })
            .collect();
        want.extend(&next);
        hs = next;
    }
    let inputs = [
        Tensor::from_vec(&[1, n], vec![0.5f32, -0.25, 0.0, 1.0]).unwrap(),
        Tensor::from_vec(&[n, n], w_host).unwrap(),
        Tensor::from_vec(&[steps, n], x_host).unwrap(),
    ];
    for (name, b) in backends() {
        let out = b.run(&g, &inputs).unwrap();
        let close = |got: &[f32], want: &[f32]| {
            got.len() == want.len() && got.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5)
        };
        assert!(close(&f32s(&out[0]), &hs), "{name}: {:?} vs {hs:?}", out[0]);
        assert_eq!(out[1].dims(), [steps, 1, n], "{name}");
        assert!(close(&f32s(&out[1]), &want), "{name}: {:?}", out[1]);
        let doubled: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
        assert!(close(&f32s(&out[2]), &doubled), "{name}: {:?}", out[2]);
        // A wrong expectation fails: the check is not vacuous.
        assert!(!close(&f32s(&out[1]), &doubled), "{name}");
    }
}

/// Zero rows: the carried values come back unchanged and the outputs are empty.
#[test]
fn a_scan_over_no_rows_returns_its_initial_carry() {
    let mut step = Graph::new("add_row");
    let c = step.parameter(TensorType::new(DType::F32, [2]));
    let x = step.parameter(TensorType::new(DType::F32, [2]));
    let s = step.add(c, x).unwrap();
    step.set_outputs(vec![s, s]).unwrap();
    let mut g = Graph::new("empty");
    let init = g.parameter(TensorType::new(DType::F32, [2]));
    let xs = g.parameter(TensorType::new(DType::F32, [0, 2]));
    let (carry, ys) = g.scan(&[init], &[xs], &step).unwrap();
    g.set_outputs(vec![carry[0], ys[0]]).unwrap();
    let inputs = [
        Tensor::from_vec(&[2], vec![3.0f32, 4.0]).unwrap(),
        Tensor::from_vec(&[0, 2], Vec::<f32>::new()).unwrap(),
    ];
    for (name, b) in backends() {
        let out = b.run(&g, &inputs).unwrap();
        assert_eq!(f32s(&out[0]), [3.0, 4.0], "{name}");
        assert_eq!(out[1].dims(), [0, 2], "{name}");
    }
}

#[test]
fn scan_errors_are_typed() {
    let mut step = Graph::new("add_row");
    let c = step.parameter(TensorType::new(DType::F32, [2]));
    let x = step.parameter(TensorType::new(DType::F32, [2]));
    let s = step.add(c, x).unwrap();
    step.set_outputs(vec![s]).unwrap();
    let mut g = Graph::new("bad");
    let init = g.parameter(TensorType::new(DType::F32, [2]));
    let xs = g.parameter(TensorType::new(DType::F32, [4, 2]));
    let other = g.parameter(TensorType::new(DType::F32, [3, 2]));
    let wide = g.parameter(TensorType::new(DType::F32, [4, 3]));
    let e = g
        .scan(&[init], &[xs, other], &step)
        .unwrap_err()
        .to_string();
    assert!(e.contains("leading axis of 4, got f32[3, 2]"), "{e}");
    let e = g.scan(&[init], &[wide], &step).unwrap_err().to_string();
    assert!(
        e.contains("the step must take the carried values then one row"),
        "{e}"
    );
    let e = g.scan(&[init], &[], &step).unwrap_err().to_string();
    assert!(e.contains("at least one stacked input"), "{e}");
    let mut bad_out = Graph::new("bad_out");
    let c = bad_out.parameter(TensorType::new(DType::F32, [2]));
    let _ = bad_out.parameter(TensorType::new(DType::F32, [2]));
    let r = bad_out.reshape(c, vec![1, 2]).unwrap();
    bad_out.set_outputs(vec![r]).unwrap();
    let e = g.scan(&[init], &[xs], &bad_out).unwrap_err().to_string();
    assert!(e.contains("must return the carried values"), "{e}");
}

// ---- reverse mode through scan: central differences on native, native ≡ XLA CPU

use strata_runtime::autodiff::{self, gradcheck::GradCheck};
use strata_runtime::ir::{UnaryOp, Value};
use strata_runtime::random::Rng;
use strata_runtime::{Error, Result};

type Build = Box<dyn Fn(&mut Graph, &[Value]) -> Result<Value>>;

/// A function of f64 inputs through a scan, and the inputs it is differentiated by.
struct Case {
    name: String,
    inputs: Vec<Tensor>,
    wrt: Vec<usize>,
    build: Build,
}

fn rand(dims: &[usize], seed: u64) -> Tensor {
    let mut r = Rng::new(seed);
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n).map(|_| r.next_f64() - 0.5).collect();
    Tensor::from_vec(dims, v).unwrap()
}

fn f64_ty(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F64, dims.to_vec())
}

/// What the loss reads of a scan's results.
#[derive(Clone, Copy, Debug)]
enum Read {
    Final,
    Ys,
    Both,
}

/// `Σ final² + Σ ys²` (or one of them): the loss a case's gradient is checked on.
fn loss_of(g: &mut Graph, read: Read, finals: &[Value], ys: &[Value]) -> Result<Value> {
    let picked: Vec<Value> = match read {
        Read::Final => finals.to_vec(),
        Read::Ys => ys.to_vec(),
        Read::Both => finals.iter().chain(ys).copied().collect(),
    };
    let mut total = None;
    for v in picked {
        let sq = g.mul(v, v)?;
        let s = g.sum_all(sq)?;
        total = Some(match total {
            Some(t) => g.add(t, s)?,
            None => s,
        });
    }
    Ok(total.expect("a case reads something"))
}

/// `c' = 0.5·c + x_t`, `y = c'`.
fn linear_step(width: usize) -> Graph {
    let mut step = Graph::new("linear");
    let c = step.parameter(f64_ty(&[width]));
    let x = step.parameter(f64_ty(&[width]));
    let half = step.mul_scalar(c, 0.5).unwrap();
    let next = step.add(half, x).unwrap();
    step.set_outputs(vec![next, next]).unwrap();
    step
}

/// `h' = tanh(h·W + x_t·U)` with `W` and `U` carried unchanged (weights), `y = h'`.
fn rnn_step(batch: usize, inputs: usize, units: usize) -> Graph {
    let mut step = Graph::new("rnn_cell");
    let h = step.parameter(f64_ty(&[batch, units]));
    let w = step.parameter(f64_ty(&[units, units]));
    let u = step.parameter(f64_ty(&[inputs, units]));
    let x = step.parameter(f64_ty(&[batch, inputs]));
    let hw = step.matmul(h, w).unwrap();
    let xu = step.matmul(x, u).unwrap();
    let pre = step.add(hw, xu).unwrap();
    let next = step.tanh(pre).unwrap();
    step.set_outputs(vec![next, w, u, next]).unwrap();
    step
}

/// Two float carried values, an i32 counter carried and read, a weight carried unchanged,
/// two stacked inputs (one of them i32) and three stacked outputs.
fn several_step() -> Graph {
    let mut step = Graph::new("several");
    let a = step.parameter(f64_ty(&[2]));
    let b = step.parameter(f64_ty(&[2, 2]));
    let n = step.parameter(TensorType::scalar(DType::I32));
    let w = step.parameter(f64_ty(&[2]));
    let x = step.parameter(f64_ty(&[2]));
    let k = step.parameter(TensorType::scalar(DType::I32));
    // a' = tanh(a·w + x) · (n + k) / 4
    let aw = step.mul(a, w).unwrap();
    let pre = step.add(aw, x).unwrap();
    let t = step.tanh(pre).unwrap();
    let nk = step.add(n, k).unwrap();
    let nk = step.convert(nk, DType::F64).unwrap();
    let nk = step.mul_scalar(nk, 0.25).unwrap();
    let nk = step.broadcast_in_dim(nk, vec![2], &[]).unwrap();
    let a2 = step.mul(t, nk).unwrap();
    // b' = b·diag-ish mix with a: b + outer(a, x) / 2
    let ac = step.reshape(a, vec![2, 1]).unwrap();
    let xr = step.reshape(x, vec![1, 2]).unwrap();
    let outer = step.matmul(ac, xr).unwrap();
    let outer = step.mul_scalar(outer, 0.5).unwrap();
    let b2 = step.add(b, outer).unwrap();
    let one = step.constant(Tensor::scalar(1i32));
    let n2 = step.add(n, one).unwrap();
    // outputs: a'·b (matrix-vector), the new counter, sin-free b'
    let a2c = step.reshape(a2, vec![1, 2]).unwrap();
    let ab = step.matmul(a2c, b).unwrap();
    let ab = step.reshape(ab, vec![2]).unwrap();
    step.set_outputs(vec![a2, b2, n2, w, ab, n2, b2]).unwrap();
    step
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for steps in [1usize, 5] {
        for read in [Read::Final, Read::Ys, Read::Both] {
            let width = 3;
            let step = linear_step(width);
            cases.push(Case {
                name: format!("linear recurrence, T={steps}, {read:?}"),
                inputs: vec![rand(&[width], 1), rand(&[steps, width], 2)],
                wrt: vec![0, 1],
                build: Box::new(move |g, p| {
                    let (c, ys) = g.scan(&[p[0]], &[p[1]], &step)?;
                    loss_of(g, read, &c, &ys)
                }),
            });
            let (batch, inputs, units) = (2, 3, 4);
            let step = rnn_step(batch, inputs, units);
            cases.push(Case {
                name: format!("tanh rnn, weights carried, T={steps}, {read:?}"),
                inputs: vec![
                    rand(&[batch, units], 3),
                    rand(&[units, units], 4),
                    rand(&[inputs, units], 5),
                    rand(&[steps, batch, inputs], 6),
                ],
                wrt: vec![0, 1, 2, 3],
                build: Box::new(move |g, p| {
                    let (c, ys) = g.scan(&[p[0], p[1], p[2]], &[p[3]], &step)?;
                    // The weights' final values are the initial ones: the loss reads h only.
                    loss_of(g, read, &c[..1], &ys)
                }),
            });
            let step = several_step();
            cases.push(Case {
                name: format!("several carries, inputs and outputs, T={steps}, {read:?}"),
                inputs: vec![
                    rand(&[2], 7),
                    rand(&[2, 2], 8),
                    Tensor::scalar(1i32),
                    rand(&[2], 9),
                    rand(&[steps, 2], 10),
                    Tensor::from_vec(&[steps], (0..steps as i32).collect::<Vec<i32>>()).unwrap(),
                ],
                wrt: vec![0, 1, 3, 4],
                build: Box::new(move |g, p| {
                    let (c, ys) = g.scan(&[p[0], p[1], p[2], p[3]], &[p[4], p[5]], &step)?;
                    let finals = [c[0], c[1], c[3]];
                    loss_of(g, read, &finals, &[ys[0], ys[2]])
                }),
            });
        }
    }
    // Rows from the last.
    let step = rnn_step(2, 3, 4);
    cases.push(Case {
        name: "tanh rnn, reversed, T=5".into(),
        inputs: vec![
            rand(&[2, 4], 11),
            rand(&[4, 4], 12),
            rand(&[3, 4], 13),
            rand(&[5, 2, 3], 14),
        ],
        wrt: vec![0, 1, 2, 3],
        build: Box::new(move |g, p| {
            let (c, ys) = g.scan_reverse(&[p[0], p[1], p[2]], &[p[3]], &step)?;
            loss_of(g, Read::Both, &c[..1], &ys)
        }),
    });
    // A scan in a scan: each outer row is a sequence the inner scan runs over.
    let inner = linear_step(2);
    let mut outer = Graph::new("outer");
    let c = outer.parameter(f64_ty(&[2]));
    let w = outer.parameter(f64_ty(&[2]));
    let seq = outer.parameter(f64_ty(&[3, 2]));
    let cw = outer.mul(c, w).unwrap();
    let (fin, ys) = outer.scan(&[cw], &[seq], &inner).unwrap();
    let next = outer.tanh(fin[0]).unwrap();
    let y = outer.sum_all(ys[0]).unwrap();
    outer.set_outputs(vec![next, w, y]).unwrap();
    cases.push(Case {
        name: "scan in a scan, T=4 of T=3".into(),
        inputs: vec![rand(&[2], 15), rand(&[2], 16), rand(&[4, 3, 2], 17)],
        wrt: vec![0, 1, 2],
        build: Box::new(move |g, p| {
            let (c, ys) = g.scan(&[p[0], p[1]], &[p[2]], &outer)?;
            loss_of(g, Read::Both, &c[..1], &ys)
        }),
    });
    // Second order: the gradient of the rnn's loss with respect to its weights, itself
    // differentiated (the backward loop reads the forward loop's residuals, whose
    // cotangents then flow back into the carried values at each step's start).
    let step = rnn_step(2, 3, 4);
    cases.push(Case {
        name: "tanh rnn, gradient of the gradient, T=3".into(),
        inputs: vec![
            rand(&[2, 4], 18),
            rand(&[4, 4], 19),
            rand(&[3, 4], 20),
            rand(&[3, 2, 3], 21),
        ],
        wrt: vec![0, 1, 2, 3],
        build: Box::new(move |g, p| {
            let (c, ys) = g.scan(&[p[0], p[1], p[2]], &[p[3]], &step)?;
            let loss = loss_of(g, Read::Both, &c[..1], &ys)?;
            let one = g.scalar(1.0, DType::F64);
            let d = autodiff::vjp(g, &[loss], &[one], &[p[0], p[1]])?;
            let a = g.sum_all(d[0])?;
            let b = g.sum_all(d[1])?;
            g.add(a, b)
        }),
    });
    cases.extend(odd_shape_cases());
    cases
}

/// Shapes of scan the cases above do not reach: carries swapped each step, the same value
/// as two carries and two stacked inputs, rows that are scalars, a weight stacked as an
/// output, a reverse scan in a scan, and a map with no carries.
fn odd_shape_cases() -> Vec<Case> {
    let mut cases = Vec::new();

    // Carries swapped each step: (a, b) -> (tanh(b + x), a * w), w carried.
    let mut step = Graph::new("swap");
    let a = step.parameter(f64_ty(&[3]));
    let b = step.parameter(f64_ty(&[3]));
    let w = step.parameter(f64_ty(&[3]));
    let x = step.parameter(f64_ty(&[3]));
    let bx = step.add(b, x).unwrap();
    let a2 = step.tanh(bx).unwrap();
    let b2 = step.mul(a, w).unwrap();
    step.set_outputs(vec![a2, b2, w, b2]).unwrap();
    cases.push(Case {
        name: "swapped carries, weight read at the end, T=4".into(),
        inputs: vec![
            rand(&[3], 31),
            rand(&[3], 32),
            rand(&[3], 33),
            rand(&[4, 3], 34),
        ],
        wrt: vec![0, 1, 2, 3],
        build: Box::new(move |g, p| {
            let (c, ys) = g.scan(&[p[0], p[1], p[2]], &[p[3]], &step)?;
            // The passed-through weight's final value is read too.
            loss_of(g, Read::Both, &c, &ys)
        }),
    });

    // The same value as two carries and two stacked inputs, an output returned twice.
    let mut step = Graph::new("alias");
    let a = step.parameter(f64_ty(&[2]));
    let b = step.parameter(f64_ty(&[2]));
    let x = step.parameter(f64_ty(&[2]));
    let y = step.parameter(f64_ty(&[2]));
    let ab = step.mul(a, b).unwrap();
    let xy = step.mul(x, y).unwrap();
    let a2 = step.add(ab, xy).unwrap();
    let a2 = step.tanh(a2).unwrap();
    let b2 = step.unary(UnaryOp::Logistic, b).unwrap();
    step.set_outputs(vec![a2, b2, a2, a2]).unwrap();
    cases.push(Case {
        name: "aliased carries and inputs, duplicate outputs, T=3".into(),
        inputs: vec![rand(&[2], 35), rand(&[3, 2], 36)],
        wrt: vec![0, 1],
        build: Box::new(move |g, p| {
            let (c, ys) = g.scan(&[p[0], p[0]], &[p[1], p[1]], &step)?;
            loss_of(g, Read::Both, &c, &ys)
        }),
    });

    // Rows that are scalars (a rank-1 stacked input), reversed; one step and four.
    let mut step = Graph::new("scalar_rows");
    let c = step.parameter(f64_ty(&[]));
    let x = step.parameter(f64_ty(&[]));
    let cx = step.mul(c, x).unwrap();
    let n = step.add(cx, x).unwrap();
    let n = step.tanh(n).unwrap();
    step.set_outputs(vec![n, cx]).unwrap();
    for t in [1usize, 4] {
        let s = step.clone();
        cases.push(Case {
            name: format!("scalar rows, reversed, T={t}"),
            inputs: vec![rand(&[], 37), rand(&[t], 38)],
            wrt: vec![0, 1],
            build: Box::new(move |g, p| {
                let (c, ys) = g.scan_reverse(&[p[0]], &[p[1]], &s)?;
                loss_of(g, Read::Both, &c, &ys)
            }),
        });
    }

    // A weight stacked as an output at every step, the row stacked back, a product read.
    let mut step = Graph::new("stack_weight");
    let h = step.parameter(f64_ty(&[2, 2]));
    let w = step.parameter(f64_ty(&[2, 2]));
    let x = step.parameter(f64_ty(&[2, 2]));
    let hw = step.matmul(h, w).unwrap();
    let hx = step.add(hw, x).unwrap();
    let h2 = step.tanh(hx).unwrap();
    step.set_outputs(vec![h2, w, w, x, hw]).unwrap();
    cases.push(Case {
        name: "weight and row as stacked outputs, product read, T=3".into(),
        inputs: vec![rand(&[2, 2], 39), rand(&[2, 2], 40), rand(&[3, 2, 2], 41)],
        wrt: vec![0, 1, 2],
        build: Box::new(move |g, p| {
            let (c, ys) = g.scan(&[p[0], p[1]], &[p[2]], &step)?;
            // The carried weight's final value is not read; every stacked output is.
            loss_of(g, Read::Both, &c[..1], &ys)
        }),
    });

    // A reverse scan inside a forward scan, the inner reading a carried weight.
    let mut inner = Graph::new("inner");
    let c = inner.parameter(f64_ty(&[2]));
    let w = inner.parameter(f64_ty(&[2]));
    let x = inner.parameter(f64_ty(&[2]));
    let cw = inner.mul(c, w).unwrap();
    let n = inner.add(cw, x).unwrap();
    let n = inner.unary(UnaryOp::Logistic, n).unwrap();
    inner.set_outputs(vec![n, w, n]).unwrap();
    let mut outer = Graph::new("outer");
    let c = outer.parameter(f64_ty(&[2]));
    let w = outer.parameter(f64_ty(&[2]));
    let seq = outer.parameter(f64_ty(&[3, 2]));
    let (fin, ys) = outer.scan_reverse(&[c, w], &[seq], &inner).unwrap();
    let y = outer.sum_all(ys[0]).unwrap();
    outer.set_outputs(vec![fin[0], w, y]).unwrap();
    cases.push(Case {
        name: "reverse scan in a scan, weight carried through both, T=2 of T=3".into(),
        inputs: vec![rand(&[2], 42), rand(&[2], 43), rand(&[2, 3, 2], 44)],
        wrt: vec![0, 1, 2],
        build: Box::new(move |g, p| {
            let (c, ys) = g.scan(&[p[0], p[1]], &[p[2]], &outer)?;
            loss_of(g, Read::Both, &c, &ys)
        }),
    });

    // No carries at all: a map over rows.
    let mut step = Graph::new("map");
    let x = step.parameter(f64_ty(&[2]));
    let y = step.tanh(x).unwrap();
    step.set_outputs(vec![y]).unwrap();
    cases.push(Case {
        name: "a map (no carries), T=3".into(),
        inputs: vec![rand(&[3, 2], 45)],
        wrt: vec![0],
        build: Box::new(move |g, p| {
            let (_, ys) = g.scan(&[], &[p[0]], &step)?;
            loss_of(g, Read::Ys, &[], &ys)
        }),
    });
    cases
}

#[test]
fn gradients_through_scan_match_central_differences() {
    let mut failures = Vec::new();
    for c in cases() {
        if let Err(e) = GradCheck::default().run(&c.inputs, &c.wrt, &c.build) {
            failures.push(format!("{}: {e}", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn gradients_through_scan_agree_on_native_and_xla_cpu() {
    let [(_, native), (_, xla)] = &backends()[..] else {
        panic!("two backends")
    };
    for c in cases() {
        let mut g = Graph::new("loss");
        let params: Vec<Value> = c.inputs.iter().map(|t| g.parameter(t.ty())).collect();
        let y = (c.build)(&mut g, &params).unwrap();
        let loss = g.sum_all(y).unwrap();
        g.set_outputs(vec![loss]).unwrap();
        let wrt: Vec<Value> = c.wrt.iter().map(|&i| params[i]).collect();
        let grad = autodiff::grad(&g, loss, &wrt).unwrap();
        let a = native.run(&grad, &c.inputs).unwrap();
        let b = xla.run(&grad, &c.inputs).unwrap();
        assert_eq!(a.len(), 1 + wrt.len(), "{}: native outputs", c.name);
        assert_eq!(b.len(), a.len(), "{}: xla outputs", c.name);
        for (k, (a, b)) in a.iter().zip(&b).enumerate() {
            let (a, b) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
            assert_eq!(a.len(), b.len(), "{}: output {k}", c.name);
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() <= 1e-12 + 1e-9 * x.abs().max(y.abs()),
                    "{}: output {k}: native {a:?} vs xla {b:?}",
                    c.name
                );
            }
            assert!(
                a.iter().any(|v| *v != 0.0),
                "{}: output {k} is all zeros",
                c.name
            );
        }
    }
}

/// A loop that is not a scan has no gradient: a typed error that points at scan. The loop's
/// count is never differentiated.
#[test]
fn a_plain_while_loop_is_refused_and_points_at_scan() {
    let ty = f64_ty(&[2]);
    let count = TensorType::scalar(DType::I32);
    let mut cond = Graph::new("cond");
    let i = cond.parameter(count.clone());
    let _ = cond.parameter(ty.clone());
    let three = cond.constant(Tensor::scalar(3i32));
    let more = cond
        .compare(strata_runtime::ir::Comparison::Lt, i, three)
        .unwrap();
    cond.set_outputs(vec![more]).unwrap();
    let mut body = Graph::new("body");
    let i = body.parameter(count.clone());
    let x = body.parameter(ty.clone());
    let one = body.constant(Tensor::scalar(1i32));
    let i2 = body.add(i, one).unwrap();
    let x2 = body.tanh(x).unwrap();
    body.set_outputs(vec![i2, x2]).unwrap();
    let mut g = Graph::new("plain");
    let x = g.parameter(ty);
    let zero = g.constant(Tensor::scalar(0i32));
    let out = g.while_loop(&[zero, x], cond, body).unwrap();
    let loss = g.sum_all(out[1]).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    match autodiff::grad(&g, loss, &[x]) {
        Err(Error::Autodiff { message }) => {
            assert!(message.contains("Graph::scan"), "{message}")
        }
        other => panic!("expected a typed autodiff error, got {other:?}"),
    }
}

/// A scan's loop keeps its step in the IR text: the graph read back is equal, and
/// differentiable.
#[test]
fn a_scan_reads_back_from_its_text_with_its_step() {
    let step = rnn_step(2, 3, 4);
    let mut g = Graph::new("rnn");
    let h = g.parameter(f64_ty(&[2, 4]));
    let w = g.parameter(f64_ty(&[4, 4]));
    let u = g.parameter(f64_ty(&[3, 4]));
    let xs = g.parameter(f64_ty(&[5, 2, 3]));
    let (c, ys) = g.scan_reverse(&[h, w, u], &[xs], &step).unwrap();
    let s = g.sum_all(ys[0]).unwrap();
    let t = g.sum_all(c[0]).unwrap();
    let loss = g.add(s, t).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    let text = g.to_string();
    assert!(
        text.contains("scan carries=3 reverse=true step={"),
        "{text}"
    );
    let back = Graph::parse(&text).unwrap();
    assert_eq!(back, g, "{text}");
    assert_eq!(back.to_string(), text);
    let inputs = [
        rand(&[2, 4], 1),
        rand(&[4, 4], 2),
        rand(&[3, 4], 3),
        rand(&[5, 2, 3], 4),
    ];
    let params = back.params().to_vec();
    let a = autodiff::grad(&g, loss, &params).unwrap();
    let b = autodiff::grad(&back, loss, &params).unwrap();
    let native = strata_runtime::backend::native::NativeBackend::new();
    use strata_runtime::backend::Backend;
    let (a, b) = (
        native.run(&a, &inputs).unwrap(),
        native.run(&b, &inputs).unwrap(),
    );
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
    }
}

/// A scan's marker that does not fit its loop is a typed error when read back, not a
/// crash later in autodiff.
#[test]
fn a_scan_marker_that_does_not_fit_its_loop_is_a_parse_error() {
    let step = rnn_step(2, 3, 4);
    let mut g = Graph::new("rnn");
    let h = g.parameter(f64_ty(&[2, 4]));
    let w = g.parameter(f64_ty(&[4, 4]));
    let u = g.parameter(f64_ty(&[3, 4]));
    let xs = g.parameter(f64_ty(&[5, 2, 3]));
    let (c, _) = g.scan(&[h, w, u], &[xs], &step).unwrap();
    g.set_outputs(vec![c[0]]).unwrap();
    let text = g.to_string();
    for (from, to) in [
        ("scan carries=3", "scan carries=2"),
        ("scan carries=3", "scan carries=9"),
        (
            "scan carries=3 reverse=false",
            "scan carries=3 reverse=maybe",
        ),
    ] {
        assert!(text.contains(from), "{text}");
        let bad = text.replace(from, to);
        match Graph::parse(&bad) {
            Err(Error::Shape { .. } | Error::IrText { .. } | Error::Verify { .. }) => {}
            other => panic!("{to}: expected a typed error, got {other:?}"),
        }
    }
}

/// Over no rows a scan is its initial carry: the gradient reaches it directly.
#[test]
fn the_gradient_of_a_scan_over_no_rows_reaches_the_initial_carry() {
    let step = linear_step(2);
    let mut g = Graph::new("empty");
    let init = g.parameter(f64_ty(&[2]));
    let xs = g.parameter(f64_ty(&[0, 2]));
    let (c, _) = g.scan(&[init], &[xs], &step).unwrap();
    let loss = loss_of(&mut g, Read::Final, &c, &[]).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    let grad = autodiff::grad(&g, loss, &[init]).unwrap();
    let inputs = [
        Tensor::from_vec(&[2], vec![3.0f64, -1.0]).unwrap(),
        Tensor::from_vec(&[0, 2], Vec::<f64>::new()).unwrap(),
    ];
    for (name, b) in backends() {
        let out = b.run(&grad, &inputs).unwrap();
        assert_eq!(out[1].to_vec::<f64>().unwrap(), [6.0, -2.0], "{name}");
    }
}

/// In f32, as layers train: the tanh cell's gradients on native and XLA CPU agree.
#[test]
fn f32_gradients_through_scan_agree_on_native_and_xla_cpu() {
    let (steps, batch, inputs, units) = (6, 3, 5, 4);
    let f32_ty = |d: &[usize]| TensorType::new(DType::F32, d.to_vec());
    let mut step = Graph::new("cell");
    let h = step.parameter(f32_ty(&[batch, units]));
    let w = step.parameter(f32_ty(&[units, units]));
    let u = step.parameter(f32_ty(&[inputs, units]));
    let x = step.parameter(f32_ty(&[batch, inputs]));
    let hw = step.matmul(h, w).unwrap();
    let xu = step.matmul(x, u).unwrap();
    let pre = step.add(hw, xu).unwrap();
    let next = step.tanh(pre).unwrap();
    step.set_outputs(vec![next, w, u, next]).unwrap();
    let mut g = Graph::new("rnn");
    let p = [
        g.parameter(f32_ty(&[batch, units])),
        g.parameter(f32_ty(&[units, units])),
        g.parameter(f32_ty(&[inputs, units])),
        g.parameter(f32_ty(&[steps, batch, inputs])),
    ];
    let (c, ys) = g.scan(&[p[0], p[1], p[2]], &[p[3]], &step).unwrap();
    let loss = loss_of(&mut g, Read::Both, &c[..1], &ys).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    let grad = autodiff::grad(&g, loss, &p).unwrap();
    let f32_rand = |dims: &[usize], seed| {
        Tensor::from_vec(
            dims,
            rand(dims, seed)
                .to_vec::<f64>()
                .unwrap()
                .iter()
                .map(|&v| v as f32)
                .collect::<Vec<f32>>(),
        )
        .unwrap()
    };
    let args = [
        f32_rand(&[batch, units], 31),
        f32_rand(&[units, units], 32),
        f32_rand(&[inputs, units], 33),
        f32_rand(&[steps, batch, inputs], 34),
    ];
    let [(_, native), (_, xla)] = &backends()[..] else {
        panic!("two backends")
    };
    let (a, b) = (
        native.run(&grad, &args).unwrap(),
        xla.run(&grad, &args).unwrap(),
    );
    for (k, (a, b)) in a.iter().zip(&b).enumerate() {
        let (a, b) = (f32s(a), f32s(b));
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (x - y).abs() <= 1e-5 + 1e-4 * x.abs().max(y.abs()),
                "output {k}: {a:?} vs {b:?}"
            );
        }
    }
}

/// A graph that kept only the loop nodes it reads (a pass that drops unused nodes would
/// leave the residuals out): reverse mode makes the residual nodes it needs again.
#[test]
fn a_scan_without_its_residual_nodes_still_differentiates() {
    use strata_runtime::ir::{Node, Op};
    let step = rnn_step(2, 3, 4);
    let mut g = Graph::new("rnn");
    let p: Vec<Value> = [&[2, 4][..], &[4, 4], &[3, 4], &[5, 2, 3]]
        .iter()
        .map(|d| g.parameter(f64_ty(d)))
        .collect();
    let (c, ys) = g.scan(&[p[0], p[1], p[2]], &[p[3]], &step).unwrap();
    let loss = loss_of(&mut g, Read::Both, &c[..1], &ys).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    // The loop carries the count, 3 values, 1 input, 1 output, then 1 residual (h's) and
    // 2 saved products (h·W and x_t·U).
    let residual = |n: &Node| matches!(n.op, Op::While { result, .. } if result >= 6);
    assert_eq!(g.nodes().iter().filter(|n| residual(n)).count(), 3);
    // Value handles by number (a value is its node's index).
    let mut scratch = Graph::new("handles");
    let handle: Vec<Value> = (0..g.len())
        .map(|_| scratch.parameter(TensorType::scalar(DType::F32)))
        .collect();
    let mut map = Vec::new();
    let mut nodes = Vec::new();
    for n in g.nodes() {
        map.push(handle[nodes.len()]);
        if !residual(n) {
            nodes.push(Node {
                op: n.op.map_operands(|v| map[v.index()]),
                ty: n.ty.clone(),
            });
        }
    }
    let params = g.params().iter().map(|v| map[v.index()]).collect();
    let pruned = Graph::from_parts("pruned", nodes, params, vec![map[loss.index()]]);
    pruned.verify().unwrap();
    assert!(pruned.len() < g.len());
    let pp = pruned.params().to_vec();
    let a = autodiff::grad(&g, loss, &p).unwrap();
    let b = autodiff::grad(&pruned, pruned.outputs()[0], &pp).unwrap();
    let inputs = [
        rand(&[2, 4], 41),
        rand(&[4, 4], 42),
        rand(&[3, 4], 43),
        rand(&[5, 2, 3], 44),
    ];
    for (name, be) in backends() {
        let (x, y) = (be.run(&a, &inputs).unwrap(), be.run(&b, &inputs).unwrap());
        for (x, y) in x.iter().zip(&y) {
            assert_eq!(
                x.to_vec::<f64>().unwrap(),
                y.to_vec::<f64>().unwrap(),
                "{name}"
            );
        }
    }
}

/// The backward step reads the products the forward loop saved instead of multiplying
/// again: of the rnn step's products (h·W, x_t·U), only the gradients' remain live in it.
#[test]
fn the_backward_step_reads_the_saved_products() {
    use strata_runtime::ir::Op;
    let step = rnn_step(2, 3, 4);
    let mut g = Graph::new("rnn");
    let p: Vec<Value> = [&[2, 4][..], &[4, 4], &[3, 4], &[5, 2, 3]]
        .iter()
        .map(|d| g.parameter(f64_ty(d)))
        .collect();
    let (c, ys) = g.scan(&[p[0], p[1], p[2]], &[p[3]], &step).unwrap();
    let loss = loss_of(&mut g, Read::Both, &c[..1], &ys).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    let grad = autodiff::grad(&g, loss, &p).unwrap();
    let backward = grad
        .nodes()
        .iter()
        .find_map(|n| match &n.op {
            Op::While { scan: Some(s), .. } if s.step.name().ends_with("_vjp") => {
                Some(s.step.clone())
            }
            _ => None,
        })
        .expect("a backward loop");
    // Live nodes of the backward step, from its outputs.
    let nodes = backward.nodes();
    let mut live = vec![false; nodes.len()];
    for o in backward.outputs() {
        live[o.index()] = true;
    }
    for i in (0..nodes.len()).rev() {
        if live[i] {
            for v in nodes[i].op.operands() {
                live[v.index()] = true;
            }
        }
    }
    let products = (0..nodes.len())
        .filter(|&i| live[i] && matches!(nodes[i].op, Op::DotGeneral { .. }))
        .count();
    // The cotangents of h, W, U and x_t: one product each.
    assert_eq!(products, 4, "{backward:?}");
}
