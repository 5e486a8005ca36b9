//! The Cinder controller backend: CreateVolume idempotent by the volume's name, attach and
//! detach through Nova with bounded waits, expansion by `os-extend` (online from Cinder 3.42),
//! ListVolumes by the cluster's metadata. Every wait has a deadline; when it passes the call
//! answers Pending (gRPC Aborted) so the sidecar retries and the next call picks the operation
//! up where the cloud is.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use stratus_csi::backend::{ControllerBackend, ControllerCaps, CreateVolumeRequest, Volume};
use stratus_csi::validate::round_up_gib;
use stratus_csi::{BackendError, Topology};
use tokio::time::Instant;

use crate::cinder::{CinderApi, VolumeInfo};
use crate::params::volume_spec;
use crate::{CLUSTER_KEY, DEVICE_PATH, TOPOLOGY_KEY};

const GIB: i64 = 1 << 30;

/// Settings of the Cinder controller (flags and `[BlockStorage]` of the binary).
#[derive(Debug, Clone)]
pub struct CinderOptions {
    /// `--cluster`: written as `cinder.csi.openstack.org/cluster` on every volume.
    pub cluster: Option<String>,
    /// `[BlockStorage] ignore-volume-az`: report no topology for volumes.
    pub ignore_volume_az: bool,
    /// How long one call waits for a volume to become available, attached, detached or grown.
    pub operation_wait: Duration,
    /// Poll interval of the waits.
    pub poll: Duration,
}

impl Default for CinderOptions {
    fn default() -> Self {
        Self {
            cluster: None,
            ignore_volume_az: false,
            operation_wait: Duration::from_secs(10),
            poll: Duration::from_millis(250),
        }
    }
}

/// What publish must do next, given the volume as Cinder shows it (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishStep {
    /// Attached to the node: answer with the device.
    Done(Option<String>),
    /// An attach or detach is under way: wait for it.
    Wait,
    /// Ask Nova to attach.
    Attach,
}

/// Decides the next publish step for `node`, or why it cannot be done.
pub fn plan_publish(v: &VolumeInfo, node: &str) -> Result<PublishStep, BackendError> {
    let mine = v.attachment(node);
    match (v.status.as_str(), mine) {
        ("in-use", Some(a)) => Ok(PublishStep::Done(a.device.clone())),
        ("attaching" | "detaching" | "extending" | "creating" | "reserved", _) => {
            Ok(PublishStep::Wait)
        }
        ("available", None) => Ok(PublishStep::Attach),
        ("in-use", None) if v.multiattach => Ok(PublishStep::Attach),
        ("in-use", None) => Err(BackendError::FailedPrecondition(format!(
            "volume {} is attached to {} and is not multi-attach",
            v.id,
            v.attachments
                .iter()
                .map(|a| a.server_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        (status, _) => Err(BackendError::FailedPrecondition(format!(
            "volume {} cannot be attached in status {status}",
            v.id
        ))),
    }
}

/// The Cinder controller backend.
pub struct CinderController {
    api: CinderApi,
    options: CinderOptions,
}

impl CinderController {
    /// A controller over the Cinder/Nova seam.
    pub fn new(api: CinderApi, options: CinderOptions) -> CinderController {
        CinderController { api, options }
    }

    fn to_volume(&self, v: &VolumeInfo) -> Volume {
        let zone = v.availability_zone.as_deref().unwrap_or_default();
        Volume {
            id: v.id.clone(),
            capacity_bytes: v.size * GIB,
            topology: (!self.options.ignore_volume_az && !zone.is_empty()).then(|| {
                [(TOPOLOGY_KEY.to_string(), zone.to_string())]
                    .into_iter()
                    .collect::<Topology>()
            }),
            source: None,
            attached_to: v.attachments.iter().map(|a| a.server_id.clone()).collect(),
            context: BTreeMap::new(),
        }
    }

    /// Polls the volume until `done` holds, the deadline passes (Pending) or it is gone.
    async fn wait_volume(
        &self,
        id: &str,
        what: &str,
        done: impl Fn(&VolumeInfo) -> Result<bool, BackendError>,
    ) -> Result<VolumeInfo, BackendError> {
        let deadline = Instant::now() + self.options.operation_wait;
        loop {
            let v = self
                .api
                .volume(id)
                .await?
                .ok_or_else(|| BackendError::NotFound(format!("volume {id} does not exist")))?;
            if done(&v)? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Pending(format!(
                    "volume {id} is not {what} after {:?} (status {})",
                    self.options.operation_wait, v.status
                )));
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    async fn wait_available(&self, id: &str) -> Result<VolumeInfo, BackendError> {
        self.wait_volume(id, "available", |v| match v.status.as_str() {
            "creating" | "downloading" => Ok(false),
            "error" => Err(BackendError::Internal(format!(
                "volume {id} failed to create (status error)"
            ))),
            _ => Ok(true),
        })
        .await
    }
}

#[async_trait]
impl ControllerBackend for CinderController {
    fn caps(&self) -> ControllerCaps {
        ControllerCaps {
            snapshots: false,
            clone: false,
            capacity: false,
            multi_attach: true,
        }
    }

    async fn create_volume(&self, req: &CreateVolumeRequest) -> Result<Volume, BackendError> {
        let size_gib = round_up_gib(req.required_bytes);
        if req.limit_bytes > 0 && size_gib * GIB > req.limit_bytes {
            return Err(BackendError::InvalidArgument(format!(
                "Cinder sizes volumes in GiB: {size_gib} GiB exceeds limit_bytes {}",
                req.limit_bytes
            )));
        }
        if req.source.is_some() {
            return Err(BackendError::InvalidArgument(
                "this driver creates no volumes from snapshots or other volumes".into(),
            ));
        }
        let spec = volume_spec(
            &req.name,
            size_gib,
            &req.parameters,
            &req.metadata,
            &req.topologies,
            self.options.cluster.as_deref(),
        )
        .map_err(|problems| BackendError::InvalidArgument(problems.join("; ")))?;
        let existing: Vec<VolumeInfo> = self
            .api
            .volumes_named(&req.name)
            .await?
            .into_iter()
            .filter(|v| v.status != "deleting")
            .collect();
        if existing.len() > 1 {
            return Err(BackendError::Internal(format!(
                "{} volumes are named {}: {}",
                existing.len(),
                req.name,
                existing
                    .iter()
                    .map(|v| v.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let id = match existing.first() {
            Some(v) if v.size != size_gib => {
                return Err(BackendError::AlreadyExists(format!(
                    "volume {} named {} has {} GiB, not {size_gib} GiB",
                    v.id, req.name, v.size
                )))
            }
            Some(v) => v.id.clone(),
            None => {
                let created = self.api.create(&spec).await?;
                tracing::info!(
                    volume = created.id,
                    name = req.name,
                    zone = spec.zone.as_deref().unwrap_or(""),
                    size_gib,
                    "created volume"
                );
                created.id
            }
        };
        let v = self.wait_available(&id).await?;
        Ok(self.to_volume(&v))
    }

    async fn delete_volume(&self, volume_id: &str) -> Result<(), BackendError> {
        let Some(v) = self.api.volume(volume_id).await? else {
            return Ok(());
        };
        if !v.attachments.is_empty() {
            return Err(BackendError::FailedPrecondition(format!(
                "volume {volume_id} is attached ({})",
                v.status
            )));
        }
        if v.status == "deleting" {
            return Ok(());
        }
        self.api.delete(volume_id).await
    }

    async fn get_volume(&self, volume_id: &str) -> Result<Option<Volume>, BackendError> {
        Ok(self
            .api
            .volume(volume_id)
            .await?
            .as_ref()
            .map(|v| self.to_volume(v)))
    }

    async fn list_volumes(&self) -> Result<Vec<Volume>, BackendError> {
        let filter = self
            .options
            .cluster
            .as_deref()
            .filter(|c| !c.is_empty())
            .map(|c| (CLUSTER_KEY, c));
        let mut all = self.api.volumes(filter).await?;
        // A volume being deleted is gone as far as the CO is concerned.
        all.retain(|v| v.status != "deleting");
        all.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(all.iter().map(|v| self.to_volume(v)).collect())
    }

    async fn publish(
        &self,
        volume_id: &str,
        node_id: &str,
        _read_only: bool,
    ) -> Result<BTreeMap<String, String>, BackendError> {
        let v =
            self.api.volume(volume_id).await?.ok_or_else(|| {
                BackendError::NotFound(format!("volume {volume_id} does not exist"))
            })?;
        if !self.api.server_exists(node_id).await? {
            return Err(BackendError::NotFound(format!(
                "server {node_id} does not exist"
            )));
        }
        match plan_publish(&v, node_id)? {
            PublishStep::Done(device) => return Ok(device_context(device)),
            PublishStep::Wait => {}
            PublishStep::Attach => {
                let device = self.api.attach(node_id, volume_id).await?;
                tracing::info!(volume = volume_id, node = node_id, device, "attaching");
            }
        }
        let v = self
            .wait_volume(volume_id, "attached", |v| match plan_publish(v, node_id)? {
                PublishStep::Done(_) => Ok(true),
                PublishStep::Wait => Ok(false),
                // Another caller's detach finished meanwhile: the next retry attaches.
                PublishStep::Attach => Err(BackendError::Pending(format!(
                    "volume {volume_id} is not attached to {node_id} yet"
                ))),
            })
            .await?;
        Ok(device_context(
            v.attachment(node_id).and_then(|a| a.device.clone()),
        ))
    }

    async fn unpublish(&self, volume_id: &str, node_id: &str) -> Result<(), BackendError> {
        let Some(v) = self.api.volume(volume_id).await? else {
            return Ok(());
        };
        let attached = |v: &VolumeInfo| {
            if node_id.is_empty() {
                !v.attachments.is_empty()
            } else {
                v.attachment(node_id).is_some()
            }
        };
        if v.status == "attaching" {
            return Err(BackendError::Pending(format!(
                "volume {volume_id} is still attaching"
            )));
        }
        if !attached(&v) {
            return Ok(());
        }
        if v.status == "in-use" {
            let servers: Vec<String> = v
                .attachments
                .iter()
                .filter(|a| node_id.is_empty() || a.server_id == node_id)
                .map(|a| a.server_id.clone())
                .collect();
            for server in servers {
                self.api.detach(&server, volume_id).await?;
                tracing::info!(volume = volume_id, node = server, "detaching");
            }
        }
        match self
            .wait_volume(volume_id, "detached", |v| {
                Ok(!attached(v) && v.status != "detaching")
            })
            .await
        {
            Ok(_) | Err(BackendError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn expand(&self, volume_id: &str, required_bytes: i64) -> Result<i64, BackendError> {
        let want = round_up_gib(required_bytes);
        let v =
            self.api.volume(volume_id).await?.ok_or_else(|| {
                BackendError::NotFound(format!("volume {volume_id} does not exist"))
            })?;
        if v.size >= want && v.status != "extending" {
            return Ok(v.size * GIB);
        }
        if v.status != "extending" {
            self.api.extend(volume_id, want).await?;
            tracing::info!(volume = volume_id, size_gib = want, "extending");
        }
        let v = self
            .wait_volume(volume_id, "extended", |v| match v.status.as_str() {
                "error_extending" => Err(BackendError::Internal(format!(
                    "extending volume {volume_id} failed (status error_extending)"
                ))),
                "extending" => Ok(false),
                _ => Ok(v.size >= want),
            })
            .await?;
        Ok(v.size * GIB)
    }
}

fn device_context(device: Option<String>) -> BTreeMap<String, String> {
    device
        .filter(|d| !d.is_empty())
        .map(|d| (DEVICE_PATH.to_string(), d))
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cinder::AttachmentInfo;

    fn vol(status: &str, servers: &[&str], multiattach: bool) -> VolumeInfo {
        VolumeInfo {
            id: "v".into(),
            name: None,
            size: 1,
            status: status.into(),
            availability_zone: Some("nova".into()),
            multiattach,
            metadata: BTreeMap::new(),
            attachments: servers
                .iter()
                .map(|s| AttachmentInfo {
                    server_id: s.to_string(),
                    device: Some("/dev/vdb".into()),
                })
                .collect(),
        }
    }

    #[test]
    fn publish_steps() {
        use PublishStep::*;
        let cases = [
            (vol("available", &[], false), Ok(Attach)),
            (
                vol("in-use", &["n1"], false),
                Ok(Done(Some("/dev/vdb".into()))),
            ),
            (vol("attaching", &[], false), Ok(Wait)),
            (vol("detaching", &["n1"], false), Ok(Wait)),
            (vol("in-use", &["n2"], true), Ok(Attach)),
        ];
        for (v, want) in cases {
            assert_eq!(plan_publish(&v, "n1"), want, "{v:?}");
        }
        assert!(matches!(
            plan_publish(&vol("in-use", &["n2"], false), "n1"),
            Err(BackendError::FailedPrecondition(m)) if m.contains("n2")
        ));
        assert!(matches!(
            plan_publish(&vol("error", &[], false), "n1"),
            Err(BackendError::FailedPrecondition(_))
        ));
        assert_eq!(device_context(Some(String::new())), BTreeMap::new());
    }
}
