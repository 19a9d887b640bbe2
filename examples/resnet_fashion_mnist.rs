//! A small residual CNN on Fashion-MNIST, declared with `model!`'s graph form: two
//! residual blocks (the block's input added to its output, `Add()([h, r])`), each followed
//! by max pooling, then a softmax classifier. Reports test accuracy and the time taken.
//!
//!     cargo run --release --example resnet_fashion_mnist [-- --epochs 5 --batch 128 --seed 0 --data DIR]
//!
//! The device comes from `STRATA_DEVICE` (`native` by default, `xla-cpu`, `cuda`, `tpu`).

use strata::data::FASHION_MNIST_DIR;
use strata::Result;

strata::model! {
    /// Two residual blocks over 28x28 greyscale images, 16 then 32 channels.
    pub struct ResNet {
        let x = Input((28, 28, 1));
        let h = Conv2D(16, 3, padding = same, activation = relu)(x);
        let r = Conv2D(16, 3, padding = same, activation = relu)(h);
        let r = Conv2D(16, 3, padding = same)(r);
        let h = Activation(relu)(Add()([h, r]));
        let h = MaxPooling2D(2)(h);
        let h = Conv2D(32, 3, padding = same, activation = relu)(h);
        let r = Conv2D(32, 3, padding = same, activation = relu)(h);
        let r = Conv2D(32, 3, padding = same)(r);
        let h = Activation(relu)(Add()([h, r]));
        let h = MaxPooling2D(2)(h);
        let h = Dropout(0.3)(Flatten()(h));
        Dense(10, softmax)(h)
    }
}

#[path = "common/args.rs"]
mod args;
#[path = "common/classify.rs"]
mod classify;
use args::Args;

fn main() -> Result<()> {
    let args = Args::parse(
        "resnet_fashion_mnist",
        Args {
            data: FASHION_MNIST_DIR.into(),
            epochs: 5,
            batch: 128,
            seed: 0,
        },
    );
    classify::train_and_report("resnet_fashion_mnist", ResNet::model(), &[28, 28, 1], &args)
}
