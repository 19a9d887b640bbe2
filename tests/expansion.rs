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

mod residual {
    include!("expand/residual.expanded.rs");
}

mod states {
    include!("expand/states.expanded.rs");
}

#[test]
fn states_snapshot_is_what_the_macro_builds() {
    let snapshot = states::states();
    let direct = model! {
        let x = Input((6, 3));
        let (seq, h, c) = LSTM(4, return_sequences = true, return_state = true)(x);
        let s = Concatenate()([h, c]);
        (seq, Dense(1)(s))
    };
    assert_eq!(snapshot.summary(), direct.summary());
    assert_eq!(snapshot.weights(), direct.weights());
    let x = strata::random::normal(&[2, 6, 3], 0.0, 1.0, 1).unwrap();
    assert_eq!(
        snapshot.predict_outputs(&x).unwrap(),
        direct.predict_outputs(&x).unwrap()
    );
}

#[test]
fn residual_snapshot_is_what_the_macro_builds() {
    let snapshot = residual::residual();
    let direct = model! {
        let x = Input((28, 28, 1));
        let h = Conv2D(16, 3, padding = same, activation = relu)(x);
        let y = Conv2D(16, 3, padding = same)(h);
        let y = Add()([y, h]);
        let y = Activation(relu)(y);
        let z = GlobalAveragePooling2D()(y);
        Dense(10, softmax)(z)
    };
    assert_eq!(snapshot.summary(), direct.summary());
    assert_eq!(snapshot.weights(), direct.weights());
    let x = strata::random::normal(&[2, 28, 28, 1], 0.0, 1.0, 1).unwrap();
    assert_eq!(snapshot.predict(&x).unwrap(), direct.predict(&x).unwrap());
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
