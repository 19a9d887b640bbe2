//! A checkpoint file's bytes, read as `load_checkpoint` reads them before it consults the
//! model: a typed error or the tensors, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = strata_runtime::fuzzing::checkpoint(bytes);
});
