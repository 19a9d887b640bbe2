//! The TPU resolver on a machine without a TPU: every step fails within seconds with
//! `Error::TpuNotFound` saying what was tried — with libtpu installed (found by discovery,
//! and driven all the way to its own "no TPU" answer through a PCI bus that pretends to
//! have a chip) and without it. On a TPU VM `new("")` succeeds instead, and the test
//! checks that the TPU opens quickly.
//!
//! Its own test binary, so libtpu is the only plugin loaded in this process. Needs libtpu
//! installed (`scripts/install-xla-plugin`); without it the libtpu tests fail with the
//! install command.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use strata_runtime::backend::pjrt::{find_plugin, PluginKind};
use strata_runtime::strategy::{ResolverOptions, TpuClusterResolver, TpuStrategy};
use strata_runtime::Error;

const LIMIT: Duration = Duration::from_secs(5);

/// `connect` maps libtpu, a 575 MB library: from a cold page cache on a busy machine that
/// alone was measured at 14 s (0.4 s warm). It is never on the no-TPU path (`new` fails
/// first there); here it only has to finish, not hang on cloud metadata for minutes.
const LOAD_LIMIT: Duration = Duration::from_secs(60);

fn libtpu() -> PathBuf {
    find_plugin(PluginKind::Tpu, None)
        .unwrap_or_else(|e| panic!("libtpu is needed for this test: {e}"))
}

/// A sysfs-like PCI directory holding one TPU v4 chip: one per call, as tests run in
/// parallel and rewriting a file another test is reading made that test see no TPU.
fn pci_with_a_tpu() -> PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::temp_dir().join(format!("strata-fake-pci-{}-{call}", std::process::id()));
    let dev = root.join("0000:00:05.0");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("vendor"), "0x1ae0\n").unwrap();
    std::fs::write(dev.join("device"), "0x005e\n").unwrap();
    std::fs::write(dev.join("class"), "0x120000\n").unwrap();
    root
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    timed_within(LIMIT, what, f)
}

fn timed_within<T>(limit: Duration, what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let r = f();
    let took = start.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took < limit, "{what} took {took:?}");
    r
}

fn expect_not_found(r: Result<impl std::fmt::Debug, Error>, what: &str) -> Vec<String> {
    match r {
        Err(Error::TpuNotFound { tried }) => {
            eprintln!(
                "{what}: {}",
                Error::TpuNotFound {
                    tried: tried.clone()
                }
            );
            tried
        }
        other => panic!("{what}: expected TpuNotFound, got {other:?}"),
    }
}

#[test]
fn no_tpu_with_libtpu_installed_fails_fast_at_new() {
    let plugin = libtpu();
    let r = timed("TpuClusterResolver::new(\"\")", || {
        TpuClusterResolver::new("")
    });
    match r {
        Ok(resolver) => {
            // A TPU VM: then the whole sequence must work, quickly.
            assert!(!resolver.chips().is_empty());
            timed_within(LOAD_LIMIT, "connect", || resolver.connect()).unwrap();
            timed_within(LOAD_LIMIT, "initialize", || resolver.initialize()).unwrap();
            let s = TpuStrategy::new(&resolver).unwrap();
            eprintln!("TPU devices: {:?}", s.devices());
        }
        r => {
            let tried = expect_not_found(r, "new(\"\")");
            assert!(tried[0].contains("no TPU chip on the PCI bus"), "{tried:?}");
            assert!(
                tried[1].contains(&plugin.display().to_string()),
                "{tried:?}"
            );
        }
    }
}

#[test]
fn no_tpu_without_libtpu_fails_fast_at_new() {
    let missing = ResolverOptions {
        plugin: Some(PathBuf::from("/nonexistent/libtpu/libtpu.so")),
        pci_devices: PathBuf::from("/nonexistent/sys/bus/pci/devices"),
    };
    let tried = expect_not_found(
        timed("new without libtpu", || {
            TpuClusterResolver::with_options("", missing.clone())
        }),
        "without libtpu",
    );
    assert!(tried[0].contains("could not be read"), "{tried:?}");
    assert!(tried[1].contains("does not exist"), "{tried:?}");

    // With a chip but no plugin, the plugin is what is missing.
    let chip = ResolverOptions {
        pci_devices: pci_with_a_tpu(),
        ..missing
    };
    match TpuClusterResolver::with_options("", chip) {
        Err(Error::Plugin { message, .. }) => assert!(message.contains("does not exist")),
        other => panic!("expected a plugin error, got {other:?}"),
    }
}

#[test]
fn every_step_with_libtpu_but_no_tpu_fails_fast() {
    // The PCI bus says "TPU v4", so new() succeeds and libtpu itself is asked.
    let options = ResolverOptions {
        plugin: Some(libtpu()),
        pci_devices: pci_with_a_tpu(),
    };
    let resolver = timed("new", || TpuClusterResolver::with_options("", options)).unwrap();
    assert_eq!(resolver.chips().len(), 1);
    assert_eq!(resolver.chips()[0].model, "TPU v4");
    assert!(matches!(
        resolver.initialize(),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        TpuStrategy::new(&resolver),
        Err(Error::InvalidArgument { .. })
    ));
    timed_within(LOAD_LIMIT, "connect", || resolver.connect()).unwrap();
    timed("connect again", || resolver.connect()).unwrap();
    assert!(resolver.is_connected());
    for attempt in ["initialize", "initialize again"] {
        let tried = expect_not_found(timed(attempt, || resolver.initialize()), attempt);
        let last = tried.last().unwrap();
        assert!(last.contains("libtpu found no usable TPU"), "{last}");
    }
    assert!(!resolver.is_initialized());
    assert!(TpuStrategy::new(&resolver).is_err());
    assert!(Path::new(resolver.plugin()).is_file());
}

#[test]
fn tpu_names_and_addresses_are_not_supported_yet() {
    for name in ["my-tpu", "grpc://10.240.1.2:8470"] {
        match timed(name, || TpuClusterResolver::new(name)) {
            Err(Error::Unsupported { message, .. }) => {
                assert!(message.contains("not supported yet"), "{message}")
            }
            other => panic!("{name}: expected Unsupported, got {other:?}"),
        }
    }
}
