//! What the Fashion-MNIST classifier examples share: the images in the model's input shape,
//! the summary, Adam with sparse cross-entropy, `fit` with the command line's epochs, batch
//! and seed, then the test accuracy and the time taken.

use crate::args::Args;
use std::time::Instant;
use strata::data::load_mnist;
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::nn::Architecture;
use strata::optim::Adam;
use strata::train::Fit;
use strata::{Model, Result};

/// Trains `model` on Fashion-MNIST's images, each shaped `sample` (e.g. `[28, 28, 1]`),
/// and reports; `example` names the program in its messages.
pub fn train_and_report<A: Architecture>(
    example: &str,
    model: Model<A>,
    sample: &[usize],
    args: &Args,
) -> Result<()> {
    let data = load_mnist(&args.data).inspect_err(|_| {
        eprintln!(
            "{example}: cannot read {}: install Debian's dataset-fashion-mnist or pass --data DIR",
            args.data
        );
    })?;
    let shaped = |x: ndarray::ArrayD<f32>| {
        let dims: Vec<usize> = std::iter::once(x.shape()[0])
            .chain(sample.iter().copied())
            .collect();
        x.into_shape_with_order(dims).expect("28x28 images")
    };
    let (x_train, x_test) = (shaped(data.x_train), shaped(data.x_test));

    let mut model = model.with_seed(args.seed)?;
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
