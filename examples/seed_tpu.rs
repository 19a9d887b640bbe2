//! The TensorFlow tutorial "train a model on TPUs" (`shared/seed`), line by line: resolve,
//! connect and initialize the TPU, make a TPUStrategy, print its devices, build and
//! compile the model in its scope, and fit it on random data for 5 epochs.
//!
//!     cargo run --release --example seed_tpu
//!
//! Without a TPU it says so in one line and continues on `Strategy::auto()`: every GPU,
//! else the native backend (nothing to install). `STRATA_STRATEGY` forces a strategy
//! (`tpu`, `mirrored:xla-cpu:4`, `mirrored:native:2`, `one:native`, ...) and
//! `STRATA_DEVICE` a device (`xla-cpu`, ...).

use strata::prelude::*;

// `pub` so that `tests/seed_tpu.rs` can run the example as it is.
pub fn main() -> Result<()> {
    // STRATA_STRATEGY / STRATA_DEVICE, when set, choose instead of the tutorial's TPU.
    let strategy = match Strategy::from_env()? {
        Some(strategy) => strategy,
        None => tpu_strategy().or_else(|e| {
            println!("{e}; continuing on Strategy::auto().");
            Strategy::auto()
        })?,
    };
    println!("Devices: {:?}", strategy.devices());

    // with strategy.scope(): define and compile the model.
    let mut model = strategy.scope(|| -> Result<_> {
        let mut model = model![
            Dense(128, activation = relu, input_shape = 784),
            Dense(64, activation = relu),
            Dense(10, activation = softmax),
        ];
        model.compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )?;
        Ok(model)
    })?;

    // Fake training data.
    let x_train = strata::random::normal(&[10000, 784], 0.0, 1.0, 0)?;
    let y_train = strata::random::uniform_int(&[10000], 0, 10, 1)?;

    // Training the model.
    model.fit(&x_train, &y_train, Fit::epochs(5))?;
    Ok(())
}

/// The tutorial's TPU set-up.
fn tpu_strategy() -> Result<Strategy> {
    let resolver = TpuClusterResolver::new("")?; // Automatically detects TPUs
    resolver.connect()?; // Connects to the TPU cluster
    resolver.initialize()?; // Initializing the TPU system
    let strategy = TpuStrategy::new(&resolver)?; // Create a strategy to use the TPUs
    println!("TPU devices: {:?}", strategy.devices());
    Ok(strategy)
}
