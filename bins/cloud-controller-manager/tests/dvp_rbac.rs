//! Least privilege of the DVP CCM in the parent cluster: the shipped Role and ClusterRole
//! (`deploy/dvp/parent-rbac.yaml`) allow every call the provider makes (in the tenant namespace,
//! and reading one ModuleConfig), none of what it must never do, and removing any verb denies a
//! call the code makes. (The
//! integration tests in `dvp_nodes.rs` and `dvp_lb.rs` run the CCM under this same Role.)

use stratus_scenarios::dvp_rbac::{
    bind_parent_cluster_role, parent_cluster_role_rules, parent_role_rules,
};
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};
use stratus_testenv::dvp::TENANT_NAMESPACE;
use stratus_testenv::DvpEnv;

const NS: Option<&str> = Some(TENANT_NAMESPACE);
const VIRT: &str = "virtualization.deckhouse.io";
const NET: &str = "network.deckhouse.io";

/// Every parent call of the provider (crates/providers/dvp).
const REQUIRED: &[Access] = &[
    access(
        "list",
        VIRT,
        "virtualmachines",
        NS,
        "view.rs: the shared VM watch lists",
    ),
    access(
        "watch",
        VIRT,
        "virtualmachines",
        NS,
        "view.rs: the shared VM watch",
    ),
    access(
        "get",
        VIRT,
        "virtualmachines",
        NS,
        "view.rs: a VM missing from the cache is confirmed",
    ),
    access(
        "patch",
        VIRT,
        "virtualmachines",
        NS,
        "lb/mod.rs: per-LB VM labels",
    ),
    access(
        "patch",
        "",
        "services",
        NS,
        "lb/mod.rs: server-side apply of the parent Service",
    ),
    access(
        "create",
        "",
        "services",
        NS,
        "lb/mod.rs: an apply that creates the parent Service",
    ),
    access(
        "list",
        "",
        "services",
        NS,
        "lb/mod.rs: the ingress watch lists",
    ),
    access("watch", "", "services", NS, "lb/mod.rs: the ingress watch"),
    access(
        "get",
        "",
        "services",
        NS,
        "lb/mod.rs: a plain Service before a ServiceWithHealthchecks replaces it",
    ),
    access(
        "patch",
        NET,
        "servicewithhealthchecks",
        NS,
        "lb/mod.rs: server-side apply of the ServiceWithHealthchecks",
    ),
    access(
        "create",
        NET,
        "servicewithhealthchecks",
        NS,
        "lb/mod.rs: an apply that creates it",
    ),
    access(
        "list",
        NET,
        "servicewithhealthchecks",
        NS,
        "lb/mod.rs: the ServiceWithHealthchecks ingress watch lists",
    ),
    access(
        "watch",
        NET,
        "servicewithhealthchecks",
        NS,
        "lb/mod.rs: the ServiceWithHealthchecks ingress watch",
    ),
    access(
        "delete",
        NET,
        "servicewithhealthchecks",
        NS,
        "lb/mod.rs: the tenant Service was deleted",
    ),
    access(
        "get",
        "deckhouse.io",
        "moduleconfigs",
        None,
        "lb/swhc.rs: whether the platform's ServiceWithHealthchecks controller is on",
    )
    .named("service-with-healthchecks"),
    access(
        "delete",
        "",
        "services",
        NS,
        "lb/mod.rs: the tenant Service was deleted",
    ),
];

/// What it must never be able to do.
const FORBIDDEN: &[Access] = &[
    access(
        "create",
        VIRT,
        "virtualmachines",
        NS,
        "machines are capdvp's",
    ),
    access(
        "delete",
        VIRT,
        "virtualmachines",
        NS,
        "machines are capdvp's",
    ),
    access(
        "update",
        VIRT,
        "virtualmachines",
        NS,
        "labels by merge patch only",
    ),
    access(
        "patch",
        VIRT,
        "virtualmachines/status",
        NS,
        "status is the platform's",
    ),
    access("get", "", "secrets", NS, "no secret is read"),
    access(
        "create",
        VIRT,
        "virtualdisks",
        NS,
        "disks are the CSI driver's",
    ),
    access(
        "list",
        VIRT,
        "virtualmachines",
        Some("default"),
        "only the tenant namespace",
    ),
    access("list", VIRT, "virtualmachines", None, "never cluster-wide"),
    access(
        "get",
        "deckhouse.io",
        "moduleconfigs",
        None,
        "only the one ModuleConfig",
    )
    .named("virtualization"),
    access(
        "list",
        "deckhouse.io",
        "moduleconfigs",
        None,
        "only the one ModuleConfig",
    ),
    access(
        "patch",
        "",
        "services",
        Some("default"),
        "only the tenant namespace",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_parent_role_is_least_privilege() {
    let env = DvpEnv::start().await.expect("DVP environment");
    let account = "stratus-dvp-cloud-controller-manager";
    let rules = parent_role_rules().unwrap();
    env.bound_account_env(account, rules.clone())
        .await
        .expect("bind the shipped Role");
    let admin = env.parent_admin().await.unwrap();
    bind_parent_cluster_role(&admin, TENANT_NAMESPACE, account)
        .await
        .expect("bind the shipped ClusterRole");
    LeastPrivilege {
        who: Who::service_account(TENANT_NAMESPACE, account),
        rbac: ShippedRbac {
            cluster: parent_cluster_role_rules().unwrap(),
            namespaced: rules,
            namespace: TENANT_NAMESPACE.into(),
        },
        required: REQUIRED,
        forbidden: FORBIDDEN,
        variant_prefix: "stratus-dvp-minimality",
    }
    .prove(&admin)
    .await
    .unwrap();
}
