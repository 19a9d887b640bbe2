//! Neural-network building blocks: activations, initialisers, layers, and the model.

mod activation;
mod entry;
mod initializer;
pub mod layer;
pub mod layers;
mod model;

pub use activation::{log_softmax, softmax, Activation};
pub use initializer::Initializer;
pub use layer::{Forward, Layer, ParamDecl, ParamSpec};
pub use layers::*;
pub use model::{Architecture, Model, Sequential};
