//! `compile`: the optimizer, loss and metrics a model trains with, and the layout of the
//! device-resident state (parameters, optimizer slots, iteration count, random key, metric
//! accumulators) that the step runner holds.

use super::runner::{StepOut, StepRunner};
use super::step::StepKey;
use super::Logs;
use crate::backend::CompileOptions;
use crate::ir::{DType, Graph, TensorType};
use crate::loss::{unknown_output, Heads, Loss};
use crate::metrics::{IntoMetrics, Metric, OutputLoss};
use crate::nn::{Activation, Architecture, ParamSpec};
use crate::optim::Optimizer;
use crate::Model;
use crate::{Error, Result, Tensor};
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

/// Where each piece of state sits in the argument list every step graph starts with.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// Model parameters (trainable and state), in the model's order.
    pub params: Range<usize>,
    /// Indices (into the model's parameters) of the trainable ones.
    pub trainable: Vec<usize>,
    /// Optimizer slots: `slots_per_param` consecutive entries per trainable parameter
    /// (`optim::state_slots`: the optimizer's own, then the gradient accumulator with
    /// `gradient_accumulation_steps`, then the EMA when `use_ema`), each of its slot's
    /// shape.
    pub slots: Range<usize>,
    pub slots_per_param: usize,
    /// Whether the last slot of each parameter is its EMA.
    pub ema: bool,
    /// Whether each parameter has a gradient accumulator (before the EMA).
    pub accumulate: bool,
    pub globals: Range<usize>,
    pub iterations: usize,
    pub key: usize,
    /// The loss tracker's total and count, then each metric's state.
    pub metric_state: Range<usize>,
    pub metric_ranges: Vec<Range<usize>>,
    /// Each metric's result shape (see [`Metric::result_shape`]): where its values sit
    /// in a step's logs.
    pub result_shapes: Vec<Vec<usize>>,
    /// Types of every state entry, in order.
    pub types: Vec<TensorType>,
}

impl Layout {
    pub fn new(
        params: &[ParamSpec],
        optimizer: &dyn Optimizer,
        metrics: &[Box<dyn Metric>],
    ) -> Layout {
        let slots = crate::optim::state_slots(optimizer);
        let globals = optimizer.globals().len();
        let extra = Extra {
            ema: optimizer.config().use_ema,
            accumulate: optimizer.config().gradient_accumulation_steps.is_some(),
        };
        Layout::with(params, &slots, globals, extra, metrics)
    }

    /// The state an evaluation reads and accumulates with nothing of the optimizer's: the
    /// parameters, the metric state (and the iteration count and random key, which no
    /// evaluation reads, so that every step graph finds the entries where they are).
    pub fn evaluation(params: &[ParamSpec], metrics: &[Box<dyn Metric>]) -> Layout {
        Layout::with(params, &[], 0, Extra::default(), metrics)
    }

    fn with(
        params: &[ParamSpec],
        slots: &[crate::optim::Slot],
        globals: usize,
        Extra { ema, accumulate }: Extra,
        metrics: &[Box<dyn Metric>],
    ) -> Layout {
        let mut types: Vec<TensorType> = params.iter().map(|p| p.ty()).collect();
        let params_r = 0..types.len();
        let trainable: Vec<usize> = params
            .iter()
            .enumerate()
            .filter(|(_, p)| p.trainable)
            .map(|(i, _)| i)
            .collect();
        // Each slot has its own shape, derived from its parameter's (see `optim::Slot`).
        let start = types.len();
        for &i in &trainable {
            for slot in slots {
                types.push(TensorType::new(
                    params[i].ty().dtype,
                    slot.dims(&params[i].dims),
                ));
            }
        }
        let slots_r = start..types.len();
        let start = types.len();
        for _ in 0..globals {
            types.push(TensorType::scalar(DType::F32));
        }
        let globals = start..types.len();
        let iterations = types.len();
        types.push(TensorType::scalar(DType::I32));
        let key = types.len();
        types.push(TensorType::new(DType::I32, [2]));
        let ms = types.len();
        types.push(TensorType::scalar(DType::F32));
        types.push(TensorType::scalar(DType::F32));
        let mut metric_ranges = Vec::new();
        for m in metrics {
            let s = types.len();
            for dims in m.state() {
                types.push(TensorType::new(DType::F32, dims));
            }
            metric_ranges.push(s..types.len());
        }
        let result_shapes = metrics.iter().map(|m| m.result_shape()).collect();
        Layout {
            params: params_r,
            trainable,
            slots: slots_r,
            slots_per_param: slots.len(),
            ema,
            accumulate,
            globals,
            iterations,
            key,
            metric_state: ms..types.len(),
            metric_ranges,
            result_shapes,
            types,
        }
    }

    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// The slot entries of the `j`-th trainable parameter.
    pub fn slots_of(&self, j: usize) -> Range<usize> {
        let s = self.slots.start + j * self.slots_per_param;
        s..s + self.slots_per_param
    }

    /// The `j`-th trainable parameter's own optimizer slots (without the accumulator and
    /// the EMA).
    pub fn update_slots_of(&self, j: usize) -> Range<usize> {
        let r = self.slots_of(j);
        r.start..r.end - usize::from(self.ema) - usize::from(self.accumulate)
    }

    /// The state entry of the `j`-th trainable parameter's gradient accumulator, with
    /// `gradient_accumulation_steps`.
    pub fn accumulator_of(&self, j: usize) -> Option<usize> {
        self.accumulate
            .then(|| self.slots_of(j).end - 1 - usize::from(self.ema))
    }

    /// The state entry of the `j`-th trainable parameter's EMA, when `use_ema`.
    pub fn ema_of(&self, j: usize) -> Option<usize> {
        self.ema.then(|| self.slots_of(j).end - 1)
    }
}

/// A compiled loss and its metrics.
type LossAndMetrics = (Box<dyn Loss>, Vec<Box<dyn Metric>>);

/// The slots `optim::state_slots` appends to the optimizer's own.
#[derive(Clone, Copy, Debug, Default)]
struct Extra {
    ema: bool,
    accumulate: bool,
}

/// What `compile` set up.
pub(crate) struct TrainState {
    pub optimizer: Box<dyn Optimizer>,
    pub loss: Box<dyn Loss>,
    pub metrics: Vec<Box<dyn Metric>>,
    /// The metrics' names, computed once.
    pub metric_names: Vec<String>,
    pub steps_per_execution: usize,
    /// The compiled steps and the state on the device, made at the first call that runs
    /// a step (see [`Model::ensure_device`]).
    pub runner: Option<StepRunner>,
    /// Whether the output-activation warning (see [`TrainState::check_prediction`]) was
    /// given: once per `compile`, as Keras gives it once.
    pub warned_output: AtomicBool,
}

impl TrainState {
    /// Checks a step graph's predictions against its targets, for `what` (the call building
    /// the graph). A model output the loss does not expect (a softmax feeding a loss with
    /// `from_logits`) still trains, so, as Keras does, that is a warning on stderr, not an
    /// error; given once per `compile`.
    pub fn check_prediction(
        &self,
        what: &str,
        target: &TensorType,
        pred: &TensorType,
        activation: Option<Activation>,
    ) -> Result<()> {
        self.loss.check(target, pred)?;
        let unexpected = self.loss.unexpected_output_activation();
        let Some(a) = activation.filter(|&a| Some(a) == unexpected) else {
            return Ok(());
        };
        if !self.warned_output.swap(true, Relaxed) {
            eprintln!(
                "strata: warning: {what}: the loss `{}` was compiled with from_logits: true, \
                 but the model's output is produced by a {} activation, so it holds \
                 probabilities, not logits; expected an output layer without that \
                 activation (keeping from_logits: true), or from_logits: false",
                self.loss.name(),
                a.name()
            );
        }
        Ok(())
    }

    /// Forgets the device buffers (they are rebuilt from the host weights when needed).
    pub fn drop_device(&mut self) {
        self.runner = None;
    }

    /// Overwrites the parameters on the device (if there) with `weights`.
    pub fn upload_weights(&mut self, weights: &[Tensor]) -> Result<()> {
        match &mut self.runner {
            Some(r) => r.upload_weights(weights),
            None => Ok(()),
        }
    }

    /// Reads the last train call's logs if the host has not yet (see
    /// [`StepRunner::read_pending_logs`]).
    pub fn read_pending_logs(&mut self, logs: &mut Logs) -> Result<Option<StepOut>> {
        let TrainState {
            runner,
            metric_names,
            ..
        } = self;
        let r = runner.as_mut().ok_or_else(no_runner)?;
        r.read_pending_logs(metric_names, logs)
    }

    pub fn runner(&self) -> Result<&StepRunner> {
        self.runner.as_ref().ok_or_else(no_runner)
    }

    pub fn runner_mut(&mut self) -> Result<&mut StepRunner> {
        self.runner.as_mut().ok_or_else(no_runner)
    }
}

impl<A: Architecture> Model<A> {
    /// Sets the optimizer, loss and metrics (Keras' `compile`). Compiling again replaces
    /// them and restarts the optimizer state.
    pub fn compile(
        &mut self,
        optimizer: impl Optimizer + 'static,
        loss: impl Loss + 'static,
        metrics: impl IntoMetrics,
    ) -> Result<()> {
        self.compile_boxed(Box::new(optimizer), Box::new(loss), metrics.into_metrics())
    }

    /// `compile` with boxed parts (for optimizers and losses chosen at run time).
    pub fn compile_boxed(
        &mut self,
        optimizer: Box<dyn Optimizer>,
        loss: Box<dyn Loss>,
        metrics: Vec<Box<dyn Metric>>,
    ) -> Result<()> {
        optimizer.config().validate(optimizer.name())?;
        optimizer.validate()?;
        loss.validate()?;
        // A declared input shape that did not build in `Model::new` (whose parameters
        // could not be allocated, say) is reported here, the first call that needs them.
        if !self.is_built() {
            if let Some(shapes) = self.arch().input_shapes() {
                self.build_inputs(&shapes)?;
            }
        }
        let (loss, metrics) = if self.arch().topology().outputs.len() > 1 {
            self.per_output(loss, metrics)?
        } else {
            if loss.per_output().is_some() {
                return Err(Error::invalid(
                    "compile",
                    "PerOutput losses are for a model with several outputs; this one has one: \
                     pass its loss",
                ));
            }
            let metrics = metrics
                .into_iter()
                .map(|m| match m.on_output() {
                    Some(o) => Err(Error::invalid(
                        "compile",
                        format!(
                            "on_output(\"{}\", ..) is for a model with several outputs; this \
                             one has one: pass the metric itself",
                            o.output()
                        ),
                    )),
                    None => Ok(m.resolve(loss.as_ref())),
                })
                .collect::<Result<Vec<_>>>()?;
            (loss, metrics)
        };
        let mut names = vec!["loss".to_string()];
        for m in &metrics {
            let n = m.name();
            if names.contains(&n) {
                return Err(Error::invalid(
                    "compile",
                    format!("metric `{n}` is listed twice"),
                ));
            }
            names.push(n);
        }
        self.placement.backend("compile")?;
        self.train = Some(TrainState {
            optimizer,
            loss,
            metric_names: names[1..].to_vec(),
            metrics,
            steps_per_execution: 1,
            runner: None,
            warned_output: AtomicBool::new(false),
        });
        Ok(())
    }

    /// The loss and metrics of a model with several outputs: one loss per output laid out
    /// on the packed predictions (see [`Heads`]), each output's loss logged as
    /// `{output}_loss`, and each metric on the output [`on_output`](crate::metrics::on_output)
    /// names (Keras, too, refuses a metric that does not say which output it measures).
    fn per_output(
        &self,
        loss: Box<dyn Loss>,
        metrics: Vec<Box<dyn Metric>>,
    ) -> Result<LossAndMetrics> {
        let heads = self.output_shapes().ok_or_else(|| {
            Error::invalid(
                "compile",
                format!(
                    "model `{}` has several outputs and is not built: build it (or declare \
                     its inputs) before compile",
                    self.name()
                ),
            )
        })?;
        let names = self.output_names();
        let outputs: Vec<(String, Vec<usize>)> =
            names.iter().cloned().zip(heads.iter().cloned()).collect();
        let heads = Heads::new(loss.as_ref(), &outputs)?;
        let mut out: Vec<Box<dyn Metric>> = heads
            .parts
            .iter()
            .map(|(h, l, _)| {
                Box::new(OutputLoss {
                    head: h.clone(),
                    loss: l.clone_box(),
                }) as Box<dyn Metric>
            })
            .collect();
        let name_refs: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        for m in metrics {
            let Some(o) = m.on_output() else {
                return Err(Error::invalid(
                    "compile",
                    format!(
                        "model `{}` has several outputs ({}): say which one metric `{}` \
                         measures, e.g. metrics::on_output(\"{}\", ..)",
                        self.name(),
                        names.join(", "),
                        m.name(),
                        names[0]
                    ),
                ));
            };
            let (h, l, _) = heads
                .parts
                .iter()
                .find(|(h, _, _)| h.name == o.output())
                .ok_or_else(|| unknown_output("compile", o.output(), &name_refs))?;
            out.push(Box::new(o.bound(h, l.as_ref())));
        }
        Ok((Box::new(heads), out))
    }

    /// Runs `k` batches per backend call (Keras' `steps_per_execution`, the TPU best
    /// practice): `fit`, `evaluate` and `predict` upload `k` batches at once and one
    /// compiled loop runs a step per batch, so a call costs one dispatch and one read of
    /// its results for `k` steps. The results are those of `k = 1`; callbacks hear of
    /// each call (`on_train_batch_end` every `k` steps, as in Keras).
    pub fn set_steps_per_execution(&mut self, k: usize) -> Result<()> {
        self.check_compiled("set_steps_per_execution")?;
        let t = self.compiled_mut()?;
        if k == 0 {
            return Err(Error::invalid("steps_per_execution", "must be >= 1, got 0"));
        }
        t.steps_per_execution = k;
        Ok(())
    }

    /// The batches per backend call set by
    /// [`set_steps_per_execution`](Model::set_steps_per_execution) (1 until then).
    pub fn steps_per_execution(&self) -> usize {
        self.train.as_ref().map_or(1, |t| t.steps_per_execution)
    }

    pub fn is_compiled(&self) -> bool {
        self.train.is_some()
    }

    /// Optimizer steps taken so far (Keras' `optimizer.iterations`).
    pub fn iterations(&self) -> u64 {
        self.train
            .as_ref()
            .and_then(|t| t.runner.as_ref())
            .map_or(0, StepRunner::iterations)
    }

    /// The not-compiled error naming `what`, the public call that needs `compile` first.
    /// Every such call starts with this, so that its own name is the one the error gives.
    pub(crate) fn check_compiled(&self, what: &str) -> Result<()> {
        match self.train {
            Some(_) => Ok(()),
            None => Err(not_compiled(what)),
        }
    }

    /// What `compile` set up (for calls made after [`check_compiled`](Model::check_compiled)).
    pub(crate) fn compiled(&self) -> Result<&TrainState> {
        self.train.as_ref().ok_or_else(|| not_compiled("training"))
    }

    pub(crate) fn compiled_mut(&mut self) -> Result<&mut TrainState> {
        self.train.as_mut().ok_or_else(|| not_compiled("training"))
    }

    /// The step runner (see [`ensure_device`](Model::ensure_device)).
    pub(crate) fn runner(&self) -> Result<&StepRunner> {
        self.compiled()?.runner()
    }

    pub(crate) fn runner_mut(&mut self) -> Result<&mut StepRunner> {
        self.compiled_mut()?.runner_mut()
    }

    /// Creates the device state from the host weights if it does not exist yet.
    pub(crate) fn ensure_device(&mut self) -> Result<()> {
        if self.built.is_none() {
            return Err(Error::invalid("fit", "the model is not built"));
        }
        if self.compiled()?.runner.is_some() {
            return Ok(());
        }
        // Metrics sized by the model's output (per class) learn it before the state is
        // laid out; a model without layers outputs its input.
        let output = self
            .output_shape()
            .or_else(|| self.input_shape())
            .unwrap_or(&[])
            .to_vec();
        for m in &mut self.compiled_mut()?.metrics {
            m.build(&output)?;
        }
        let built = self
            .built
            .as_ref()
            .ok_or_else(|| Error::invalid("fit", "the model is not built"))?;
        let t = self.compiled()?;
        // `compile` opened the device, so this cannot fail on a bad STRATA_DEVICE.
        let runner = StepRunner::new(
            self.placement.backend("compile")?.clone(),
            &built.params,
            &self.weights,
            t.optimizer.as_ref(),
            &t.metrics,
            self.seed(),
        )?;
        self.compiled_mut()?.runner = Some(runner);
        Ok(())
    }

    /// Copies the parameters from the device back into the host weights.
    pub(crate) fn sync_weights(&mut self) -> Result<()> {
        match self.train.as_ref().and_then(|t| t.runner.as_ref()) {
            Some(r) => r.download_weights(&mut self.weights),
            None => Ok(()),
        }
    }

    /// Compiles the step for `key` unless it is compiled; `build` gets the model, what
    /// `compile` set up and the state's layout.
    pub(crate) fn prepare(
        &mut self,
        key: &StepKey,
        build: impl FnOnce(&Self, &TrainState, &Layout) -> Result<(Graph, CompileOptions)>,
    ) -> Result<()> {
        let t = self.compiled()?;
        let r = t.runner()?;
        if r.has(key) {
            return Ok(());
        }
        let (g, opts) = build(self, t, r.layout())?;
        self.runner_mut()?.compile(key.clone(), &g, &opts)
    }
}

pub(crate) fn not_compiled(what: &str) -> Error {
    Error::invalid(
        what,
        format!(
            "the model is not compiled: call compile(optimizer, loss, metrics) before \
             {what} (of the model's calls only predict runs without it)"
        ),
    )
}

/// The device state is made by the call that runs the first step; a step needing it
/// before then is a bug in the train loop, not in the caller's program.
fn no_runner() -> Error {
    Error::invalid(
        "training",
        "internal: a step ran before the model's device state was made",
    )
}
