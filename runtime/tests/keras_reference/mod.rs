//! The committed Keras reference values the layer tests read
//! (`tests/reference/<area>.json`, written by `scripts/keras-reference/<area>.py`).

use serde_json::Value as Json;
use strata_runtime::Tensor;

/// The reference file of `area` (`spatial_layers`, `normalization_layers`, ...).
pub fn load(area: &str) -> Json {
    let path = format!("{}/tests/reference/{area}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("the Keras reference file");
    serde_json::from_str(&text).expect("valid JSON")
}

/// A tensor as the layer scripts write one: `{"shape": [..], "data": [..]}`, f32.
pub fn tensor(j: &Json) -> Tensor {
    let dims: Vec<usize> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f32> = j["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    Tensor::from_vec(&dims, data).unwrap()
}
