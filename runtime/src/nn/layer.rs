//! What a layer is to the runtime: a shape rule, its parameters, and a forward pass that
//! emits primitives. For the layers of the catalogue the first two come from their
//! `strata_spec` entry (see `entry.rs`); a layer keeps its struct and its forward pass.

use super::onnx::{OnnxForward, OnnxValue};
use super::{entry, Activation, Initializer};
use crate::ir::{DType, Graph, TensorType, Value};
use crate::{Error, Result};
use std::fmt;
use strata_spec::Args;

/// One weight or state tensor of a layer.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    /// Keras-style path, e.g. `dense_1/kernel`.
    pub name: String,
    pub dims: Vec<usize>,
    pub init: Initializer,
    /// Fans for variance-scaling initialisers.
    pub fan_in: usize,
    pub fan_out: usize,
    /// Trainable weights get gradients; the others (batch-norm moving statistics) are
    /// state the forward pass may update in training.
    pub trainable: bool,
}

impl ParamSpec {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn ty(&self) -> TensorType {
        TensorType::new(DType::F32, self.dims.clone())
    }
}

/// The context a layer's forward pass emits into.
pub struct Forward<'g> {
    pub g: &'g mut Graph,
    /// Training behaviour (dropout active, batch statistics) or inference.
    pub training: bool,
    key: Option<Value>,
    streams: i32,
    updates: Vec<(Value, Value)>,
    logits: Option<(Value, Value)>,
    /// The last activation applied (other than linear) and its output.
    activated: Option<(Value, Activation)>,
    /// The layers frozen (`trainable = false`): a frozen batch normalisation runs in
    /// inference mode, as in Keras.
    frozen: Vec<String>,
}

impl<'g> Forward<'g> {
    /// `key` is an `i32[2]` random key for this execution (needed by dropout in training).
    pub fn new(g: &'g mut Graph, training: bool, key: Option<Value>) -> Forward<'g> {
        Forward {
            g,
            training,
            key,
            streams: 0,
            updates: Vec::new(),
            logits: None,
            activated: None,
            frozen: Vec::new(),
        }
    }

    /// Records which layers are frozen (the model does, before its forward pass).
    pub fn set_frozen(&mut self, layers: Vec<String>) {
        self.frozen = layers;
    }

    /// Whether the layer named `name` is frozen.
    pub fn is_frozen(&self, name: &str) -> bool {
        self.frozen.iter().any(|f| f == name)
    }

    /// Uniform `[0, 1)` samples from a stream of their own: each call derives a new key
    /// from the execution's key, so two dropout layers never share a mask.
    pub fn random_uniform(&mut self, ty: TensorType) -> Result<Value> {
        let key = self.key.ok_or_else(|| {
            Error::invalid(
                "Forward::random_uniform",
                "this forward pass was built without a random key",
            )
        })?;
        self.streams += 1;
        // Any distinct keys give independent Threefry streams; offset the second word.
        let offset = self.g.constant(crate::Tensor::from_vec(
            &[2],
            vec![0i32, self.streams.wrapping_mul(0x9E37_79B9u32 as i32)],
        )?);
        let k = self.g.add(key, offset)?;
        self.g.random_uniform(k, ty)
    }

    /// Records that state parameter `param` (a value given to the layer) takes the value
    /// `new` after this execution (batch-norm moving statistics).
    pub fn update(&mut self, param: Value, new: Value) {
        self.updates.push((param, new));
    }

    /// State updates recorded so far.
    pub fn updates(&self) -> &[(Value, Value)] {
        &self.updates
    }

    /// Records that `output` is `softmax(logits)`, so losses can work from the logits
    /// (stable and cheaper, as Keras does).
    pub fn mark_softmax(&mut self, output: Value, logits: Value) {
        self.logits = Some((output, logits));
    }

    /// Applies `activation` to `x`, recording the logits when it is a softmax (every layer
    /// with an `activation` argument goes through here, so losses always find them).
    pub fn activate(&mut self, activation: Activation, x: Value) -> Result<Value> {
        let out = activation.apply(self.g, x)?;
        if activation == Activation::Softmax {
            self.mark_softmax(out, x);
        }
        if activation != Activation::Linear {
            self.activated = Some((out, activation));
        }
        Ok(out)
    }

    /// The activation that produced `output`, if it was the last one applied (what a loss
    /// needs to know of a model's output).
    pub fn activation_of(&self, output: Value) -> Option<Activation> {
        if self.logits_of(output).is_some() {
            return Some(Activation::Softmax);
        }
        self.activated.filter(|(o, _)| *o == output).map(|(_, a)| a)
    }

    /// The logits behind `output`, if it was produced by a softmax.
    pub fn logits_of(&self, output: Value) -> Option<Value> {
        self.logits.filter(|(o, _)| *o == output).map(|(_, l)| l)
    }
}

/// A layer of a sequential model.
///
/// A layer of the catalogue (`strata_spec::LAYERS`, found by [`Layer::class`]) implements
/// `class`, `name`, [`Layer::args`] and `forward`: its shape rule, parameters and input
/// type are then its entry's, the same rules `model!` checks at compile time. Any other
/// layer implements `output_shape` and `params` itself.
pub trait Layer: Send + Sync + fmt::Debug {
    /// The Keras class name, e.g. `Dense`.
    fn class(&self) -> &'static str;
    /// The name, unique within a model, e.g. `dense_1`.
    fn name(&self) -> &str;
    /// The layer's arguments as its catalogue entry names them (its fields, as values);
    /// `None` for a layer outside the catalogue.
    fn args(&self) -> Option<Args> {
        None
    }
    /// The element type of inputs this layer takes when it is first (`Embedding` takes
    /// integer ids; everything else f32).
    fn input_dtype(&self) -> DType {
        entry::input_dtype(self)
    }
    /// The output shape (without the batch dimension) for an input shape.
    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        entry::output_shape(self, input)
    }
    /// The parameters this layer creates for an input shape, in the order `forward`
    /// receives them.
    fn params(&self, input: &[usize]) -> Result<Vec<ParamSpec>> {
        entry::params(self, input)
    }
    /// Emits the layer's computation of `x` (`[batch, input...]`); `params` holds one value
    /// per entry of `params()`.
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value>;
    /// Whether a call of the layer may take several inputs: a merge layer's list
    /// (`Add()([a, b])`), an attention layer's query and value; most layers take one.
    fn takes_many(&self) -> bool {
        entry::takes_many(self)
    }
    /// The output shape of one call on `inputs` (each without the batch dimension): a
    /// merge layer's list, or the one input of any other layer.
    fn call_output_shape(&self, inputs: &[&[usize]]) -> Result<Vec<usize>> {
        if self.takes_many() {
            entry::call_output_shape(self, inputs)
        } else {
            self.output_shape(one_input(self, inputs)?)
        }
    }
    /// Every output shape of one call on `inputs`, in order: for a layer of the catalogue
    /// its entry's outputs (a recurrent layer's states after its output, with
    /// `return_state`); for any other layer its one output.
    fn call_output_shapes(&self, inputs: &[&[usize]]) -> Result<Vec<Vec<usize>>> {
        if self.args().is_some() && strata_spec::layer(self.class()).is_some() {
            entry::call_output_shapes(self, inputs)
        } else {
            Ok(vec![self.call_output_shape(inputs)?])
        }
    }
    /// The parameters a call on `inputs` creates (a layer called again reuses them).
    fn call_params(&self, inputs: &[&[usize]]) -> Result<Vec<ParamSpec>> {
        if self.takes_many() {
            entry::call_params(self, inputs)
        } else {
            self.params(one_input(self, inputs)?)
        }
    }
    /// Emits one call of the layer on `inputs`; a one-input layer's is its `forward`.
    fn call(&self, cx: &mut Forward<'_>, inputs: &[Value], params: &[Value]) -> Result<Value> {
        self.forward(cx, *one_input(self, inputs)?, params)
    }
    /// Emits one call of the layer on `inputs`, every output of it in the order of
    /// [`call_output_shapes`](Layer::call_output_shapes): by default the one of
    /// [`call`](Layer::call); a layer of several outputs overrides this.
    fn call_all(
        &self,
        cx: &mut Forward<'_>,
        inputs: &[Value],
        params: &[Value],
    ) -> Result<Vec<Value>> {
        Ok(vec![self.call(cx, inputs, params)?])
    }
    /// The ONNX operators of one call on `inputs`; a one-input layer's are its `onnx`.
    fn call_onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        inputs: &[OnnxValue],
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        self.onnx(cx, one_input(self, inputs)?.clone(), params)
    }
    /// Emits the ONNX operators computing what `forward` computes in inference, of `x`
    /// (`[batch, input...]`, the batch size left open); `params` names one weight per
    /// entry of `params()`. A layer without a mapping (the default) makes
    /// `Model::export_onnx` fail with [`Error::OnnxUnsupported`] naming it.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let _ = (x, params);
        Err(cx.unsupported(
            "",
            "it has no ONNX mapping (a layer outside the catalogue exports by implementing \
             Layer::onnx)",
        ))
    }
}

/// A parameter as `model!` declares it at compile time: the expansion lists these in an
/// associated const, so the dims of every weight are visible in the generated code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: &'static str,
    pub dims: &'static [usize],
    pub init: Initializer,
    pub trainable: bool,
}

impl ParamDecl {
    /// Whether `spec` (what the runtime layer creates) is this declared parameter.
    pub fn matches(&self, spec: &ParamSpec) -> bool {
        self.name == spec.name
            && self.dims == spec.dims.as_slice()
            && self.init == spec.init
            && self.trainable == spec.trainable
    }
}

/// The one input of a call of a layer that takes one, or an error naming the layer.
pub(crate) fn one_input<'a, L: Layer + ?Sized, T>(layer: &L, inputs: &'a [T]) -> Result<&'a T> {
    match inputs {
        [x] => Ok(x),
        _ => Err(bad_config(
            layer,
            format!("takes one input, got a list of {}", inputs.len()),
        )),
    }
}

/// The error for an input shape a layer cannot take.
pub fn bad_input<L: Layer + ?Sized>(layer: &L, input: &[usize], expected: &str) -> Error {
    Error::invalid(
        format!("{} ({})", layer.name(), layer.class()),
        format!(
            "expected input of shape {expected}, got {}",
            crate::ir::Shape::from(input)
        ),
    )
}

/// The error for a layer configured with values it cannot use (zero units, a rate out of
/// range): layers built by hand are not checked at compile time as `model!` layers are.
pub fn bad_config<L: Layer + ?Sized>(layer: &L, message: impl Into<String>) -> Error {
    Error::invalid(format!("{} ({})", layer.name(), layer.class()), message)
}

/// The `N` parameter values a layer's forward pass expects, or an error naming the layer
/// (never an out-of-bounds panic when a caller passes the wrong number).
pub fn expect_params<const N: usize>(layer: &dyn Layer, params: &[Value]) -> Result<[Value; N]> {
    params.try_into().map_err(|_| {
        bad_config(
            layer,
            format!(
                "forward expects {N} parameter value(s), got {}",
                params.len()
            ),
        )
    })
}

/// The kernel and, when the layer has one, the bias among a layer's parameter values.
pub fn kernel_and_bias(
    layer: &dyn Layer,
    use_bias: bool,
    params: &[Value],
) -> Result<(Value, Option<Value>)> {
    if use_bias {
        let [k, b] = expect_params(layer, params)?;
        Ok((k, Some(b)))
    } else {
        let [k] = expect_params(layer, params)?;
        Ok((k, None))
    }
}
