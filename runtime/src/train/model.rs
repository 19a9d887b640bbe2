//! A model: an architecture (its layers, in order) plus its weights, and once compiled
//! its training state.

use super::inference::{HostWeights, Inference};
use super::placement::Placement;
use super::TrainState;
use crate::backend::Backend;
use crate::ir::side_by_side::packed_dims;
use crate::ir::Value;
use crate::nn::{Architecture, Forward, Layer, ParamSpec, Port, Topology};
use crate::random::Rng;
use crate::strategy::Strategy;
use crate::{Error, Result, Tensor};
use std::fmt::Write;
use std::sync::Arc;

/// Shapes and parameters fixed by the first input shape.
#[derive(Clone, Debug)]
pub(crate) struct Built {
    /// The shape of one sample as the step graphs take it: the input's, or for a model
    /// with several inputs their elements side by side (see [`Model::pack_inputs`]).
    pub input: Vec<usize>,
    /// Each input's shape.
    pub inputs: Vec<Vec<usize>>,
    /// Output shapes of each call of the topology (of each layer, in a stack), one per
    /// output of the call (a recurrent layer's states after its output).
    pub outputs: Vec<Vec<Vec<usize>>>,
    /// The shape of one sample's prediction as the step graphs give it: the output's, or
    /// for a model with several outputs their elements side by side.
    pub output: Vec<usize>,
    /// Each output's shape.
    pub heads: Vec<Vec<usize>>,
    pub params: Vec<ParamSpec>,
    /// The range of `params` belonging to each layer.
    pub ranges: Vec<std::ops::Range<usize>>,
    /// Whether each parameter is trainable by its layer's own rule (batch-norm moving
    /// statistics are not), before freezing.
    pub own_trainable: Vec<bool>,
}

/// An architecture with its weights, and once compiled its training state.
pub struct Model<A: Architecture> {
    arch: A,
    seed: u64,
    pub(crate) built: Option<Built>,
    /// Host copies of every parameter (trainable and state), in `built.params` order.
    /// Current whenever no `fit`/`evaluate` call is running.
    pub(crate) weights: HostWeights,
    /// What the `&self` inference calls run on.
    pub(crate) inference: Inference,
    /// Where graphs run (see [`Placement`]).
    pub(crate) placement: Placement,
    /// Optimizer, loss, metrics and their device buffers, after `compile`.
    pub(crate) train: Option<TrainState>,
    /// The strategy `backend` came from, if any.
    strategy: Option<Strategy>,
    /// The names of the frozen layers (`trainable = false`).
    frozen: Vec<String>,
}

impl<A: Architecture> Model<A> {
    /// A model of `arch`; built at once if the architecture declares its input shape.
    /// (Should that build fail, its parameters too large to allocate say, the model stays
    /// unbuilt and the error comes back from `compile` or the first call that needs the
    /// shapes.) Created inside [`Strategy::scope`], it runs on that strategy's devices;
    /// otherwise on the device `STRATA_DEVICE` names (opened, and a bad name reported, by
    /// `compile`, or by `predict` when that comes first), else on the native backend. A
    /// device or strategy set in code wins over the variable.
    pub fn new(arch: A) -> Model<A> {
        let strategy = Strategy::current();
        let placement = match &strategy {
            Some(s) => Placement::chosen(s.backend()),
            None => Placement::from_env(),
        };
        let frozen = arch.frozen().into_iter().map(String::from).collect();
        let mut m = Model {
            frozen,
            arch,
            seed: 0,
            built: None,
            weights: HostWeights::default(),
            inference: Inference::default(),
            placement,
            train: None,
            strategy,
        };
        if let Some(shapes) = m.arch.input_shapes() {
            let _ = m.build_inputs(&shapes);
        }
        m
    }

    /// Re-initialises the weights from `seed` (the default seed is 0).
    pub fn with_seed(mut self, seed: u64) -> Result<Model<A>> {
        self.seed = seed;
        if let Some(b) = self.built.take() {
            self.build_inputs(&b.inputs)?;
        }
        Ok(self)
    }

    pub fn arch(&self) -> &A {
        &self.arch
    }

    /// Runs this model's graphs on `backend` from now on (training state is moved there
    /// at the next `fit`).
    pub fn set_backend(&mut self, backend: Arc<dyn Backend>) {
        if let Some(t) = &mut self.train {
            t.drop_device();
        }
        self.inference.clear();
        self.placement = Placement::chosen(backend);
        self.strategy = None;
    }

    /// Runs this model under `strategy` from now on: its parameters, optimizer state and
    /// metrics move onto the strategy's devices (replicated) at the next `fit`, and `fit`
    /// splits each global batch over its replicas. The same as creating the model inside
    /// `strategy.scope(...)`.
    pub fn set_strategy(&mut self, strategy: &Strategy) {
        self.set_backend(strategy.backend());
        self.strategy = Some(strategy.clone());
    }

    /// The strategy this model runs under, if it was given one.
    pub fn strategy(&self) -> Option<&Strategy> {
        self.strategy.as_ref()
    }

    /// Runs this model on `device` (see [`Device`](crate::backend::Device)).
    pub fn set_device(&mut self, device: crate::backend::Device) -> Result<()> {
        self.set_backend(Arc::from(device.backend()?));
        Ok(())
    }

    /// The backend this model's graphs run on; opens the device `STRATA_DEVICE` names if
    /// the model runs there and no call has opened it yet (its errors are that device's).
    pub fn backend(&self) -> Result<&Arc<dyn Backend>> {
        self.placement.backend("backend")
    }

    /// The seed weights were initialised from (and training randomness derives from).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn name(&self) -> &str {
        self.arch.name()
    }

    /// Fixes the input shape (without batch), computing every layer's shape and
    /// initialising the weights. Building again with the same shape does nothing; another
    /// shape is an error.
    pub fn build(&mut self, input: &[usize]) -> Result<()> {
        let n = self.input_count();
        if n != 1 {
            return Err(Error::invalid(
                format!("model `{}`", self.arch.name()),
                format!(
                    "build takes the shape of one input, but the model has {n} ({}): call \
                     build_inputs with one shape each",
                    self.arch.input_names().join(", ")
                ),
            ));
        }
        self.build_inputs(&[input.to_vec()])
    }

    /// Fixes the shapes (without batch) of every input, in order, as
    /// [`build`](Model::build) does for one.
    pub fn build_inputs(&mut self, inputs: &[Vec<usize>]) -> Result<()> {
        if let Some(b) = &self.built {
            if b.inputs == inputs {
                return Ok(());
            }
            let text = |s: &[Vec<usize>]| match s {
                [one] => format!("{one:?}"),
                _ => format!("{s:?}"),
            };
            return Err(Error::invalid(
                format!("model `{}`", self.arch.name()),
                format!(
                    "built for inputs of shape {}, got inputs of shape {}",
                    text(&b.inputs),
                    text(inputs)
                ),
            ));
        }
        let (built, weights) = self.initial_state(inputs)?;
        self.weights = weights;
        self.built = Some(built);
        Ok(())
    }

    /// How many outputs the model gives.
    pub fn output_count(&self) -> usize {
        self.arch.topology().outputs.len()
    }

    /// How many inputs the model takes.
    pub fn input_count(&self) -> usize {
        self.arch.input_names().len()
    }

    /// What `build_inputs(inputs)` sets: every layer's shapes and parameters, and the
    /// weights initialised from the seed.
    pub(crate) fn initial_state(&self, inputs: &[Vec<usize>]) -> Result<(Built, HostWeights)> {
        let layers = self.arch.layers();
        let topology = self.arch.topology();
        let names = self.arch.input_names();
        if inputs.len() != names.len() {
            return Err(Error::invalid(
                format!("model `{}`", self.arch.name()),
                format!(
                    "the model has {} inputs ({}), got {} shapes",
                    names.len(),
                    names.join(", "),
                    inputs.len()
                ),
            ));
        }
        let outputs = topology.shapes(&layers, inputs)?;
        // Each layer's parameters, sized by its first call (a shared layer has one set).
        let mut per_layer: Vec<Option<Vec<ParamSpec>>> = vec![None; layers.len()];
        for call in &topology.calls {
            if per_layer[call.layer].is_some() {
                continue;
            }
            let ins: Vec<&[usize]> = call
                .inputs
                .iter()
                .map(|&p| match p {
                    Port::Call { call, output } => outputs
                        .get(call)
                        .and_then(|o| o.get(output))
                        .map_or(&[][..], |s| s.as_slice()),
                    Port::Input(i) => inputs.get(i).map_or(&[][..], |s| s.as_slice()),
                })
                .collect();
            per_layer[call.layer] = Some(layers[call.layer].call_params(&ins)?);
        }
        let mut params = Vec::new();
        let mut ranges = Vec::new();
        let mut own_trainable = Vec::new();
        for (layer, p) in layers.iter().zip(per_layer) {
            let mut p = p.unwrap_or_default();
            ranges.push(params.len()..params.len() + p.len());
            own_trainable.extend(p.iter().map(|spec| spec.trainable));
            if self.frozen.iter().any(|f| f == layer.name()) {
                for spec in &mut p {
                    spec.trainable = false;
                }
            }
            params.extend(p);
        }
        let heads: Vec<Vec<usize>> = topology
            .outputs
            .iter()
            .map(|&p| match p {
                Port::Call { call, output } => outputs
                    .get(call)
                    .and_then(|o| o.get(output))
                    .cloned()
                    .unwrap_or_default(),
                Port::Input(i) => inputs.get(i).cloned().unwrap_or_default(),
            })
            .collect();
        let shape = packed_dims(&heads);
        // What the architecture declared at compile time must be what its layers do.
        if let Some(declared) = A::OUTPUT_SHAPE {
            if declared != shape.as_slice() {
                return Err(Error::invalid(
                    format!("model `{}`", self.arch.name()),
                    format!("declared output shape {declared:?} but the layers give {shape:?}"),
                ));
            }
        }
        if let Some(declared) = A::PARAMS {
            let differ = |m: String| Error::invalid(format!("model `{}`", self.arch.name()), m);
            if declared.len() != params.len() {
                return Err(differ(format!(
                    "declared {} parameters but the layers create {}",
                    declared.len(),
                    params.len()
                )));
            }
            if let Some((d, p)) = declared.iter().zip(&params).find(|(d, p)| !d.matches(p)) {
                return Err(differ(format!(
                    "declared parameter {d:?} but the layers create {p:?}"
                )));
            }
        }
        let name = self.arch.name();
        // Every weight's size, and their sum, is checked before any is sampled: weights
        // too large to exist fail at once, not after the ones before them were allocated
        // and filled (which a machine with enough memory, or overcommit, would do).
        let mut bytes: u64 = 0;
        for p in &params {
            let ty = p.ty();
            let what = || format!("model `{name}`: parameter `{}` {ty}", p.name);
            let n = crate::memory::element_count(what, &ty)?;
            let sum = (n as u64)
                .checked_mul(ty.dtype.size_bytes() as u64)
                .and_then(|b| b.checked_add(bytes));
            bytes = sum.filter(|&b| b <= isize::MAX as u64).ok_or_else(|| {
                crate::memory::out_of_memory(|| format!("model `{name}`: its parameters"), sum)
            })?;
        }
        let mut rng = Rng::new(self.seed);
        let weights = HostWeights::new(
            params
                .iter()
                .map(|p| {
                    let mut r = rng.fork();
                    let what = || format!("model `{name}`: parameter `{}` {}", p.name, p.ty());
                    let w = p
                        .init
                        .sample_named(what, &p.dims, p.fan_in, p.fan_out, &mut r)?;
                    Ok(Tensor::F32(w))
                })
                .collect::<Result<_>>()?,
        );
        let built = Built {
            input: packed_dims(inputs),
            inputs: inputs.to_vec(),
            outputs,
            output: shape,
            heads,
            params,
            ranges,
            own_trainable,
        };
        Ok((built, weights))
    }

    pub fn is_built(&self) -> bool {
        self.built.is_some()
    }

    /// The input shape without batch, once built.
    pub fn input_shape(&self) -> Option<&[usize]> {
        self.built.as_ref().map(|b| b.input.as_slice())
    }

    /// The output shape without batch, once built.
    pub fn output_shape(&self) -> Option<&[usize]> {
        self.built.as_ref().map(|b| b.output.as_slice())
    }

    /// Every parameter's description, once built.
    pub fn params(&self) -> &[ParamSpec] {
        self.built
            .as_ref()
            .map(|b| b.params.as_slice())
            .unwrap_or(&[])
    }

    /// Emits the forward pass of `x` (`[batch, input...]`; for a model with several inputs
    /// their packed rows, see `ir::side_by_side`) given one value per parameter: the output,
    /// or the outputs' packed rows.
    pub fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let built = self
            .built
            .as_ref()
            .ok_or_else(|| Error::invalid("forward", "the model is not built"))?;
        if params.len() != built.params.len() {
            return Err(Error::invalid(
                "forward",
                format!(
                    "{} parameter values for {} parameters",
                    params.len(),
                    built.params.len()
                ),
            ));
        }
        let per_layer: Vec<&[Value]> = built.ranges.iter().map(|r| &params[r.clone()]).collect();
        cx.set_frozen(self.frozen.clone());
        if built.inputs.len() == 1 && built.heads.len() == 1 {
            return self.arch.forward(cx, x, &per_layer);
        }
        let xs = if built.inputs.len() == 1 {
            vec![x]
        } else {
            crate::ir::side_by_side::split(cx.g, x, &built.inputs, &self.input_dtypes())?
        };
        let ys = self.arch.forward_all(cx, &xs, &per_layer)?;
        if ys.len() != built.heads.len() {
            return Err(Error::invalid(
                format!("model `{}`", self.arch.name()),
                format!(
                    "forward_all gave {} outputs for the topology's {}",
                    ys.len(),
                    built.heads.len()
                ),
            ));
        }
        match ys.as_slice() {
            [y] => Ok(*y),
            _ => crate::ir::side_by_side::join(cx.g, &ys),
        }
    }

    /// Freezes (`false`) or unfreezes the layer named `layer`, as Keras' `layer.trainable
    /// = False`: a frozen layer's weights get no gradient and no optimizer state, and a
    /// frozen batch normalisation runs in inference mode. Like Keras, it takes effect at
    /// the next `compile`, so it is refused on a compiled model (compile again after).
    pub fn set_trainable(&mut self, layer: &str, trainable: bool) -> Result<()> {
        let what = || format!("set_trainable(\"{layer}\")");
        let names: Vec<String> = self
            .arch
            .layers()
            .iter()
            .map(|l| l.name().to_string())
            .collect();
        if !names.iter().any(|n| n == layer) {
            return Err(Error::invalid(
                what(),
                format!(
                    "the model has no layer `{layer}`; its layers: {}",
                    names.join(", ")
                ),
            ));
        }
        if self.train.is_some() {
            return Err(Error::invalid(
                what(),
                "the model is compiled; change trainable before compile (Keras too needs a \
                 compile after it)",
            ));
        }
        self.frozen.retain(|f| f != layer);
        if !trainable {
            self.frozen.push(layer.to_string());
        }
        if let Some(b) = &mut self.built {
            let layers = self.arch.layers();
            if let Some(i) = layers.iter().position(|l| l.name() == layer) {
                for k in b.ranges[i].clone() {
                    // Trainable again: what the layer itself says of the parameter.
                    b.params[k].trainable = trainable && b.own_trainable[k];
                }
            }
        }
        Ok(())
    }

    /// The element type the model's inputs must have (f32 for the packed rows of several
    /// inputs, which the step graphs convert).
    pub fn input_dtype(&self) -> crate::ir::DType {
        match self.input_dtypes().as_slice() {
            [one] => *one,
            _ => crate::ir::DType::F32,
        }
    }

    /// The element type each input must have: what the first layer reading it takes.
    pub fn input_dtypes(&self) -> Vec<crate::ir::DType> {
        let layers = self.arch.layers();
        let topology = self.arch.topology();
        (0..self.input_count())
            .map(|i| {
                topology
                    .calls
                    .iter()
                    .find(|c| c.inputs.contains(&Port::Input(i)))
                    .and_then(|c| layers.get(c.layer).copied())
                    .map_or(crate::ir::DType::F32, |l| l.input_dtype())
            })
            .collect()
    }

    /// The names of the outputs, in order: the layer producing each (Keras keys a
    /// multi-output model's losses, metrics and logs by them).
    pub fn output_names(&self) -> Vec<String> {
        let layers = self.arch.layers();
        let topology = self.arch.topology();
        let inputs = self.arch.input_names();
        topology
            .outputs
            .iter()
            .map(|&p| match p {
                Port::Call { call, .. } => topology
                    .calls
                    .get(call)
                    .and_then(|call| layers.get(call.layer))
                    .map_or("?".to_string(), |l| l.name().to_string()),
                Port::Input(i) => inputs.get(i).map_or("?", |n| n).to_string(),
            })
            .collect()
    }

    /// Refuses, for `what`, a model with several inputs or outputs (a call that handles
    /// one of each only).
    pub(crate) fn check_single_io(&self, what: &str) -> Result<()> {
        let (inputs, outputs) = (self.input_count(), self.arch.topology().outputs.len());
        if inputs == 1 && outputs == 1 {
            return Ok(());
        }
        Err(Error::invalid(
            what,
            format!(
                "model `{}` has {inputs} inputs and {outputs} outputs; {what} handles models \
                 with one of each only, so far",
                self.arch.name()
            ),
        ))
    }

    /// Each input's shape (without batch), once built.
    pub fn input_shapes(&self) -> Option<&[Vec<usize>]> {
        self.built.as_ref().map(|b| b.inputs.as_slice())
    }

    /// Each output's shape (without batch), once built.
    pub fn output_shapes(&self) -> Option<&[Vec<usize>]> {
        self.built.as_ref().map(|b| b.heads.as_slice())
    }

    /// A Keras-style table of layers, output shapes and parameter counts.
    pub fn summary(&self) -> String {
        summary(
            self.arch.name(),
            &self.arch.input_names(),
            &self.arch.layers(),
            &self.arch.topology(),
            self.built.as_ref(),
        )
    }
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `427.29 KB` for f32 parameter memory.
fn bytes(n: usize) -> String {
    crate::error::bytes_text((n as u64).saturating_mul(4))
}

/// A Keras summary: for a stack, one row per layer (name and type, output shape,
/// parameters); for a graph, as Keras prints a functional model, the input first and a
/// "Connected to" column naming each call's inputs (`conv2d[0][0]`: the first call of
/// `conv2d`, its output). A shared layer is one row, its parameters counted once.
fn summary(
    name: &str,
    inputs: &[&str],
    layers: &[&dyn Layer],
    topology: &Topology,
    built: Option<&Built>,
) -> String {
    let graph = !topology.is_chain();
    let widths: &[usize] = if graph {
        &[28, 20, 10, 32]
    } else {
        &[31, 22, 13]
    };
    let mut rows: Vec<Vec<Vec<String>>> = Vec::new();
    let shape_text = |dims: &[usize]| {
        let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        format!("(None, {})", dims.join(", "))
    };
    if graph {
        for (i, input) in inputs.iter().enumerate() {
            let shape = built
                .and_then(|b| b.inputs.get(i))
                .map_or("?".to_string(), |s| shape_text(s));
            rows.push(vec![
                vec![format!("{input} (InputLayer)")],
                vec![shape],
                vec!["0".into()],
                vec!["-".into()],
            ]);
        }
    }
    // Which call of its layer each call is (Keras' node index), for "Connected to".
    let mut node = vec![0; topology.calls.len()];
    let mut seen = vec![0; layers.len()];
    for (i, call) in topology.calls.iter().enumerate() {
        if let Some(n) = seen.get_mut(call.layer) {
            node[i] = *n;
            *n += 1;
        }
    }
    let port_text = |p: Port| match p {
        Port::Input(i) => format!("{}[0][0]", inputs.get(i).copied().unwrap_or("?")),
        Port::Call { call, output } => {
            let layer = topology.calls.get(call).map_or(usize::MAX, |c| c.layer);
            let name = layers.get(layer).map_or("?", |l| l.name());
            let node = node.get(call).copied().unwrap_or(0);
            format!("{name}[{node}][{output}]")
        }
    };
    let (mut total, mut trainable) = (0, 0);
    for (i, layer) in layers.iter().enumerate() {
        let label = format!("{} ({})", layer.name(), layer.class());
        let calls: Vec<usize> = (0..topology.calls.len())
            .filter(|&c| topology.calls[c].layer == i)
            .collect();
        let (shape, count) = match built {
            Some(b) => {
                let shape = calls.last().map_or("?".to_string(), |&c| {
                    match b.outputs.get(c).map(Vec::as_slice) {
                        Some([one]) => shape_text(one),
                        // Keras lists a call's several outputs in brackets.
                        Some(all) => {
                            let all: Vec<String> = all.iter().map(|s| shape_text(s)).collect();
                            format!("[{}]", all.join(", "))
                        }
                        None => "?".to_string(),
                    }
                });
                let own = &b.params[b.ranges[i].clone()];
                let n: usize = own.iter().map(|p| p.numel()).sum();
                let t: usize = own.iter().filter(|p| p.trainable).map(|p| p.numel()).sum();
                total += n;
                trainable += t;
                (shape, thousands(n))
            }
            None => ("?".to_string(), "0 (unbuilt)".to_string()),
        };
        let mut row = vec![vec![label], vec![shape], vec![count]];
        if graph {
            let connected: Vec<String> = calls
                .iter()
                .flat_map(|&c| topology.calls[c].inputs.iter().map(|&p| port_text(p)))
                .collect();
            row.push(connected);
        }
        rows.push(row);
    }
    let mut out = format!("Model: \"{name}\"\n");
    out += &table(widths, &rows);
    for (what, n) in [
        ("Total", total),
        ("Trainable", trainable),
        ("Non-trainable", total - trainable),
    ] {
        let _ = writeln!(out, " {what} params: {} ({})", thousands(n), bytes(n));
    }
    out
}

/// `text` in lines of at most `width` characters, broken at spaces where it can be (as
/// Keras' summaries wrap a long layer name and its type).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        let used = line.chars().count();
        if used > 0 && used + 1 + word.len() <= width {
            line.push(' ');
            line.extend(&word);
            continue;
        }
        if used > 0 {
            lines.push(std::mem::take(&mut line));
        }
        while word.len() > width {
            lines.push(word.drain(..width).collect());
        }
        line = word.into_iter().collect();
    }
    lines.push(line);
    lines
}

/// A table in the box characters Keras' summaries use: a header row, then `rows`, each
/// cell one or more lines (the last column left-aligned but the parameter counts', which
/// are right-aligned).
fn table(widths: &[usize], rows: &[Vec<Vec<String>>]) -> String {
    let line = |l: char, m: char, r: char, fill: char| {
        let mut s = String::new();
        s.push(l);
        for (i, w) in widths.iter().enumerate() {
            s.extend(std::iter::repeat_n(fill, w + 2));
            s.push(if i + 1 < widths.len() { m } else { r });
        }
        s.push('\n');
        s
    };
    let row = |cells: &[Vec<String>], sep: char| {
        let cells: Vec<Vec<String>> = cells
            .iter()
            .zip(widths)
            .map(|(c, &w)| c.iter().flat_map(|line| wrap(line, w)).collect())
            .collect();
        let height = cells.iter().map(|c| c.len()).max().unwrap_or(1).max(1);
        let mut s = String::new();
        for k in 0..height {
            s.push(sep);
            for (i, (c, &w)) in cells.iter().zip(widths).enumerate() {
                let c = c.get(k).map_or("", |c| c.as_str());
                if i == 2 {
                    let _ = write!(s, " {c:>w$} ");
                } else {
                    let _ = write!(s, " {c:<w$} ");
                }
                s.push(sep);
            }
            s.push('\n');
        }
        s
    };
    let header: Vec<Vec<String>> = ["Layer (type)", "Output Shape", "Param #", "Connected to"]
        .iter()
        .take(widths.len())
        .map(|h| vec![h.to_string()])
        .collect();
    let mut out = line('┏', '┳', '┓', '━');
    out += &row(&header, '┃');
    out += &line('┡', '╇', '┩', '━');
    for (i, cells) in rows.iter().enumerate() {
        out += &row(cells, '│');
        if i + 1 < rows.len() {
            out += &line('├', '┼', '┤', '─');
        }
    }
    out += &line('└', '┴', '┘', '─');
    out
}
