use std::time::Instant;
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Model, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::random;
use strata_runtime::train::Fit;

fn main() {
    let batch: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let epochs: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let x = random::normal(&[10000, 784], 0.0, 1.0, 0).unwrap();
    let y = random::uniform_int(&[10000], 0, 10, 1).unwrap();
    let mut m = Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ));
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    for e in 0..epochs {
        let t = Instant::now();
        m.fit(&x, &y, Fit::epochs(1).batch_size(batch).verbose(0).seed(e))
            .unwrap();
        println!("epoch {e}: {:.4}s", t.elapsed().as_secs_f64());
    }
}
