//! Every loss and metric against hand-computed values.

use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::Backend;
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::loss::{
    BinaryCrossentropy, CategoricalCrossentropy, Hinge, Huber, KLDivergence, Loss,
    MeanAbsoluteError, MeanSquaredError, SparseCategoricalCrossentropy,
};
use strata_runtime::metrics::{
    Accuracy, BinaryAccuracy, CategoricalAccuracy, Metric, Precision, Recall,
    SparseCategoricalAccuracy, TopKAccuracy, AUC,
};
use strata_runtime::Tensor;

fn f(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}
fn i(dims: &[usize], v: &[i32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}

/// The per-sample loss of `loss` for `(target, pred)`, optionally with logits behind a softmax.
fn per_sample(loss: &dyn Loss, target: Tensor, pred: Tensor) -> Vec<f32> {
    let mut g = Graph::new("loss");
    let t = g.parameter(target.ty());
    let p = g.parameter(pred.ty());
    let l = loss.per_sample(&mut g, t, p, None).unwrap();
    g.set_outputs(vec![l]).unwrap();
    NativeBackend::new().run(&g, &[target, pred]).unwrap()[0]
        .to_vec::<f32>()
        .unwrap()
}

#[track_caller]
fn close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            ((*g as f64) - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn crossentropies() {
    let probs = f(&[2, 3], &[0.7, 0.2, 0.1, 0.1, 0.1, 0.8]);
    let want = [0.356_675, std::f64::consts::LN_10];
    close(
        &per_sample(
            &SparseCategoricalCrossentropy::default(),
            i(&[2], &[0, 1]),
            probs.clone(),
        ),
        &want,
    );
    close(
        &per_sample(
            &SparseCategoricalCrossentropy::default(),
            i(&[2, 1], &[0, 1]),
            probs.clone(),
        ),
        &want,
    );
    close(
        &per_sample(
            &SparseCategoricalCrossentropy { from_logits: true },
            i(&[1], &[0]),
            f(&[1, 3], &[2.0, 1.0, 0.0]),
        ),
        &[0.407_606],
    );
    let onehot = f(&[2, 3], &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    close(
        &per_sample(
            &CategoricalCrossentropy::default(),
            onehot.clone(),
            probs.clone(),
        ),
        &want,
    );
    let smooth = CategoricalCrossentropy {
        from_logits: false,
        label_smoothing: 0.1,
    };
    close(
        &per_sample(
            &smooth,
            f(&[1, 3], &[1.0, 0.0, 0.0]),
            f(&[1, 3], &[0.7, 0.2, 0.1]),
        ),
        &[0.463_298],
    );
    close(
        &per_sample(
            &BinaryCrossentropy::default(),
            f(&[1, 2], &[1.0, 0.0]),
            f(&[1, 2], &[0.8, 0.3]),
        ),
        &[0.289_909],
    );
    close(
        &per_sample(
            &BinaryCrossentropy {
                from_logits: true,
                ..Default::default()
            },
            f(&[1, 2], &[1.0, 0.0]),
            f(&[1, 2], &[2.0, -1.0]),
        ),
        &[0.220_095],
    );
    // Probabilities of exactly 0 and 1 are clipped, not infinite.
    let v = per_sample(
        &BinaryCrossentropy::default(),
        f(&[1, 2], &[1.0, 0.0]),
        f(&[1, 2], &[0.0, 1.0]),
    );
    assert!(v[0].is_finite() && v[0] > 10.0, "{v:?}");
}

#[test]
fn regression_and_margin_losses() {
    close(
        &per_sample(
            &MeanSquaredError,
            f(&[1, 2], &[1.0, 2.0]),
            f(&[1, 2], &[1.5, 1.0]),
        ),
        &[0.625],
    );
    close(
        &per_sample(
            &MeanAbsoluteError,
            f(&[1, 2], &[1.0, 2.0]),
            f(&[1, 2], &[1.5, 1.0]),
        ),
        &[0.75],
    );
    close(
        &per_sample(
            &Huber::default(),
            f(&[2, 2], &[0.0, 0.0, 0.0, 0.0]),
            f(&[2, 2], &[0.5, -1.0, 2.0, 0.0]),
        ),
        &[0.3125, 0.75],
    );
    close(
        &per_sample(
            &KLDivergence,
            f(&[1, 2], &[0.5, 0.5]),
            f(&[1, 2], &[0.25, 0.75]),
        ),
        &[0.143_841],
    );
    close(
        &per_sample(&Hinge, f(&[1, 2], &[1.0, 0.0]), f(&[1, 2], &[0.3, 0.4])),
        &[1.05],
    );
    // Already ±1 targets are used as they are.
    close(
        &per_sample(&Hinge, f(&[1, 2], &[1.0, -1.0]), f(&[1, 2], &[0.3, 0.4])),
        &[1.05],
    );
}

#[test]
fn sparse_loss_checks_shapes_and_label_range() {
    let l = SparseCategoricalCrossentropy::default();
    let p = TensorType::new(DType::F32, [4, 10]);
    assert!(l.check(&TensorType::new(DType::I32, [4]), &p).is_ok());
    assert!(l.check(&TensorType::new(DType::I32, [4, 1]), &p).is_ok());
    let e = l.check(&TensorType::new(DType::I32, [5]), &p).unwrap_err();
    assert!(
        e.to_string().contains("i32[5]") && e.to_string().contains("f32[4, 10]"),
        "{e}"
    );
    let e = l.check_values(&i(&[3], &[0, 10, 2]), &[3, 10]).unwrap_err();
    assert!(e.to_string().contains("label 10 at position 1"), "{e}");
    assert!(l.check_values(&i(&[2], &[-1, 0]), &[2, 10]).is_err());
}

/// Streams `batches` of `(target, pred, weights)` through `m` and returns the result.
fn stream(m: &dyn Metric, batches: Vec<(Tensor, Tensor, Vec<f32>)>) -> f32 {
    let mut g = Graph::new("metric");
    let state: Vec<_> = m
        .state()
        .iter()
        .map(|d| g.parameter(TensorType::new(DType::F32, d.clone())))
        .collect();
    let mut cur = state.clone();
    let mut inputs: Vec<Tensor> = m
        .state()
        .iter()
        .map(|d| Tensor::zeros(&TensorType::new(DType::F32, d.clone())).unwrap())
        .collect();
    for (t, p, w) in batches {
        let tv = g.parameter(t.ty());
        let pv = g.parameter(p.ty());
        let wt = Tensor::from_vec(&[w.len()], w).unwrap();
        let wv = g.parameter(wt.ty());
        cur = m.update(&mut g, &cur, tv, pv, wv).unwrap();
        inputs.extend([t, p, wt]);
    }
    let r = m.result(&mut g, &cur).unwrap();
    g.set_outputs(vec![r]).unwrap();
    NativeBackend::new().run(&g, &inputs).unwrap()[0]
        .to_vec::<f32>()
        .unwrap()[0]
}

#[test]
fn accuracies_stream_over_weighted_batches() {
    let b1 = (
        i(&[2], &[1, 1]),
        f(&[2, 2], &[0.1, 0.9, 0.8, 0.2]),
        vec![1.0, 2.0],
    );
    let b2 = (i(&[1], &[1]), f(&[1, 2], &[0.3, 0.7]), vec![1.0]);
    assert_eq!(
        stream(&SparseCategoricalAccuracy, vec![b1.clone(), b2.clone()]),
        0.5
    );
    // "accuracy" next to a sparse loss is sparse categorical accuracy, still named accuracy.
    let acc = Box::new(Accuracy).resolve(&SparseCategoricalCrossentropy::default());
    assert_eq!(acc.name(), "accuracy");
    assert_eq!(stream(acc.as_ref(), vec![b1, b2]), 0.5);
    let c = (
        f(&[2, 2], &[0.0, 1.0, 0.0, 1.0]),
        f(&[2, 2], &[0.1, 0.9, 0.8, 0.2]),
        vec![1.0, 1.0],
    );
    assert_eq!(stream(&CategoricalAccuracy, vec![c]), 0.5);
    let b = (
        f(&[2, 1], &[1.0, 0.0]),
        f(&[2, 1], &[0.6, 0.7]),
        vec![1.0, 1.0],
    );
    assert_eq!(stream(&BinaryAccuracy, vec![b]), 0.5);
    let k = (
        i(&[2], &[2, 2]),
        f(&[2, 3], &[0.1, 0.5, 0.4, 0.6, 0.3, 0.1]),
        vec![1.0, 1.0],
    );
    assert_eq!(stream(&TopKAccuracy::sparse(2), vec![k]), 0.5);
    // No samples yet: 0, not NaN.
    assert_eq!(stream(&SparseCategoricalAccuracy, vec![]), 0.0);
}

#[test]
fn precision_recall_auc() {
    let y = f(&[5, 1], &[1.0, 0.0, 1.0, 1.0, 1.0]);
    let p = f(&[5, 1], &[0.9, 0.6, 0.4, 0.7, 0.2]);
    let w = vec![1.0; 5];
    assert!(
        (stream(
            &Precision::default(),
            vec![(y.clone(), p.clone(), w.clone())]
        ) - 2.0 / 3.0)
            .abs()
            < 1e-6
    );
    assert!((stream(&Recall::default(), vec![(y, p, w)]) - 0.5).abs() < 1e-6);
    let y = f(&[4, 1], &[0.0, 0.0, 1.0, 1.0]);
    let p = f(&[4, 1], &[0.1, 0.4, 0.35, 0.8]);
    let auc = stream(&AUC::default(), vec![(y, p, vec![1.0; 4])]);
    assert!((auc - 0.75).abs() < 1e-3, "{auc}");
    let y = f(&[4, 1], &[0.0, 0.0, 1.0, 1.0]);
    let p = f(&[4, 1], &[0.1, 0.2, 0.7, 0.8]);
    assert!((stream(&AUC::default(), vec![(y, p, vec![1.0; 4])]) - 1.0).abs() < 1e-6);
}

#[test]
fn mean_error_metrics_are_weighted() {
    use strata_runtime::metrics::{MeanAbsoluteError as Mae, MeanSquaredError as Mse};
    let b = (
        f(&[2, 1], &[1.0, 2.0]),
        f(&[2, 1], &[2.0, 2.0]),
        vec![3.0, 1.0],
    );
    assert_eq!(stream(&Mse, vec![b.clone()]), 0.75);
    assert_eq!(stream(&Mae, vec![b]), 0.75);
}
