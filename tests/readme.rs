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
