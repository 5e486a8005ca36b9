//! The real cluster's node runtime from Debian: containerd 1.6 with `ctr`, runc (crun cannot run
//! on this machine's hybrid cgroups), the CNI plugins (bridge, host-local, portmap), iptables
//! and conntrack for kube-proxy. `testenv install` adds them when one is missing.

use std::path::Path;

use anyhow::{bail, Result};

use super::progress;

/// What must be on the machine, as (package, a file it installs).
const PACKAGES: &[(&str, &str)] = &[
    ("containerd", "/usr/bin/containerd"),
    ("runc", "/usr/sbin/runc"),
    ("containernetworking-plugins", "/usr/lib/cni/bridge"),
    ("iptables", "/usr/sbin/iptables"),
    ("conntrack", "/usr/sbin/conntrack"),
];

fn missing() -> Vec<&'static str> {
    PACKAGES
        .iter()
        .filter(|(_, file)| !Path::new(file).exists())
        .map(|(package, _)| *package)
        .collect()
}

/// Fails naming the packages and the command to run when one is missing.
pub fn require() -> Result<()> {
    let missing = missing();
    if !missing.is_empty() {
        bail!(
            "the real cluster needs the Debian packages {}: run `make install` (`testenv install`)",
            missing.join(", ")
        );
    }
    Ok(())
}

/// Installs the missing packages with apt-get. Blocking; needs root.
pub fn ensure() -> Result<()> {
    let missing = missing();
    if missing.is_empty() {
        return Ok(());
    }
    progress(&format!(
        "installing {} with apt-get (once, for the real cluster)",
        missing.join(" ")
    ));
    let started = tokio::time::Instant::now();
    super::apt::install(&missing)?;
    require()?;
    progress(&format!(
        "node runtime installed in {} s",
        started.elapsed().as_secs()
    ));
    Ok(())
}
