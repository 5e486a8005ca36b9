//! The real Kubernetes flow of the EBS driver: the upstream sidecars (external-provisioner v6.3.0,
//! external-attacher v4.13.0 and external-resizer v2.3.0, built by the test environment; see
//! `tools/csi_sidecars.rs` for why not provisioner v6.4.0) and kube-controller-manager's
//! persistent-volume binder against the real kube-apiserver, the driver's controller on moto.
//! The sidecars authenticate as the chart's ServiceAccount with the chart's RBAC applied and run
//! with the chart's arguments. A PVC gets a PV backed by a new volume in moto; a
//! VolumeAttachment attaches it to the node's instance; a bigger claim grows the PV and the
//! volume in moto (ModifyVolume); deleting both leaves zero volumes.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use aws_sdk_ec2::types::{Filter, VolumeAttachmentState, VolumeState};
use common::flow::{node_instance, CHART, DRIVER, NODE};
use common::ZONE;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams};
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::harness::{self, ControllerSide, Kcm, Sidecar, Tools};
use stratus_scenarios::csi::{driver, flow as csi_flow};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::aws::EbsKnobs;
use stratus_testenv::TestEnv;

/// How long each step of the flow may take.
const STEP: Duration = Duration::from_secs(60);
/// How long the whole flow may take.
const FLOW_DEADLINE: Duration = Duration::from_secs(240);

/// The driver's logs and the sidecars' beside it.
const LOGS: [&str; 5] = csi_flow::CONTROLLER_LOGS;

async fn flow(env: &TestEnv, dir: &Path, tools: &Tools) -> Result<()> {
    let sidecars = [Sidecar::Provisioner, Sidecar::Attacher, Sidecar::Resizer];
    let side =
        ControllerSide::start(env.cluster(), tools, &CHART, Kcm::default(), &sidecars, dir).await?;
    let admin = side.admin.clone();
    let (ec2, instance_id) = node_instance(env, &admin).await?;

    let (driver, socket) = driver::start(
        Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
        dir,
        &[
            "controller".into(),
            format!("--endpoint=unix://{}", driver::socket(dir).display()),
            "--operation-wait=2s".into(),
            "--v=4".into(),
        ],
        &env.aws().env_vars(),
    )
    .await?;
    let _pod = side.start_pod(driver, &socket)?;

    // PVC → PV with a volume in moto.
    let claims = Claims {
        admin: admin.clone(),
        driver: DRIVER.into(),
        class: "ebs-gp3".into(),
        device_key: stratus_csi_ebs::shapes::DEVICE_PATH.into(),
    };
    claims.create_class(&[("type", "gp3")]).await?;
    claims.create_pvc("data", 2).await?;
    let (pv_name, volume_id) = claims.wait_bound("data", STEP).await?;
    let (pvcs, pvs) = (claims.pvcs(), claims.pvs());
    let described = ec2
        .describe_volumes()
        .volume_ids(&volume_id)
        .send()
        .await
        .with_context(|| format!("describing {volume_id}"))?;
    let volume = described
        .volumes()
        .first()
        .with_context(|| format!("{volume_id} is not in moto"))?;
    let tags: BTreeMap<&str, &str> = volume
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?, t.value()?)))
        .collect();
    anyhow::ensure!(
        volume.size() == Some(2)
            && volume.availability_zone() == Some(ZONE)
            && tags.get("CSIVolumeName") == Some(&pv_name.as_str())
            && tags.get("kubernetes.io/created-for/pvc/name") == Some(&"data"),
        "the volume in moto is not what the PVC asked for: {volume:?}"
    );

    // VolumeAttachment → attached in moto.
    claims.attach("csi-data", &pv_name, NODE).await?;
    let device = claims.wait_attached("csi-data", STEP).await?;
    anyhow::ensure!(device.starts_with("/dev/xvd"), "devicePath {device:?}");
    let attachment = volume_attachment(&ec2, &volume_id).await?;
    anyhow::ensure!(
        attachment
            == Some((
                instance_id.clone(),
                VolumeAttachmentState::Attached,
                device.clone()
            )),
        "moto shows {attachment:?} for {volume_id}"
    );

    // A bigger claim: the resizer expands the volume in moto and the PV. The modification stays
    // `modifying` for 3 s as on EC2 (the proxy's knob), longer than the driver's 2 s wait: the
    // first ControllerExpandVolume answers Aborted and the resizer's retry completes it.
    env.proxy_control()
        .set_ebs_knobs(&EbsKnobs {
            modifying_millis: Some(3000),
            ..Default::default()
        })
        .await?;
    pvcs.patch(
        "data",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({
            "spec": {"resources": {"requests": {"storage": "3Gi"}}}
        })),
    )
    .await?;
    wait_for("the PV to grow to 3Gi", STEP, || async {
        let pv = pvs.get(&pv_name).await?;
        let capacity = pv
            .spec
            .and_then(|s| s.capacity)
            .and_then(|c| c.get("storage").cloned());
        Ok((capacity == Some(Quantity("3Gi".into()))).then_some(()))
    })
    .await?;
    let size = ec2
        .describe_volumes()
        .volume_ids(&volume_id)
        .send()
        .await?
        .volumes()
        .first()
        .and_then(|v| v.size());
    anyhow::ensure!(
        size == Some(3),
        "moto shows {volume_id} at {size:?} GiB, not 3"
    );
    let log = std::fs::read_to_string(dir.join("driver.log"))?;
    anyhow::ensure!(
        log.contains("still being modified"),
        "the expansion never met a modification in progress"
    );

    // The chart's resizer role is enough: nothing it did was refused.
    csi_flow::ensure_nothing_forbidden(dir, "resizer.log", "the resizer")?;

    // Deletion: detach, then the claim, then nothing is left.
    claims.detach("csi-data", STEP).await?;
    anyhow::ensure!(
        volume_attachment(&ec2, &volume_id).await?.is_none(),
        "{volume_id} is still attached after its VolumeAttachment is gone"
    );
    claims.delete_claim("data", &pv_name, STEP).await?;
    // Every volume but the instance's root volume (which moto made at launch).
    let left = ec2.describe_volumes().send().await?;
    let left: Vec<_> = left
        .volumes()
        .iter()
        .filter(|v| v.state() != Some(&VolumeState::Deleted))
        .filter(|v| {
            !v.attachments().iter().any(|a| {
                a.instance_id() == Some(instance_id.as_str()) && a.device() != Some(device.as_str())
            })
        })
        .map(|v| (v.volume_id().unwrap_or_default(), v.tags().len()))
        .collect();
    anyhow::ensure!(
        left.is_empty(),
        "volumes left in moto (id, tag count): {left:?}"
    );
    Ok(())
}

/// The volume's attachment in moto: instance, state, device.
async fn volume_attachment(
    ec2: &aws_sdk_ec2::Client,
    volume_id: &str,
) -> Result<Option<(String, VolumeAttachmentState, String)>> {
    let out = ec2
        .describe_volumes()
        .filters(
            Filter::builder()
                .name("volume-id")
                .values(volume_id)
                .build(),
        )
        .send()
        .await?;
    Ok(out
        .volumes()
        .first()
        .and_then(|v| v.attachments().first())
        .map(|a| {
            (
                a.instance_id().unwrap_or_default().to_string(),
                a.state()
                    .cloned()
                    .unwrap_or(VolumeAttachmentState::Detached),
                a.device().unwrap_or_default().to_string(),
            )
        }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_to_attached_volume_and_back_with_the_upstream_sidecars() -> Result<()> {
    // Built once per machine (minutes the first time), outside the flow's deadline.
    let tools = Tools::install().await?;
    let env = TestEnv::start().await?;
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
