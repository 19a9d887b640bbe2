//! `STRATA_STRATEGY` and `STRATA_DEVICE` choose the strategy of any program using
//! `Strategy::auto` / `Strategy::from_env`; bad names are typed errors; `auto` says why it
//! chose what it chose, picks XLA on the CPU when its plugin is installed (and no TPU or
//! GPU is present) and the native backend when nothing is installed.
//!
//! One test in its own binary: it sets process-wide environment variables and the current
//! directory. Needs the CPU plugin (`scripts/install-xla-plugin`); fails without it.

use std::time::{Duration, Instant};
use strata_runtime::backend::pjrt::{find_plugin, PluginKind};
use strata_runtime::backend::{Device, DEVICE_ENV};
use strata_runtime::strategy::{Strategy, StrategyKind, StrategySpec, STRATEGY_ENV};
use strata_runtime::Error;

fn set(key: &str, value: Option<&str>) {
    match value {
        Some(v) => std::env::set_var(key, v),
        None => std::env::remove_var(key),
    }
}

#[test]
fn the_environment_forces_strategies_and_auto_explains_its_choice() {
    find_plugin(PluginKind::Cpu, None)
        .unwrap_or_else(|e| panic!("the XLA CPU plugin is needed for this test: {e}"));
    set(DEVICE_ENV, None);

    // Nothing set: nothing forced.
    set(STRATEGY_ENV, None);
    assert!(Strategy::from_env().unwrap().is_none());
    set(STRATEGY_ENV, Some("  "));
    assert!(Strategy::from_env().unwrap().is_none());

    // Forced strategies.
    for (spec, kind, replicas) in [
        ("mirrored:native:2", StrategyKind::Mirrored, 2),
        ("mirrored:xla-cpu:4", StrategyKind::Mirrored, 4),
        ("one:native", StrategyKind::OneDevice, 1),
        ("one:xla-cpu", StrategyKind::OneDevice, 1),
    ] {
        set(STRATEGY_ENV, Some(spec));
        let s = Strategy::auto().unwrap();
        assert_eq!(s.kind(), kind, "{spec}");
        assert_eq!(s.num_replicas_in_sync(), replicas, "{spec}");
        assert_eq!(s.spec().to_string(), spec);
        assert!(
            s.reason().unwrap().contains(spec),
            "{spec}: {:?}",
            s.reason()
        );
        let again = Strategy::from_env().unwrap().unwrap();
        assert_eq!(again.spec(), s.spec());
    }
    set(STRATEGY_ENV, Some("mirrored:gpu"));
    assert!(matches!(Strategy::auto(), Err(Error::StrategyParse { .. })));
    // Asking for the TPU on a machine without one is the resolver's typed error, fast.
    set(STRATEGY_ENV, Some("tpu"));
    let start = Instant::now();
    match Strategy::auto() {
        Err(Error::TpuNotFound { tried }) => assert!(!tried.is_empty()),
        Ok(s) => assert_eq!(s.kind(), StrategyKind::Tpu),
        Err(e) => panic!("expected TpuNotFound, got {e:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5));

    // Without a count, mirrored over `xla-cpu` is over its one device.
    set(STRATEGY_ENV, Some("mirrored:xla-cpu"));
    let s = Strategy::auto().unwrap();
    assert_eq!(s.num_replicas_in_sync(), 1);
    assert_eq!(s.spec().to_string(), "mirrored:xla-cpu:1");

    // STRATA_DEVICE limits auto to one device kind; STRATA_STRATEGY wins over it.
    set(STRATEGY_ENV, None);
    set(DEVICE_ENV, Some("xla-cpu:2"));
    let s = Strategy::auto().unwrap();
    assert_eq!(s.spec().to_string(), "mirrored:xla-cpu:2");
    set(DEVICE_ENV, Some("native"));
    assert_eq!(Strategy::auto().unwrap().device(), Device::Native);
    set(STRATEGY_ENV, Some("one:xla-cpu"));
    assert_eq!(
        Strategy::auto().unwrap().spec(),
        StrategySpec::One(Device::XlaCpu { devices: None })
    );
    set(STRATEGY_ENV, None);
    set(DEVICE_ENV, Some("quantum"));
    assert!(matches!(Strategy::auto(), Err(Error::DeviceParse { .. })));
    set(DEVICE_ENV, None);

    // The probe: no TPU, no GPU here: the native backend, even with the CPU plugin
    // installed (it is faster there), saying how to ask for XLA.
    let no_accelerator = !std::path::Path::new("/dev/nvidia0").exists()
        && strata_runtime::strategy::pci::scan(std::path::Path::new(
            strata_runtime::strategy::pci::PCI_DEVICES,
        ))
        .chips()
        .is_empty();
    let start = Instant::now();
    let s = Strategy::auto().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10));
    let why = s.reason().unwrap().to_string();
    if no_accelerator {
        assert_eq!(s.device(), Device::Native, "{s}: {why}");
        assert!(
            why.contains("no TPU") && why.contains("STRATA_DEVICE=xla-cpu"),
            "{why}"
        );
    }

    // Nothing installed (no project directory, so no .strata/plugins): the native
    // backend too.
    let elsewhere = std::env::temp_dir().join(format!("strata-no-project-{}", std::process::id()));
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::env::set_current_dir(&elsewhere).unwrap();
    if no_accelerator {
        let s = Strategy::auto().unwrap();
        assert_eq!(s.device(), Device::Native, "{s}");
    }
}
