//! Least privilege of the shipped ClusterRole and kube-system Role (`deploy/rbac.yaml`, which
//! `tests/chart.rs` keeps equal to the chart's default `clusterRoleRules`/`kubeSystemRoleRules`),
//! proven on a real kube-apiserver by `stratus_testenv::core::rbac_check`: every access the code makes
//! is allowed, a list of things the CCM must never do is denied, and removing any single verb of
//! any rule denies at least one access the code makes (so no rule is dead weight).

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ListParams};
use stratus_scenarios::kube_fixture::{apply_rbac_manifest, repo_root};
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};
use stratus_testenv::core::rbac_required::REQUIRED;
use stratus_testenv::{Identity, TestEnv};

/// What the CCM must not be able to do.
const FORBIDDEN: &[Access] = &[
    access("get", "", "nodes", None, "reads come from the watch cache"),
    access("create", "", "nodes", None, "kubelets register nodes"),
    access(
        "update",
        "",
        "nodes",
        None,
        "only merge patches (no whole-object PUT)",
    ),
    access(
        "deletecollection",
        "",
        "nodes",
        None,
        "nodes are deleted one by one",
    ),
    access(
        "update",
        "",
        "nodes/status",
        None,
        "only merge/strategic patches",
    ),
    access(
        "get",
        "",
        "services",
        Some("default"),
        "reads come from the watch cache",
    ),
    access(
        "create",
        "",
        "services",
        Some("default"),
        "never creates Services",
    ),
    access(
        "update",
        "",
        "services",
        Some("default"),
        "only merge patches",
    ),
    access(
        "patch",
        "",
        "services",
        Some("default"),
        "finalizers go through the status subresource: Service specs are never written",
    ),
    access(
        "delete",
        "",
        "services",
        Some("default"),
        "never deletes Services",
    ),
    access(
        "update",
        "",
        "services/status",
        Some("default"),
        "only merge patches",
    ),
    access("get", "", "secrets", Some("kube-system"), "no secrets"),
    access("list", "", "secrets", None, "no secrets"),
    access(
        "get",
        "",
        "configmaps",
        Some("kube-system"),
        "no configmaps",
    ),
    access("create", "", "pods", Some("default"), "no workloads"),
    access("delete", "", "pods", Some("kube-system"), "no workloads"),
    access(
        "create",
        "",
        "events",
        Some("default"),
        "Events go through events.k8s.io only",
    ),
    access(
        "update",
        "events.k8s.io",
        "events",
        Some("default"),
        "the Recorder patches",
    ),
    access(
        "delete",
        "events.k8s.io",
        "events",
        Some("default"),
        "Events are never deleted",
    ),
    access(
        "delete",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        "locks are not deleted",
    ),
    access(
        "list",
        "coordination.k8s.io",
        "leases",
        None,
        "the lock is read by name",
    ),
    access(
        "update",
        "coordination.k8s.io",
        "leases",
        Some("default"),
        "Leases outside kube-system are not ours",
    ),
    access(
        "create",
        "",
        "serviceaccounts/token",
        Some("default"),
        "tokens only for kube-system controller accounts",
    ),
    access("list", "", "secrets", Some("kube-system"), "no Secrets"),
    access(
        "create",
        "",
        "persistentvolumes",
        None,
        "no volumes (upstream's chart grants some)",
    ),
    access(
        "create",
        "",
        "endpoints",
        Some("default"),
        "no endpoints (upstream's chart grants)",
    ),
    access(
        "bind",
        "rbac.authorization.k8s.io",
        "clusterroles",
        None,
        "no privilege escalation",
    ),
    access(
        "escalate",
        "rbac.authorization.k8s.io",
        "clusterroles",
        None,
        "no escalation",
    ),
    access("impersonate", "", "users", None, "no impersonation"),
];

#[tokio::test(flavor = "multi_thread")]
async fn shipped_cluster_role_is_exactly_what_the_code_needs() {
    let env = TestEnv::start().await.expect("test environment");
    let admin = env
        .kube_client(Identity::Admin)
        .await
        .expect("admin client");
    let manifest = repo_root().join("deploy/rbac.yaml");
    apply_rbac_manifest(&admin, &manifest)
        .await
        .expect("apply deploy/rbac.yaml");
    let id = Identity::CloudControllerManager;
    let ccm = Who {
        user: id.username().into(),
        groups: id.groups().iter().map(|g| g.to_string()).collect(),
    };
    let rbac = ShippedRbac::from_manifest(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert_eq!(rbac.namespace, "kube-system");
    LeastPrivilege {
        who: ccm,
        rbac,
        required: REQUIRED,
        forbidden: FORBIDDEN,
        variant_prefix: "stratus-minimality",
    }
    .prove(&admin)
    .await
    .unwrap();

    // The reviews are about the identity the CCM really authenticates as.
    let as_ccm = env.kube_client(id).await.expect("CCM client");
    Api::<Node>::all(as_ccm.clone())
        .list(&ListParams::default())
        .await
        .expect("the CCM lists nodes");
    for denied in [
        Api::<Node>::all(as_ccm.clone())
            .get("any")
            .await
            .map(|_| ()),
        Api::<Secret>::namespaced(as_ccm, "kube-system")
            .list(&ListParams::default())
            .await
            .map(|_| ()),
    ] {
        assert!(
            matches!(&denied, Err(kube::Error::Api(s)) if s.code == 403),
            "{denied:?}"
        );
    }
}
