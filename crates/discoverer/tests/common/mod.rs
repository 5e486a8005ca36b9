//! Shared set-up of the discoverer's integration tests: the catalog CRD and the shipped RBAC
//! bound to the test's identity, PersistentVolumes, waiting for conditions, reading metrics.
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, PostParams};
use kube::core::GroupVersionKind;
use prometheus_client::registry::Registry;
use serde::Deserialize as _;
use stratus_testenv::{Identity, KubeCluster};

/// The identity the discoverer runs as (bound to the shipped roles by [`install`]).
pub const ME: Identity = Identity::CloudControllerManager;

pub fn repo_file(rel: &str) -> String {
    let path = stratus_testenv::repo_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Polls `check` every 100 ms until it yields `Some`, failing after `timeout` with `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => String::new(),
            Err(e) => format!(" (last error: {e:#})"),
        };
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}{last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn catalog_api(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "InstanceTypesCatalog"),
        "instancetypescatalogs",
    );
    Api::all_with(client, &ar)
}

/// Installs (in `cluster`) the catalog CRD and the shipped RBAC bound to [`ME`].
pub async fn install(cluster: &KubeCluster) -> Result<()> {
    let admin = cluster.kube_client(Identity::Admin).await?;
    let crd: CustomResourceDefinition = serde_yaml::from_str(&repo_file(
        "deploy/cloud-data-discoverer/instancetypescatalogs.crd.yaml",
    ))?;
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &crd)
        .await?;
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: "cloud-controller-manager".into(),
        namespace: Some("kube-system".into()),
        ..Default::default()
    };
    for doc in
        serde_yaml::Deserializer::from_str(&repo_file("deploy/cloud-data-discoverer/rbac.yaml"))
    {
        let value = serde_yaml::Value::deserialize(doc)?;
        match value["kind"].as_str() {
            Some("ClusterRole") => {
                let role: ClusterRole = serde_yaml::from_value(value)?;
                let name = role.metadata.name.clone().context("role name")?;
                Api::<ClusterRole>::all(admin.clone())
                    .create(&PostParams::default(), &role)
                    .await?;
                let binding = ClusterRoleBinding {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..Default::default()
                    },
                    role_ref: RoleRef {
                        api_group: "rbac.authorization.k8s.io".into(),
                        kind: "ClusterRole".into(),
                        name,
                    },
                    subjects: Some(vec![subject.clone()]),
                };
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .create(&PostParams::default(), &binding)
                    .await?;
            }
            Some("Role") => {
                let role: Role = serde_yaml::from_value(value)?;
                let name = role.metadata.name.clone().context("role name")?;
                let ns = role.metadata.namespace.clone().context("role namespace")?;
                Api::<Role>::namespaced(admin.clone(), &ns)
                    .create(&PostParams::default(), &role)
                    .await?;
                let binding = RoleBinding {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(ns.clone()),
                        ..Default::default()
                    },
                    role_ref: RoleRef {
                        api_group: "rbac.authorization.k8s.io".into(),
                        kind: "Role".into(),
                        name,
                    },
                    subjects: Some(vec![subject.clone()]),
                };
                Api::<RoleBinding>::namespaced(admin.clone(), &ns)
                    .create(&PostParams::default(), &binding)
                    .await?;
            }
            other => anyhow::bail!("unexpected kind {other:?} in rbac.yaml"),
        }
    }
    let crds = Api::<CustomResourceDefinition>::all(admin);
    wait_for(
        "the InstanceTypesCatalog CRD to be established",
        Duration::from_secs(30),
        || {
            let crds = crds.clone();
            async move {
                let crd = crds.get("instancetypescatalogs.deckhouse.io").await?;
                let established = crd.status.and_then(|s| s.conditions).is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
                Ok(established.then_some(()))
            }
        },
    )
    .await
}

pub async fn pv(client: &kube::Client, name: &str, driver: &str) -> Result<()> {
    let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "csi": {"driver": driver, "volumeHandle": name}}
    }))?;
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await?;
    Ok(())
}

pub fn metrics_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
    text
}

/// The parent-cluster account the DVP discoverer acts as.
pub use stratus_scenarios::dvp_rbac::DISCOVERER_ACCOUNT as ACCOUNT;

/// Applies the shipped parent RBAC for the discoverer; returns the variables that hand its
/// identity to the discoverer.
pub use stratus_scenarios::dvp_rbac::discoverer_parent_identity as parent_identity;
