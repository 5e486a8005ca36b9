//! A real apiserver with the shipped RBAC applied and a client of the module controller's
//! ServiceAccount; Secrets and values files as the module reads them.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, Patch, PatchParams};
use stratus_scenarios::csi::harness::{chart_account, Chart, ChartAccount};
use stratus_testenv::KubeCluster;

/// The ServiceAccount's user name, as the audit log records it.
pub const USER: &str = "system:serviceaccount:kube-system:module-controller";

/// The chart whose RBAC the controller runs under.
pub const CHART: Chart = Chart {
    name: "module-controller",
    release: "module-controller",
    service_account: "module-controller",
    sets: &[],
};

/// A cluster, its admin and the controller's client (under the chart's RBAC).
pub struct Bed {
    pub cluster: KubeCluster,
    pub admin: kube::Client,
    pub controller: kube::Client,
    pub kubeconfig: PathBuf,
}

impl Bed {
    pub async fn start() -> Result<Bed> {
        let cluster = KubeCluster::start().await?;
        let ChartAccount {
            admin, kubeconfig, ..
        } = chart_account(&cluster, &CHART, cluster.dir()).await?;
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        let controller = kube::Client::try_from(config)?;
        Ok(Bed {
            cluster,
            admin,
            controller,
            kubeconfig,
        })
    }

    /// Writes (creates or replaces) `kube-system/<name>` with `data`.
    pub async fn secret(&self, name: &str, data: &[(&str, &str)]) -> Result<()> {
        let secret = stratus_scenarios::kube_fixture::opaque_secret(name, data);
        Api::<Secret>::namespaced(self.admin.clone(), "kube-system")
            .patch(
                name,
                &PatchParams::apply("tests").force(),
                &Patch::Apply(&secret),
            )
            .await?;
        Ok(())
    }

    /// Deletes `kube-system/<name>` as the administrator.
    pub async fn admin_delete_secret(&self, name: &str) -> Result<()> {
        Api::<Secret>::namespaced(self.admin.clone(), "kube-system")
            .delete(name, &kube::api::DeleteParams::default())
            .await?;
        Ok(())
    }

    /// The registration Secret's data as text.
    pub async fn registration(&self, name: &str) -> Result<BTreeMap<String, String>> {
        let s = Api::<Secret>::namespaced(self.admin.clone(), "kube-system")
            .get(name)
            .await
            .with_context(|| format!("secret {name}"))?;
        Ok(s.data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .collect())
    }

    /// The module's StorageClasses by name.
    pub async fn classes(&self, module: &str) -> Result<BTreeMap<String, StorageClass>> {
        let list = Api::<StorageClass>::all(self.admin.clone())
            .list(&ListParams::default().labels(&format!("heritage=deckhouse,module={module}")))
            .await?;
        Ok(list
            .items
            .into_iter()
            .map(|sc| (sc.metadata.name.clone().unwrap_or_default(), sc))
            .collect())
    }

    /// The conditions in `module`'s status ConfigMap, by type.
    pub async fn conditions(&self, module: &str) -> Result<BTreeMap<String, serde_json::Value>> {
        let name = format!("{module}-status");
        let cm = Api::<ConfigMap>::namespaced(self.admin.clone(), "kube-system")
            .get(&name)
            .await
            .with_context(|| format!("ConfigMap {name}"))?;
        let text = cm
            .data
            .unwrap_or_default()
            .remove("conditions.json")
            .context("conditions.json")?;
        let list: Vec<serde_json::Value> = serde_json::from_str(&text)?;
        Ok(list
            .into_iter()
            .map(|c| (c["type"].as_str().unwrap_or_default().to_string(), c))
            .collect())
    }

    /// Writes the writes by the controller so far.
    pub fn writes(&self) -> Result<u64> {
        self.cluster.kube_writes_by(USER)
    }
}

/// Writes a values file holding `settings`.
pub fn values(dir: &Path, settings: serde_json::Value) -> Result<PathBuf> {
    let path = dir.join("values.yaml");
    std::fs::write(
        &path,
        serde_yaml::to_string(&serde_json::json!({ "settings": settings }))?,
    )?;
    Ok(path)
}

/// A class's parameters.
pub fn params(sc: &StorageClass) -> BTreeMap<String, String> {
    sc.parameters.clone().unwrap_or_default()
}

/// Whether the class carries the default annotation.
pub fn is_default(sc: &StorageClass) -> bool {
    sc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
        .is_some_and(|v| v == "true")
}
