//! kube-apiserver and etcd, built from the pinned Go module in `crates/testenv/go`.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::install::{ensure_go_builds, required_version, GoBuild, Paths};

/// The Go module pinning kube-apiserver and etcd.
pub fn go_module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go")
}

/// Builds kube-apiserver and etcd unless the stamp says they are current.
pub(crate) fn ensure(paths: &Paths) -> Result<()> {
    let module = go_module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))?;
    let kubernetes_version = required_version(&go_mod, "k8s.io/kubernetes")
        .context("go.mod does not require k8s.io/kubernetes")?;
    // Without this, `/version` reports `v0.0.0-master+$Format:%H$`.
    let apiserver_ldflags =
        format!("-s -w -X k8s.io/component-base/version.gitVersion={kubernetes_version}");
    ensure_go_builds(
        paths,
        &module,
        &paths.bin_dir().join(".stamp"),
        &[
            GoBuild {
                out: &paths.kube_apiserver,
                package: "k8s.io/kubernetes/cmd/kube-apiserver",
                ldflags: &apiserver_ldflags,
                cgo: true,
            },
            GoBuild {
                out: &paths.etcd,
                package: "go.etcd.io/etcd/server/v3",
                ldflags: "-s -w",
                cgo: true,
            },
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_go_mod_pins_kubernetes() {
        let go_mod = fs::read_to_string(go_module_dir().join("go.mod")).unwrap();
        let version = required_version(&go_mod, "k8s.io/kubernetes");
        assert!(version.is_some_and(|v| v.starts_with("v1.")), "{version:?}");
    }
}
