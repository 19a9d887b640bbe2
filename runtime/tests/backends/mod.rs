//! The two backends the tests that compare backends run on: native, and one XLA CPU device
//! (the plugin `scripts/install-xla-plugin` installs; without it such a test fails and says
//! so, it does not skip).
#![allow(dead_code)]

use std::sync::Arc;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::{Backend, Device};

/// One XLA CPU device, without the persistent compilation cache.
pub fn xla_cpu() -> Arc<dyn Backend> {
    match PjrtBackend::with_options(
        &Device::XlaCpu { devices: Some(1) },
        PjrtOptions {
            cache: CacheDir::Disabled,
            ..PjrtOptions::default()
        },
    ) {
        Ok(b) => Arc::new(b),
        Err(e) => panic!("the XLA CPU plugin is needed for this test: {e}"),
    }
}

/// Native and XLA CPU, by name.
pub fn backends() -> Vec<(&'static str, Arc<dyn Backend>)> {
    vec![
        ("native", Arc::new(NativeBackend::new())),
        ("xla-cpu", xla_cpu()),
    ]
}
