//! Compile-fail tests of `model!`: one file per rule in `tests/ui/`, named after it, with
//! the exact error rustc prints in its `.stderr`. Regenerate the `.stderr` files after a
//! deliberate change with `TRYBUILD=overwrite cargo test --test ui`, and read the diff.

#[test]
fn compile_errors() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
