//! The tutorial's model, declared with `model!`, and its Keras-style summary.
//!
//!     cargo run --example model_summary

use strata::model;

fn main() {
    let model = model![
        Input(784),
        Dense(128, relu),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    print!("{}", model.summary());
}
