//! kube-controller-manager, built from the pinned Go module in `crates/testenv/go-kcm` (the same
//! k8s.io/kubernetes release as kube-apiserver, in a module of its own so adding it changes
//! nothing about the apiserver's build). Only suites that need a controller ask for it (the CSI
//! end-to-end tests run its persistent-volume binder); built once under its own lock, cached in
//! `$STRATUS_CACHE/bin` with a stamp.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::{go_build, lock, progress, stamp_matches};
use crate::install::{required_version, Paths};

/// The Go module pinning kube-controller-manager.
pub fn go_module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-kcm")
}

/// Builds kube-controller-manager unless the stamp records this module's go.mod and go.sum;
/// returns the binary. Blocking; safe to call from several processes at once.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let module = go_module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))
        .with_context(|| format!("reading {}", module.join("go.mod").display()))?;
    let go_sum = fs::read_to_string(module.join("go.sum")).unwrap_or_default();
    let version = required_version(&go_mod, "k8s.io/kubernetes")
        .context("go-kcm/go.mod does not require k8s.io/kubernetes")?;
    let out = paths.cache.join("bin/kube-controller-manager");
    let stamp = paths.cache.join("bin/.stamp-kube-controller-manager");
    let value = format!(
        "k8s.io/kubernetes@{version} {:016x}\n",
        fingerprint(&[&go_mod, &go_sum])
    );
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let _lock = lock(&paths, "kube-controller-manager")?;
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let took = go_build(
        &paths,
        &module,
        "k8s.io/kubernetes/cmd/kube-controller-manager",
        &format!("-s -w -X k8s.io/component-base/version.gitVersion={version}"),
        &out,
        &format!("kube-controller-manager {version}"),
    )?;
    progress(&format!(
        "kube-controller-manager {version} built in {} s",
        took.as_secs()
    ));
    fs::write(&stamp, value)?;
    Ok(out)
}

/// FNV-1a over the texts (a change to either file rebuilds).
fn fingerprint(texts: &[&str]) -> u64 {
    texts
        .iter()
        .flat_map(|t| t.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_the_apiservers_kubernetes_release() {
        let kcm = fs::read_to_string(go_module_dir().join("go.mod")).unwrap();
        let apiserver =
            fs::read_to_string(super::super::kubernetes::go_module_dir().join("go.mod")).unwrap();
        assert_eq!(
            required_version(&kcm, "k8s.io/kubernetes"),
            required_version(&apiserver, "k8s.io/kubernetes"),
            "kube-controller-manager and kube-apiserver come from one release"
        );
    }
}
