//! The Cinder driver's fault paths through the real sidecars (external-provisioner,
//! external-attacher and external-resizer with the chart's arguments and RBAC, see
//! `sidecars.rs`) on Keystone and the simulators behind the counting proxy (the SIGKILLs during
//! create and attach are in `sidecars.rs`):
//! - an attachment stuck `attaching` in Nova: the attacher sees a clear, retryable error naming
//!   the volume and its status, never a second attach, and the VolumeAttachment recovers once
//!   the attachment completes;
//! - 30 % of Cinder and Nova requests throttled (429): claims and attachments converge, one
//!   volume per claim and one attachment per volume, and deleting everything leaves none.

mod common;

use std::time::Duration;

use anyhow::Result;

use common::flow::{with_flow, NODE};
use stratus_openstack_sim::attachments::AttachState;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::{Fault, FaultKind};
use tokio::time::Instant;

/// How long each step may take.
const STEP: Duration = Duration::from_secs(60);
/// Nova's attach request, as the proxy counts it.
const ATTACH: &str = "compute:POST /servers/{id}/os-volume_attachments";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_attaching_fails_retryably_then_recovers() -> Result<()> {
    with_flow(|flow| {
        Box::pin(async move {
            flow.start_controller().await?;
            flow.create_pvc("data", 2).await?;
            let (pv, volume) = flow.wait_bound("data", STEP).await?;

            // Nova accepts the attach and never finishes it (until released).
            flow.sim().stall_transitions(true);
            flow.attach("csi-data", &pv, NODE).await?;
            let error = wait_for("an attach error while attaching", STEP, || async {
                let (error, attached) = flow.attach_error("csi-data").await?;
                anyhow::ensure!(!attached, "attached while Nova is stuck");
                Ok(error)
            })
            .await?;
            anyhow::ensure!(
                error.contains("Aborted") && error.contains(&volume) && error.contains("attaching"),
                "the error does not say what is pending: {error}"
            );
            // The attacher retries (within 5 s): still one attach request, still attaching.
            let before = flow.count(ATTACH).await?;
            let attacher_calls = || async {
                let log = std::fs::read_to_string(flow.dir.join("attacher.log"))?;
                anyhow::Ok(log.matches("rpc error: code = Aborted").count())
            };
            let seen = attacher_calls().await?;
            wait_for("a retried ControllerPublish", STEP, || async {
                Ok((attacher_calls().await? > seen).then_some(()))
            })
            .await?;
            let attachments = flow.sim().attachments();
            anyhow::ensure!(
                before == 1
                    && flow.count(ATTACH).await? == 1
                    && attachments.len() == 1
                    && attachments[0].state == AttachState::Attaching,
                "a retry attached again: {} attach requests, attachments {attachments:?}",
                flow.count(ATTACH).await?
            );

            // Nova finishes: the next retry reports the volume attached.
            let started = Instant::now();
            flow.sim().stall_transitions(false);
            flow.sim().release_stalled();
            let device = flow.wait_attached("csi-data", STEP).await?;
            let attachments = flow.sim().attachments();
            anyhow::ensure!(
                attachments.len() == 1
                    && attachments[0].state == AttachState::Attached
                    && attachments[0].server_id == flow.node_server
                    && attachments[0].volume_id == volume
                    && attachments[0].device == device,
                "after recovery {volume} has attachments {attachments:?}, the VolumeAttachment {device}"
            );
            eprintln!(
                "stuck attaching: recovered {:?} after release; attach requests {}",
                started.elapsed(),
                flow.count(ATTACH).await?
            );
            Ok(())
        })
    })
    .await
}

/// Claims and attachments of the throttling test.
const THROTTLED: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_cloud_converges_without_duplicates() -> Result<()> {
    with_flow(|flow| {
        Box::pin(async move {
            let throttle = |service: &str| Fault {
                service: Some(service.into()),
                action: None,
                kind: FaultKind::Throttle,
                rate: 0.3,
            };
            flow.openstack
                .set_faults(&[throttle("block-storage"), throttle("compute")])
                .await?;
            flow.start_controller().await?;
            let started = Instant::now();
            let volumes = flow.provision_and_attach(THROTTLED, NODE, STEP).await?;
            let converged = started.elapsed();
            let in_cinder = flow.sim().volumes();
            for (i, (_, volume)) in volumes.iter().enumerate() {
                let claim = format!("data-{i}");
                let named: Vec<&str> = in_cinder
                    .iter()
                    .filter(|v| v["metadata"]["csi.storage.k8s.io/pvc/name"] == claim.as_str())
                    .filter_map(|v| v["id"].as_str())
                    .collect();
                anyhow::ensure!(
                    named == [volume.as_str()],
                    "claim {claim} has volumes {named:?}, its PV {volume}"
                );
            }
            let attachments = flow.sim().attachments();
            anyhow::ensure!(
                attachments.len() == THROTTLED
                    && volumes
                        .iter()
                        .all(|(_, v)| attachments.iter().filter(|a| &a.volume_id == v).count() == 1),
                "not one attachment per volume: {attachments:?}"
            );
            let timeline = flow.openstack.proxy_control().timeline().await?;
            let (requests, throttled) = timeline
                .values()
                .fold((0, 0), |(r, t), s| (r + s.requests, t + s.throttled));
            anyhow::ensure!(throttled > 0, "nothing was throttled in {requests} requests");

            // Everything goes away, still throttled.
            flow.detach_and_delete(&volumes, STEP).await?;
            common::wait_no_volumes(flow.sim(), STEP).await?;
            eprintln!(
                "throttled 30 %: {THROTTLED} claims bound and attached in {converged:?}; {requests} requests, {throttled} throttled; volume creations {}",
                flow.count("block-storage:POST /volumes").await?
            );
            Ok(())
        })
    })
    .await
}
