//! The names an argument may be written as (`relu`, `same`) and the runtime enum variant
//! each stands for.

/// A name an argument may take (`relu`) and the runtime enum variant it stands for.
#[derive(Debug, PartialEq)]
pub struct Choice {
    pub name: &'static str,
    pub variant: &'static str,
}

const fn choice(name: &'static str, variant: &'static str) -> Choice {
    Choice { name, variant }
}

/// `strata::nn::Activation`; the first is what `activation = None` means.
pub static ACTIVATIONS: &[Choice] = &[
    choice("linear", "Linear"),
    choice("relu", "Relu"),
    choice("sigmoid", "Sigmoid"),
    choice("tanh", "Tanh"),
    choice("softmax", "Softmax"),
    choice("gelu", "Gelu"),
    choice("elu", "Elu"),
    choice("selu", "Selu"),
    choice("leaky_relu", "LeakyRelu"),
    choice("swish", "Swish"),
    choice("silu", "Swish"),
    choice("softplus", "Softplus"),
];

/// `strata::nn::Initializer`.
pub static INITIALIZERS: &[Choice] = &[
    choice("glorot_uniform", "GlorotUniform"),
    choice("glorot_normal", "GlorotNormal"),
    choice("he_normal", "HeNormal"),
    choice("he_uniform", "HeUniform"),
    choice("lecun_normal", "LecunNormal"),
    choice("zeros", "Zeros"),
    choice("ones", "Ones"),
    choice("uniform", "RandomUniform"),
    choice("random_uniform", "RandomUniform"),
    choice("orthogonal", "Orthogonal"),
];

/// Initializers no argument may name, which a layer's parameter rule picks itself: an
/// LSTM's bias with Keras' `unit_forget_bias` (zeros, the forget gate's block ones).
pub static INTERNAL_INITIALIZERS: &[Choice] = &[choice("forget_bias_one", "ForgetBiasOne")];

/// An initializer by name, one an argument may name or an internal one.
pub fn initializer_named(name: &str) -> Option<&'static Choice> {
    INITIALIZERS
        .iter()
        .chain(INTERNAL_INITIALIZERS)
        .find(|c| c.name == name)
}

/// `strata::nn::Padding`.
/// `causal` (Conv1D only: pad the start, so no output sees a later step) gives `same`'s
/// output length.
pub static PADDINGS: &[Choice] = &[
    choice("valid", "Valid"),
    choice("same", "Same"),
    choice("causal", "Causal"),
];

/// Only channels_last exists (the layout of every Strata image layer); the argument is
/// accepted so Keras code reads the same.
pub static DATA_FORMATS: &[Choice] = &[choice("channels_last", "")];

/// `strata::nn::Interpolation`: how UpSampling2D fills the new pixels (Keras' other
/// modes, `bicubic`, `lanczos3`, ..., are not supported).
pub static INTERPOLATIONS: &[Choice] =
    &[choice("nearest", "Nearest"), choice("bilinear", "Bilinear")];

/// `strata::nn::ScoreMode`: how Attention scores a query against a key (the dot product,
/// or the sum of `tanh(query + key)`).
pub static SCORE_MODES: &[Choice] = &[choice("dot", "Dot"), choice("concat", "Concat")];

/// `strata::nn::MergeMode`: how Bidirectional joins its forward and backward outputs
/// (Keras' `None`, the two outputs apart, is not supported yet).
pub static MERGE_MODES: &[Choice] = &[
    choice("concat", "Concat"),
    choice("sum", "Sum"),
    choice("mul", "Mul"),
    choice("ave", "Ave"),
];
