//! The entries: one per layer, in the order the macro lists them.

use crate::attention::{
    attention, attention_params, dot, multi_head_attention, multi_head_attention_params,
};
use crate::entry::{
    arg, keyword, no_checks, no_list_params, no_params, no_states, param, required, same_shape,
    ArgDef, ArgDefault, LayerDef, Param, Rule, DATA_FORMAT,
};
use crate::error::{ArgError, ShapeError};
use crate::merge::{concatenate, elementwise};
use crate::recurrent::{
    gru_params, lstm_params, lstm_states, one_state, recurrent, recurrent_checks,
    simple_rnn_params, GRU_ARGS, LSTM_ARGS, SIMPLE_RNN_ARGS,
};
use crate::rules::{
    check_permutation, conv1d, conv1d_params, conv2d, conv2d_params, conv2d_transpose,
    conv2d_transpose_params, cropping2d, depthwise_conv2d, depthwise_conv2d_params, features,
    gamma_beta, global_pooling1d, global_pooling2d, group_normalization, normalization, permute,
    pooling1d, pooling2d, prelu, prelu_params, repeat_vector, reshape, separable_conv2d_params,
    upsampling2d, zero_padding2d,
};
use crate::shape::Shape;
use crate::value::{Args, Kind};
use crate::wrapper::{
    bidirectional, bidirectional_checks, bidirectional_params, bidirectional_states,
    time_distributed, time_distributed_checks, time_distributed_params,
};

static POOLING_ARGS: &[ArgDef] = &[
    arg("pool_size", Kind::Pair, "2"),
    arg("strides", Kind::OptionalPair, "None"),
    arg("padding", Kind::Padding, "valid"),
    DATA_FORMAT,
];

static POOLING1D_ARGS: &[ArgDef] = &[
    arg("pool_size", Kind::Size, "2"),
    arg("strides", Kind::OptionalSize, "None"),
    arg("padding", Kind::Padding, "valid"),
    DATA_FORMAT,
];

static GLOBAL_POOLING_ARGS: &[ArgDef] = &[DATA_FORMAT, arg("keepdims", Kind::Bool, "false")];

/// `filters` a multiple of `groups`.
fn filters_in_groups(a: &Args, errors: &mut Vec<ArgError>) {
    let (filters, groups) = (a.count("filters"), a.count("groups"));
    if filters % groups.max(1) != 0 {
        errors.push(ArgError {
            arg: "groups",
            message: format!("`filters` ({filters}) must be a multiple of `groups` ({groups})"),
        });
    }
}

/// Keras refuses the combination: a strided atrous convolution skips inputs.
fn strided_or_dilated<const N: usize>(a: &Args, errors: &mut Vec<ArgError>) {
    let strided = a.sizes::<N>("strides").iter().any(|&s| s > 1);
    if strided && a.sizes::<N>("dilation_rate").iter().any(|&d| d > 1) {
        errors.push(ArgError {
            arg: "dilation_rate",
            message: "`dilation_rate` > 1 cannot be combined with `strides` > 1".into(),
        });
    }
}

/// As Keras: only Conv1D pads causally (a sequence's start); every other layer with a
/// `padding` refuses it.
fn not_causal(a: &Args, errors: &mut Vec<ArgError>) {
    if a.causal_padding() {
        errors.push(ArgError {
            arg: "padding",
            message: "`causal` padding is only for Conv1D; use `valid` or `same`".into(),
        });
    }
}

/// A convolution's checks over `N` spatial axes (Conv1D, Conv2D); causal padding only
/// over one.
fn conv_checks<const N: usize>(a: &Args) -> Vec<ArgError> {
    let mut errors = Vec::new();
    filters_in_groups(a, &mut errors);
    strided_or_dilated::<N>(a, &mut errors);
    if N != 1 {
        not_causal(a, &mut errors);
    }
    errors
}

/// The checks of a layer with no other rule on how its arguments combine but `padding`.
fn padding_checks(a: &Args) -> Vec<ArgError> {
    let mut errors = Vec::new();
    not_causal(a, &mut errors);
    errors
}

/// An elementwise merge (`Add`, ...): a list of `min` to `max` inputs, no arguments.
const fn elementwise_merge(
    class: &'static str,
    base_name: &'static str,
    min: usize,
    max: Option<usize>,
) -> LayerDef {
    LayerDef {
        class,
        aliases: &[],
        base_name,
        runtime: class,
        args: &[],
        shape: Rule::List {
            min,
            max,
            rule: elementwise,
            params: no_list_params,
        },
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    }
}

pub static LAYERS: &[LayerDef] = &[
    LayerDef {
        class: "Input",
        aliases: &[],
        base_name: "input_layer",
        runtime: "",
        args: &[required("shape", Kind::Shape)],
        shape: Rule::One(|a, _| Ok(Shape::known(a.shape("shape").unwrap_or(&[])))),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Dense",
        aliases: &[],
        base_name: "dense",
        runtime: "Dense",
        args: &[
            required("units", Kind::Count),
            arg("activation", Kind::Activation, "linear"),
            arg("use_bias", Kind::Bool, "true"),
            arg("kernel_initializer", Kind::Initializer, "glorot_uniform"),
            arg("bias_initializer", Kind::Initializer, "zeros"),
        ],
        // As Keras: on the last axis, whatever the rank.
        shape: Rule::One(|a, x| x.with_last(a.count("units")).ok_or(ShapeError::NoAxis)),
        params: |a, x| {
            let units = Some(a.count("units"));
            let fans = [x.last().unwrap_or(None), units];
            let mut p = vec![param(
                "kernel",
                vec![fans[0], units],
                "kernel_initializer",
                fans,
            )];
            if a.flag("use_bias") {
                p.push(param("bias", vec![units], "bias_initializer", fans));
            }
            p
        },
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Flatten",
        aliases: &[],
        base_name: "flatten",
        runtime: "Flatten",
        args: &[DATA_FORMAT],
        // A scalar input becomes `(1,)`, as in Keras.
        shape: Rule::One(|_, x| {
            Ok(Shape {
                open: false,
                dims: vec![x.numel()],
            })
        }),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Reshape",
        aliases: &[],
        base_name: "reshape",
        runtime: "Reshape",
        args: &[required("target_shape", Kind::TargetShape)],
        shape: Rule::One(reshape),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Dropout",
        aliases: &[],
        base_name: "dropout",
        runtime: "Dropout",
        args: &[required("rate", Kind::Rate)],
        shape: Rule::One(same_shape),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Conv2D",
        aliases: &["Convolution2D"],
        base_name: "conv2d",
        runtime: "Conv2D",
        args: &[
            required("filters", Kind::Count),
            required("kernel_size", Kind::Pair),
            arg("strides", Kind::Pair, "1"),
            arg("padding", Kind::Padding, "valid"),
            DATA_FORMAT,
            arg("dilation_rate", Kind::Pair, "1"),
            arg("groups", Kind::Count, "1"),
            arg("activation", Kind::Activation, "linear"),
            arg("use_bias", Kind::Bool, "true"),
            arg("kernel_initializer", Kind::Initializer, "glorot_uniform"),
            arg("bias_initializer", Kind::Initializer, "zeros"),
        ],
        shape: Rule::One(conv2d),
        params: conv2d_params,
        validate: conv_checks::<2>,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "MaxPooling2D",
        aliases: &["MaxPool2D"],
        base_name: "max_pooling2d",
        runtime: "MaxPooling2D",
        args: POOLING_ARGS,
        shape: Rule::One(pooling2d),
        params: no_params,
        validate: padding_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "AveragePooling2D",
        aliases: &["AvgPool2D"],
        base_name: "average_pooling2d",
        runtime: "AveragePooling2D",
        args: POOLING_ARGS,
        shape: Rule::One(pooling2d),
        params: no_params,
        validate: padding_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "GlobalAveragePooling2D",
        aliases: &["GlobalAvgPool2D"],
        base_name: "global_average_pooling2d",
        runtime: "GlobalAveragePooling2D",
        args: GLOBAL_POOLING_ARGS,
        shape: Rule::One(global_pooling2d),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "GlobalMaxPooling2D",
        aliases: &["GlobalMaxPool2D"],
        base_name: "global_max_pooling2d",
        runtime: "GlobalMaxPooling2D",
        args: GLOBAL_POOLING_ARGS,
        shape: Rule::One(global_pooling2d),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "BatchNormalization",
        aliases: &[],
        base_name: "batch_normalization",
        runtime: "BatchNormalization",
        args: &[
            arg("axis", Kind::Axis, "-1"),
            arg("momentum", Kind::Fraction, "0.99"),
            arg("epsilon", Kind::Positive, "0.001"),
            arg("center", Kind::Bool, "true"),
            arg("scale", Kind::Bool, "true"),
            arg("beta_initializer", Kind::Initializer, "zeros"),
            arg("gamma_initializer", Kind::Initializer, "ones"),
            arg("moving_mean_initializer", Kind::Initializer, "zeros"),
            arg("moving_variance_initializer", Kind::Initializer, "ones"),
        ],
        shape: Rule::One(normalization),
        // `gamma`, `beta`, then the non-trainable moving statistics, in Keras' order.
        params: |a, x| {
            let mut p = gamma_beta(a, x);
            let c = features(a, x);
            for (suffix, init_arg) in [
                ("moving_mean", "moving_mean_initializer"),
                ("moving_variance", "moving_variance_initializer"),
            ] {
                p.push(Param {
                    trainable: false,
                    ..param(suffix, vec![c], init_arg, [c, c])
                });
            }
            p
        },
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "LayerNormalization",
        aliases: &[],
        base_name: "layer_normalization",
        runtime: "LayerNormalization",
        args: &[
            arg("axis", Kind::Axis, "-1"),
            arg("epsilon", Kind::Positive, "0.001"),
            arg("center", Kind::Bool, "true"),
            arg("scale", Kind::Bool, "true"),
            arg("beta_initializer", Kind::Initializer, "zeros"),
            arg("gamma_initializer", Kind::Initializer, "ones"),
        ],
        shape: Rule::One(normalization),
        params: gamma_beta,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Embedding",
        aliases: &[],
        base_name: "embedding",
        runtime: "Embedding",
        args: &[
            required("input_dim", Kind::Count),
            required("output_dim", Kind::Count),
            arg("embeddings_initializer", Kind::Initializer, "uniform"),
        ],
        // Each id becomes a vector: one more axis.
        shape: Rule::One(|a, x| {
            let mut out = x.clone();
            out.dims.push(Some(a.count("output_dim")));
            Ok(out)
        }),
        params: |a, _| {
            let dims = [Some(a.count("input_dim")), Some(a.count("output_dim"))];
            vec![param(
                "embeddings",
                dims.to_vec(),
                "embeddings_initializer",
                dims,
            )]
        },
        validate: no_checks,
        takes_ids: true,
        states: no_states,
    },
    LayerDef {
        class: "Activation",
        aliases: &[],
        base_name: "activation",
        runtime: "ActivationLayer",
        args: &[required("activation", Kind::Activation)],
        shape: Rule::One(same_shape),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    // Sequences (steps, channels); depthwise, separable and transposed 2-D convolutions;
    // group normalisation.
    LayerDef {
        class: "Conv1D",
        aliases: &["Convolution1D"],
        base_name: "conv1d",
        runtime: "Conv1D",
        args: &[
            required("filters", Kind::Count),
            required("kernel_size", Kind::Size),
            arg("strides", Kind::Size, "1"),
            arg("padding", Kind::Padding, "valid"),
            DATA_FORMAT,
            arg("dilation_rate", Kind::Size, "1"),
            arg("groups", Kind::Count, "1"),
            arg("activation", Kind::Activation, "linear"),
            arg("use_bias", Kind::Bool, "true"),
            arg("kernel_initializer", Kind::Initializer, "glorot_uniform"),
            arg("bias_initializer", Kind::Initializer, "zeros"),
        ],
        shape: Rule::One(conv1d),
        params: conv1d_params,
        validate: conv_checks::<1>,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "MaxPooling1D",
        aliases: &["MaxPool1D"],
        base_name: "max_pooling1d",
        runtime: "MaxPooling1D",
        args: POOLING1D_ARGS,
        shape: Rule::One(pooling1d),
        params: no_params,
        validate: padding_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "AveragePooling1D",
        aliases: &["AvgPool1D"],
        base_name: "average_pooling1d",
        runtime: "AveragePooling1D",
        args: POOLING1D_ARGS,
        shape: Rule::One(pooling1d),
        params: no_params,
        validate: padding_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "GlobalAveragePooling1D",
        aliases: &["GlobalAvgPool1D"],
        base_name: "global_average_pooling1d",
        runtime: "GlobalAveragePooling1D",
        args: GLOBAL_POOLING_ARGS,
        shape: Rule::One(global_pooling1d),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "GlobalMaxPooling1D",
        aliases: &["GlobalMaxPool1D"],
        base_name: "global_max_pooling1d",
        runtime: "GlobalMaxPooling1D",
        args: GLOBAL_POOLING_ARGS,
        shape: Rule::One(global_pooling1d),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "DepthwiseConv2D",
        aliases: &[],
        base_name: "depthwise_conv2d",
        runtime: "DepthwiseConv2D",
        args: &[
            required("kernel_size", Kind::Pair),
            arg("strides", Kind::Pair, "1"),
            arg("padding", Kind::Padding, "valid"),
            arg("depth_multiplier", Kind::Count, "1"),
            DATA_FORMAT,
            arg("dilation_rate", Kind::Pair, "1"),
            arg("activation", Kind::Activation, "linear"),
            arg("use_bias", Kind::Bool, "true"),
            arg("depthwise_initializer", Kind::Initializer, "glorot_uniform"),
            arg("bias_initializer", Kind::Initializer, "zeros"),
        ],
        shape: Rule::One(depthwise_conv2d),
        params: depthwise_conv2d_params,
        // Keras 3 takes strides with dilation here (unlike Conv2D's).
        validate: padding_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "SeparableConv2D",
        aliases: &["SeparableConvolution2D"],
        base_name: "separable_conv2d",
        runtime: "SeparableConv2D",
        args: &[
            required("filters", Kind::Count),
            required("kernel_size", Kind::Pair),
            arg("strides", Kind::Pair, "1"),
            arg("padding", Kind::Padding, "valid"),
            DATA_FORMAT,
            arg("dilation_rate", Kind::Pair, "1"),
            arg("depth_multiplier", Kind::Count, "1"),
            arg("activation", Kind::Activation, "linear"),
            arg("use_bias", Kind::Bool, "true"),
            arg("depthwise_initializer", Kind::Initializer, "glorot_uniform"),
            arg("pointwise_initializer", Kind::Initializer, "glorot_uniform"),
            arg("bias_initializer", Kind::Initializer, "zeros"),
        ],
        shape: Rule::One(conv2d),
        params: separable_conv2d_params,
        // Keras 3 takes strides with dilation here (unlike Conv2D's).
        validate: padding_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Conv2DTranspose",
        aliases: &["Convolution2DTranspose"],
        base_name: "conv2d_transpose",
        runtime: "Conv2DTranspose",
        args: &[
            required("filters", Kind::Count),
            required("kernel_size", Kind::Pair),
            arg("strides", Kind::Pair, "1"),
            arg("padding", Kind::Padding, "valid"),
            arg("output_padding", Kind::OptionalPadding, "None"),
            DATA_FORMAT,
            arg("dilation_rate", Kind::Pair, "1"),
            arg("activation", Kind::Activation, "linear"),
            arg("use_bias", Kind::Bool, "true"),
            arg("kernel_initializer", Kind::Initializer, "glorot_uniform"),
            arg("bias_initializer", Kind::Initializer, "zeros"),
        ],
        shape: Rule::One(conv2d_transpose),
        params: conv2d_transpose_params,
        validate: |a| {
            let mut errors = padding_checks(a);
            strided_or_dilated::<2>(a, &mut errors);
            // Output padding only places the last partial stride: it must be shorter.
            if let Some(p) = a.optional_sizes::<2>("output_padding") {
                let s = a.sizes::<2>("strides");
                if p[0] >= s[0] || p[1] >= s[1] {
                    errors.push(ArgError {
                        arg: "output_padding",
                        message: format!(
                            "`output_padding` ({}, {}) must be smaller than `strides` ({}, {})",
                            p[0], p[1], s[0], s[1]
                        ),
                    });
                }
            }
            errors
        },
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "GroupNormalization",
        aliases: &[],
        base_name: "group_normalization",
        runtime: "GroupNormalization",
        args: &[
            arg("groups", Kind::Count, "32"),
            arg("axis", Kind::Axis, "-1"),
            arg("epsilon", Kind::Positive, "0.001"),
            arg("center", Kind::Bool, "true"),
            arg("scale", Kind::Bool, "true"),
            arg("beta_initializer", Kind::Initializer, "zeros"),
            arg("gamma_initializer", Kind::Initializer, "ones"),
        ],
        shape: Rule::One(group_normalization),
        params: gamma_beta,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    // Issue 14, shape and activation layers (one block, so merges with other additions
    // stay easy).
    LayerDef {
        class: "Rescaling",
        aliases: &[],
        base_name: "rescaling",
        runtime: "Rescaling",
        args: &[
            required("scale", Kind::Number),
            arg("offset", Kind::Number, "0.0"),
        ],
        shape: Rule::One(same_shape),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Softmax",
        aliases: &[],
        base_name: "softmax",
        runtime: "Softmax",
        args: &[arg("axis", Kind::Axis, "-1")],
        shape: Rule::One(normalization),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "ReLU",
        aliases: &[],
        base_name: "re_lu",
        runtime: "ReLU",
        args: &[
            arg("max_value", Kind::OptionalNonNegative, "None"),
            arg("negative_slope", Kind::NonNegative, "0.0"),
            arg("threshold", Kind::NonNegative, "0.0"),
        ],
        shape: Rule::One(same_shape),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "LeakyReLU",
        aliases: &[],
        base_name: "leaky_re_lu",
        runtime: "LeakyReLU",
        args: &[arg("negative_slope", Kind::NonNegative, "0.3")],
        shape: Rule::One(same_shape),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "PReLU",
        aliases: &[],
        base_name: "p_re_lu",
        runtime: "PReLU",
        args: &[
            arg("alpha_initializer", Kind::Initializer, "zeros"),
            arg("shared_axes", Kind::OptionalAxes, "None"),
        ],
        shape: Rule::One(prelu),
        params: prelu_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "ZeroPadding2D",
        aliases: &[],
        base_name: "zero_padding2d",
        runtime: "ZeroPadding2D",
        args: &[arg("padding", Kind::Margins, "1"), DATA_FORMAT],
        shape: Rule::One(zero_padding2d),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Cropping2D",
        aliases: &[],
        base_name: "cropping2d",
        runtime: "Cropping2D",
        args: &[
            arg("cropping", Kind::Margins, "((0, 0), (0, 0))"),
            DATA_FORMAT,
        ],
        shape: Rule::One(cropping2d),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "UpSampling2D",
        aliases: &[],
        base_name: "up_sampling2d",
        runtime: "UpSampling2D",
        args: &[
            arg("size", Kind::Pair, "2"),
            DATA_FORMAT,
            arg("interpolation", Kind::Interpolation, "nearest"),
        ],
        shape: Rule::One(upsampling2d),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Permute",
        aliases: &[],
        base_name: "permute",
        runtime: "Permute",
        args: &[required("dims", Kind::Dims)],
        shape: Rule::One(permute),
        params: no_params,
        validate: check_permutation,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "RepeatVector",
        aliases: &[],
        base_name: "repeat_vector",
        runtime: "RepeatVector",
        args: &[required("n", Kind::Count)],
        shape: Rule::One(repeat_vector),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    elementwise_merge("Add", "add", 1, None),
    elementwise_merge("Subtract", "subtract", 2, Some(2)),
    elementwise_merge("Multiply", "multiply", 1, None),
    elementwise_merge("Average", "average", 1, None),
    elementwise_merge("Maximum", "maximum", 1, None),
    elementwise_merge("Minimum", "minimum", 1, None),
    LayerDef {
        class: "Concatenate",
        aliases: &[],
        base_name: "concatenate",
        runtime: "Concatenate",
        args: &[arg("axis", Kind::Axis, "-1")],
        shape: Rule::List {
            min: 1,
            max: None,
            rule: concatenate,
            params: no_list_params,
        },
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Dot",
        aliases: &[],
        base_name: "dot",
        runtime: "Dot",
        args: &[
            required("axes", Kind::AxisPair),
            arg("normalize", Kind::Bool, "false"),
        ],
        shape: Rule::List {
            min: 2,
            max: Some(2),
            rule: dot,
            params: no_list_params,
        },
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "Attention",
        aliases: &[],
        base_name: "attention",
        runtime: "Attention",
        // Keras' `seed` is not taken: dropout draws from the step's random key, as the
        // Dropout layer does. `use_causal_mask` is an argument of Keras' call.
        args: &[
            arg("use_scale", Kind::Bool, "false"),
            arg("score_mode", Kind::ScoreMode, "dot"),
            arg("dropout", Kind::Rate, "0.0"),
            keyword("use_causal_mask", Kind::Bool, "false"),
        ],
        // A list, `Attention()([query, value])`, as Keras takes it.
        shape: Rule::List {
            min: 2,
            max: Some(3),
            rule: attention,
            params: attention_params,
        },
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    LayerDef {
        class: "MultiHeadAttention",
        aliases: &[],
        base_name: "multi_head_attention",
        runtime: "MultiHeadAttention",
        // Keras' order up to `output_shape`; the initializers are keyword-only here, since
        // Keras' `attention_axes`, `sliding_window`, ... come before them and are not
        // taken. `use_causal_mask` is an argument of Keras' call.
        args: &[
            required("num_heads", Kind::Count),
            required("key_dim", Kind::Count),
            arg("value_dim", Kind::OptionalSize, "None"),
            arg("dropout", Kind::Rate, "0.0"),
            arg("use_bias", Kind::Bool, "true"),
            arg("output_shape", Kind::OptionalSize, "None"),
            keyword("kernel_initializer", Kind::Initializer, "glorot_uniform"),
            keyword("bias_initializer", Kind::Initializer, "zeros"),
            keyword("use_causal_mask", Kind::Bool, "false"),
        ],
        shape: Rule::Positional {
            inputs: &["query", "value", "key"],
            required: 2,
            keywords: &["attention_mask"],
            rule: multi_head_attention,
            params: multi_head_attention_params,
        },
        params: no_params,
        validate: no_checks,
        takes_ids: false,
        states: no_states,
    },
    // Issue 15: recurrent layers over `(timesteps, features)`.
    LayerDef {
        class: "SimpleRNN",
        aliases: &[],
        base_name: "simple_rnn",
        runtime: "SimpleRNN",
        args: SIMPLE_RNN_ARGS,
        shape: Rule::One(recurrent),
        params: simple_rnn_params,
        validate: recurrent_checks::<1>,
        takes_ids: false,
        states: one_state,
    },
    LayerDef {
        class: "LSTM",
        aliases: &[],
        base_name: "lstm",
        runtime: "LSTM",
        args: LSTM_ARGS,
        shape: Rule::One(recurrent),
        params: lstm_params,
        validate: recurrent_checks::<4>,
        takes_ids: false,
        states: lstm_states,
    },
    LayerDef {
        class: "GRU",
        aliases: &[],
        base_name: "gru",
        runtime: "GRU",
        args: GRU_ARGS,
        shape: Rule::One(recurrent),
        params: gru_params,
        validate: recurrent_checks::<3>,
        takes_ids: false,
        states: one_state,
    },
    // The wrappers: a layer of the catalogue as their argument.
    LayerDef {
        class: "Bidirectional",
        aliases: &[],
        base_name: "bidirectional",
        runtime: "Bidirectional",
        args: &[
            required("layer", Kind::Layer),
            arg("merge_mode", Kind::MergeMode, "concat"),
            // Refused by `bidirectional_checks`: Keras' own backward copy only.
            ArgDef {
                name: "backward_layer",
                kind: Kind::Layer,
                default: ArgDefault::Absent,
                positional: false,
                field: false,
            },
        ],
        shape: Rule::One(bidirectional),
        params: bidirectional_params,
        validate: bidirectional_checks,
        takes_ids: false,
        states: bidirectional_states,
    },
    LayerDef {
        class: "TimeDistributed",
        aliases: &[],
        base_name: "time_distributed",
        runtime: "TimeDistributed",
        args: &[required("layer", Kind::Layer)],
        shape: Rule::One(time_distributed),
        params: time_distributed_params,
        validate: time_distributed_checks,
        takes_ids: false,
        states: no_states,
    },
];

/// Looks a layer up by its Keras name or an alias.
pub fn layer(name: &str) -> Option<&'static LayerDef> {
    LAYERS
        .iter()
        .find(|l| l.class == name || l.aliases.contains(&name))
}

/// Every name a layer may be written as, for suggestions.
pub fn layer_names() -> Vec<&'static str> {
    LAYERS
        .iter()
        .flat_map(|l| std::iter::once(l.class).chain(l.aliases.iter().copied()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Val;

    /// A layer of several inputs sizes its weights by its `Rule`'s rule, which sees every
    /// input; the `params` field, read for one-input layers only, must stay empty, or a
    /// weight written there would silently never be created.
    #[test]
    fn layers_of_several_inputs_keep_their_parameters_in_their_rule() {
        let mut args = Args::default();
        for (name, v) in [
            ("use_scale", Val::Bool(true)),
            ("use_bias", Val::Bool(true)),
            ("num_heads", Val::Usize(2)),
            ("key_dim", Val::Usize(2)),
        ] {
            args.insert(name, v);
        }
        let x = Shape::known(&[3, 4]);
        for def in LAYERS.iter().filter(|d| d.takes_many()) {
            assert!((def.params)(&args, &x).is_empty(), "{}", def.class);
        }
        let mha = layer("MultiHeadAttention").unwrap();
        let q = Shape::known(&[3, 4]);
        let v = Shape::known(&[5, 6]);
        let p = mha.call_params(&args, &[q, v]);
        assert_eq!(p[0].dims, [Some(4), Some(2), Some(2)], "query by the query");
        assert_eq!(p[2].dims, [Some(6), Some(2), Some(2)], "key by the value");
        assert_eq!(
            p[6].dims,
            [Some(2), Some(2), Some(4)],
            "output as the query"
        );
    }
}
