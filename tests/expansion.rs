//! The committed expansion snapshots (`tests/expand/`) compile, and build the same models
//! as the macro invocations they were generated from.

use strata::model;
use strata::nn::Architecture;

mod tutorial {
    include!("expand/tutorial.expanded.rs");
}

mod named {
    include!("expand/named.expanded.rs");
}

#[test]
fn tutorial_snapshot_is_what_the_macro_builds() {
    let snapshot = tutorial::tutorial();
    let direct = model![
        Input(784),
        Dense(128, relu),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    assert_eq!(snapshot.summary(), direct.summary());
    assert_eq!(snapshot.weights(), direct.weights());
}

model! {
    /// The tutorial's classifier, as a reusable type.
    pub struct Tutorial {
        Dense(128, activation = relu, input_shape = 784),
        Dropout(0.2),
        /// The classifier head.
        Dense(10, activation = softmax),
    }
}

#[test]
fn named_snapshot_is_what_the_macro_builds() {
    let snapshot = named::Tutorial::model();
    let direct = Tutorial::model();
    assert_eq!(snapshot.summary(), direct.summary());
    assert_eq!(snapshot.weights(), direct.weights());
    assert_eq!(named::Tutorial::PARAMS, Tutorial::PARAMS);
    assert_eq!(
        format!("{:?}", named::Tutorial::default()),
        format!("{:?}", Tutorial::default())
    );
}
