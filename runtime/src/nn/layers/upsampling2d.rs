//! `UpSampling2D`: each pixel of an image repeated `size` times along each spatial axis.

use crate::ir::Value;
use crate::nn::entry::{args, interpolation};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::Result;
use std::fmt;
use strata_spec::{Args, Val};

/// How new pixels are filled. Keras' `bilinear` (and its other modes) are not supported
/// yet: `model!` refuses them by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Interpolation {
    /// Each new pixel copies its source pixel.
    Nearest,
}

impl Interpolation {
    pub const ALL: [Interpolation; 1] = [Interpolation::Nearest];

    /// The Keras name.
    pub fn name(self) -> &'static str {
        match self {
            Interpolation::Nearest => "nearest",
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
        }
    }
}
