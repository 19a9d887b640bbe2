//! Element types of IR values.

use std::fmt;

/// The element type of a tensor.
///
/// `F32` is the working type of every model. `F64` exists for gradient checks, `I32`/`I64`
/// for labels and indices, `Bool` for comparison results, and `BF16` is storage only:
/// values may be converted to and from it and moved around, but arithmetic on it is a
/// type error (convert to `F32` first), because the native backend has no bf16 kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    BF16,
    I32,
    I64,
    Bool,
}

impl DType {
    /// Every element type, for tables and tests.
    pub const ALL: [DType; 6] = [
        DType::F32,
        DType::F64,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::Bool,
    ];

    /// Size of one element in bytes, as stored on the host and exchanged with devices.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::BF16 => 2,
            DType::Bool => 1,
        }
    }

    /// Floating-point types on which arithmetic is allowed (bf16 is storage only).
    pub fn is_arith_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::BF16)
    }

    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Types on which add/sub/mul/div/max/min are defined.
    pub fn is_numeric(self) -> bool {
        self.is_arith_float() || self.is_int()
    }

    /// Types that carry gradients.
    pub fn is_differentiable(self) -> bool {
        self.is_float()
    }

    /// The StableHLO / MLIR spelling of the element type.
    pub fn mlir_name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "i1",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        })
    }
}
