//! Finding TPU chips without touching libtpu: a Cloud TPU VM exposes each chip as a PCI
//! device of Google's vendor id with a TPU device id (the same check JAX makes before it
//! loads libtpu). Reading a few sysfs files takes microseconds, where asking libtpu on a
//! machine without a TPU can block for minutes on cloud-metadata queries.

use std::path::{Path, PathBuf};

/// Where Linux lists PCI devices.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

const GOOGLE_VENDOR: &str = "0x1ae0";

/// TPU PCI device ids and the generation each is.
const TPU_DEVICE_IDS: &[(&str, &str)] = &[
    ("0x0027", "TPU v2/v3"),
    ("0x0056", "TPU (plc)"),
    ("0x005e", "TPU v4"),
    ("0x0062", "TPU v5p"),
    ("0x0063", "TPU v5e"),
    ("0x006f", "TPU v6e"),
];

/// One TPU chip on the PCI bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpuChip {
    /// The PCI address, e.g. `0000:00:04.0`.
    pub address: String,
    /// The PCI device id, e.g. `0x005e`.
    pub device_id: String,
    /// The generation, e.g. `TPU v4` (`TPU (unknown model)` for a newer id).
    pub model: String,
}

/// What a scan of the PCI bus found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PciScan {
    /// The bus was read: these TPU chips (possibly none) among `devices` PCI devices.
    Found { chips: Vec<TpuChip>, devices: usize },
    /// The device list could not be read (not Linux, no sysfs): nothing is known.
    Unreadable { dir: PathBuf, error: String },
}

impl PciScan {
    pub fn chips(&self) -> &[TpuChip] {
        match self {
            PciScan::Found { chips, .. } => chips,
            PciScan::Unreadable { .. } => &[],
        }
    }

    /// One line saying what the scan found, for error messages.
    pub fn describe(&self, dir: &Path) -> String {
        match self {
            PciScan::Found { chips, devices } if chips.is_empty() => format!(
                "no TPU chip on the PCI bus (none of the {devices} devices in {} is a Google TPU)",
                dir.display()
            ),
            PciScan::Found { chips, .. } => format!(
                "{} TPU chip(s) on the PCI bus ({})",
                chips.len(),
                chips
                    .iter()
                    .map(|c| format!("{} at {}", c.model, c.address))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            PciScan::Unreadable { dir, error } => {
                format!("the PCI bus could not be read ({}: {error})", dir.display())
            }
        }
    }
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_ascii_lowercase())
}

/// Scans `dir` (a sysfs PCI device directory, normally [`PCI_DEVICES`]) for TPU chips.
pub fn scan(dir: &Path) -> PciScan {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            return PciScan::Unreadable {
                dir: dir.to_path_buf(),
                error: e.to_string(),
            }
        }
    };
    let mut chips = Vec::new();
    let mut devices = 0;
    for entry in entries.flatten() {
        devices += 1;
        let path = entry.path();
        if read_trimmed(&path.join("vendor")).as_deref() != Some(GOOGLE_VENDOR) {
            continue;
        }
        let Some(id) = read_trimmed(&path.join("device")) else {
            continue;
        };
        let model = match TPU_DEVICE_IDS.iter().find(|(d, _)| *d == id) {
            Some((_, m)) => m.to_string(),
            // A Google device of an id newer than this list counts when its class is
            // "processing accelerator" (0x12....); Google's network card (gVNIC) is not.
            None if read_trimmed(&path.join("class")).is_some_and(|c| c.starts_with("0x12")) => {
                "TPU (unknown model)".to_string()
            }
            None => continue,
        };
        chips.push(TpuChip {
            address: entry.file_name().to_string_lossy().into_owned(),
            device_id: id,
            model,
        });
    }
    chips.sort_by(|a, b| a.address.cmp(&b.address));
    PciScan::Found { chips, devices }
}

/// Whether this machine's PCI bus shows a TPU chip.
pub(crate) fn tpu_chips_present() -> bool {
    !scan(Path::new(PCI_DEVICES)).chips().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(root: &Path, addr: &str, vendor: &str, device: &str, class: &str) {
        let d = root.join(addr);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(d.join("device"), format!("{device}\n")).unwrap();
        std::fs::write(d.join("class"), format!("{class}\n")).unwrap();
    }

    #[test]
    fn tpu_chips_are_told_from_other_google_devices() {
        let root = std::env::temp_dir().join(format!("strata-pci-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        device(&root, "0000:00:05.0", "0x1ae0", "0x005e", "0x120000");
        device(&root, "0000:00:04.0", "0x1ae0", "0x0042", "0x020000"); // gVNIC
        device(&root, "0000:00:06.0", "0x10de", "0x2330", "0x030200"); // a GPU
        device(&root, "0000:00:07.0", "0x1ae0", "0x0099", "0x120000"); // a future TPU
        let scan = scan(&root);
        let chips = scan.chips();
        assert_eq!(chips.len(), 2, "{scan:?}");
        assert_eq!(chips[0].model, "TPU v4");
        assert_eq!(chips[1].model, "TPU (unknown model)");
        assert!(scan.describe(&root).contains("2 TPU chip(s)"));
        let _ = std::fs::remove_dir_all(&root);
        assert!(matches!(super::scan(&root), PciScan::Unreadable { .. }));
    }
}
