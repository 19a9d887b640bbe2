//! libtpu on a machine without a TPU: opening the `tpu` device must fail within seconds
//! with a typed error, never hang (libtpu's cloud-metadata queries take ~10 minutes unless
//! Strata disables them).
//!
//! Its own test binary, so libtpu is the only plugin loaded in this process. Needs libtpu
//! installed (`scripts/install-xla-plugin`); without it the test fails with the install
//! command. On a real TPU VM the backend opens instead, and the test checks that.

use std::time::{Duration, Instant};
use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::Device;
use strata_runtime::Error;

#[test]
fn tpu_without_a_tpu_fails_fast_with_a_typed_error() {
    let start = Instant::now();
    let r = PjrtBackend::with_options(
        &Device::Tpu,
        PjrtOptions {
            cache: CacheDir::Disabled,
            ..PjrtOptions::default()
        },
    );
    let took = start.elapsed();
    match r {
        Err(Error::DeviceUnavailable { device, message }) => {
            assert_eq!(device, "tpu");
            assert!(!message.is_empty());
            eprintln!("tpu: unavailable after {took:?}: {message}");
        }
        Ok(b) => {
            // A TPU is present: then it must also have opened quickly.
            assert!(b.device_count() > 0);
            eprintln!("tpu: {} devices: {:?}", b.device_count(), b.device_kinds());
        }
        Err(e @ Error::PluginNotFound { .. }) => panic!("libtpu is needed for this test: {e}"),
        Err(e) => panic!("expected DeviceUnavailable, got {e:?}"),
    }
    assert!(
        took < Duration::from_secs(5),
        "opening the tpu device took {took:?}"
    );
}
