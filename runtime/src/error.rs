//! The runtime's one error type. Variants carry the operation and the shapes or values
//! involved, so a message says what was expected and what came.

use crate::types::{DType, TensorType};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An IR builder call whose operands do not fit the op's shape rule. `operands` holds
    /// the types that came, in operand order (empty when the call failed before its
    /// operands were known, e.g. an operand of another graph); `message` says what the
    /// rule expected of them.
    #[error("{op}: {message}")]
    Shape {
        op: &'static str,
        message: String,
        operands: Vec<TensorType>,
    },

    /// Inputs whose shape is not the one the model takes (`None` is the batch dimension,
    /// which may be anything).
    #[error(
        "{what}: the model takes inputs of shape {}, got {}",
        dims_text(expected),
        crate::types::Shape(got.clone())
    )]
    InputShape {
        what: String,
        expected: Vec<Option<usize>>,
        got: Vec<usize>,
    },

    /// A value of the wrong element type.
    #[error("{what}: expected element type {expected}, got {got}")]
    DType {
        what: String,
        expected: DType,
        got: DType,
    },

    /// A malformed graph, found by the verifier.
    #[error("graph `{graph}` is malformed at node %{node}: {message}")]
    Verify {
        graph: String,
        node: usize,
        message: String,
    },

    /// IR text ([`Graph::parse`](crate::ir::Graph::parse)) that cannot be read: where
    /// (counted from 1) and why.
    #[error("IR text, line {line}, column {column}: {message}")]
    IrText {
        line: usize,
        column: usize,
        message: String,
    },

    /// Differentiating through something that has no gradient rule.
    #[error("autodiff: {message}")]
    Autodiff { message: String },

    /// A call given arguments outside what it accepts.
    #[error("{what}: {message}")]
    InvalidArgument { what: String, message: String },

    /// Training stopped at a step whose loss, gradient, learning rate or update was not
    /// finite. A bad loss, gradient or learning rate is found before the update, so that
    /// step changed nothing: the model keeps the weights (and optimizer state) from after
    /// step `step - 1`, all finite. An update that overflowed (`Parameters`) is found
    /// when the next step fails on what it wrote, or when `fit` ends: the model keeps the
    /// weights from after step `step`, not all finite (restore a checkpoint, e.g. with
    /// `BackupAndRestore`).
    #[error(
        "fit: step {step} (epoch {}, batch {}; counted from 1): {}",
        epoch + 1,
        batch + 1,
        non_finite_text(*step, *cause, *value)
    )]
    NonFiniteStep {
        /// The epoch, counted from 0 (as `History` and the callbacks count).
        epoch: usize,
        /// The batch within the epoch, counted from 0 (as `on_batch_end` counts).
        batch: usize,
        /// The optimizer step over the whole training, counted from 1: the model's
        /// `iterations()` is `step - 1` afterwards.
        step: u64,
        cause: NonFiniteCause,
        /// The loss or the learning rate when that is the cause (a scalar); `None` for a
        /// gradient or the parameters.
        value: Option<f64>,
    },

    /// A checkpoint that cannot be read or does not fit the model.
    #[error("checkpoint {path}: {message}")]
    Checkpoint { path: String, message: String },

    /// A weight given for a parameter whose shape or element type it does not have.
    #[error("{what}: parameter `{name}` is {expected}, got {got}")]
    WeightType {
        what: String,
        /// The parameter's name, as `Model::weights` gives it.
        name: String,
        expected: TensorType,
        got: TensorType,
    },

    /// A list of weights (given by position) whose length is not the parameter count.
    #[error(
        "{what}: the model has {expected} parameters ({}), got {got} values",
        names_text(names)
    )]
    WeightCount {
        what: String,
        expected: usize,
        got: usize,
        /// The parameters' names in order, to line the list up against.
        names: Vec<String>,
    },

    /// Weight names that do not line up with the model's parameters: `unknown` were given
    /// but the model has no such parameter; `missing` are parameters left unset.
    #[error("{what}: {}", weight_names_text(unknown, missing, known))]
    WeightNames {
        what: String,
        unknown: Vec<String>,
        missing: Vec<String>,
        /// Every parameter's name, for the message.
        known: Vec<String>,
    },

    /// An exported model directory that cannot be written or read back (`path` names the
    /// directory or the file at fault).
    #[error("export {path}: {message}")]
    Export { path: String, message: String },

    /// Data that cannot be read (a truncated or foreign file, …).
    #[error("{path}: {message}")]
    Data { path: String, message: String },

    /// An operating-system error while reading or writing `path`.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// A backend failed to compile or run a graph.
    #[error("{backend} backend: {message}")]
    Backend {
        backend: &'static str,
        message: String,
    },

    /// A buffer handed to a backend other than the one that made it.
    #[error("a {got} buffer was given to the {expected} backend: download it and upload it there")]
    WrongBackend { expected: String, got: String },

    /// No PJRT plugin for a device could be found.
    #[error(
        "no PJRT plugin for `{device}` found (package `{package}`; looked in: {searched}); \
         install it with `{install}` (in a Strata checkout: `{checkout_install}`), \
         or point STRATA_PJRT_PLUGIN at the plugin's .so"
    )]
    PluginNotFound {
        device: String,
        package: String,
        searched: String,
        /// The pip command installing the preferred package.
        install: String,
        /// The command installing it into a checkout's `.strata/plugins`.
        checkout_install: String,
    },

    /// A file that could not be used as a PJRT plugin: missing, not a shared library,
    /// no `GetPjrtApi`, or an API version Strata cannot talk to.
    #[error("PJRT plugin {path}: {message}")]
    Plugin { path: String, message: String },

    /// A PJRT plugin call returned an error.
    #[error("PJRT plugin {plugin}: {call} failed with {code}: {message}")]
    Pjrt {
        plugin: String,
        call: &'static str,
        code: String,
        message: String,
    },

    /// The plugin loaded but the device it drives is not on this machine (no TPU, no GPU).
    #[error("device `{device}` is not available: {message}")]
    DeviceUnavailable { device: String, message: String },

    /// Something this version of Strata does not do yet.
    #[error("{what} is not supported yet: {message}")]
    Unsupported { what: String, message: String },

    /// A layer `Model::export_onnx` cannot write as ONNX operators. `layer` is its name
    /// and class (`my_layer (MyLayer)`); `op` the ONNX operator or part of the layer that
    /// has no mapping (empty when the layer has none at all).
    #[error(
        "export_onnx: layer {layer} cannot be exported to ONNX{}: {message}",
        if op.is_empty() { String::new() } else { format!(" ({op})") }
    )]
    OnnxUnsupported {
        layer: String,
        op: String,
        message: String,
    },

    /// No usable TPU: every place looked and what was found there.
    #[error("no TPU available: {}", tried.join("; "))]
    TpuNotFound { tried: Vec<String> },

    /// A strategy name (`STRATA_STRATEGY`) that `StrategySpec::from_str` does not know.
    #[error(
        "unknown strategy `{input}`: {message} (expected auto, tpu, one:DEVICE, \
         mirrored:native[:N], mirrored:xla-cpu[:N], mirrored:cuda[:N] or mirrored:tpu[:N])"
    )]
    StrategyParse { input: String, message: String },

    /// A device name that `Device::from_str` does not know.
    #[error(
        "unknown device `{input}`: {message} (expected native, xla-cpu, xla-cpu:N, cuda or tpu)"
    )]
    DeviceParse { input: String, message: String },

    /// A tensor or buffer too large to allocate, refused before anything aborts: `what`
    /// names it and its type; `bytes` is the size it needs, `None` when that size
    /// overflows 64 bits.
    #[error("{}", out_of_memory_text(what, *bytes))]
    OutOfMemory { what: String, bytes: Option<u64> },
}

fn out_of_memory_text(what: &str, bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!(
            "{what} needs {b} bytes ({}), more than this machine can allocate",
            bytes_text(b)
        ),
        None => format!(
            "{what} needs more than 2^64 bytes (its size overflows 64 bits), more than any \
             machine can allocate"
        ),
    }
}

/// `427.29 KB`: a byte count in binary units, as Keras' summary writes them.
pub(crate) fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KB", "MB", "GB", "TB", "PB", "EB"];
    let mut size = bytes as f64;
    if size < 1024.0 {
        return format!("{size:.2} B");
    }
    let mut unit = UNITS[0];
    for u in UNITS {
        size /= 1024.0;
        unit = u;
        if size < 1024.0 {
            break;
        }
    }
    format!("{size:.2} {unit}")
}

/// What a train step found not finite, checked in this order (the first that fails is
/// the cause).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NonFiniteCause {
    /// The batch's loss.
    Loss,
    /// A gradient of a trainable parameter (before clipping).
    Gradient,
    /// The learning rate the schedule gave for the step.
    LearningRate,
    /// A weight the update wrote (an overflow in the update). Not checked on the device:
    /// found on the host in the weights, when the next step fails or `fit` ends.
    Parameters,
}

impl std::fmt::Display for NonFiniteCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NonFiniteCause::Loss => "loss",
            NonFiniteCause::Gradient => "gradient",
            NonFiniteCause::LearningRate => "learning rate",
            NonFiniteCause::Parameters => "parameters",
        })
    }
}

/// What went wrong at `step` and which weights the model kept.
fn non_finite_text(step: u64, cause: NonFiniteCause, value: Option<f64>) -> String {
    let what = match cause {
        NonFiniteCause::Loss => "the loss",
        NonFiniteCause::Gradient => "a gradient",
        NonFiniteCause::LearningRate => "the learning rate",
        NonFiniteCause::Parameters => {
            return "its update overflowed: some weights it wrote are not finite; training \
                    stopped with those weights"
                .to_string()
        }
    };
    let was = value.map_or("not finite".to_string(), |v| v.to_string());
    format!(
        "{what} was {was}; training stopped and kept the weights from after step {}",
        step.saturating_sub(1)
    )
}

/// `` `a`, `b`, `c` `` — at most a dozen names, then how many more.
fn names_text(names: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut s: Vec<String> = names.iter().take(SHOWN).map(|n| format!("`{n}`")).collect();
    if names.len() > SHOWN {
        s.push(format!("and {} more", names.len() - SHOWN));
    }
    s.join(", ")
}

fn weight_names_text(unknown: &[String], missing: &[String], known: &[String]) -> String {
    let mut parts = Vec::new();
    if !unknown.is_empty() {
        parts.push(format!("no parameter named {}", names_text(unknown)));
    }
    if !missing.is_empty() {
        parts.push(format!("parameters left unset: {}", names_text(missing)));
    }
    format!(
        "{} (the model's parameters: {})",
        parts.join("; "),
        names_text(known)
    )
}

/// `[batch, 784]`: a shape whose `None` dimensions may be anything.
fn dims_text(dims: &[Option<usize>]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| d.map_or_else(|| "batch".to_string(), |d| d.to_string()))
        .collect();
    format!("[{}]", parts.join(", "))
}

impl Error {
    pub(crate) fn shape(op: &'static str, message: impl Into<String>) -> Self {
        Error::Shape {
            op,
            message: message.into(),
            operands: Vec::new(),
        }
    }

    pub(crate) fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what: what.into(),
            message: message.into(),
        }
    }
}
