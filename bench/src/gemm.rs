//! The GEMM line: GFLOP/s of the runtime's own matrix-product path, timed as a one-op
//! `dot_general` graph on the native backend (plan, bounds checks, the `gemm` crate with
//! the runtime's features and its serial/parallel threshold — what a training step gets).
//! The product is written back into a parameter (a state update), so executing returns no
//! fresh output buffer and the timing is the kernel's, not the allocator's.

use serde_json::{json, Value};
use std::time::Instant;
use strata::backend::native::NativeBackend;
use strata::backend::{Backend, Buffer, CompileOptions, Executable};
use strata::ir::{DType, DotDims, Graph, TensorType};
use strata::{Result, Tensor};

/// How an operand is laid out, as the train step's products have them.
#[derive(Clone, Copy)]
enum Form {
    /// `[m, k] · [k, n]`: forward layers.
    Plain,
    /// `[k, m]ᵀ · [k, n]`: weight gradients (activationsᵀ · output gradient).
    LhsT,
    /// `[m, k] · [n, k]ᵀ`: input gradients (output gradient · weightsᵀ).
    RhsT,
}

pub struct Shape {
    pub label: String,
    m: usize,
    k: usize,
    n: usize,
    form: Form,
}

fn shape(label: &str, m: usize, k: usize, n: usize, form: Form) -> Shape {
    Shape {
        label: label.into(),
        m,
        k,
        n,
        form,
    }
}

/// 1024³ (the machine's ceiling) and the model's largest products at each batch.
pub fn shapes(batches: &[usize], quick: bool) -> Vec<Shape> {
    let mut v = vec![shape("1024³", 1024, 1024, 1024, Form::Plain)];
    for &b in batches {
        v.push(shape(
            &format!("b{b} fwd L1 [{b}×784]·[784×128]"),
            b,
            784,
            128,
            Form::Plain,
        ));
        v.push(shape(
            &format!("b{b} dW1 [784×{b}]ᵀ·[{b}×128]"),
            784,
            b,
            128,
            Form::LhsT,
        ));
        if quick {
            continue;
        }
        v.push(shape(
            &format!("b{b} fwd L2 [{b}×128]·[128×64]"),
            b,
            128,
            64,
            Form::Plain,
        ));
        v.push(shape(
            &format!("b{b} dH1 [{b}×64]·[128×64]ᵀ"),
            b,
            64,
            128,
            Form::RhsT,
        ));
    }
    v
}

/// Times one shape: returns (best GFLOP/s, median GFLOP/s, best µs per call).
fn time_shape(s: &Shape, budget_s: f64) -> Result<(f64, f64, f64)> {
    let backend = NativeBackend::new();
    let mut g = Graph::new("gemm");
    let (a_dims, b_dims, dims) = match s.form {
        Form::Plain => ([s.m, s.k], [s.k, s.n], DotDims::matmul()),
        Form::LhsT => (
            [s.k, s.m],
            [s.k, s.n],
            DotDims {
                lhs_batch: vec![],
                rhs_batch: vec![],
                lhs_contract: vec![0],
                rhs_contract: vec![0],
            },
        ),
        Form::RhsT => (
            [s.m, s.k],
            [s.n, s.k],
            DotDims {
                lhs_batch: vec![],
                rhs_batch: vec![],
                lhs_contract: vec![1],
                rhs_contract: vec![1],
            },
        ),
    };
    let a = g.parameter(TensorType::new(DType::F32, a_dims));
    let b = g.parameter(TensorType::new(DType::F32, b_dims));
    let _c_in = g.parameter(TensorType::new(DType::F32, [s.m, s.n]));
    let c = g.dot_general(a, b, dims)?;
    g.set_outputs(vec![c])?;
    let mut exe = backend.compile(
        &g,
        &CompileOptions {
            updates: vec![(0, 2)],
        },
    )?;
    let fill = |d: [usize; 2], seed: u64| -> Result<Tensor> {
        Ok(Tensor::from(strata::random::uniform(&d, -1.0, 1.0, seed)?))
    };
    let mut args = vec![
        backend.upload(&fill(a_dims, 1)?)?,
        backend.upload(&fill(b_dims, 2)?)?,
        backend.upload(&Tensor::zeros(&TensorType::new(DType::F32, [s.m, s.n]))?)?,
    ];
    let (best, median) = time_calls(exe.as_mut(), &mut args, budget_s)?;
    let flop = 2.0 * (s.m * s.k * s.n) as f64;
    Ok((flop / best * 1e-9, flop / median * 1e-9, best * 1e6))
}

/// Times calls of a compiled one-op graph, warm: three calls first, then five samples of
/// a batch of calls each about `budget_s / 5` long. Returns the best and the median
/// sample's seconds per call. (The convolution line times its graphs this way too.)
pub fn time_calls(
    exe: &mut dyn Executable,
    args: &mut [Buffer],
    budget_s: f64,
) -> Result<(f64, f64)> {
    for _ in 0..3 {
        exe.execute(args)?;
    }
    let t = Instant::now();
    exe.execute(args)?;
    let one = t.elapsed().as_secs_f64().max(1e-7);
    let reps = ((budget_s / 5.0 / one) as usize).max(3);
    let mut samples = Vec::with_capacity(5);
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            exe.execute(args)?;
        }
        samples.push(t.elapsed().as_secs_f64() / reps as f64);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    Ok((samples[0], samples[2]))
}

/// Every shape's line, as JSON rows.
pub fn run(batches: &[usize], quick: bool) -> Result<Vec<Value>> {
    let budget = if quick { 0.2 } else { 0.6 };
    let mut rows = Vec::new();
    for s in shapes(batches, quick) {
        let (best, med, us) = time_shape(&s, budget)?;
        eprintln!(
            "gemm {:<36} {best:7.1} GFLOP/s (median {med:.1}), {us:.1} µs",
            s.label
        );
        rows.push(json!({
            "shape": s.label, "m": s.m, "k": s.k, "n": s.n,
            "gflops": best, "gflops_median": med, "us_per_call": us,
        }));
    }
    Ok(rows)
}
