//! A tanh RNN as one scan on the native backend, `h' = tanh(h·W + x_t·U)` with the
//! weights carried and every `h'` stacked: the forward pass and its gradient, each timed
//! over several executions.
//!
//!     cargo run --release -p strata-runtime --example scan_timings -- \
//!         [STEPS] [BATCH] [UNITS] [FEATURES] [REPEATS]
//!
//! Prints the best and the median execution of each (after one warm-up execution).

use std::time::Instant;
use strata_runtime::autodiff;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::{Backend, CompileOptions};
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::{random, Result, Tensor};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut next = |default: usize| args.next().and_then(|s| s.parse().ok()).unwrap_or(default);
    let (steps, batch, units, features, repeats) =
        (next(28), next(128), next(128), next(28), next(20));
    let f32_ty = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let mut step = Graph::new("rnn_cell");
    let h = step.parameter(f32_ty(&[batch, units]));
    let w = step.parameter(f32_ty(&[units, units]));
    let u = step.parameter(f32_ty(&[features, units]));
    let x = step.parameter(f32_ty(&[batch, features]));
    let hw = step.matmul(h, w)?;
    let xu = step.matmul(x, u)?;
    let pre = step.add(hw, xu)?;
    let next_h = step.tanh(pre)?;
    step.set_outputs(vec![next_h, w, u, next_h])?;

    let mut g = Graph::new("rnn");
    let h0 = g.parameter(f32_ty(&[batch, units]));
    let w0 = g.parameter(f32_ty(&[units, units]));
    let u0 = g.parameter(f32_ty(&[features, units]));
    let xs = g.parameter(f32_ty(&[steps, batch, features]));
    let (c, ys) = g.scan(&[h0, w0, u0], &[xs], &step)?;
    let a = g.sum_all(c[0])?;
    let b = g.sum_all(ys[0])?;
    let loss = g.add(a, b)?;
    g.set_outputs(vec![loss])?;
    let grad = autodiff::grad(&g, loss, &[h0, w0, u0, xs])?;

    let backend = NativeBackend::new();
    let inputs = [
        Tensor::from(random::normal(&[batch, units], 0.0, 0.1, 1)?),
        Tensor::from(random::normal(&[units, units], 0.0, 0.1, 2)?),
        Tensor::from(random::normal(&[features, units], 0.0, 0.1, 3)?),
        Tensor::from(random::normal(&[steps, batch, features], 0.0, 1.0, 4)?),
    ];
    for (what, graph) in [("forward", &g), ("gradient", &grad)] {
        let mut exe = backend.compile(graph, &CompileOptions::default())?;
        let mut bufs = inputs
            .iter()
            .map(|t| backend.upload(t))
            .collect::<Result<Vec<_>>>()?;
        let mut outputs = Vec::new();
        exe.execute_into(&mut bufs, &mut outputs)?;
        let mut times: Vec<f64> = (0..repeats)
            .map(|_| {
                let t = Instant::now();
                exe.execute_into(&mut bufs, &mut outputs)?;
                Ok(t.elapsed().as_secs_f64() * 1e3)
            })
            .collect::<Result<_>>()?;
        times.sort_by(f64::total_cmp);
        println!(
            "{what}: T={steps} batch={batch} units={units} features={features}: best {:.2} ms, median {:.2} ms",
            times[0],
            times[times.len() / 2]
        );
    }
    Ok(())
}
