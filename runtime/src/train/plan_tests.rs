//! The native plans of whole train steps, pinned: a change to the planner, the fuser or
//! a step's graph that adds or splits a kernel shows here (run with `--nocapture` to see
//! and diff the whole plan).

use crate::backend::native::testing::{take_plans, PlanSummary};
use crate::Model;

/// The plan of the train step `model` fits at batch 32, on inputs of `shape`.
fn train_step_plan<A: crate::nn::Architecture>(model: Model<A>, shape: &[usize]) -> PlanSummary {
    train_step_plan_with(model, shape, crate::optim::Adam::default())
}

/// [`train_step_plan`] with another optimizer.
fn train_step_plan_with<A: crate::nn::Architecture>(
    mut model: Model<A>,
    shape: &[usize],
    optimizer: impl crate::optim::Optimizer + 'static,
) -> PlanSummary {
    use crate::loss::SparseCategoricalCrossentropy;
    use crate::metrics::Accuracy;
    use crate::train::Fit;
    let rows = [&[64], shape].concat();
    let x = crate::random::normal(&rows, 0.0, 1.0, 0).unwrap();
    let y = crate::random::uniform_int(&[64], 0, 10, 1).unwrap();
    model
        .compile(
            optimizer,
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
    take_plans();
    model.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
    let made = take_plans();
    let train: Vec<&(PlanSummary, String)> = made
        .iter()
        .filter(|(s, _)| s.graph == "train_step")
        .collect();
    assert_eq!(train.len(), 1, "{made:#?}");
    eprintln!("plan: {}", train[0].1);
    train[0].0.clone()
}

#[test]
fn the_tutorial_train_step_keeps_its_plan() {
    use crate::nn::{Activation, Dense, Sequential};
    let model = Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ));
    let s = train_step_plan(model, &[784]);
    // The gradients' health check (see `step::all_finite`) adds reductions: per gradient
    // a sum over the leading axes (rank 2) and one over the rest, 10 kernels in all, and
    // their partial sums one more. Adam's update stays six hand-fused passes, guarded in
    // place.
    assert_eq!(
        (s.steps, s.kernels.len(), s.fused, s.adam, s.insts, s.slots),
        (73, 44, 29, 6, 264, 53),
        "{s:#?}"
    );
}

#[test]
fn a_convolutional_train_step_keeps_its_plan() {
    use crate::nn::{
        Activation, BatchNormalization, Conv2D, Dense, Dropout, Flatten, LayerNormalization,
        MaxPooling2D, Sequential,
    };
    let model = Model::new(Sequential::new(
        Some(vec![8, 8, 1]),
        vec![
            Box::new(Conv2D::new("conv", 4, [3, 3], Activation::Relu)),
            Box::new(BatchNormalization::new("bn")),
            Box::new(MaxPooling2D::new("pool", [2, 2])),
            Box::new(Dropout::new("drop", 0.25)),
            Box::new(Flatten::new("flat")),
            Box::new(LayerNormalization::new("ln")),
            Box::new(Dense::new("out", 10, Activation::Softmax)),
        ],
    ));
    let s = train_step_plan(model, &[8, 8, 1]);
    assert_eq!(
        (s.steps, s.kernels.len(), s.fused, s.adam, s.insts, s.slots),
        (113, 61, 52, 8, 395, 67),
        "{s:#?}"
    );
}

/// With `use_ema` the moving average joins each parameter's update group (the fuser puts
/// the average's update with Adam's, so the weight is still read once), which the
/// hand-fused Adam does not recognise: those six groups run on the generic fused kernel
/// (`adam` 0 against 6 in the tutorial plan above). Pinned so that a change shows.
#[test]
fn adam_with_ema_keeps_one_update_pass_per_parameter() {
    use crate::nn::{Activation, Dense, Sequential};
    use crate::optim::OptimizerExt;
    let model = Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ));
    let s = train_step_plan_with(model, &[784], crate::optim::Adam::default().with_ema(0.99));
    assert_eq!(
        (s.steps, s.kernels.len(), s.fused, s.adam, s.insts, s.slots),
        (75, 45, 30, 0, 306, 61),
        "{s:#?}"
    );
}
