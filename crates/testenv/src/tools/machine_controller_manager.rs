//! machine-controller-manager's CRDs (`machine.sapcloud.io`), from the pinned Go module
//! `github.com/gardener/machine-controller-manager` v0.45.0 — the last release with the in-tree
//! AWS and OpenStack drivers and the typed `AWSMachineClass` / `OpenStackMachineClass` kinds —
//! downloaded through the Go module proxy into the cache; [`install_crds`] applies the named
//! ones to an apiserver and waits until they are established.

use std::path::PathBuf;

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use super::{lock, module_source_copy};
use crate::tools::install::Paths;

/// The Go module.
pub const MODULE: &str = "github.com/gardener/machine-controller-manager";
/// The pinned release.
pub const VERSION: &str = "v0.45.0";

/// The directory of the release's CRD files (`kubernetes/crds`), downloading the module first
/// if needed. Blocking; safe to call from several processes at once.
pub fn crds_dir() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let _lock = lock(&paths, "machine-controller-manager")?;
    let source = module_source_copy(&paths, MODULE, VERSION)?;
    Ok(source.join("kubernetes/crds"))
}

/// Applies the CRDs of `plurals` (`awsmachineclasses`, …) and waits until each is established.
pub async fn install_crds(client: &kube::Client, plurals: &[&str]) -> Result<()> {
    let dir = tokio::task::spawn_blocking(crds_dir).await??;
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for plural in plurals {
        let path = dir.join(format!("machine.sapcloud.io_{plural}.yaml"));
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
