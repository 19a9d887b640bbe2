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
    model: Model<A>,
    shape: &[usize],
    optimizer: impl crate::optim::Optimizer + 'static,
) -> PlanSummary {
    let plans = train_plans(model, shape, optimizer, 1);
    assert_eq!(plans.len(), 1, "{plans:#?}");
    plans[0].clone()
}

/// The plans of the train step `model` fits at batch 32, on 64 inputs of `shape`, with
/// `k` steps per execution: the step graph's, then its loops' bodies'.
fn train_plans<A: crate::nn::Architecture>(
    mut model: Model<A>,
    shape: &[usize],
    optimizer: impl crate::optim::Optimizer + 'static,
    k: usize,
) -> Vec<PlanSummary> {
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
    model.set_steps_per_execution(k).unwrap();
    take_plans();
    model.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
    let made = take_plans();
    made.into_iter()
        .filter(|(s, _)| s.graph.starts_with("train_step"))
        .map(|(s, steps)| {
            eprintln!("plan of {}: {steps}", s.graph);
            s
        })
        .collect()
}

/// A model of Dense layers: the tutorial's.
fn tutorial() -> Model<crate::nn::Sequential> {
    use crate::nn::{Activation, Dense, Sequential};
    Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ))
}

/// `steps_per_execution` runs its steps as a loop whose body is planned as the step is
/// outside a loop: the same GEMMs, the same hand-fused Adam passes, the same kernels but
/// for reading its batch's rows, in a graph of one step whatever `k` is.
#[test]
fn a_loop_of_train_steps_plans_its_body_as_one_step() {
    let one = train_plans(tutorial(), &[784], crate::optim::Adam::default(), 1);
    let looped = train_plans(tutorial(), &[784], crate::optim::Adam::default(), 2);
    let graphs: Vec<&str> = looped.iter().map(|s| s.graph.as_str()).collect();
    assert_eq!(graphs, ["train_step", "train_step/loop 0 body"]);
    let (one, body) = (&one[0], &looped[1]);
    assert_eq!(body.adam, one.adam, "{body:#?}");
    // The health checks' scalars group differently once the health is a carried value.
    assert!(body.fused <= one.fused + 1, "{body:#?}");
    // The step's own kernels (not those reading the call's status and batches or packing
    // its logs, which differ between a call and a loop's iteration).
    let kernels = |s: &PlanSummary| {
        let mut k: Vec<&str> = s.kernels.clone();
        let step = [
            "dot_general",
            "reduce",
            "gather",
            "scatter_add",
            "iota",
            "convert",
        ];
        k.retain(|n| step.contains(n));
        k.sort();
        k
    };
    assert_eq!(kernels(body), kernels(one), "{body:#?}");
    // The step graph around the loop holds the loop, not the steps.
    assert!(looped[0].kernels.contains(&"while"), "{:#?}", looped[0]);
    assert!(
        !looped[0].kernels.contains(&"dot_general"),
        "{:#?}",
        looped[0]
    );
}

#[test]
fn the_tutorial_train_step_keeps_its_plan() {
    let s = train_step_plan(tutorial(), &[784]);
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
    // Where the direct kernel for few input features runs, the convolution's kernel
    // gradient is one kernel on the untransposed operands, not three transposes around
    // a convolution (`native::conv_grad`).
    let transposes = if crate::kernel::conv_direct::thin(1, 9) {
        0
    } else {
        3
    };
    assert_eq!(
        (s.steps, s.kernels.len(), s.fused, s.adam, s.insts, s.slots),
        (110 + transposes, 63 + transposes, 47, 8, 386, 67),
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
        (75, 45, 30, 0, 306, 60),
        "{s:#?}"
    );
}

/// The `cnn` workload's layers (`Conv2D(relu)` → `MaxPooling2D`, twice): the planner fuses
/// each convolution's bias and ReLU into its pooling and the ReLU's gradient into the
/// pooling's (four fused kernels in the train step), and training with them is bit for
/// bit training without them (`testing::without_bias_relu_pool`). The first layer's
/// kernel and bias gradients from its pooled cotangent (`native::conv_pool_grad`) sum in
/// another order: training with them is within rounding of training without.
#[test]
fn a_convnet_trains_the_same_with_bias_and_relu_fused_into_its_poolings() {
    use crate::backend::native::testing::without_bias_relu_pool;
    use crate::nn::{Activation, Conv2D, Dense, Dropout, Flatten, MaxPooling2D, Sequential};
    let model = || {
        Model::new(Sequential::new(
            Some(vec![12, 12, 1]),
            vec![
                Box::new(Conv2D::new("conv", 8, [3, 3], Activation::Relu)),
                Box::new(MaxPooling2D::new("pool", [2, 2])),
                Box::new(Conv2D::new("conv_1", 16, [3, 3], Activation::Relu)),
                Box::new(MaxPooling2D::new("pool_1", [2, 2])),
                Box::new(Flatten::new("flat")),
                Box::new(Dropout::new("drop", 0.5)),
                Box::new(Dense::new("out", 10, Activation::Softmax)),
            ],
        ))
    };
    use crate::backend::native::testing::without_conv_pool;
    let fused = train_step_plan(model(), &[12, 12, 1]);
    assert_eq!(fused.bias_relu_pools, 4, "{fused:#?}");
    let plain = without_bias_relu_pool(|| train_step_plan(model(), &[12, 12, 1]));
    assert_eq!(plain.bias_relu_pools, 0, "{plain:#?}");
    // Four full-size elementwise passes fewer: the add with ReLU and the gate, per layer.
    assert_eq!(fused.fused + 4, plain.fused, "{fused:#?} {plain:#?}");
    // Where the direct kernel runs, the first layer's convolution (one input feature) is
    // computed inside its pooling (`native::conv_pool`): one kernel fewer.
    let stored = without_conv_pool(|| train_step_plan(model(), &[12, 12, 1]));
    let banded = usize::from(crate::kernel::conv_direct::thin(1, 9));
    assert_eq!(fused.conv_pools, banded, "{fused:#?}");
    assert_eq!(stored.conv_pools, 0, "{stored:#?}");
    assert_eq!(fused.steps + banded, stored.steps, "{fused:#?} {stored:#?}");
    // Where the direct kernel computes the first layer's kernel gradient (`conv_grad`),
    // it and the bias gradient read the pooled cotangent, and the convolution output's
    // cotangent is not computed: one kernel fewer.
    use crate::backend::native::testing::without_conv_pool_grad;
    let dense = without_conv_pool_grad(|| train_step_plan(model(), &[12, 12, 1]));
    assert_eq!(fused.pooled_grads, 2 * banded, "{fused:#?}");
    assert_eq!(dense.pooled_grads, 0, "{dense:#?}");
    assert_eq!(fused.steps + banded, dense.steps, "{fused:#?} {dense:#?}");

    let train = |m: &mut Model<Sequential>| trained_bits(m, &[96, 12, 12, 1]);
    let (mut a, mut b) = (model(), model());
    let fused_run = without_conv_pool_grad(|| train(&mut a));
    let plain_run = without_bias_relu_pool(|| train(&mut b));
    assert_eq!(fused_run.len(), plain_run.len());
    for (k, (x, y)) in fused_run.iter().zip(&plain_run).enumerate() {
        assert!(x == y, "weight {k} differs after training");
    }
    let mut c = model();
    let stored_run = without_conv_pool(|| without_conv_pool_grad(|| train(&mut c)));
    for (k, (x, y)) in fused_run.iter().zip(&stored_run).enumerate() {
        assert!(
            x == y,
            "weight {k} differs after training with the convolution stored"
        );
    }
    let mut d = model();
    let pooled_run = train(&mut d);
    for (k, (x, y)) in pooled_run.iter().zip(&fused_run).enumerate() {
        for (&p, &q) in x.iter().zip(y) {
            let (p, q) = (f32::from_bits(p), f32::from_bits(q));
            assert!(
                (p - q).abs() <= 1e-4 * (1.0 + q.abs()),
                "weight {k}: {p} against {q} after training with the gradients from the pooled cotangent"
            );
        }
    }
}

/// `m` fitted for two epochs at batch 32 on `rows` (the batch first) of random images and
/// labels: its weights and its predictions, as bits.
fn trained_bits<A: crate::nn::Architecture>(m: &mut Model<A>, rows: &[usize]) -> Vec<Vec<u32>> {
    use crate::loss::SparseCategoricalCrossentropy;
    use crate::metrics::Accuracy;
    use crate::train::Fit;
    let x = crate::random::normal(rows, 0.0, 1.0, 5).unwrap();
    let y = crate::random::uniform_int(&rows[..1], 0, 10, 6).unwrap();
    m.compile(
        crate::optim::Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m.fit(&x, &y, Fit::epochs(2).batch_size(32).verbose(0))
        .unwrap();
    let bits = |t: &crate::Tensor| -> Vec<u32> {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let p = m.predict(&x).unwrap();
    let mut all: Vec<Vec<u32>> = m.weights().iter().map(|(_, t)| bits(t)).collect();
    all.push(bits(&p));
    all
}

/// The `cnn` workload's own layers, whose second convolution runs on Winograd's tiles:
/// its pooling is computed inside the forward's tiles (`native::conv_pool`) and its kernel,
/// input and bias gradients come from the pooled cotangent (`native::conv_pool_grad`), as
/// the first layer's do on the direct kernel. Training with the fused forward is training
/// without it, bit for bit; with the gradients from the pooled cotangent (the bias
/// gradients sum in another order), within rounding.
#[test]
fn the_cnn_layers_train_the_same_with_their_poolings_inside_the_convolutions() {
    use crate::backend::native::testing::{without_conv_pool, without_conv_pool_grad};
    use crate::nn::{Activation, Conv2D, Dense, Flatten, MaxPooling2D, Sequential};
    let model = || {
        Model::new(Sequential::new(
            Some(vec![28, 28, 1]),
            vec![
                Box::new(Conv2D::new("conv", 32, [3, 3], Activation::Relu)),
                Box::new(MaxPooling2D::new("pool", [2, 2])),
                Box::new(Conv2D::new("conv_1", 64, [3, 3], Activation::Relu)),
                Box::new(MaxPooling2D::new("pool_1", [2, 2])),
                Box::new(Flatten::new("flat")),
                Box::new(Dense::new("out", 10, Activation::Softmax)),
            ],
        ))
    };
    let banded = usize::from(crate::kernel::conv_direct::thin(1, 9));
    let fused = train_step_plan(model(), &[28, 28, 1]);
    let stored = without_conv_pool(|| train_step_plan(model(), &[28, 28, 1]));
    let dense = without_conv_pool_grad(|| train_step_plan(model(), &[28, 28, 1]));
    // Both convolutions inside their poolings; the second layer's kernel, input and bias
    // gradients (and the first's kernel and bias gradients, on the direct kernel) from
    // the pooled cotangents, neither convolution output's cotangent computed.
    assert_eq!(fused.conv_pools, 1 + banded, "{fused:#?}");
    assert_eq!(fused.pooled_grads, 3 + 2 * banded, "{fused:#?}");
    assert_eq!(
        fused.steps + 1 + banded,
        stored.steps,
        "{fused:#?} {stored:#?}"
    );
    assert_eq!(
        fused.steps + 1 + banded,
        dense.steps,
        "{fused:#?} {dense:#?}"
    );
    let rows = [40, 28, 28, 1];
    let (mut a, mut b, mut c) = (model(), model(), model());
    let forward_fused = without_conv_pool_grad(|| trained_bits(&mut a, &rows));
    let plain = without_conv_pool(|| without_conv_pool_grad(|| trained_bits(&mut b, &rows)));
    assert!(forward_fused == plain, "the fused forward trains otherwise");
    let all_fused = trained_bits(&mut c, &rows);
    for (k, (x, y)) in all_fused.iter().zip(&plain).enumerate() {
        for (&p, &q) in x.iter().zip(y) {
            let (p, q) = (f32::from_bits(p), f32::from_bits(q));
            assert!(
                (p - q).abs() <= 1e-4 * (1.0 + q.abs()),
                "weight {k}: {p} against {q} with the gradients from the pooled cotangents"
            );
        }
    }
}

/// A batch-normalized convnet (a convolution without bias, then BatchNormalization, ReLU
/// and max pooling, as `strata-bench bncnn`): its scale gradients are sums of products
/// (`backend::native::sum_of_products`), and training gives the same weights, bit for bit,
/// as the plan that writes the products out.
#[test]
fn a_batch_normalized_convnet_trains_to_the_same_bits_with_sums_of_products() {
    use crate::backend::native::testing::without_sum_of_products;
    use crate::loss::SparseCategoricalCrossentropy;
    use crate::nn::{
        Activation, ActivationLayer, BatchNormalization, Conv2D, Dense, Flatten, MaxPooling2D,
        Sequential,
    };
    use crate::train::Fit;
    let train = || {
        let mut conv = Conv2D::new("conv", 8, [3, 3], Activation::Linear);
        conv.use_bias = false;
        let mut model = Model::new(Sequential::new(
            Some(vec![14, 14, 1]),
            vec![
                Box::new(conv),
                Box::new(BatchNormalization::new("bn")),
                Box::new(ActivationLayer::new("relu", Activation::Relu)),
                Box::new(MaxPooling2D::new("pool", [2, 2])),
                Box::new(Flatten::new("flat")),
                Box::new(Dense::new("out", 10, Activation::Softmax)),
            ],
        ));
        let x = crate::random::normal(&[256, 14, 14, 1], 0.5, 1.0, 0).unwrap();
        let y = crate::random::uniform_int(&[256], 0, 10, 1).unwrap();
        model
            .compile(
                crate::optim::Adam::default(),
                SparseCategoricalCrossentropy::default(),
                [crate::metrics::Accuracy],
            )
            .unwrap();
        take_plans();
        model
            .fit(&x, &y, Fit::epochs(2).batch_size(128).verbose(0))
            .unwrap();
        let sums: usize = take_plans()
            .iter()
            .filter(|(s, _)| s.graph == "train_step")
            .map(|(s, _)| s.sums_of_products)
            .sum();
        (model.weights(), sums)
    };
    let (fused, sums) = train();
    // The scale's gradient, in the one train step (the batches are whole).
    assert_eq!(sums, 1);
    let (plain, none) = without_sum_of_products(train);
    assert_eq!(none, 0);
    for ((name, a), (_, b)) in fused.iter().zip(&plain) {
        let bits = |t: &crate::Tensor| -> Vec<u32> {
            t.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(bits(a), bits(b), "{name}");
    }
}
