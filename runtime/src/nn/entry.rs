//! The rules of the layers in the catalogue, read from their `strata_spec` entries: a
//! layer's struct gives its arguments ([`Layer::args`]); its entry gives the output shape,
//! the parameters and the input type, by the rules `model!` checks at compile time.

use super::layer::{bad_config, bad_input, Layer, ParamSpec};
use super::{Activation, Initializer, Interpolation, MergeMode, Padding, ScoreMode};
use crate::ir::DType;
use crate::Result;
use strata_spec::{
    Args, CallError, Choice, LayerDef, MergeError, Shape, Val, ACTIVATIONS, INITIALIZERS,
    INTERPOLATIONS, MERGE_MODES, PADDINGS, SCORE_MODES,
};

/// The arguments `list` names, for [`Layer::args`].
pub(crate) fn args<const N: usize>(list: [(&'static str, Val); N]) -> Args {
    let mut args = Args::default();
    for (name, v) in list {
        args.insert(name, v);
    }
    args
}

/// `name` in `table`. Every runtime variant's name is in its table (a test checks), so the
/// fallback, a value no rule reads, is never taken; it keeps this panic-free.
fn named(table: &'static [Choice], name: &str, wrap: fn(&'static Choice) -> Val) -> Val {
    table
        .iter()
        .find(|c| c.name == name)
        .map_or_else(|| Val::Name(name.into()), wrap)
}

pub(crate) fn activation(a: Activation) -> Val {
    named(ACTIVATIONS, a.name(), Val::Activation)
}

pub(crate) fn initializer(i: Initializer) -> Val {
    strata_spec::initializer_named(i.name()).map_or_else(
        || named(INITIALIZERS, i.name(), Val::Initializer),
        Val::Initializer,
    )
}

pub(crate) fn padding(p: Padding) -> Val {
    named(PADDINGS, p.name(), Val::Padding)
}

pub(crate) fn interpolation(i: Interpolation) -> Val {
    named(INTERPOLATIONS, i.name(), Val::Interpolation)
}

pub(crate) fn score_mode(m: ScoreMode) -> Val {
    named(SCORE_MODES, m.name(), Val::ScoreMode)
}

pub(crate) fn merge_mode(m: MergeMode) -> Val {
    named(MERGE_MODES, m.name(), Val::MergeMode)
}

/// A runtime axis (`isize`) as the catalogue's `i64`.
pub(crate) fn axis(a: isize) -> Val {
    Val::Axis(a as i64)
}

/// The entry of a catalogued layer and its arguments, checked against the entry's ranges
/// (a struct built by hand was seen by no compiler).
fn entry<L: Layer + ?Sized>(layer: &L) -> Result<(&'static LayerDef, Args)> {
    let (Some(def), Some(args)) = (strata_spec::layer(layer.class()), layer.args()) else {
        return Err(bad_config(
            layer,
            "a layer outside the catalogue must implement output_shape and params",
        ));
    };
    def.check_args(&args)
        .map_err(|e| bad_config(layer, e.message))?;
    Ok((def, args))
}

/// The entry's shape rule applied to one call's `inputs`: the entry, the arguments, the
/// inputs as the rules see them (what parameters are sized by), and the output shape.
fn apply<L: Layer + ?Sized>(
    layer: &L,
    inputs: &[&[usize]],
) -> Result<(&'static LayerDef, Args, Vec<Shape>, Vec<usize>)> {
    let (def, args) = entry(layer)?;
    let shapes: Vec<Shape> = inputs.iter().map(|x| Shape::known(x)).collect();
    let out = def
        .output(&args, &shapes)
        .map_err(|e| call_error(layer, def, inputs, e))?;
    // A known input gives a known output; no rule makes a size up from nothing.
    let out = out
        .to_known()
        .ok_or_else(|| bad_config(layer, format!("no output shape for inputs {inputs:?}")))?;
    Ok((def, args, shapes, out))
}

/// The runtime's wording of why a call cannot take its inputs.
fn call_error<L: Layer + ?Sized>(
    layer: &L,
    def: &LayerDef,
    inputs: &[&[usize]],
    e: CallError,
) -> crate::Error {
    let shape = |i: usize| crate::ir::Shape::from(inputs.get(i).copied().unwrap_or(&[]));
    match e {
        CallError::Shape(e) => {
            bad_input(layer, inputs.first().copied().unwrap_or(&[]), &e.expected())
        }
        CallError::Merge(MergeError::Count { min, max, got }) => bad_config(
            layer,
            format!(
                "takes {}{}, got {got}",
                MergeError::count_text(min, max),
                def.inputs_text()
            ),
        ),
        CallError::Merge(e @ MergeError::Incompatible { first, second, .. }) => bad_config(
            layer,
            format!(
                "expected {}, got input {first} of shape {} and input {second} of shape {}",
                e.need(),
                shape(first),
                shape(second)
            ),
        ),
        CallError::Merge(e @ MergeError::Axis { .. }) => bad_config(
            layer,
            format!("expected {}, got inputs of shape {}", e.need(), shape(0)),
        ),
        CallError::Merge(e @ MergeError::DotAxes { .. }) => bad_config(
            layer,
            format!(
                "expected {}, got inputs of shape {} and {}",
                e.need(),
                shape(0),
                shape(1)
            ),
        ),
        CallError::Merge(e @ MergeError::Disagree { first, second, .. }) => bad_config(
            layer,
            format!(
                "expected {}, got input {first} of shape {} and input {second} of shape {}",
                e.need(),
                shape(first),
                shape(second)
            ),
        ),
        CallError::Merge(e @ MergeError::NotSequence { input }) => bad_config(
            layer,
            format!(
                "expected {}, got input {input} of shape {}",
                e.need(),
                shape(input)
            ),
        ),
    }
}

pub(crate) fn output_shape<L: Layer + ?Sized>(layer: &L, input: &[usize]) -> Result<Vec<usize>> {
    Ok(apply(layer, &[input])?.3)
}

pub(crate) fn params<L: Layer + ?Sized>(layer: &L, input: &[usize]) -> Result<Vec<ParamSpec>> {
    call_params(layer, &[input])
}

/// The output shape of one call on `inputs`: a merge layer's list, or one input.
pub(crate) fn call_output_shape<L: Layer + ?Sized>(
    layer: &L,
    inputs: &[&[usize]],
) -> Result<Vec<usize>> {
    Ok(apply(layer, inputs)?.3)
}

/// Every output shape of one call on `inputs`, by the entry's `outputs` rule.
pub(crate) fn call_output_shapes<L: Layer + ?Sized>(
    layer: &L,
    inputs: &[&[usize]],
) -> Result<Vec<Vec<usize>>> {
    let (def, args) = entry(layer)?;
    let shapes: Vec<Shape> = inputs.iter().map(|x| Shape::known(x)).collect();
    def.outputs(&args, &shapes)
        .map_err(|e| call_error(layer, def, inputs, e))?
        .into_iter()
        .map(|out| {
            out.to_known()
                .ok_or_else(|| bad_config(layer, format!("no output shape for inputs {inputs:?}")))
        })
        .collect()
}

/// The parameters a call on `inputs` creates (sized by its inputs' shapes).
pub(crate) fn call_params<L: Layer + ?Sized>(
    layer: &L,
    inputs: &[&[usize]],
) -> Result<Vec<ParamSpec>> {
    let (def, args, shapes, _) = apply(layer, inputs)?;
    let input = inputs.first().copied().unwrap_or(&[]);
    def.call_params(&args, &shapes)
        .into_iter()
        .map(|p| {
            let dims: Option<Vec<usize>> = p.dims.iter().copied().collect();
            let init = p
                .initializer(&args)
                .and_then(|c| Initializer::from_name(c.name));
            match (dims, init, p.fans) {
                (Some(dims), Some(init), [Some(fan_in), Some(fan_out)]) => Ok(ParamSpec {
                    name: format!("{}/{}", layer.name(), p.suffix),
                    dims,
                    init,
                    fan_in,
                    fan_out,
                    trainable: p.trainable,
                }),
                _ => Err(bad_config(
                    layer,
                    format!(
                        "parameter `{}` has no known size or initializer for input {input:?}",
                        p.suffix
                    ),
                )),
            }
        })
        .collect()
}

/// Whether the catalogue says a call of `layer` may take several inputs (a merge's list,
/// or an attention layer's query, value and key).
pub(crate) fn takes_many<L: Layer + ?Sized>(layer: &L) -> bool {
    strata_spec::layer(layer.class()).is_some_and(|d| d.takes_many())
}

pub(crate) fn input_dtype<L: Layer + ?Sized>(layer: &L) -> DType {
    match strata_spec::layer(layer.class()) {
        Some(def) if def.takes_ids => DType::I32,
        _ => DType::F32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::*;

    /// One of every runtime layer, with its defaults.
    fn every_layer() -> Vec<Box<dyn Layer>> {
        vec![
            Box::new(Dense::new("dense", 2, Activation::Relu)),
            Box::new(Flatten::new("flatten")),
            Box::new(Reshape::new("reshape", vec![-1])),
            Box::new(Dropout::new("dropout", 0.5)),
            Box::new(Conv2D::new("conv2d", 2, [3, 3], Activation::Relu)),
            Box::new(MaxPooling2D::new("max_pooling2d", [2, 2])),
            Box::new(AveragePooling2D::new("average_pooling2d", [2, 2])),
            Box::new(GlobalAveragePooling2D::new("global_average_pooling2d")),
            Box::new(GlobalMaxPooling2D::new("global_max_pooling2d")),
            Box::new(BatchNormalization::new("batch_normalization")),
            Box::new(LayerNormalization::new("layer_normalization")),
            Box::new(Embedding::new("embedding", 10, 4)),
            Box::new(ActivationLayer::new("activation", Activation::Relu)),
            // Issue 14: shape and activation layers.
            Box::new(Rescaling::new("rescaling", 1.0 / 255.0)),
            Box::new(Softmax::new("softmax")),
            Box::new(ReLU::new("re_lu")),
            Box::new(LeakyReLU::new("leaky_re_lu")),
            Box::new(PReLU::new("p_re_lu")),
            Box::new(ZeroPadding2D::new("zero_padding2d")),
            Box::new(Cropping2D::new("cropping2d")),
            Box::new(UpSampling2D::new("up_sampling2d")),
            Box::new(Permute::new("permute", vec![2, 1])),
            Box::new(RepeatVector::new("repeat_vector", 3)),
            Box::new(Conv1D::new("conv1d", 2, 3, Activation::Relu)),
            Box::new(MaxPooling1D::new("max_pooling1d", 2)),
            Box::new(AveragePooling1D::new("average_pooling1d", 2)),
            Box::new(GlobalAveragePooling1D::new("global_average_pooling1d")),
            Box::new(GlobalMaxPooling1D::new("global_max_pooling1d")),
            Box::new(DepthwiseConv2D::new(
                "depthwise_conv2d",
                [3, 3],
                Activation::Relu,
            )),
            Box::new(SeparableConv2D::new(
                "separable_conv2d",
                2,
                [3, 3],
                Activation::Relu,
            )),
            Box::new(Conv2DTranspose::new(
                "conv2d_transpose",
                2,
                [3, 3],
                Activation::Relu,
            )),
            Box::new(GroupNormalization::new("group_normalization")),
            // Issue 14: merge layers.
            Box::new(Add::new("add")),
            Box::new(Subtract::new("subtract")),
            Box::new(Multiply::new("multiply")),
            Box::new(Average::new("average")),
            Box::new(Maximum::new("maximum")),
            Box::new(Minimum::new("minimum")),
            Box::new(Concatenate::new("concatenate")),
            // Issue 14: products and attention.
            Box::new(Dot::new("dot", -1)),
            Box::new(Attention::new("attention")),
            Box::new(MultiHeadAttention::new("multi_head_attention", 2, 4)),
            // Issue 15: recurrent layers.
            Box::new(SimpleRNN::new("simple_rnn", 2)),
            Box::new(LSTM::new("lstm", 2)),
            Box::new(GRU::new("gru", 2)),
            Box::new(Bidirectional::new("bidirectional", LSTM::new("lstm", 2))),
            Box::new(TimeDistributed::new(
                "time_distributed",
                Dense::new("dense", 2, Activation::Relu),
            )),
        ]
    }

    /// The runtime struct gives exactly the arguments its entry stores as fields, each of
    /// its kind's value type: the rules never read a missing argument's fallback.
    #[test]
    fn every_layer_gives_its_entry_its_arguments() {
        let layers = every_layer();
        for def in strata_spec::LAYERS.iter().filter(|d| !d.is_input()) {
            let layer = layers
                .iter()
                .find(|l| l.class() == def.class)
                .unwrap_or_else(|| panic!("{} has no runtime layer in this test", def.class));
            let args = layer
                .args()
                .expect("a catalogued layer gives its arguments");
            for a in def.args {
                let v = args.get(a.name);
                assert_eq!(v.is_some(), a.field, "{}.{}", def.class, a.name);
                if let Some(v) = v {
                    let fits = matches!(
                        (a.kind, v),
                        (strata_spec::Kind::Count, Val::Usize(_))
                            | (strata_spec::Kind::Pair, Val::Pair(_))
                            | (
                                strata_spec::Kind::OptionalPair
                                    | strata_spec::Kind::OptionalPadding,
                                Val::OptionalPair(_)
                            )
                            | (strata_spec::Kind::Size, Val::Usize(_))
                            | (strata_spec::Kind::OptionalSize, Val::OptionalUsize(_))
                            | (
                                strata_spec::Kind::Rate
                                    | strata_spec::Kind::Fraction
                                    | strata_spec::Kind::Positive,
                                Val::Float(_)
                            )
                            | (strata_spec::Kind::Bool, Val::Bool(_))
                            | (strata_spec::Kind::Activation, Val::Activation(_))
                            | (strata_spec::Kind::Initializer, Val::Initializer(_))
                            | (strata_spec::Kind::Padding, Val::Padding(_))
                            | (strata_spec::Kind::Axis, Val::Axis(_))
                            | (strata_spec::Kind::TargetShape, Val::TargetShape(_))
                            | (
                                strata_spec::Kind::Number | strata_spec::Kind::NonNegative,
                                Val::Float(_)
                            )
                            | (
                                strata_spec::Kind::OptionalNonNegative,
                                Val::OptionalFloat(_)
                            )
                            | (strata_spec::Kind::OptionalAxes, Val::Axes(_))
                            | (strata_spec::Kind::Margins, Val::Margins(_))
                            | (strata_spec::Kind::Interpolation, Val::Interpolation(_))
                            | (strata_spec::Kind::Dims, Val::Dims(_))
                            | (strata_spec::Kind::AxisPair, Val::AxisPair(_))
                            | (strata_spec::Kind::ScoreMode, Val::ScoreMode(_))
                            | (strata_spec::Kind::MergeMode, Val::MergeMode(_))
                            | (strata_spec::Kind::Layer, Val::Layer(_))
                    );
                    assert!(fits, "{}.{}: {v:?} for {:?}", def.class, a.name, a.kind);
                }
            }
            let runtime = format!("{layer:?}");
            assert!(
                runtime.starts_with(def.runtime),
                "{} is the struct {}, not {runtime}",
                def.class,
                def.runtime
            );
        }
        assert_eq!(
            layers.len(),
            strata_spec::LAYERS.iter().filter(|d| !d.is_input()).count(),
            "one runtime layer per entry"
        );
    }

    #[test]
    fn every_variant_has_its_name_in_the_catalogue() {
        // The name, and the variant the macro's expansion writes for it.
        let same = |v: Val, name: &str, variant: String| {
            matches!(v, Val::Activation(c) | Val::Initializer(c) | Val::Padding(c)
                | Val::Interpolation(c) | Val::ScoreMode(c) | Val::MergeMode(c)
                if c.name == name && c.variant == variant)
        };
        for a in Activation::ALL {
            assert!(same(activation(a), a.name(), format!("{a:?}")), "{a:?}");
        }
        for i in Initializer::ALL {
            assert!(same(initializer(i), i.name(), format!("{i:?}")), "{i:?}");
        }
        for p in [Padding::Valid, Padding::Same, Padding::Causal] {
            assert!(same(padding(p), p.name(), format!("{p:?}")), "{p:?}");
        }
        for i in Interpolation::ALL {
            assert!(same(interpolation(i), i.name(), format!("{i:?}")), "{i:?}");
        }
        for m in ScoreMode::ALL {
            let v = score_mode(m);
            assert!(same(v, m.name(), format!("{m:?}")), "{m:?}");
        }
        for m in MergeMode::ALL {
            let v = merge_mode(m);
            assert!(same(v, m.name(), format!("{m:?}")), "{m:?}");
        }
    }
}
