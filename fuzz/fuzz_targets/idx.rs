//! `read_idx` on any bytes (plain or gzipped): a typed error or a tensor, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = strata_runtime::fuzzing::idx(bytes);
});
