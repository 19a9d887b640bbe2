//! Numeric gradient checks: the test every VJP rule must pass.
//!
//! For a function `f` (a graph from f64 inputs to one f64 output) and a random cotangent
//! `u`, let `h(x) = <u, f(x)>`. The analytic gradient of `h` comes from [`vjp`]; it is
//! compared with central differences of `h`
//! - along a random direction `v` (`<∇h, v>` against `(h(x+εv) - h(x-εv)) / 2ε`, the VJP
//!   inner-product test `<Jᵀu, v> = <u, Jv>`), and
//! - along single coordinates, for a sample of input elements.

use super::vjp;
use crate::backend::native::NativeBackend;
use crate::backend::{Backend, Buffer, CompileOptions, Executable};
use crate::ir::{DType, Graph, TensorType, Value};
use crate::random::Rng;
use crate::{Error, Result, Tensor};
use ndarray::{ArrayD, IxDyn};

/// Step and tolerances of a check.
#[derive(Clone, Debug)]
pub struct GradCheck {
    pub eps: f64,
    pub rtol: f64,
    pub atol: f64,
    /// How many single coordinates to check (all of them if the inputs are smaller).
    pub coords: usize,
    pub seed: u64,
}

impl Default for GradCheck {
    fn default() -> Self {
        GradCheck {
            eps: 1e-6,
            rtol: 1e-5,
            atol: 1e-7,
            coords: 24,
            seed: 0,
        }
    }
}

/// The analytic and numeric values compared, for reporting.
#[derive(Clone, Debug)]
pub struct GradReport {
    pub directional: (f64, f64),
    pub coordinates: Vec<(usize, usize, f64, f64)>,
}

fn random_like(ty: &TensorType, rng: &mut Rng) -> Tensor {
    Tensor::F64(ArrayD::from_shape_simple_fn(IxDyn(ty.dims()), || {
        rng.normal()
    }))
}

fn f64s(t: &Tensor) -> Result<Vec<f64>> {
    t.to_vec::<f64>()
}

impl GradCheck {
    /// Checks `build` (which maps the parameters, one per input, to a single f64 value)
    /// with respect to the inputs at positions `wrt` (which must be f64).
    pub fn run(
        &self,
        inputs: &[Tensor],
        wrt: &[usize],
        build: impl Fn(&mut Graph, &[Value]) -> Result<Value>,
    ) -> Result<GradReport> {
        let mut g = Graph::new("gradcheck");
        let params: Vec<Value> = inputs.iter().map(|t| g.parameter(t.ty())).collect();
        let y = build(&mut g, &params)?;
        if g.ty(y).dtype != DType::F64 {
            return Err(Error::invalid(
                "gradcheck",
                format!("output must be f64, got {}", g.ty(y)),
            ));
        }
        for &i in wrt {
            if inputs.get(i).map(|t| t.dtype()) != Some(DType::F64) {
                return Err(Error::invalid(
                    "gradcheck",
                    format!("input {i} must exist and be f64"),
                ));
            }
        }
        let mut rng = Rng::new(self.seed ^ 0x5eed);
        let u = random_like(g.ty(y), &mut rng);
        let uc = g.constant(u);
        let prod = g.mul(y, uc)?;
        let h = g.sum_all(prod)?;
        let one = g.scalar(1.0, DType::F64);
        let wrt_values: Vec<Value> = wrt.iter().map(|&i| params[i]).collect();
        let grads = vjp(&mut g, &[h], &[one], &wrt_values)?;
        let mut outs = vec![h];
        outs.extend(&grads);
        g.set_outputs(outs)?;

        let backend = NativeBackend::new();
        let mut exe = backend.compile(&g, &CompileOptions::default())?;
        let eval = |exe: &mut Box<dyn Executable>, xs: &[Tensor]| -> Result<Vec<Tensor>> {
            let mut args: Vec<Buffer> = xs
                .iter()
                .map(|t| backend.upload(t))
                .collect::<Result<_>>()?;
            exe.execute(&mut args)?
                .iter()
                .map(|b| backend.download(b))
                .collect()
        };
        let base = eval(&mut exe, inputs)?;
        let analytic: Vec<Vec<f64>> = base[1..].iter().map(f64s).collect::<Result<_>>()?;
        let h_at = |exe: &mut Box<dyn Executable>, xs: &[Tensor]| -> Result<f64> {
            eval(exe, xs)?[0].scalar_f64()
        };
        let shifted = |dirs: &[(usize, Vec<f64>)], scale: f64| -> Vec<Tensor> {
            let mut xs = inputs.to_vec();
            for (i, d) in dirs {
                if let Tensor::F64(a) = &mut xs[*i] {
                    for (x, dv) in a.iter_mut().zip(d) {
                        *x += scale * dv;
                    }
                }
            }
            xs
        };
        let close = |a: f64, n: f64| (a - n).abs() <= self.atol + self.rtol * a.abs().max(n.abs());

        // Random direction.
        let dirs: Vec<(usize, Vec<f64>)> = wrt
            .iter()
            .map(|&i| (i, (0..inputs[i].numel()).map(|_| rng.normal()).collect()))
            .collect();
        let a_dir: f64 = dirs
            .iter()
            .zip(&analytic)
            .map(|((_, d), g)| d.iter().zip(g).map(|(x, y)| x * y).sum::<f64>())
            .sum();
        let hp = h_at(&mut exe, &shifted(&dirs, self.eps))?;
        let hm = h_at(&mut exe, &shifted(&dirs, -self.eps))?;
        let n_dir = (hp - hm) / (2.0 * self.eps);
        if !close(a_dir, n_dir) {
            return Err(Error::Autodiff {
                message: format!("directional derivative: analytic {a_dir:e} vs numeric {n_dir:e}"),
            });
        }

        // Single coordinates.
        let total: usize = wrt.iter().map(|&i| inputs[i].numel()).sum();
        let picks: Vec<usize> = if total <= self.coords {
            (0..total).collect()
        } else {
            (0..self.coords)
                .map(|_| rng.below(total as u64) as usize)
                .collect()
        };
        let mut coordinates = Vec::new();
        for flat in picks {
            let (mut k, mut j) = (0, flat);
            while j >= inputs[wrt[k]].numel() {
                j -= inputs[wrt[k]].numel();
                k += 1;
            }
            let mut e = vec![0.0; inputs[wrt[k]].numel()];
            e[j] = 1.0;
            let d = [(wrt[k], e)];
            let n = (h_at(&mut exe, &shifted(&d, self.eps))?
                - h_at(&mut exe, &shifted(&d, -self.eps))?)
                / (2.0 * self.eps);
            let a = analytic[k][j];
            if !close(a, n) {
                return Err(Error::Autodiff {
                    message: format!("d/d input{}[{j}]: analytic {a:e} vs numeric {n:e}", wrt[k]),
                });
            }
            coordinates.push((wrt[k], j, a, n));
        }
        Ok(GradReport {
            directional: (a_dir, n_dir),
            coordinates,
        })
    }
}
