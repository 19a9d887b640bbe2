//! `ZeroPadding2D` and `Cropping2D`: rows and columns of zeros added around an image, or
//! removed from its edges.

use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{bad_config, expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

/// Keras' `ZeroPadding2D`.
#[derive(Clone, Debug, PartialEq)]
pub struct ZeroPadding2D {
    pub name: String,
    /// `[[top, bottom], [left, right]]`.
    pub padding: [[usize; 2]; 2],
}

impl ZeroPadding2D {
    /// Keras' default: one row or column on every side.
    pub fn new(name: impl Into<String>) -> ZeroPadding2D {
        ZeroPadding2D {
            name: name.into(),
            padding: [[1, 1], [1, 1]],
        }
    }
}

impl ZeroPadding2D {
    /// The padding as the signed sizes the pad op takes; a margin past `i64` is an error
    /// (the image it would make could never be allocated anyway), never a wrap.
    fn margins(&self) -> Result<[[i64; 2]; 2]> {
        let mut out = [[0i64; 2]; 2];
        for (o, p) in out.iter_mut().zip(self.padding) {
            for (o, v) in o.iter_mut().zip(p) {
                *o = i64::try_from(v)
                    .map_err(|_| bad_config(self, format!("padding {v} is too large")))?;
            }
        }
        Ok(out)
    }
}

impl Layer for ZeroPadding2D {
    fn class(&self) -> &'static str {
        "ZeroPadding2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("padding", Val::Margins(self.padding))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let ty = cx.g.try_ty("zero_padding2d", x)?.clone();
        // Checks the input is an image.
        self.output_shape(ty.dims().get(1..).unwrap_or(&[]))?;
        let [[t, b], [l, r]] = self.margins()?;
        let zero = cx.g.scalar(0.0, ty.dtype);
        cx.g.pad(x, zero, &[0, t, l, 0], &[0, b, r, 0], &[0; 4])
    }

    /// `Pad` with zeros (opset 11 on takes the pads as an input: every axis's start,
    /// then every axis's end).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let [[t, b], [l, r]] = self.margins()?;
        let pads = cx.ints(&[0, t, l, 0, 0, b, r, 0]);
        Ok(cx.op("Pad", &[&x, &pads], vec![]))
    }
}

/// Keras' `Cropping2D`.
#[derive(Clone, Debug, PartialEq)]
pub struct Cropping2D {
    pub name: String,
    /// `[[top, bottom], [left, right]]`; at least one row and column must remain.
    pub cropping: [[usize; 2]; 2],
}

impl Cropping2D {
    /// Keras' default: nothing cropped.
    pub fn new(name: impl Into<String>) -> Cropping2D {
        Cropping2D {
            name: name.into(),
            cropping: [[0, 0], [0, 0]],
        }
    }
}

impl Layer for Cropping2D {
    fn class(&self) -> &'static str {
        "Cropping2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("cropping", Val::Margins(self.cropping))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("cropping2d", x)?.dims().to_vec();
        // Checks the input is an image larger than the cropping.
        let out = self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let [[t, _], [l, _]] = self.cropping;
        let start = [0, t, l, 0];
        let limit = [dims[0], t + out[0], l + out[1], out[2]];
        cx.g.slice(x, &start, &limit, &[1; 4])
    }

    /// `Slice` of the two image axes.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        let out = self.output_shape(cx.input_shape())?;
        let [[t, _], [l, _]] = self.cropping.map(|p| p.map(|v| v as i64));
        let starts = cx.ints(&[t, l]);
        let ends = cx.ints(&[t + out[0] as i64, l + out[1] as i64]);
        let axes = cx.ints(&[1, 2]);
        Ok(cx.op("Slice", &[&x, &starts, &ends, &axes], vec![]))
    }
}
