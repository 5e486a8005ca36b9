//! Least privilege of the shipped RBAC (`deploy/cloud-data-discoverer/rbac.yaml`, equal to the
//! chart's copy), on a real kube-apiserver with SubjectAccessReviews: every access the code makes
//! is allowed, accesses it must never have are denied, and removing any single verb of any rule
//! denies an access the code makes. The chart lints and binds the roles to its ServiceAccount.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ObjectMeta, PostParams};
use serde::Deserialize as _;
use stratus_testenv::{Identity, KubeCluster};

const NAMESPACE: &str = "d8-cloud-provider-aws";
const SA: &str = "cloud-data-discoverer";

/// `verb` on `resource` (group, namespace, name).
type Access = (
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
);

/// Every call of `crates/discoverer/src/outputs.rs`.
const REQUIRED: &[Access] = &[
    ("list", "", "persistentvolumes", None, None),
    (
        "get",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        Some("for-cluster-autoscaler"),
    ),
    (
        "create",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        None,
    ),
    (
        "update",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        Some("for-cluster-autoscaler"),
    ),
    (
        "get",
        "",
        "secrets",
        Some("kube-system"),
        Some("d8-provider-cluster-configuration"),
    ),
    (
        "get",
        "",
        "secrets",
        Some("kube-system"),
        Some("d8-cloud-provider-discovery-data"),
    ),
    ("create", "", "secrets", Some("kube-system"), None),
    (
        "update",
        "",
        "secrets",
        Some("kube-system"),
        Some("d8-cloud-provider-discovery-data"),
    ),
    (
        "get",
        "",
        "configmaps",
        Some("kube-system"),
        Some("d8-cloud-provider-conditions"),
    ),
    ("create", "", "configmaps", Some("kube-system"), None),
    (
        "update",
        "",
        "configmaps",
        Some("kube-system"),
        Some("d8-cloud-provider-conditions"),
    ),
];

const FORBIDDEN: &[Access] = &[
    (
        "get",
        "",
        "secrets",
        Some("kube-system"),
        Some("d8-node-manager-cloud-provider"),
    ),
    ("list", "", "secrets", Some("kube-system"), None),
    (
        "update",
        "",
        "secrets",
        Some("kube-system"),
        Some("d8-provider-cluster-configuration"),
    ),
    (
        "delete",
        "",
        "secrets",
        Some("kube-system"),
        Some("d8-cloud-provider-discovery-data"),
    ),
    ("get", "", "persistentvolumes", None, Some("pv")),
    ("delete", "", "persistentvolumes", None, Some("pv")),
    (
        "delete",
        "deckhouse.io",
        "instancetypescatalogs",
        None,
        Some("for-cluster-autoscaler"),
    ),
    (
        "get",
        "",
        "secrets",
        Some("default"),
        Some("d8-cloud-provider-discovery-data"),
    ),
];

fn repo_file(rel: &str) -> String {
    let path = stratus_testenv::repo_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

async fn allowed(client: &kube::Client, a: &Access) -> Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{NAMESPACE}:{SA}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{NAMESPACE}"),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(a.0.into()),
                group: Some(a.1.into()),
                resource: Some(a.2.into()),
                namespace: a.3.map(Into::into),
                name: a.4.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Polls until every access has the wanted answer (RBAC changes reach the authorizer's cache
/// asynchronously); fails after 10 s naming the accesses.
async fn expect(client: &kube::Client, accesses: &[Access], want: bool, why: &str) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut wrong = Vec::new();
        for a in accesses {
            if allowed(client, a).await? != want {
                wrong.push(*a);
            }
        }
        if wrong.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{why}: expected allowed={want} for {wrong:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls until at least one of `accesses` is denied.
async fn expect_some_denied(client: &kube::Client, why: &str) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        for a in REQUIRED {
            if !allowed(client, a).await? {
                return Ok(());
            }
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{why}: no required access was denied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

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
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: SA.into(),
        namespace: Some(NAMESPACE.into()),
        ..Default::default()
    };
    let mut cluster_role = None;
    let mut role = None;
    for doc in serde_yaml::Deserializer::from_str(&shipped) {
        let value = serde_yaml::Value::deserialize(doc)?;
        match value["kind"].as_str() {
            Some("ClusterRole") => {
                cluster_role = Some(serde_yaml::from_value::<ClusterRole>(value)?)
            }
            Some("Role") => role = Some(serde_yaml::from_value::<Role>(value)?),
            other => anyhow::bail!("unexpected kind {other:?}"),
        }
    }
    let cluster_role = cluster_role.context("a ClusterRole")?;
    let role = role.context("a Role")?;
    let name = cluster_role.metadata.name.clone().context("name")?;
    let roles = Api::<ClusterRole>::all(admin.clone());
    roles.create(&PostParams::default(), &cluster_role).await?;
    let ns_roles = Api::<Role>::namespaced(admin.clone(), "kube-system");
    ns_roles.create(&PostParams::default(), &role).await?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: name.clone(),
                },
                subjects: Some(vec![subject.clone()]),
            },
        )
        .await?;
    Api::<RoleBinding>::namespaced(admin.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some("kube-system".into()),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: name.clone(),
                },
                subjects: Some(vec![subject]),
            },
        )
        .await?;
    expect(&admin, REQUIRED, true, "the shipped RBAC").await?;
    expect(&admin, FORBIDDEN, false, "the shipped RBAC").await?;

    // Each verb of each rule is needed.
    let cluster_rules = cluster_role.rules.clone().unwrap_or_default();
    for (i, rule) in cluster_rules.iter().enumerate() {
        for verb in &rule.verbs {
            let mut trimmed = cluster_role.clone();
            let rules = trimmed.rules.as_mut().unwrap();
            rules[i].verbs.retain(|v| v != verb);
            if rules[i].verbs.is_empty() {
                rules.remove(i);
            }
            let current = roles.get(&name).await?;
            trimmed.metadata.resource_version = current.metadata.resource_version;
            roles
                .replace(&name, &PostParams::default(), &trimmed)
                .await?;
            expect_some_denied(&admin, &format!("ClusterRole rule {i} without {verb}")).await?;
            let current = roles.get(&name).await?;
            let mut restored = cluster_role.clone();
            restored.metadata.resource_version = current.metadata.resource_version;
            roles
                .replace(&name, &PostParams::default(), &restored)
                .await?;
            expect(&admin, REQUIRED, true, "restored").await?;
        }
    }
    let ns_rules = role.rules.clone().unwrap_or_default();
    for (i, rule) in ns_rules.iter().enumerate() {
        for verb in &rule.verbs {
            let mut trimmed = role.clone();
            let rules = trimmed.rules.as_mut().unwrap();
            rules[i].verbs.retain(|v| v != verb);
            if rules[i].verbs.is_empty() {
                rules.remove(i);
            }
            let current = ns_roles.get(&name).await?;
            trimmed.metadata.resource_version = current.metadata.resource_version;
            ns_roles
                .replace(&name, &PostParams::default(), &trimmed)
                .await?;
            expect_some_denied(&admin, &format!("Role rule {i} without {verb}")).await?;
            let current = ns_roles.get(&name).await?;
            let mut restored = role.clone();
            restored.metadata.resource_version = current.metadata.resource_version;
            ns_roles
                .replace(&name, &PostParams::default(), &restored)
                .await?;
            expect(&admin, REQUIRED, true, "restored").await?;
        }
    }
    Ok(())
}
