//! A small residual CNN on Fashion-MNIST, declared with `model!`'s graph form: two
//! residual blocks (the block's input added to its output, `Add()([h, r])`), each followed
//! by max pooling, then a softmax classifier. Reports test accuracy and the time taken.
//!
//!     cargo run --release --example resnet_fashion_mnist [-- --epochs 5 --batch 128 --seed 0 --data DIR]
//!
//! The device comes from `STRATA_DEVICE` (`native` by default, `xla-cpu`, `cuda`, `tpu`).

use std::time::Instant;
use strata::data::{load_mnist, FASHION_MNIST_DIR};
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::Fit;
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
    let data = load_mnist(&args.data).inspect_err(|_| {
        eprintln!(
            "resnet_fashion_mnist: cannot read {}: install Debian's dataset-fashion-mnist or pass --data DIR",
            args.data
        );
    })?;
    let images = |x: ndarray::ArrayD<f32>| {
        let n = x.shape()[0];
        x.into_shape_with_order((n, 28, 28, 1))
            .expect("28x28 images")
    };
    let (x_train, x_test) = (images(data.x_train), images(data.x_test));

    let mut model = ResNet::model().with_seed(args.seed)?;
    print!("{}", model.summary());
    model.set_device(strata::backend::Device::from_env()?)?;
    model.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )?;
    let start = Instant::now();
    model.fit(
        x_train,
        &data.y_train,
        Fit::epochs(args.epochs)
            .batch_size(args.batch)
            .seed(args.seed),
    )?;
    let trained = start.elapsed().as_secs_f64();
    let test = model.evaluate(&x_test, &data.y_test)?;
    println!(
        "test accuracy: {:.4} (test loss {:.4}); {} epochs of 60,000 images in {trained:.0} s",
        test.get("accuracy").unwrap_or(f64::NAN),
        test.get("loss").unwrap_or(f64::NAN),
        args.epochs
    );
    Ok(())
}
