//! The real Kubernetes flow of the Cinder driver: the upstream external-provisioner,
//! external-attacher and external-resizer (built by the test environment) and kube-controller-manager's
//! persistent-volume binder against the real kube-apiserver, the driver's controller on
//! Keystone and the Cinder/Nova simulators. The sidecars authenticate as the chart's
//! ServiceAccount with the chart's RBAC applied and run with the chart's arguments. A PVC gets a
//! PV backed by a new Cinder volume carrying the cluster's and the PVC's metadata; a
//! VolumeAttachment attaches it to the node's server through Nova; a bigger claim extends the
//! volume in Cinder and grows the PV; deleting both leaves zero volumes. The controller pod is SIGKILLed while Cinder is still creating the volume and again
//! while Nova is still attaching it: after the restart there is exactly one volume and one
//! attachment.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use common::{start_driver_with, CLUSTER, ZONE};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{
    StorageClass, VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use stratus_csi_cinder::{CLUSTER_KEY, DEVICE_PATH, DRIVER_NAME, TOPOLOGY_KEY};
use stratus_openstack_sim::attachments::AttachState;
use stratus_openstack_sim::SimHandle;
use stratus_scenarios::csi_flow::{
    self, kubeconfig_with_token, log_tails, sidecar_args, spawn, RenderedChart,
};
use stratus_scenarios::kube_fixture::apply_rbac_manifest;
use stratus_scenarios::nth_fixture::service_account_token;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::tools::csi_sidecars::{self, Sidecars};
use stratus_testenv::tools::kube_controller_manager;
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};
use tokio::process::Child;

const NAMESPACE: &str = "kube-system";
const CONTROLLER_SA: &str = "csi-cinder-controller-sa";
const NODE: &str = "node-1";
/// How long each step of the flow may take.
const STEP: Duration = Duration::from_secs(60);
/// How long the whole flow may take.
const FLOW_DEADLINE: Duration = Duration::from_secs(300);
/// The driver's log and the sidecars' beside it.
const LOGS: [&str; 5] = [
    "driver.log",
    "provisioner.log",
    "attacher.log",
    "resizer.log",
    "kcm.log",
];

/// The controller pod: the driver and its sidecars, started and SIGKILLed together.
struct ControllerPod {
    driver: Child,
    provisioner: Child,
    attacher: Child,
    resizer: Child,
}

struct Setup<'a> {
    openstack: &'a OpenStackEnv,
    dir: &'a Path,
    sidecars: &'a Sidecars,
    chart: RenderedChart,
    kubeconfig: PathBuf,
    node_server: String,
}

impl Setup<'_> {
    async fn start_pod(&self) -> Result<ControllerPod> {
        let (driver, socket) = start_driver_with(
            self.openstack,
            self.dir,
            &self.node_server,
            &["--provide-node-service=false"],
        )
        .await?;
        let provisioner = spawn(
            &self.sidecars.provisioner,
            &sidecar_args(
                &self.chart,
                "csi-provisioner",
                &socket,
                &self.kubeconfig,
                NAMESPACE,
            )?,
            &self.dir.join("provisioner.log"),
            &[],
        )?;
        let attacher = spawn(
            &self.sidecars.attacher,
            &sidecar_args(
                &self.chart,
                "csi-attacher",
                &socket,
                &self.kubeconfig,
                NAMESPACE,
            )?,
            &self.dir.join("attacher.log"),
            &[],
        )?;
        let resizer = spawn(
            &self.sidecars.resizer,
            &sidecar_args(
                &self.chart,
                "csi-resizer",
                &socket,
                &self.kubeconfig,
                NAMESPACE,
            )?,
            &self.dir.join("resizer.log"),
            &[],
        )?;
        Ok(ControllerPod {
            driver,
            provisioner,
            attacher,
            resizer,
        })
    }
}

impl ControllerPod {
    /// SIGKILLs every container and reaps it.
    async fn kill(mut self) -> Result<()> {
        for child in [
            &mut self.driver,
            &mut self.provisioner,
            &mut self.attacher,
            &mut self.resizer,
        ] {
            child.kill().await?;
        }
        Ok(())
    }
}

async fn flow(
    cluster: &KubeCluster,
    openstack: &OpenStackEnv,
    dir: &Path,
    sidecars: &Sidecars,
    kcm: &Path,
) -> Result<()> {
    let sim: &SimHandle = openstack.sim().context("the simulator runs in process")?;
    let chart = tokio::task::spawn_blocking(|| {
        csi_flow::render_chart("cinder-csi-plugin", "cinder", NAMESPACE)
    })
    .await??;
    let admin = cluster.kube_client(Identity::Admin).await?;
    let rbac_file = dir.join("rbac.yaml");
    std::fs::write(&rbac_file, &chart.rbac)?;
    let applied = apply_rbac_manifest(&admin, &rbac_file).await?;
    anyhow::ensure!(
        applied >= 5,
        "the chart rendered only {applied} RBAC objects"
    );
    let token = service_account_token(&admin, NAMESPACE, CONTROLLER_SA).await?;
    let kubeconfig = dir.join("kubeconfig-controller-sa.yaml");
    kubeconfig_with_token(&kubeconfig, cluster.apiserver_url(), &token)?;

    let node_server = common::node_server(openstack, "csi-node-1")?;
    let labels: BTreeMap<String, String> = [(TOPOLOGY_KEY.to_string(), ZONE.to_string())].into();
    csi_flow::node_objects(&admin, NODE, DRIVER_NAME, &node_server, labels).await?;
    let _kcm = spawn(
        kcm,
        &[
            format!("--kubeconfig={}", cluster.kubeconfig(Identity::Admin).display()),
            "--controllers=persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller".into(),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--v=2".into(),
        ],
        &dir.join("kcm.log"),
        &[],
    )?;
    let setup = Setup {
        openstack,
        dir,
        sidecars,
        chart,
        kubeconfig,
        node_server: node_server.clone(),
    };

    // PVC → PV, with the controller pod killed while Cinder is still creating the volume.
    sim.stall_transitions(true);
    let pod = setup.start_pod().await?;
    Api::<StorageClass>::all(admin.clone())
        .create(
            &PostParams::default(),
            &StorageClass {
                metadata: ObjectMeta {
                    name: Some("cinder-ssd".into()),
                    ..Default::default()
                },
                provisioner: DRIVER_NAME.into(),
                parameters: Some([("type".to_string(), "ssd".to_string())].into()),
                reclaim_policy: Some("Delete".into()),
                volume_binding_mode: Some("Immediate".into()),
                allow_volume_expansion: Some(true),
                ..Default::default()
            },
        )
        .await?;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "default");
    pvcs.create(
        &PostParams::default(),
        &PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some("cinder-ssd".into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity("2Gi".into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await?;
    wait_for("Cinder to be creating the volume", STEP, || async {
        Ok(sim
            .volumes()
            .iter()
            .any(|v| v["status"] == "creating")
            .then_some(()))
    })
    .await?;
    pod.kill().await?;
    sim.stall_transitions(false);
    sim.release_stalled();
    let pod = setup.start_pod().await?;
    let pv_name = wait_for("the PVC to be bound to a provisioned PV", STEP, || async {
        let pvc = pvcs.get("data").await?;
        let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        Ok(bound
            .then(|| pvc.spec.and_then(|s| s.volume_name))
            .flatten())
    })
    .await?;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let pv = pvs.get(&pv_name).await?;
    let csi = pv
        .spec
        .as_ref()
        .and_then(|s| s.csi.as_ref())
        .context("the PV has no CSI source")?;
    anyhow::ensure!(csi.driver == DRIVER_NAME, "PV driver {}", csi.driver);
    let volume_id = csi.volume_handle.clone();
    let volumes = sim.volumes();
    anyhow::ensure!(
        volumes.len() == 1 && volumes[0]["id"] == volume_id.as_str(),
        "exactly one volume, the PV's, after the crash: {volumes:?}"
    );
    let v = &volumes[0];
    anyhow::ensure!(
        v["size"] == 2
            && v["volume_type"] == "ssd"
            && v["availability_zone"] == ZONE
            && v["name"] == pv_name.as_str()
            && v["metadata"][CLUSTER_KEY] == CLUSTER
            && v["metadata"]["csi.storage.k8s.io/pvc/name"] == "data",
        "the Cinder volume is not what the PVC asked for: {v}"
    );

    // VolumeAttachment → attached through Nova, with the pod killed while Nova is attaching.
    sim.stall_transitions(true);
    let vas = Api::<VolumeAttachment>::all(admin.clone());
    vas.create(
        &PostParams::default(),
        &VolumeAttachment {
            metadata: ObjectMeta {
                name: Some("csi-data".into()),
                ..Default::default()
            },
            spec: VolumeAttachmentSpec {
                attacher: DRIVER_NAME.into(),
                node_name: NODE.into(),
                source: VolumeAttachmentSource {
                    persistent_volume_name: Some(pv_name.clone()),
                    ..Default::default()
                },
            },
            ..Default::default()
        },
    )
    .await?;
    wait_for("Nova to be attaching the volume", STEP, || async {
        Ok(sim
            .attachments()
            .iter()
            .any(|a| a.state == AttachState::Attaching)
            .then_some(()))
    })
    .await?;
    pod.kill().await?;
    sim.stall_transitions(false);
    sim.release_stalled();
    let pod = setup.start_pod().await?;
    let device = wait_for("the VolumeAttachment to be attached", STEP, || async {
        let va = vas.get("csi-data").await?;
        let status = va.status.unwrap_or_default();
        Ok(status.attached.then(|| {
            status
                .attachment_metadata
                .unwrap_or_default()
                .get(DEVICE_PATH)
                .cloned()
                .unwrap_or_default()
        }))
    })
    .await?;
    let attachments = sim.attachments();
    anyhow::ensure!(
        attachments.len() == 1
            && attachments[0].state == AttachState::Attached
            && attachments[0].server_id == node_server
            && attachments[0].volume_id == volume_id
            && attachments[0].device == device,
        "exactly one attachment of {volume_id} to {node_server} at {device:?} after the crash: {attachments:?}"
    );

    // A bigger claim: the resizer extends the (attached) volume in Cinder and grows the PV.
    pvcs.patch(
        "data",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({
            "spec": {"resources": {"requests": {"storage": "3Gi"}}}
        })),
    )
    .await?;
    wait_for("the PV to grow to 3Gi", STEP, || async {
        let capacity = pvs
            .get(&pv_name)
            .await?
            .spec
            .and_then(|s| s.capacity)
            .and_then(|c| c.get("storage").cloned());
        Ok((capacity == Some(Quantity("3Gi".into()))).then_some(()))
    })
    .await?;
    let volumes = sim.volumes();
    anyhow::ensure!(
        volumes.len() == 1 && volumes[0]["size"] == 3,
        "Cinder does not show the volume at 3 GiB: {volumes:?}"
    );

    // The chart's resizer role is enough: nothing it did was refused.
    let resizer_log = std::fs::read_to_string(dir.join("resizer.log"))?;
    anyhow::ensure!(
        !resizer_log.contains("forbidden"),
        "the resizer was refused something under the chart's RBAC:\n{}",
        resizer_log
            .lines()
            .filter(|l| l.contains("forbidden"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Deletion: detach, then the claim, then nothing is left.
    vas.delete("csi-data", &DeleteParams::default()).await?;
    wait_for(
        "the VolumeAttachment to be detached and gone",
        STEP,
        || async { Ok(vas.get_opt("csi-data").await?.is_none().then_some(())) },
    )
    .await?;
    anyhow::ensure!(
        sim.attachments().is_empty(),
        "{volume_id} is still attached after its VolumeAttachment is gone"
    );
    pvcs.delete("data", &DeleteParams::default()).await?;
    wait_for("the PV to be deleted", STEP, || async {
        Ok(pvs.get_opt(&pv_name).await?.is_none().then_some(()))
    })
    .await?;
    common::wait_no_volumes(sim, STEP).await?;
    pod.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_to_attached_volume_and_back_surviving_crashes() -> Result<()> {
    // Built once per machine (minutes the first time), outside the flow's deadline.
    let sidecars = tokio::task::spawn_blocking(csi_sidecars::ensure_installed).await??;
    let kcm = tokio::task::spawn_blocking(kube_controller_manager::ensure_installed).await??;
    let cluster = KubeCluster::start().await?;
    let openstack = OpenStackEnv::start().await?;
    let dir = tempfile::tempdir()?;
    let dir_path: PathBuf = dir.path().to_path_buf();
    tokio::time::timeout(
        FLOW_DEADLINE,
        flow(&cluster, &openstack, &dir_path, &sidecars, &kcm),
    )
    .await
    .with_context(|| {
        format!(
            "the sidecar flow did not finish within {FLOW_DEADLINE:?}\n{}",
            log_tails(&dir_path, &LOGS)
        )
    })?
    .map_err(|e| e.context(log_tails(&dir_path, &LOGS)))
}
