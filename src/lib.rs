//! Strata: neural networks declared inline, checked at compile time, trained anywhere.
//!
//! This facade re-exports the runtime (graph IR, autodiff, backends, layers) and the
//! [`model!`] macro.
//!
//! ```
//! use strata::model;
//!
//! let model = model![Input(784), Dense(128, relu), Dense(64, relu), Dense(10, softmax)];
//! assert_eq!(model.output_shape(), Some(&[10][..]));
//! assert!(model.summary().contains("Total params: 109,386"));
//! ```

pub use strata_runtime::*;

/// What the tutorial uses, in one import: `use strata::prelude::*;`.
pub mod prelude {
    pub use crate::backend::Device;
    pub use crate::loss::{
        BinaryCrossentropy, CategoricalCrossentropy, MeanSquaredError,
        SparseCategoricalCrossentropy,
    };
    pub use crate::metrics::Accuracy;
    pub use crate::model;
    pub use crate::optim::{Adam, OptimizerExt, RMSprop, SGD};
    pub use crate::strategy::{
        MirroredStrategy, OneDeviceStrategy, Strategy, TpuClusterResolver, TpuStrategy,
    };
    pub use crate::train::{Fit, History};
    pub use crate::Model;
    pub use crate::{Error, Result, Tensor};
}

/// Declares a model: a stack of Keras layers, every argument and shape checked at
/// compile time.
///
/// # Forms
///
/// An expression giving a [`Model`]:
///
/// ```
/// # use strata::model;
/// let model = model![Input(784), Dense(128, relu), Dense(64, relu), Dense(10, softmax)];
/// // Keras' form: the input shape on the first layer, keyword arguments.
/// let same = model![
///     Dense(128, activation = relu, input_shape = 784),
///     Dense(64, activation = relu),
///     Dense(10, activation = softmax),
/// ];
/// assert_eq!(model.summary(), same.summary());
/// ```
///
/// Without `Input` (or `input_shape`) the input comes from the first data, as in Keras'
/// deferred build; everything after it is still checked:
///
/// ```
/// # use strata::model;
/// let mut model = model![Dense(128, relu), Dense(10, softmax)];
/// assert!(!model.is_built());
/// model.build(&[784]).unwrap();
/// ```
///
/// A named, reusable type (its doc comments and visibility are yours; `///` lines above a
/// layer document its field):
///
/// ```
/// strata::model! {
///     /// A small convolutional classifier for 28x28 greyscale images.
///     pub struct Mnist {
///         Input((28, 28, 1)),
///         Conv2D(32, kernel_size = 3, padding = same, activation = relu),
///         MaxPooling2D(2),
///         Flatten,
///         Dropout(0.2),
///         /// The classifier head.
///         Dense(10, softmax),
///     }
/// }
///
/// let model = Mnist::model();
/// assert_eq!(<Mnist as strata::nn::Architecture>::OUTPUT_SHAPE, Some(&[10][..]));
/// assert_eq!(model.name(), "mnist");
/// ```
///
/// A graph of named layer calls (Keras' functional API): skip connections, merge layers
/// (which take a list, as in Keras), a layer bound once and called twice (one set of
/// weights), calls nested in calls. The last expression is the output.
///
/// ```
/// # use strata::model;
/// let model = model! {
///     let x = Input((28, 28, 1));
///     let h = Conv2D(16, 3, padding = same, activation = relu)(x);
///     let y = Conv2D(16, 3, padding = same)(h);
///     let y = Add()([y, h]);
///     let y = Activation(relu)(y);
///     Dense(10, softmax)(GlobalAveragePooling2D()(y))
/// };
/// assert_eq!(model.name(), "functional");
/// assert!(model.summary().contains("Connected to"));
/// ```
///
/// One input and one output for now: several are a compile error saying so.
///
/// A layer of your own, any expression of a type implementing [`nn::Layer`], goes in
/// braces, in either form: `model![Input(4), { Scale::new("scale") }, Dense(2)]`. The
/// macro checks everything around it; its own shapes, and so those of the layers after
/// it, are checked when the model is built (a typed error from `build`).
///
/// Any layer takes `trainable = false` (frozen: no gradient, no optimizer state; a
/// frozen `BatchNormalization` runs in inference mode, as in Keras);
/// [`Model::set_trainable`] does the same at run time, before `compile`.
///
/// # Layers
///
/// `Input`, `Dense`, `Flatten`, `Reshape`, `Dropout`, `Conv2D`, `MaxPooling2D` (alias
/// `MaxPool2D`), `AveragePooling2D` (`AvgPool2D`), `GlobalAveragePooling2D`
/// (`GlobalAvgPool2D`), `GlobalMaxPooling2D` (`GlobalMaxPool2D`), `BatchNormalization`,
/// `LayerNormalization`, `Embedding` and `Activation`; `Rescaling`, `Softmax`, `ReLU`,
/// `LeakyReLU`, `PReLU`, `ZeroPadding2D`, `Cropping2D`, `UpSampling2D`, `Permute` and
/// `RepeatVector`; over sequences `(steps, channels)`: `Conv1D` (`Convolution1D`),
/// `MaxPooling1D` (`MaxPool1D`), `AveragePooling1D` (`AvgPool1D`), `GlobalAveragePooling1D`
/// (`GlobalAvgPool1D`), `GlobalMaxPooling1D` (`GlobalMaxPool1D`); and `DepthwiseConv2D`,
/// `SeparableConv2D` (`SeparableConvolution2D`), `Conv2DTranspose` (`Convolution2DTranspose`)
/// and `GroupNormalization`; the recurrent layers over `(timesteps, features)`: `SimpleRNN`,
/// `LSTM` and `GRU` (`(units,)` out, or `(timesteps, units)` with `return_sequences`;
/// `dropout` and `recurrent_dropout` as Keras; with `return_state`, in a graph model, the
/// final states too, bound by a tuple in Keras' order: `let (seq, h, c) = LSTM(8,
/// return_sequences = true, return_state = true)(x);`, `let (y, h) = GRU(8, return_state =
/// true)(x);`, and through Bidirectional each direction's, `let (y, forward_h, forward_c,
/// backward_h, backward_c) = ...`; not in a stack, which passes one value on); the
/// wrappers, a layer as their first argument: `Bidirectional(LSTM(8))` (a recurrent layer
/// run both ways, joined by `merge_mode` concat, sum, mul or ave; its weights
/// `forward_lstm/...` and
/// `backward_lstm/...`) and `TimeDistributed(Dense(8))` (any one-input layer at every step
/// of the leading axis, `(timesteps, ...)`); in a graph model (the `let`
/// form), the layers of several inputs: the merges `Add`, `Subtract`, `Multiply`,
/// `Average`, `Maximum`, `Minimum` and `Concatenate`, `Dot` and `Attention` on a list
/// (`Dot(axes = -1)([a, b])`, `Attention()([query, value])`, as Keras takes them), and
/// `MultiHeadAttention` on its inputs by position
/// (`MultiHeadAttention(num_heads = 4, key_dim = 8)(query, value)`, optionally a `key`
/// third); Keras passes `use_causal_mask` to the call, `model!` takes
/// it with the layer's arguments (`Attention(use_causal_mask = true)([x, x])`). With
/// Keras' arguments, positional order, defaults and weight layouts, as [`spec::LAYERS`]
/// defines them. Every layer also takes `name = "..."`.
/// Activations, initializers and paddings are written by name, bare (`relu`) or quoted
/// (`"relu"`); sizes must be literals, since they are checked at compile time.
///
/// # Mistakes
///
/// Every mistake is a compile error on the token that caused it, all of them at once:
/// unknown layers, arguments and names (with a "did you mean"), missing, repeated or
/// mistyped arguments, values out of range, and shapes a layer cannot take:
///
/// ```compile_fail
/// # use strata::model;
/// // error: `reshape` (Reshape) needs 784 elements to reshape to (28, 28, 1), but
/// //        `dense` (Dense) outputs (None, 128)
/// let model = model![Input(784), Dense(128, relu), Reshape((28, 28, 1))];
/// ```
pub use strata_macros::model;

/// What `model!`'s expansion refers to, by absolute path, so user code can shadow
/// nothing it needs. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use std::convert::Into;
    pub use std::default::Default;
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{Err, Ok};
    pub use std::string::String;
    pub use std::sync::Arc;
    pub use std::vec::Vec;

    use crate::nn::Sequential;
    use crate::Model;

    /// The error of a generated `forward` given parameter groups for another model.
    pub fn param_groups(expected: usize, got: usize) -> crate::Error {
        crate::Error::InvalidArgument {
            what: "forward".into(),
            message: format!("{got} parameter groups for a model of {expected} layers"),
        }
    }

    /// The error of a generated `forward_all` given another number of inputs.
    pub fn input_count(expected: usize, got: usize) -> crate::Error {
        crate::Error::InvalidArgument {
            what: "forward_all".into(),
            message: format!("{got} inputs for a model of {expected}"),
        }
    }

    /// A call's outputs as the `N` locals a generated `forward` binds them to (a
    /// recurrent layer's output and states); another count is an error, never a panic.
    pub fn outputs<const N: usize>(
        all: Vec<crate::ir::Value>,
    ) -> Result<[crate::ir::Value; N], crate::Error> {
        let got = all.len();
        all.try_into().map_err(|_| crate::Error::InvalidArgument {
            what: "forward".into(),
            message: format!("a call gave {got} outputs where the model has {N}"),
        })
    }

    /// The stand-in `model![...]` evaluates to when it has errors, so the code around it
    /// still type-checks and only the model's own errors are reported.
    pub fn stub_model() -> Model<Sequential> {
        Model::new(Sequential::default())
    }
}
