//! A CSI driver started exactly as a Deckhouse module's template starts it, checked as the
//! kubelet, its registrar and the controller sidecars would check it: the Identity service
//! answers (name, ready), the controller creates and deletes a volume, the node reports its
//! identity and zone. Each driver's `deckhouse_contract` test gives the args and variables.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::controller_client::ControllerClient;
use stratus_csi_spec::v1::identity_client::IdentityClient;
use stratus_csi_spec::v1::node_client::NodeClient;
use stratus_csi_spec::v1::volume_capability::access_mode::Mode;
use stratus_csi_spec::v1::volume_capability::{AccessMode, AccessType, MountVolume};

use super::driver::connect;

/// Probe answers ready and GetPluginInfo names `driver`: what the registrar and the sidecars
/// ask first.
pub async fn identity_answers(socket: &Path, driver: &str) -> Result<()> {
    let mut identity = IdentityClient::new(connect(socket).await?);
    let info = identity
        .get_plugin_info(csi::GetPluginInfoRequest {})
        .await
        .context("GetPluginInfo")?
        .into_inner();
    ensure!(info.name == driver, "GetPluginInfo named {:?}", info.name);
    let probe = identity
        .probe(csi::ProbeRequest {})
        .await
        .context("Probe")?
        .into_inner();
    ensure!(probe.ready != Some(false), "Probe answered not ready");
    Ok(())
}

/// A single-node-writer mount capability of `fs_type` (empty: the driver's default).
pub fn mount_capability(fs_type: &str) -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: fs_type.into(),
            ..Default::default()
        })),
    }
}

/// A CreateVolume of 1 GiB named `name` with `parameters`, a mount capability of `fs_type` and,
/// when given, `topology` (the key and zone) as the requisite one.
pub fn create_request(
    name: &str,
    fs_type: &str,
    parameters: &[(&str, &str)],
    topology: Option<(&str, &str)>,
) -> csi::CreateVolumeRequest {
    csi::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: 1 << 30,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_capability(fs_type)],
        parameters: parameters
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        accessibility_requirements: topology.map(|(key, zone)| csi::TopologyRequirement {
            requisite: vec![csi::Topology {
                segments: [(key.to_string(), zone.to_string())].into(),
            }],
            preferred: vec![],
        }),
        ..Default::default()
    }
}

/// [`create_request`] sent (the driver's default file system): the new volume's ID and its
/// accessible topology.
pub async fn create_volume(
    socket: &Path,
    name: &str,
    parameters: &[(&str, &str)],
    topology: Option<(&str, &str)>,
) -> Result<(String, Vec<BTreeMap<String, String>>)> {
    let volume = ControllerClient::new(connect(socket).await?)
        .create_volume(create_request(name, "", parameters, topology))
        .await
        .context("CreateVolume")?
        .into_inner()
        .volume
        .context("CreateVolume answered no volume")?;
    let topology = volume
        .accessible_topology
        .iter()
        .map(|t| t.segments.clone().into_iter().collect())
        .collect();
    Ok((volume.volume_id, topology))
}

/// DeleteVolume of `volume_id`.
pub async fn delete_volume(socket: &Path, volume_id: &str) -> Result<()> {
    ControllerClient::new(connect(socket).await?)
        .delete_volume(csi::DeleteVolumeRequest {
            volume_id: volume_id.into(),
            ..Default::default()
        })
        .await
        .context("DeleteVolume")?;
    Ok(())
}

/// NodeGetInfo: the node's ID and its topology segments.
pub async fn node_info(socket: &Path) -> Result<(String, BTreeMap<String, String>)> {
    let mut node = NodeClient::new(connect(socket).await?);
    let info = node
        .node_get_info(csi::NodeGetInfoRequest {})
        .await
        .context("NodeGetInfo")?
        .into_inner();
    let segments = info
        .accessible_topology
        .map(|t| t.segments.into_iter().collect())
        .unwrap_or_default();
    Ok((info.node_id, segments))
}
