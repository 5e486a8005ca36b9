//! Least privilege of the chart's RBAC (`charts/module-controller`), on a real kube-apiserver by
//! `stratus_testenv::core::rbac_check`: every access the code makes is allowed, accesses it must
//! never have are denied, and removing any single verb of any rule denies an access the code
//! makes. (The Lease Role in the release namespace is proven by the binary's test, which elects
//! under it.)

use anyhow::Result;
use stratus_scenarios::csi::harness::chart_account;
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};
use stratus_testenv::KubeCluster;

mod common;

const KS: Option<&str> = Some("kube-system");
const READ: &[&str] = &[
    "d8-provider-cluster-configuration",
    "d8-cloud-provider-discovery-data",
    "d8-node-manager-cloud-provider",
    "d8-node-manager-cloud-provider-aws",
    "d8-node-manager-cloud-provider-openstack",
    "d8-node-manager-cloud-provider-dvp",
];

/// The status ConfigMaps, one per module.
const STATUS: &[&str] = &[
    "cloud-provider-aws-status",
    "cloud-provider-openstack-status",
    "cloud-provider-dvp-status",
];

/// Every call of `crates/module/src`.
fn required() -> Vec<Access> {
    let mut required = vec![
        access(
            "get",
            "storage.k8s.io",
            "storageclasses",
            None,
            "objects.rs delete_and_wait",
        ),
        access(
            "list",
            "storage.k8s.io",
            "storageclasses",
            None,
            "objects.rs storage_classes",
        ),
        access(
            "watch",
            "storage.k8s.io",
            "storageclasses",
            None,
            "app.rs triggers",
        ),
        access(
            "create",
            "storage.k8s.io",
            "storageclasses",
            None,
            "objects.rs",
        ),
        access(
            "patch",
            "storage.k8s.io",
            "storageclasses",
            None,
            "objects.rs",
        ),
        access(
            "delete",
            "storage.k8s.io",
            "storageclasses",
            None,
            "objects.rs",
        ),
        access(
            "get",
            "snapshot.storage.k8s.io",
            "volumesnapshotclasses",
            None,
            "objects.rs",
        ),
        access(
            "list",
            "snapshot.storage.k8s.io",
            "volumesnapshotclasses",
            None,
            "objects.rs",
        ),
        access(
            "create",
            "snapshot.storage.k8s.io",
            "volumesnapshotclasses",
            None,
            "objects.rs",
        ),
        access("list", "", "nodes", None, "objects.rs mark_spot_nodes"),
        access("watch", "", "nodes", None, "app.rs triggers"),
        access("patch", "", "nodes", None, "objects.rs mark_spot_nodes"),
        access("get", "deckhouse.io", "moduleconfigs", None, "inputs.rs"),
        access(
            "list",
            "deckhouse.io",
            "moduleconfigs",
            None,
            "inputs.rs served check",
        ),
        access(
            "watch",
            "deckhouse.io",
            "moduleconfigs",
            None,
            "app.rs triggers",
        ),
        access(
            "create",
            "events.k8s.io",
            "events",
            KS,
            "driver/mod.rs report",
        ),
        access(
            "patch",
            "events.k8s.io",
            "events",
            KS,
            "driver/mod.rs report",
        ),
        access("create", "", "secrets", KS, "objects.rs ensure_secret"),
        access(
            "create",
            "",
            "configmaps",
            KS,
            "objects.rs write_conditions",
        ),
    ];
    for name in STATUS {
        required
            .push(access("get", "", "configmaps", KS, "objects.rs read_conditions").named(name));
        required.push(
            access(
                "update",
                "",
                "configmaps",
                KS,
                "objects.rs write_conditions",
            )
            .named(name),
        );
    }
    for name in READ {
        for verb in ["get", "list", "watch"] {
            required.push(access(verb, "", "secrets", KS, "inputs.rs, app.rs").named(name));
        }
    }
    for name in &READ[2..] {
        required.push(access("update", "", "secrets", KS, "objects.rs ensure_secret").named(name));
    }
    required
}

/// What it must never be able to do.
const FORBIDDEN: &[Access] = &[
    access("get", "", "secrets", KS, "another Secret").named("d8-other"),
    access("list", "", "secrets", KS, "every Secret"),
    access(
        "update",
        "",
        "secrets",
        KS,
        "the configuration is Deckhouse's",
    )
    .named("d8-provider-cluster-configuration"),
    access(
        "update",
        "",
        "secrets",
        KS,
        "the discovery data is the discoverer's",
    )
    .named("d8-cloud-provider-discovery-data"),
    access("delete", "", "secrets", KS, "never").named("d8-node-manager-cloud-provider"),
    access("get", "", "secrets", Some("default"), "other namespaces")
        .named("d8-provider-cluster-configuration"),
    access("get", "", "configmaps", KS, "another ConfigMap").named("kube-proxy"),
    access("update", "", "configmaps", KS, "another ConfigMap").named("d8-cluster-uuid"),
    access("list", "", "configmaps", KS, "every ConfigMap"),
    access("delete", "", "configmaps", KS, "never").named("cloud-provider-aws-status"),
    access("delete", "", "nodes", None, "never").named("n"),
    access("update", "", "nodes", None, "patches only").named("n"),
    access(
        "patch",
        "deckhouse.io",
        "moduleconfigs",
        None,
        "settings are the user's",
    )
    .named("cloud-provider-aws"),
    access(
        "delete",
        "snapshot.storage.k8s.io",
        "volumesnapshotclasses",
        None,
        "never",
    )
    .named("aws"),
    access(
        "get",
        "",
        "persistentvolumeclaims",
        Some("default"),
        "never",
    )
    .named("data"),
];

#[tokio::test]
async fn chart_rbac_is_least_privilege() -> Result<()> {
    let cluster = KubeCluster::start().await?;
    let account = chart_account(&cluster, &common::CHART, cluster.dir()).await?;
    // The ClusterRole and the kube-system Role (the election Role is another namespace's in a
    // real release).
    let manifest: String = account
        .chart
        .rbac
        .split("\n---")
        .filter(|doc| !doc.contains("module-controller-election"))
        .collect::<Vec<_>>()
        .join("\n---");
    let required = required();
    LeastPrivilege {
        who: Who::service_account("kube-system", "module-controller"),
        rbac: ShippedRbac::from_manifest(&manifest)?,
        required: &required,
        forbidden: FORBIDDEN,
        variant_prefix: "module-minimality",
    }
    .prove(&account.admin)
    .await
}
