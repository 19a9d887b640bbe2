//! The native backend's single-pass Adam against the graph this module builds.

use crate::backend::native::testing::compile_fused_adam;
use crate::backend::native::NativeBackend;
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{DType, Graph, TensorType};
use crate::optim::{apply_weight_decay, Adam, AdamW, Optimizer, Step as OptStep};
use crate::Tensor;

/// The native backend runs exactly this module's Adam update as one hand-written pass
/// (`backend/native/fused_adam.rs`); these check that it recognises the update and
/// matches the generic interpreter bit for bit.
///
/// One optimizer update of an `n`-element parameter, built as `train::step` builds
/// it (weight decay, the update, the state settled under the guard `ok`); parameters: w, g, each slot, lr, t, ok. With `in_place`
/// the outputs update w and the slots in place, as in the train step.
fn update_graph(
    opt: &dyn Optimizer,
    n: usize,
    in_place: bool,
    guard: Guard,
) -> (Graph, CompileOptions) {
    let mut g = Graph::new("update");
    let ty = TensorType::new(DType::F32, [n]);
    let w = g.parameter(ty.clone());
    let grad = g.parameter(ty.clone());
    let slots: Vec<_> = opt
        .slots()
        .iter()
        .map(|_| g.parameter(ty.clone()))
        .collect();
    let lr = g.parameter(TensorType::scalar(DType::F32));
    let t = g.parameter(TensorType::scalar(DType::F32));
    let ok = g.parameter(TensorType::scalar(DType::Bool));
    let step = OptStep {
        lr,
        t,
        globals: vec![],
        guard: (guard == Guard::Settled).then_some(ok),
    };
    // As the train step does: weight decay first, then the update.
    let decayed = apply_weight_decay(&mut g, opt.config(), w, lr).unwrap();
    let (new_w, new_slots) = opt.update(&mut g, &step, decayed, grad, &slots).unwrap();
    let mut outs = vec![new_w];
    outs.extend(new_slots);
    // Settling what the update settled already changes nothing; with `raw` the update
    // reads its new moments unsettled and only its results are guarded.
    let old = std::iter::once(w).chain(slots.iter().copied());
    outs = outs
        .iter()
        .zip(old)
        .map(|(&new, old)| match guard {
            Guard::Raw => g.select(ok, new, old).unwrap(),
            Guard::None | Guard::Settled => step.settle(&mut g, new, old).unwrap(),
        })
        .collect();
    let k = outs.len();
    g.set_outputs(outs).unwrap();
    // Output 0 updates parameter 0 (w); slot i (output i) updates parameter i + 1.
    let updates = if in_place {
        std::iter::once((0, 0))
            .chain((1..k).map(|i| (i, i + 1)))
            .collect()
    } else {
        vec![]
    };
    (g, CompileOptions { updates })
}

/// How an update is guarded by the train step's checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guard {
    None,
    /// As the train step builds it: the update reads its moments settled.
    Settled,
    /// The update's results guarded after it.
    Raw,
}

/// Deterministic values in a range that makes every term of the update matter.
fn values(n: usize, seed: u32, lo: f32, hi: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
            lo + (hi - lo) * (x as f32 / (1u32 << 24) as f32)
        })
        .collect()
}

fn run(exe: &mut dyn Executable, n: usize, ok: bool) -> Vec<Vec<f32>> {
    let be = NativeBackend::new();
    let mut args = [
        Tensor::from_vec(&[n], values(n, 1, -1.0, 1.0)).unwrap(),
        Tensor::from_vec(&[n], values(n, 2, -0.5, 0.5)).unwrap(),
        Tensor::from_vec(&[n], values(n, 3, -0.1, 0.1)).unwrap(),
        Tensor::from_vec(&[n], values(n, 4, 0.0, 0.01)).unwrap(),
        Tensor::scalar(1e-3f32),
        Tensor::scalar(7.0f32),
        Tensor::scalar(ok),
    ]
    .iter()
    .map(|t| be.upload(t).unwrap())
    .collect::<Vec<_>>();
    let outs = exe.execute(&mut args).unwrap();
    // In place: the results live in the parameters (w, then the slots).
    let (w, m, v) = if outs.is_empty() {
        (&args[0], &args[2], &args[3])
    } else {
        (&outs[0], &outs[1], &outs[2])
    };
    [w, m, v]
        .iter()
        .map(|b| be.download(b).unwrap().to_vec::<f32>().unwrap())
        .collect()
}

#[test]
fn the_single_pass_matches_the_interpreter_bit_for_bit() {
    // Sizes: below the parallel split, not a multiple of the vector width, and split
    // across the crew (the first layer's 784·128).
    for n in [37, 1000, 100_352 + 5] {
        for (in_place, guard) in [
            (false, Guard::Settled),
            (true, Guard::Settled),
            (true, Guard::Raw),
            (true, Guard::None),
        ] {
            for ok in [true, false]
                .into_iter()
                .filter(|&ok| guard != Guard::None || ok)
            {
                let (g, opts) = update_graph(&Adam::default(), n, in_place, guard);
                let (mut fast, recognised) = compile_fused_adam(&g, &opts, true);
                assert_eq!(recognised, 1, "n={n} in_place={in_place} {guard:?}");
                let (mut slow, _) = compile_fused_adam(&g, &opts, false);
                let (a, b) = (run(fast.as_mut(), n, ok), run(slow.as_mut(), n, ok));
                for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                    let same = x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
                    assert!(
                        same,
                        "output {k} differs (n={n} in_place={in_place} {guard:?} ok={ok})"
                    );
                }
                if !ok {
                    assert_eq!(a[0], values(n, 1, -1.0, 1.0), "a failed guard keeps w");
                } else {
                    assert_ne!(a[0], values(n, 1, -1.0, 1.0), "the update changes w");
                }
            }
        }
    }
}

#[test]
fn other_updates_stay_on_the_generic_path() {
    for opt in [
        Box::new(Adam::default().amsgrad(true)) as Box<dyn Optimizer>,
        Box::new(AdamW::default()),
        Box::new(Adam::default().epsilon(1e-3)), // still Adam: recognised
    ] {
        let (g, opts) = update_graph(opt.as_ref(), 1000, true, Guard::Settled);
        let (_, recognised) = compile_fused_adam(&g, &opts, true);
        // AdamW's decay joins the group, so the group is more than Adam's update.
        let want = usize::from(opt.name() == "adam" && opt.slots().len() == 2);
        assert_eq!(recognised, want, "{opt:?}");
    }
}

/// As the train step builds it, the weight's rule reads the moments settled: each raw
/// moment has one reader, the select that settles it. A second reader (the weight's rule)
/// is what makes a fusing compiler recompute the moment from the old slot, which it then
/// has to copy aside every step before updating the slot in place.
#[test]
fn the_weight_reads_the_settled_moments() {
    use crate::ir::Op;
    for opt in [
        Box::new(Adam::default()) as Box<dyn Optimizer>,
        Box::new(Adam::default().amsgrad(true)),
        Box::new(AdamW::default()),
    ] {
        let (g, _) = update_graph(opt.as_ref(), 8, true, Guard::Settled);
        let readers = |v: crate::ir::Value| {
            g.nodes()
                .iter()
                .filter(|n| n.op.operands().contains(&v))
                .count()
        };
        for &out in &g.outputs()[1..] {
            let Op::Select { on_true, .. } = g.node(out).op else {
                panic!("{}: slot output {out:?} is not settled", opt.name());
            };
            assert_eq!(
                readers(on_true),
                1,
                "{}: raw moment {on_true:?}",
                opt.name()
            );
            assert!(readers(out) >= 1, "{}: the rule reads {out:?}", opt.name());
        }
    }
}
