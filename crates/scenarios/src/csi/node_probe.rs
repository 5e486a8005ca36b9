//! The CSI node plugin's footprint under a kubelet's calls: a node plugin process (started by
//! the caller, with loop devices standing in for the cloud's block devices) answers
//! NodeGetInfo, then stages (format ext4, mount) and publishes (bind mount) some attached
//! volumes and takes them down again; its resident memory is read idle and at the end.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::node_client::NodeClient;
use stratus_csi_spec::v1::volume_capability::access_mode::Mode;
use stratus_csi_spec::v1::volume_capability::{AccessMode, AccessType, MountVolume};

use super::bench::Attached;
use super::driver::connect;
use crate::ccm::CcmProcess;

fn ext4() -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: "ext4".into(),
            ..Default::default()
        })),
    }
}

/// KiB (from `/proc/<pid>/status`) → MiB with one decimal.
pub fn mib(kib: Option<u64>) -> Value {
    json!(kib.map(|k| (k as f64 / 1024.0 * 10.0).round() / 10.0))
}

/// Calls the node plugin `plugin` serving on `socket` as a kubelet would: NodeGetInfo, then
/// NodeStage + NodePublish of each of `volumes` (directories under `dir`), then NodeUnpublish +
/// NodeUnstage. Returns the plugin's resident memory idle and at its peak, in MiB.
pub async fn probe(
    plugin: &CcmProcess,
    socket: &Path,
    volumes: &[Attached],
    dir: &Path,
) -> Result<Value> {
    let mut node = NodeClient::new(connect(socket).await?);
    let info = node
        .node_get_info(csi::NodeGetInfoRequest {})
        .await
        .context("NodeGetInfo")?
        .into_inner();
    let idle_rss = plugin.rss_kib();
    let idle_peak = plugin.peak_rss_kib();
    let cap = ext4();
    let mut published = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        let staging = dir.join(format!("staging-{i}"));
        let target = dir.join(format!("target-{i}"));
        node.node_stage_volume(csi::NodeStageVolumeRequest {
            volume_id: v.volume_id.clone(),
            publish_context: v.publish_context.clone().into_iter().collect(),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(cap.clone()),
            volume_context: v.volume_context.clone().into_iter().collect(),
            ..Default::default()
        })
        .await
        .with_context(|| format!("NodeStageVolume {}", v.volume_id))?;
        node.node_publish_volume(csi::NodePublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            publish_context: v.publish_context.clone().into_iter().collect(),
            staging_target_path: staging.display().to_string(),
            target_path: target.display().to_string(),
            volume_capability: Some(cap.clone()),
            volume_context: v.volume_context.clone().into_iter().collect(),
            ..Default::default()
        })
        .await
        .with_context(|| format!("NodePublishVolume {}", v.volume_id))?;
        published.push((v.volume_id.clone(), staging, target));
    }
    let busy_rss = plugin.rss_kib();
    for (id, staging, target) in &published {
        node.node_unpublish_volume(csi::NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .with_context(|| format!("NodeUnpublishVolume {id}"))?;
        node.node_unstage_volume(csi::NodeUnstageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
        })
        .await
        .with_context(|| format!("NodeUnstageVolume {id}"))?;
    }
    Ok(json!({
        "workload": "NodeGetInfo, then NodeStage (mkfs.ext4 + mount) and NodePublish (bind mount) \
                     of each volume on loop devices, then NodeUnpublish and NodeUnstage",
        "node_id": info.node_id,
        "max_volumes_per_node": info.max_volumes_per_node,
        "volumes_staged_and_published": published.len(),
        "idle_rss_mib": mib(idle_rss),
        "idle_peak_rss_mib": mib(idle_peak),
        "rss_with_volumes_published_mib": mib(busy_rss),
        "peak_rss_mib": mib(plugin.peak_rss_kib()),
    }))
}
