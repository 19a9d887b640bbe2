//! Models leaving Rust: the inference function as StableHLO with its weights and a
//! manifest (read back by [`Exported`] on any backend), and as ONNX.

mod bundle;
mod onnx;

pub use bundle::{Exported, FORMAT, MLIR_BATCH, VERSION};
pub use onnx::ONNX_IR_VERSION;
