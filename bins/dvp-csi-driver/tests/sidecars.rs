//! The real Kubernetes flow of the DVP driver: the upstream external-provisioner and
//! external-attacher (built by the test environment) and kube-controller-manager's
//! persistent-volume binder against the tenant cluster's real kube-apiserver, the driver's
//! controller talking to the parent cluster's apiserver as a ServiceAccount bound to the shipped
//! parent Role, the platform simulator playing the virtualization controllers. The sidecars
//! authenticate as the chart's ServiceAccount with the chart's RBAC applied and run with the
//! chart's arguments. A PVC gets a PV backed by a VirtualDisk labelled as Deckhouse labels it; a
//! VolumeAttachment hot-plugs it with one VMBDA. The attachment is stalled by the simulator: the
//! attacher sees the driver's deadline error (Unavailable, retried), the controller pod is
//! SIGKILLed while the VMBDA is in progress, and once the platform attaches, there is exactly one
//! VMBDA and the VolumeAttachment is attached. Deleting both leaves zero VirtualDisks and VMBDAs.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use common::{
    driver_env, node_vm, parent_objects, start_driver, wait_parent_empty, CHART, CLUSTER_UUID,
    NODE, PARENT_CLASS, VM,
};
use kube::api::{Api, ObjectMeta};
use stratus_csi_dvp::names::{vmbda_name, DISK_NAME_LABEL, VMBDA_DISK_LABEL, VMBDA_VM_LABEL};
use stratus_csi_dvp::{DRIVER_NAME, STORAGE_CLASS_PARAM};
use stratus_dvp_api::labels::{CLUSTER_UUID as CLUSTER_UUID_LABEL, MANAGED_BY};
use stratus_dvp_api::{VirtualDisk, VirtualMachineBlockDeviceAttachment};
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::csi::harness::{self, ControllerSide, Kcm, Pod, Sidecar, Tools};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::DvpEnv;

/// How long each step of the flow may take.
const STEP: Duration = Duration::from_secs(60);
/// How long the whole flow may take.
const FLOW_DEADLINE: Duration = Duration::from_secs(300);
/// The driver's log and the sidecars' beside it.
const LOGS: [&str; 4] = ["driver.log", "provisioner.log", "attacher.log", "kcm.log"];

/// The controller side and what a controller pod needs.
struct Setup<'a> {
    dir: &'a Path,
    side: ControllerSide,
    vars: Vec<(String, String)>,
}

impl Setup<'_> {
    /// Starts the controller pod: the driver (no node service) and its provisioner and attacher.
    async fn start_pod(&self) -> Result<Pod> {
        let (driver, socket) = start_driver(
            &self.vars,
            self.dir,
            NODE,
            &["--provide-node-service=false"],
        )
        .await?;
        self.side.start_pod(driver, &socket)
    }
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

async fn flow(env: &DvpEnv, dir: &Path, tools: &Tools) -> Result<()> {
    let sidecars = [Sidecar::Provisioner, Sidecar::Attacher];
    let side =
        ControllerSide::start(&env.tenant, tools, &CHART, Kcm::default(), &sidecars, dir).await?;
    let admin = side.admin.clone();
    node_vm(env, VM, NODE).await?;
    csi_flow::node_objects(&admin, NODE, DRIVER_NAME, NODE, Default::default()).await?;
    let setup = Setup {
        dir,
        side,
        vars: driver_env(env).await?,
    };
    let parent = env.parent_admin().await?;
    let disks = Api::<VirtualDisk>::namespaced(parent.clone(), env.namespace());
    let vmbdas = Api::<VirtualMachineBlockDeviceAttachment>::namespaced(parent, env.namespace());

    // PVC → PV → VirtualDisk in the parent.
    let mut pod = setup.start_pod().await?;
    let claims = Claims {
        admin: admin.clone(),
        driver: DRIVER_NAME.into(),
        class: "dvp".into(),
        device_key: String::new(),
    };
    claims
        .create_class(&[(STORAGE_CLASS_PARAM, PARENT_CLASS)])
        .await?;
    claims.create_pvc("data", 2).await?;
    let (pv_name, volume_id) = claims.wait_bound("data", STEP).await?;
    anyhow::ensure!(
        volume_id == pv_name,
        "the VirtualDisk is named as the volume ({pv_name}), not {volume_id}"
    );
    let disk = disks.get(&volume_id).await?;
    let pvc_spec = disk
        .spec
        .persistent_volume_claim
        .clone()
        .unwrap_or_default();
    anyhow::ensure!(
        label(&disk.metadata, MANAGED_BY) == Some("deckhouse")
            && label(&disk.metadata, CLUSTER_UUID_LABEL) == Some(CLUSTER_UUID)
            && label(&disk.metadata, DISK_NAME_LABEL) == Some(volume_id.as_str())
            && pvc_spec.size.as_deref() == Some("2147483648")
            && pvc_spec.storage_class_name.as_deref() == Some(PARENT_CLASS),
        "the VirtualDisk is not what the PVC asked for: {disk:?}"
    );

    // VolumeAttachment → VMBDA; the platform stalls it: the attacher gets the driver's deadline
    // error, the pod is SIGKILLed while the VMBDA is in progress, then the platform attaches.
    env.sim().set_knobs(|k| k.stall_attachments = true);
    let vas = claims.vas();
    claims.attach("csi-data", &pv_name, NODE).await?;
    let mine = vmbda_name(&volume_id, NODE);
    wait_for("the VMBDA to be in progress", STEP, || async {
        let a = vmbdas.get_opt(&mine).await?;
        Ok(
            a.filter(|a| a.status.as_ref().is_some_and(|s| s.phase == "InProgress"))
                .map(|_| ()),
        )
    })
    .await?;
    let error = wait_for(
        "the attacher to record the deadline error",
        STEP,
        || async {
            let va = vas.get("csi-data").await?;
            Ok(va
                .status
                .and_then(|s| s.attach_error)
                .and_then(|e| e.message))
        },
    )
    .await?;
    anyhow::ensure!(
        error.contains("Unavailable") && error.contains("not Attached"),
        "a stalled attachment answers a retryable deadline error, got {error:?}"
    );
    pod.kill().await?;
    let mut pod = setup.start_pod().await?;
    env.sim().set_knobs(|k| k.stall_attachments = false);
    wait_for("the VolumeAttachment to be attached", STEP, || async {
        let va = vas.get("csi-data").await?;
        Ok(va.status.is_some_and(|s| s.attached).then_some(()))
    })
    .await?;
    let (_, names) = parent_objects(env).await?;
    anyhow::ensure!(
        names == vec![mine.clone()],
        "exactly one VMBDA ({mine}) after the crash: {names:?}"
    );
    let a = vmbdas.get(&mine).await?;
    let owner = a.metadata.owner_references.clone().unwrap_or_default();
    anyhow::ensure!(
        a.spec.virtual_machine_name == VM
            && a.spec.block_device_ref.name == volume_id
            && label(&a.metadata, VMBDA_DISK_LABEL) == Some(volume_id.as_str())
            && label(&a.metadata, VMBDA_VM_LABEL) == Some(VM)
            && owner.len() == 1
            && owner[0].kind == "VirtualMachine"
            && owner[0].name == VM
            && a.status.as_ref().is_some_and(|s| s.phase == "Attached"),
        "the VMBDA is not what the attachment needs: {a:?}"
    );

    // Deletion: detach, then the claim, then nothing is left in the parent.
    claims.detach("csi-data", STEP).await?;
    anyhow::ensure!(
        vmbdas.get_opt(&mine).await?.is_none(),
        "{mine} is left after its VolumeAttachment is gone"
    );
    claims.delete_claim("data", &pv_name, STEP).await?;
    wait_parent_empty(env, STEP).await?;
    pod.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_to_hot_plugged_disk_and_back_surviving_a_crash_and_a_stall() -> Result<()> {
    // Built once per machine (minutes the first time), outside the flow's deadline.
    let tools = Tools::install().await?;
    let env = DvpEnv::start().await?;
    let dir = tempfile::tempdir()?;
    let dir_path: PathBuf = dir.path().to_path_buf();
    harness::within(
        "the sidecar flow",
        FLOW_DEADLINE,
        &dir_path,
        &LOGS,
        flow(&env, &dir_path, &tools),
    )
    .await
}
