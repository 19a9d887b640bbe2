//! A model: an architecture (its layers, in order) plus its weights, and once compiled
//! its training state.

use super::inference::{HostWeights, Inference};
use super::placement::Placement;
use super::TrainState;
use crate::backend::Backend;
use crate::ir::Value;
use crate::nn::{Architecture, Forward, Layer, ParamSpec};
use crate::random::Rng;
use crate::strategy::Strategy;
use crate::{Error, Result, Tensor};
use std::fmt::Write;
use std::sync::Arc;

/// Shapes and parameters fixed by the first input shape.
#[derive(Clone, Debug)]
pub(crate) struct Built {
    pub input: Vec<usize>,
    /// Output shape of each layer.
    pub outputs: Vec<Vec<usize>>,
    pub params: Vec<ParamSpec>,
    /// The range of `params` belonging to each layer.
    pub ranges: Vec<std::ops::Range<usize>>,
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
        let mut m = Model {
            arch,
            seed: 0,
            built: None,
            weights: HostWeights::default(),
            inference: Inference::default(),
            placement,
            train: None,
            strategy,
        };
        if let Some(shape) = m.arch.input_shape() {
            let _ = m.build(&shape);
        }
        m
    }

    /// Re-initialises the weights from `seed` (the default seed is 0).
    pub fn with_seed(mut self, seed: u64) -> Result<Model<A>> {
        self.seed = seed;
        if let Some(b) = self.built.take() {
            self.build(&b.input)?;
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
        if let Some(b) = &self.built {
            if b.input == input {
                return Ok(());
            }
            return Err(Error::invalid(
                format!("model `{}`", self.arch.name()),
                format!(
                    "built for inputs of shape {:?}, got inputs of shape {:?}",
                    b.input, input
                ),
            ));
        }
        let (built, weights) = self.initial_state(input)?;
        self.weights = weights;
        self.built = Some(built);
        Ok(())
    }

    /// What `build(input)` sets: every layer's shapes and parameters, and the weights
    /// initialised from the seed.
    pub(crate) fn initial_state(&self, input: &[usize]) -> Result<(Built, HostWeights)> {
        let mut shape = input.to_vec();
        let mut outputs = Vec::new();
        let mut params = Vec::new();
        let mut ranges = Vec::new();
        for layer in self.arch.layers() {
            let p = layer.params(&shape)?;
            ranges.push(params.len()..params.len() + p.len());
            params.extend(p);
            shape = layer.output_shape(&shape)?;
            outputs.push(shape.clone());
        }
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
        let mut rng = Rng::new(self.seed);
        let name = self.arch.name();
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
            input: input.to_vec(),
            outputs,
            params,
            ranges,
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
        self.built
            .as_ref()
            .and_then(|b| b.outputs.last().map(|v| v.as_slice()))
    }

    /// Every parameter's description, once built.
    pub fn params(&self) -> &[ParamSpec] {
        self.built
            .as_ref()
            .map(|b| b.params.as_slice())
            .unwrap_or(&[])
    }

    /// Emits the forward pass of `x` (`[batch, input...]`) given one value per parameter.
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
        self.arch.forward(cx, x, &per_layer)
    }

    /// The element type the model's inputs must have.
    pub fn input_dtype(&self) -> crate::ir::DType {
        self.arch
            .layers()
            .first()
            .map(|l| l.input_dtype())
            .unwrap_or(crate::ir::DType::F32)
    }

    /// A Keras-style table of layers, output shapes and parameter counts.
    pub fn summary(&self) -> String {
        summary(self.arch.name(), &self.arch.layers(), self.built.as_ref())
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

fn summary(name: &str, layers: &[&dyn Layer], built: Option<&Built>) -> String {
    const W: [usize; 3] = [31, 22, 13];
    let line = |l: char, m: char, r: char, fill: char| {
        let mut s = String::new();
        s.push(l);
        for (i, w) in W.iter().enumerate() {
            s.extend(std::iter::repeat_n(fill, w + 2));
            s.push(if i + 1 < W.len() { m } else { r });
        }
        s.push('\n');
        s
    };
    let row = |cells: [&str; 3], sep: char| {
        let mut s = String::new();
        s.push(sep);
        for (i, (c, w)) in cells.iter().zip(W).enumerate() {
            if i == 2 {
                let _ = write!(s, " {c:>w$} ");
            } else {
                let _ = write!(s, " {c:<w$} ");
            }
            s.push(sep);
        }
        s.push('\n');
        s
    };
    let mut out = format!("Model: \"{name}\"\n");
    out += &line('┏', '┳', '┓', '━');
    out += &row(["Layer (type)", "Output Shape", "Param #"], '┃');
    out += &line('┡', '╇', '┩', '━');
    let (mut total, mut trainable) = (0, 0);
    for (i, layer) in layers.iter().enumerate() {
        let label = format!("{} ({})", layer.name(), layer.class());
        let (shape, count) = match built {
            Some(b) => {
                let dims: Vec<String> = b.outputs[i].iter().map(|d| d.to_string()).collect();
                let shape = format!("(None, {})", dims.join(", "));
                let n: usize = b.params[b.ranges[i].clone()]
                    .iter()
                    .map(|p| p.numel())
                    .sum();
                let t: usize = b.params[b.ranges[i].clone()]
                    .iter()
                    .filter(|p| p.trainable)
                    .map(|p| p.numel())
                    .sum();
                total += n;
                trainable += t;
                (shape, thousands(n))
            }
            None => ("?".to_string(), "0 (unbuilt)".to_string()),
        };
        out += &row([&label, &shape, &count], '│');
        if i + 1 < layers.len() {
            out += &line('├', '┼', '┤', '─');
        }
    }
    out += &line('└', '┴', '┘', '─');
    let _ = writeln!(
        out,
        " Total params: {} ({})",
        thousands(total),
        bytes(total)
    );
    let _ = writeln!(
        out,
        " Trainable params: {} ({})",
        thousands(trainable),
        bytes(trainable)
    );
    let _ = writeln!(
        out,
        " Non-trainable params: {} ({})",
        thousands(total - trainable),
        bytes(total - trainable)
    );
    out
}
