//! The tutorial's model on real data: Fashion-MNIST (Debian's `dataset-fashion-mnist`, or
//! any MNIST-format directory given with `--data DIR`), reporting test accuracy.
//!
//!     cargo run --release --example fashion_mnist [-- --data DIR --epochs 5 --batch 32 --seed 0]
//!
//! The device comes from `STRATA_DEVICE` (`native` by default, `xla-cpu`, `cuda`, `tpu`).

use strata::data::{load_mnist, FASHION_MNIST_DIR};
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::Fit;
use strata::{model, Result};

#[path = "common/args.rs"]
mod args;
use args::Args;

fn main() -> Result<()> {
    let args = Args::parse(
        "fashion_mnist",
        Args {
            data: FASHION_MNIST_DIR.into(),
            epochs: 5,
            batch: 32,
            seed: 0,
        },
    );
    let data = load_mnist(&args.data).inspect_err(|_| {
        eprintln!("fashion_mnist: cannot read {}: install Debian's dataset-fashion-mnist or pass --data DIR", args.data);
    })?;
    let flat = |x: &ndarray::ArrayD<f32>| {
        let n = x.shape()[0];
        x.to_shape((n, 784))
            .map(|v| v.to_owned())
            .expect("28x28 images")
    };
    let (x_train, x_test) = (flat(&data.x_train), flat(&data.x_test));

    let mut model = model![
        Dense(128, relu, input_shape = 784),
        Dense(64, relu),
        Dense(10, softmax)
    ]
    .with_seed(args.seed)?;
    model.set_device(strata::backend::Device::from_env()?)?;
    model.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )?;
    model.fit(
        &x_train,
        &data.y_train,
        Fit::epochs(args.epochs)
            .batch_size(args.batch)
            .seed(args.seed),
    )?;
    let test = model.evaluate(&x_test, &data.y_test)?;
    println!(
        "test accuracy: {:.4} (test loss {:.4})",
        test.get("accuracy").unwrap_or(f64::NAN),
        test.get("loss").unwrap_or(f64::NAN)
    );
    Ok(())
}
