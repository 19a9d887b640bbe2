//! `UpSampling2D`: each pixel of an image repeated `size` times along each spatial axis.

use crate::ir::{DType, DotDims, Value};
use crate::nn::entry::{args, interpolation};
use crate::nn::layer::{bad_config, expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxData, OnnxForward, OnnxValue};
use crate::{Result, Tensor};
use std::fmt;
use strata_spec::{Args, Val};

/// How new pixels are filled (Keras' other modes, `bicubic`, `lanczos3`, ..., are not
/// supported: `model!` does not know their names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Interpolation {
    /// Each new pixel copies its source pixel.
    Nearest,
    /// Each new pixel mixes its two nearest source pixels along each axis, as TensorFlow's
    /// `resize(.., "bilinear")` does (half-pixel centres, clamped at the edges).
    Bilinear,
}

impl Interpolation {
    pub const ALL: [Interpolation; 2] = [Interpolation::Nearest, Interpolation::Bilinear];

    /// The Keras name.
    pub fn name(self) -> &'static str {
        match self {
            Interpolation::Nearest => "nearest",
            Interpolation::Bilinear => "bilinear",
        }
    }

    pub fn from_name(name: &str) -> Option<Interpolation> {
        Interpolation::ALL.into_iter().find(|i| i.name() == name)
    }
}

impl fmt::Display for Interpolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct UpSampling2D {
    pub name: String,
    /// The factor along `(height, width)`.
    pub size: [usize; 2],
    pub interpolation: Interpolation,
}

impl UpSampling2D {
    /// Keras' defaults: twice as high and wide, nearest neighbour.
    pub fn new(name: impl Into<String>) -> UpSampling2D {
        UpSampling2D {
            name: name.into(),
            size: [2, 2],
            interpolation: Interpolation::Nearest,
        }
    }
}

impl Layer for UpSampling2D {
    fn class(&self) -> &'static str {
        "UpSampling2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("size", Val::Pair(self.size)),
            ("interpolation", interpolation(self.interpolation)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("up_sampling2d", x)?.dims().to_vec();
        // Checks the input is an image and the factors are >= 1.
        let out = self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let (b, [h, w, c], [sh, sw]) = (dims[0], [dims[1], dims[2], dims[3]], self.size);
        match self.interpolation {
            Interpolation::Nearest => {
                // [b, h, w, c] → [b, h, sh, w, sw, c] (each pixel copied sh × sw times)
                // → [b, h·sh, w·sw, c]; the gradient sums each block.
                let spread =
                    cx.g.broadcast_in_dim(x, [b, h, sh, w, sw, c], &[0, 1, 3, 5])?;
                cx.g.reshape(spread, [b, out[0], out[1], out[2]])
            }
            Interpolation::Bilinear => {
                // A constant linear map along each axis: height, then width.
                let dtype = cx.g.try_ty("up_sampling2d", x)?.dtype;
                let mut matrix = |n: usize, s: usize| -> Result<Value> {
                    let m = Tensor::from_vec(&[n * s, n], bilinear_matrix(n, s))?;
                    let m = cx.g.constant(m);
                    if dtype == DType::F32 {
                        Ok(m)
                    } else {
                        cx.g.convert(m, dtype)
                    }
                };
                let (mh, mw) = (matrix(h, sh)?, matrix(w, sw)?);
                // [H, h] · [b, h, w, c] over h → [H, b, w, c] → [b, H, w, c].
                let y = cx.g.dot_general(mh, x, contract(1, 1))?;
                let y = cx.g.transpose(y, &[1, 0, 2, 3])?;
                // [W, w] · [b, H, w, c] over w → [W, b, H, c] → [b, H, W, c].
                let y = cx.g.dot_general(mw, y, contract(1, 2))?;
                cx.g.transpose(y, &[1, 2, 0, 3])
            }
        }
    }

    /// As `forward`: `Reshape` to `[batch, h, 1, w, 1, c]`, `Expand` the two new axes to
    /// the factors, `Reshape` back to an image.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        let out = self.output_shape(cx.input_shape())?;
        if out.iter().any(|&d| i64::try_from(d).is_err()) {
            return Err(bad_config(
                self,
                format!("an output of {out:?} is too large"),
            ));
        }
        if out.contains(&0) {
            // ONNX's Reshape reads a 0 as "copy the input's axis".
            return Err(cx.unsupported("Reshape", format!("an empty image ({out:?})")));
        }
        let i = cx
            .input_shape()
            .iter()
            .map(|&d| d as i64)
            .collect::<Vec<_>>();
        let [sh, sw] = self.size.map(|s| s as i64);
        if self.interpolation == Interpolation::Bilinear {
            return Ok(onnx_bilinear(
                cx,
                &x,
                [i[0], i[1]].map(|d| d as usize),
                self.size,
            ));
        }
        let spread = cx.ints(&[0, i[0], 1, i[1], 1, i[2]]);
        let spread = cx.op("Reshape", &[&x, &spread], vec![]);
        let factors = cx.ints(&[1, 1, sh, 1, sw, 1]);
        let copied = cx.op("Expand", &[&spread, &factors], vec![]);
        let shape: Vec<i64> = std::iter::once(0)
            .chain(out.iter().map(|&d| d as i64))
            .collect();
        let shape = cx.ints(&shape);
        Ok(cx.op("Reshape", &[&copied, &shape], vec![]))
    }
}

/// Contracts axis `l` of the left operand with axis `r` of the right, no batch axes.
fn contract(l: usize, r: usize) -> DotDims {
    DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contract: vec![l],
        rhs_contract: vec![r],
    }
}

/// The `[n·s, n]` matrix of bilinear upsampling along one axis, as TensorFlow's
/// `resize(.., "bilinear")` with half-pixel centres (what Keras' UpSampling2D calls):
/// output `o` samples the input at `(o + 0.5) / s - 0.5`, between its two nearest pixels,
/// clamped to the edges.
fn bilinear_matrix(n: usize, s: usize) -> Vec<f32> {
    let mut m = vec![0f32; n * s * n];
    let last = n.saturating_sub(1) as f64;
    for o in 0..n * s {
        let at = (o as f64 + 0.5) / s as f64 - 0.5;
        let floor = at.floor();
        let w = at - floor;
        let lo = floor.clamp(0.0, last) as usize;
        let hi = (floor + 1.0).clamp(0.0, last) as usize;
        m[o * n + lo] += (1.0 - w) as f32;
        m[o * n + hi] += w as f32;
    }
    m
}

/// `forward`'s bilinear maps as ONNX `MatMul`s on the last axis: `[b, h, w, c]` →
/// `[b, w, c, h]` · `[h, H]` → `[b, c, H, w]` · `[w, W]` → `[b, H, W, c]`.
fn onnx_bilinear(
    cx: &mut OnnxForward<'_>,
    x: &OnnxValue,
    [h, w]: [usize; 2],
    [sh, sw]: [usize; 2],
) -> OnnxValue {
    // The transposed matrix, `[n, n·s]`.
    let mut matrix = |n: usize, s: usize| {
        let m = bilinear_matrix(n, s);
        let t: Vec<f32> = (0..n * n * s)
            .map(|k| m[(k % (n * s)) * n + k / (n * s)])
            .collect();
        cx.constant(&[n, n * s], OnnxData::F32(t))
    };
    let (mh, mw) = (matrix(h, sh), matrix(w, sw));
    let t = cx.transpose(x, &[0, 2, 3, 1]);
    let y = cx.op("MatMul", &[&t, &mh], vec![]);
    let t = cx.transpose(&y, &[0, 2, 3, 1]);
    let y = cx.op("MatMul", &[&t, &mw], vec![]);
    cx.transpose(&y, &[0, 2, 3, 1])
}
