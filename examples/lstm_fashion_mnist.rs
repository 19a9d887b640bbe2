//! An LSTM reading each Fashion-MNIST image row by row (28 steps of 28 pixels), its last
//! state classified: `LSTM(128)` then `Dense(10, softmax)`. Reports test accuracy and the
//! time taken.
//!
//!     cargo run --release --example lstm_fashion_mnist [-- --epochs 5 --batch 128 --seed 0 --data DIR]
//!
//! The device comes from `STRATA_DEVICE` (`native` by default, `xla-cpu`, `cuda`, `tpu`).

use strata::data::FASHION_MNIST_DIR;
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
#[path = "common/classify.rs"]
mod classify;
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
    classify::train_and_report("lstm_fashion_mnist", RowReader::model(), &[28, 28], &args)
}
