//! Every syntax form of `model!` compiles and gives the model it says, and the macro's
//! compile-time shapes and parameters agree with the runtime layers' (`Model::build`
//! checks the declared `OUTPUT_SHAPE` and `PARAMS`; `agrees` makes that a test failure).
//! Both sides apply the same `strata-spec` rules, so what this still catches is the
//! expansion writing a runtime struct whose fields give other arguments than were checked.

use strata::backend::native::NativeBackend;
use strata::backend::Backend;
use strata::ir::{DType, Graph, TensorType};
use strata::model;
use strata::nn::{Activation, Architecture, Forward, Initializer, Layer, Padding};
use strata::Model;
use strata::Tensor;

/// The model is built, and its runtime shapes and parameters are what the macro declared.
#[track_caller]
fn agrees<A: Architecture>(m: &mut Model<A>) {
    if let Some(input) = A::INPUT_SHAPE {
        // Model::new swallowed any build error; building again reports it.
        m.build(input).unwrap();
    }
    assert!(m.is_built(), "{}", m.summary());
    if let Some(out) = A::OUTPUT_SHAPE {
        assert_eq!(m.output_shape(), Some(out));
    }
    if let Some(declared) = A::PARAMS {
        assert_eq!(declared.len(), m.params().len());
        for (d, p) in declared.iter().zip(m.params()) {
            assert!(d.matches(p), "{d:?} vs {p:?}");
        }
    }
}

/// One forward pass of a built model on the native backend: the output, then the new
/// values of updated state.
fn run<A: Architecture>(m: &Model<A>, x: Tensor, training: bool) -> Vec<Tensor> {
    let mut g = Graph::new("forward");
    let xv = g.parameter(x.ty());
    let weights: Vec<Tensor> = m.weights().into_iter().map(|(_, w)| w).collect();
    let pv: Vec<_> = weights.iter().map(|w| g.parameter(w.ty())).collect();
    let key = g.parameter(TensorType::new(DType::I32, [2]));
    let mut cx = Forward::new(&mut g, training, Some(key));
    let y = m.forward(&mut cx, xv, &pv).unwrap();
    let mut outs = vec![y];
    outs.extend(cx.updates().iter().map(|&(_, new)| new));
    g.set_outputs(outs).unwrap();
    let mut inputs = vec![x];
    inputs.extend(weights);
    inputs.push(Tensor::from_vec(&[2], vec![1i32, 2]).unwrap());
    NativeBackend::new().run(&g, &inputs).unwrap()
}

fn filled(dims: &[usize], v: f32) -> Tensor {
    let n = dims.iter().product();
    Tensor::from_vec(dims, vec![v; n]).unwrap()
}

#[test]
fn tutorial_with_input() {
    let mut m = model![
        Input(784),
        Dense(128, relu),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    agrees(&mut m);
    assert_eq!(m.output_shape(), Some(&[10][..]));
    let names: Vec<String> = m.weights().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "dense/kernel",
            "dense/bias",
            "dense_1/kernel",
            "dense_1/bias",
            "dense_2/kernel",
            "dense_2/bias"
        ]
    );
    let y = run(&m, filled(&[2, 784], 0.5), false).remove(0);
    assert_eq!(y.dims(), [2, 10]);
    for row in y.to_vec::<f32>().unwrap().chunks(10) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "softmax rows");
    }
}

#[test]
fn tutorial_keras_form_equals_input_form() {
    let mut keras = model![
        Dense(128, activation = relu, input_shape = 784),
        Dense(64, activation = relu),
        Dense(10, activation = softmax),
    ];
    agrees(&mut keras);
    let plain = model![
        Input(784),
        Dense(128, relu),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    assert_eq!(keras.summary(), plain.summary());
    assert_eq!(keras.weights(), plain.weights(), "same seed, same weights");
    // Keras' tuple and string spellings.
    // The spelling: activation by position, input_shape by keyword.
    let mixed = model![
        Dense(128, relu, input_shape = 784),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    assert_eq!(mixed.summary(), plain.summary());
    let quoted = model![
        Dense(128, activation = "relu", input_shape = (784,)),
        Dense(64, activation = "relu"),
        Dense(10, activation = "softmax")
    ];
    assert_eq!(quoted.summary(), plain.summary());
}

#[test]
fn deferred_input_builds_from_the_first_data() {
    let mut m = model![Dense(128, relu), Dense(64, relu), Dense(10, softmax)];
    assert!(!m.is_built());
    assert!(m.summary().contains("0 (unbuilt)"));
    m.build(&[784]).unwrap();
    agrees(&mut m);
    assert_eq!(m.output_shape(), Some(&[10][..]));
    assert!(m.summary().contains("Total params: 109,386"));
    assert!(m.build(&[100]).is_err(), "already built for 784");

    // After a Flatten the rest is known at compile time, even without an input.
    let mut m = model![Flatten, Dense(10, softmax)];
    m.build(&[4, 4]).unwrap();
    agrees(&mut m);
}

#[test]
fn keyword_arguments_and_defaults() {
    let mut m = model![
        Input(32),
        Dense(
            64,
            activation = relu,
            use_bias = false,
            kernel_initializer = he_normal
        ),
        Dense(8, tanh, true, lecun_normal, ones, name = "head",),
    ];
    agrees(&mut m);
    let layers = m.arch().layers();
    assert_eq!(layers[0].name(), "dense");
    assert_eq!(layers[1].name(), "head");
    let p = m.params();
    assert_eq!(p.len(), 3, "no bias on the first layer");
    assert_eq!(
        (p[0].name.as_str(), p[0].init),
        ("dense/kernel", Initializer::HeNormal)
    );
    assert_eq!(p[1].init, Initializer::LecunNormal);
    assert_eq!(
        (p[2].name.as_str(), p[2].init),
        ("head/bias", Initializer::Ones)
    );
}

#[test]
fn convolutional_model() {
    let mut m = model![
        Input((28, 28, 1)),
        Conv2D(
            32,
            kernel_size = 3,
            strides = 1,
            padding = same,
            activation = relu
        ),
        MaxPooling2D(2),
        Conv2D(16, (3, 3), activation = relu),
        MaxPool2D(pool_size = (2, 2), strides = 2, padding = valid),
        Conv2D(
            8,
            3,
            dilation_rate = 2,
            padding = same,
            groups = 2,
            use_bias = false
        ),
        AveragePooling2D(pool_size = 2, strides = 1, padding = same),
        AvgPool2D(2, None),
        BatchNormalization(),
        GlobalAveragePooling2D(),
        Dropout(0.2),
        Dense(10, softmax),
    ];
    agrees(&mut m);
    let shapes = [
        vec![28, 28, 32],
        vec![14, 14, 32],
        vec![12, 12, 16],
        vec![6, 6, 16],
        vec![6, 6, 8],
        vec![6, 6, 8],
        vec![3, 3, 8],
        vec![3, 3, 8],
        vec![8],
    ];
    let mut shape = vec![28, 28, 1];
    for (layer, want) in m.arch().layers().iter().zip(&shapes) {
        shape = layer.output_shape(&shape).unwrap();
        assert_eq!(&shape, want, "{}", layer.name());
    }
    let y = run(&m, filled(&[2, 28, 28, 1], 0.5), false);
    assert_eq!(y[0].dims(), [2, 10]);
    assert_eq!(y.len(), 1, "inference updates nothing");
    let y = run(&m, filled(&[2, 28, 28, 1], 0.5), true);
    assert_eq!(y.len(), 3, "training updates the moving mean and variance");
    let state: Vec<&str> = m
        .params()
        .iter()
        .filter(|p| !p.trainable)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        state,
        [
            "batch_normalization/moving_mean",
            "batch_normalization/moving_variance"
        ]
    );
    assert!(m.summary().contains("Non-trainable params: 16 (64.00 B)"));
}

#[test]
fn global_max_pooling() {
    let mut m = model![
        Input((6, 6, 2)),
        Conv2D(3, 3, padding = same),
        GlobalMaxPooling2D(),
        Dense(2, softmax),
    ];
    agrees(&mut m);
    assert_eq!(m.arch().layers()[1].output_shape(&[6, 6, 3]).unwrap(), [3]);
    let y = run(&m, filled(&[2, 6, 6, 2], 0.5), false);
    assert_eq!(y[0].dims(), [2, 2]);

    // The alias, keepdims, and an input known only from the first data.
    let mut kept = model![
        Conv2D(4, 3),
        GlobalMaxPool2D(keepdims = true, name = "peak"),
        Flatten(),
    ];
    // Known at compile time all the same: the pooled channels are the filters.
    assert_eq!(declared_output(&kept), Some(&[4][..]));
    kept.build(&[5, 5, 1]).unwrap();
    agrees(&mut kept);
    assert_eq!(kept.arch().layers()[1].name(), "peak");
}

#[test]
fn sequence_layers() {
    let mut m = model![
        Input((16, 3)),
        Conv1D(8, 3, padding = same, activation = relu),
        MaxPooling1D(2),
        Conv1D(
            filters = 4,
            kernel_size = (3,),
            dilation_rate = 2,
            groups = 2
        ),
        AvgPool1D(pool_size = 2, strides = 1, padding = same),
        GlobalAveragePooling1D(),
        Dense(2, softmax),
    ];
    // 16 same → 16, pooled → 8, a 3-kernel dilated to 5 → 4, pooled with stride 1 → 4.
    assert_eq!(declared_output(&m), Some(&[2][..]));
    agrees(&mut m);
    let shapes: Vec<Vec<usize>> = [[16, 3], [16, 8], [8, 8], [4, 4]]
        .iter()
        .zip(m.arch().layers())
        .map(|(input, l)| l.output_shape(input).unwrap())
        .collect();
    assert_eq!(shapes, [vec![16, 8], vec![8, 8], vec![4, 4], vec![4, 4]]);
    assert_eq!(
        m.params()[2].dims,
        [3, 4, 4],
        "(kernel, in / groups, filters)"
    );
    let y = run(&m, filled(&[2, 16, 3], 0.5), false);
    assert_eq!(y[0].dims(), [2, 2]);

    let mut kept = model![
        Input((6, 2)),
        MaxPool1D(3, strides = None),
        GlobalMaxPool1D(keepdims = true),
        Flatten(),
    ];
    assert_eq!(declared_output(&kept), Some(&[2][..]));
    agrees(&mut kept);

    // Causal padding keeps every step, like same.
    let mut causal = model![
        Input((10, 2)),
        Conv1D(3, 4, padding = causal, dilation_rate = 2),
    ];
    assert_eq!(declared_output(&causal), Some(&[10, 3][..]));
    agrees(&mut causal);
}

#[test]
fn depthwise_separable_transposed_and_group_normalization() {
    let mut m = model![
        Input((8, 8, 4)),
        DepthwiseConv2D(3, depth_multiplier = 2, padding = same),
        SeparableConv2D(8, (3, 3), strides = 2, activation = relu),
        GroupNormalization(groups = 4),
        Conv2DTranspose(4, 3, strides = 2, padding = same, output_padding = 1),
        Conv2DTranspose(2, (2, 2), output_padding = None),
        GlobalAveragePooling2D(),
    ];
    // 8x8x4 → 8x8x8 → (8 - 3) / 2 + 1 = 3: 3x3x8 → (3 - 1)·2 + 3 - 2 + 1 = 6: 6x6x4 →
    // 6 + 1 = 7: 7x7x2 → 2.
    assert_eq!(declared_output(&m), Some(&[2][..]));
    agrees(&mut m);
    let dims: Vec<(&str, Vec<usize>)> = m
        .params()
        .iter()
        .map(|p| (p.name.as_str(), p.dims.clone()))
        .collect();
    assert_eq!(
        dims[..6],
        [
            ("depthwise_conv2d/kernel", vec![3, 3, 4, 2]),
            ("depthwise_conv2d/bias", vec![8]),
            ("separable_conv2d/depthwise_kernel", vec![3, 3, 8, 1]),
            ("separable_conv2d/pointwise_kernel", vec![1, 1, 8, 8]),
            ("separable_conv2d/bias", vec![8]),
            ("group_normalization/gamma", vec![8]),
        ]
    );
    assert_eq!(dims[7], ("conv2d_transpose/kernel", vec![3, 3, 4, 8]));
    let y = run(&m, filled(&[2, 8, 8, 4], 0.5), false);
    assert_eq!(y[0].dims(), [2, 2]);
}

/// The output shape `model!` worked out at compile time.
fn declared_output<A: Architecture>(_: &Model<A>) -> Option<&'static [usize]> {
    A::OUTPUT_SHAPE
}

#[test]
fn reshape_flatten_and_rank3_dense() {
    let mut m = model![
        Input(784),
        Reshape((28, 28, 1)),
        Conv2D(4, 5, strides = 2),
        Flatten(),
        Reshape(target_shape = (-1, 12)),
        Dense(3),
        LayerNormalization(),
        Flatten,
    ];
    agrees(&mut m);
    // Conv2D: (28 - 5) / 2 + 1 = 12 → 12·12·4 = 576 = 48 x 12; Dense acts on the last axis.
    assert_eq!(m.output_shape(), Some(&[144][..]));
    let y = run(&m, filled(&[1, 784], 0.5), false);
    assert_eq!(y[0].dims(), [1, 144]);

    let mut rank3 = model![Input((5, 3)), Dense(4)];
    agrees(&mut rank3);
    assert_eq!(rank3.output_shape(), Some(&[5, 4][..]));
}

#[test]
fn embedding_takes_integer_ids() {
    let mut m = model![
        Embedding(1000, 16, input_shape = 12),
        LayerNormalization(epsilon = 1e-5),
        Flatten(),
        Dense(1, sigmoid),
    ];
    agrees(&mut m);
    assert_eq!(m.input_dtype(), DType::I32);
    let ids = Tensor::from_vec(&[2, 12], (0..24).collect::<Vec<i32>>()).unwrap();
    let y = run(&m, ids, false);
    assert_eq!(y[0].dims(), [2, 1]);

    let mut deferred = model![Embedding(
        input_dim = 50,
        output_dim = 4,
        embeddings_initializer = zeros
    )];
    deferred.build(&[7]).unwrap();
    agrees(&mut deferred);
    assert_eq!(deferred.output_shape(), Some(&[7, 4][..]));
}

#[test]
fn every_activation_by_name() {
    let m = model![
        Input(4),
        Activation(linear),
        Activation(relu),
        Activation(sigmoid),
        Activation(tanh),
        Activation(softmax),
        Activation(gelu),
        Activation(elu),
        Activation(selu),
        Activation(leaky_relu),
        Activation(swish),
        Activation(silu),
        Activation(softplus),
        Activation(activation = "relu"),
        Dense(2, activation = None),
    ];
    let names = [
        "linear",
        "relu",
        "sigmoid",
        "tanh",
        "softmax",
        "gelu",
        "elu",
        "selu",
        "leaky_relu",
        "swish",
        "swish",
        "softplus",
        "relu",
    ];
    let arch = m.arch();
    let written: Vec<&str> = [
        &arch.activation,
        &arch.activation_1,
        &arch.activation_2,
        &arch.activation_3,
        &arch.activation_4,
        &arch.activation_5,
        &arch.activation_6,
        &arch.activation_7,
        &arch.activation_8,
        &arch.activation_9,
        &arch.activation_10,
        &arch.activation_11,
        &arch.activation_12,
    ]
    .iter()
    .map(|a| a.activation.name())
    .collect();
    assert_eq!(written, names);
    assert_eq!(arch.dense.activation, Activation::Linear);
    assert_eq!(arch.activation.class(), "Activation");
}

#[test]
fn every_initializer_by_name() {
    let m = model![
        Input(3),
        Dense(
            2,
            kernel_initializer = glorot_uniform,
            bias_initializer = zeros
        ),
        Dense(
            2,
            kernel_initializer = glorot_normal,
            bias_initializer = ones
        ),
        Dense(2, kernel_initializer = he_normal),
        Dense(2, kernel_initializer = he_uniform),
        Dense(2, kernel_initializer = lecun_normal),
        Dense(2, kernel_initializer = uniform),
        Dense(2, kernel_initializer = "random_uniform"),
    ];
    let inits: Vec<&str> = m
        .params()
        .iter()
        .filter(|p| p.name.ends_with("kernel"))
        .map(|p| p.init.name())
        .collect();
    assert_eq!(
        inits,
        [
            "glorot_uniform",
            "glorot_normal",
            "he_normal",
            "he_uniform",
            "lecun_normal",
            "random_uniform",
            "random_uniform"
        ]
    );
    assert_eq!(m.params()[3].init, Initializer::Ones);
}

model! {
    /// A small convolutional classifier for 28x28 greyscale images.
    pub struct Mnist {
        Input(shape = (28, 28, 1)),
        Conv2D(8, kernel_size = 3, padding = same, activation = relu),
        MaxPooling2D(pool_size = 2),
        Flatten,
        /// Regularisation, training only.
        Dropout(rate = 0.5),
        Dense(10, softmax, name = "classifier"),
    }
}

#[test]
fn named_form_declares_a_reusable_type() {
    let mut m = Mnist::model();
    agrees(&mut m);
    assert_eq!(m.name(), "mnist");
    assert!(m.summary().starts_with("Model: \"mnist\""));
    assert_eq!(Mnist::INPUT_SHAPE, Some(&[28, 28, 1][..]));
    assert_eq!(Mnist::OUTPUT_SHAPE, Some(&[10][..]));
    let arch = Mnist::default();
    assert_eq!(arch.conv2d.padding, Padding::Same);
    assert_eq!(arch.classifier.units, 10);
    assert_eq!(arch.dropout.rate, 0.5);
    let decl: Vec<(&str, &[usize])> = Mnist::PARAMS
        .unwrap()
        .iter()
        .map(|p| (p.name, p.dims))
        .collect();
    assert_eq!(
        decl,
        [
            ("conv2d/kernel", &[3, 3, 1, 8][..]),
            ("conv2d/bias", &[8][..]),
            ("classifier/kernel", &[1568, 10][..]),
            ("classifier/bias", &[10][..]),
        ]
    );
    // Dropout is active in training only.
    let x = filled(&[1, 28, 28, 1], 1.0);
    let inference = run(&m, x.clone(), false).remove(0);
    assert_eq!(inference, run(&m, x.clone(), false)[0]);
    assert_ne!(inference, run(&m, x, true)[0]);
}

#[test]
fn forward_rejects_foreign_parameter_groups() {
    let m = model![Input(2), Dense(2), Dense(2)];
    let mut g = Graph::new("bad");
    let x = g.parameter(TensorType::new(DType::F32, [1, 2]));
    let mut cx = Forward::new(&mut g, false, None);
    let err = m.arch().forward(&mut cx, x, &[&[]]).unwrap_err();
    assert!(err
        .to_string()
        .contains("1 parameter groups for a model of 2 layers"));
}

// Issue 14: shape and activation layers.

#[test]
fn shape_and_activation_layers() {
    let mut m = model![
        Input((4, 4, 3)),
        Rescaling(0.5, offset = -1),
        ZeroPadding2D(((1, 0), (2, 1))),
        Cropping2D((1, 2)),
        UpSampling2D(size = (2, 1)),
        UpSampling2D((1, 2), interpolation = bilinear),
        PReLU(shared_axes = (1, 2)),
        LeakyReLU(),
        ReLU(6),
        Conv2D(2, 1),
        Reshape((36, 2)),
        Permute((2, 1)),
        Softmax(axis = 1),
        Flatten(),
        Dense(4),
        RepeatVector(3),
        Softmax(),
    ];
    agrees(&mut m);
    assert_eq!(declared_output(&m), Some(&[3, 4][..]));
    let layers = m.arch().layers();
    // (4, 4, 3) padded to (5, 7, 3), cropped to (3, 3, 3), upsampled to (6, 3, 3).
    assert_eq!(layers[1].output_shape(&[4, 4, 3]).unwrap(), [5, 7, 3]);
    assert_eq!(layers[2].output_shape(&[5, 7, 3]).unwrap(), [3, 3, 3]);
    assert_eq!(layers[3].output_shape(&[3, 3, 3]).unwrap(), [6, 3, 3]);
    assert_eq!(layers[4].output_shape(&[6, 3, 3]).unwrap(), [6, 6, 3]);
    let names: Vec<String> = m.weights().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "p_re_lu/alpha");
    assert_eq!(m.params()[0].dims, [1, 1, 3], "one slope per channel");
    let names: Vec<&str> = layers.iter().map(|l| l.name()).collect();
    assert_eq!(
        &names[..9],
        [
            "rescaling",
            "zero_padding2d",
            "cropping2d",
            "up_sampling2d",
            "up_sampling2d_1",
            "p_re_lu",
            "leaky_re_lu",
            "re_lu",
            "conv2d"
        ]
    );
    let y = run(&m, filled(&[2, 4, 4, 3], 0.5), false).remove(0);
    assert_eq!(y.dims(), [2, 3, 4]);
    for row in y.to_vec::<f32>().unwrap().chunks(4) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
    }
}

#[test]
fn shape_layers_with_an_input_known_only_from_the_first_data() {
    let mut m = model![ZeroPadding2D(), PReLU(), Permute((3, 1, 2)), Flatten(),];
    assert_eq!(declared_output(&m), None);
    m.build(&[2, 3, 1]).unwrap();
    agrees(&mut m);
    assert_eq!(m.output_shape(), Some(&[20][..]));
    assert_eq!(m.params()[0].dims, [4, 5, 1]);
}

// Issue 14: products and attention, in the graph form.

#[test]
fn dot_attention_and_multi_head_attention_in_a_graph() {
    let mut m = model! {
        let x = Input((4, 6));
        let h = MultiHeadAttention(num_heads = 2, key_dim = 3, use_causal_mask = true)(x, x);
        let v = Dense(5, tanh)(x);
        let wide = MultiHeadAttention(3, 2, 4, output_shape = 7, use_bias = false)(h, v, x);
        let a = Attention(use_scale = true, use_causal_mask = true)([h, v, h]);
        let c = Attention(score_mode = concat)([a, a]);
        let steps = Dot(axes = (1, 1), normalize = true)([wide, c]);
        let rows = Dot(axes = -1)([c, v]);
        Concatenate()([Flatten()(steps), Flatten()(rows)])
    };
    agrees(&mut m);
    assert_eq!(m.output_shape(), Some(&[51][..]));
    let params: Vec<(&str, &[usize])> = m
        .params()
        .iter()
        .map(|p| (p.name.as_str(), p.dims.as_slice()))
        .collect();
    assert_eq!(
        params,
        [
            ("multi_head_attention/query/kernel", &[6, 2, 3][..]),
            ("multi_head_attention/query/bias", &[2, 3][..]),
            ("multi_head_attention/key/kernel", &[6, 2, 3][..]),
            ("multi_head_attention/key/bias", &[2, 3][..]),
            ("multi_head_attention/value/kernel", &[6, 2, 3][..]),
            ("multi_head_attention/value/bias", &[2, 3][..]),
            (
                "multi_head_attention/attention_output/kernel",
                &[2, 3, 6][..]
            ),
            ("multi_head_attention/attention_output/bias", &[6][..]),
            ("dense/kernel", &[6, 5][..]),
            ("dense/bias", &[5][..]),
            ("multi_head_attention_1/query/kernel", &[6, 3, 2][..]),
            ("multi_head_attention_1/key/kernel", &[6, 3, 2][..]),
            ("multi_head_attention_1/value/kernel", &[5, 3, 4][..]),
            (
                "multi_head_attention_1/attention_output/kernel",
                &[3, 4, 7][..]
            ),
            ("attention/scale", &[][..]),
            ("attention_1/concat_score_weight", &[][..]),
        ]
    );
    assert_eq!(m.params()[14].init, Initializer::Ones);
    let y = run(&m, filled(&[2, 4, 6], 0.5), false).remove(0);
    assert_eq!(y.dims(), [2, 51]);
}

#[test]
fn recurrent_layers_shapes_and_parameter_counts_as_keras() {
    // Keras' summary counts: SimpleRNN(4) on (5, 3) 3·4 + 4·4 + 4 = 32; LSTM(4) 4·32 = 128;
    // GRU(4), resetting after the product, 3·(3·4 + 4·4 + 2·4) = 108; before it, 96 (Keras
    // 3.15.1 counts the same).
    let mut rnn = model![Input((5, 3)), SimpleRNN(4)];
    assert_eq!(declared_output(&rnn), Some(&[4][..]));
    agrees(&mut rnn);
    assert!(
        rnn.summary().contains("Total params: 32"),
        "{}",
        rnn.summary()
    );
    let mut lstm = model![Input((5, 3)), LSTM(4, return_sequences = true)];
    assert_eq!(declared_output(&lstm), Some(&[5, 4][..]));
    agrees(&mut lstm);
    assert!(
        lstm.summary().contains("Total params: 128"),
        "{}",
        lstm.summary()
    );
    let mut gru = model![Input((5, 3)), GRU(4, go_backwards = true)];
    agrees(&mut gru);
    assert!(
        gru.summary().contains("Total params: 108"),
        "{}",
        gru.summary()
    );
    let mut before = model![Input((5, 3)), GRU(4, reset_after = false)];
    agrees(&mut before);
    assert!(
        before.summary().contains("Total params: 96"),
        "{}",
        before.summary()
    );

    // Stacked, with Keras' positional order and the initializers by name.
    let mut m = model![
        Input((7, 2)),
        LSTM(
            3,
            tanh,
            sigmoid,
            true,
            glorot_uniform,
            orthogonal,
            zeros,
            false,
            return_sequences = true
        ),
        GRU(
            2,
            relu,
            recurrent_initializer = glorot_uniform,
            dropout = 0.1,
            recurrent_dropout = 0.2
        ),
        Dense(1),
    ];
    assert_eq!(declared_output(&m), Some(&[1][..]));
    agrees(&mut m);
    assert_eq!(
        m.params()[2].init,
        Initializer::Zeros,
        "unit_forget_bias = false"
    );
    assert_eq!(m.params()[1].init, Initializer::Orthogonal);
    assert_eq!(m.params()[0].name, "lstm/lstm_cell/kernel");
    let y = run(&m, filled(&[2, 7, 2], 0.5), false);
    assert_eq!(y[0].dims(), [2, 1]);
}

#[test]
fn wrappers_shapes_and_parameter_counts_as_keras() {
    // Keras 3.15.1's counts: Bidirectional(LSTM(4)) on (5, 3) is two LSTMs, 2·128 = 256,
    // its outputs concatenated (8,); Bidirectional(GRU(4), sum) 2·108 = 216; TimeDistributed
    // holds its layer's weights once, Dense(8) on steps of 3 features 3·8 + 8 = 32.
    let mut bi = model![Input((5, 3)), Bidirectional(LSTM(4))];
    assert_eq!(declared_output(&bi), Some(&[8][..]));
    agrees(&mut bi);
    assert!(
        bi.summary().contains("Total params: 256"),
        "{}",
        bi.summary()
    );
    let names: Vec<String> = bi.weights().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names[..4],
        [
            "bidirectional/forward_lstm/lstm_cell/kernel",
            "bidirectional/forward_lstm/lstm_cell/recurrent_kernel",
            "bidirectional/forward_lstm/lstm_cell/bias",
            "bidirectional/backward_lstm/lstm_cell/kernel",
        ]
    );
    let mut sum = model![
        Input((5, 3)),
        Bidirectional(GRU(4, return_sequences = true), merge_mode = sum),
    ];
    assert_eq!(declared_output(&sum), Some(&[5, 4][..]));
    agrees(&mut sum);
    assert!(
        sum.summary().contains("Total params: 216"),
        "{}",
        sum.summary()
    );
    let mut td = model![Input((5, 3)), TimeDistributed(Dense(8, relu))];
    assert_eq!(declared_output(&td), Some(&[5, 8][..]));
    agrees(&mut td);
    assert!(
        td.summary().contains("Total params: 32"),
        "{}",
        td.summary()
    );
    // A layer over images at every step: (4, 6, 6, 1) → (4, 4, 4, 2), 3·3·1·2 + 2 = 20; a
    // layer without arguments written bare.
    let mut frames = model![
        Input((4, 6, 6, 1)),
        TimeDistributed(Conv2D(2, 3)),
        TimeDistributed(Flatten),
        Bidirectional(SimpleRNN(3, return_sequences = true), "ave"),
    ];
    assert_eq!(declared_output(&frames), Some(&[4, 3][..]));
    agrees(&mut frames);
    let y = run(&frames, filled(&[2, 4, 6, 6, 1], 0.5), false);
    assert_eq!(y[0].dims(), [2, 4, 3]);

    // The graph form, and a named wrapped layer naming the copies.
    let mut g = model! {
        let x = Input((5, 3));
        let h = Bidirectional(LSTM(4, return_sequences = true, name = "enc"), merge_mode = mul)(x);
        TimeDistributed(Dense(2))(h)
    };
    assert_eq!(declared_output(&g), Some(&[5, 2][..]));
    agrees(&mut g);
    assert_eq!(
        g.params()[3].name,
        "bidirectional/backward_enc/lstm_cell/kernel"
    );
    let y = run(&g, filled(&[2, 5, 3], 0.5), false);
    assert_eq!(y[0].dims(), [2, 5, 2]);
}
