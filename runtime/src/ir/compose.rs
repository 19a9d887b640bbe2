//! Conveniences built from primitives: scalar constants, NumPy-style broadcasting
//! arithmetic, sums and means. Nothing here is a new primitive; every call emits the
//! primitive ops it stands for, so gradients and every backend work unchanged.

use crate::ir::{
    BinaryOp, Comparison, DType, DotDims, Graph, ReduceOp, Shape, TensorType, UnaryOp, Value,
};
use crate::{Result, Tensor};
use half::bf16;

impl Graph {
    /// A rank-0 constant of element type `dtype` holding `v` (rounded or truncated to it).
    pub fn scalar(&mut self, v: f64, dtype: DType) -> Value {
        let t = match dtype {
            DType::F32 => Tensor::scalar(v as f32),
            DType::F64 => Tensor::scalar(v),
            DType::BF16 => Tensor::scalar(bf16::from_f64(v)),
            DType::I32 => Tensor::scalar(v as i32),
            DType::I64 => Tensor::scalar(v as i64),
            DType::Bool => Tensor::scalar(v != 0.0),
        };
        self.constant(t)
    }

    /// A tensor of type `ty` filled with `v`: a scalar constant broadcast, so it costs no
    /// memory traffic on backends that fuse broadcasts.
    pub fn full(&mut self, v: f64, ty: &TensorType) -> Result<Value> {
        let s = self.scalar(v, ty.dtype);
        if ty.rank() == 0 {
            return Ok(s);
        }
        self.broadcast_in_dim(s, ty.shape.clone(), &[])
    }

    /// `full(v)` with the type of `like`.
    pub fn full_like(&mut self, v: f64, like: Value) -> Result<Value> {
        let ty = self.try_ty("full_like", like)?.clone();
        self.full(v, &ty)
    }

    pub fn zeros_like(&mut self, like: Value) -> Result<Value> {
        self.full_like(0.0, like)
    }

    /// Broadcasts `x` to `shape` with NumPy's rule: dimensions aligned from the right, each
    /// of size 1 or equal; missing leading dimensions are added.
    pub fn broadcast_to(&mut self, x: Value, shape: &Shape) -> Result<Value> {
        let xs = self.try_ty("broadcast_to", x)?.shape.clone();
        if &xs == shape {
            return Ok(x);
        }
        if xs.rank() > shape.rank() {
            return Err(self.shape_error(
                "broadcast_to",
                format!("cannot broadcast {xs} to the lower-rank shape {shape}"),
                &[x],
            ));
        }
        let offset = shape.rank() - xs.rank();
        let dims: Vec<usize> = (offset..shape.rank()).collect();
        for (i, &d) in xs.dims().iter().enumerate() {
            if d != 1 && d != shape.dims()[offset + i] {
                return Err(self.shape_error(
                    "broadcast_to",
                    format!("cannot broadcast {xs} to {shape}: dimension {i} is {d}"),
                    &[x],
                ));
            }
        }
        self.broadcast_in_dim(x, shape.clone(), &dims)
    }

    /// The NumPy broadcast of two shapes.
    pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Option<Shape> {
        let r = a.rank().max(b.rank());
        let mut out = vec![0; r];
        for (i, o) in out.iter_mut().enumerate() {
            let da = if i + a.rank() >= r {
                a.dims()[i + a.rank() - r]
            } else {
                1
            };
            let db = if i + b.rank() >= r {
                b.dims()[i + b.rank() - r]
            } else {
                1
            };
            *o = if da == db || db == 1 {
                da
            } else if da == 1 {
                db
            } else {
                return None;
            };
        }
        Some(Shape(out))
    }

    /// A binary op with NumPy broadcasting of the operands.
    pub fn binary_bcast(&mut self, op: BinaryOp, a: Value, b: Value) -> Result<Value> {
        let (a, b) = self.broadcast_pair(op.name(), a, b)?;
        self.binary(op, a, b)
    }

    fn broadcast_pair(&mut self, what: &'static str, a: Value, b: Value) -> Result<(Value, Value)> {
        let sa = self.try_ty(what, a)?.shape.clone();
        let sb = self.try_ty(what, b)?.shape.clone();
        if sa == sb {
            return Ok((a, b));
        }
        let s = Graph::broadcast_shapes(&sa, &sb).ok_or_else(|| {
            self.shape_error(
                what,
                format!("shapes {sa} and {sb} cannot be broadcast together"),
                &[a, b],
            )
        })?;
        Ok((self.broadcast_to(a, &s)?, self.broadcast_to(b, &s)?))
    }

    pub fn add(&mut self, a: Value, b: Value) -> Result<Value> {
        self.binary_bcast(BinaryOp::Add, a, b)
    }
    pub fn sub(&mut self, a: Value, b: Value) -> Result<Value> {
        self.binary_bcast(BinaryOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: Value, b: Value) -> Result<Value> {
        self.binary_bcast(BinaryOp::Mul, a, b)
    }
    pub fn div(&mut self, a: Value, b: Value) -> Result<Value> {
        self.binary_bcast(BinaryOp::Div, a, b)
    }
    pub fn max(&mut self, a: Value, b: Value) -> Result<Value> {
        self.binary_bcast(BinaryOp::Max, a, b)
    }
    pub fn min(&mut self, a: Value, b: Value) -> Result<Value> {
        self.binary_bcast(BinaryOp::Min, a, b)
    }
    pub fn pow(&mut self, a: Value, b: Value) -> Result<Value> {
        self.binary_bcast(BinaryOp::Pow, a, b)
    }

    /// A comparison with NumPy broadcasting of the operands.
    pub fn cmp(&mut self, cmp: Comparison, a: Value, b: Value) -> Result<Value> {
        let (a, b) = self.broadcast_pair("compare", a, b)?;
        self.compare(cmp, a, b)
    }

    /// `x <op> c` for a constant `c` of x's element type.
    pub fn binary_scalar(&mut self, op: BinaryOp, x: Value, c: f64) -> Result<Value> {
        let s = self.scalar(c, self.try_ty("binary_scalar", x)?.dtype);
        self.binary_bcast(op, x, s)
    }

    pub fn add_scalar(&mut self, x: Value, c: f64) -> Result<Value> {
        self.binary_scalar(BinaryOp::Add, x, c)
    }
    pub fn mul_scalar(&mut self, x: Value, c: f64) -> Result<Value> {
        self.binary_scalar(BinaryOp::Mul, x, c)
    }

    pub fn neg(&mut self, x: Value) -> Result<Value> {
        self.unary(UnaryOp::Neg, x)
    }
    pub fn exp(&mut self, x: Value) -> Result<Value> {
        self.unary(UnaryOp::Exp, x)
    }
    pub fn log(&mut self, x: Value) -> Result<Value> {
        self.unary(UnaryOp::Log, x)
    }
    pub fn sqrt(&mut self, x: Value) -> Result<Value> {
        self.unary(UnaryOp::Sqrt, x)
    }
    pub fn abs(&mut self, x: Value) -> Result<Value> {
        self.unary(UnaryOp::Abs, x)
    }
    pub fn tanh(&mut self, x: Value) -> Result<Value> {
        self.unary(UnaryOp::Tanh, x)
    }

    /// Sum over `axes` (removed).
    pub fn sum(&mut self, x: Value, axes: &[usize]) -> Result<Value> {
        self.reduce(ReduceOp::Sum, x, axes)
    }

    /// Sum over every axis, giving a scalar.
    pub fn sum_all(&mut self, x: Value) -> Result<Value> {
        let axes: Vec<usize> = (0..self.try_ty("sum_all", x)?.rank()).collect();
        self.sum(x, &axes)
    }

    /// Mean over `axes` (removed).
    pub fn mean(&mut self, x: Value, axes: &[usize]) -> Result<Value> {
        let dims = self.try_ty("mean", x)?.dims().to_vec();
        let n: usize = axes
            .iter()
            .map(|&a| dims.get(a).copied().unwrap_or(1))
            .product();
        let s = self.sum(x, axes)?;
        self.mul_scalar(s, 1.0 / n.max(1) as f64)
    }

    /// The mean and the biased variance of `x` over `axes` (removed): the two rows of one
    /// `moments`.
    pub fn mean_and_variance(&mut self, x: Value, axes: &[usize]) -> Result<(Value, Value)> {
        let stats = self.moments(x, axes)?;
        self.rows_of_two(stats)
    }

    /// The two rows of `s` (`[2, ..dims]`), each of dims `dims`.
    pub(crate) fn rows_of_two(&mut self, s: Value) -> Result<(Value, Value)> {
        let dims = self.try_ty("rows_of_two", s)?.dims().to_vec();
        if dims.first() != Some(&2) {
            return Err(crate::Error::shape(
                "rows_of_two",
                format!("needs a leading dimension of 2, got {dims:?}"),
            ));
        }
        let mut row = |r: usize| -> Result<Value> {
            let mut start = vec![0; dims.len()];
            let mut limit = dims.clone();
            start[0] = r;
            limit[0] = r + 1;
            let v = self.slice(s, &start, &limit, &vec![1; dims.len()])?;
            self.reshape(v, dims[1..].to_vec())
        };
        Ok((row(0)?, row(1)?))
    }

    /// Sums `x` down to `shape` (the reverse of NumPy broadcasting): the gradient of an
    /// implicit broadcast.
    pub fn sum_to_shape(&mut self, x: Value, shape: &Shape) -> Result<Value> {
        let xs = self.try_ty("sum_to_shape", x)?.shape.clone();
        if &xs == shape {
            return Ok(x);
        }
        if shape.rank() > xs.rank() {
            return Err(self.shape_error(
                "sum_to_shape",
                format!("cannot sum {xs} to the higher-rank shape {shape}"),
                &[x],
            ));
        }
        let offset = xs.rank() - shape.rank();
        let axes: Vec<usize> = (0..xs.rank())
            .filter(|&i| i < offset || (shape.dims()[i - offset] == 1 && xs.dims()[i] != 1))
            .collect();
        let s = self.sum(x, &axes)?;
        self.reshape(s, shape.clone())
    }

    /// Matrix product of the last two axes, batched over equal leading axes.
    pub fn matmul(&mut self, a: Value, b: Value) -> Result<Value> {
        let (ra, rb) = (
            self.try_ty("matmul", a)?.rank(),
            self.try_ty("matmul", b)?.rank(),
        );
        if ra < 2 || ra != rb {
            return Err(self.shape_error(
                "matmul",
                format!(
                    "operands must have equal rank >= 2, got {} and {}",
                    self.ty(a).shape,
                    self.ty(b).shape
                ),
                &[a, b],
            ));
        }
        let batch: Vec<usize> = (0..ra - 2).collect();
        self.dot_general(
            a,
            b,
            DotDims {
                lhs_batch: batch.clone(),
                rhs_batch: batch,
                lhs_contract: vec![ra - 1],
                rhs_contract: vec![ra - 2],
            },
        )
    }
}
