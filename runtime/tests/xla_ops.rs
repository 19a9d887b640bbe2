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
    let want = common::wrong_while_cases()
        .iter()
        .map(|c| c.expected.len())
        .sum::<usize>();
    assert_eq!(failures.len(), want, "{}", failures.join("\n"));
}

/// `i < 10: (i + 1, a + x*i, x)` over `(i32[], f32[3], f32[3])`, returning the siblings
/// `outputs` (any subset, any order, repeats allowed).
fn counting_loop(outputs: &[usize]) -> strata_runtime::ir::Graph {
    use strata_runtime::ir::{DType, Graph, TensorType, Value};
    let ts = vec![
        TensorType::scalar(DType::I32),
        TensorType::new(DType::F32, [3]),
        TensorType::new(DType::F32, [3]),
    ];
    let body = common::region("body", &ts, |b, q| {
        let fi = b.convert(q[0], DType::F32)?;
        let fi = b.broadcast_in_dim(fi, [3], &[])?;
        let xi = b.mul(q[2], fi)?;
        let one = b.scalar(1.0, DType::I32);
        Ok(vec![b.add(q[0], one)?, b.add(q[1], xi)?, q[2]])
    })
    .unwrap();
    let mut g = Graph::new("counting");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g
        .while_loop(&init, common::count_below(&ts, 10).unwrap(), body)
        .unwrap();
    g.set_outputs(outputs.iter().map(|&k| w[k]).collect())
        .unwrap();
    g
}

fn counting_inputs() -> Vec<strata_runtime::Tensor> {
    use common::{f32t, i32t};
    vec![
        i32t(&[], &[0]),
        f32t(&[3], &[0.0; 3]),
        f32t(&[3], &[1.0, 2.0, -0.5]),
    ]
}

/// However many siblings are used, the module holds one `stablehlo.while`, and each
/// sibling is one of its results.
#[test]
fn a_loop_is_lowered_once_for_all_its_siblings() {
    use strata_runtime::backend::pjrt::stablehlo_text;
    use strata_runtime::backend::CompileOptions;
    let text = stablehlo_text(&counting_loop(&[2, 0, 1, 1]), &CompileOptions::default()).unwrap();
    assert_eq!(text.matches("stablehlo.while").count(), 1, "{text}");
    assert!(text.contains(":3 = \"stablehlo.while\""), "{text}");
    for k in 0..3 {
        assert!(text.contains(&format!("#{k}")), "no result #{k} in\n{text}");
    }
    let one = stablehlo_text(&counting_loop(&[1]), &CompileOptions::default()).unwrap();
    assert_eq!(one.matches("stablehlo.while").count(), 1, "{one}");
}

/// One sibling alone, or siblings in another order and repeated, give the loop's values on
/// XLA and natively.
#[test]
fn any_subset_of_siblings_runs_on_xla_cpu_and_native() {
    use common::{f32t, i32t};
    use strata_runtime::backend::native::NativeBackend;
    use strata_runtime::backend::Backend;
    let acc = f32t(&[3], &[45.0, 90.0, -22.5]);
    let x = counting_inputs()[2].clone();
    let xla = xla_cpu();
    let native = NativeBackend::new();
    let runs: [(&[usize], Vec<strata_runtime::Tensor>); 3] = [
        (&[1], vec![acc.clone()]),
        (&[2, 1, 1], vec![x, acc.clone(), acc.clone()]),
        (&[0], vec![i32t(&[], &[10])]),
    ];
    for (outputs, want) in runs {
        let g = counting_loop(outputs);
        for (name, b) in [("xla", &xla as &dyn Backend), ("native", &native)] {
            let got = b.run(&g, &counting_inputs()).unwrap();
            assert_eq!(got, want, "{name}, siblings {outputs:?}");
        }
    }
}
