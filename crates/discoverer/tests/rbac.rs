//! Least privilege of the shipped RBAC (`deploy/cloud-data-discoverer/rbac.yaml`, equal to the
//! chart's copy), on a real kube-apiserver by `stratus_testenv::core::rbac_check`: every access the code makes
//! is allowed, accesses it must never have are denied, and removing any single verb of any rule
//! denies an access the code makes. The chart lints and binds the roles to its ServiceAccount.

use std::process::Command;

use anyhow::{Context, Result};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ObjectMeta, PostParams};
use serde::Deserialize as _;
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};
use stratus_testenv::{Identity, KubeCluster};

const NAMESPACE: &str = "d8-cloud-provider-aws";
const SA: &str = "cloud-data-discoverer";

/// Every call of `crates/discoverer/src/outputs.rs`, and the reviews of the secure metrics.
const REQUIRED: &[Access] = &[
    access(
        "create",
        "authentication.k8s.io",
        "tokenreviews",
        None,
        "stratus-serving authn",
    ),
    access(
        "create",
        "authorization.k8s.io",
        "subjectaccessreviews",
        None,
        "stratus-serving authz",
    ),
    access("list", "", "persistentvolumes", None, "outputs.rs"),
    access("list", "", "nodes", None, "identity.rs"),
    access("get", "", "configmaps", Some("kube-system"), "identity.rs").named("d8-cluster-uuid"),
    access(
        "get",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        "outputs.rs",
    )
    .named("for-cluster-autoscaler"),
    access(
        "create",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        "outputs.rs",
    ),
    access(
        "update",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        "outputs.rs",
    )
    .named("for-cluster-autoscaler"),
    access("get", "", "secrets", Some("kube-system"), "outputs.rs")
        .named("d8-provider-cluster-configuration"),
    access("get", "", "secrets", Some("kube-system"), "outputs.rs")
        .named("d8-cloud-provider-discovery-data"),
    access("create", "", "secrets", Some("kube-system"), "outputs.rs"),
    access("update", "", "secrets", Some("kube-system"), "outputs.rs")
        .named("d8-cloud-provider-discovery-data"),
    access("get", "", "configmaps", Some("kube-system"), "outputs.rs")
        .named("d8-cloud-provider-conditions"),
    access(
        "create",
        "",
        "configmaps",
        Some("kube-system"),
        "outputs.rs",
    ),
    access(
        "update",
        "",
        "configmaps",
        Some("kube-system"),
        "outputs.rs",
    )
    .named("d8-cloud-provider-conditions"),
];

/// What the discoverer must never be able to do.
const FORBIDDEN: &[Access] = &[
    access("get", "", "secrets", Some("kube-system"), "never needed")
        .named("d8-node-manager-cloud-provider"),
    access("list", "", "secrets", Some("kube-system"), "never needed"),
    access("update", "", "secrets", Some("kube-system"), "never needed")
        .named("d8-provider-cluster-configuration"),
    access("delete", "", "secrets", Some("kube-system"), "never needed")
        .named("d8-cloud-provider-discovery-data"),
    access("get", "", "persistentvolumes", None, "never needed").named("pv"),
    access("delete", "", "persistentvolumes", None, "never needed").named("pv"),
    access(
        "delete",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        "never needed",
    )
    .named("for-cluster-autoscaler"),
    access("get", "", "secrets", Some("default"), "never needed")
        .named("d8-cloud-provider-discovery-data"),
];

mod common;

use common::repo_file;

#[tokio::test]
async fn shipped_rbac_is_least_privilege() -> Result<()> {
    let shipped = repo_file("deploy/cloud-data-discoverer/rbac.yaml");
    assert_eq!(
        shipped,
        repo_file("charts/cloud-data-discoverer/files/rbac.yaml"),
        "the chart ships the same RBAC"
    );
    let helm = stratus_testenv::ensure_installed()?.helm;
    let chart = stratus_testenv::repo_root().join("charts/cloud-data-discoverer");
    let lint = Command::new(&helm).arg("lint").arg(&chart).output()?;
    assert!(
        lint.status.success(),
        "helm lint: {}",
        String::from_utf8_lossy(&lint.stdout)
    );
    let out = Command::new(&helm)
        .args(["template", "x", "-n", NAMESPACE])
        .arg(&chart)
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout)?;
    assert!(
        rendered.contains(&format!("name: {SA}\n  namespace: {NAMESPACE}")),
        "{rendered}"
    );

    let cluster = KubeCluster::start().await?;
    let admin = cluster.kube_client(Identity::Admin).await?;
    let rbac = ShippedRbac::from_manifest(&shipped)?;
    for doc in serde_yaml::Deserializer::from_str(&shipped) {
        let value = serde_yaml::Value::deserialize(doc)?;
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let name = value["metadata"]["name"]
            .as_str()
            .context("a named object")?
            .to_string();
        let (kind, namespace) = match kind.as_str() {
            "ClusterRole" => {
                let role: ClusterRole = serde_yaml::from_value(value)?;
                Api::<ClusterRole>::all(admin.clone())
                    .create(&PostParams::default(), &role)
                    .await?;
                ("ClusterRole", None)
            }
            "Role" => {
                let role: Role = serde_yaml::from_value(value)?;
                Api::<Role>::namespaced(admin.clone(), &rbac.namespace)
                    .create(&PostParams::default(), &role)
                    .await?;
                ("Role", Some(rbac.namespace.clone()))
            }
            other => anyhow::bail!("unexpected kind {other:?}"),
        };
        bind_to_service_account(&admin, kind, &name, namespace).await?;
    }
    LeastPrivilege {
        who: Who::service_account(NAMESPACE, SA),
        rbac,
        required: REQUIRED,
        forbidden: FORBIDDEN,
        variant_prefix: "discoverer-minimality",
    }
    .prove(&admin)
    .await
}

/// Binds the ClusterRole or Role `name` (a Role: in `namespace`) to the discoverer's
/// ServiceAccount, as the chart does.
async fn bind_to_service_account(
    admin: &kube::Client,
    kind: &str,
    name: &str,
    namespace: Option<String>,
) -> Result<()> {
    let metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.clone(),
        ..Default::default()
    };
    let role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    };
    let subjects = Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: SA.into(),
        namespace: Some(NAMESPACE.into()),
        ..Default::default()
    }]);
    match namespace {
        None => {
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(
                    &PostParams::default(),
                    &ClusterRoleBinding {
                        metadata,
                        role_ref,
                        subjects,
                    },
                )
                .await?;
        }
        Some(ns) => {
            Api::<RoleBinding>::namespaced(admin.clone(), &ns)
                .create(
                    &PostParams::default(),
                    &RoleBinding {
                        metadata,
                        role_ref,
                        subjects,
                    },
                )
                .await?;
        }
    }
    Ok(())
}
