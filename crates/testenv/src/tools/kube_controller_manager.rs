//! kube-controller-manager, built with kube-apiserver from the same Go module and release in one
//! `go build` (see [`super::kubernetes`]); the suites that run a controller (the CSI end-to-end
//! tests run its persistent-volume binder) ask for it here.

use std::path::PathBuf;

use anyhow::Result;

/// The installed kube-controller-manager (built with the core tools when missing or stale).
/// Blocking; safe to call from several processes at once.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = crate::tools::install::ensure_installed()?;
    Ok(paths.kube_controller_manager())
}
