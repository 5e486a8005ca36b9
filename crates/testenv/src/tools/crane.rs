//! crane, the container image tool of `github.com/google/go-containerregistry` at a pinned
//! version: built once with `go install` into the cache (its own lock and stamp). The image
//! tests use it as the independent judge of what `stratus-images` writes: its registry serves,
//! `crane push` reads the OCI layout, `crane validate` checks every digest, `crane export`
//! flattens the image to the tar that is unpacked and run.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::{go, lock, progress, stamp_matches};
use crate::tools::install::{run_logged, Paths};

/// The Go module.
pub const MODULE: &str = "github.com/google/go-containerregistry";
/// The pinned version.
pub const VERSION: &str = "v0.22.1";

/// The installed binary.
pub fn binary(paths: &Paths) -> PathBuf {
    paths.cache.join("bin/crane")
}

/// Installs crane unless the stamp records this version; returns the binary. Blocking.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let out = binary(&paths);
    let bin_dir = paths.cache.join("bin");
    let stamp = bin_dir.join(".stamp-crane");
    let value = format!("{MODULE}@{VERSION}\n");
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let _lock = lock(&paths, "crane")?;
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    fs::create_dir_all(&bin_dir)?;
    progress(&format!("building crane {VERSION} (first time only)"));
    // A private GOBIN, then a rename: a running crane is never overwritten in place.
    let gobin = bin_dir.join(format!(".crane-{}", std::process::id()));
    fs::create_dir_all(&gobin)?;
    let mut cmd = Command::new(go());
    cmd.env("GOBIN", &gobin)
        .env("CGO_ENABLED", "0")
        .args(["install", "-trimpath", "-ldflags", "-s -w"])
        .arg(format!("{MODULE}/cmd/crane@{VERSION}"))
        .stdin(Stdio::null());
    let result = run_logged(
        cmd,
        &paths.install_log,
        &format!("go install {MODULE}/cmd/crane@{VERSION}"),
    );
    if result.is_ok() {
        fs::rename(gobin.join("crane"), &out)
            .with_context(|| format!("moving crane to {}", out.display()))?;
        fs::write(&stamp, value)?;
    }
    let _ = fs::remove_dir_all(&gobin);
    result.map(|()| out)
}
