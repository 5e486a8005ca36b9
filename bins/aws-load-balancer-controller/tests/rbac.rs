//! Least privilege of the chart's RBAC (ClusterRole from `files/rbac.yaml`, the leader-election
//! Role and both bindings, as `helm template` renders them) on a real kube-apiserver, by
//! `stratus_testenv::core::rbac_check`: every access the code makes is allowed, accesses it must never
//! have are denied, and removing any single verb of any rule denies an access the code makes.

use std::process::Command;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde::Deserialize as _;
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};
use stratus_testenv::{Identity, KubeCluster};

const NAMESPACE: &str = "kube-system";
const SA: &str = "aws-load-balancer-controller";

/// Every call of `crates/albc/src/{tgb,ingress,service}/controller.rs` (the reaper's lists of
/// Ingresses, Services and bindings and its binding deletes in `reaper/driver.rs` are among
/// them, and so are the webhooks' caches in `webhook/caches.rs`: list and watch of bindings and
/// Services), the Events, the election and the secure metrics' reviews.
const REQUIRED: &[Access] = &[
    access(
        "get",
        "elbv2.k8s.aws",
        "targetgroupbindings",
        Some("default"),
        "ingress binding",
    ),
    access(
        "create",
        "elbv2.k8s.aws",
        "targetgroupbindings",
        Some("default"),
        "ingress binding",
    ),
    access(
        "delete",
        "elbv2.k8s.aws",
        "targetgroupbindings",
        Some("default"),
        "ingress binding",
    ),
    access(
        "list",
        "networking.k8s.io",
        "ingresses",
        None,
        "ingress watch",
    ),
    access(
        "watch",
        "networking.k8s.io",
        "ingresses",
        None,
        "ingress watch",
    ),
    access(
        "patch",
        "networking.k8s.io",
        "ingresses",
        Some("default"),
        "ingress finalizer",
    ),
    access(
        "patch",
        "networking.k8s.io",
        "ingresses/status",
        Some("default"),
        "ingress status",
    ),
    access(
        "list",
        "networking.k8s.io",
        "ingressclasses",
        None,
        "ingress/class.rs cache",
    ),
    access(
        "watch",
        "networking.k8s.io",
        "ingressclasses",
        None,
        "ingress/class.rs cache",
    ),
    access(
        "list",
        "elbv2.k8s.aws",
        "ingressclassparams",
        None,
        "ingress/class.rs cache",
    ),
    access(
        "watch",
        "elbv2.k8s.aws",
        "ingressclassparams",
        None,
        "ingress/class.rs cache",
    ),
    access(
        "get",
        "",
        "namespaces",
        None,
        "namespaceSelector of IngressClassParams",
    ),
    access(
        "get",
        "networking.k8s.io",
        "ingressclasses",
        None,
        "webhook/server.rs vingress",
    ),
    access(
        "get",
        "elbv2.k8s.aws",
        "ingressclassparams",
        None,
        "webhook/server.rs vingress",
    ),
    access(
        "get",
        "",
        "services",
        Some("default"),
        "ingress/apply.rs backend port",
    ),
    access(
        "list",
        "elbv2.k8s.aws",
        "targetgroupbindings",
        None,
        "controller.rs watch, webhook caches",
    ),
    access(
        "watch",
        "elbv2.k8s.aws",
        "targetgroupbindings",
        None,
        "controller.rs watch, webhook caches",
    ),
    access(
        "patch",
        "elbv2.k8s.aws",
        "targetgroupbindings",
        Some("default"),
        "controller.rs finalizer",
    ),
    access(
        "patch",
        "elbv2.k8s.aws",
        "targetgroupbindings/status",
        Some("default"),
        "controller.rs status",
    ),
    access(
        "patch",
        "",
        "services",
        Some("default"),
        "service/controller.rs finalizer",
    ),
    access(
        "patch",
        "",
        "services/status",
        Some("default"),
        "service/controller.rs status",
    ),
    access(
        "list",
        "",
        "services",
        None,
        "controller.rs, webhook caches",
    ),
    access(
        "watch",
        "",
        "services",
        None,
        "controller.rs, webhook caches",
    ),
    access("list", "", "nodes", None, "controller.rs cache"),
    access("watch", "", "nodes", None, "controller.rs cache"),
    access(
        "list",
        "discovery.k8s.io",
        "endpointslices",
        None,
        "controller.rs cache",
    ),
    access(
        "watch",
        "discovery.k8s.io",
        "endpointslices",
        None,
        "controller.rs cache",
    ),
    access("list", "", "pods", None, "controller.rs readiness gates"),
    access("watch", "", "pods", None, "controller.rs readiness gates"),
    access(
        "patch",
        "",
        "pods/status",
        Some("default"),
        "controller.rs readiness gates",
    ),
    access(
        "create",
        "events.k8s.io",
        "events",
        Some("default"),
        "EventPublisher",
    ),
    access(
        "patch",
        "events.k8s.io",
        "events",
        Some("default"),
        "EventPublisher",
    ),
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
    access(
        "create",
        "coordination.k8s.io",
        "leases",
        Some(NAMESPACE),
        "election",
    ),
    access(
        "get",
        "coordination.k8s.io",
        "leases",
        Some(NAMESPACE),
        "election",
    )
    .named("aws-load-balancer-controller-leader"),
    access(
        "update",
        "coordination.k8s.io",
        "leases",
        Some(NAMESPACE),
        "election",
    )
    .named("aws-load-balancer-controller-leader"),
];

/// What the controller must never be able to do.
const FORBIDDEN: &[Access] = &[
    access("get", "", "secrets", Some(NAMESPACE), "never needed").named("any"),
    access("list", "", "secrets", None, "never needed"),
    access(
        "update",
        "elbv2.k8s.aws",
        "targetgroupbindings",
        Some("default"),
        "never needed",
    )
    .named("x"),
    access(
        "delete",
        "networking.k8s.io",
        "ingresses",
        Some("default"),
        "never needed",
    )
    .named("x"),
    access("update", "", "services", Some("default"), "never needed").named("x"),
    access("delete", "", "services", Some("default"), "never needed").named("x"),
    access(
        "update",
        "",
        "services/status",
        Some("default"),
        "never needed",
    )
    .named("x"),
    access("delete", "", "pods", Some("default"), "never needed").named("x"),
    access("patch", "", "pods", Some("default"), "never needed").named("x"),
    access(
        "update",
        "coordination.k8s.io",
        "leases",
        Some(NAMESPACE),
        "never needed",
    )
    .named("kube-controller-manager"),
];

#[tokio::test]
async fn chart_rbac_is_least_privilege() -> anyhow::Result<()> {
    let helm = stratus_testenv::ensure_installed()?.helm;
    let chart = stratus_testenv::repo_root().join("charts/aws-load-balancer-controller");
    let out = Command::new(&helm)
        .args(["template", "x", "-n", NAMESPACE, "--set", "clusterName=t"])
        .arg(&chart)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout)?;
    let cluster = KubeCluster::start().await?;
    let admin = cluster.kube_client(Identity::Admin).await?;
    let mut rbac_docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&rendered) {
        let value = serde_yaml::Value::deserialize(doc)?;
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let pp = PostParams::default();
        match kind.as_str() {
            "ClusterRole" => {
                Api::<ClusterRole>::all(admin.clone())
                    .create(&pp, &serde_yaml::from_value(value.clone())?)
                    .await?;
            }
            "ClusterRoleBinding" => {
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .create(&pp, &serde_yaml::from_value(value.clone())?)
                    .await?;
            }
            "Role" => {
                Api::<Role>::namespaced(admin.clone(), NAMESPACE)
                    .create(&pp, &serde_yaml::from_value(value.clone())?)
                    .await?;
            }
            "RoleBinding" => {
                Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE)
                    .create(&pp, &serde_yaml::from_value(value.clone())?)
                    .await?;
            }
            _ => continue,
        }
        rbac_docs.push(serde_yaml::to_string(&value)?);
    }
    let rbac = ShippedRbac::from_manifest(&rbac_docs.join("---\n"))?;
    LeastPrivilege {
        who: Who::service_account(NAMESPACE, SA),
        rbac,
        required: REQUIRED,
        forbidden: FORBIDDEN,
        variant_prefix: "albc-minimality",
    }
    .prove(&admin)
    .await
}
