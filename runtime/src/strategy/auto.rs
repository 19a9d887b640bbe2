//! `Strategy::auto`: the best strategy this machine offers, probed in order of speed, each
//! probe bounded to fail fast (the TPU probe reads the PCI bus before touching libtpu; the
//! GPU probe looks for an NVIDIA device before loading the CUDA plugin).

use super::resolver::local_tpu;
use super::Strategy;
use crate::backend::pjrt::{find_plugin, PluginKind};
use crate::backend::{Device, DEVICE_ENV};
use crate::{Error, Result};
use std::path::Path;

/// TPU, else GPUs, else the native backend. XLA on the CPU is never the probe's pick: on
/// the tutorial's workload the native backend's steady epoch is shorter than XLA's at
/// both batch sizes (the README's performance tables say by how much), and it starts
/// without a second-long compile; `STRATA_DEVICE=xla-cpu` or
/// `STRATA_STRATEGY=one:xla-cpu` asks for XLA.
pub(super) fn probe() -> Result<Strategy> {
    let mut skipped = Vec::new();
    match local_tpu() {
        Ok(s) => return Ok(s.with_reason("a TPU is present")),
        Err(e) => skipped.push(format!("no TPU ({})", short(&e))),
    }
    match gpu() {
        Ok(s) => return Ok(s.with_reason(format!("{}; GPUs present", skipped.join("; ")))),
        Err(why) => skipped.push(why),
    }
    skipped.push(format!(
        "on the CPU the native backend (faster than XLA at small batches; {DEVICE_ENV}=xla-cpu for XLA)"
    ));
    Ok(default_for(Device::Native)?.with_reason(skipped.join("; ")))
}

/// Every GPU, when an NVIDIA device and the CUDA plugin are both present.
fn gpu() -> std::result::Result<Strategy, String> {
    // Loading the CUDA plugin costs seconds and a process-wide XLA runtime; without an
    // NVIDIA device it could only fail.
    if !Path::new("/dev/nvidia0").exists() && !Path::new("/dev/nvidiactl").exists() {
        return Err("no NVIDIA GPU (/dev/nvidia0 absent)".into());
    }
    if find_plugin(PluginKind::Cuda, None).is_err() {
        return Err(format!(
            "no CUDA plugin (`{}`)",
            PluginKind::Cuda.install_command()
        ));
    }
    Strategy::mirrored(Device::Cuda, None).map_err(|e| format!("no usable GPU ({})", short(&e)))
}

/// The most telling part of an error, for a one-line reason.
fn short(e: &Error) -> String {
    match e {
        // The bus says whether there is a TPU (first); when it showed one, libtpu's own
        // answer (last) says why it is unusable. The details stay in the error itself.
        Error::TpuNotFound { tried } => {
            let t = if tried.len() > 2 {
                tried.last()
            } else {
                tried.first()
            };
            t.map(|t| t.split(" (").next().unwrap_or(t).to_string())
                .unwrap_or_default()
        }
        e => e.to_string(),
    }
}

/// The best strategy on one kind of device. Accelerators: every device, mirrored. The
/// CPU: one device, which was the fastest on the tutorial's workload at batch 32 and 1024
/// on both CPU backends (the README's "Distribution strategies" gives the measurements
/// and the example that repeats them). One native device already spreads its large
/// kernels over the cores, virtual XLA CPU devices share the same cores, and every
/// replica repeats the whole optimizer update, so on a CPU splitting the batch does not
/// pay; mirroring stays one `STRATA_STRATEGY=mirrored:native:N` away. (One device also
/// never refuses a batch that does not split over replicas.)
pub(super) fn default_for(device: Device) -> Result<Strategy> {
    match device {
        Device::Tpu => local_tpu(),
        Device::Cuda => Strategy::mirrored(Device::Cuda, None),
        // `xla-cpu:N` asks for N devices: mirror over them.
        Device::XlaCpu { devices: Some(n) } if n > 1 => Strategy::mirrored(device, None),
        Device::XlaCpu { .. } | Device::Native => Strategy::one_device(device),
    }
}
