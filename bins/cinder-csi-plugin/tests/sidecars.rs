//! The real Kubernetes flow of the Cinder driver: the upstream external-provisioner,
//! external-attacher and external-resizer (built by the test environment) and kube-controller-manager's
//! persistent-volume binder against the real kube-apiserver, the driver's controller on
//! Keystone and the Cinder/Nova simulators. The sidecars authenticate as the chart's
//! ServiceAccount with the chart's RBAC applied and run with the chart's arguments. A PVC gets a
//! PV backed by a new Cinder volume carrying the cluster's and the PVC's metadata; a
//! VolumeAttachment attaches it to the node's server through Nova; a bigger claim extends the
//! volume in Cinder and grows the PV; deleting both leaves zero volumes. The controller pod is
//! SIGKILLed while Cinder is still creating the volume and again while Nova is still attaching
//! it: after the restart there is exactly one volume and one attachment.

mod common;

use std::time::Duration;

use anyhow::Result;
use common::flow::{with_flow, Flow, NODE};
use common::{CLUSTER, ZONE};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams};
use stratus_csi_cinder::CLUSTER_KEY;
use stratus_openstack_sim::attachments::AttachState;
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::wait::wait_for;

/// How long each step of the flow may take.
const STEP: Duration = Duration::from_secs(60);

async fn flow(flow: &mut Flow) -> Result<()> {
    // PVC → PV, with the controller pod killed while Cinder is still creating the volume.
    flow.sim().stall_transitions(true);
    flow.start_controller().await?;
    flow.create_pvc("data", 2).await?;
    wait_for("Cinder to be creating the volume", STEP, || async {
        Ok(flow
            .sim()
            .volumes()
            .iter()
            .any(|v| v["status"] == "creating")
            .then_some(()))
    })
    .await?;
    flow.kill_controller().await?;
    flow.sim().stall_transitions(false);
    flow.sim().release_stalled();
    flow.start_controller().await?;
    let (pv_name, volume_id) = flow.wait_bound("data", STEP).await?;
    let volumes = flow.sim().volumes();
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
    flow.sim().stall_transitions(true);
    flow.attach("csi-data", &pv_name, NODE).await?;
    wait_for("Nova to be attaching the volume", STEP, || async {
        Ok(flow
            .sim()
            .attachments()
            .iter()
            .any(|a| a.state == AttachState::Attaching)
            .then_some(()))
    })
    .await?;
    flow.kill_controller().await?;
    flow.sim().stall_transitions(false);
    flow.sim().release_stalled();
    flow.start_controller().await?;
    let device = flow.wait_attached("csi-data", STEP).await?;
    let attachments = flow.sim().attachments();
    anyhow::ensure!(
        attachments.len() == 1
            && attachments[0].state == AttachState::Attached
            && attachments[0].server_id == flow.node_server
            && attachments[0].volume_id == volume_id
            && attachments[0].device == device,
        "exactly one attachment of {volume_id} to {} at {device:?} after the crash: {attachments:?}",
        flow.node_server
    );

    // A bigger claim: the resizer extends the (attached) volume in Cinder and grows the PV.
    flow.pvcs()
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "spec": {"resources": {"requests": {"storage": "3Gi"}}}
            })),
        )
        .await?;
    let pvs = flow.pvs();
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
    let volumes = flow.sim().volumes();
    anyhow::ensure!(
        volumes.len() == 1 && volumes[0]["size"] == 3,
        "Cinder does not show the volume at 3 GiB: {volumes:?}"
    );

    // The chart's resizer role is enough: nothing it did was refused.
    csi_flow::ensure_nothing_forbidden(&flow.dir, "resizer.log", "the resizer")?;

    // Deletion: detach, then the claim, then nothing is left.
    flow.detach("csi-data", STEP).await?;
    anyhow::ensure!(
        flow.sim().attachments().is_empty(),
        "{volume_id} is still attached after its VolumeAttachment is gone"
    );
    flow.delete_claim("data", &pv_name, STEP).await?;
    common::wait_no_volumes(flow.sim(), STEP).await?;
    flow.kill_controller().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_to_attached_volume_and_back_surviving_crashes() -> Result<()> {
    with_flow(|f| Box::pin(flow(f))).await
}
