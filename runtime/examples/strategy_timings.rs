//! The tutorial's workload (784-128-64-10 MLP, Adam, 10,000 random samples) under each
//! strategy named on the command line, timing every epoch.
//!
//!     cargo run --release -p strata-runtime --example strategy_timings -- \
//!         BATCH EPOCHS one:native mirrored:native:2 one:xla-cpu mirrored:xla-cpu:4 ...
//!
//! The first epoch includes compiling the step; the best epoch is the steady state.

use std::time::Instant;
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::random;
use strata_runtime::strategy::StrategySpec;
use strata_runtime::train::Fit;
use strata_runtime::Model;

fn main() -> strata_runtime::Result<()> {
    let mut args = std::env::args().skip(1);
    let batch: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(32);
    let epochs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let specs: Vec<String> = args.collect();
    let x = random::normal(&[10000, 784], 0.0, 1.0, 0)?;
    let y = random::uniform_int(&[10000], 0, 10, 1)?;
    for spec in &specs {
        let strategy = spec.parse::<StrategySpec>()?.build()?;
        let mut m = strategy.scope(|| {
            Model::new(Sequential::new(
                Some(vec![784]),
                vec![
                    Box::new(Dense::new("dense", 128, Activation::Relu)),
                    Box::new(Dense::new("dense_1", 64, Activation::Relu)),
                    Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
                ],
            ))
        });
        m.compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )?;
        let steps = 10000usize.div_ceil(batch);
        let mut times = Vec::new();
        for e in 0..epochs {
            let t = Instant::now();
            m.fit(
                &x,
                &y,
                Fit::epochs(1)
                    .batch_size(batch)
                    .verbose(0)
                    .seed(e)
                    .pad_to_replicas(true),
            )?;
            times.push(t.elapsed().as_secs_f64());
        }
        let best = times.iter().cloned().fold(f64::INFINITY, f64::min);
        println!(
            "{spec:<22} batch {batch:>5}: first epoch {:.3}s, best epoch {best:.3}s ({:.3} ms/step)",
            times[0],
            best * 1e3 / steps as f64
        );
    }
    Ok(())
}
