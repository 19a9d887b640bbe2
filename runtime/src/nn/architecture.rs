//! An architecture: a model's layers and how their forward passes compose.

use super::layer::{Forward, Layer, ParamDecl};
use super::onnx::{OnnxForward, OnnxGraph, OnnxValue};
use crate::ir::Value;
use crate::{Error, Result};

/// A stack of layers. `model![...]` generates a type implementing this for each model
/// (with the shapes it checked at compile time as the consts); [`Sequential`] is the same
/// thing assembled at run time.
pub trait Architecture: Send + Sync + 'static {
    /// The input shape without the batch dimension, when declared (`Input(784)` or
    /// `input_shape = 784`); `None` means it is taken from the first data (deferred build).
    const INPUT_SHAPE: Option<&'static [usize]>;
    /// The output shape without the batch dimension, when known before any data is seen.
    const OUTPUT_SHAPE: Option<&'static [usize]>;
    /// Every parameter, when its dims are known before any data is seen: `model!` lists
    /// them, so the expansion shows each weight's dims, and [`Model::build`] checks the
    /// layers create exactly these.
    const PARAMS: Option<&'static [ParamDecl]> = None;

    /// The model's name in summaries.
    fn name(&self) -> &str {
        "sequential"
    }

    /// The input shape, when declared (for run-time architectures; defaults to the const).
    /// A model with several inputs declares them in [`input_shapes`](Architecture::input_shapes).
    fn input_shape(&self) -> Option<Vec<usize>> {
        Self::INPUT_SHAPE.map(|s| s.to_vec())
    }

    /// Every input's shape, in the order the topology numbers them (`Port::Input(i)`),
    /// when declared; one for a stack.
    fn input_shapes(&self) -> Option<Vec<Vec<usize>>> {
        self.input_shape().map(|s| vec![s])
    }

    /// Every input's name (Keras': `input_layer`, `input_layer_1`, … or the `name` given
    /// to `Input`), in the order of [`input_shapes`](Architecture::input_shapes): what a
    /// graph model's summary prints and what data passed by name is matched against.
    fn input_names(&self) -> Vec<&str> {
        vec!["input_layer"]
    }

    /// The names of the layers declared frozen (`trainable = false`): their weights get
    /// no gradient and no optimizer state ([`Model::set_trainable`](crate::Model) changes
    /// this at run time).
    fn frozen(&self) -> Vec<&str> {
        Vec::new()
    }

    /// The layers, in order.
    fn layers(&self) -> Vec<&dyn Layer>;

    /// How the layers are called: by default each once, in order, on the one before's
    /// output (a sequential stack). `model!`'s graph form lists its calls here: a layer
    /// called twice shares its weights, a merge layer takes a list.
    fn topology(&self) -> Topology {
        Topology::chain(self.layers().len())
    }

    /// Emits the forward pass of a model with one input and one output: each call of
    /// [`Architecture::topology`] in turn, `params[i]` holding layer `i`'s parameter
    /// values. (`model!` overrides this with one statement per call, each intermediate's
    /// shape in a comment, so the expansion reads as the model.)
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[&[Value]]) -> Result<Value> {
        let mut outputs = self.walk(cx, &[x], params)?;
        match (outputs.pop(), outputs.is_empty()) {
            (Some(y), true) => Ok(y),
            _ => Err(Error::invalid(
                format!("model `{}`", self.name()),
                format!(
                    "forward gives one output, but the model has {}: call forward_all",
                    outputs.len() + 1
                ),
            )),
        }
    }

    /// Emits the forward pass of every input in `xs` (one per input, in order); one value
    /// per output. A model with one input and one output runs [`forward`](Architecture::forward)
    /// (so an architecture overriding that one is run as written); others walk their
    /// topology, unless overridden (`model!` does, with one statement per call).
    fn forward_all(
        &self,
        cx: &mut Forward<'_>,
        xs: &[Value],
        params: &[&[Value]],
    ) -> Result<Vec<Value>> {
        match xs {
            [x] if self.topology().outputs.len() == 1 => Ok(vec![self.forward(cx, *x, params)?]),
            _ => self.walk(cx, xs, params),
        }
    }

    /// The default forward pass: each call of the topology in turn, on the values of its
    /// inputs.
    #[doc(hidden)]
    fn walk(&self, cx: &mut Forward<'_>, xs: &[Value], params: &[&[Value]]) -> Result<Vec<Value>> {
        let layers = self.layers();
        self.topology().walk(xs, |call, inputs| {
            let layer = layers
                .get(call.layer)
                .ok_or_else(|| call.no_layer(layers.len()))?;
            let p = params.get(call.layer).copied().unwrap_or(&[]);
            layer.call_all(cx, inputs, p)
        })
    }

    /// Emits the ONNX operators of the inference pass of `x` (`[batch, input...]`):
    /// each call's [`Layer::call_onnx`] in turn, wired as the topology wires `forward`,
    /// `params[i]` naming layer `i`'s weights. An architecture whose `forward` is not the
    /// walk of its topology must override this as well, or its export would compute
    /// something else.
    fn onnx(
        &self,
        graph: &mut OnnxGraph,
        x: OnnxValue,
        input: &[usize],
        params: &[&[OnnxValue]],
    ) -> Result<OnnxValue> {
        let layers = self.layers();
        let topology = self.topology();
        if topology.outputs.len() != 1 {
            return Err(Error::invalid(
                "ONNX export",
                format!(
                    "a model with {} outputs cannot be exported yet: export needs one input \
                     and one output",
                    topology.outputs.len()
                ),
            ));
        }
        let shapes = topology.shapes(&layers, &[input.to_vec()])?;
        let shape = |port: Port| match port {
            Port::Input(_) => input,
            Port::Call { call, output } => shapes[call][output].as_slice(),
        };
        let mut out = topology.walk(&[x], |call, inputs| {
            let layer = *layers
                .get(call.layer)
                .ok_or_else(|| call.no_layer(layers.len()))?;
            let ins: Vec<&[usize]> = call.inputs.iter().map(|&p| shape(p)).collect();
            let p = params.get(call.layer).copied().unwrap_or(&[]);
            let mut cx = OnnxForward::call(graph, layer, &ins);
            if layer.call_output_shapes(&ins)?.len() > 1 {
                return Err(cx.unsupported(
                    "",
                    "a call with several outputs (`return_state`) cannot be exported to ONNX \
                     yet",
                ));
            }
            Ok(vec![layer.call_onnx(&mut cx, inputs, p)?])
        })?;
        Ok(out.remove(0))
    }
}

/// Where a call's input comes from: the model's input, or an earlier call's output
/// (`output` 0 for most layers; a recurrent layer with `return_state` gives its states
/// as outputs 1, 2, … in Keras' order, its `[node][tensor_index]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    Input(usize),
    Call { call: usize, output: usize },
}

impl Port {
    /// The first (for most layers the only) output of call `call`.
    pub const fn call(call: usize) -> Port {
        Port::Call { call, output: 0 }
    }
}

/// One call of a layer: `layer` indexes [`Architecture::layers`], `inputs` are one value
/// (or a merge layer's list), each from the model's input or an earlier call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub layer: usize,
    pub inputs: Vec<Port>,
}

impl Call {
    fn no_layer(&self, layers: usize) -> Error {
        Error::invalid(
            "architecture topology",
            format!(
                "a call of layer {} but the model has {layers} layers",
                self.layer
            ),
        )
    }
}

/// The calls of a model's layers, in an order where every input comes before it is
/// read, and which values are the outputs (in order; one for most models).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub calls: Vec<Call>,
    pub outputs: Vec<Port>,
}

impl Topology {
    /// `n` layers, each called once on the one before's output.
    pub fn chain(n: usize) -> Topology {
        let calls = (0..n)
            .map(|i| Call {
                layer: i,
                inputs: vec![if i == 0 {
                    Port::Input(0)
                } else {
                    Port::call(i - 1)
                }],
            })
            .collect();
        Topology {
            calls,
            outputs: vec![if n == 0 {
                Port::Input(0)
            } else {
                Port::call(n - 1)
            }],
        }
    }

    /// Whether this is a plain stack: each layer once, in order, on the one before's
    /// output (what a Keras summary prints without a "Connected to" column).
    pub fn is_chain(&self) -> bool {
        *self == Topology::chain(self.calls.len())
    }

    /// Runs `f` on each call in order, with the values of its inputs, starting from the
    /// model's inputs `xs`; `f` gives each of the call's outputs. The model's outputs'
    /// values. A port that reads a later call, an output a call does not give, or an
    /// input beyond `xs`, is an error (a hand-written topology was wrong).
    pub fn walk<T: Clone>(
        &self,
        xs: &[T],
        mut f: impl FnMut(&Call, &[T]) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let mut values: Vec<Vec<T>> = Vec::with_capacity(self.calls.len());
        for (i, call) in self.calls.iter().enumerate() {
            let inputs = call
                .inputs
                .iter()
                .map(|&p| self.read(p, i, xs, &values))
                .collect::<Result<Vec<T>>>()?;
            values.push(f(call, &inputs)?);
        }
        self.outputs
            .iter()
            .map(|&p| self.read(p, self.calls.len(), xs, &values))
            .collect()
    }

    fn read<T: Clone>(&self, port: Port, before: usize, xs: &[T], values: &[Vec<T>]) -> Result<T> {
        match port {
            Port::Input(i) if i < xs.len() => Ok(xs[i].clone()),
            Port::Call { call, output } if call < before && output < values[call].len() => {
                Ok(values[call][output].clone())
            }
            _ => Err(Error::invalid(
                "architecture topology",
                format!(
                    "{port:?} is read before it exists (call {before}, {} inputs; a call \
                     gives one output unless its layer returns states)",
                    xs.len()
                ),
            )),
        }
    }

    /// Every call's output shapes (one per output, in order) for model inputs of shapes
    /// `inputs`; a layer called again must be called on the shapes of its first call (its
    /// weights are sized by them).
    pub fn shapes(
        &self,
        layers: &[&dyn Layer],
        inputs: &[Vec<usize>],
    ) -> Result<Vec<Vec<Vec<usize>>>> {
        let mut shapes: Vec<Vec<Vec<usize>>> = Vec::with_capacity(self.calls.len());
        let mut first: Vec<Option<Vec<Vec<usize>>>> = vec![None; layers.len()];
        for (i, call) in self.calls.iter().enumerate() {
            let layer = *layers
                .get(call.layer)
                .ok_or_else(|| call.no_layer(layers.len()))?;
            let ins = call
                .inputs
                .iter()
                .map(|&p| self.read(p, i, inputs, &shapes))
                .collect::<Result<Vec<Vec<usize>>>>()?;
            match &first[call.layer] {
                Some(before) if *before != ins => {
                    return Err(super::layer::bad_config(
                        layer,
                        format!(
                            "a shared layer is called on the shapes of its first call; first \
                             {before:?}, then {ins:?}"
                        ),
                    ))
                }
                Some(_) => {}
                None => first[call.layer] = Some(ins.clone()),
            }
            let refs: Vec<&[usize]> = ins.iter().map(|s| s.as_slice()).collect();
            shapes.push(layer.call_output_shapes(&refs)?);
        }
        Ok(shapes)
    }
}

/// A run-time assembled layer stack.
#[derive(Debug, Default)]
pub struct Sequential {
    pub name: String,
    pub input_shape: Option<Vec<usize>>,
    pub layers: Vec<Box<dyn Layer>>,
}

impl Sequential {
    pub fn new(input_shape: Option<Vec<usize>>, layers: Vec<Box<dyn Layer>>) -> Sequential {
        Sequential {
            name: "sequential".into(),
            input_shape,
            layers,
        }
    }
}

impl Architecture for Sequential {
    const INPUT_SHAPE: Option<&'static [usize]> = None;
    const OUTPUT_SHAPE: Option<&'static [usize]> = None;

    fn name(&self) -> &str {
        &self.name
    }

    fn input_shape(&self) -> Option<Vec<usize>> {
        self.input_shape.clone()
    }

    fn layers(&self) -> Vec<&dyn Layer> {
        self.layers.iter().map(|l| l.as_ref()).collect()
    }
}

/// A run-time assembled graph of layers (Keras' functional model built in code): its
/// inputs, its layers and how they are called.
#[derive(Debug)]
pub struct Functional {
    pub name: String,
    /// Each input's name (`input_layer` for one), in the order of `Port::Input`.
    pub input_names: Vec<String>,
    /// Each input's shape, when declared.
    pub input_shapes: Option<Vec<Vec<usize>>>,
    pub layers: Vec<Box<dyn Layer>>,
    pub topology: Topology,
}

impl Functional {
    /// A graph of one input, of `input_shape` when declared.
    pub fn new(
        input_shape: Option<Vec<usize>>,
        layers: Vec<Box<dyn Layer>>,
        topology: Topology,
    ) -> Functional {
        Functional {
            name: "functional".into(),
            input_names: vec!["input_layer".into()],
            input_shapes: input_shape.map(|s| vec![s]),
            layers,
            topology,
        }
    }

    /// A graph of several inputs, each named and shaped (`Port::Input(i)` is the `i`-th).
    pub fn with_inputs(
        inputs: Vec<(String, Vec<usize>)>,
        layers: Vec<Box<dyn Layer>>,
        topology: Topology,
    ) -> Functional {
        let (input_names, shapes) = inputs.into_iter().unzip();
        Functional {
            name: "functional".into(),
            input_names,
            input_shapes: Some(shapes),
            layers,
            topology,
        }
    }
}

impl Architecture for Functional {
    const INPUT_SHAPE: Option<&'static [usize]> = None;
    const OUTPUT_SHAPE: Option<&'static [usize]> = None;

    fn name(&self) -> &str {
        &self.name
    }

    fn input_shape(&self) -> Option<Vec<usize>> {
        match self.input_shapes.as_deref() {
            Some([one]) => Some(one.clone()),
            _ => None,
        }
    }

    fn input_shapes(&self) -> Option<Vec<Vec<usize>>> {
        self.input_shapes.clone()
    }

    fn input_names(&self) -> Vec<&str> {
        self.input_names.iter().map(|n| n.as_str()).collect()
    }

    fn layers(&self) -> Vec<&dyn Layer> {
        self.layers.iter().map(|l| l.as_ref()).collect()
    }

    fn topology(&self) -> Topology {
        self.topology.clone()
    }
}
