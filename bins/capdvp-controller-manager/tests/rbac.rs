//! Least privilege of capdvp in both clusters, per verb: the parent Role and ClusterRole
//! (`deploy/dvp/capdvp-parent-rbac.yaml`) and the management rules of the chart
//! (`charts/capdvp-controller-manager/files/management-rules.yaml` plus the leader-election Role)
//! allow every call capdvp makes, none of what it must never do, and removing any verb denies a
//! call the code makes. (The end-to-end tests run capdvp under exactly these rules.)

mod common;

use common::{
    bind_shipped, lease_rules, management_rules, review_rules, rules, PARENT_ACCOUNT, PARENT_RBAC,
};
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};
use stratus_testenv::dvp::TENANT_NAMESPACE;
use stratus_testenv::{DvpEnv, Identity};

const NS: Option<&str> = Some(TENANT_NAMESPACE);
const VIRT: &str = "virtualization.deckhouse.io";
const VMS: &str = "virtualmachines";
const DISKS: &str = "virtualdisks";
const VMBDAS: &str = "virtualmachineblockdeviceattachments";

/// Every parent call (crates/capdvp/src/parent.rs and the watches in controllers.rs).
const PARENT_REQUIRED: &[Access] = &[
    access("list", VIRT, VMS, NS, "the VM watch lists"),
    access("watch", VIRT, VMS, NS, "the VM watch"),
    access("create", VIRT, VMS, NS, "a machine's VM"),
    access("get", VIRT, VMS, NS, "read back after a create cut short"),
    access("delete", VIRT, VMS, NS, "a deleted machine's VM"),
    access(
        "patch",
        VIRT,
        VMS,
        NS,
        "UpdateMachine: run and live-migration policies in place",
    ),
    access("list", VIRT, DISKS, NS, "the disk watch lists"),
    access("watch", VIRT, DISKS, NS, "the disk watch"),
    access("create", VIRT, DISKS, NS, "boot and additional disks"),
    access("delete", VIRT, DISKS, NS, "a deleted machine's disks"),
    access("list", VIRT, VMBDAS, NS, "the attachment watch lists"),
    access("watch", VIRT, VMBDAS, NS, "the attachment watch"),
    access("delete", VIRT, VMBDAS, NS, "detach before the VM goes"),
    access("get", VIRT, "virtualimages", NS, "the boot image exists"),
    access(
        "get",
        VIRT,
        "virtualdisksnapshots",
        NS,
        "the boot snapshot exists",
    ),
    access("create", "", "secrets", NS, "the cloud-init Secret"),
    access(
        "delete",
        "",
        "secrets",
        NS,
        "the cloud-init Secret goes with the VM",
    ),
    access(
        "get",
        VIRT,
        "virtualmachineclasses",
        None,
        "the VM class exists",
    ),
    access(
        "get",
        VIRT,
        "clustervirtualimages",
        None,
        "the cluster image exists",
    ),
];

const PARENT_FORBIDDEN: &[Access] = &[
    access(
        "update",
        VIRT,
        VMS,
        NS,
        "VMs are patched (policies in place), never replaced",
    ),
    access(
        "patch",
        VIRT,
        "virtualmachines/status",
        NS,
        "status is the platform's",
    ),
    access(
        "create",
        VIRT,
        VMBDAS,
        NS,
        "attachments are the CSI driver's",
    ),
    access("get", "", "secrets", NS, "no Secret is read"),
    access("list", "", "secrets", NS, "no Secret is read"),
    access("patch", "", "services", NS, "load balancers are the CCM's"),
    access(
        "list",
        VIRT,
        VMS,
        Some("default"),
        "only the tenant namespace",
    ),
    access(
        "list",
        VIRT,
        "virtualmachineclasses",
        None,
        "one class is read by name",
    ),
    access(
        "create",
        VIRT,
        "virtualmachineclasses",
        None,
        "classes are the platform's",
    ),
];

const INFRA: &str = "infrastructure.cluster.x-k8s.io";
const CAPI: &str = "cluster.x-k8s.io";

/// Every management call (crates/capdvp/src/machine.rs, cluster.rs, controllers.rs, app.rs).
const MGMT_REQUIRED: &[Access] = &[
    access(
        "create",
        "authentication.k8s.io",
        "tokenreviews",
        None,
        "bearer tokens on /metrics",
    ),
    access(
        "create",
        "authorization.k8s.io",
        "subjectaccessreviews",
        None,
        "access to /metrics",
    ),
    access(
        "list",
        INFRA,
        "deckhousemachines",
        None,
        "the machine watch lists",
    ),
    access(
        "watch",
        INFRA,
        "deckhousemachines",
        None,
        "the machine watch",
    ),
    access(
        "patch",
        INFRA,
        "deckhousemachines",
        None,
        "finalizer, providerID, orphan notes",
    ),
    access(
        "patch",
        INFRA,
        "deckhousemachines/status",
        None,
        "the machine status",
    ),
    access(
        "list",
        INFRA,
        "deckhouseclusters",
        None,
        "the cluster watch lists",
    ),
    access(
        "watch",
        INFRA,
        "deckhouseclusters",
        None,
        "the cluster watch",
    ),
    access(
        "patch",
        INFRA,
        "deckhouseclusters/status",
        None,
        "provisioned",
    ),
    access(
        "list",
        CAPI,
        "machines",
        None,
        "owner and bootstrap Secret name",
    ),
    access(
        "watch",
        CAPI,
        "machines",
        None,
        "owner and bootstrap Secret name",
    ),
    access("list", CAPI, "clusters", None, "infrastructure provisioned"),
    access(
        "watch",
        CAPI,
        "clusters",
        None,
        "infrastructure provisioned",
    ),
    access("get", "", "secrets", None, "the bootstrap data"),
    access(
        "create",
        "events.k8s.io",
        "events",
        None,
        "refusals, orphans",
    ),
    access("patch", "events.k8s.io", "events", None, "repeated Events"),
    access(
        "get",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        "leader election",
    ),
    access(
        "create",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        "leader election",
    ),
    access(
        "update",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        "leader election",
    ),
];

const MGMT_FORBIDDEN: &[Access] = &[
    access(
        "create",
        INFRA,
        "deckhousemachines",
        None,
        "Cluster API clones them",
    ),
    access(
        "delete",
        INFRA,
        "deckhousemachines",
        None,
        "Cluster API deletes them",
    ),
    access("update", INFRA, "deckhousemachines", None, "patches only"),
    access(
        "patch",
        CAPI,
        "machines",
        None,
        "Cluster API's objects are read only",
    ),
    access(
        "delete",
        CAPI,
        "machines",
        None,
        "Cluster API's objects are read only",
    ),
    access(
        "list",
        "",
        "secrets",
        None,
        "bootstrap Secrets are read by name",
    ),
    access("create", "", "secrets", None, "no Secret is written here"),
    access(
        "delete",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        "leases are renewed, not deleted",
    ),
    access(
        "get",
        "coordination.k8s.io",
        "leases",
        Some("default"),
        "one namespace's leases",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capdvp_rbac_is_least_privilege_in_both_clusters() {
    let env = DvpEnv::start().await.expect("DVP environment");
    let mgmt = env.tenant.kube_client(Identity::Admin).await.unwrap();
    let parent = env.parent_admin().await.unwrap();
    bind_shipped(&env, &mgmt, &parent)
        .await
        .expect("bind the shipped roles");
    LeastPrivilege {
        who: Who::service_account(TENANT_NAMESPACE, PARENT_ACCOUNT),
        rbac: ShippedRbac {
            cluster: rules(PARENT_RBAC, "ClusterRole"),
            namespaced: rules(PARENT_RBAC, "Role"),
            namespace: TENANT_NAMESPACE.into(),
        },
        required: PARENT_REQUIRED,
        forbidden: PARENT_FORBIDDEN,
        variant_prefix: "stratus-capdvp-parent-minimality",
    }
    .prove(&parent)
    .await
    .unwrap();
    LeastPrivilege {
        who: Who::service_account("kube-system", "cloud-controller-manager"),
        rbac: ShippedRbac {
            cluster: management_rules()
                .into_iter()
                .chain(review_rules())
                .collect(),
            namespaced: lease_rules(),
            namespace: "kube-system".into(),
        },
        required: MGMT_REQUIRED,
        forbidden: MGMT_FORBIDDEN,
        variant_prefix: "stratus-capdvp-mgmt-minimality",
    }
    .prove(&mgmt)
    .await
    .unwrap();
}
