//! etcd and the Kubernetes components of one release (kube-apiserver, kube-controller-manager,
//! and for the real-cluster suites kube-scheduler, kubelet and kube-proxy), built from the pinned
//! Go module in `crates/testenv/go` in one `go build`, so they share every compiled package of the
//! release.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::tools::install::{ensure_go_build_together, required_version, Paths};

/// The Go module pinning etcd and the Kubernetes release.
pub fn go_module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go")
}

/// Builds etcd and the Kubernetes binaries unless the stamp says they are current.
pub(crate) fn ensure(paths: &Paths) -> Result<()> {
    let module = go_module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))?;
    let kubernetes_version = required_version(&go_mod, "k8s.io/kubernetes")
        .context("go.mod does not require k8s.io/kubernetes")?;
    // Without this, `/version` reports `v0.0.0-master+$Format:%H$`.
    let ldflags = format!("-s -w -X k8s.io/component-base/version.gitVersion={kubernetes_version}");
    let kcm = paths.kube_controller_manager();
    ensure_go_build_together(
        paths,
        &module,
        &paths.bin_dir().join(".stamp"),
        (&ldflags, true),
        &[
            (
                &paths.kube_apiserver,
                "k8s.io/kubernetes/cmd/kube-apiserver",
            ),
            (&kcm, "k8s.io/kubernetes/cmd/kube-controller-manager"),
            (
                &paths.kube_scheduler(),
                "k8s.io/kubernetes/cmd/kube-scheduler",
            ),
            (&paths.kubelet(), "k8s.io/kubernetes/cmd/kubelet"),
            (&paths.kube_proxy(), "k8s.io/kubernetes/cmd/kube-proxy"),
            (&paths.etcd, "go.etcd.io/etcd/server/v3"),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_names_binaries_after_the_package_or_before_its_major_version() {
        use crate::tools::install::go_binary_name;
        assert_eq!(
            go_binary_name("k8s.io/kubernetes/cmd/kube-apiserver"),
            "kube-apiserver"
        );
        assert_eq!(go_binary_name("go.etcd.io/etcd/server/v3"), "server");
        assert_eq!(go_binary_name("example.com/v2tool"), "v2tool");
    }

    #[test]
    fn real_go_mod_pins_kubernetes() {
        let go_mod = fs::read_to_string(go_module_dir().join("go.mod")).unwrap();
        let version = required_version(&go_mod, "k8s.io/kubernetes");
        assert!(version.is_some_and(|v| v.starts_with("v1.")), "{version:?}");
    }
}
