//! Least privilege of the handler's shipped RBAC (`deploy/node-termination-handler/rbac.yaml`,
//! which `tests/chart.rs` keeps equal to the chart's), proven on a real kube-apiserver by
//! `stratus_testenv::core::rbac_check`: every access the code makes is allowed, a list of things the
//! handler must never do is denied, and removing any single verb of any rule denies at least one
//! access the code makes.

use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, ListParams};
use kube::Client;
use stratus_scenarios::kube_fixture::repo_root;
use stratus_scenarios::nth_fixture::{NthCluster, RBAC};
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};

/// Every Kubernetes API call the handler makes (`crates/termination/src`), both modes.
const REQUIRED: &[Access] = &[
    access("get", "", "nodes", None,
        "node.rs NodeWriter::get: handler.rs mark_for_reboot and remove_marks, imds_mode.rs after-reboot check"),
    access("list", "", "nodes", None, "queue/nodes.rs: the node store's watcher (initial list)"),
    access("watch", "", "nodes", None, "queue/nodes.rs: the node store's watcher"),
    access("patch", "", "nodes", None, "node.rs: cordon, labels, taints"),
    access("list", "", "pods", None, "drain.rs list_pods: spec.nodeName field selector, all namespaces"),
    access("delete", "", "pods", Some("default"), "drain.rs force_delete at the close of the window"),
    access("create", "", "pods/eviction", Some("default"), "drain.rs evict"),
    access("create", "", "events", Some("default"), "events.rs Recorder::emit (Nodes: namespace default; Pods: theirs)"),
    access("get", "coordination.k8s.io", "leases", Some("kube-system"), "election/elector.rs (queue mode)"),
    access("create", "coordination.k8s.io", "leases", Some("kube-system"), "election/elector.rs (queue mode)"),
    access("update", "coordination.k8s.io", "leases", Some("kube-system"), "election/elector.rs (queue mode)"),
];

/// What the handler must not be able to do.
const FORBIDDEN: &[Access] = &[
    access("update", "", "nodes", None, "only patches"),
    access("delete", "", "nodes", None, "never deletes nodes"),
    access("create", "", "nodes", None, "kubelets register nodes"),
    access("create", "", "pods", Some("default"), "no workloads"),
    access(
        "patch",
        "",
        "pods",
        Some("default"),
        "pods are evicted, never edited",
    ),
    access("get", "", "secrets", Some("kube-system"), "no secrets"),
    access("list", "", "secrets", None, "no secrets"),
    access(
        "get",
        "apps",
        "daemonsets",
        Some("default"),
        "ownerReferences suffice (upstream's chart grants this)",
    ),
    access(
        "patch",
        "",
        "events",
        Some("default"),
        "events are created once",
    ),
    access(
        "delete",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        "locks are not deleted",
    ),
    access(
        "update",
        "coordination.k8s.io",
        "leases",
        Some("default"),
        "only its own namespace",
    ),
    access("impersonate", "", "users", None, "no impersonation"),
    access(
        "escalate",
        "rbac.authorization.k8s.io",
        "clusterroles",
        None,
        "no escalation",
    ),
];

#[tokio::test(flavor = "multi_thread")]
async fn shipped_rbac_is_exactly_what_the_code_needs() {
    let cluster = NthCluster::start().await.expect("cluster");
    let admin = cluster.admin.clone();
    let manifest = std::fs::read_to_string(repo_root().join(RBAC)).unwrap();
    let rbac = ShippedRbac::from_manifest(&manifest).unwrap();
    assert_eq!(rbac.namespace, "kube-system");
    LeastPrivilege {
        who: Who::service_account("kube-system", "aws-node-termination-handler"),
        rbac,
        required: REQUIRED,
        forbidden: FORBIDDEN,
        variant_prefix: "nth-minimality",
    }
    .prove(&admin)
    .await
    .unwrap();

    // The reviews are about the identity the handler really authenticates as (its token).
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&cluster.kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let as_nth = Client::try_from(config).unwrap();
    Api::<Node>::all(as_nth.clone())
        .list(&ListParams::default())
        .await
        .expect("lists nodes");
    Api::<Pod>::all(as_nth.clone())
        .list(&ListParams::default())
        .await
        .expect("lists pods");
    let denied = Api::<Secret>::namespaced(as_nth, "kube-system")
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(&denied, Err(kube::Error::Api(s)) if s.code == 403),
        "{denied:?}"
    );
}
