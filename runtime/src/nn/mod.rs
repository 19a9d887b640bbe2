//! Neural-network building blocks: activations, initialisers, layers, and the
//! architectures that compose them (the [`Model`](crate::Model) that trains one lives in
//! `train`).

mod activation;
mod architecture;
mod entry;
mod initializer;
pub mod layer;
pub mod layers;
pub mod onnx;

pub use activation::{log_softmax, softmax, Activation};
pub use architecture::{Architecture, Call, Functional, Port, Sequential, Topology};
pub use initializer::Initializer;
pub use layer::{Forward, Layer, ParamDecl, ParamSpec};
pub use layers::*;
pub use onnx::{OnnxForward, OnnxValue, ONNX_OPSET};
