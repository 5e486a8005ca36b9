//! Debian packages some suites need (xfsprogs, the real cluster's container runtime): installed
//! with `apt-get` by `testenv install` when missing, never silently by a test.

use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// `apt-get update` then `apt-get install` of `packages` (no recommends). Blocking; needs root.
pub fn install(packages: &[&str]) -> Result<()> {
    let mut install = vec!["install", "-y", "-qq", "--no-install-recommends"];
    install.extend_from_slice(packages);
    for args in [vec!["update", "-qq"], install] {
        let out = Command::new("apt-get")
            .args(&args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running apt-get {args:?}"))?;
        if !out.status.success() {
            bail!(
                "apt-get {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}
