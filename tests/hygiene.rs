//! The expansion reaches everything through absolute paths and hygienic locals: user
//! items named like the prelude's, and layers named like `forward`'s locals, change
//! nothing.

#![allow(dead_code, non_camel_case_types)]

use strata::model;

struct Option;
struct Some;
struct None;
struct Vec;
struct String;
struct Default;
struct Ok;
struct Err;
struct usize_;
mod nn {}
mod ir {}

model! {
    /// Layers named after the locals of the generated `forward`.
    pub struct Shadowed {
        Input(4),
        Dense(3, name = "cx"),
        Dense(3, name = "input"),
        Dense(3, name = "params"),
        Dense(2, name = "cx_params"),
        Dropout(0.1, name = "layers"),
    }
}

#[test]
fn prelude_names_and_layer_names_do_not_capture() {
    let direct = model![
        Input(4),
        Dense(3),
        Dense(3),
        Dense(3),
        Dense(2),
        Dropout(0.1)
    ];
    let shadowed = Shadowed::model();
    let names: std::vec::Vec<std::string::String> =
        shadowed.weights().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "cx/kernel");
    assert_eq!(names[6], "cx_params/kernel");
    let values = |m: std::vec::Vec<(std::string::String, strata::Tensor)>| {
        m.into_iter().map(|(_, t)| t).collect::<std::vec::Vec<_>>()
    };
    assert_eq!(values(shadowed.weights()), values(direct.weights()));
}

model! {
    /// A graph whose layers are named after `forward`'s locals, the input read again after
    /// them: no call's value may shadow the input or the context.
    pub struct ShadowedGraph {
        let x = Input(3);
        let a = Dense(3, name = "input", use_bias = false, kernel_initializer = ones)(x);
        let b = Dense(3, name = "cx", use_bias = false, kernel_initializer = ones)(a);
        let c = Dense(3, name = "params", use_bias = false, kernel_initializer = ones)(b);
        Add(name = "input_params")([c, x])
    }
}

#[test]
fn graph_locals_do_not_capture_the_input() {
    let m = ShadowedGraph::model();
    let x = strata::Tensor::from_vec(&[1, 3], std::vec![1.0f32, 2.0, 3.0]).unwrap();
    // Three Dense of ones: each output is 3 times the sum before it (6, 18, 54); plus x.
    let y = m.predict(&x).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y, [55.0, 56.0, 57.0]);
}
