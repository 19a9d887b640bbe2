//! A checkpoint path that names a directory, refused up front: the operating system's own
//! answer ("Not a directory", "Is a directory") says neither what was called nor what to
//! give instead.

use crate::{Error, Result};
use std::path::{is_separator, Path};

/// An error for `what` (the call) when `path` ends in a separator, names an existing
/// directory, or has no file name at all (`..`, a root).
pub(super) fn refuse(what: &str, path: &Path) -> Result<()> {
    let trailing = path
        .as_os_str()
        .as_encoded_bytes()
        .last()
        .is_some_and(|&b| b.is_ascii() && is_separator(b as char));
    if trailing || path.file_name().is_none() || path.is_dir() {
        return Err(Error::invalid(
            what,
            format!(
                "`{}` names a directory; expected the path of a checkpoint file, such as `{}`",
                path.display(),
                path.join("model.ckpt").display()
            ),
        ));
    }
    Ok(())
}
