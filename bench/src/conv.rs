//! The convolution line of the `cnn` workload: each convolution of one train step of the
//! convnet (both forwards, the second layer's input gradient, both kernel gradients),
//! timed on the native backend as a graph of that one computation, the way `gemm` times
//! `dot_general`. The gradients are built by the autodiff's own VJP rule of
//! `convolution`, so the graph is what the train step runs (whatever transposes or
//! reversals the rule emits included); the forward the VJP hangs from is dead there and
//! the planner drops it. Each result is written back into a parameter, so executing
//! returns no fresh buffer and the timing is the kernel's.
//!
//! FLOPs are 2 · MACs, the same count for a forward and both of its gradients:
//! N · H_out · W_out · C_out · kh · kw · C_in.

use crate::gemm::time_calls;
use serde_json::{json, Value};
use strata::autodiff::vjp;
use strata::backend::native::NativeBackend;
use strata::backend::{Backend, CompileOptions};
use strata::ir::{ConvParams, DType, Graph, TensorType};
use strata::{Result, Tensor};

/// Which computation of a convolution layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Forward,
    /// dL/dx: needed by every layer but the first.
    InputGrad,
    /// dL/dw.
    KernelGrad,
}

pub struct ConvShape {
    pub label: String,
    /// NHWC input.
    pub x: [usize; 4],
    /// HWIO kernel.
    pub w: [usize; 4],
    pub part: Part,
}

impl ConvShape {
    /// The NHWC output of a valid, stride-1 convolution.
    pub fn y(&self) -> [usize; 4] {
        let [n, h, w, _] = self.x;
        let [kh, kw, _, co] = self.w;
        [n, h + 1 - kh, w + 1 - kw, co]
    }

    pub fn flop(&self) -> f64 {
        let [n, ho, wo, co] = self.y();
        let [kh, kw, ci, _] = self.w;
        2.0 * (n * ho * wo * co * kh * kw * ci) as f64
    }
}

/// The convnet's two layers at `batch`: (name, input NHWC, kernel HWIO).
fn layers(batch: usize) -> [(&'static str, [usize; 4], [usize; 4]); 2] {
    [
        ("conv1", [batch, 28, 28, 1], [3, 3, 1, 32]),
        ("conv2", [batch, 13, 13, 32], [3, 3, 32, 64]),
    ]
}

/// The convolutions of one train step at `batch`, in the order the step runs them.
pub fn shapes(batch: usize) -> Vec<ConvShape> {
    let mut v = Vec::new();
    for (i, (name, x, w)) in layers(batch).into_iter().enumerate() {
        v.push((name, x, w, Part::Forward));
        if i > 0 {
            v.push((name, x, w, Part::InputGrad));
        }
        v.push((name, x, w, Part::KernelGrad));
    }
    v.into_iter()
        .map(|(name, x, w, part)| {
            let [n, h, wd, c] = x;
            let [kh, kw, ci, co] = w;
            let what = match part {
                Part::Forward => "fwd",
                Part::InputGrad => "dx",
                Part::KernelGrad => "dw",
            };
            ConvShape {
                label: format!("{name} {what} [{n}×{h}×{wd}×{c}]∗[{kh}×{kw}×{ci}×{co}]"),
                x,
                w,
                part,
            }
        })
        .collect()
}

/// Convolution FLOPs of one train step at `batch`.
pub fn step_flop(batch: usize) -> f64 {
    shapes(batch).iter().map(ConvShape::flop).sum()
}

/// Times one shape: (best seconds per call, median seconds per call).
fn time_shape(s: &ConvShape, budget_s: f64) -> Result<(f64, f64)> {
    let backend = NativeBackend::new();
    let f32s = |d: [usize; 4]| TensorType::new(DType::F32, d);
    let mut g = Graph::new("conv");
    let x = g.parameter(f32s(s.x));
    let w = g.parameter(f32s(s.w));
    let ct = g.parameter(f32s(s.y()));
    let y = g.convolution(x, w, ConvParams::simple(2))?;
    let (out, out_dims) = match s.part {
        Part::Forward => (y, s.y()),
        Part::InputGrad => (vjp(&mut g, &[y], &[ct], &[x])?[0], s.x),
        Part::KernelGrad => (vjp(&mut g, &[y], &[ct], &[w])?[0], s.w),
    };
    let _out_in = g.parameter(f32s(out_dims));
    g.set_outputs(vec![out])?;
    let mut exe = backend.compile(
        &g,
        &CompileOptions {
            updates: vec![(0, 3)],
        },
    )?;
    let fill = |d: [usize; 4], seed: u64| -> Result<Tensor> {
        Ok(Tensor::from(strata::random::uniform(&d, -1.0, 1.0, seed)?))
    };
    let mut args = vec![
        backend.upload(&fill(s.x, 1)?)?,
        backend.upload(&fill(s.w, 2)?)?,
        backend.upload(&fill(s.y(), 3)?)?,
        backend.upload(&Tensor::zeros(&f32s(out_dims))?)?,
    ];
    time_calls(exe.as_mut(), &mut args, budget_s)
}

/// Every convolution of the step at `batch`, as JSON rows.
pub fn run(batch: usize, quick: bool) -> Result<Vec<Value>> {
    let budget = if quick { 0.2 } else { 0.6 };
    let mut rows = Vec::new();
    for s in shapes(batch) {
        let (best, med) = time_shape(&s, budget)?;
        let flop = s.flop();
        eprintln!(
            "conv {:<40} {:7.1} GFLOP/s (median {:.1}), {:.0} µs",
            s.label,
            flop / best * 1e-9,
            flop / med * 1e-9,
            best * 1e6
        );
        rows.push(json!({
            "shape": s.label, "x": s.x, "w": s.w, "mflop": flop * 1e-6,
            "gflops": flop / best * 1e-9, "gflops_median": flop / med * 1e-9,
            "us_per_call": best * 1e6,
        }));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_flops_follow_the_layer_shapes() {
        // conv1: 26·26·32 outputs × 9 MACs; conv2: 11·11·64 outputs × 288 MACs. The step
        // runs conv1 twice (fwd, dw) and conv2 three times (fwd, dx, dw).
        let (c1, c2) = (26 * 26 * 32 * 9, 11 * 11 * 64 * 288);
        let per_sample = 2.0 * (2 * c1 + 3 * c2) as f64;
        assert_eq!(shapes(128).len(), 5);
        assert_eq!(step_flop(128), 128.0 * per_sample);
        assert_eq!(shapes(4)[0].y(), [4, 26, 26, 32]);
    }
}
