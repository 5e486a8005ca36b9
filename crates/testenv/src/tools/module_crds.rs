//! CRDs published inside pinned Go modules, downloaded through the Go module proxy into the
//! cache and applied to an apiserver: machine-controller-manager v0.45.0's `machine.sapcloud.io`
//! kinds (the last release with the in-tree AWS and OpenStack drivers and the typed
//! `AWSMachineClass` / `OpenStackMachineClass`), and the external-snapshotter's
//! `snapshot.storage.k8s.io` kinds.

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use super::{lock, module_source_copy};
use crate::tools::install::Paths;

/// A Go module at a pinned version and the directory of its CRD files.
#[derive(Debug, Clone, Copy)]
pub struct ModuleCrds {
    /// The Go module.
    pub module: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The CRDs' directory inside the module.
    pub dir: &'static str,
}

/// machine-controller-manager v0.45.0 (files `machine.sapcloud.io_<plural>.yaml`).
pub const MACHINE_CONTROLLER_MANAGER: ModuleCrds = ModuleCrds {
    module: "github.com/gardener/machine-controller-manager",
    version: "v0.45.0",
    dir: "kubernetes/crds",
};

/// The external-snapshotter's client module (files `snapshot.storage.k8s.io_<plural>.yaml`).
pub const SNAPSHOTTER: ModuleCrds = ModuleCrds {
    module: "github.com/kubernetes-csi/external-snapshotter/client/v8",
    version: "v8.2.0",
    dir: "config/crd",
};

/// Applies the CRD files `files` of `crds` (downloading the module first if needed) and waits
/// until each is established.
pub async fn install(client: &kube::Client, crds: ModuleCrds, files: &[&str]) -> Result<()> {
    let source = tokio::task::spawn_blocking(move || -> Result<std::path::PathBuf> {
        let paths = Paths::from_env()?;
        let _lock = lock(&paths, "module-crds")?;
        module_source_copy(&paths, crds.module, crds.version)
    })
    .await??;
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for file in files {
        let path = source.join(crds.dir).join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let name = crd.metadata.name.clone().context("a CRD without a name")?;
        api.patch(
            &name,
            &PatchParams::apply("stratus-testenv").force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("applying {name}"))?;
        crate::core::cluster::wait_established(client, &name).await?;
    }
    Ok(())
}
