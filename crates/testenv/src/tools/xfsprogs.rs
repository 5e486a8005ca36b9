//! xfsprogs (`mkfs.xfs`, `xfs_growfs`, `xfs_db`), a system package the CSI drivers' xfs tests
//! format and grow loop devices with. `testenv install` makes sure it is there on a fresh
//! machine (`apt-get install -y xfsprogs` when `mkfs.xfs` is missing, with a progress line);
//! the tests only check, and fail naming the command to run, never install it silently.

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::progress;

/// The Debian package.
pub const PACKAGE: &str = "xfsprogs";

/// Where `mkfs.xfs` is: `PATH`, then the sbin directories `PATH` may lack.
pub fn mkfs_xfs() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join("mkfs.xfs"))
        .find(|p| p.is_file())
}

/// `mkfs.xfs`, or an error telling to run the installer.
pub fn require() -> Result<PathBuf> {
    mkfs_xfs().with_context(|| {
        format!(
            "mkfs.xfs is missing: run `make install` (`testenv install`), which installs {PACKAGE}"
        )
    })
}

/// Installs xfsprogs with apt-get when `mkfs.xfs` is missing. Blocking; needs root.
pub fn ensure() -> Result<PathBuf> {
    if let Some(found) = mkfs_xfs() {
        return Ok(found);
    }
    progress(&format!(
        "mkfs.xfs is missing: installing {PACKAGE} with apt-get (once)"
    ));
    let started = tokio::time::Instant::now();
    super::apt::install(&[PACKAGE])?;
    let found =
        mkfs_xfs().with_context(|| format!("{PACKAGE} installed but mkfs.xfs is not found"))?;
    progress(&format!(
        "{PACKAGE} installed in {} s: {}",
        started.elapsed().as_secs(),
        found.display()
    ));
    Ok(found)
}
