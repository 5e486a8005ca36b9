//! The EBS driver's fault paths through the real sidecars (external-provisioner and
//! external-attacher with the chart's arguments and RBAC, see `sidecars.rs`) on moto behind the
//! counting proxy, whose EBS knobs (`/__stratus/ebs`) give moto the states and errors EC2 has:
//! - the controller SIGKILLed while CreateVolume is in flight (moto created the volume, the
//!   answer never came back), and while AttachVolume is: after the restart there is exactly one
//!   volume and one attachment;
//! - an attachment stuck `attaching`: the attacher sees a clear, retryable error (Aborted while
//!   the call waits, Unavailable once the driver gives the attachment back), never a final one,
//!   and the VolumeAttachment recovers once the attachment completes;
//! - AttachVolume of a volume attached elsewhere meanwhile (`VolumeInUse`): FailedPrecondition,
//!   and recovery once the other attachment is gone;
//! - 30 % of EC2 requests throttled: claims and attachments converge, no duplicate volumes,
//!   and deleting everything leaves none.

mod common;

use std::time::Duration;

use anyhow::{Context, Result};
use common::flow::{with_flow, Flow, NODE};
use common::ZONE;
use stratus_scenarios::ec2_fixture;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::aws::EbsKnobs;
use stratus_testenv::{Fault, FaultKind, Hold};
use tokio::time::Instant;

/// How long each step may take.
const STEP: Duration = Duration::from_secs(60);
/// The tag naming the claim of a volume.
const PVC_TAG: &str = "kubernetes.io/created-for/pvc/name";

/// The knobs every test runs with: EC2's token idempotency and `VolumeInUse`.
fn ec2_like() -> EbsKnobs {
    EbsKnobs {
        client_token: true,
        volume_in_use: true,
        ..Default::default()
    }
}

fn hold(action: &str, after_forward: bool) -> Hold {
    Hold {
        action: action.into(),
        after_forward,
    }
}

/// Waits until the proxy has seen `key` at least `n` times.
async fn wait_count(flow: &Flow, key: &str, n: u64) -> Result<()> {
    wait_for(&format!("{n} × {key} at the proxy"), STEP, || async {
        Ok((flow.count(key).await? >= n).then_some(()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_create_and_attach_leaves_one_volume_and_one_attachment() -> Result<()> {
    with_flow(&["--operation-wait=2s"], |flow| {
        Box::pin(async move {
            flow.env.proxy_control().set_ebs_knobs(&ec2_like()).await?;

            // CreateVolume: moto creates the volume, the answer is held, the controller dies.
            flow.env
                .hold_aws_requests(&[hold("CreateVolume", true)])
                .await?;
            flow.create_pvc("data", 2).await?;
            wait_for("moto to have created the claim's volume", STEP, || async {
                Ok((!flow.volumes_tagged(PVC_TAG, "data").await?.is_empty()).then_some(()))
            })
            .await?;
            flow.kill_controller().await?;
            flow.env.hold_aws_requests(&[]).await?;
            flow.env.release_held_aws_requests().await?;
            flow.start_controller().await?;
            let (pv, volume) = flow.wait_bound("data", STEP).await?;
            let volumes = flow.volumes_tagged(PVC_TAG, "data").await?;
            anyhow::ensure!(
                volumes == [volume.clone()],
                "after the restart the claim has volumes {volumes:?}, the PV {pv} {volume}"
            );
            let creates = flow.count("ec2:CreateVolume").await?;

            // AttachVolume: moto attaches, the answer is held, the controller dies.
            flow.env
                .hold_aws_requests(&[hold("AttachVolume", true)])
                .await?;
            flow.attach("csi-data", &pv, NODE).await?;
            wait_count(flow, "ec2:AttachVolume", 1).await?;
            flow.kill_controller().await?;
            flow.env.hold_aws_requests(&[]).await?;
            flow.env.release_held_aws_requests().await?;
            flow.start_controller().await?;
            let device = flow.wait_attached("csi-data", STEP).await?;
            let attachments = flow.attachments(&volume).await?;
            anyhow::ensure!(
                attachments
                    == [(
                        flow.instance_id.clone(),
                        "attached".to_string(),
                        device.clone()
                    )],
                "after the restart {volume} has attachments {attachments:?}, the VolumeAttachment {device}"
            );
            eprintln!(
                "sigkill: CreateVolume calls {creates}, AttachVolume calls {}",
                flow.count("ec2:AttachVolume").await?
            );
            Ok(())
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_attaching_fails_retryably_then_recovers() -> Result<()> {
    with_flow(
        &["--operation-wait=2s", "--stuck-attaching-after=6s"],
        |flow| {
            Box::pin(async move {
                let stuck = EbsKnobs {
                    attaching_stuck: true,
                    ..ec2_like()
                };
                flow.env.proxy_control().set_ebs_knobs(&stuck).await?;
                flow.create_pvc("data", 2).await?;
                let (pv, volume) = flow.wait_bound("data", STEP).await?;
                flow.attach("csi-data", &pv, NODE).await?;
                // While the call waits: Aborted (operation pending), not attached.
                let pending = wait_for("an attach error while attaching", STEP, || async {
                    let (error, attached) = flow.attach_error("csi-data").await?;
                    anyhow::ensure!(!attached, "attached while stuck");
                    Ok(error.filter(|e| e.contains("Aborted")))
                })
                .await?;
                anyhow::ensure!(
                    pending.contains(&volume) && pending.contains("attach"),
                    "unclear error: {pending}"
                );
                // Past --stuck-attaching-after: the driver detaches and says so, retryably.
                let given_back = wait_for("the stuck attachment to be given back", STEP, || async {
                    let (error, attached) = flow.attach_error("csi-data").await?;
                    anyhow::ensure!(!attached, "attached while stuck");
                    Ok(error.filter(|e| e.contains("stuck attaching")))
                })
                .await?;
                anyhow::ensure!(
                    given_back.contains("Unavailable"),
                    "the stuck error is not retryable: {given_back}"
                );
                anyhow::ensure!(
                    flow.count("ec2:DetachVolume").await? >= 1,
                    "the driver did not detach the stuck attachment"
                );
                // Unstuck: the next retry completes.
                let started = Instant::now();
                flow.env
                    .proxy_control()
                    .set_ebs_knobs(&ec2_like())
                    .await?;
                let device = flow.wait_attached("csi-data", STEP).await?;
                let attachments = flow.attachments(&volume).await?;
                anyhow::ensure!(
                    attachments
                        == [(flow.instance_id.clone(), "attached".to_string(), device)],
                    "after recovery {volume} has attachments {attachments:?}"
                );
                eprintln!(
                    "stuck attaching: recovered {:?} after unsticking; AttachVolume {} DetachVolume {}",
                    started.elapsed(),
                    flow.count("ec2:AttachVolume").await?,
                    flow.count("ec2:DetachVolume").await?
                );
                Ok(())
            })
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_in_use_is_failed_precondition_then_recovers() -> Result<()> {
    with_flow(&["--operation-wait=2s"], |flow| {
        Box::pin(async move {
            flow.env.proxy_control().set_ebs_knobs(&ec2_like()).await?;
            let subnet = ec2_fixture::subnet(&flow.ec2, ZONE).await?;
            let other = ec2_fixture::launch(&flow.ec2, &subnet, ZONE, 1, None, "m5.large").await?
                [0]
            .id
            .clone();
            flow.create_pvc("data", 2).await?;
            let (pv, volume) = flow.wait_bound("data", STEP).await?;
            // The driver checks the volume is free, then another instance takes it before the
            // driver's AttachVolume reaches EC2.
            flow.env
                .hold_aws_requests(&[hold("AttachVolume", false)])
                .await?;
            flow.attach("csi-data", &pv, NODE).await?;
            wait_count(flow, "ec2:AttachVolume", 1).await?;
            flow.ec2
                .attach_volume()
                .volume_id(&volume)
                .instance_id(&other)
                .device("/dev/xvdz")
                .send()
                .await
                .context("attaching the volume to the other instance in moto")?;
            flow.env.hold_aws_requests(&[]).await?;
            flow.env.release_held_aws_requests().await?;
            let refused = wait_for("a FailedPrecondition attach error", STEP, || async {
                let (error, attached) = flow.attach_error("csi-data").await?;
                anyhow::ensure!(!attached, "attached while in use elsewhere");
                Ok(error.filter(|e| e.contains("FailedPrecondition")))
            })
            .await?;
            let log = std::fs::read_to_string(flow.dir.join("driver.log"))?;
            anyhow::ensure!(
                log.contains("VolumeInUse"),
                "the driver never met VolumeInUse (error: {refused})"
            );
            let attachments = flow.attachments(&volume).await?;
            anyhow::ensure!(
                attachments.len() == 1 && attachments[0].0 == other,
                "{volume} has attachments {attachments:?}; only {other} should have it"
            );
            // The other instance lets go: the attacher's retry attaches it here.
            flow.ec2
                .detach_volume()
                .volume_id(&volume)
                .instance_id(&other)
                .send()
                .await?;
            let device = flow.wait_attached("csi-data", STEP).await?;
            let attachments = flow.attachments(&volume).await?;
            anyhow::ensure!(
                attachments == [(flow.instance_id.clone(), "attached".to_string(), device)],
                "after recovery {volume} has attachments {attachments:?}"
            );
            Ok(())
        })
    })
    .await
}

/// Claims and attachments of the throttling test.
const THROTTLED: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_ec2_converges_without_duplicates() -> Result<()> {
    with_flow(&["--operation-wait=2s"], |flow| {
        Box::pin(async move {
            // EC2's slower states too: attachments and modifications take a moment.
            flow.env
                .proxy_control()
                .set_ebs_knobs(&EbsKnobs {
                    attaching_millis: Some(1500),
                    modifying_millis: Some(1500),
                    ..ec2_like()
                })
                .await?;
            flow.env
                .set_aws_faults(&[Fault {
                    service: Some("ec2".into()),
                    action: None,
                    kind: FaultKind::Throttle,
                    rate: 0.3,
                }])
                .await?;
            let started = Instant::now();
            let pvs = flow.provision_and_attach(THROTTLED, NODE, STEP).await?;
            let converged = started.elapsed();
            for (i, (_, volume)) in pvs.iter().enumerate() {
                let named = flow.volumes_tagged(PVC_TAG, &format!("data-{i}")).await?;
                anyhow::ensure!(
                    named == [volume.clone()],
                    "claim data-{i} has volumes {named:?}, its PV {volume}"
                );
                let attachments = flow.attachments(volume).await?;
                anyhow::ensure!(
                    attachments.len() == 1 && attachments[0].0 == flow.instance_id,
                    "{volume} has attachments {attachments:?}"
                );
            }
            let timeline = flow.env.aws_timeline().await?;
            let (requests, throttled) = timeline
                .values()
                .fold((0, 0), |(r, t), s| (r + s.requests, t + s.throttled));
            anyhow::ensure!(throttled > 0, "nothing was throttled in {requests} requests");

            // Everything goes away, still throttled.
            flow.detach_and_delete(&pvs, STEP).await?;
            let mut left_named = Vec::new();
            for i in 0..THROTTLED {
                left_named.extend(flow.volumes_tagged(PVC_TAG, &format!("data-{i}")).await?);
            }
            anyhow::ensure!(
                left_named.is_empty(),
                "volumes left in moto: {left_named:?}"
            );
            eprintln!(
                "throttled 30 %: {THROTTLED} claims bound and attached in {converged:?}; {requests} EC2 requests, {throttled} throttled; CreateVolume {}",
                flow.count("ec2:CreateVolume").await?
            );
            Ok(())
        })
    })
    .await
}

/// The EC2 error code of a failed call.
fn code<E: aws_sdk_ec2::error::ProvideErrorMetadata, R>(
    err: &aws_sdk_ec2::error::SdkError<E, R>,
) -> String {
    use aws_sdk_ec2::error::ProvideErrorMetadata as _;
    err.code().unwrap_or("no code").to_string()
}

/// The state of the first attachment and the size of `volume`, as `ec2` sees them.
async fn seen(ec2: &aws_sdk_ec2::Client, volume: &str) -> Result<(Option<String>, Option<i32>)> {
    let out = ec2.describe_volumes().volume_ids(volume).send().await?;
    let v = out.volumes().first().context("no such volume")?;
    Ok((
        v.attachments()
            .first()
            .and_then(|a| a.state())
            .map(|s| s.as_str().to_string()),
        v.size(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_knobs_answer_volume_calls_as_ec2_does() -> Result<()> {
    let env = stratus_testenv::AwsEnv::start().await?;
    let proxied = ec2_fixture::client(env.aws_endpoint()).await;
    let moto = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&moto, ZONE).await?;
    let launched = ec2_fixture::launch(&moto, &subnet, ZONE, 2, None, "m5.large").await?;
    let (a, b) = (&launched[0].id, &launched[1].id);
    let create = |size: i32| {
        proxied
            .create_volume()
            .availability_zone(ZONE)
            .size(size)
            .client_token("token-1")
    };

    // Knobs off: moto as it is (a second volume for the same token).
    let first = create(1)
        .send()
        .await?
        .volume_id()
        .unwrap_or_default()
        .to_string();
    let second = create(1)
        .send()
        .await?
        .volume_id()
        .unwrap_or_default()
        .to_string();
    anyhow::ensure!(first != second, "moto itself honoured the token");

    env.proxy_control()
        .set_ebs_knobs(&EbsKnobs {
            client_token: true,
            volume_in_use: true,
            attaching_stuck: true,
            modifying_millis: Some(60_000),
            ..Default::default()
        })
        .await?;
    let volume = create(1)
        .send()
        .await?
        .volume_id()
        .unwrap_or_default()
        .to_string();
    let again = create(1)
        .send()
        .await?
        .volume_id()
        .unwrap_or_default()
        .to_string();
    anyhow::ensure!(volume == again, "one token, two volumes: {volume} {again}");
    let mismatch = create(2)
        .send()
        .await
        .err()
        .context("another size was accepted")?;
    anyhow::ensure!(
        code(&mismatch) == "IdempotentParameterMismatch",
        "{mismatch:?}"
    );

    proxied
        .attach_volume()
        .volume_id(&volume)
        .instance_id(a)
        .device("/dev/xvdba")
        .send()
        .await?;
    anyhow::ensure!(seen(&proxied, &volume).await?.0.as_deref() == Some("attaching"));
    anyhow::ensure!(seen(&moto, &volume).await?.0.as_deref() == Some("attached"));
    let in_use = proxied
        .attach_volume()
        .volume_id(&volume)
        .instance_id(b)
        .device("/dev/xvdbb")
        .send()
        .await
        .err()
        .context("a second attachment was accepted")?;
    anyhow::ensure!(code(&in_use) == "VolumeInUse", "{in_use:?}");
    env.proxy_control()
        .set_ebs_knobs(&EbsKnobs {
            client_token: true,
            volume_in_use: true,
            modifying_millis: Some(60_000),
            ..Default::default()
        })
        .await?;
    anyhow::ensure!(seen(&proxied, &volume).await?.0.as_deref() == Some("attached"));

    let modified = proxied
        .modify_volume()
        .volume_id(&volume)
        .size(3)
        .send()
        .await?;
    let state = modified
        .volume_modification()
        .and_then(|m| m.modification_state())
        .map(|s| s.as_str().to_string());
    anyhow::ensure!(state.as_deref() == Some("modifying"), "{modified:?}");
    anyhow::ensure!(seen(&proxied, &volume).await?.1 == Some(1));
    anyhow::ensure!(seen(&moto, &volume).await?.1 == Some(3));
    let busy = proxied
        .modify_volume()
        .volume_id(&volume)
        .size(4)
        .send()
        .await
        .err()
        .context("a second modification was accepted")?;
    anyhow::ensure!(code(&busy) == "IncorrectModificationState", "{busy:?}");
    env.proxy_control()
        .set_ebs_knobs(&EbsKnobs::default())
        .await?;
    anyhow::ensure!(seen(&proxied, &volume).await?.1 == Some(3));
    Ok(())
}
