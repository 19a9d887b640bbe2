//! `Model::export_onnx`.

use std::path::{Path, PathBuf};

/// A fresh, empty directory for one test's files (left there to look at after a failure).
fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("onnx-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn generated_code_matches_the_proto() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/export/onnx");
    let fds = protox::compile(["onnx.proto"], [&dir]).unwrap();
    let out = work_dir("protogen");
    prost_build::Config::new()
        .out_dir(&out)
        .compile_fds(fds)
        .unwrap();
    let fresh = std::fs::read_to_string(out.join("onnx.rs")).unwrap();
    let checked_in = dir.join("generated.rs");
    if std::env::var_os("STRATA_REGENERATE_PROTO").is_some() {
        std::fs::write(&checked_in, &fresh).unwrap();
    }
    assert!(
        std::fs::read_to_string(&checked_in).unwrap_or_default() == fresh,
        "{} is not prost-build's output for onnx.proto: rerun this test with \
         STRATA_REGENERATE_PROTO=1",
        checked_in.display()
    );
}
