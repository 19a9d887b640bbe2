//! The layer catalogue's runtime side: each layer's struct, its fields as catalogue
//! arguments (`Layer::args`) and its forward pass, composing IR primitives. Its shape rule
//! and parameters are its `strata_spec` entry's.

mod activation;
mod attention;
mod average_pooling1d;
mod average_pooling2d;
mod axis;
mod batch_normalization;
mod conv1d;
mod conv2d;
mod conv2d_transpose;
mod dense;
mod depthwise_conv2d;
mod dot;
mod dropout;
mod embedding;
mod flatten;
mod global_pooling;
mod group_normalization;
mod layer_normalization;
mod max_pooling1d;
mod max_pooling2d;
mod merge;
mod recurrent;
mod reshape;
mod separable_conv2d;
mod spatial;
mod wrapper;
// Issue 14: shape and activation layers.
mod permute;
mod relu;
mod rescaling;
mod softmax;
mod upsampling2d;
mod zero_padding2d;

pub use activation::ActivationLayer;
pub use attention::{Attention, MultiHeadAttention, ScoreMode};
pub use average_pooling1d::AveragePooling1D;
pub use average_pooling2d::AveragePooling2D;
pub use batch_normalization::BatchNormalization;
pub use conv1d::Conv1D;
pub use conv2d::Conv2D;
pub use conv2d_transpose::Conv2DTranspose;
pub use dense::Dense;
pub use depthwise_conv2d::DepthwiseConv2D;
pub use dot::Dot;
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use flatten::Flatten;
pub use global_pooling::{
    GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalMaxPooling1D, GlobalMaxPooling2D,
    GlobalPooling,
};
pub use group_normalization::GroupNormalization;
pub use layer_normalization::LayerNormalization;
pub use max_pooling1d::MaxPooling1D;
pub use max_pooling2d::MaxPooling2D;
pub use merge::{
    op as merge_op, Add, Average, Concatenate, Elementwise, Maximum, Minimum, Multiply, Subtract,
};
pub use recurrent::{SimpleRNN, GRU, LSTM};
pub use reshape::Reshape;
pub use separable_conv2d::SeparableConv2D;
pub use spatial::Padding;
pub use wrapper::{Bidirectional, MergeMode, Recurrent, Stepped, TimeDistributed};
// Issue 14: shape and activation layers.
pub use permute::{Permute, RepeatVector};
pub use relu::{LeakyReLU, PReLU, ReLU};
pub use rescaling::Rescaling;
pub use softmax::Softmax;
pub use upsampling2d::{Interpolation, UpSampling2D};
pub use zero_padding2d::{Cropping2D, ZeroPadding2D};
