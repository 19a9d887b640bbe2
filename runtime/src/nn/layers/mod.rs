//! The layer catalogue's runtime side: each layer's struct, its fields as catalogue
//! arguments (`Layer::args`) and its forward pass, composing IR primitives. Its shape rule
//! and parameters are its `strata_spec` entry's.

mod activation;
mod average_pooling2d;
mod axis;
mod batch_normalization;
mod conv2d;
mod dense;
mod dropout;
mod embedding;
mod flatten;
mod global_average_pooling2d;
mod global_max_pooling2d;
mod layer_normalization;
mod max_pooling2d;
mod reshape;
mod spatial;
// Issue 14: shape and activation layers.
mod permute;
mod relu;
mod rescaling;
mod softmax;
mod upsampling2d;
mod zero_padding2d;

pub use activation::ActivationLayer;
pub use average_pooling2d::AveragePooling2D;
pub use batch_normalization::BatchNormalization;
pub use conv2d::Conv2D;
pub use dense::Dense;
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use flatten::Flatten;
pub use global_average_pooling2d::GlobalAveragePooling2D;
pub use global_max_pooling2d::GlobalMaxPooling2D;
pub use layer_normalization::LayerNormalization;
pub use max_pooling2d::MaxPooling2D;
pub use reshape::Reshape;
pub use spatial::Padding;
// Issue 14: shape and activation layers.
pub use permute::{Permute, RepeatVector};
pub use relu::{LeakyReLU, PReLU, ReLU};
pub use rescaling::Rescaling;
pub use softmax::Softmax;
pub use upsampling2d::{Interpolation, UpSampling2D};
pub use zero_padding2d::{Cropping2D, ZeroPadding2D};
