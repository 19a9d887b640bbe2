//! The op conformance table (`common::cases()`) on XLA's CPU plugin.
//!
//! Tolerances are the table's own: |got - want| <= 1e-6 + 1e-6 |want| for floats, exact
//! for integers and bools. XLA's transcendental functions (exp, log, tanh, erf, logistic,
//! pow, ...) met them on every case, so no case is widened for XLA. Float max/min, whose
//! NaN handling XLA's CPU compiler relaxes by default, are lowered to propagate NaN.
//!
//! Needs the plugin installed (`scripts/install-xla-plugin`, which `scripts/test` runs);
//! without it these tests fail with the install command rather than being skipped.

mod common;

use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::Device;

fn xla_cpu() -> PjrtBackend {
    let options = PjrtOptions {
        // Every case must really compile: no cache.
        cache: CacheDir::Disabled,
        ..PjrtOptions::default()
    };
    match PjrtBackend::with_options(&Device::XlaCpu { devices: Some(1) }, options) {
        Ok(b) => b,
        Err(e) => panic!("the XLA CPU plugin is needed for this test: {e}"),
    }
}

#[test]
fn every_op_matches_hand_computed_values_on_xla_cpu() {
    let backend = xla_cpu();
    let cases = common::cases();
    let failures = common::run_all(&backend, &cases);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// For every case with float inputs and outputs: the gradient of a weighted sum of its
/// float outputs with respect to its float inputs, run on XLA and on the native backend.
/// Backward graphs use ops in shapes the forward table does not (select_and_scatter from
/// max pooling, negative pads, reversed and dilated convolutions, scatters), so this
/// checks the lowerings on graphs nobody wrote by hand.
#[test]
fn gradients_of_every_case_match_native() {
    use strata_runtime::backend::native::NativeBackend;
    use strata_runtime::backend::Backend;
    use strata_runtime::ir::{DType, Graph, Value};
    use strata_runtime::Tensor;

    let xla = xla_cpu();
    let native = NativeBackend::new();
    let (mut compared, mut failures) = (0, Vec::new());
    for case in common::cases() {
        let mut g = Graph::new(format!("grad_{}", case.name.replace(' ', "_")));
        let params: Vec<Value> = case.inputs.iter().map(|t| g.parameter(t.ty())).collect();
        let outs = (case.build)(&mut g, &params).unwrap();
        let wrt: Vec<Value> = params
            .iter()
            .copied()
            .filter(|&p| g.ty(p).dtype.is_arith_float())
            .collect();
        let float_outs: Vec<Value> = outs
            .into_iter()
            .filter(|&o| g.ty(o).dtype.is_arith_float())
            .collect();
        // Gradients at NaN inputs are not compared: XLA's algebraic simplifier rewrites
        // `convert(pred) * x` and `/ x` into selects, which give 0 where IEEE arithmetic
        // (the native backend) gives NaN. The forward table checks NaN semantics.
        let has_nan = case.inputs.iter().any(|t| match t {
            Tensor::F32(a) => a.iter().any(|v| v.is_nan()),
            Tensor::F64(a) => a.iter().any(|v| v.is_nan()),
            _ => false,
        });
        if wrt.is_empty() || float_outs.is_empty() || has_nan {
            continue;
        }
        // loss = sum_k sum(out_k * w_k), with fixed, distinct weights.
        let mut loss = None;
        for (k, &o) in float_outs.iter().enumerate() {
            let ty = g.ty(o).clone();
            let w: Vec<f64> = (0..ty.numel())
                .map(|i| 0.5 + 0.25 * ((i + k) % 5) as f64)
                .collect();
            let wt = match ty.dtype {
                DType::F32 => {
                    Tensor::from_vec(ty.dims(), w.iter().map(|&v| v as f32).collect::<Vec<_>>())
                }
                _ => Tensor::from_vec(ty.dims(), w),
            }
            .unwrap();
            let wv = g.constant(wt);
            let prod = g.mul(o, wv).unwrap();
            let mut s = g.sum_all(prod).unwrap();
            if g.ty(s).dtype != DType::F32 {
                s = g.convert(s, DType::F32).unwrap();
            }
            loss = Some(match loss {
                None => s,
                Some(l) => g.add(l, s).unwrap(),
            });
        }
        let Some(loss) = loss else { continue };
        g.set_outputs(vec![loss]).unwrap();
        let Ok(dg) = strata_runtime::autodiff::grad(&g, loss, &wrt) else {
            continue; // e.g. through select_and_scatter_add, which has no gradient rule
        };
        let (x, n) = match (xla.run(&dg, &case.inputs), native.run(&dg, &case.inputs)) {
            (Ok(x), Ok(n)) => (x, n),
            (x, n) => {
                failures.push(format!(
                    "{}: xla {:?}, native {:?}",
                    case.name,
                    x.err(),
                    n.err()
                ));
                continue;
            }
        };
        compared += 1;
        for (k, (a, b)) in x.iter().zip(&n).enumerate() {
            let as_f64 = |t: &Tensor| -> Vec<f64> {
                match t {
                    Tensor::F32(a) => a.iter().map(|&v| v as f64).collect(),
                    Tensor::F64(a) => a.iter().copied().collect(),
                    _ => Vec::new(),
                }
            };
            for (i, (p, q)) in as_f64(a).iter().zip(as_f64(b)).enumerate() {
                let ok = if q.is_nan() {
                    p.is_nan()
                } else if q.is_infinite() {
                    *p == q
                } else {
                    (p - q).abs() <= 1e-5 + 1e-5 * q.abs()
                };
                if !ok {
                    failures.push(format!(
                        "{} gradient output {k} element {i}: xla {p}, native {q}",
                        case.name
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        compared >= 40,
        "only {compared} cases had gradients to compare"
    );
    eprintln!("compared the gradients of {compared} cases");
}

/// The loop cases fail on XLA too when an expected value is wrong.
#[test]
fn while_cases_fail_on_a_wrong_expected_value_on_xla_cpu() {
    let failures = common::run_all(&xla_cpu(), &common::wrong_while_cases());
    let want = common::wrong_while_cases().iter().map(|c| c.expected.len()).sum::<usize>();
    assert_eq!(failures.len(), want, "{}", failures.join("\n"));
}
