//! A compilation-cache entry's bytes, read as the cache reads them before anything reaches
//! the plugin: a payload or nothing, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = strata_runtime::fuzzing::compile_cache_entry(bytes);
});
