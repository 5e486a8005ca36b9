//! Least privilege of the DVP CSI driver in the parent cluster: the shipped Role
//! (`deploy/dvp/csi-parent-rbac.yaml`) allows every call the controller makes in the tenant
//! namespace, none of what it must never do, and removing any verb denies a call the code makes.
//! (csi-sanity, the sidecar flow and the faults test run the driver under this same Role.)

mod common;

use common::{driver_env, PARENT_ACCOUNT, PARENT_RBAC};
use stratus_scenarios::dvp_rbac::rules_in;
use stratus_testenv::core::rbac_check::{access, Access, LeastPrivilege, ShippedRbac, Who};
use stratus_testenv::dvp::TENANT_NAMESPACE;
use stratus_testenv::DvpEnv;

const NS: Option<&str> = Some(TENANT_NAMESPACE);
const VIRT: &str = "virtualization.deckhouse.io";
const DISKS: &str = "virtualdisks";
const VMBDAS: &str = "virtualmachineblockdeviceattachments";
const VMS: &str = "virtualmachines";

/// Every parent call of the controller (crates/csi-dvp/src/parent.rs).
const REQUIRED: &[Access] = &[
    access("get", VIRT, DISKS, NS, "a volume's disk, the waits"),
    access(
        "list",
        VIRT,
        DISKS,
        NS,
        "ListVolumes by the cluster's labels",
    ),
    access("create", VIRT, DISKS, NS, "CreateVolume"),
    access("patch", VIRT, DISKS, NS, "ControllerExpandVolume"),
    access("delete", VIRT, DISKS, NS, "DeleteVolume"),
    access("get", VIRT, VMBDAS, NS, "waiting for Attached / gone"),
    access("list", VIRT, VMBDAS, NS, "the disk's attachments by label"),
    access("create", VIRT, VMBDAS, NS, "ControllerPublishVolume"),
    access("delete", VIRT, VMBDAS, NS, "ControllerUnpublishVolume"),
    access("list", VIRT, VMS, NS, "the node's VM by its hostname label"),
    access("get", VIRT, VMS, NS, "the node's VM by name"),
];

/// What it must never be able to do.
const FORBIDDEN: &[Access] = &[
    access("create", VIRT, VMS, NS, "machines are capdvp's"),
    access(
        "patch",
        VIRT,
        VMS,
        NS,
        "machines are capdvp's and the CCM's",
    ),
    access("delete", VIRT, VMS, NS, "machines are capdvp's"),
    access(
        "patch",
        VIRT,
        "virtualdisks/status",
        NS,
        "status is the platform's",
    ),
    access(
        "patch",
        VIRT,
        VMBDAS,
        NS,
        "attachments are created and deleted only",
    ),
    access("get", "", "secrets", NS, "no secret is read"),
    access("patch", "", "services", NS, "load balancers are the CCM's"),
    access(
        "list",
        VIRT,
        DISKS,
        Some("default"),
        "only the tenant namespace",
    ),
    access("list", VIRT, DISKS, None, "never cluster-wide"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_csi_parent_role_is_least_privilege() {
    let env = DvpEnv::start().await.expect("DVP environment");
    driver_env(&env).await.expect("bind the shipped Role");
    let admin = env.parent_admin().await.unwrap();
    LeastPrivilege {
        who: Who::service_account(TENANT_NAMESPACE, PARENT_ACCOUNT),
        rbac: ShippedRbac {
            cluster: Vec::new(),
            namespaced: rules_in(PARENT_RBAC, "Role").unwrap(),
            namespace: TENANT_NAMESPACE.into(),
        },
        required: REQUIRED,
        forbidden: FORBIDDEN,
        variant_prefix: "stratus-dvp-csi-minimality",
    }
    .prove(&admin)
    .await
    .unwrap();
}
