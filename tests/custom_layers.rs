//! Layers of the user's own inside `model!`, written as an expression in braces
//! (`{ Scale::new("scale", 2) }`): in both forms, trained like any other, and what the
//! macro cannot know about them (their shapes) checked when the model is built.

use strata::ir::Value;
use strata::loss::MeanSquaredError;
use strata::model;
use strata::nn::{Forward, Initializer, Layer, ParamSpec};
use strata::optim::SGD;
use strata::train::Fit;
use strata::{Result, Tensor};

/// `x * w`, one learned factor per feature (initialised to ones).
#[derive(Debug)]
struct Scale {
    name: String,
}

impl Scale {
    fn new(name: &str) -> Scale {
        Scale { name: name.into() }
    }
}

impl Layer for Scale {
    fn class(&self) -> &'static str {
        "Scale"
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        Ok(input.to_vec())
    }
    fn params(&self, input: &[usize]) -> Result<Vec<ParamSpec>> {
        let features = *input.last().unwrap_or(&1);
        Ok(vec![ParamSpec {
            name: format!("{}/factor", self.name),
            dims: vec![features],
            init: Initializer::Ones,
            fan_in: features,
            fan_out: features,
            trainable: true,
        }])
    }
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        cx.g.mul(x, params[0])
    }
}

/// Doubles the last axis (the input twice, side by side).
#[derive(Debug)]
struct Twice;

impl Layer for Twice {
    fn class(&self) -> &'static str {
        "Twice"
    }
    fn name(&self) -> &str {
        "twice"
    }
    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        let mut out = input.to_vec();
        if let Some(last) = out.last_mut() {
            *last *= 2;
        }
        Ok(out)
    }
    fn params(&self, _: &[usize]) -> Result<Vec<ParamSpec>> {
        Ok(Vec::new())
    }
    fn forward(&self, cx: &mut Forward<'_>, x: Value, _: &[Value]) -> Result<Value> {
        let axis = cx.g.ty(x).rank() - 1;
        cx.g.concatenate(&[x, x], axis)
    }
}

#[test]
fn a_layer_of_ones_own_in_a_stack_trains() {
    let mut m = model![
        Input(3),
        { Scale::new("scale") },
        Dense(1, use_bias = false)
    ];
    assert!(m.is_built());
    let names: Vec<String> = m.weights().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["scale/factor", "dense/kernel"]);
    assert!(m.summary().contains("scale (Scale)"), "{}", m.summary());
    let x = strata::random::normal(&[64, 3], 0.0, 1.0, 1).unwrap();
    let y = x
        .map_axis(ndarray::Axis(1), |r| 2.0 * r[0] - r[1])
        .insert_axis(ndarray::Axis(1));
    m.compile(SGD::new(0.1), MeanSquaredError, ()).unwrap();
    let before = m.weights()[0].1.clone();
    let h = m
        .fit(&x, &y, Fit::epochs(30).batch_size(16).verbose(0))
        .unwrap();
    let loss = h.get("loss").unwrap();
    assert!(loss.last().unwrap() < &(0.01 * loss[0]), "{loss:?}");
    assert_ne!(m.weights()[0].1, before, "the custom layer's weight trains");
}

#[test]
fn a_layer_of_ones_own_in_a_graph() {
    let m = model! {
        let x = Input(2);
        let s = { Scale::new("gain") };
        let h = s(x);
        Add()([h, { Scale::new("other") }(x)])
    };
    let x = Tensor::from_vec(&[1, 2], vec![1.0f32, -3.0]).unwrap();
    // Both factors start at one: x + x.
    assert_eq!(m.predict(&x).unwrap().to_vec::<f32>().unwrap(), [2.0, -6.0]);
}

/// The macro cannot know `Twice` doubles its input: the Add after it is checked when the
/// model is built, a typed error naming the merge and both shapes.
#[test]
fn what_the_macro_cannot_know_is_checked_at_build() {
    let mut m = model! {
        let x = Input(4);
        Add()([x, { Twice }(x)])
    };
    assert!(!m.is_built());
    let e = m.build(&[4]).unwrap_err().to_string();
    assert_eq!(
        e,
        "add (Add): expected inputs of one rank with equal sizes (or 1) on every axis, got \
         input 0 of shape [4] and input 1 of shape [8]"
    );
    let mut m = model![Input(4), { Twice }, Dense(2)];
    m.build(&[4]).unwrap();
    assert_eq!(m.output_shape(), Some(&[2][..]));
    assert_eq!(m.params()[0].dims, [8, 2]);
}

/// The wrappers train end to end: a sequence tagger, one Dense at every step of a
/// bidirectional LSTM's sequence, learns a target that needs both directions (each step's
/// target is the sum of the features before and after it).
#[test]
fn a_model_of_wrappers_trains() {
    let mut m = model![
        Input((6, 2)),
        Bidirectional(LSTM(8, return_sequences = true)),
        TimeDistributed(Dense(1)),
    ];
    let x = strata::random::normal(&[64, 6, 2], 0.0, 1.0, 3).unwrap();
    let y = ndarray::Array3::from_shape_fn((64, 6, 1), |(b, t, _)| {
        let before = if t > 0 { x[[b, t - 1, 0]] } else { 0.0 };
        let after = if t < 5 { x[[b, t + 1, 1]] } else { 0.0 };
        before + after
    });
    m.compile(strata::optim::Adam::new(0.02), MeanSquaredError, ())
        .unwrap();
    let h = m
        .fit(&x, &y, Fit::epochs(20).batch_size(16).verbose(0))
        .unwrap();
    let loss = h.get("loss").unwrap();
    assert!(loss.last().unwrap() < &(0.5 * loss[0]), "{loss:?}");
}
