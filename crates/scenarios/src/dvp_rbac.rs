//! The DVP CCM's shipped parent-cluster RBAC (`deploy/dvp/parent-rbac.yaml`: a Role in the tenant
//! namespace, and a ClusterRole reading one ModuleConfig), read for the tests that run the CCM
//! under it and prove it minimal.

use anyhow::Context;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleRef, Subject,
};
use kube::api::{Api, ObjectMeta, PostParams};
use serde::Deserialize;

/// Path of the manifest under the repository root.
pub const MANIFEST: &str = "deploy/dvp/parent-rbac.yaml";

fn rules_of(kind: &str) -> anyhow::Result<Vec<PolicyRule>> {
    rules_in(MANIFEST, kind)
}

/// The rules of the first `kind` (`Role` or `ClusterRole`) in the manifest at `manifest` (a path
/// under the repository root).
pub fn rules_in(manifest: &str, kind: &str) -> anyhow::Result<Vec<PolicyRule>> {
    let path = crate::kube_fixture::repo_root().join(manifest);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(doc)?;
        if value["kind"].as_str() == Some(kind) {
            return Ok(match kind {
                "Role" => serde_yaml::from_value::<Role>(value)?.rules,
                _ => serde_yaml::from_value::<ClusterRole>(value)?.rules,
            }
            .unwrap_or_default());
        }
    }
    anyhow::bail!("{} has no {kind}", path.display())
}

/// The rules of the shipped parent Role.
pub fn parent_role_rules() -> anyhow::Result<Vec<PolicyRule>> {
    rules_of("Role")
}

/// The rules of the shipped parent ClusterRole.
pub fn parent_cluster_role_rules() -> anyhow::Result<Vec<PolicyRule>> {
    rules_of("ClusterRole")
}

/// Creates the shipped ClusterRole (as `<account>-cluster`) bound to the ServiceAccount
/// `namespace/account`, as an administrator applying the manifest for that project would.
pub async fn bind_parent_cluster_role(
    admin: &kube::Client,
    namespace: &str,
    account: &str,
) -> anyhow::Result<()> {
    let name = format!("{account}-cluster");
    let meta = ObjectMeta {
        name: Some(name.clone()),
        ..ObjectMeta::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: meta.clone(),
                rules: Some(parent_cluster_role_rules()?),
                ..ClusterRole::default()
            },
        )
        .await?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name,
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: account.into(),
                    namespace: Some(namespace.into()),
                    ..Subject::default()
                }]),
            },
        )
        .await?;
    Ok(())
}

/// The DVP cloud-data-discoverer's shipped parent-cluster RBAC.
pub const DISCOVERER_MANIFEST: &str = "deploy/dvp/parent-discoverer-rbac.yaml";

/// The parent-cluster account the DVP discoverer acts as.
pub const DISCOVERER_ACCOUNT: &str = "stratus-dvp-cloud-data-discoverer";

/// Applies the discoverer's shipped parent RBAC as an administrator of the project would (its
/// ClusterRole and the binding to the project's account, its Role bound to a new account) and
/// returns the variables (`DVP_KUBERNETES_CONFIG_BASE64`, `DVP_NAMESPACE`) that hand that
/// identity to the discoverer.
pub async fn discoverer_parent_identity(
    env: &stratus_testenv::dvp::DvpEnv,
) -> anyhow::Result<Vec<(String, String)>> {
    let admin = env.parent_admin().await?;
    let path = crate::kube_fixture::repo_root().join(DISCOVERER_MANIFEST);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut role_rules = None;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(doc)?;
        match value["kind"].as_str() {
            Some("Role") => role_rules = serde_yaml::from_value::<Role>(value)?.rules,
            Some("ClusterRole") => {
                let role: ClusterRole = serde_yaml::from_value(value)?;
                Api::<ClusterRole>::all(admin.clone())
                    .create(&PostParams::default(), &role)
                    .await?;
            }
            Some("ClusterRoleBinding") => {
                let mut binding: ClusterRoleBinding = serde_yaml::from_value(value)?;
                for s in binding.subjects.iter_mut().flatten() {
                    s.namespace = Some(env.namespace().to_owned());
                }
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .create(&PostParams::default(), &binding)
                    .await?;
            }
            _ => {}
        }
    }
    env.bound_account_env(
        DISCOVERER_ACCOUNT,
        role_rules.context("the manifest has a Role")?,
    )
    .await
}
