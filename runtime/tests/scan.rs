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
