//! `SimpleRNN`, `LSTM` and `GRU`, as Keras 3 computes them (the fused form: every gate's
//! input product at once). The input projection `x · kernel + bias` of every step is one
//! product before the loop; the loop is a `Graph::scan` over the time-major projection
//! whose step multiplies the state by the recurrent kernel. A step sees only what it is
//! given (regions are closed), so the recurrent weights are carried, returned unchanged.

use crate::ir::{Comparison, DType, DotDims, Graph, TensorType, Value};
use crate::nn::entry::{activation, args, initializer};
use crate::nn::layer::{bad_config, expect_params, one_input, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::{Activation, Initializer};
use crate::Result;
use strata_spec::{Args, Val};

/// The arguments every recurrent layer has, as fields of each.
macro_rules! recurrent_layer {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty = $default:expr,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name {
            pub name: String,
            pub units: usize,
            pub activation: Activation,
            pub use_bias: bool,
            pub kernel_initializer: Initializer,
            pub recurrent_initializer: Initializer,
            pub bias_initializer: Initializer,
            /// The fraction of input features dropped in training, one mask for every step
            /// (as Keras; with `recurrent_dropout`, one mask per gate).
            pub dropout: f64,
            /// The fraction of the state's units dropped in training before each step's
            /// recurrent product: one mask per gate, the same at every step (Keras').
            pub recurrent_dropout: f64,
            /// The output at every step `(timesteps, units)`, not only the last `(units,)`.
            pub return_sequences: bool,
            /// A call also gives the final states after the output (Keras' order: `h`, and
            /// an LSTM's `c`), each `(units,)`: the scan's last carries.
            pub return_state: bool,
            /// Reads the sequence from its end; the sequence output is in the order read.
            pub go_backwards: bool,
            $($(#[$fdoc])* pub $field: $ty,)*
        }

        impl $name {
            /// The layer with Keras' defaults.
            pub fn new(name: impl Into<String>, units: usize) -> $name {
                $name {
                    name: name.into(),
                    units,
                    activation: Activation::Tanh,
                    use_bias: true,
                    kernel_initializer: Initializer::GlorotUniform,
                    recurrent_initializer: Initializer::Orthogonal,
                    bias_initializer: Initializer::Zeros,
                    dropout: 0.0,
                    recurrent_dropout: 0.0,
                    return_sequences: false,
                    return_state: false,
                    go_backwards: false,
                    $($field: $default,)*
                }
            }

            fn common_args(&self) -> Args {
                args([
                    ("units", Val::Usize(self.units)),
                    ("activation", activation(self.activation)),
                    ("use_bias", Val::Bool(self.use_bias)),
                    ("kernel_initializer", initializer(self.kernel_initializer)),
                    ("recurrent_initializer", initializer(self.recurrent_initializer)),
                    ("bias_initializer", initializer(self.bias_initializer)),
                    ("dropout", Val::Float(self.dropout)),
                    ("recurrent_dropout", Val::Float(self.recurrent_dropout)),
                    ("return_sequences", Val::Bool(self.return_sequences)),
                    ("return_state", Val::Bool(self.return_state)),
                    ("go_backwards", Val::Bool(self.go_backwards)),
                ])
            }

            fn options(&self) -> Options {
                Options {
                    units: self.units,
                    dropout: self.dropout,
                    recurrent_dropout: self.recurrent_dropout,
                    use_bias: self.use_bias,
                    return_sequences: self.return_sequences,
                    return_state: self.return_state,
                    go_backwards: self.go_backwards,
                }
            }
        }
    };
}

recurrent_layer!(
    /// Keras' `SimpleRNN`: `h = activation(x · kernel + h · recurrent_kernel + bias)`.
    SimpleRNN {}
);

recurrent_layer!(
    /// Keras' `LSTM`: gates `i, f, c, o` side by side in `kernel (features, 4·units)`,
    /// `recurrent_kernel (units, 4·units)` and `bias (4·units,)`.
    LSTM {
        recurrent_activation: Activation = Activation::Sigmoid,
        /// The forget gate's bias starts at one (Keras' default).
        unit_forget_bias: bool = true,
    }
);

recurrent_layer!(
    /// Keras' `GRU`: gates `z, r, h` side by side in `kernel (features, 3·units)` and
    /// `recurrent_kernel (units, 3·units)`; with `reset_after` (Keras 3's default) the reset
    /// gate multiplies the recurrent product and `bias` is `(2, 3·units)`, an input and a
    /// recurrent bias; without it, the reset gate multiplies the state before the product
    /// and `bias` is `(3·units,)`.
    GRU {
        recurrent_activation: Activation = Activation::Sigmoid,
        reset_after: bool = true,
    }
);

/// What the loop needs of a layer's arguments, beyond its cell.
struct Options {
    units: usize,
    dropout: f64,
    recurrent_dropout: f64,
    use_bias: bool,
    return_sequences: bool,
    return_state: bool,
    go_backwards: bool,
}

/// One step's computation.
#[derive(Clone, Copy)]
enum Cell {
    Simple {
        activation: Activation,
    },
    Lstm {
        activation: Activation,
        recurrent: Activation,
    },
    Gru {
        activation: Activation,
        recurrent: Activation,
        reset_after: bool,
    },
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Simple { .. } => 1,
            Cell::Lstm { .. } => 4,
            Cell::Gru { .. } => 3,
        }
    }
}

/// `a · b` over `a`'s last axis and `b`'s first.
fn product(g: &mut Graph, a: Value, b: Value) -> Result<Value> {
    let rank = g.try_ty("recurrent", a)?.rank();
    g.dot_general(
        a,
        b,
        DotDims {
            lhs_batch: vec![],
            rhs_batch: vec![],
            lhs_contract: vec![rank.saturating_sub(1)],
            rhs_contract: vec![0],
        },
    )
}

/// The sizes of a rank-2 value (a weight given by hand may be of any shape: an error, and
/// the slices below never index out of range).
fn matrix(g: &Graph, x: Value) -> Result<[usize; 2]> {
    let ty = g.try_ty("recurrent", x)?;
    <[usize; 2]>::try_from(ty.dims()).map_err(|_| {
        crate::Error::invalid("recurrent", format!("expected a rank-2 weight, got {ty}"))
    })
}

/// Block `j` of `units` columns of a `(rows, k·units)` value.
fn block(g: &mut Graph, x: Value, j: usize, units: usize) -> Result<Value> {
    let [rows, _] = matrix(g, x)?;
    g.slice(x, &[0, j * units], &[rows, (j + 1) * units], &[1, 1])
}

/// Row `i` of a `(2, width)` value, as `(width,)`.
fn row(g: &mut Graph, x: Value, i: usize) -> Result<Value> {
    let [_, width] = matrix(g, x)?;
    let r = g.slice(x, &[i, 0], &[i + 1, width], &[1, 1])?;
    g.reshape(r, vec![width])
}

/// A dropout mask of `dims` in `dtype`: each element zero with probability `rate`, else
/// `1 / (1 - rate)`, drawn once per call (Keras' masks, reused at every step).
fn keep_mask(cx: &mut Forward<'_>, dims: Vec<usize>, rate: f64, dtype: DType) -> Result<Value> {
    let u = cx.random_uniform(TensorType::new(DType::F32, dims))?;
    let g = &mut *cx.g;
    let threshold = g.full_like(rate, u)?;
    let keep = g.compare(Comparison::Ge, u, threshold)?;
    let scale = g.full_like(1.0 / (1.0 - rate), u)?;
    let zero = g.zeros_like(u)?;
    let mask = g.select(keep, scale, zero)?;
    if dtype == DType::F32 {
        Ok(mask)
    } else {
        g.convert(mask, dtype)
    }
}

/// `x` (`[batch, timesteps, features]`) with a fraction `rate` of each example's features
/// zeroed at every step alike, the rest scaled by `1 / (1 - rate)`: Keras' input dropout
/// mask, drawn once per call from the step's input.
fn dropped(cx: &mut Forward<'_>, x: Value, rate: f64) -> Result<Value> {
    let ty = cx.g.try_ty("recurrent", x)?.clone();
    let dims = ty.dims().to_vec();
    let mask = keep_mask(cx, vec![dims[0], dims[2]], rate, ty.dtype)?;
    let mask = cx.g.broadcast_in_dim(mask, dims, &[0, 2])?;
    cx.g.mul(x, mask)
}

/// Mask `j` (`[batch, units]`) of the `[gates, batch, units]` masks.
fn gate_mask(g: &mut Graph, masks: Value, j: usize) -> Result<Value> {
    let dims = g.try_ty("recurrent", masks)?.dims().to_vec();
    let m = g.slice(masks, &[j, 0, 0], &[j + 1, dims[1], dims[2]], &[1, 1, 1])?;
    g.reshape(m, dims[1..].to_vec())
}

/// The recurrent product `h · w` of gates `first..first + n` (`w`'s `n` blocks of
/// `units` columns); with recurrent dropout, each gate's block multiplies the state under
/// that gate's own mask.
fn recurrent_product(
    g: &mut Graph,
    h: Value,
    w: Value,
    masks: Option<Value>,
    (first, n, units): (usize, usize, usize),
) -> Result<Value> {
    let Some(masks) = masks else {
        return product(g, h, w);
    };
    let mut parts = Vec::with_capacity(n);
    for j in 0..n {
        let m = gate_mask(g, masks, first + j)?;
        let hm = g.mul(h, m)?;
        let wj = block(g, w, j, units)?;
        parts.push(product(g, hm, wj)?);
    }
    if parts.len() == 1 {
        return Ok(parts[0]);
    }
    g.concatenate(&parts, 1)
}

/// The layer's computation of `x` (`[batch, timesteps, features]`): its output, then,
/// with `return_state`, its final states (`h`, and an LSTM's `c`), which are the scan's
/// last carries (with `go_backwards`, the state after the sequence's first step).
fn run(
    layer: &dyn Layer,
    cx: &mut Forward<'_>,
    x: Value,
    params: &[Value],
    o: Options,
    cell: Cell,
) -> Result<Vec<Value>> {
    let ty = cx.g.try_ty("recurrent", x)?.clone();
    let dims = ty.dims().to_vec();
    // The input's rank and the arguments, by the catalogue's rules.
    layer.output_shape(dims.get(1..).unwrap_or(&[]))?;
    let (kernel, recurrent_kernel, bias) = if o.use_bias {
        let [k, r, b] = expect_params(layer, params)?;
        (k, r, Some(b))
    } else {
        let [k, r] = expect_params(layer, params)?;
        (k, r, None)
    };
    let (batch, u) = (dims[0], o.units);
    // With recurrent dropout Keras computes each gate apart (its `implementation = 1`):
    // one state mask per gate, and one input mask per gate too.
    let per_gate = cx.training && o.recurrent_dropout > 0.0;
    let gates = cell.gates();
    let input_masked = cx.training && o.dropout > 0.0;
    // Each gate's input, when the gates see differently dropped inputs.
    let mut gate_inputs = Vec::new();
    let x = if input_masked && per_gate && gates > 1 {
        for _ in 0..gates {
            gate_inputs.push(dropped(cx, x, o.dropout)?);
        }
        x
    } else if input_masked {
        dropped(cx, x, o.dropout)?
    } else {
        x
    };
    let masks = if per_gate {
        let dims = vec![gates, batch, u];
        Some(keep_mask(cx, dims, o.recurrent_dropout, ty.dtype)?)
    } else {
        None
    };
    let g = &mut *cx.g;

    // The bias added to the input projection, and (a GRU resetting after the product) the
    // one added to the recurrent projection inside the step.
    let (input_bias, recurrent_bias) = match (bias, cell) {
        (
            Some(b),
            Cell::Gru {
                reset_after: true, ..
            },
        ) => (Some(row(g, b, 0)?), Some(row(g, b, 1)?)),
        (b, _) => (b, None),
    };
    // Time-major: `[timesteps, batch, k·units]`.
    let mut xs = if gate_inputs.is_empty() {
        let xt = g.transpose(x, &[1, 0, 2])?;
        product(g, xt, kernel)?
    } else {
        let mut parts = Vec::with_capacity(gates);
        for (j, &xj) in gate_inputs.iter().enumerate() {
            let xt = g.transpose(xj, &[1, 0, 2])?;
            let kj = block(g, kernel, j, u)?;
            parts.push(product(g, xt, kj)?);
        }
        g.concatenate(&parts, 2)?
    };
    if let Some(b) = input_bias {
        xs = g.add(xs, b)?;
    }
    if o.go_backwards {
        xs = g.reverse(xs, &[0])?;
    }

    // Carried: the state (h, and an LSTM's c), then the recurrent weights.
    let state = TensorType::new(ty.dtype, vec![batch, u]);
    let zeros = g.full(0.0, &state)?;
    let mut init = vec![zeros];
    if let Cell::Lstm { .. } = cell {
        init.push(zeros);
    }
    let n_state = init.len();
    let gru_reset_before = matches!(
        cell,
        Cell::Gru {
            reset_after: false,
            ..
        }
    );
    if gru_reset_before {
        // `(r ⊙ h) · U_h` needs the candidate's block apart.
        init.push(block(g, recurrent_kernel, 0, 2 * u)?);
        init.push(block(g, recurrent_kernel, 2, u)?);
    } else {
        init.push(recurrent_kernel);
    }
    let recurrent_bias_at = recurrent_bias.map(|_| init.len());
    init.extend(recurrent_bias);
    let masks_at = masks.map(|_| init.len());
    init.extend(masks);

    let mut step = Graph::new("recurrent_step");
    let carried: Vec<Value> = init
        .iter()
        .map(|&v| step.parameter(g.ty(v).clone()))
        .collect();
    let row_ty = TensorType::new(ty.dtype, vec![batch, cell.gates() * u]);
    let x_t = step.parameter(row_ty);
    let h = carried[0];
    let masks = masks_at.map(|i| carried[i]);
    let s = &mut step;
    let mut next: Vec<Value> = match cell {
        Cell::Simple { activation } => {
            let r = recurrent_product(s, h, carried[1], masks, (0, 1, u))?;
            let z = s.add(x_t, r)?;
            vec![activation.apply(s, z)?]
        }
        Cell::Lstm {
            activation,
            recurrent,
        } => {
            let c = carried[1];
            let r = recurrent_product(s, h, carried[2], masks, (0, 4, u))?;
            let z = s.add(x_t, r)?;
            let zi = block(s, z, 0, u)?;
            let i = recurrent.apply(s, zi)?;
            let zf = block(s, z, 1, u)?;
            let f = recurrent.apply(s, zf)?;
            let zc = block(s, z, 2, u)?;
            let cand = activation.apply(s, zc)?;
            let zo = block(s, z, 3, u)?;
            let og = recurrent.apply(s, zo)?;
            let fc = s.mul(f, c)?;
            let ic = s.mul(i, cand)?;
            let c2 = s.add(fc, ic)?;
            let ac = activation.apply(s, c2)?;
            vec![s.mul(og, ac)?, c2]
        }
        Cell::Gru {
            activation,
            recurrent,
            reset_after,
        } => {
            let (x_z, x_r, x_h) = (
                block(s, x_t, 0, u)?,
                block(s, x_t, 1, u)?,
                block(s, x_t, 2, u)?,
            );
            let (z, hh) = if reset_after {
                let mut inner = recurrent_product(s, h, carried[1], masks, (0, 3, u))?;
                if let Some(i) = recurrent_bias_at {
                    inner = s.add(inner, carried[i])?;
                }
                let (r_z, r_r, r_h) = (
                    block(s, inner, 0, u)?,
                    block(s, inner, 1, u)?,
                    block(s, inner, 2, u)?,
                );
                let sz = s.add(x_z, r_z)?;
                let z = recurrent.apply(s, sz)?;
                let sr = s.add(x_r, r_r)?;
                let r = recurrent.apply(s, sr)?;
                let rh = s.mul(r, r_h)?;
                let sh = s.add(x_h, rh)?;
                (z, activation.apply(s, sh)?)
            } else {
                let inner = recurrent_product(s, h, carried[1], masks, (0, 2, u))?;
                let (r_z, r_r) = (block(s, inner, 0, u)?, block(s, inner, 1, u)?);
                let sz = s.add(x_z, r_z)?;
                let z = recurrent.apply(s, sz)?;
                let sr = s.add(x_r, r_r)?;
                let r = recurrent.apply(s, sr)?;
                let h_h = match masks {
                    Some(m) => {
                        let m = gate_mask(s, m, 2)?;
                        s.mul(h, m)?
                    }
                    None => h,
                };
                let rh = s.mul(r, h_h)?;
                let p = product(s, rh, carried[2])?;
                let sh = s.add(x_h, p)?;
                (z, activation.apply(s, sh)?)
            };
            // h' = z ⊙ h + (1 − z) ⊙ hh
            let zh = s.mul(z, h)?;
            let one = s.full_like(1.0, z)?;
            let nz = s.sub(one, z)?;
            let nh = s.mul(nz, hh)?;
            vec![s.add(zh, nh)?]
        }
    };
    let h_next = next[0];
    next.extend(&carried[n_state..]);
    if o.return_sequences {
        next.push(h_next);
    }
    step.set_outputs(next)?;

    let (last, ys) = g.scan(&init, &[xs], &step)?;
    let y = if o.return_sequences {
        let y = ys
            .first()
            .copied()
            .ok_or_else(|| bad_config(layer, "the scan returned no sequence output"))?;
        g.transpose(y, &[1, 0, 2])?
    } else {
        last[0]
    };
    let mut outputs = vec![y];
    if o.return_state {
        outputs.extend(&last[..n_state]);
    }
    Ok(outputs)
}

/// The first of a call's outputs (what `forward` gives).
fn first(layer: &dyn Layer, outputs: Vec<Value>) -> Result<Value> {
    outputs
        .into_iter()
        .next()
        .ok_or_else(|| bad_config(layer, "the recurrent loop gave no output"))
}

/// Recurrent layers have no ONNX mapping yet (ONNX's RNN, LSTM and GRU take other gate
/// orders and layouts).
fn no_onnx(cx: &mut OnnxForward<'_>) -> crate::Error {
    cx.unsupported(
        "",
        "recurrent layers are not exportable to ONNX yet (ONNX's RNN, LSTM and GRU operators \
         are not mapped)",
    )
}

impl Layer for SimpleRNN {
    fn class(&self) -> &'static str {
        "SimpleRNN"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(self.common_args())
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let all = self.call_all(cx, &[x], params)?;
        first(self, all)
    }

    fn call_all(
        &self,
        cx: &mut Forward<'_>,
        inputs: &[Value],
        params: &[Value],
    ) -> Result<Vec<Value>> {
        let x = *one_input(self, inputs)?;
        let cell = Cell::Simple {
            activation: self.activation,
        };
        run(self, cx, x, params, self.options(), cell)
    }

    fn onnx(&self, cx: &mut OnnxForward<'_>, _: OnnxValue, _: &[OnnxValue]) -> Result<OnnxValue> {
        Err(no_onnx(cx))
    }
}

impl Layer for LSTM {
    fn class(&self) -> &'static str {
        "LSTM"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        let mut a = self.common_args();
        a.insert(
            "recurrent_activation",
            activation(self.recurrent_activation),
        );
        a.insert("unit_forget_bias", Val::Bool(self.unit_forget_bias));
        Some(a)
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let all = self.call_all(cx, &[x], params)?;
        first(self, all)
    }

    fn call_all(
        &self,
        cx: &mut Forward<'_>,
        inputs: &[Value],
        params: &[Value],
    ) -> Result<Vec<Value>> {
        let x = *one_input(self, inputs)?;
        let cell = Cell::Lstm {
            activation: self.activation,
            recurrent: self.recurrent_activation,
        };
        run(self, cx, x, params, self.options(), cell)
    }

    fn onnx(&self, cx: &mut OnnxForward<'_>, _: OnnxValue, _: &[OnnxValue]) -> Result<OnnxValue> {
        Err(no_onnx(cx))
    }
}

impl Layer for GRU {
    fn class(&self) -> &'static str {
        "GRU"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        let mut a = self.common_args();
        a.insert(
            "recurrent_activation",
            activation(self.recurrent_activation),
        );
        a.insert("reset_after", Val::Bool(self.reset_after));
        Some(a)
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let all = self.call_all(cx, &[x], params)?;
        first(self, all)
    }

    fn call_all(
        &self,
        cx: &mut Forward<'_>,
        inputs: &[Value],
        params: &[Value],
    ) -> Result<Vec<Value>> {
        let x = *one_input(self, inputs)?;
        let cell = Cell::Gru {
            activation: self.activation,
            recurrent: self.recurrent_activation,
            reset_after: self.reset_after,
        };
        run(self, cx, x, params, self.options(), cell)
    }

    fn onnx(&self, cx: &mut OnnxForward<'_>, _: OnnxValue, _: &[OnnxValue]) -> Result<OnnxValue> {
        Err(no_onnx(cx))
    }
}
