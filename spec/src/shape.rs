//! Shapes as the rules see them: without the batch axis, some sizes possibly unknown. At
//! compile time a model without `Input` learns its input from the first data, as Keras'
//! deferred build does, so even the number of leading axes may be open; at build time
//! every size is known ([`Shape::known`]).

use std::fmt;

/// The axis asked for cannot exist in the shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoSuchAxis;

#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Unknown leading axes may come before `dims` (the input was not declared).
    pub open: bool,
    /// The known trailing axes; `None` is a size not known until the first data.
    pub dims: Vec<Option<usize>>,
}

impl Shape {
    pub fn known(dims: &[usize]) -> Shape {
        Shape {
            open: false,
            dims: dims.iter().map(|&d| Some(d)).collect(),
        }
    }

    /// A deferred input: nothing known.
    pub fn unknown() -> Shape {
        Shape {
            open: true,
            dims: Vec::new(),
        }
    }

    /// Every size, when all are known.
    pub fn to_known(&self) -> Option<Vec<usize>> {
        if self.open {
            return None;
        }
        self.dims.iter().copied().collect()
    }

    /// The element count (without batch), when known. Sizes come from the user's
    /// literals, so the product saturates rather than overflow.
    pub fn numel(&self) -> Option<usize> {
        self.to_known().map(|d| product(&d))
    }

    /// The last axis' size; `Err` when the shape has no axis at all.
    pub fn last(&self) -> Result<Option<usize>, NoSuchAxis> {
        match self.dims.last() {
            Some(&d) => Ok(d),
            None if self.open => Ok(None),
            None => Err(NoSuchAxis),
        }
    }

    /// The shape with its last axis replaced by `size` (Dense, and the like).
    pub fn with_last(&self, size: usize) -> Option<Shape> {
        self.last().ok()?;
        let mut dims = self.dims.clone();
        dims.pop();
        dims.push(Some(size));
        Some(Shape {
            open: self.open,
            dims,
        })
    }

    /// Exactly `n` axes, unknown leading ones filled in when the shape is open; `None`
    /// when the rank cannot be `n`.
    pub fn exactly<const N: usize>(&self) -> Option<[Option<usize>; N]> {
        if self.dims.len() > N || (!self.open && self.dims.len() != N) {
            return None;
        }
        let mut out = [None; N];
        out[N - self.dims.len()..].copy_from_slice(&self.dims);
        Some(out)
    }

    /// The index of Keras' `axis` (which counts the batch axis) among `dims`: `Ok(None)`
    /// when it cannot be resolved before the data is seen, `Err` when it cannot exist.
    pub fn axis(&self, axis: i64) -> Result<Option<usize>, NoSuchAxis> {
        let len = self.dims.len() as i64;
        if axis < 0 {
            let from_end = -axis;
            if from_end <= len {
                Ok(Some((len - from_end) as usize))
            } else if self.open {
                Ok(None)
            } else {
                Err(NoSuchAxis)
            }
        } else if self.open {
            Ok(None)
        } else if axis >= 1 && axis <= len {
            Ok(Some(axis as usize - 1))
        } else {
            Err(NoSuchAxis)
        }
    }
}

/// Keras' notation: `(None, 28, 28, 1)` with the batch axis; `?` for a size not known yet
/// and `...` for axes not known yet.
impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(None")?;
        if self.open {
            f.write_str(", ...")?;
        }
        for d in &self.dims {
            match d {
                Some(d) => write!(f, ", {d}")?,
                None => f.write_str(", ?")?,
            }
        }
        // A one-element tuple, as Python writes it.
        if !self.open && self.dims.is_empty() {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

/// `[784, 128]` for a parameter's dims in docs.
pub fn dims_text(dims: &[Option<usize>]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The product of sizes, saturating at `usize::MAX` (no size the runtime could allocate).
pub fn product(dims: &[usize]) -> usize {
    dims.iter().fold(1, |n, &d| n.saturating_mul(d))
}
