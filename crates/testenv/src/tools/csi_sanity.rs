//! csi-sanity, the CSI conformance suite of `github.com/kubernetes-csi/csi-test/v5` at a pinned
//! version: built once with `go install` into the cache (its own lock and stamp), and run
//! against a driver's socket by the drivers' tests, always inside a deadline (it hangs rather
//! than fails when the socket dies).

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::{go, lock, progress, stamp_matches};
use crate::install::{run_logged, Paths};

/// The Go module.
pub const MODULE: &str = "github.com/kubernetes-csi/csi-test/v5";
/// The pinned version.
pub const VERSION: &str = "v5.6.0";

/// The installed binary.
pub fn binary(paths: &Paths) -> PathBuf {
    paths.cache.join("bin/csi-sanity")
}

/// Installs csi-sanity unless the stamp records this version; returns the binary. Blocking.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let out = binary(&paths);
    let bin_dir = paths.cache.join("bin");
    let stamp = bin_dir.join(".stamp-csi-sanity");
    let value = format!("{MODULE}@{VERSION}\n");
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let _lock = lock(&paths, "csi-sanity")?;
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    fs::create_dir_all(&bin_dir)?;
    progress(&format!("building csi-sanity {VERSION} (first time only)"));
    // A private GOBIN, then a rename: a running csi-sanity is never overwritten in place.
    let gobin = bin_dir.join(format!(".csi-sanity-{}", std::process::id()));
    fs::create_dir_all(&gobin)?;
    let mut cmd = Command::new(go());
    cmd.env("GOBIN", &gobin)
        .env("CGO_ENABLED", "0")
        .args(["install", "-trimpath", "-ldflags", "-s -w"])
        .arg(format!("{MODULE}/cmd/csi-sanity@{VERSION}"))
        .stdin(Stdio::null());
    let result = run_logged(
        cmd,
        &paths.install_log,
        &format!("go install {MODULE}@{VERSION}"),
    );
    if result.is_ok() {
        fs::rename(gobin.join("csi-sanity"), &out)
            .with_context(|| format!("moving csi-sanity to {}", out.display()))?;
        fs::write(&stamp, value)?;
    }
    let _ = fs::remove_dir_all(&gobin);
    result.map(|()| out)
}
