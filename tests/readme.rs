//! The README shows real output: the tutorial model's summary and the compile error for a
//! size mismatch are compared with what the code produces.

use strata::model;

/// The ```text block after `<!-- readme-test: {name} -->`.
fn block(name: &str) -> String {
    let readme = include_str!("../README.md");
    let marker = format!("<!-- readme-test: {name} -->\n```text\n");
    let start = readme.find(&marker).expect("marker in README") + marker.len();
    let len = readme[start..].find("\n```").expect("closing fence");
    readme[start..start + len].to_string()
}

#[test]
fn readme_summary_is_the_real_one() {
    let model = model![
        Input(784),
        Dense(128, relu),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    assert_eq!(block("summary"), model.summary().trim_end());
}

#[test]
fn readme_size_mismatch_is_the_real_error() {
    let stderr = include_str!("ui/reshape_element_count.stderr");
    assert_eq!(block("size-mismatch"), stderr.trim_end());
}

#[test]
fn readme_graph_summary_is_the_real_one() {
    let model = model! {
        let x = Input((28, 28, 1));
        let h = Conv2D(16, 3, padding = same, activation = relu)(x);
        let y = Conv2D(16, 3, padding = same)(h);
        let y = Add()([y, h]);
        let y = Activation(relu)(y);
        let z = GlobalAveragePooling2D()(y);
        Dense(10, softmax)(z)
    };
    assert_eq!(block("graph-summary"), model.summary().trim_end());
}

#[test]
fn readme_graph_merge_error_is_the_real_one() {
    let stderr = include_str!("ui/graph_merge_shapes_incompatible.stderr");
    assert_eq!(block("graph-merge-error"), stderr.trim_end());
}
