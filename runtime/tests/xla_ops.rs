//! The op conformance table (`common::cases()`) on XLA's CPU plugin.
//!
//! Tolerances are the table's own: |got - want| <= 1e-6 + 1e-6 |want| for floats, exact
//! for integers and bools. XLA's transcendental functions (exp, log, tanh, erf, logistic,
//! pow, ...) met them on every case, so no case is widened for XLA. Float max/min, whose
//! NaN handling XLA's CPU compiler relaxes by default, are lowered to propagate NaN.
//!
//! Needs the plugin installed (`scripts/install-xla-plugin`, which `scripts/test` runs);
//! without it these tests fail with the install command rather than being skipped.

mod common;

use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::Device;

fn xla_cpu() -> PjrtBackend {
    let options = PjrtOptions {
        // Every case must really compile: no cache.
        cache: CacheDir::Disabled,
        ..PjrtOptions::default()
    };
    match PjrtBackend::with_options(&Device::XlaCpu { devices: Some(1) }, options) {
        Ok(b) => b,
        Err(e) => panic!("the XLA CPU plugin is needed for this test: {e}"),
    }
}

#[test]
fn every_op_matches_hand_computed_values_on_xla_cpu() {
    let backend = xla_cpu();
    let cases = common::cases();
    let failures = common::run_all(&backend, &cases);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
