//! The sequence, depthwise, separable and transposed convolution layers, their pools and
//! group normalisation against Keras 3 (`tests/reference/spatial_layers.json`, written by
//! `scripts/keras-reference/spatial_layers.py`): the same arguments, the same weights in
//! Keras' order and layout, the same outputs, on the native backend.

mod keras_reference;

use keras_reference::tensor;
use serde_json::Value as Json;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::Backend;
use strata_runtime::ir::Graph;
use strata_runtime::nn::*;
use strata_runtime::Tensor;

fn reference() -> Json {
    keras_reference::load("spatial_layers")
}

/// The Strata layer for a Keras class and its arguments (Keras' defaults otherwise).
fn layer(class: &str, a: &Json) -> Box<dyn Layer> {
    let n = |k: &str, d: usize| a.get(k).and_then(Json::as_u64).map_or(d, |v| v as usize);
    let pair = |k: &str, d: usize| -> [usize; 2] {
        match a.get(k) {
            Some(Json::Array(v)) => [0, 1].map(|i| v[i].as_u64().unwrap() as usize),
            Some(v) => [v.as_u64().unwrap() as usize; 2],
            None => [d, d],
        }
    };
    let padding = match a.get("padding").and_then(Json::as_str) {
        Some("same") => Padding::Same,
        Some("causal") => Padding::Causal,
        _ => Padding::Valid,
    };
    let flag = |k: &str, d: bool| a.get(k).and_then(Json::as_bool).unwrap_or(d);
    let linear = Activation::Linear;
    match class {
        "Conv1D" => Box::new(Conv1D {
            strides: n("strides", 1),
            padding,
            dilation_rate: n("dilation_rate", 1),
            groups: n("groups", 1),
            ..Conv1D::new("conv1d", n("filters", 1), n("kernel_size", 1), linear)
        }),
        "MaxPooling1D" => Box::new(MaxPooling1D {
            strides: a.get("strides").and_then(Json::as_u64).map(|s| s as usize),
            padding,
            ..MaxPooling1D::new("max_pooling1d", n("pool_size", 2))
        }),
        "AveragePooling1D" => Box::new(AveragePooling1D {
            strides: a.get("strides").and_then(Json::as_u64).map(|s| s as usize),
            padding,
            ..AveragePooling1D::new("average_pooling1d", n("pool_size", 2))
        }),
        "GlobalAveragePooling1D" => Box::new(GlobalAveragePooling1D {
            keepdims: flag("keepdims", false),
            ..GlobalAveragePooling1D::new("global_average_pooling1d")
        }),
        "GlobalMaxPooling1D" => Box::new(GlobalMaxPooling1D {
            keepdims: flag("keepdims", false),
            ..GlobalMaxPooling1D::new("global_max_pooling1d")
        }),
        "DepthwiseConv2D" => Box::new(DepthwiseConv2D {
            strides: pair("strides", 1),
            padding,
            depth_multiplier: n("depth_multiplier", 1),
            dilation_rate: pair("dilation_rate", 1),
            use_bias: flag("use_bias", true),
            ..DepthwiseConv2D::new("depthwise_conv2d", pair("kernel_size", 1), linear)
        }),
        "SeparableConv2D" => Box::new(SeparableConv2D {
            strides: pair("strides", 1),
            padding,
            depth_multiplier: n("depth_multiplier", 1),
            dilation_rate: pair("dilation_rate", 1),
            use_bias: flag("use_bias", true),
            ..SeparableConv2D::new(
                "separable_conv2d",
                n("filters", 1),
                pair("kernel_size", 1),
                linear,
            )
        }),
        "Conv2DTranspose" => Box::new(Conv2DTranspose {
            strides: pair("strides", 1),
            padding,
            output_padding: a.get("output_padding").map(|_| pair("output_padding", 0)),
            dilation_rate: pair("dilation_rate", 1),
            ..Conv2DTranspose::new(
                "conv2d_transpose",
                n("filters", 1),
                pair("kernel_size", 1),
                linear,
            )
        }),
        "GroupNormalization" => Box::new(GroupNormalization {
            groups: n("groups", 32),
            axis: a.get("axis").and_then(Json::as_i64).unwrap_or(-1) as isize,
            epsilon: a.get("epsilon").and_then(Json::as_f64).unwrap_or(1e-3),
            center: flag("center", true),
            scale: flag("scale", true),
            ..GroupNormalization::new("group_normalization")
        }),
        other => panic!("no layer for {other}"),
    }
}

fn infer(layer: &dyn Layer, x: Tensor, params: Vec<Tensor>) -> Tensor {
    let mut g = Graph::new("layer");
    let xv = g.parameter(x.ty());
    let pv: Vec<_> = params.iter().map(|p| g.parameter(p.ty())).collect();
    let mut cx = Forward::new(&mut g, false, None);
    let y = layer.forward(&mut cx, xv, &pv).unwrap();
    g.set_outputs(vec![y]).unwrap();
    let mut inputs = vec![x];
    inputs.extend(params);
    NativeBackend::new().run(&g, &inputs).unwrap().remove(0)
}

#[test]
fn every_case_matches_keras() {
    let reference = reference();
    let cases = reference["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for (i, case) in cases.iter().enumerate() {
        let class = case["class"].as_str().unwrap();
        let what = format!("case {i}: {class} {}", case["args"]);
        let layer = layer(class, &case["args"]);
        let x = tensor(&case["input"]);
        let weights: Vec<Tensor> = case["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        // The weights Keras holds are the ones this layer declares, in order and layout.
        let specs = layer.params(&x.dims()[1..]).unwrap();
        let declared: Vec<&[usize]> = specs.iter().map(|p| p.dims.as_slice()).collect();
        let given: Vec<&[usize]> = weights.iter().map(|w| w.dims()).collect();
        assert_eq!(declared, given, "{what}");
        let want = tensor(&case["output"]);
        let got = infer(layer.as_ref(), x, weights);
        assert_eq!(got.dims(), want.dims(), "{what}");
        let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
        for (k, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                "{what}: element {k} is {a}, Keras gives {b}"
            );
        }
    }
}
