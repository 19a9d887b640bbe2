//! Each optimizer's update against its closed form (Keras 3's definitions, written out
//! here in f64) over several steps with varying gradients; the shared clipping and weight
//! decay; the learning-rate schedules.

use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::{Backend, CompileOptions};
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::optim::schedule::{
    CosineDecay, ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay,
};
use strata_runtime::optim::{
    Adagrad, Adam, AdamW, Adamax, Lion, Nadam, Optimizer, OptimizerExt, RMSprop, Schedule, SGD,
};
use strata_runtime::Tensor;

const LR: f64 = 0.05;
const W0: [f64; 3] = [0.5, -1.0, 2.0];

/// Gradient at step `t` (1-based): varies in sign and size.
fn grad(t: usize) -> [f64; 3] {
    let t = t as f64;
    [0.3 * t - 0.5, -0.2 + 0.1 * t * t, (t * 1.7).sin()]
}

/// Runs `steps` updates of `opt` through the train-step machinery's own pieces: the IR
/// emitted by `Optimizer::update`, executed on the native backend with state fed back.
fn run(opt: &dyn Optimizer, steps: usize) -> Vec<f64> {
    let ty = TensorType::new(DType::F32, [3]);
    let nslots = opt.slots().len();
    let nglob = opt.globals().len();
    let mut g = Graph::new("opt");
    let w = g.parameter(ty.clone());
    let gr = g.parameter(ty.clone());
    let slots: Vec<_> = (0..nslots).map(|_| g.parameter(ty.clone())).collect();
    let globals: Vec<_> = (0..nglob)
        .map(|_| g.parameter(TensorType::scalar(DType::F32)))
        .collect();
    let t = g.parameter(TensorType::scalar(DType::F32));
    let lr = g.parameter(TensorType::scalar(DType::F32));
    let new_globals = opt.update_globals(&mut g, t, &globals).unwrap();
    let step = strata_runtime::optim::Step {
        lr,
        t,
        globals: new_globals.clone(),
        guard: None,
    };
    let grads = strata_runtime::optim::clip_gradients(&mut g, opt.config(), &[gr]).unwrap();
    let wd = strata_runtime::optim::apply_weight_decay(&mut g, opt.config(), w, lr).unwrap();
    let (nw, ns) = opt.update(&mut g, &step, wd, grads[0], &slots).unwrap();
    let mut outs = vec![nw];
    outs.extend(ns);
    outs.extend(new_globals);
    g.set_outputs(outs).unwrap();
    let b = NativeBackend::new();
    let mut exe = b.compile(&g, &CompileOptions::default()).unwrap();
    let v3 = |v: [f64; 3]| {
        Tensor::from_vec(&[3], v.iter().map(|&x| x as f32).collect::<Vec<f32>>()).unwrap()
    };
    let mut state: Vec<Tensor> = vec![v3(W0)];
    for slot in opt.slots() {
        state.push(v3([slot.init as f64; 3]));
    }
    for (_, init) in opt.globals() {
        state.push(Tensor::scalar(init));
    }
    for step in 1..=steps {
        let mut args = vec![
            b.upload(&state[0]).unwrap(),
            b.upload(&v3(grad(step))).unwrap(),
        ];
        for s in &state[1..] {
            args.push(b.upload(s).unwrap());
        }
        args.push(b.upload(&Tensor::scalar(step as f32)).unwrap());
        args.push(b.upload(&Tensor::scalar(LR as f32)).unwrap());
        let out = exe.execute(&mut args).unwrap();
        state = out.iter().map(|o| b.download(o).unwrap()).collect();
    }
    state[0]
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(|v| v as f64)
        .collect()
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64]) {
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 2e-5 + 2e-5 * w.abs(),
            "got {got:?}, want {want:?}"
        );
    }
}

/// Applies `f(w, g, state, t)` elementwise for `steps` steps.
fn reference(
    steps: usize,
    slots: usize,
    init: f64,
    mut f: impl FnMut(&mut f64, f64, &mut [f64], f64),
) -> Vec<f64> {
    let mut w = W0.to_vec();
    let mut st = vec![vec![init; slots]; 3];
    for t in 1..=steps {
        let gr = grad(t);
        for i in 0..3 {
            f(&mut w[i], gr[i], &mut st[i], t as f64);
        }
    }
    w
}

const STEPS: usize = 4;

#[test]
fn sgd_plain_momentum_nesterov() {
    assert_close(
        &run(&SGD::new(LR as f32), STEPS),
        &reference(STEPS, 0, 0.0, |w, g, _, _| *w -= LR * g),
    );
    let mom = 0.9;
    for nesterov in [false, true] {
        let got = run(
            &SGD::new(LR as f32).momentum(mom as f32).nesterov(nesterov),
            STEPS,
        );
        let want = reference(STEPS, 1, 0.0, |w, g, s, _| {
            s[0] = mom * s[0] - LR * g;
            *w += if nesterov { mom * s[0] - LR * g } else { s[0] };
        });
        assert_close(&got, &want);
    }
}

fn adam_ref(amsgrad: bool) -> Vec<f64> {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-7f64);
    reference(STEPS, 3, 0.0, |w, g, s, t| {
        let alpha = LR * (1.0 - b2.powf(t)).sqrt() / (1.0 - b1.powf(t));
        s[0] += (g - s[0]) * (1.0 - b1);
        s[1] += (g * g - s[1]) * (1.0 - b2);
        let v = if amsgrad {
            s[2] = s[2].max(s[1]);
            s[2]
        } else {
            s[1]
        };
        *w -= s[0] * alpha / (v.sqrt() + eps);
    })
}

#[test]
fn adam_and_amsgrad() {
    assert_close(&run(&Adam::new(LR as f32), STEPS), &adam_ref(false));
    assert_close(
        &run(&Adam::new(LR as f32).amsgrad(true), STEPS),
        &adam_ref(true),
    );
}

#[test]
fn adamw_decays_then_steps() {
    let (b1, b2, eps, wd) = (0.9f64, 0.999f64, 1e-7f64, 0.004f64);
    let want = reference(STEPS, 2, 0.0, |w, g, s, t| {
        *w -= *w * wd * LR;
        let alpha = LR * (1.0 - b2.powf(t)).sqrt() / (1.0 - b1.powf(t));
        s[0] += (g - s[0]) * (1.0 - b1);
        s[1] += (g * g - s[1]) * (1.0 - b2);
        *w -= s[0] * alpha / (s[1].sqrt() + eps);
    });
    assert_close(&run(&AdamW::new(LR as f32), STEPS), &want);
}

#[test]
fn adamax() {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-7f64);
    let want = reference(STEPS, 2, 0.0, |w, g, s, t| {
        s[0] += (g - s[0]) * (1.0 - b1);
        s[1] = (b2 * s[1]).max(g.abs());
        *w -= LR * s[0] / ((1.0 - b1.powf(t)) * (s[1] + eps));
    });
    assert_close(&run(&Adamax::new(LR as f32), STEPS), &want);
}

#[test]
fn nadam() {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-7f64);
    let mu = |t: f64| b1 * (1.0 - 0.5 * 0.96f64.powf(t));
    // The momentum product is shared across elements: advance it once per step.
    let mut w = W0.to_vec();
    let mut s = [[0.0f64; 2]; 3];
    let mut prod = 1.0;
    for t in 1..=STEPS {
        let tf = t as f64;
        prod *= mu(tf);
        let gr = grad(t);
        for i in 0..3 {
            let g = gr[i];
            s[i][0] += (g - s[i][0]) * (1.0 - b1);
            s[i][1] += (g * g - s[i][1]) * (1.0 - b2);
            let m_hat = mu(tf + 1.0) * s[i][0] / (1.0 - prod * mu(tf + 1.0))
                + (1.0 - mu(tf)) * g / (1.0 - prod);
            let v_hat = s[i][1] / (1.0 - b2.powf(tf));
            w[i] -= LR * m_hat / (v_hat.sqrt() + eps);
        }
    }
    assert_close(&run(&Nadam::new(LR as f32), STEPS), &w);
}

#[test]
fn rmsprop_plain_momentum_centered() {
    let (rho, eps) = (0.9f64, 1e-7f64);
    for (mom, centered) in [(0.0, false), (0.5, false), (0.0, true), (0.5, true)] {
        let opt = RMSprop::new(LR as f32)
            .momentum(mom as f32)
            .centered(centered);
        let want = reference(STEPS, 3, 0.0, |w, g, s, _| {
            s[0] = rho * s[0] + (1.0 - rho) * g * g;
            let denom = if centered {
                s[2] = rho * s[2] + (1.0 - rho) * g;
                s[0] - s[2] * s[2] + eps
            } else {
                s[0] + eps
            };
            let inc = LR * g / denom.sqrt();
            if mom > 0.0 {
                s[1] = mom * s[1] + inc;
                *w -= s[1];
            } else {
                *w -= inc;
            }
        });
        assert_close(&run(&opt, STEPS), &want);
    }
}

#[test]
fn adagrad() {
    let want = reference(STEPS, 1, 0.1, |w, g, s, _| {
        s[0] += g * g;
        *w -= LR * g / (s[0] + 1e-7).sqrt();
    });
    assert_close(&run(&Adagrad::new(LR as f32), STEPS), &want);
}

#[test]
fn lion() {
    let (b1, b2) = (0.9f64, 0.99f64);
    let want = reference(STEPS, 1, 0.0, |w, g, s, _| {
        let c = b1 * s[0] + (1.0 - b1) * g;
        *w -= LR * c.signum() * (c != 0.0) as u8 as f64;
        s[0] = b2 * s[0] + (1.0 - b2) * g;
    });
    assert_close(&run(&Lion::new(LR as f32), STEPS), &want);
}

#[test]
fn clipping_and_weight_decay() {
    // clipvalue
    let want = reference(STEPS, 0, 0.0, |w, g, _, _| *w -= LR * g.clamp(-0.25, 0.25));
    assert_close(
        &run(&SGD::new(LR as f32).with_clipvalue(0.25), STEPS),
        &want,
    );
    // clipnorm / global_clipnorm (one tensor, so the same), norm limit 0.5
    let clipnorm = |limit: f64| {
        let mut w = W0.to_vec();
        for t in 1..=STEPS {
            let g = grad(t);
            let n = g.iter().map(|v| v * v).sum::<f64>().sqrt();
            let f = limit / n.max(limit);
            for i in 0..3 {
                w[i] -= LR * g[i] * f;
            }
        }
        w
    };
    assert_close(
        &run(&SGD::new(LR as f32).with_clipnorm(0.5), STEPS),
        &clipnorm(0.5),
    );
    assert_close(
        &run(&SGD::new(LR as f32).with_global_clipnorm(0.5), STEPS),
        &clipnorm(0.5),
    );
    // weight decay before the update
    let want = reference(STEPS, 0, 0.0, |w, g, _, _| {
        *w -= *w * 0.1 * LR;
        *w -= LR * g;
    });
    assert_close(
        &run(&SGD::new(LR as f32).with_weight_decay(0.1), STEPS),
        &want,
    );
}

#[test]
fn bad_hyper_parameters_are_typed_errors() {
    let e = SGD::new(0.1).momentum(1.5).validate().unwrap_err();
    assert!(e.to_string().contains("momentum must be in [0, 1)"), "{e}");
    let a = Adam::new(-1.0);
    let e = a.config().validate("adam").unwrap_err();
    assert!(e.to_string().contains("learning_rate"), "{e}");
    let c = SGD::new(0.1).with_clipnorm(1.0).with_global_clipnorm(1.0);
    assert!(c.config().validate("sgd").is_err());
    assert!(Adam::new(0.1).epsilon(0.0).validate().is_err());
}

#[test]
fn schedules_follow_keras() {
    let e = ExponentialDecay {
        initial: 0.1,
        decay_steps: 10,
        decay_rate: 0.5,
        staircase: false,
    };
    assert!((e.lr(5) - 0.1 * 0.5f32.powf(0.5)).abs() < 1e-7);
    let s = ExponentialDecay {
        staircase: true,
        ..e.clone()
    };
    assert_eq!(s.lr(19), 0.05);
    let c = CosineDecay::new(0.1, 100);
    assert!((c.lr(0) - 0.1).abs() < 1e-7);
    assert!((c.lr(50) - 0.05).abs() < 1e-6);
    assert!(c.lr(100).abs() < 1e-7 && c.lr(500).abs() < 1e-7);
    let w = CosineDecay::new(0.0, 100).with_warmup(0.2, 10);
    assert!((w.lr(5) - 0.1).abs() < 1e-7, "{}", w.lr(5));
    assert!((w.lr(10) - 0.2).abs() < 1e-7);
    assert!((w.lr(60) - 0.1).abs() < 1e-6);
    let p = PiecewiseConstantDecay {
        boundaries: vec![10, 20],
        values: vec![1.0, 0.5, 0.1],
    };
    assert_eq!(
        (p.lr(10), p.lr(11), p.lr(20), p.lr(21)),
        (1.0, 0.5, 0.5, 0.1)
    );
    assert!(PiecewiseConstantDecay {
        boundaries: vec![10],
        values: vec![1.0]
    }
    .validate()
    .is_err());
    let q = PolynomialDecay {
        initial: 0.1,
        decay_steps: 10,
        end: 0.0,
        power: 2.0,
        cycle: false,
    };
    assert!((q.lr(5) - 0.025).abs() < 1e-7);
    assert_eq!(q.lr(50), 0.0);
    let qc = PolynomialDecay {
        cycle: true,
        ..q.clone()
    };
    assert!(
        (qc.lr(15) - 0.1 * 0.25 * 0.25).abs() < 1e-7,
        "{}",
        qc.lr(15)
    );
}
