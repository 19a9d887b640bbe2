//! Finding the PJRT plugin for a device.
//!
//! Order: an explicit path given through the API, then `STRATA_PJRT_PLUGIN`, then each
//! known pip package for the device (in preference order) in the project-local plugin
//! directories (`$STRATA_PLUGIN_DIR/<package>`, `<project>/.strata/plugins/<package>`, where
//! the project is the nearest ancestor of the current directory holding `.strata`), then in
//! Python's site-packages directories.

use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What kind of device a plugin drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PluginKind {
    Cpu,
    Cuda,
    Tpu,
}

/// A pip package that ships a PJRT plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownPlugin {
    /// The package name on PyPI.
    pub package: &'static str,
    /// The version Strata is tested with, for the install command.
    pub version: &'static str,
    /// The plugin file, relative to the directory the package is installed into.
    pub file: &'static str,
    pub kind: PluginKind,
}

/// Every plugin package Strata looks for, in preference order within each kind.
pub const KNOWN_PLUGINS: &[KnownPlugin] = &[
    KnownPlugin {
        package: "lammps-jax-pjrt-cpu",
        version: "0.11.2",
        file: "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
        kind: PluginKind::Cpu,
    },
    KnownPlugin {
        package: "xla-cpu-pjrt",
        version: "0.0.1",
        file: "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
        kind: PluginKind::Cpu,
    },
    KnownPlugin {
        package: "jax-cuda12-pjrt",
        version: "0.12.0.1",
        file: "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
        kind: PluginKind::Cuda,
    },
    KnownPlugin {
        package: "jax-cuda13-pjrt",
        version: "",
        file: "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
        kind: PluginKind::Cuda,
    },
    KnownPlugin {
        package: "libtpu",
        version: "0.0.51",
        file: "libtpu/libtpu.so",
        kind: PluginKind::Tpu,
    },
];

impl PluginKind {
    /// The packages for this kind, preferred first.
    pub fn packages(self) -> impl Iterator<Item = &'static KnownPlugin> {
        KNOWN_PLUGINS.iter().filter(move |p| p.kind == self)
    }

    /// The device name users write for this kind.
    pub fn device_name(self) -> &'static str {
        match self {
            PluginKind::Cpu => "xla-cpu",
            PluginKind::Cuda => "cuda",
            PluginKind::Tpu => "tpu",
        }
    }

    /// The pip command that installs the preferred package for this kind.
    pub fn install_command(self) -> String {
        self.packages()
            .next()
            .map_or_else(String::new, |p| format!("pip install {}", p.spec()))
    }

    /// The same, into a Strata checkout's `.strata/plugins`.
    pub fn checkout_install_command(self) -> String {
        self.packages().next().map_or_else(String::new, |p| {
            format!("scripts/install-xla-plugin {}", p.spec())
        })
    }
}

impl KnownPlugin {
    /// `package==version`, or the bare package when no version is pinned.
    pub fn spec(&self) -> String {
        if self.version.is_empty() {
            self.package.to_string()
        } else {
            format!("{}=={}", self.package, self.version)
        }
    }
}

/// Finds the plugin file for `kind`, honouring `explicit` and `STRATA_PJRT_PLUGIN` first,
/// then searching the project-local plugin directories and Python's site-packages.
pub fn find_plugin(kind: PluginKind, explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("STRATA_PJRT_PLUGIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    // The project's and $STRATA_PLUGIN_DIR's plugins are searched first anyway; only
    // without one there is Python asked for its site-packages (starting python3, through
    // a pyenv shim perhaps, costs a tenth of a second: as much as training the tutorial).
    let dirs = plugin_dirs();
    find_plugin_in(kind, &dirs, &[]).or_else(|_| find_plugin_in(kind, &dirs, site_packages()))
}

/// Searches `plugin_dirs` (each holding one directory per package, as
/// `.strata/plugins` does) and then `site_dirs` (site-packages directories) for the
/// plugin of the preferred package of `kind` first.
pub fn find_plugin_in(
    kind: PluginKind,
    plugin_dirs: &[PathBuf],
    site_dirs: &[PathBuf],
) -> Result<PathBuf> {
    let mut searched = Vec::new();
    for pkg in kind.packages() {
        for dir in plugin_dirs {
            let candidate = dir.join(pkg.package).join(pkg.file);
            if candidate.is_file() {
                return Ok(candidate);
            }
            searched.push(dir.join(pkg.package));
        }
    }
    for site in site_dirs {
        for pkg in kind.packages() {
            let candidate = site.join(pkg.file);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        searched.push(site.clone());
    }
    Err(Error::PluginNotFound {
        device: kind.device_name().to_string(),
        package: kind
            .packages()
            .map(|p| p.package)
            .collect::<Vec<_>>()
            .join(" or "),
        searched: if searched.is_empty() {
            "nowhere: no project .strata directory and no Python site-packages".into()
        } else {
            searched
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
        install: kind.install_command(),
        checkout_install: kind.checkout_install_command(),
    })
}

/// `$STRATA_PLUGIN_DIR` and `<project>/.strata/plugins`.
pub fn plugin_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("STRATA_PLUGIN_DIR").filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(d));
    }
    if let Some(root) = project_root() {
        dirs.push(root.join(".strata").join("plugins"));
    }
    dirs
}

/// The nearest ancestor of the current directory that holds a `.strata` directory.
pub fn project_root() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .find(|d| d.join(".strata").is_dir())
        .map(Path::to_path_buf)
}

/// Python's site-packages directories: what `python3` reports (asked once per process),
/// then the usual places, existing ones only, without duplicates.
pub fn site_packages() -> &'static [PathBuf] {
    static DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    DIRS.get_or_init(|| {
        let mut dirs = python_site_packages();
        dirs.extend(usual_site_packages());
        let mut seen = std::collections::HashSet::new();
        dirs.retain(|d| d.is_dir() && seen.insert(d.clone()));
        dirs
    })
}

fn python_site_packages() -> Vec<PathBuf> {
    const SCRIPT: &str = "import site, sys\n\
        dirs = list(getattr(site, 'getsitepackages', lambda: [])())\n\
        dirs.append(site.getusersitepackages())\n\
        print('\\n'.join(dirs))";
    let Ok(out) = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| PathBuf::from(l.trim()))
        .collect()
}

fn usual_site_packages() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        roots.push(PathBuf::from(v).join("lib"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(h).join(".local/lib"));
    }
    roots.extend(["/usr/local/lib", "/usr/lib", "/opt/conda/lib"].map(PathBuf::from));
    let mut dirs = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pythons.sort();
        for py in pythons.into_iter().rev() {
            dirs.push(py.join("site-packages"));
            dirs.push(py.join("dist-packages"));
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_package_and_an_install_command() {
        for kind in [PluginKind::Cpu, PluginKind::Cuda, PluginKind::Tpu] {
            assert!(kind.packages().next().is_some());
            assert!(kind.install_command().starts_with("pip install"));
        }
        assert!(PluginKind::Cpu
            .install_command()
            .contains("lammps-jax-pjrt-cpu==0.11.2"));
    }

    #[test]
    fn nothing_found_names_the_package_and_the_install_command() {
        let empty = std::env::temp_dir().join("strata-no-plugins-here");
        let dirs = [empty];
        match find_plugin_in(PluginKind::Cpu, &dirs, &dirs) {
            Err(Error::PluginNotFound {
                package, install, ..
            }) => {
                assert!(package.contains("lammps-jax-pjrt-cpu"));
                assert!(install.contains("pip install"));
            }
            other => panic!("expected PluginNotFound, got {other:?}"),
        }
    }

    #[test]
    fn an_explicit_path_wins() {
        let p = find_plugin(PluginKind::Tpu, Some(Path::new("/x/y.so"))).unwrap();
        assert_eq!(p, Path::new("/x/y.so"));
    }
}
