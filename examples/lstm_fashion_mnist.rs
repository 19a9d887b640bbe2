//! An LSTM reading each Fashion-MNIST image row by row (28 steps of 28 pixels), its last
//! state classified: `LSTM(128)` then `Dense(10, softmax)`. Reports test accuracy and the
//! time taken.
//!
//!     cargo run --release --example lstm_fashion_mnist [-- --epochs 5 --batch 128 --seed 0 --data DIR]
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
    /// Rows of a 28x28 image as a sequence, read by an LSTM.
    pub struct RowReader {
        Input((28, 28)),
        LSTM(128),
        Dense(10, softmax),
    }
}

#[path = "common/args.rs"]
mod args;
use args::Args;

fn main() -> Result<()> {
    let args = Args::parse(
        "lstm_fashion_mnist",
        Args {
            data: FASHION_MNIST_DIR.into(),
            epochs: 5,
            batch: 128,
            seed: 0,
        },
    );
    let data = load_mnist(&args.data).inspect_err(|_| {
        eprintln!(
            "lstm_fashion_mnist: cannot read {}: install Debian's dataset-fashion-mnist or pass --data DIR",
            args.data
        );
    })?;
    let rows = |x: ndarray::ArrayD<f32>| {
        let n = x.shape()[0];
        x.into_shape_with_order((n, 28, 28)).expect("28x28 images")
    };
    let (x_train, x_test) = (rows(data.x_train), rows(data.x_test));

    let mut model = RowReader::model().with_seed(args.seed)?;
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
