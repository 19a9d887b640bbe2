//! The native kernels' low-level machinery, below the ops that call it: host storage and
//! its typed views, strided index arithmetic, the matrix products, the scalar traits (with
//! exp / tanh / logistic that vectorise), the worker crew that splits work over cores, and
//! the replica rendezvous. It knows nothing of graphs or backends.

pub(crate) mod conv_direct;
pub(crate) mod crew;
mod ctx;
pub(crate) mod data;
pub(crate) mod fastmath;
pub(crate) mod gemm;
pub(crate) mod hub;
pub(crate) mod real;
pub(crate) mod rows;
pub(crate) mod sgemm;
pub(crate) mod simd;
pub(crate) mod strided;

pub(crate) use ctx::{KernelCtx, ReplicaCtx};
pub use data::Storage;
