//! `examples/transformer.rs` (a transformer encoder block declared with `model!`, with a
//! learned position embedding of its own in braces) trained on fewer sequences: it must
//! tell whether a sequence holds a token twice for at least 95% of unseen sequences
//! (about half do, so guessing gets 50%).

#[allow(dead_code)]
#[path = "../examples/transformer.rs"]
mod transformer;

use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::Fit;

#[test]
fn a_transformer_encoder_learns_which_sequences_repeat_a_token() {
    let (x, y) = transformer::repeats(12_000, 10);
    let (x_test, y_test) = transformer::repeats(2_000, 11);
    let mut model = transformer::Encoder::model();
    model
        .compile(
            Adam::new(0.003),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
    model
        .fit(&x, &y, Fit::epochs(10).batch_size(64).verbose(0))
        .unwrap();
    let acc = model
        .evaluate(&x_test, &y_test)
        .unwrap()
        .get("accuracy")
        .unwrap();
    eprintln!("transformer: test accuracy {acc}");
    assert!(acc >= 0.95, "test accuracy {acc}");
}
