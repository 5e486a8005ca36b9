//! The seams between the CSI core and a cloud: [`ControllerBackend`] (volumes, attachments,
//! snapshots in the cloud) and [`NodeBackend`] (which device a volume is on this node). The
//! core validates requests and maps errors; a backend only answers cloud questions.
//!
//! Contracts every backend keeps:
//! - `create_volume` is idempotent by `name`: a retried or concurrent call with the same name
//!   and compatible settings returns the same volume; incompatible settings are
//!   [`BackendError::AlreadyExists`]. The volume is tagged at creation as ours and with its name.
//! - `delete_volume`, `unpublish` and `delete_snapshot` of something already gone succeed.
//! - `publish` returns [`BackendError::Pending`] while the cloud is still attaching (the CO
//!   retries), [`BackendError::NotFound`] for an unknown volume or node, and never waits
//!   without a deadline.

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;

use crate::error::BackendError;

/// Topology segments (`topology.ebs.csi.aws.com/zone` → `eu-west-1a`).
pub type Topology = BTreeMap<String, String>;

/// What a new volume is created from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// A snapshot ID.
    Snapshot(String),
    /// Another volume's ID.
    Volume(String),
}

/// A validated CreateVolume request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateVolumeRequest {
    /// The CO's name for the volume (the idempotency key).
    pub name: String,
    /// Requested size in bytes (already rounded by nothing: the backend rounds up).
    pub required_bytes: i64,
    /// Upper bound in bytes, 0 for none.
    pub limit_bytes: i64,
    /// StorageClass parameters (the `csi.storage.k8s.io/` keys removed).
    pub parameters: BTreeMap<String, String>,
    /// Parameters the external-provisioner adds with `--extra-create-metadata`
    /// (`csi.storage.k8s.io/pvc/name`…).
    pub metadata: BTreeMap<String, String>,
    /// Preferred topologies first, then the requisite ones.
    pub topologies: Vec<Topology>,
    /// Whether a capability asks for multi-node access.
    pub multi_attach: bool,
    /// What to create the volume from.
    pub source: Option<VolumeSource>,
}

/// A volume in the cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// The cloud's ID.
    pub id: String,
    /// Size in bytes.
    pub capacity_bytes: i64,
    /// Where it can be attached.
    pub topology: Option<Topology>,
    /// What it was created from.
    pub source: Option<VolumeSource>,
    /// Nodes it is attached to (for ListVolumes).
    pub attached_to: Vec<String>,
    /// Context handed back to the node (fsType…).
    pub context: BTreeMap<String, String>,
}

/// A snapshot in the cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The cloud's ID.
    pub id: String,
    /// The volume it was taken of.
    pub source_volume_id: String,
    /// Size in bytes.
    pub size_bytes: i64,
    /// Creation time, seconds since the epoch.
    pub created_unix: i64,
    /// Whether it can be restored from.
    pub ready: bool,
}

/// Which optional controller features a backend has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControllerCaps {
    /// CREATE_DELETE_SNAPSHOT and LIST_SNAPSHOTS.
    pub snapshots: bool,
    /// CLONE_VOLUME.
    pub clone: bool,
    /// GET_CAPACITY.
    pub capacity: bool,
    /// MULTI_NODE access modes are accepted.
    pub multi_attach: bool,
}

/// A cloud's volume, attachment and snapshot operations.
#[async_trait]
pub trait ControllerBackend: Send + Sync + 'static {
    /// Optional features.
    fn caps(&self) -> ControllerCaps;
    /// Creates the volume or returns the one already created under `req.name`.
    async fn create_volume(&self, req: &CreateVolumeRequest) -> Result<Volume, BackendError>;
    /// Deletes the volume; gone already is success. An attached volume is FailedPrecondition.
    async fn delete_volume(&self, volume_id: &str) -> Result<(), BackendError>;
    /// The volume, or `None` when it does not exist.
    async fn get_volume(&self, volume_id: &str) -> Result<Option<Volume>, BackendError>;
    /// Every volume this driver created, in a stable order.
    async fn list_volumes(&self) -> Result<Vec<Volume>, BackendError>;
    /// Attaches the volume to the node and returns the publish context (device hints).
    async fn publish(
        &self,
        volume_id: &str,
        node_id: &str,
        read_only: bool,
    ) -> Result<BTreeMap<String, String>, BackendError>;
    /// Detaches the volume from the node; not attached (or gone) is success.
    async fn unpublish(&self, volume_id: &str, node_id: &str) -> Result<(), BackendError>;
    /// Grows the volume to at least `required_bytes`; returns the new size.
    async fn expand(&self, volume_id: &str, required_bytes: i64) -> Result<i64, BackendError>;
    /// Available capacity for the parameters and topology, when the cloud knows it.
    async fn capacity(
        &self,
        _parameters: &BTreeMap<String, String>,
        _topology: Option<&Topology>,
    ) -> Result<Option<i64>, BackendError> {
        Ok(None)
    }
    /// Creates a snapshot of the volume named `name`, idempotent by name.
    async fn create_snapshot(
        &self,
        _name: &str,
        _source_volume_id: &str,
        _parameters: &BTreeMap<String, String>,
    ) -> Result<Snapshot, BackendError> {
        Err(BackendError::InvalidArgument(
            "this driver has no snapshots".into(),
        ))
    }
    /// Deletes the snapshot; gone already is success.
    async fn delete_snapshot(&self, _snapshot_id: &str) -> Result<(), BackendError> {
        Err(BackendError::InvalidArgument(
            "this driver has no snapshots".into(),
        ))
    }
    /// Every snapshot this driver created, in a stable order.
    async fn list_snapshots(&self) -> Result<Vec<Snapshot>, BackendError> {
        Ok(Vec::new())
    }
}

/// What the node plugin asks the cloud side of a node.
#[async_trait]
pub trait NodeBackend: Send + Sync + 'static {
    /// This node's ID as the controller knows it (the instance ID).
    fn node_id(&self) -> String;
    /// How many volumes may be attached to this node (0: no limit reported).
    fn max_volumes(&self) -> i64;
    /// This node's topology segments.
    fn topology(&self) -> Topology;
    /// The block device of an attached volume, waiting (with a deadline) for it to appear.
    async fn find_device(
        &self,
        volume_id: &str,
        publish_context: &BTreeMap<String, String>,
    ) -> Result<PathBuf, BackendError>;
    /// Makes the kernel see a volume grown to `required_bytes` (a rescan); the default does
    /// nothing (NVMe and virtio devices report the new size by themselves).
    async fn rescan(
        &self,
        _volume_id: &str,
        _device: &std::path::Path,
        _required_bytes: i64,
    ) -> Result<(), BackendError> {
        Ok(())
    }
}
