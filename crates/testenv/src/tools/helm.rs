//! The helm CLI, built from its own pinned Go module in `crates/testenv/go-helm` (so helm's
//! k8s.io/* versions never have to agree with kube-apiserver's); the chart tests run it.

use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::tools::install::{ensure_go_build_together, required_version, Paths};

/// The Go module pinning helm (separate, so helm's k8s.io/* versions never have to agree with
/// kube-apiserver's).
pub fn helm_module_dir() -> PathBuf {
    crate::repo_root().join("crates/testenv/go-helm")
}

/// Builds helm unless the stamp says it is current.
pub(crate) fn ensure(paths: &Paths) -> Result<()> {
    let module = helm_module_dir();
    let go_mod = fs::read_to_string(module.join("go.mod"))?;
    let ldflags = helm_ldflags(&go_mod)?;
    ensure_go_build_together(
        paths,
        &module,
        &paths.bin_dir().join(".stamp-helm"),
        // As helm's own Makefile builds it: a static binary.
        (&ldflags, false),
        &[(&paths.helm, "helm.sh/helm/v3/cmd/helm")],
    )
}

/// The link flags helm's Makefile sets: its version (`helm version`) and the Kubernetes version
/// `helm template` and `helm lint` assume without a cluster (v1.N for k8s.io/client-go v0.N, as
/// the Makefile computes it).
fn helm_ldflags(go_mod: &str) -> Result<String> {
    let helm_version =
        required_version(go_mod, "helm.sh/helm/v3").context("go.mod does not require helm")?;
    let client_go = required_version(go_mod, "k8s.io/client-go")
        .context("go.mod does not require k8s.io/client-go")?;
    let minor = client_go
        .strip_prefix("v0.")
        .and_then(|rest| rest.split('.').next())
        .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
        .with_context(|| format!("unexpected k8s.io/client-go version {client_go}"))?;
    let mut flags = format!("-s -w -X helm.sh/helm/v3/internal/version.version={helm_version}");
    for package in ["pkg/chartutil", "pkg/lint/rules"] {
        write!(
            flags,
            " -X helm.sh/helm/v3/{package}.k8sVersionMajor=1 -X helm.sh/helm/v3/{package}.k8sVersionMinor={minor}"
        )?;
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_ldflags_carry_versions() {
        let go_mod = "module x\n\nrequire helm.sh/helm/v3 v3.22.0\n\nrequire (\n\tk8s.io/client-go v0.37.1 // indirect\n)\n";
        let flags = helm_ldflags(go_mod).unwrap();
        assert!(
            flags.contains("internal/version.version=v3.22.0"),
            "{flags}"
        );
        assert!(
            flags.contains("pkg/chartutil.k8sVersionMinor=37"),
            "{flags}"
        );
        assert!(
            flags.contains("pkg/lint/rules.k8sVersionMinor=37"),
            "{flags}"
        );
        assert!(helm_ldflags("module x\n").is_err());
    }

    #[test]
    fn real_helm_go_mod_gives_ldflags() {
        let go_mod = fs::read_to_string(helm_module_dir().join("go.mod")).unwrap();
        let flags = helm_ldflags(&go_mod).unwrap();
        assert!(flags.contains("version.version=v3."), "{flags}");
    }
}
