//! The layer catalogue on the native backend: every layer's forward pass against outputs
//! computed by hand, training against inference behaviour, and the typed errors of shape
//! rules given inputs they cannot take.

use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::Backend;
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::nn::*;
use strata_runtime::Tensor;

fn t(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}

fn iota(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    t(dims, &(1..=n).map(|v| v as f32).collect::<Vec<_>>())
}

/// One forward pass of `layer`: the output, then the new value of each updated state
/// parameter (in the order the layer recorded them).
fn run(layer: &dyn Layer, training: bool, x: Tensor, params: Vec<Tensor>) -> Vec<Tensor> {
    let mut g = Graph::new("layer");
    let xv = g.parameter(x.ty());
    let pv: Vec<_> = params.iter().map(|p| g.parameter(p.ty())).collect();
    let key = g.parameter(TensorType::new(DType::I32, [2]));
    let mut cx = Forward::new(&mut g, training, Some(key));
    let y = layer.forward(&mut cx, xv, &pv).unwrap();
    let mut outputs = vec![y];
    for &(param, new) in cx.updates() {
        assert!(pv.contains(&param), "updates must target parameters");
        outputs.push(new);
    }
    g.set_outputs(outputs).unwrap();
    // The layer's shape rule must give the shape its forward pass produces.
    let rule = layer.output_shape(&x.dims()[1..]).unwrap();
    assert_eq!(&g.ty(y).dims()[1..], rule.as_slice(), "{layer:?}");
    let mut inputs = vec![x];
    inputs.extend(params);
    inputs.push(Tensor::from_vec(&[2], vec![7i32, 11]).unwrap());
    NativeBackend::new().run(&g, &inputs).unwrap()
}

fn infer(layer: &dyn Layer, x: Tensor, params: Vec<Tensor>) -> Tensor {
    run(layer, false, x, params).remove(0)
}

#[track_caller]
fn assert_close(got: &Tensor, want: &Tensor) {
    assert_eq!(got.dims(), want.dims(), "shape of {got:?}");
    let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    for (a, b) in g.iter().zip(&w) {
        assert!(
            (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
            "got {g:?}, want {w:?}"
        );
    }
}

#[test]
fn flatten_folds_every_axis_but_the_batch() {
    let f = Flatten::new("flatten");
    let y = infer(&f, iota(&[2, 2, 3]), vec![]);
    assert_eq!(y, iota(&[2, 6]));
    assert_eq!(f.output_shape(&[2, 3]).unwrap(), [6]);
    assert_eq!(f.output_shape(&[]).unwrap(), [1]);
    assert!(f.params(&[2, 3]).unwrap().is_empty());
}

#[test]
fn reshape_rearranges_and_infers_one_axis() {
    let r = Reshape::new("reshape", vec![3, 2]);
    assert_eq!(infer(&r, iota(&[1, 6]), vec![]), iota(&[1, 3, 2]));
    let inferred = Reshape::new("reshape", vec![-1, 3]);
    assert_eq!(inferred.output_shape(&[2, 3]).unwrap(), [2, 3]);
    assert_eq!(infer(&inferred, iota(&[2, 2, 3]), vec![]), iota(&[2, 2, 3]));
    let e = Reshape::new("reshape", vec![4, 2])
        .output_shape(&[6])
        .unwrap_err();
    assert!(e.to_string().contains("8 element(s)"), "{e}");
    assert!(Reshape::new("r", vec![-1, 4]).output_shape(&[6]).is_err());
    assert!(Reshape::new("r", vec![-1, -1]).output_shape(&[6]).is_err());
    assert!(Reshape::new("r", vec![0, 6]).output_shape(&[6]).is_err());
}

#[test]
fn dropout_drops_in_training_only() {
    let d = Dropout::new("dropout", 0.25);
    let x = t(&[1, 4000], &[1.0; 4000]);
    assert_eq!(infer(&d, x.clone(), vec![]), x, "inference: identity");
    let y = run(&d, true, x.clone(), vec![])
        .remove(0)
        .to_vec::<f32>()
        .unwrap();
    let scale = 1.0 / 0.75;
    assert!(y.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6));
    let dropped = y.iter().filter(|&&v| v == 0.0).count() as f64 / y.len() as f64;
    assert!((dropped - 0.25).abs() < 0.03, "dropped {dropped}");
    // Inverted dropout keeps the expected value.
    let mean = y.iter().sum::<f32>() / y.len() as f32;
    assert!((mean - 1.0).abs() < 0.05, "{mean}");
    assert_eq!(
        run(&d, true, x.clone(), vec![])
            .remove(0)
            .to_vec::<f32>()
            .unwrap(),
        y,
        "same key, same mask"
    );
    assert!(Dropout::new("d", 1.0).output_shape(&[3]).is_err());
    assert!(Dropout::new("d", -0.1).output_shape(&[3]).is_err());
}

#[test]
fn dropout_in_training_needs_a_key() {
    let mut g = Graph::new("no key");
    let x = g.parameter(TensorType::new(DType::F32, [1, 3]));
    let mut cx = Forward::new(&mut g, true, None);
    assert!(Dropout::new("d", 0.5).forward(&mut cx, x, &[]).is_err());
}

fn ones_2x2_kernel() -> Tensor {
    t(&[2, 2, 1, 1], &[1.0; 4])
}

#[test]
fn conv2d_valid_same_strided_dilated() {
    // x = 1..9 as a 3x3 image; a 2x2 kernel of ones sums each window.
    let x = iota(&[1, 3, 3, 1]);
    let mut c = Conv2D::new("conv2d", 1, [2, 2], Activation::Linear);
    let y = infer(&c, x.clone(), vec![ones_2x2_kernel(), t(&[1], &[1.0])]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[13.0, 17.0, 25.0, 29.0]));

    // Same padding, stride 1: one row and column of zeros after the image.
    c.padding = Padding::Same;
    assert_eq!(c.output_shape(&[3, 3, 1]).unwrap(), [3, 3, 1]);
    let y = infer(&c, x.clone(), vec![ones_2x2_kernel(), t(&[1], &[0.0])]);
    let want = [12.0, 16.0, 9.0, 24.0, 28.0, 15.0, 15.0, 17.0, 9.0];
    assert_close(&y, &t(&[1, 3, 3, 1], &want));

    // Same padding, stride 2: ceil(3 / 2) = 2 positions.
    c.strides = [2, 2];
    let y = infer(&c, x.clone(), vec![ones_2x2_kernel(), t(&[1], &[0.0])]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[12.0, 9.0, 15.0, 9.0]));

    // Dilation 2: the 2x2 kernel spans 3x3 and sees the four corners.
    let mut d = Conv2D::new("conv2d", 1, [2, 2], Activation::Linear);
    d.dilation_rate = [2, 2];
    d.use_bias = false;
    assert_eq!(d.params(&[3, 3, 1]).unwrap().len(), 1);
    let y = infer(&d, x, vec![ones_2x2_kernel()]);
    assert_close(&y, &t(&[1, 1, 1, 1], &[20.0]));
}

#[test]
fn conv2d_groups_and_activation() {
    // Two channels, two groups, 1x1 kernel: each output channel sees one input channel.
    let mut c = Conv2D::new("conv2d", 2, [1, 1], Activation::Relu);
    c.groups = 2;
    let p = c.params(&[1, 2, 2]).unwrap();
    assert_eq!(p[0].dims, [1, 1, 1, 2]);
    assert_eq!((p[0].fan_in, p[0].fan_out), (1, 2));
    let x = t(&[1, 1, 2, 2], &[1.0, -1.0, -2.0, 4.0]);
    let y = infer(
        &c,
        x,
        vec![t(&[1, 1, 1, 2], &[2.0, 3.0]), t(&[2], &[0.0, 0.0])],
    );
    // channel 0: 2·[1, -2] → relu [2, 0]; channel 1: 3·[-1, 4] → relu [0, 12]
    assert_close(&y, &t(&[1, 1, 2, 2], &[2.0, 0.0, 0.0, 12.0]));
}

#[test]
fn conv2d_params_follow_keras() {
    let c = Conv2D::new("conv2d", 32, [3, 3], Activation::Relu);
    let p = c.params(&[28, 28, 1]).unwrap();
    assert_eq!(p[0].name, "conv2d/kernel");
    assert_eq!(p[0].dims, [3, 3, 1, 32]);
    assert_eq!((p[0].fan_in, p[0].fan_out), (9, 288));
    assert_eq!(p[1].name, "conv2d/bias");
    assert_eq!(p[1].dims, [32]);
    assert_eq!(c.output_shape(&[28, 28, 1]).unwrap(), [26, 26, 32]);
}

#[test]
fn conv2d_rejects_what_keras_rejects() {
    let c = Conv2D::new("conv2d", 4, [3, 3], Activation::Relu);
    let e = c.output_shape(&[784]).unwrap_err().to_string();
    assert!(e.contains("conv2d (Conv2D)") && e.contains("rank 3"), "{e}");
    assert!(
        c.output_shape(&[2, 2, 1]).is_err(),
        "valid kernel larger than input"
    );
    let mut g = Conv2D::new("conv2d", 4, [1, 1], Activation::Relu);
    g.groups = 2;
    assert!(
        g.output_shape(&[4, 4, 3]).is_err(),
        "3 channels in 2 groups"
    );
    g.groups = 3;
    assert!(g.output_shape(&[4, 4, 3]).is_err(), "4 filters in 3 groups");
    let mut s = Conv2D::new("conv2d", 4, [3, 3], Activation::Relu);
    s.strides = [2, 2];
    s.dilation_rate = [2, 2];
    assert!(s.output_shape(&[9, 9, 1]).is_err());
    assert!(Conv2D::new("c", 0, [3, 3], Activation::Relu)
        .output_shape(&[9, 9, 1])
        .is_err());
    assert!(Conv2D::new("c", 1, [0, 3], Activation::Relu)
        .output_shape(&[9, 9, 1])
        .is_err());
}

#[test]
fn max_pooling2d_valid_same_and_strides() {
    let p = MaxPooling2D::new("max_pooling2d", [2, 2]);
    let y = infer(&p, iota(&[1, 4, 4, 1]), vec![]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[6.0, 8.0, 14.0, 16.0]));

    // Same padding on 3x3: windows {0,1} and {2}; padding never wins, even over negatives.
    let mut same = MaxPooling2D::new("max_pooling2d", [2, 2]);
    same.padding = Padding::Same;
    let neg = t(
        &[1, 3, 3, 1],
        &(1..=9).map(|v| -(v as f32)).collect::<Vec<_>>(),
    );
    let y = infer(&same, neg, vec![]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[-1.0, -3.0, -7.0, -9.0]));

    let mut overlapping = MaxPooling2D::new("max_pooling2d", [2, 2]);
    overlapping.strides = Some([1, 1]);
    let y = infer(&overlapping, iota(&[1, 3, 3, 1]), vec![]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[5.0, 6.0, 8.0, 9.0]));

    assert!(
        p.output_shape(&[1, 1, 3]).is_err(),
        "window larger than input"
    );
    assert!(p.output_shape(&[16]).is_err(), "rank 1");
    assert!(MaxPooling2D::new("m", [0, 2])
        .output_shape(&[4, 4, 1])
        .is_err());
}

#[test]
fn average_pooling2d_counts_only_real_elements() {
    let p = AveragePooling2D::new("average_pooling2d", [2, 2]);
    let y = infer(&p, iota(&[1, 4, 4, 1]), vec![]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[3.5, 5.5, 11.5, 13.5]));

    // Same padding on 3x3: the border windows hold 2, 2 and 1 real elements.
    let mut same = AveragePooling2D::new("average_pooling2d", [2, 2]);
    same.padding = Padding::Same;
    let y = infer(&same, iota(&[1, 3, 3, 1]), vec![]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[3.0, 4.5, 7.5, 9.0]));
    assert!(p.output_shape(&[1, 4, 1]).is_err());
}

#[test]
fn global_average_pooling2d_means_each_channel() {
    let x = t(&[1, 2, 2, 2], &[1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0]);
    let mut p = GlobalAveragePooling2D::new("global_average_pooling2d");
    assert_close(&infer(&p, x.clone(), vec![]), &t(&[1, 2], &[2.5, 25.0]));
    p.keepdims = true;
    assert_eq!(p.output_shape(&[2, 2, 2]).unwrap(), [1, 1, 2]);
    assert_close(&infer(&p, x, vec![]), &t(&[1, 1, 1, 2], &[2.5, 25.0]));
    assert!(p.output_shape(&[8]).is_err());
}

#[test]
fn global_max_pooling2d_takes_each_channels_maximum() {
    // Channel 0 peaks at the first position, channel 1 at the last; negatives throughout
    // would show a padding or zero identity winning.
    let x = t(
        &[2, 2, 2, 2],
        &[
            4.0, -10.0, 1.0, -20.0, 2.0, -30.0, 3.0, -5.0, //
            -1.0, 0.5, -2.0, 0.25, -3.0, 0.75, -4.0, 1.5,
        ],
    );
    let mut p = GlobalMaxPooling2D::new("global_max_pooling2d");
    assert_eq!(p.output_shape(&[2, 2, 2]).unwrap(), [2]);
    assert_close(
        &infer(&p, x.clone(), vec![]),
        &t(&[2, 2], &[4.0, -5.0, -1.0, 1.5]),
    );
    p.keepdims = true;
    assert_eq!(p.output_shape(&[2, 2, 2]).unwrap(), [1, 1, 2]);
    assert_close(
        &infer(&p, x, vec![]),
        &t(&[2, 1, 1, 2], &[4.0, -5.0, -1.0, 1.5]),
    );
    let e = p.output_shape(&[8]).unwrap_err().to_string();
    assert!(
        e.contains("global_max_pooling2d (GlobalMaxPooling2D)")
            && e.contains("expected input of shape (height, width, channels) (rank 3)"),
        "{e}"
    );
    assert!(p.params(&[5, 5, 3]).unwrap().is_empty());
}

#[test]
fn batch_normalization_training_updates_moving_statistics() {
    let bn = BatchNormalization::new("batch_normalization");
    let p = bn.params(&[2]).unwrap();
    let names: Vec<_> = p.iter().map(|p| (p.name.as_str(), p.trainable)).collect();
    assert_eq!(
        names,
        [
            ("batch_normalization/gamma", true),
            ("batch_normalization/beta", true),
            ("batch_normalization/moving_mean", false),
            ("batch_normalization/moving_variance", false),
        ]
    );
    // Feature 0: 1, 2, 3, 4 (mean 2.5, biased variance 1.25); feature 1: constant 0.
    let x = t(&[4, 2], &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0]);
    let params = vec![
        t(&[2], &[2.0, 1.0]),
        t(&[2], &[0.5, 0.0]),
        t(&[2], &[0.0, 0.0]),
        t(&[2], &[1.0, 1.0]),
    ];
    let out = run(&bn, true, x.clone(), params.clone());
    let s = 2.0 / (1.25f32 + 1e-3).sqrt();
    let want: Vec<f32> = [1.0, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| [(v - 2.5) * s + 0.5, 0.0])
        .collect();
    assert_close(&out[0], &t(&[4, 2], &want));
    assert_close(&out[1], &t(&[2], &[0.025, 0.0]));
    assert_close(&out[2], &t(&[2], &[0.99 + 0.0125, 0.99]));

    // Inference: the moving statistics, no updates.
    let mut params = params;
    params[2] = t(&[2], &[1.0, 0.0]);
    params[3] = t(&[2], &[4.0, 1.0]);
    let out = run(&bn, false, x, params);
    assert_eq!(out.len(), 1, "inference updates nothing");
    let s = 2.0 / (4.0f32 + 1e-3).sqrt();
    let want: Vec<f32> = [1.0, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| [(v - 1.0) * s + 0.5, 0.0])
        .collect();
    assert_close(&out[0], &t(&[4, 2], &want));
}

#[test]
fn batch_normalization_axis_and_options() {
    let mut bn = BatchNormalization::new("bn");
    bn.axis = 1;
    bn.center = false;
    bn.scale = false;
    assert_eq!(bn.params(&[3, 5]).unwrap()[0].dims, [3]);
    assert_eq!(bn.params(&[3, 5]).unwrap().len(), 2);
    // Axis 1 of [batch, 2, 2]: feature f is x[:, f, :].
    let x = t(&[1, 2, 2], &[1.0, 3.0, 10.0, 10.0]);
    let out = run(&bn, true, x, vec![t(&[2], &[0.0; 2]), t(&[2], &[1.0; 2])]);
    let s = 1.0 / (1.0f32 + 1e-3).sqrt();
    assert_close(&out[0], &t(&[1, 2, 2], &[-s, s, 0.0, 0.0]));
    assert!(bn.output_shape(&[]).is_err(), "no feature axis");
    bn.axis = 0;
    assert!(bn.output_shape(&[3]).is_err(), "the batch axis");
    bn.axis = -3;
    assert!(bn.output_shape(&[3]).is_err());
    let mut m = BatchNormalization::new("bn");
    m.momentum = 1.5;
    assert!(m.output_shape(&[3]).is_err());
}

#[test]
fn layer_normalization_normalises_each_example() {
    let ln = LayerNormalization::new("layer_normalization");
    let p = ln.params(&[4]).unwrap();
    assert_eq!(p.len(), 2);
    assert!(p.iter().all(|p| p.trainable && p.dims == [4]));
    let x = t(&[2, 4], &[1.0, 2.0, 3.0, 4.0, 2.0, 2.0, 2.0, 2.0]);
    let gamma = t(&[4], &[1.0, 1.0, 2.0, 2.0]);
    let beta = t(&[4], &[0.0, 0.0, 0.0, 1.0]);
    let s = 1.0 / (1.25f32 + 1e-3).sqrt();
    let want = [
        -1.5 * s,
        -0.5 * s,
        0.5 * s * 2.0,
        1.5 * s * 2.0 + 1.0,
        0.0,
        0.0,
        0.0,
        1.0,
    ];
    for training in [false, true] {
        let out = run(&ln, training, x.clone(), vec![gamma.clone(), beta.clone()]);
        assert_eq!(out.len(), 1);
        assert_close(&out[0], &t(&[2, 4], &want));
    }
    assert!(ln.output_shape(&[]).is_err());
}

#[test]
fn embedding_looks_up_integer_ids() {
    let e = Embedding::new("embedding", 3, 2);
    assert_eq!(e.input_dtype(), DType::I32);
    assert_eq!(e.output_shape(&[5]).unwrap(), [5, 2]);
    let p = e.params(&[5]).unwrap();
    assert_eq!(
        (p[0].name.as_str(), &p[0].dims[..]),
        ("embedding/embeddings", &[3, 2][..])
    );
    assert_eq!(p[0].init, Initializer::RandomUniform);
    let table = t(&[3, 2], &[0.0, 1.0, 10.0, 11.0, 20.0, 21.0]);
    let ids = Tensor::from_vec(&[1, 2], vec![2i32, 0]).unwrap();
    let y = infer(&e, ids, vec![table]);
    assert_close(&y, &t(&[1, 2, 2], &[20.0, 21.0, 0.0, 1.0]));
    assert!(Embedding::new("e", 0, 2).output_shape(&[5]).is_err());
}

#[test]
fn random_uniform_initializer_is_keras_uniform() {
    let mut rng = strata_runtime::random::Rng::new(3);
    let w = Initializer::RandomUniform
        .sample(&[1000], 1, 1, &mut rng)
        .unwrap();
    assert!(w.iter().all(|v| v.abs() <= 0.05));
    assert!(w.iter().any(|v| v.abs() > 0.045));
    assert_eq!(
        Initializer::from_name("uniform"),
        Some(Initializer::RandomUniform)
    );
}

#[test]
fn activation_layer_applies_and_marks_softmax_logits() {
    let a = ActivationLayer::new("activation", Activation::Relu);
    assert_eq!(a.class(), "Activation");
    let y = infer(&a, t(&[1, 3], &[-1.0, 0.0, 2.0]), vec![]);
    assert_eq!(y, t(&[1, 3], &[0.0, 0.0, 2.0]));

    let s = ActivationLayer::new("activation", Activation::Softmax);
    let mut g = Graph::new("softmax");
    let x = g.parameter(TensorType::new(DType::F32, [1, 3]));
    let mut cx = Forward::new(&mut g, false, None);
    let y = s.forward(&mut cx, x, &[]).unwrap();
    assert_eq!(cx.logits_of(y), Some(x));
}

#[test]
fn conv1d_valid_same_dilated_and_grouped() {
    // x = 1..5 along the steps; a kernel of ones sums each window.
    let x = iota(&[1, 5, 1]);
    let mut c = Conv1D::new("conv1d", 1, 3, Activation::Linear);
    assert_eq!(c.params(&[5, 1]).unwrap()[0].dims, [3, 1, 1]);
    let ones = t(&[3, 1, 1], &[1.0; 3]);
    let y = infer(&c, x.clone(), vec![ones.clone(), t(&[1], &[1.0])]);
    assert_close(&y, &t(&[1, 3, 1], &[7.0, 10.0, 13.0]));

    // Same, stride 2: ceil(5 / 2) = 3 windows, one zero at each end.
    c.padding = Padding::Same;
    c.strides = 2;
    let y = infer(&c, x.clone(), vec![ones, t(&[1], &[0.0])]);
    assert_close(&y, &t(&[1, 3, 1], &[3.0, 9.0, 9.0]));

    // Dilation 2: taps at steps 0, 2 and 4.
    c.padding = Padding::Valid;
    c.strides = 1;
    c.dilation_rate = 2;
    let k = t(&[3, 1, 1], &[1.0, 10.0, 100.0]);
    let y = infer(&c, x, vec![k, t(&[1], &[0.0])]);
    assert_close(&y, &t(&[1, 1, 1], &[531.0]));

    // Two groups: each filter sees its own channel; relu applies.
    let mut g = Conv1D::new("conv1d", 2, 1, Activation::Relu);
    g.groups = 2;
    g.use_bias = false;
    assert_eq!(g.params(&[2, 2]).unwrap()[0].dims, [1, 1, 2]);
    let x = t(&[1, 2, 2], &[1.0, -1.0, 2.0, 3.0]);
    let y = infer(&g, x, vec![t(&[1, 1, 2], &[2.0, 3.0])]);
    assert_close(&y, &t(&[1, 2, 2], &[2.0, 0.0, 4.0, 9.0]));

    let e = c.output_shape(&[5]).unwrap_err().to_string();
    assert!(
        e.contains("conv1d (Conv1D)") && e.contains("(steps, channels) (rank 2)"),
        "{e}"
    );
    let e = c.output_shape(&[4, 1]).unwrap_err().to_string();
    assert!(e.contains("at least 5 in steps for a 5 window"), "{e}");
}

#[test]
fn conv1d_causal_sees_no_later_step() {
    // Causal pads (window - 1) zeros at the start: y[t] = x[t - 2] + 10 x[t - 1] + 100 x[t].
    let x = iota(&[1, 5, 1]);
    let k = t(&[3, 1, 1], &[1.0, 10.0, 100.0]);
    let mut c = Conv1D::new("conv1d", 1, 3, Activation::Linear);
    c.padding = Padding::Causal;
    c.use_bias = false;
    let y = infer(&c, x.clone(), vec![k.clone()]);
    assert_close(&y, &t(&[1, 5, 1], &[100.0, 210.0, 321.0, 432.0, 543.0]));
    // Dilated: taps two steps apart, four zeros of padding.
    c.dilation_rate = 2;
    let y = infer(&c, x.clone(), vec![k.clone()]);
    assert_close(&y, &t(&[1, 5, 1], &[100.0, 200.0, 310.0, 420.0, 531.0]));
    // Strided: ceil(5 / 2) outputs, at steps 0, 2 and 4.
    c.dilation_rate = 1;
    c.strides = 2;
    let y = infer(&c, x, vec![k]);
    assert_close(&y, &t(&[1, 3, 1], &[100.0, 321.0, 543.0]));

    // Keras refuses causal padding anywhere else.
    let mut c2 = Conv2D::new("conv2d", 1, [3, 3], Activation::Linear);
    c2.padding = Padding::Causal;
    let e = c2.output_shape(&[5, 5, 1]).unwrap_err().to_string();
    assert_eq!(
        e,
        "conv2d (Conv2D): `causal` padding is only for Conv1D; use `valid` or `same`"
    );
    let mut p = MaxPooling1D::new("max_pooling1d", 2);
    p.padding = Padding::Causal;
    assert!(p.output_shape(&[5, 1]).is_err());
}

#[test]
fn pooling1d_max_and_average() {
    let x = t(&[1, 5, 1], &[3.0, -1.0, 4.0, -1.0, 5.0]);
    let mut m = MaxPooling1D::new("max_pooling1d", 2);
    assert_close(&infer(&m, x.clone(), vec![]), &t(&[1, 2, 1], &[3.0, 4.0]));
    m.padding = Padding::Same;
    assert_close(
        &infer(&m, x.clone(), vec![]),
        &t(&[1, 3, 1], &[3.0, 4.0, 5.0]),
    );
    m.padding = Padding::Valid;
    m.strides = Some(1);
    let want = t(&[1, 4, 1], &[3.0, 4.0, 4.0, 5.0]);
    assert_close(&infer(&m, x, vec![]), &want);

    let x = iota(&[1, 5, 1]);
    let mut a = AveragePooling1D::new("average_pooling1d", 2);
    assert_close(&infer(&a, x.clone(), vec![]), &t(&[1, 2, 1], &[1.5, 3.5]));
    // The last window holds one real step: its mean is that step.
    a.padding = Padding::Same;
    let want = t(&[1, 3, 1], &[1.5, 3.5, 5.0]);
    assert_close(&infer(&a, x.clone(), vec![]), &want);
    a.pool_size = 3;
    a.strides = Some(1);
    let want = t(&[1, 5, 1], &[1.5, 2.0, 3.0, 4.0, 4.5]);
    assert_close(&infer(&a, x, vec![]), &want);
    assert!(a.params(&[5, 1]).unwrap().is_empty());
    assert!(MaxPooling1D::new("p", 3).output_shape(&[2, 1]).is_err());
    assert!(MaxPooling1D::new("p", 2).output_shape(&[4, 4, 1]).is_err());
}

#[test]
fn global_pooling1d_mean_and_max_of_each_channel() {
    let x = t(
        &[2, 3, 2],
        &[
            1.0, -6.0, 2.0, -5.0, 6.0, -7.0, 0.0, 1.0, 0.0, 2.0, 3.0, 3.0,
        ],
    );
    let mut gap = GlobalAveragePooling1D::new("global_average_pooling1d");
    let want = t(&[2, 2], &[3.0, -6.0, 1.0, 2.0]);
    assert_close(&infer(&gap, x.clone(), vec![]), &want);
    gap.keepdims = true;
    assert_eq!(gap.output_shape(&[3, 2]).unwrap(), [1, 2]);
    let want = t(&[2, 1, 2], &[3.0, -6.0, 1.0, 2.0]);
    assert_close(&infer(&gap, x.clone(), vec![]), &want);
    let gmp = GlobalMaxPooling1D::new("global_max_pooling1d");
    let want = t(&[2, 2], &[6.0, -5.0, 3.0, 3.0]);
    assert_close(&infer(&gmp, x, vec![]), &want);
    let e = gmp.output_shape(&[3, 3, 2]).unwrap_err().to_string();
    assert!(e.contains("(steps, channels) (rank 2)"), "{e}");
}

/// A `[2, 2, 2, 2]` depthwise kernel: channel 0 times 1 and 2, channel 1 times 3 and -1.
fn depthwise_kernel() -> Tensor {
    t(&[2, 2, 2, 2], &[1.0, 2.0, 3.0, -1.0].repeat(4))
}

#[test]
fn depthwise_conv2d_keeps_channels_apart() {
    // Channel 0 holds the odd numbers 1..17, channel 1 the even ones; the 2x2 window sums
    // of channel 0 are 20, 28, 44, 52, of channel 1 four more each.
    let x = iota(&[1, 3, 3, 2]);
    let mut d = DepthwiseConv2D::new("depthwise_conv2d", [2, 2], Activation::Linear);
    d.depth_multiplier = 2;
    let specs = d.params(&[3, 3, 2]).unwrap();
    assert_eq!(specs[0].name, "depthwise_conv2d/kernel");
    assert_eq!(specs[0].dims, [2, 2, 2, 2]);
    assert_eq!(specs[1].dims, [4]);
    assert_eq!((specs[0].fan_in, specs[0].fan_out), (8, 8));
    let y = infer(&d, x.clone(), vec![depthwise_kernel(), t(&[4], &[0.0; 4])]);
    let want = [
        20.0, 40.0, 72.0, -24.0, 28.0, 56.0, 96.0, -32.0, //
        44.0, 88.0, 144.0, -48.0, 52.0, 104.0, 168.0, -56.0,
    ];
    assert_close(&y, &t(&[1, 2, 2, 4], &want));
    d.padding = Padding::Same;
    d.strides = [2, 2];
    assert_eq!(d.output_shape(&[3, 3, 2]).unwrap(), [2, 2, 4]);

    // Strided and dilated together (Keras 3 allows it here): a 2x2 kernel dilated to
    // 3x3 over a 5x5 image in steps of 2 picks the corners of each 3x3 window.
    let mut a = DepthwiseConv2D::new("depthwise_conv2d", [2, 2], Activation::Linear);
    a.strides = [2, 2];
    a.dilation_rate = [2, 2];
    a.use_bias = false;
    let y = infer(&a, iota(&[1, 5, 5, 1]), vec![t(&[2, 2, 1, 1], &[1.0; 4])]);
    // Corners of the window at (0, 0): 1 + 3 + 11 + 13.
    let want = [28.0, 36.0, 68.0, 76.0];
    assert_close(&y, &t(&[1, 2, 2, 1], &want));
    assert!(d.output_shape(&[3, 3]).is_err());
}

#[test]
fn separable_conv2d_is_depthwise_then_pointwise() {
    let x = iota(&[1, 3, 3, 2]);
    let mut s = SeparableConv2D::new("separable_conv2d", 1, [2, 2], Activation::Linear);
    s.depth_multiplier = 2;
    let specs = s.params(&[3, 3, 2]).unwrap();
    let names: Vec<&str> = specs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "separable_conv2d/depthwise_kernel",
            "separable_conv2d/pointwise_kernel",
            "separable_conv2d/bias"
        ]
    );
    assert_eq!(specs[1].dims, [1, 1, 4, 1]);
    // The pointwise kernel of ones adds the four depthwise channels.
    let params = vec![
        depthwise_kernel(),
        t(&[1, 1, 4, 1], &[1.0; 4]),
        t(&[1], &[0.5]),
    ];
    let y = infer(&s, x, params);
    assert_close(&y, &t(&[1, 2, 2, 1], &[108.5, 148.5, 228.5, 268.5]));
}

#[test]
fn conv2d_transpose_spreads_each_pixel_over_the_kernel() {
    // Stride 2 with a 2x2 kernel: each pixel becomes its own 2x2 block, the kernel
    // unflipped (out[2p + i] += x[p] · k[i]).
    let x = t(&[1, 2, 2, 1], &[1.0, 2.0, 3.0, 4.0]);
    let mut c = Conv2DTranspose::new("conv2d_transpose", 1, [2, 2], Activation::Linear);
    c.strides = [2, 2];
    let k = t(&[2, 2, 1, 1], &[1.0, 10.0, 100.0, 1000.0]);
    let y = infer(&c, x.clone(), vec![k, t(&[1], &[0.0])]);
    let want = [
        1.0, 10.0, 2.0, 20.0, 100.0, 1000.0, 200.0, 2000.0, //
        3.0, 30.0, 4.0, 40.0, 300.0, 3000.0, 400.0, 4000.0,
    ];
    assert_close(&y, &t(&[1, 4, 4, 1], &want));

    // Stride 1: the full convolution, 3x3.
    c.strides = [1, 1];
    let y = infer(&c, x, vec![t(&[2, 2, 1, 1], &[1.0; 4]), t(&[1], &[0.0])]);
    let want = [1.0, 3.0, 2.0, 4.0, 10.0, 6.0, 3.0, 7.0, 4.0];
    assert_close(&y, &t(&[1, 3, 3, 1], &want));

    // One row, a 1x3 kernel, stride 2: valid gives 2·2 + (3 - 2) = 5 columns, same 4
    // (the forward convolution pads nothing before), output padding 1 one more than valid.
    let x = t(&[1, 1, 2, 1], &[1.0, 2.0]);
    let k = t(&[1, 3, 1, 1], &[1.0, 10.0, 100.0]);
    let mut c = Conv2DTranspose::new("conv2d_transpose", 1, [1, 3], Activation::Linear);
    c.strides = [1, 2];
    let run = |c: &Conv2DTranspose| infer(c, x.clone(), vec![k.clone(), t(&[1], &[0.0])]);
    assert_close(
        &run(&c),
        &t(&[1, 1, 5, 1], &[1.0, 10.0, 102.0, 20.0, 200.0]),
    );
    c.padding = Padding::Same;
    assert_close(&run(&c), &t(&[1, 1, 4, 1], &[1.0, 10.0, 102.0, 20.0]));
    c.padding = Padding::Valid;
    c.output_padding = Some([0, 1]);
    let want = t(&[1, 1, 6, 1], &[1.0, 10.0, 102.0, 20.0, 200.0, 0.0]);
    assert_close(&run(&c), &want);

    // Keras' kernel layout (kh, kw, filters, in) and deconv_output_length.
    let mut c = Conv2DTranspose::new("conv2d_transpose", 4, [3, 3], Activation::Relu);
    assert_eq!(c.params(&[5, 5, 2]).unwrap()[0].dims, [3, 3, 4, 2]);
    assert_eq!(c.output_shape(&[5, 5, 2]).unwrap(), [7, 7, 4]);
    c.strides = [2, 2];
    c.padding = Padding::Same;
    assert_eq!(c.output_shape(&[5, 5, 2]).unwrap(), [10, 10, 4]);
    c.output_padding = Some([1, 0]);
    assert_eq!(c.output_shape(&[5, 5, 2]).unwrap(), [10, 9, 4]);
    c.output_padding = Some([2, 0]);
    let e = c.output_shape(&[5, 5, 2]).unwrap_err().to_string();
    assert!(e.contains("must be smaller than `strides`"), "{e}");
}

/// Against the definition by a direct loop, where `same` must split an odd total:
/// `out[s·p + i - before] += x[p] · k[i]`, `before` half of what the full result has over
/// the output (TensorFlow's placement), with an even kernel and output padding.
#[test]
fn conv2d_transpose_same_with_an_even_kernel_matches_the_definition() {
    let x = [0.5f32, -1.0, 2.0];
    let k = [0.25f32, -0.5, 1.5, 2.0];
    for (stride, output_padding) in [(2, None), (3, Some(2)), (2, Some(1))] {
        let mut c = Conv2DTranspose::new("conv2d_transpose", 1, [4, 1], Activation::Linear);
        c.padding = Padding::Same;
        c.strides = [stride, 1];
        c.output_padding = output_padding.map(|p| [p, 0]);
        let out = c.output_shape(&[3, 1, 1]).unwrap()[0];
        let covered = 2 * stride + 4;
        let before = covered.saturating_sub(out) / 2;
        let mut want = vec![0.0f32; out];
        for (p, xv) in x.iter().enumerate() {
            for (i, kv) in k.iter().enumerate() {
                if let Some(o) = (stride * p + i).checked_sub(before) {
                    if o < out {
                        want[o] += xv * kv;
                    }
                }
            }
        }
        let params = vec![t(&[4, 1, 1, 1], &k), t(&[1], &[0.0])];
        let y = infer(&c, t(&[1, 3, 1, 1], &x), params);
        assert_close(&y, &t(&[1, out, 1, 1], &want));
    }
}

#[test]
fn group_normalization_normalises_each_group() {
    // Two steps of four channels in two groups: each group's statistics over its two
    // channels and both steps.
    let x = t(&[1, 2, 4], &[1.0, 2.0, 10.0, 30.0, 3.0, 6.0, 20.0, 0.0]);
    let mut n = GroupNormalization::new("group_normalization");
    n.groups = 2;
    let gamma = [1.0, 2.0, 0.5, 1.0];
    let beta = [0.0, 1.0, 0.0, -1.0];
    let v = x.to_vec::<f32>().unwrap();
    let mut want = vec![0.0; 8];
    for group in 0..2 {
        let idx: Vec<usize> = (0..2)
            .flat_map(|s| (0..2).map(move |c| s * 4 + group * 2 + c))
            .collect();
        let mean = idx.iter().map(|&i| v[i]).sum::<f32>() / 4.0;
        let var = idx.iter().map(|&i| (v[i] - mean).powi(2)).sum::<f32>() / 4.0;
        for &i in &idx {
            let c = i % 4;
            want[i] = (v[i] - mean) / (var + 1e-3).sqrt() * gamma[c] + beta[c];
        }
    }
    let y = infer(&n, x, vec![t(&[4], &gamma), t(&[4], &beta)]);
    assert_close(&y, &t(&[1, 2, 4], &want));
    let names: Vec<String> = n
        .params(&[2, 4])
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(
        names,
        ["group_normalization/gamma", "group_normalization/beta"]
    );
    n.groups = 3;
    let e = n.output_shape(&[2, 4]).unwrap_err().to_string();
    assert!(e.contains("channels divisible by groups (3)"), "{e}");
    assert!(GroupNormalization::new("g").output_shape(&[16]).is_err());
}

/// A struct built by hand is checked against its catalogue entry's ranges, in the words
/// `model!` uses for the same mistake; a shape it cannot take keeps the runtime's words.
#[test]
fn arguments_out_of_range_are_the_catalogues_errors() {
    let e = |r: strata_runtime::Result<Vec<usize>>| r.unwrap_err().to_string();
    assert_eq!(
        e(Dense::new("dense", 0, Activation::Relu).output_shape(&[3])),
        "dense (Dense): `units` must be at least 1, got 0"
    );
    assert_eq!(
        e(Dropout::new("dropout", 1.0).output_shape(&[3])),
        "dropout (Dropout): `rate` must be in [0, 1), got 1.0"
    );
    let mut c = Conv2D::new("conv2d", 4, [3, 3], Activation::Relu);
    c.groups = 3;
    assert_eq!(
        e(c.output_shape(&[9, 9, 3])),
        "conv2d (Conv2D): `filters` (4) must be a multiple of `groups` (3)"
    );
    assert_eq!(
        e(Reshape::new("reshape", vec![-1, -1]).output_shape(&[4])),
        "reshape (Reshape): `target_shape` may infer only one size: at most one -1"
    );
    assert!(
        e(Dense::new("dense", 2, Activation::Relu).output_shape(&[])).starts_with(
            "dense (Dense): expected input of shape [..., features] (rank >= 1), got "
        )
    );
}

#[test]
fn forward_with_the_wrong_parameters_is_an_error() {
    let mut g = Graph::new("bad");
    let x = g.parameter(TensorType::new(DType::F32, [1, 2]));
    let mut cx = Forward::new(&mut g, false, None);
    let d = Dense::new("dense", 2, Activation::Linear);
    assert!(d.forward(&mut cx, x, &[]).is_err());
    assert!(Flatten::new("f").forward(&mut cx, x, &[x]).is_err());
    let bn = BatchNormalization::new("bn");
    assert!(bn.forward(&mut cx, x, &[x]).is_err());
}

/// Every layer is a composition of primitives with gradient rules, so its gradient with
/// respect to the input and every trainable parameter must match central differences.
#[test]
fn layers_are_differentiable() {
    use strata_runtime::autodiff::gradcheck::GradCheck;
    fn f64s(dims: &[usize], seed: u64) -> Tensor {
        let a = strata_runtime::random::normal(dims, 0.0, 1.0, seed).unwrap();
        Tensor::F64(a.mapv(|v| v as f64))
    }
    let mut conv = Conv2D::new("conv2d", 4, [3, 2], Activation::Tanh);
    conv.padding = Padding::Same;
    conv.strides = [2, 1];
    conv.groups = 2;
    let mut max_same = MaxPooling2D::new("max_pooling2d", [2, 2]);
    max_same.padding = Padding::Same;
    let mut avg_same = AveragePooling2D::new("average_pooling2d", [2, 3]);
    avg_same.padding = Padding::Same;
    avg_same.strides = Some([1, 2]);
    let image = [2, 5, 4, 2];
    let mut rescaling = Rescaling::new("rescaling", 0.5);
    rescaling.offset = 1.0;
    let mut softmax_axis1 = Softmax::new("softmax");
    softmax_axis1.axis = 1;
    let softmax_last = Softmax::new("softmax_1");
    let mut relu = ReLU::new("re_lu");
    relu.max_value = Some(1.0);
    relu.negative_slope = 0.1;
    relu.threshold = 0.5;
    let mut prelu = PReLU::new("p_re_lu");
    prelu.shared_axes = Some(vec![1]);
    let mut zero_padding = ZeroPadding2D::new("zero_padding2d");
    zero_padding.padding = [[1, 0], [2, 1]];
    let mut cropping = Cropping2D::new("cropping2d");
    cropping.cropping = [[1, 1], [0, 1]];
    let mut upsampling = UpSampling2D::new("up_sampling2d");
    upsampling.size = [2, 3];
    let mut bilinear = UpSampling2D::new("up_sampling2d_1");
    bilinear.size = [3, 2];
    bilinear.interpolation = Interpolation::Bilinear;
    let sequence = [2, 7, 2];
    let mut conv1d = Conv1D::new("conv1d", 4, 3, Activation::Tanh);
    conv1d.padding = Padding::Same;
    conv1d.strides = 2;
    conv1d.groups = 2;
    let mut conv1d_dilated = Conv1D::new("conv1d_dilated", 3, 2, Activation::Linear);
    conv1d_dilated.dilation_rate = 3;
    let mut conv1d_causal = Conv1D::new("conv1d_causal", 2, 3, Activation::Linear);
    conv1d_causal.padding = Padding::Causal;
    conv1d_causal.dilation_rate = 2;
    let mut max1d = MaxPooling1D::new("max_pooling1d", 2);
    max1d.padding = Padding::Same;
    let mut avg1d = AveragePooling1D::new("average_pooling1d", 3);
    avg1d.padding = Padding::Same;
    avg1d.strides = Some(2);
    let mut depthwise = DepthwiseConv2D::new("depthwise_conv2d", [3, 2], Activation::Tanh);
    depthwise.padding = Padding::Same;
    depthwise.strides = [2, 1];
    depthwise.depth_multiplier = 2;
    // Keras 3 takes strides with dilation in the depthwise layers.
    let mut depthwise_atrous = DepthwiseConv2D::new("depthwise_atrous", [2, 2], Activation::Linear);
    depthwise_atrous.strides = [2, 1];
    depthwise_atrous.dilation_rate = [2, 2];
    let mut separable = SeparableConv2D::new("separable_conv2d", 3, [2, 2], Activation::Linear);
    separable.depth_multiplier = 2;
    separable.padding = Padding::Same;
    let mut transpose_same = Conv2DTranspose::new("conv2d_transpose", 3, [3, 2], Activation::Tanh);
    transpose_same.padding = Padding::Same;
    transpose_same.strides = [2, 2];
    transpose_same.output_padding = Some([1, 0]);
    let mut transpose_dilated =
        Conv2DTranspose::new("conv2d_transpose", 2, [2, 2], Activation::Linear);
    transpose_dilated.dilation_rate = [2, 1];
    let mut group_norm = GroupNormalization::new("group_normalization");
    group_norm.groups = 2;
    let cases: Vec<(Box<dyn Layer>, Vec<usize>, bool)> = vec![
        (
            Box::new(Dense::new("dense", 3, Activation::Gelu)),
            vec![2, 4],
            false,
        ),
        (Box::new(conv), image.to_vec(), false),
        (Box::new(max_same), image.to_vec(), false),
        (Box::new(avg_same), image.to_vec(), false),
        (
            Box::new(GlobalAveragePooling2D::new("gap")),
            image.to_vec(),
            false,
        ),
        (
            Box::new(GlobalMaxPooling2D::new("gmp")),
            image.to_vec(),
            false,
        ),
        (Box::new(BatchNormalization::new("bn")), vec![4, 3], true),
        (Box::new(BatchNormalization::new("bn")), vec![4, 3], false),
        (Box::new(LayerNormalization::new("ln")), vec![2, 5], false),
        (Box::new(Dropout::new("dropout", 0.5)), vec![2, 6], true),
        (
            Box::new(Reshape::new("reshape", vec![-1, 2])),
            vec![2, 6],
            false,
        ),
        (Box::new(Flatten::new("flatten")), vec![2, 3, 2], false),
        // Issue 14: shape and activation layers.
        (Box::new(rescaling), vec![2, 4], false),
        (Box::new(softmax_axis1), vec![2, 3, 4], false),
        (Box::new(softmax_last), vec![2, 5], false),
        (Box::new(relu), vec![2, 6], false),
        (Box::new(LeakyReLU::new("leaky_re_lu")), vec![2, 6], false),
        (Box::new(prelu), vec![2, 3, 4], false),
        (Box::new(zero_padding), image.to_vec(), false),
        (Box::new(cropping), image.to_vec(), false),
        (Box::new(upsampling), image.to_vec(), false),
        (Box::new(bilinear), image.to_vec(), false),
        (
            Box::new(Permute::new("permute", vec![3, 1, 2])),
            vec![2, 2, 3, 4],
            false,
        ),
        (
            Box::new(RepeatVector::new("repeat_vector", 3)),
            vec![2, 4],
            false,
        ),
        (Box::new(conv1d), sequence.to_vec(), false),
        (Box::new(conv1d_dilated), sequence.to_vec(), false),
        (Box::new(conv1d_causal), sequence.to_vec(), false),
        (Box::new(max1d), sequence.to_vec(), false),
        (Box::new(avg1d), sequence.to_vec(), false),
        (
            Box::new(GlobalAveragePooling1D::new("gap1d")),
            sequence.to_vec(),
            false,
        ),
        (
            Box::new(GlobalMaxPooling1D::new("gmp1d")),
            sequence.to_vec(),
            false,
        ),
        (Box::new(depthwise), image.to_vec(), false),
        (Box::new(depthwise_atrous), image.to_vec(), false),
        (Box::new(separable), image.to_vec(), false),
        (Box::new(transpose_same), image.to_vec(), false),
        (Box::new(transpose_dilated), image.to_vec(), false),
        (Box::new(group_norm), vec![2, 3, 4], false),
    ];
    for (i, (layer, dims, training)) in cases.iter().enumerate() {
        let specs = layer.params(&dims[1..]).unwrap();
        let mut inputs = vec![f64s(dims, i as u64)];
        inputs.extend(specs.iter().map(|p| {
            let t = f64s(&p.dims, 100 + i as u64);
            // Variances must stay positive.
            if p.name.ends_with("moving_variance") {
                Tensor::F64(t.array::<f64>().unwrap().mapv(|v| v.abs() + 0.5))
            } else {
                t
            }
        }));
        inputs.push(Tensor::from_vec(&[2], vec![3i32, 4]).unwrap());
        let wrt: Vec<usize> = std::iter::once(0)
            .chain(
                (0..specs.len())
                    .filter(|&k| specs[k].trainable)
                    .map(|k| k + 1),
            )
            .collect();
        let n = specs.len();
        GradCheck::default()
            .run(&inputs, &wrt, |g, p| {
                let mut cx = Forward::new(g, *training, Some(p[n + 1]));
                layer.forward(&mut cx, p[0], &p[1..=n])
            })
            .unwrap_or_else(|e| panic!("{} (training {training}): {e}", layer.name()));
    }
}

// Issue 14: shape and activation layers.

#[test]
fn rescaling_scales_then_offsets() {
    let mut r = Rescaling::new("rescaling", 0.5);
    r.offset = 1.0;
    let y = infer(&r, t(&[1, 3], &[-2.0, 0.0, 4.0]), vec![]);
    assert_close(&y, &t(&[1, 3], &[0.0, 1.0, 3.0]));
    assert_eq!(r.output_shape(&[2, 3]).unwrap(), [2, 3]);
    assert!(r.params(&[3]).unwrap().is_empty());
    r.scale = f64::NAN;
    let e = r.output_shape(&[3]).unwrap_err().to_string();
    assert_eq!(
        e,
        "rescaling (Rescaling): `scale` must be a finite number, got NaN"
    );
}

#[test]
fn softmax_on_any_axis_and_marks_the_last_axis_logits() {
    let s = Softmax::new("softmax");
    let y = infer(&s, t(&[1, 2], &[0.0, 3f32.ln()]), vec![]);
    assert_close(&y, &t(&[1, 2], &[0.25, 0.75]));
    // Axis 1 of [batch, 2, 2]: each column sums to 1.
    let mut s1 = Softmax::new("softmax");
    s1.axis = 1;
    let x = t(&[1, 2, 2], &[0.0, 0.0, 3f32.ln(), 0.0]);
    assert_close(
        &infer(&s1, x, vec![]),
        &t(&[1, 2, 2], &[0.25, 0.5, 0.75, 0.5]),
    );
    s1.axis = 3;
    let e = s1.output_shape(&[2]).unwrap_err().to_string();
    assert!(
        e.contains("softmax (Softmax)") && e.contains("a feature axis 3"),
        "{e}"
    );
    s1.axis = 0;
    assert!(s1.output_shape(&[2]).is_err(), "the batch axis");

    let mut g = Graph::new("softmax");
    let x = g.parameter(TensorType::new(DType::F32, [1, 3]));
    let mut cx = Forward::new(&mut g, false, None);
    let y = s.forward(&mut cx, x, &[]).unwrap();
    assert_eq!(cx.logits_of(y), Some(x), "losses find the logits");
}

#[test]
fn relu_threshold_slope_and_max_value_as_keras() {
    let r = ReLU::new("re_lu");
    assert_close(
        &infer(&r, t(&[1, 3], &[-1.0, 0.0, 2.0]), vec![]),
        &t(&[1, 3], &[0.0, 0.0, 2.0]),
    );
    let mut r = ReLU::new("re_lu");
    r.max_value = Some(1.5);
    r.negative_slope = 0.5;
    r.threshold = 1.0;
    // Below (or at) the threshold 0.5·(x - 1); above it x, clipped at 1.5.
    let x = t(&[1, 5], &[-1.0, 0.5, 1.0, 1.2, 3.0]);
    assert_close(
        &infer(&r, x, vec![]),
        &t(&[1, 5], &[-1.0, -0.25, 0.0, 1.2, 1.5]),
    );
    let e = |r: &ReLU| r.output_shape(&[3]).unwrap_err().to_string();
    r.max_value = Some(-1.0);
    assert_eq!(e(&r), "re_lu (ReLU): `max_value` must be >= 0, got -1.0");
    r.max_value = None;
    r.threshold = -0.5;
    assert_eq!(e(&r), "re_lu (ReLU): `threshold` must be >= 0, got -0.5");
}

#[test]
fn leaky_relu_keeps_a_slope_below_zero() {
    let l = LeakyReLU::new("leaky_re_lu");
    assert_eq!(l.negative_slope, 0.3, "Keras' default");
    assert_close(
        &infer(&l, t(&[1, 3], &[-2.0, 0.0, 3.0]), vec![]),
        &t(&[1, 3], &[-0.6, 0.0, 3.0]),
    );
    let mut l = l;
    l.negative_slope = -0.1;
    assert!(l.output_shape(&[3]).is_err());
}

#[test]
fn prelu_learns_one_slope_per_element_or_per_shared_group() {
    let mut p = PReLU::new("p_re_lu");
    let specs = p.params(&[2, 3]).unwrap();
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].name, "p_re_lu/alpha");
    assert_eq!(specs[0].dims, [2, 3]);
    assert_eq!(specs[0].init, Initializer::Zeros);
    assert!(specs[0].trainable);
    p.shared_axes = Some(vec![1]);
    let specs = p.params(&[2, 3]).unwrap();
    assert_eq!(specs[0].dims, [1, 3]);
    assert_eq!((specs[0].fan_in, specs[0].fan_out), (1, 3));
    let x = t(&[1, 2, 3], &[-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]);
    let alpha = t(&[1, 3], &[0.1, 0.2, 0.3]);
    assert_close(
        &infer(&p, x, vec![alpha]),
        &t(&[1, 2, 3], &[-0.1, 2.0, -0.9, 4.0, -1.0, 6.0]),
    );
    p.shared_axes = Some(vec![3]);
    let e = p.output_shape(&[2, 3]).unwrap_err().to_string();
    assert!(
        e.contains("p_re_lu (PReLU)") && e.contains("shared axis 3"),
        "{e}"
    );
    p.shared_axes = Some(vec![0]);
    assert!(p.output_shape(&[2, 3]).is_err(), "axes count from 1");
}

#[test]
fn zero_padding2d_adds_zeros_on_each_side() {
    let mut z = ZeroPadding2D::new("zero_padding2d");
    assert_eq!(z.output_shape(&[2, 2, 1]).unwrap(), [4, 4, 1]);
    z.padding = [[1, 0], [0, 2]];
    let y = infer(&z, iota(&[1, 2, 2, 1]), vec![]);
    let want = [0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0];
    assert_close(&y, &t(&[1, 3, 4, 1], &want));
    assert!(z.output_shape(&[4]).is_err());
}

#[test]
fn cropping2d_removes_edges_and_keeps_at_least_a_pixel() {
    let mut c = Cropping2D::new("cropping2d");
    assert_eq!(c.output_shape(&[3, 3, 2]).unwrap(), [3, 3, 2]);
    c.cropping = [[1, 0], [0, 1]];
    let y = infer(&c, iota(&[1, 3, 3, 1]), vec![]);
    assert_close(&y, &t(&[1, 2, 2, 1], &[4.0, 5.0, 7.0, 8.0]));
    c.cropping = [[1, 1], [0, 0]];
    let e = c.output_shape(&[2, 3, 1]).unwrap_err().to_string();
    assert!(
        e.contains("cropping2d (Cropping2D)") && e.contains("to crop 1+1 and 0+0 from"),
        "{e}"
    );
}

#[test]
fn upsampling2d_repeats_each_pixel() {
    let mut u = UpSampling2D::new("up_sampling2d");
    assert_eq!(u.output_shape(&[2, 3, 4]).unwrap(), [4, 6, 4]);
    u.size = [2, 1];
    let y = infer(&u, iota(&[1, 2, 2, 1]), vec![]);
    assert_close(
        &y,
        &t(&[1, 4, 2, 1], &[1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]),
    );
    // Two channels, each repeated along the width.
    u.size = [1, 2];
    let y = infer(&u, iota(&[1, 1, 2, 2]), vec![]);
    assert_close(
        &y,
        &t(&[1, 1, 4, 2], &[1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]),
    );
    u.size = [0, 2];
    assert!(u.output_shape(&[2, 2, 1]).is_err());
}

#[test]
fn upsampling2d_bilinear_as_tensorflow_resize() {
    let mut u = UpSampling2D::new("up_sampling2d");
    u.interpolation = Interpolation::Bilinear;
    // Width 2 → 4: outputs sample at -0.25, 0.25, 0.75, 1.25 (half-pixel centres),
    // clamped at the edges; the height of 1 just repeats.
    let y = infer(&u, t(&[1, 1, 2, 1], &[1.0, 3.0]), vec![]);
    let row = [1.0, 1.5, 2.5, 3.0];
    assert_close(&y, &t(&[1, 2, 4, 1], &[row, row].concat()));
    // Height 3 → 6 on two channels (the second negated): 1, 2, 3 becomes
    // 1, 1.25, 1.75, 2.25, 2.75, 3.
    u.size = [2, 1];
    let x = t(&[1, 3, 1, 2], &[1.0, -1.0, 2.0, -2.0, 3.0, -3.0]);
    let col = [1.0, 1.25, 1.75, 2.25, 2.75, 3.0];
    let want: Vec<f32> = col.iter().flat_map(|&v| [v, -v]).collect();
    assert_close(&infer(&u, x, vec![]), &t(&[1, 6, 1, 2], &want));
}

#[test]
fn permute_reorders_the_axes_after_the_batch() {
    let p = Permute::new("permute", vec![2, 1]);
    let y = infer(&p, iota(&[1, 2, 3]), vec![]);
    assert_close(&y, &t(&[1, 3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
    let e = p.output_shape(&[2, 3, 4]).unwrap_err().to_string();
    assert!(
        e.contains("permute (Permute)") && e.contains("rank 2"),
        "{e}"
    );
    let e = Permute::new("permute", vec![1, 1])
        .output_shape(&[2, 3])
        .unwrap_err()
        .to_string();
    assert!(e.contains("a permutation"), "{e}");
    assert!(Permute::new("permute", vec![0, 1])
        .output_shape(&[2, 3])
        .is_err());
}

#[test]
fn repeat_vector_repeats_along_a_new_axis() {
    let r = RepeatVector::new("repeat_vector", 3);
    let y = infer(&r, t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), vec![]);
    let want = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0, 3.0, 4.0];
    assert_close(&y, &t(&[2, 3, 2], &want));
    let e = r.output_shape(&[2, 3]).unwrap_err().to_string();
    assert!(e.contains("(features,) (rank 1)"), "{e}");
    assert!(RepeatVector::new("r", 0).output_shape(&[3]).is_err());
}

/// Sizes no image could have (margins, strides and repeats near `usize::MAX`) on layers
/// built by hand: a typed error naming what is too large, never a panic and never a
/// wrapped size that silently computes something else.
#[test]
fn absurd_sizes_are_typed_errors() {
    use strata_runtime::Model;
    let huge = usize::MAX;
    let mut pad = ZeroPadding2D::new("pad");
    pad.padding = [[huge, 1], [0, 0]];
    let mut pad_i64 = ZeroPadding2D::new("pad_i64");
    pad_i64.padding = [[huge / 2, 1], [0, 0]];
    let mut crop = Cropping2D::new("crop");
    crop.cropping = [[huge, 1], [0, 0]];
    let mut transposed = Conv2DTranspose::new("transposed", 2, [3, 3], Activation::Relu);
    transposed.strides = [huge / 2, 1];
    let mut upsample = UpSampling2D::new("upsample");
    upsample.size = [huge, 1];
    let mut depthwise = DepthwiseConv2D::new("depthwise", [3, 3], Activation::Relu);
    depthwise.depth_multiplier = huge / 2;
    let mut separable = SeparableConv2D::new("separable", 2, [3, 3], Activation::Relu);
    separable.depth_multiplier = huge / 2;
    let cases: Vec<(Box<dyn Layer>, Vec<usize>, &str)> = vec![
        (Box::new(depthwise), vec![4, 4, 3], "bytes"),
        (Box::new(separable), vec![4, 4, 3], "bytes"),
        (Box::new(pad), vec![4, 4, 1], "too large"),
        (Box::new(pad_i64), vec![4, 4, 1], "overflows"),
        (Box::new(crop), vec![4, 4, 1], "to crop"),
        (Box::new(transposed), vec![4, 4, 1], "too large"),
        (Box::new(upsample), vec![4, 4, 1], "more than 2^64 bytes"),
        (
            Box::new(RepeatVector::new("repeat", huge)),
            vec![3],
            "more than 2^64 bytes",
        ),
    ];
    for (layer, input, want) in cases {
        let name = layer.name().to_string();
        let model = Model::new(Sequential::new(Some(input.clone()), vec![layer]));
        let rows = [&[2usize][..], &input].concat();
        let x = strata_runtime::random::normal(&rows, 0.0, 1.0, 0).unwrap();
        match model.predict(&x) {
            Err(e) => assert!(e.to_string().contains(want), "{name}: {e}"),
            Ok(y) => panic!("{name}: expected an error, got {:?}", y.dims()),
        }
    }
}

// Issue 14: merge layers.

/// Each merge's gradient with respect to every input of its list (one of them
/// broadcast along an axis of size 1) matches central differences.
#[test]
fn merge_layers_are_differentiable() {
    use strata_runtime::autodiff::gradcheck::GradCheck;
    fn f64s(dims: &[usize], seed: u64) -> Tensor {
        let a = strata_runtime::random::normal(dims, 0.0, 1.0, seed).unwrap();
        Tensor::F64(a.mapv(|v| v as f64))
    }
    let mut axis1 = Concatenate::new("concatenate_1");
    axis1.axis = 1;
    // Each merge with the shapes of its list.
    type Case = (Box<dyn Layer>, Vec<Vec<usize>>);
    let layers: Vec<Case> = vec![
        (
            Box::new(Add::new("add")),
            vec![vec![2, 3, 4], vec![2, 3, 1], vec![2, 3, 4]],
        ),
        (
            Box::new(Subtract::new("subtract")),
            vec![vec![2, 3, 4], vec![2, 1, 4]],
        ),
        (
            Box::new(Multiply::new("multiply")),
            vec![vec![2, 3, 4], vec![2, 3, 4]],
        ),
        (Box::new(Average::new("average")), vec![vec![2, 3, 4]; 3]),
        (
            Box::new(Maximum::new("maximum")),
            vec![vec![2, 3, 4], vec![2, 3, 4]],
        ),
        (
            Box::new(Minimum::new("minimum")),
            vec![vec![2, 3, 4], vec![2, 3, 1]],
        ),
        (
            Box::new(Concatenate::new("concatenate")),
            vec![vec![2, 3, 4], vec![2, 3, 2]],
        ),
        (Box::new(axis1), vec![vec![2, 3, 4], vec![2, 1, 4]]),
    ];
    for (i, (layer, dims)) in layers.iter().enumerate() {
        let inputs: Vec<Tensor> = dims
            .iter()
            .enumerate()
            .map(|(k, d)| f64s(d, (10 * i + k) as u64))
            .collect();
        let wrt: Vec<usize> = (0..inputs.len()).collect();
        GradCheck::default()
            .run(&inputs, &wrt, |g, p| {
                let mut cx = Forward::new(g, false, None);
                layer.call(&mut cx, p, &[])
            })
            .unwrap_or_else(|e| panic!("{}: {e}", layer.name()));
    }
}

/// Inputs a merge cannot take are typed errors naming the layer, the inputs and their
/// shapes; a one-input layer given several says so.
#[test]
fn merge_errors_are_typed() {
    let add = Add::new("add");
    let e = add
        .call_output_shape(&[&[3, 4], &[3, 5]])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "add (Add): expected inputs of one rank with equal sizes (or 1) on every axis, got \
         input 0 of shape [3, 4] and input 1 of shape [3, 5]"
    );
    let e = Subtract::new("subtract")
        .call_output_shape(&[&[2], &[2], &[2]])
        .unwrap_err()
        .to_string();
    assert_eq!(e, "subtract (Subtract): takes exactly 2 inputs, got 3");
    let e = Concatenate::new("concatenate")
        .call_output_shape(&[&[2, 3], &[3, 3]])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "concatenate (Concatenate): expected inputs of one rank with equal sizes on every axis \
         but the concatenation axis -1, got input 0 of shape [2, 3] and input 1 of shape [3, 3]"
    );
    assert!(add.call_output_shape(&[]).is_err());
    let e = Dense::new("dense", 2, Activation::Linear)
        .call_output_shape(&[&[3], &[3]])
        .unwrap_err()
        .to_string();
    assert_eq!(e, "dense (Dense): takes one input, got a list of 2");
    assert_eq!(add.call_output_shape(&[&[3, 1], &[1, 4]]).unwrap(), [3, 4]);
    assert_eq!(
        Concatenate::new("c")
            .call_output_shape(&[&[2, 3], &[2, 5]])
            .unwrap(),
        [2, 8]
    );
}

// Issue 14: products and attention, layers of several inputs.

/// One call of `layer` on several inputs (`Layer::call`): the output, checked against
/// the shape rule the catalogue gives for the inputs' shapes.
fn call(layer: &dyn Layer, training: bool, xs: Vec<Tensor>, params: Vec<Tensor>) -> Tensor {
    let mut g = Graph::new("layer");
    let xv: Vec<_> = xs.iter().map(|x| g.parameter(x.ty())).collect();
    let pv: Vec<_> = params.iter().map(|p| g.parameter(p.ty())).collect();
    let key = g.parameter(TensorType::new(DType::I32, [2]));
    let mut cx = Forward::new(&mut g, training, Some(key));
    let y = layer.call(&mut cx, &xv, &pv).unwrap();
    g.set_outputs(vec![y]).unwrap();
    let shapes: Vec<&[usize]> = xs.iter().map(|x| &x.dims()[1..]).collect();
    let rule = layer.call_output_shape(&shapes).unwrap();
    assert_eq!(&g.ty(y).dims()[1..], rule.as_slice(), "{layer:?}");
    let declared = layer.call_params(&shapes).unwrap();
    let given: Vec<&[usize]> = params.iter().map(|p| p.dims()).collect();
    let dims: Vec<&[usize]> = declared.iter().map(|p| p.dims.as_slice()).collect();
    assert_eq!(dims, given, "{layer:?}");
    let mut inputs = xs;
    inputs.extend(params);
    inputs.push(Tensor::from_vec(&[2], vec![7i32, 11]).unwrap());
    NativeBackend::new().run(&g, &inputs).unwrap().remove(0)
}

fn scalar(v: f32) -> Tensor {
    Tensor::from_vec(&[], vec![v]).unwrap()
}

#[test]
fn dot_multiplies_along_one_axis_of_each_input() {
    // Rows of 2: one dot product per example, as `(batch, 1)`.
    let d = Dot::new("dot", 1);
    let x = t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let y = t(&[2, 2], &[5.0, 6.0, 7.0, 8.0]);
    assert_close(
        &call(&d, false, vec![x, y], vec![]),
        &t(&[2, 1], &[17.0, 53.0]),
    );
    // Along the steps of two sequences: x^T y per example.
    let steps = Dot {
        axes: [1, 1],
        ..Dot::new("dot", 1)
    };
    let x = t(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let y = t(&[1, 2, 3], &[1.0, 0.0, 1.0, 0.0, 1.0, 1.0]);
    let want = t(&[1, 2, 3], &[1.0, 3.0, 4.0, 2.0, 4.0, 6.0]);
    assert_close(&call(&steps, false, vec![x, y], vec![]), &want);
    // Normalized: the cosine of (3, 4) and (4, 3).
    let cosine = Dot {
        normalize: true,
        ..Dot::new("dot", -1)
    };
    let x = t(&[1, 2], &[3.0, 4.0]);
    let y = t(&[1, 2], &[4.0, 3.0]);
    assert_close(
        &call(&cosine, false, vec![x, y], vec![]),
        &t(&[1, 1], &[0.96]),
    );
    // Sizes along the axes must agree; the batch axis is never one.
    let e = d.call_output_shape(&[&[2], &[3]]).unwrap_err();
    assert!(e.to_string().contains("equal sizes along axis 1"), "{e}");
    let batch = Dot::new("dot", 0);
    assert!(batch.call_output_shape(&[&[2], &[2]]).is_err());
    assert!(d.call_output_shape(&[&[2]]).is_err(), "exactly two inputs");
}

#[test]
fn attention_weights_values_by_the_softmax_of_the_scores() {
    let e = std::f32::consts::E;
    // One query step (1, 0) against keys (1, 0) and (0, 1): scores 1 and 0.
    let a = Attention::new("attention");
    let q = t(&[1, 1, 2], &[1.0, 0.0]);
    let v = t(&[1, 2, 2], &[1.0, 0.0, 0.0, 1.0]);
    let want = t(&[1, 1, 2], &[e / (e + 1.0), 1.0 / (e + 1.0)]);
    assert_close(&call(&a, false, vec![q.clone(), v.clone()], vec![]), &want);
    // A separate key, and a learned scale of 2 (scores 2 and 0), weighting other values.
    let scaled = Attention {
        use_scale: true,
        ..Attention::new("attention")
    };
    let values = t(&[1, 2, 3], &[1.0, 2.0, 3.0, 0.0, 0.0, 6.0]);
    let (w0, w1) = (e * e / (e * e + 1.0), 1.0 / (e * e + 1.0));
    let want = t(&[1, 1, 3], &[w0, 2.0 * w0, 3.0 * w0 + 6.0 * w1]);
    let got = call(&scaled, false, vec![q, values, v], vec![scalar(2.0)]);
    assert_close(&got, &want);
    // Causal: the first step sees only the first value. Keys (1, 0) and (0, 1) score
    // the second step's query (0, 1) 0 and 1.
    let causal = Attention {
        use_causal_mask: true,
        ..Attention::new("attention")
    };
    let q = t(&[1, 2, 2], &[1.0, 0.0, 0.0, 1.0]);
    let v = t(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let (a0, a1) = (1.0 / (1.0 + e), e / (1.0 + e));
    let want = t(&[1, 2, 2], &[1.0, 2.0, a0 + 3.0 * a1, 2.0 * a0 + 4.0 * a1]);
    let got = call(&causal, false, vec![q.clone(), v.clone(), q], vec![]);
    assert_close(&got, &want);
    // Concat: equal queries and keys give equal scores, so the mean of the values.
    let concat = Attention {
        score_mode: ScoreMode::Concat,
        ..Attention::new("attention")
    };
    let q = t(&[1, 1, 2], &[0.0, 0.0]);
    let k = t(&[1, 2, 2], &[0.0; 4]);
    let got = call(&concat, false, vec![q, v, k], vec![scalar(3.0)]);
    assert_close(&got, &t(&[1, 1, 2], &[2.0, 3.0]));
    // The query and key must have as many features, the value and key as many steps.
    let e = a.call_output_shape(&[&[1, 2], &[2, 3]]).unwrap_err();
    assert!(
        e.to_string().contains("as many features as the query"),
        "{e}"
    );
    let e = a
        .call_output_shape(&[&[1, 2], &[2, 3], &[3, 2]])
        .unwrap_err();
    assert!(e.to_string().contains("as many steps as the value"), "{e}");
    let e = a.call_output_shape(&[&[1, 2, 2], &[2, 2]]).unwrap_err();
    assert!(e.to_string().contains("sequences (steps, features)"), "{e}");
}

#[test]
fn attention_dropout_drops_weights_in_training_only() {
    // Equal scores over 8 steps of ones: each weight 1/8, so the output is 1 in
    // inference, and in training 2/8 times the number of weights kept.
    let a = Attention {
        dropout: 0.5,
        ..Attention::new("attention")
    };
    let q = t(&[1, 6, 1], &[0.0; 6]);
    let v = t(&[1, 8, 1], &[1.0; 8]);
    let inferred = call(&a, false, vec![q.clone(), v.clone()], vec![]);
    assert_close(&inferred, &t(&[1, 6, 1], &[1.0; 6]));
    let trained = call(&a, true, vec![q.clone(), v.clone()], vec![]);
    let y = trained.to_vec::<f32>().unwrap();
    for &o in &y {
        let kept = o * 4.0;
        assert!((kept - kept.round()).abs() < 1e-5 && kept <= 8.0, "{y:?}");
    }
    assert!(y.iter().any(|&o| (o - 1.0).abs() > 1e-3), "{y:?}");
    assert_eq!(
        call(&a, true, vec![q, v], vec![]),
        trained,
        "same key, same mask"
    );
}

#[test]
fn multi_head_attention_projects_attends_and_projects_back() {
    let e = std::f32::consts::E;
    // One head of one feature, every projection the identity: Q = K = V = x = (1, 2), so
    // the scores are x_i x_j, [[1, 2], [2, 4]].
    let m = MultiHeadAttention::new("multi_head_attention", 1, 1);
    let one = |dims: &[usize]| t(dims, &[1.0]);
    let zero = |dims: &[usize]| t(dims, &[0.0]);
    let params = |out_bias: f32| {
        vec![
            one(&[1, 1, 1]),
            zero(&[1, 1]),
            one(&[1, 1, 1]),
            zero(&[1, 1]),
            one(&[1, 1, 1]),
            zero(&[1, 1]),
            one(&[1, 1, 1]),
            t(&[1], &[out_bias]),
        ]
    };
    let x = t(&[1, 2, 1], &[1.0, 2.0]);
    let row0 = (1.0 + 2.0 * e) / (1.0 + e);
    let row1 = (1.0 + 2.0 * e * e) / (1.0 + e * e);
    let got = call(&m, false, vec![x.clone(), x.clone()], params(0.5));
    assert_close(&got, &t(&[1, 2, 1], &[row0 + 0.5, row1 + 0.5]));
    // Causal: the first step sees only itself.
    let causal = MultiHeadAttention {
        use_causal_mask: true,
        ..m.clone()
    };
    let got = call(&causal, false, vec![x.clone(), x], params(0.0));
    assert_close(&got, &t(&[1, 2, 1], &[1.0, row1]));
    // Keras' weights: names, layouts and fans (the leading kernel axes multiply both).
    let wide = MultiHeadAttention {
        value_dim: Some(4),
        output_shape: Some(7),
        ..MultiHeadAttention::new("mha", 3, 2)
    };
    let specs = wide.call_params(&[&[4, 5], &[6, 3], &[6, 2]]).unwrap();
    let names: Vec<&str> = specs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mha/query/kernel",
            "mha/query/bias",
            "mha/key/kernel",
            "mha/key/bias",
            "mha/value/kernel",
            "mha/value/bias",
            "mha/attention_output/kernel",
            "mha/attention_output/bias"
        ]
    );
    let dims: Vec<&[usize]> = specs.iter().map(|p| p.dims.as_slice()).collect();
    assert_eq!(
        dims,
        [
            &[5, 3, 2][..],
            &[3, 2],
            &[2, 3, 2],
            &[3, 2],
            &[3, 3, 4],
            &[3, 4],
            &[3, 4, 7],
            &[7]
        ]
    );
    assert_eq!((specs[0].fan_in, specs[0].fan_out), (15, 10));
    assert_eq!((specs[6].fan_in, specs[6].fan_out), (12, 21));
    assert_eq!(specs[0].init, Initializer::GlorotUniform);
    assert_eq!(specs[1].init, Initializer::Zeros);
    assert_eq!(
        wide.call_output_shape(&[&[4, 5], &[6, 3], &[6, 2]])
            .unwrap(),
        [4, 7]
    );
    let e = wide
        .call_output_shape(&[&[4, 5], &[6, 3], &[5, 2]])
        .unwrap_err();
    assert!(e.to_string().contains("as many steps as the value"), "{e}");
    assert!(
        wide.call_output_shape(&[&[4, 5]]).is_err(),
        "a value is needed"
    );
}

/// Each layer of several inputs composes primitives with gradient rules: its gradient
/// with respect to every input and trainable weight matches central differences.
#[test]
fn layers_of_several_inputs_are_differentiable() {
    use strata_runtime::autodiff::gradcheck::GradCheck;
    fn f64s(dims: &[usize], seed: u64) -> Tensor {
        let a = strata_runtime::random::normal(dims, 0.0, 1.0, seed).unwrap();
        Tensor::F64(a.mapv(|v| v as f64))
    }
    // A layer, its inputs' dims, training or not.
    type Case = (Box<dyn Layer>, Vec<Vec<usize>>, bool);
    let cases: Vec<Case> = vec![
        (
            Box::new(Dot::new("dot", -1)),
            vec![vec![2, 3, 4], vec![2, 5, 4]],
            false,
        ),
        (
            Box::new(Dot {
                axes: [1, 2],
                normalize: true,
                ..Dot::new("dot", 1)
            }),
            vec![vec![2, 3, 4], vec![2, 2, 3]],
            false,
        ),
        (
            Box::new(Attention {
                use_scale: true,
                use_causal_mask: true,
                ..Attention::new("attention")
            }),
            vec![vec![2, 3, 4], vec![2, 3, 2], vec![2, 3, 4]],
            false,
        ),
        (
            Box::new(Attention {
                use_scale: true,
                score_mode: ScoreMode::Concat,
                dropout: 0.3,
                ..Attention::new("attention")
            }),
            vec![vec![2, 3, 2], vec![2, 4, 2]],
            true,
        ),
        (
            Box::new(MultiHeadAttention {
                value_dim: Some(3),
                output_shape: Some(5),
                use_causal_mask: true,
                ..MultiHeadAttention::new("mha", 2, 2)
            }),
            vec![vec![2, 3, 4], vec![2, 3, 3], vec![2, 3, 2]],
            false,
        ),
        (
            Box::new(MultiHeadAttention {
                dropout: 0.25,
                use_bias: false,
                ..MultiHeadAttention::new("mha", 2, 3)
            }),
            vec![vec![2, 3, 4], vec![2, 4, 4]],
            true,
        ),
    ];
    for (i, (layer, dims, training)) in cases.iter().enumerate() {
        let shapes: Vec<&[usize]> = dims.iter().map(|d| &d[1..]).collect();
        let specs = layer.call_params(&shapes).unwrap();
        let n_in = dims.len();
        let mut inputs: Vec<Tensor> = dims
            .iter()
            .enumerate()
            .map(|(k, d)| f64s(d, (10 * i + k) as u64))
            .collect();
        inputs.extend(
            specs
                .iter()
                .enumerate()
                .map(|(k, p)| f64s(&p.dims, (100 + 10 * i + k) as u64)),
        );
        inputs.push(Tensor::from_vec(&[2], vec![3i32, 4]).unwrap());
        let n = specs.len();
        let wrt: Vec<usize> = (0..n_in + n).collect();
        GradCheck::default()
            .run(&inputs, &wrt, |g, p| {
                let mut cx = Forward::new(g, *training, Some(p[n_in + n]));
                layer.call(&mut cx, &p[..n_in], &p[n_in..n_in + n])
            })
            .unwrap_or_else(|e| panic!("{} (training {training}): {e}", layer.name()));
    }
}

#[test]
fn a_wrong_count_of_attention_inputs_names_them() {
    let m = MultiHeadAttention::new("mha", 2, 3);
    let e = m.call_output_shape(&[&[4, 6]]).unwrap_err();
    assert!(
        e.to_string()
            .contains("takes 2 to 3 inputs (query, value[, key]), got 1"),
        "{e}"
    );
}

/// One feature, three steps `[1, 2, 3]` (batch 1).
fn steps(v: [f32; 3]) -> Tensor {
    t(&[1, 3, 1], &v)
}

#[test]
fn simple_rnn_by_hand_sequences_and_backwards() {
    // Linear, two units: h = x·[1, 2] + h·(I/2) + [0, 1].
    let rnn = |return_sequences, go_backwards| SimpleRNN {
        activation: Activation::Linear,
        return_sequences,
        go_backwards,
        ..SimpleRNN::new("simple_rnn", 2)
    };
    let params = || {
        vec![
            t(&[1, 2], &[1.0, 2.0]),
            t(&[2, 2], &[0.5, 0.0, 0.0, 0.5]),
            t(&[2], &[0.0, 1.0]),
        ]
    };
    let x = steps([1.0, 2.0, 3.0]);
    // h1 = [1, 3]; h2 = [2, 4] + [0.5, 1.5] + [0, 1]; h3 = [3, 6] + [1.25, 3.25] + [0, 1].
    let seq = t(&[1, 3, 2], &[1.0, 3.0, 2.5, 6.5, 4.25, 10.25]);
    assert_close(&infer(&rnn(true, false), x.clone(), params()), &seq);
    assert_close(
        &infer(&rnn(false, false), x.clone(), params()),
        &t(&[1, 2], &[4.25, 10.25]),
    );
    // Backwards: the steps read 3, 2, 1, the outputs in the order read (as Keras).
    let back = t(&[1, 3, 2], &[3.0, 7.0, 3.5, 8.5, 2.75, 7.25]);
    assert_close(&infer(&rnn(true, true), x.clone(), params()), &back);
    assert_close(
        &infer(&rnn(false, true), x, params()),
        &t(&[1, 2], &[2.75, 7.25]),
    );
}

#[test]
fn lstm_by_hand_gates_in_keras_order() {
    // Linear activations, one unit, gates i, f, c, o: i = x/2, f = x/4, c~ = x + h/2,
    // o = x; c' = f·c + i·c~, h' = o·c'.
    let lstm = |return_sequences, go_backwards| LSTM {
        activation: Activation::Linear,
        recurrent_activation: Activation::Linear,
        return_sequences,
        go_backwards,
        ..LSTM::new("lstm", 1)
    };
    let params = || {
        vec![
            t(&[1, 4], &[0.5, 0.25, 1.0, 1.0]),
            t(&[1, 4], &[0.0, 0.0, 0.5, 0.0]),
            t(&[4], &[0.0; 4]),
        ]
    };
    let x = steps([1.0, 2.0, 3.0]);
    // c1 = 0.5, h1 = 0.5; c2 = 0.5·0.5 + 1·2.25 = 2.5, h2 = 5; c3 = 0.75·2.5 + 1.5·5.5
    // = 10.125, h3 = 30.375.
    assert_close(
        &infer(&lstm(true, false), x.clone(), params()),
        &t(&[1, 3, 1], &[0.5, 5.0, 30.375]),
    );
    assert_close(
        &infer(&lstm(false, false), x.clone(), params()),
        &t(&[1, 1], &[30.375]),
    );
    // 3, 2, 1: c1 = 4.5, h1 = 13.5; c2 = 0.5·4.5 + 1·(2 + 6.75) = 11, h2 = 22;
    // c3 = 0.25·11 + 0.5·12 = 8.75, h3 = 8.75.
    assert_close(
        &infer(&lstm(true, true), x.clone(), params()),
        &t(&[1, 3, 1], &[13.5, 22.0, 8.75]),
    );
    // The default bias starts the forget gate open (Keras' unit_forget_bias).
    let specs = LSTM::new("lstm", 2).params(&[3, 5]).unwrap();
    let names: Vec<(&str, &[usize], Initializer)> = specs
        .iter()
        .map(|p| (p.name.as_str(), p.dims.as_slice(), p.init))
        .collect();
    assert_eq!(
        names,
        [
            (
                "lstm/lstm_cell/kernel",
                &[5, 8][..],
                Initializer::GlorotUniform
            ),
            (
                "lstm/lstm_cell/recurrent_kernel",
                &[2, 8][..],
                Initializer::Orthogonal
            ),
            ("lstm/lstm_cell/bias", &[8][..], Initializer::ForgetBiasOne),
        ]
    );
    let mut rng = strata_runtime::random::Rng::new(0);
    let bias = Initializer::ForgetBiasOne
        .sample(&[8], 8, 8, &mut rng)
        .unwrap();
    assert_eq!(
        bias.iter().copied().collect::<Vec<f32>>(),
        [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    );
    let zeros = LSTM {
        unit_forget_bias: false,
        ..LSTM::new("lstm", 2)
    };
    assert_eq!(zeros.params(&[3, 5]).unwrap()[2].init, Initializer::Zeros);
}

#[test]
fn gru_by_hand_reset_after_and_before() {
    // Linear activations, one unit, gates z, r, h: z = x/2, r = x + h/2; reset after the
    // product: h~ = x + r·(h + 0.5) (the recurrent bias); before: h~ = x + 0.5 + (r·h)·1.
    let gru = |reset_after, return_sequences, go_backwards| GRU {
        activation: Activation::Linear,
        recurrent_activation: Activation::Linear,
        reset_after,
        return_sequences,
        go_backwards,
        ..GRU::new("gru", 1)
    };
    let kernels = || vec![t(&[1, 3], &[0.5, 1.0, 1.0]), t(&[1, 3], &[0.0, 0.5, 1.0])];
    let after = || {
        let mut p = kernels();
        p.push(t(&[2, 3], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.5]));
        p
    };
    let before = || {
        let mut p = kernels();
        p.push(t(&[3], &[0.0, 0.0, 0.5]));
        p
    };
    let x = t(&[1, 3, 1], &[1.0, 0.5, -1.0]);
    // h1 = 0.5·1.5 = 0.75; h2 = 0.25·0.75 + 0.75·(0.5 + 0.875·1.25) = 1.3828125; h3 =
    // -0.5·h2 + 1.5·(-1 - 0.30859375·1.8828125).
    assert_close(
        &infer(&gru(true, true, false), x.clone(), after()),
        &t(&[1, 3, 1], &[0.75, 1.382_812_5, -3.062_942_5]),
    );
    assert_close(
        &infer(&gru(true, false, true), x.clone(), after()),
        &t(&[1, 1], &[1.562_027]),
    );
    // Before: h2 = 0.25·0.75 + 0.75·(1 + 0.875·0.75) = 1.4296875.
    assert_close(
        &infer(&gru(false, true, false), x.clone(), before()),
        &t(&[1, 3, 1], &[0.75, 1.429_687_5, -2.076_370_2]),
    );
    let dims = |g: GRU| -> Vec<Vec<usize>> {
        g.params(&[4, 3])
            .unwrap()
            .into_iter()
            .map(|p| p.dims)
            .collect()
    };
    assert_eq!(
        dims(GRU::new("gru", 2)),
        [vec![3, 6], vec![2, 6], vec![2, 6]]
    );
    assert_eq!(
        dims(GRU {
            reset_after: false,
            ..GRU::new("gru", 2)
        }),
        [vec![3, 6], vec![2, 6], vec![6]]
    );
}

#[test]
fn recurrent_layers_refuse_what_they_cannot_take() {
    let lstm = LSTM::new("lstm", 2);
    let e = lstm.output_shape(&[5]).unwrap_err().to_string();
    assert!(
        e.contains("lstm (LSTM)") && e.contains("(steps, channels)"),
        "{e}"
    );
    assert!(lstm.output_shape(&[2, 3, 4]).is_err());
    // With `return_state` a call gives the output, then the state (Keras' order).
    let state = GRU {
        return_state: true,
        ..GRU::new("gru", 2)
    };
    assert_eq!(state.output_shape(&[3, 4]).unwrap(), [2]);
    assert_eq!(
        state.call_output_shapes(&[&[3, 4]]).unwrap(),
        [vec![2], vec![2]]
    );
    let lstm_states = LSTM {
        return_state: true,
        return_sequences: true,
        ..LSTM::new("lstm", 2)
    };
    assert_eq!(
        lstm_states.call_output_shapes(&[&[3, 4]]).unwrap(),
        [vec![3, 2], vec![2], vec![2]]
    );
    let dropout = SimpleRNN {
        recurrent_dropout: 1.5,
        ..SimpleRNN::new("simple_rnn", 2)
    };
    let e = dropout.output_shape(&[3, 4]).unwrap_err().to_string();
    assert!(e.contains("recurrent_dropout"), "{e}");
    // The forward pass checks too: a typed error, no graph.
    let mut g = Graph::new("layer");
    let x = g.parameter(TensorType::new(DType::F32, [1, 5]));
    let mut cx = Forward::new(&mut g, false, None);
    assert!(lstm.forward(&mut cx, x, &[]).is_err());
    // Weights of the wrong shapes, given by hand: a typed error, never a panic.
    let mut g = Graph::new("layer");
    let x = g.parameter(TensorType::new(DType::F32, [1, 3, 4]));
    let w: Vec<_> = [vec![4, 6], vec![2, 6], vec![6]]
        .into_iter()
        .map(|d| g.parameter(TensorType::new(DType::F32, d)))
        .collect();
    let mut cx = Forward::new(&mut g, false, None);
    assert!(GRU::new("gru", 2).forward(&mut cx, x, &w).is_err());
    assert!(LSTM::new("lstm", 2).forward(&mut cx, x, &w).is_err());
}

#[test]
fn wrappers_refuse_what_they_cannot_take() {
    // What `model!` refuses at compile time, a layer built by hand refuses when built.
    let backwards = Bidirectional::new(
        "bidirectional",
        GRU {
            go_backwards: true,
            ..GRU::new("gru", 2)
        },
    );
    let e = backwards.output_shape(&[3, 4]).unwrap_err().to_string();
    assert!(
        e.contains("bidirectional (Bidirectional)") && e.contains("`go_backwards = false`"),
        "{e}"
    );
    let bi = Bidirectional::new("bidirectional", LSTM::new("lstm", 2));
    let e = bi.output_shape(&[5]).unwrap_err().to_string();
    assert!(e.contains("(steps, channels)"), "{e}");
    assert_eq!(bi.output_shape(&[3, 4]).unwrap(), [4]);
    let td = TimeDistributed::new(
        "time_distributed",
        Conv2D::new("conv2d", 2, [3, 3], Activation::Linear),
    );
    let e = td.output_shape(&[5]).unwrap_err().to_string();
    assert!(e.contains("(timesteps, ...) (rank >= 2)"), "{e}");
    let e = td.output_shape(&[4, 6]).unwrap_err().to_string();
    assert!(e.contains("each step (height, width, channels)"), "{e}");
    assert_eq!(td.output_shape(&[4, 6, 6, 1]).unwrap(), [4, 4, 4, 2]);
    let bad = LSTM {
        units: 0,
        ..LSTM::new("lstm", 2)
    };
    let e = Bidirectional::new("bidirectional", bad)
        .output_shape(&[3, 4])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`units` must be at least 1"), "{e}");
    // The forward pass checks too: a typed error, no graph; a wrong number of weights is
    // one as well.
    let mut g = Graph::new("layer");
    let x = g.parameter(TensorType::new(DType::F32, [1, 5]));
    let mut cx = Forward::new(&mut g, false, None);
    assert!(bi.forward(&mut cx, x, &[]).is_err());
    assert!(td.forward(&mut cx, x, &[]).is_err());
    let x = cx.g.parameter(TensorType::new(DType::F32, [1, 3, 4]));
    let w = cx.g.parameter(TensorType::new(DType::F32, [4, 8]));
    assert!(bi.forward(&mut cx, x, &[w]).is_err());
}

#[test]
fn orthogonal_initializer_is_orthogonal() {
    let mut rng = strata_runtime::random::Rng::new(3);
    for dims in [[4usize, 4], [3, 6], [6, 3]] {
        let w = Initializer::Orthogonal
            .sample(&dims, 1, 1, &mut rng)
            .unwrap();
        let (r, c) = (dims[0], dims[1]);
        let w: Vec<f64> = w.iter().map(|&v| v as f64).collect();
        // Orthonormal columns (tall, or square) or rows (wide): the Gram matrix of the
        // shorter side is the identity.
        let at = |i: usize, j: usize| w[i * c + j];
        let (n, len) = (r.min(c), r.max(c));
        let entry = |a: usize, k: usize| if r >= c { at(k, a) } else { at(a, k) };
        for a in 0..n {
            for b in 0..n {
                let d: f64 = (0..len).map(|k| entry(a, k) * entry(b, k)).sum();
                let want = if a == b { 1.0 } else { 0.0 };
                assert!((d - want).abs() < 1e-5, "{dims:?}: <{a}, {b}> = {d}");
            }
        }
    }
}

#[test]
fn recurrent_input_dropout_masks_features_alike_at_every_step_in_training_only() {
    // Identity kernel, no recurrence: each step's output is its (dropped) input.
    let rnn = SimpleRNN {
        activation: Activation::Linear,
        return_sequences: true,
        dropout: 0.5,
        ..SimpleRNN::new("simple_rnn", 4)
    };
    let mut eye = vec![0.0; 16];
    for i in 0..4 {
        eye[i * 5] = 1.0;
    }
    let params = || vec![t(&[4, 4], &eye), t(&[4, 4], &[0.0; 16]), t(&[4], &[0.0; 4])];
    let x = t(&[4, 3, 4], &[1.0; 48]);
    assert_close(&infer(&rnn, x.clone(), params()), &x);
    let y = run(&rnn, true, x, params())
        .remove(0)
        .to_vec::<f32>()
        .unwrap();
    for b in 0..4 {
        for f in 0..4 {
            let at = |s: usize| y[(b * 3 + s) * 4 + f];
            assert!(at(0) == 0.0 || at(0) == 2.0, "{y:?}");
            assert_eq!((at(1), at(2)), (at(0), at(0)), "one mask for every step");
        }
    }
    assert!(y.contains(&0.0) && y.contains(&2.0), "{y:?}");
}

#[test]
fn recurrent_dropout_masks_the_state_alike_at_every_step_in_training_only() {
    // No input product, the identity as recurrent kernel, a bias of one: h₁ = 1 and
    // hₜ₊₁ = m ⊙ hₜ + 1, so each unit's mask m shows in h₂ - 1 and stays for h₃.
    let rnn = SimpleRNN {
        activation: Activation::Linear,
        return_sequences: true,
        recurrent_dropout: 0.5,
        ..SimpleRNN::new("simple_rnn", 8)
    };
    let mut eye = vec![0.0; 64];
    for i in 0..8 {
        eye[i * 9] = 1.0;
    }
    let params = || vec![t(&[2, 8], &[0.0; 16]), t(&[8, 8], &eye), t(&[8], &[1.0; 8])];
    let x = t(&[16, 3, 2], &[1.0; 96]);
    let plain: Vec<f32> = (0..16)
        .flat_map(|_| [[1.0; 8], [2.0; 8], [3.0; 8]])
        .flatten()
        .collect();
    assert_close(&infer(&rnn, x.clone(), params()), &t(&[16, 3, 8], &plain));
    let y = run(&rnn, true, x, params())
        .remove(0)
        .to_vec::<f32>()
        .unwrap();
    let mut dropped = 0;
    for b in 0..16 {
        for u in 0..8 {
            let at = |s: usize| y[(b * 3 + s) * 8 + u];
            assert_eq!(at(0), 1.0, "{y:?}");
            let m = at(1) - 1.0;
            assert!(
                m == 0.0 || m == 2.0,
                "a kept unit is scaled by 1 / (1 - rate): {y:?}"
            );
            assert_eq!(at(2), m * at(1) + 1.0, "one mask for every step");
            dropped += usize::from(m == 0.0);
        }
    }
    assert!(
        (24..=104).contains(&dropped),
        "{dropped} of 128 dropped at rate 0.5"
    );
}

#[test]
fn recurrent_dropout_draws_one_state_mask_per_gate() {
    // An LSTM whose gates all read the same state: with the same mask for every gate,
    // equal recurrent blocks would give equal gate inputs; per-gate masks differ.
    let lstm = LSTM {
        activation: Activation::Linear,
        recurrent_activation: Activation::Linear,
        return_sequences: true,
        recurrent_dropout: 0.5,
        use_bias: false,
        ..LSTM::new("lstm", 4)
    };
    // Kernel: every gate's input product is 1; recurrent kernel: the identity per gate.
    let kernel = vec![1.0; 16];
    let mut rec = vec![0.0; 64];
    for i in 0..4 {
        for gate in 0..4 {
            rec[i * 16 + gate * 4 + i] = 1.0;
        }
    }
    let x = t(&[8, 2, 1], &[1.0; 16]);
    let plain = infer(
        &lstm,
        x.clone(),
        vec![t(&[1, 16], &kernel), t(&[4, 16], &rec)],
    );
    let y = run(
        &lstm,
        true,
        x,
        vec![t(&[1, 16], &kernel), t(&[4, 16], &rec)],
    )
    .remove(0)
    .to_vec::<f32>()
    .unwrap();
    // Step one has h₀ = 0: no mask shows. Step two: c₂ = (1 + m_f h₁) c₁ + (1 + m_i h₁)(1 + m_c h₁),
    // h₂ = (1 + m_o h₁) c₂ with h₁ = 1, c₁ = 1: the masks matter, and differ between gates
    // somewhere among 32 units.
    let plain = plain.to_vec::<f32>().unwrap();
    assert_eq!(&y[..4], &plain[..4], "the first step reads h₀ = 0");
    let with_one_mask = |m: f32| {
        let c2 = 1.0 + m + (1.0 + m) * (1.0 + m);
        (1.0 + m) * c2
    };
    let per_gate = (0..8)
        .flat_map(|b| (0..4).map(move |u| (b, u)))
        .filter(|&(b, u)| {
            let h2 = y[(b * 2 + 1) * 4 + u];
            h2 != with_one_mask(0.0) && h2 != with_one_mask(2.0)
        })
        .count();
    assert!(per_gate > 0, "{y:?}");
}

/// The recurrent layers train through the scan's reverse mode: each one's gradient with
/// respect to its input and every weight matches central differences, with sequences
/// returned or not, read backwards, and (GRU) either placement of the reset gate; and so
/// do the wrappers (Bidirectional, TimeDistributed) around them and around Dense.
#[test]
fn recurrent_layers_are_differentiable_through_their_scan() {
    use strata_runtime::autodiff::gradcheck::GradCheck;
    fn f64s(dims: &[usize], seed: u64) -> Tensor {
        let a = strata_runtime::random::normal(dims, 0.0, 0.7, seed).unwrap();
        Tensor::F64(a.mapv(|v| v as f64))
    }
    let cases: Vec<(Box<dyn Layer>, bool)> = vec![
        (
            Box::new(SimpleRNN {
                return_sequences: true,
                ..SimpleRNN::new("simple_rnn", 3)
            }),
            false,
        ),
        (Box::new(LSTM::new("lstm", 3)), false),
        (
            Box::new(LSTM {
                return_sequences: true,
                go_backwards: true,
                ..LSTM::new("lstm", 2)
            }),
            false,
        ),
        (
            Box::new(LSTM {
                dropout: 0.3,
                ..LSTM::new("lstm", 2)
            }),
            true,
        ),
        (
            Box::new(LSTM {
                dropout: 0.3,
                recurrent_dropout: 0.4,
                return_sequences: true,
                ..LSTM::new("lstm", 2)
            }),
            true,
        ),
        (
            Box::new(SimpleRNN {
                recurrent_dropout: 0.4,
                ..SimpleRNN::new("simple_rnn", 3)
            }),
            true,
        ),
        (
            Box::new(GRU {
                recurrent_dropout: 0.4,
                ..GRU::new("gru", 2)
            }),
            true,
        ),
        (
            Box::new(GRU {
                reset_after: false,
                use_bias: false,
                dropout: 0.2,
                recurrent_dropout: 0.4,
                ..GRU::new("gru", 2)
            }),
            true,
        ),
        (Box::new(GRU::new("gru", 3)), false),
        (
            Box::new(GRU {
                reset_after: false,
                return_sequences: true,
                ..GRU::new("gru", 2)
            }),
            false,
        ),
        // The wrappers: both copies' weights, the backward sequence put back in order,
        // every way of joining the two; a layer folded over the steps.
        (
            Box::new(Bidirectional::new(
                "bidirectional",
                LSTM {
                    return_sequences: true,
                    ..LSTM::new("lstm", 2)
                },
            )),
            false,
        ),
        (
            Box::new(Bidirectional {
                merge_mode: MergeMode::Sum,
                ..Bidirectional::new("bidirectional", GRU::new("gru", 2))
            }),
            false,
        ),
        (
            Box::new(Bidirectional {
                merge_mode: MergeMode::Mul,
                ..Bidirectional::new(
                    "bidirectional",
                    SimpleRNN {
                        return_sequences: true,
                        ..SimpleRNN::new("simple_rnn", 2)
                    },
                )
            }),
            false,
        ),
        (
            Box::new(Bidirectional {
                merge_mode: MergeMode::Ave,
                ..Bidirectional::new("bidirectional", LSTM::new("lstm", 2))
            }),
            false,
        ),
        (
            Box::new(TimeDistributed::new(
                "time_distributed",
                Dense::new("dense", 2, Activation::Tanh),
            )),
            false,
        ),
    ];
    for (i, (layer, training)) in cases.iter().enumerate() {
        let x = [2usize, 4, 3];
        let specs = layer.params(&x[1..]).unwrap();
        let mut inputs = vec![f64s(&x, 10 * i as u64)];
        inputs.extend(
            specs
                .iter()
                .enumerate()
                .map(|(k, p)| f64s(&p.dims, (100 + 10 * i + k) as u64)),
        );
        inputs.push(Tensor::from_vec(&[2], vec![3i32, 4]).unwrap());
        let n = specs.len();
        let wrt: Vec<usize> = (0..1 + n).collect();
        GradCheck::default()
            .run(&inputs, &wrt, |g, p| {
                let mut cx = Forward::new(g, *training, Some(p[1 + n]));
                layer.forward(&mut cx, p[0], &p[1..1 + n])
            })
            .unwrap_or_else(|e| panic!("{} (case {i}): {e}", layer.name()));
    }
}
