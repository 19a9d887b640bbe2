//! THE catalogue: every layer `model!` knows, with its Keras name and aliases, its
//! arguments in Keras' positional order (type and default), and the rules giving its
//! output shape and parameters from its input shape. `check.rs` and `expand.rs` hold no
//! knowledge of any particular layer; adding a layer is adding an entry here (and its
//! runtime struct in `strata::nn`, whose fields are named after the arguments).
//!
//! The shape and parameter rules mirror the runtime layers' `output_shape` and `params`;
//! the workspace's tests build every test model and compare the two.

use crate::shape::{product, Shape};
use crate::value::{Kind, Val};

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
];

/// `strata::nn::Padding`.
pub static PADDINGS: &[Choice] = &[choice("valid", "Valid"), choice("same", "Same")];

/// Only channels_last exists (the layout of every Strata image layer); the argument is
/// accepted so Keras code reads the same.
pub static DATA_FORMATS: &[Choice] = &[choice("channels_last", "")];

/// An argument's default.
#[derive(Clone, Copy, Debug)]
pub enum ArgDefault {
    /// Must be given.
    Required,
    /// The default, written as in a call (and read by the same code as a user's value).
    Is(&'static str),
    /// Optional, with no value when not given (`name`, `input_shape`).
    Absent,
}

#[derive(Debug)]
pub struct ArgDef {
    pub name: &'static str,
    pub kind: Kind,
    pub default: ArgDefault,
    /// Whether it may be given by position (the common arguments are keyword-only).
    pub positional: bool,
    /// Whether the runtime struct has a field of this name.
    pub field: bool,
}

const fn arg(name: &'static str, kind: Kind, default: &'static str) -> ArgDef {
    ArgDef {
        name,
        kind,
        default: ArgDefault::Is(default),
        positional: true,
        field: true,
    }
}

const fn required(name: &'static str, kind: Kind) -> ArgDef {
    ArgDef {
        name,
        kind,
        default: ArgDefault::Required,
        positional: true,
        field: true,
    }
}

/// Keras' `data_format`: accepted, not stored.
const DATA_FORMAT: ArgDef = ArgDef {
    name: "data_format",
    kind: Kind::DataFormat,
    default: ArgDefault::Is("channels_last"),
    positional: true,
    field: false,
};

/// Keyword arguments every layer takes: its name (default: Keras' `dense`, `dense_1`, …),
/// and, on the first layer only, the model's input shape.
pub static COMMON: &[ArgDef] = &[
    ArgDef {
        name: "name",
        kind: Kind::Name,
        default: ArgDefault::Absent,
        positional: false,
        field: false,
    },
    ArgDef {
        name: "input_shape",
        kind: Kind::Shape,
        default: ArgDefault::Absent,
        positional: false,
        field: false,
    },
];

/// The checked arguments of one layer: every argument of its entry, given or defaulted.
#[derive(Clone, Debug, Default)]
pub struct Args(Vec<(&'static str, Val)>);

impl Args {
    pub fn insert(&mut self, name: &'static str, v: Val) {
        self.0.retain(|(n, _)| *n != name);
        self.0.push((name, v));
    }

    pub fn get(&self, name: &str) -> Option<&Val> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    // Typed reads for the rules below. Every argument a rule reads is in its entry with a
    // default, so the fallbacks are never taken; they only keep rules panic-free.

    fn count(&self, name: &str) -> usize {
        match self.get(name) {
            Some(Val::Usize(n)) => *n,
            _ => 1,
        }
    }

    fn pair(&self, name: &str) -> [usize; 2] {
        match self.get(name) {
            Some(Val::Pair(p) | Val::OptionalPair(Some(p))) => *p,
            _ => [1, 1],
        }
    }

    fn optional_pair(&self, name: &str) -> Option<[usize; 2]> {
        match self.get(name) {
            Some(Val::OptionalPair(p)) => *p,
            _ => None,
        }
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Val::Bool(true)))
    }

    fn same_padding(&self) -> bool {
        matches!(self.get("padding"), Some(Val::Padding(p)) if p.name == "same")
    }

    fn axis(&self) -> i64 {
        match self.get("axis") {
            Some(Val::Axis(a)) => *a,
            _ => -1,
        }
    }

    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        match self.get(name) {
            Some(Val::Shape(s)) => Some(s),
            _ => None,
        }
    }

    fn target_shape(&self) -> &[i64] {
        match self.get("target_shape") {
            Some(Val::TargetShape(s)) => s,
            _ => &[],
        }
    }
}

/// Why a layer cannot take its input: what it needs (the check names both layers and
/// shows the input shape), and the argument to point at, if any.
#[derive(Debug)]
pub struct ShapeError {
    pub arg: Option<&'static str>,
    pub need: String,
}

fn need(need: impl Into<String>) -> ShapeError {
    ShapeError {
        arg: None,
        need: need.into(),
    }
}

/// A mistake in how arguments combine, pointed at `arg`.
#[derive(Debug)]
pub struct ArgError {
    pub arg: &'static str,
    pub message: String,
}

/// One weight or state tensor, as the runtime layer will create it.
#[derive(Clone, Debug)]
pub struct Param {
    pub suffix: &'static str,
    pub dims: Vec<Option<usize>>,
    /// The argument holding its initializer.
    pub init_arg: &'static str,
    pub trainable: bool,
}

fn param(suffix: &'static str, dims: Vec<Option<usize>>, init_arg: &'static str) -> Param {
    Param {
        suffix,
        dims,
        init_arg,
        trainable: true,
    }
}

pub type ShapeRule = fn(&Args, &Shape) -> Result<Shape, ShapeError>;
pub type ParamRule = fn(&Args, &Shape) -> Vec<Param>;
pub type Validate = fn(&Args) -> Vec<ArgError>;

#[derive(Debug)]
pub struct LayerDef {
    /// The Keras class name, also the runtime layer's `class()`.
    pub class: &'static str,
    pub aliases: &'static [&'static str],
    /// Keras' automatic name: `dense`, then `dense_1`, ….
    pub base_name: &'static str,
    /// The struct in `strata::nn`; empty for `Input`, which is no runtime layer.
    pub runtime: &'static str,
    pub args: &'static [ArgDef],
    pub shape: ShapeRule,
    pub params: ParamRule,
    pub validate: Validate,
    /// Takes integer ids, so it can only be the first layer.
    pub takes_ids: bool,
}

impl LayerDef {
    pub fn is_input(&self) -> bool {
        self.runtime.is_empty()
    }
}

fn no_params(_: &Args, _: &Shape) -> Vec<Param> {
    Vec::new()
}

fn no_checks(_: &Args) -> Vec<ArgError> {
    Vec::new()
}

fn same_shape(_: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    Ok(x.clone())
}

pub static LAYERS: &[LayerDef] = &[
    LayerDef {
        class: "Input",
        aliases: &[],
        base_name: "input_layer",
        runtime: "",
        args: &[required("shape", Kind::Shape)],
        shape: |a, _| Ok(Shape::known(a.shape("shape").unwrap_or(&[]))),
        params: no_params,
        validate: no_checks,
        takes_ids: false,
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
        shape: |a, x| {
            x.with_last(a.count("units"))
                .ok_or_else(|| need("an input with at least one axis"))
        },
        params: |a, x| {
            let units = a.count("units");
            let mut p = vec![param(
                "kernel",
                vec![x.last().unwrap_or(None), Some(units)],
                "kernel_initializer",
            )];
            if a.flag("use_bias") {
                p.push(param("bias", vec![Some(units)], "bias_initializer"));
            }
            p
        },
        validate: no_checks,
        takes_ids: false,
    },
    LayerDef {
        class: "Flatten",
        aliases: &[],
        base_name: "flatten",
        runtime: "Flatten",
        args: &[DATA_FORMAT],
        shape: |_, x| {
            Ok(Shape {
                open: false,
                dims: vec![x.numel()],
            })
        },
        params: no_params,
        validate: no_checks,
        takes_ids: false,
    },
    LayerDef {
        class: "Reshape",
        aliases: &[],
        base_name: "reshape",
        runtime: "Reshape",
        args: &[required("target_shape", Kind::TargetShape)],
        shape: reshape,
        params: no_params,
        validate: no_checks,
        takes_ids: false,
    },
    LayerDef {
        class: "Dropout",
        aliases: &[],
        base_name: "dropout",
        runtime: "Dropout",
        args: &[required("rate", Kind::Rate)],
        shape: same_shape,
        params: no_params,
        validate: no_checks,
        takes_ids: false,
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
        shape: conv2d,
        params: |a, x| {
            let [kh, kw] = a.pair("kernel_size");
            let filters = a.count("filters");
            let groups = a.count("groups");
            let c = x.exactly::<3>().and_then(|[_, _, c]| c);
            let mut p = vec![param(
                "kernel",
                vec![Some(kh), Some(kw), c.map(|c| c / groups), Some(filters)],
                "kernel_initializer",
            )];
            if a.flag("use_bias") {
                p.push(param("bias", vec![Some(filters)], "bias_initializer"));
            }
            p
        },
        validate: |a| {
            let mut errors = Vec::new();
            let (filters, groups) = (a.count("filters"), a.count("groups"));
            if filters % groups != 0 {
                errors.push(ArgError {
                    arg: "groups",
                    message: format!(
                        "`filters` ({filters}) must be a multiple of `groups` ({groups})"
                    ),
                });
            }
            // Keras refuses the combination: a strided atrous convolution skips inputs.
            let strided = a.pair("strides").iter().any(|&s| s > 1);
            if strided && a.pair("dilation_rate").iter().any(|&d| d > 1) {
                errors.push(ArgError {
                    arg: "dilation_rate",
                    message: "`dilation_rate` > 1 cannot be combined with `strides` > 1".into(),
                });
            }
            errors
        },
        takes_ids: false,
    },
    LayerDef {
        class: "MaxPooling2D",
        aliases: &["MaxPool2D"],
        base_name: "max_pooling2d",
        runtime: "MaxPooling2D",
        args: POOLING_ARGS,
        shape: pooling2d,
        params: no_params,
        validate: no_checks,
        takes_ids: false,
    },
    LayerDef {
        class: "AveragePooling2D",
        aliases: &["AvgPool2D"],
        base_name: "average_pooling2d",
        runtime: "AveragePooling2D",
        args: POOLING_ARGS,
        shape: pooling2d,
        params: no_params,
        validate: no_checks,
        takes_ids: false,
    },
    LayerDef {
        class: "GlobalAveragePooling2D",
        aliases: &["GlobalAvgPool2D"],
        base_name: "global_average_pooling2d",
        runtime: "GlobalAveragePooling2D",
        args: &[DATA_FORMAT, arg("keepdims", Kind::Bool, "false")],
        shape: |a, x| {
            let [_, _, c] = image(x)?;
            Ok(Shape {
                open: false,
                dims: if a.flag("keepdims") {
                    vec![Some(1), Some(1), c]
                } else {
                    vec![c]
                },
            })
        },
        params: no_params,
        validate: no_checks,
        takes_ids: false,
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
        shape: normalization,
        params: |a, x| {
            let mut p = gamma_beta(a, x);
            let c = features(a, x);
            for (suffix, init_arg) in [
                ("moving_mean", "moving_mean_initializer"),
                ("moving_variance", "moving_variance_initializer"),
            ] {
                p.push(Param {
                    trainable: false,
                    ..param(suffix, vec![c], init_arg)
                });
            }
            p
        },
        validate: no_checks,
        takes_ids: false,
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
        shape: normalization,
        params: gamma_beta,
        validate: no_checks,
        takes_ids: false,
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
        shape: |a, x| {
            let mut out = x.clone();
            out.dims.push(Some(a.count("output_dim")));
            Ok(out)
        },
        params: |a, _| {
            let dims = vec![Some(a.count("input_dim")), Some(a.count("output_dim"))];
            vec![param("embeddings", dims, "embeddings_initializer")]
        },
        validate: no_checks,
        takes_ids: true,
    },
    LayerDef {
        class: "Activation",
        aliases: &[],
        base_name: "activation",
        runtime: "ActivationLayer",
        args: &[required("activation", Kind::Activation)],
        shape: same_shape,
        params: no_params,
        validate: no_checks,
        takes_ids: false,
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

// ---- shape rules shared by several layers ---------------------------------------------

fn reshape(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let target = a.target_shape();
    let sizes: Vec<usize> = target
        .iter()
        .filter(|&&d| d > 0)
        .map(|&d| d as usize)
        .collect();
    let known = product(&sizes);
    let inferred = target.contains(&-1);
    let count = x.numel();
    let fill = match count {
        Some(n) if inferred && n % known == 0 => Some(n / known),
        Some(n) if !inferred && n == known => None,
        Some(_) => {
            let written = crate::value::Val::TargetShape(target.to_vec());
            return Err(ShapeError {
                arg: Some("target_shape"),
                need: if inferred {
                    format!("a multiple of {known} elements to reshape to {written}")
                } else {
                    format!("{known} elements to reshape to {written}")
                },
            });
        }
        None => None,
    };
    Ok(Shape {
        open: false,
        dims: target
            .iter()
            .map(|&d| if d == -1 { fill } else { Some(d as usize) })
            .collect(),
    })
}

/// `(height, width, channels)` of an image input.
fn image(x: &Shape) -> Result<[Option<usize>; 3], ShapeError> {
    x.exactly::<3>()
        .ok_or_else(|| need("a rank-3 input (height, width, channels)"))
}

/// One spatial axis of a sliding window: its output size, `Err` when a valid window
/// does not fit (same padding always fits).
fn slide(
    input: Option<usize>,
    window: usize,
    stride: usize,
    same: bool,
) -> Result<Option<usize>, ()> {
    let Some(n) = input else { return Ok(None) };
    if same {
        Ok(Some(n.div_ceil(stride)))
    } else if window > n {
        Err(())
    } else {
        Ok(Some((n - window) / stride + 1))
    }
}

/// Slides `window` over both spatial axes; the error names the argument behind it.
fn slide2(
    [h, w]: [Option<usize>; 2],
    window: [usize; 2],
    strides: [usize; 2],
    same: bool,
    what: &str,
    arg: &'static str,
) -> Result<[Option<usize>; 2], ShapeError> {
    match (
        slide(h, window[0], strides[0], same),
        slide(w, window[1], strides[1], same),
    ) {
        (Ok(oh), Ok(ow)) => Ok([oh, ow]),
        _ => Err(ShapeError {
            arg: Some(arg),
            need: format!(
                "an input of at least {}x{} (height x width) for its {what} with valid padding",
                window[0], window[1]
            ),
        }),
    }
}

fn conv2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let [h, w, c] = image(x)?;
    let groups = a.count("groups");
    if let Some(c) = c {
        if c % groups != 0 {
            return Err(ShapeError {
                arg: Some("groups"),
                need: format!("input channels divisible by `groups` ({groups})"),
            });
        }
    }
    let [kh, kw] = a.pair("kernel_size");
    let [dh, dw] = a.pair("dilation_rate");
    let dilated = |k: usize, d: usize| (k - 1).saturating_mul(d).saturating_add(1);
    let window = [dilated(kh, dh), dilated(kw, dw)];
    let what = if window == [kh, kw] {
        format!("{kh}x{kw} kernel")
    } else {
        format!("{kh}x{kw} kernel dilated to {}x{}", window[0], window[1])
    };
    let [oh, ow] = slide2(
        [h, w],
        window,
        a.pair("strides"),
        a.same_padding(),
        &what,
        "kernel_size",
    )?;
    Ok(Shape {
        open: false,
        dims: vec![oh, ow, Some(a.count("filters"))],
    })
}

static POOLING_ARGS: &[ArgDef] = &[
    arg("pool_size", Kind::Pair, "2"),
    arg("strides", Kind::OptionalPair, "None"),
    arg("padding", Kind::Padding, "valid"),
    DATA_FORMAT,
];

fn pooling2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let [h, w, c] = image(x)?;
    let pool = a.pair("pool_size");
    let strides = a.optional_pair("strides").unwrap_or(pool);
    let what = format!("{}x{} pool", pool[0], pool[1]);
    let [oh, ow] = slide2([h, w], pool, strides, a.same_padding(), &what, "pool_size")?;
    Ok(Shape {
        open: false,
        dims: vec![oh, ow, c],
    })
}

/// The normalised features' count: the size of `axis`, when known.
fn features(a: &Args, x: &Shape) -> Option<usize> {
    x.axis(a.axis()).ok().flatten().and_then(|i| x.dims[i])
}

fn normalization(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    match x.axis(a.axis()) {
        Ok(_) => Ok(x.clone()),
        Err(()) => Err(ShapeError {
            arg: Some("axis"),
            need: format!(
                "an input with axis {} (counting the batch axis as 0)",
                a.axis()
            ),
        }),
    }
}

/// Learned scale and offset, one per feature (batch and layer normalisation).
fn gamma_beta(a: &Args, x: &Shape) -> Vec<Param> {
    let c = features(a, x);
    let mut p = Vec::new();
    if a.flag("scale") {
        p.push(param("gamma", vec![c], "gamma_initializer"));
    }
    if a.flag("center") {
        p.push(param("beta", vec![c], "beta_initializer"));
    }
    p
}
