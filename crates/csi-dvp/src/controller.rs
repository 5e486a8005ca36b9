//! The DVP controller backend: CreateVolume makes (or finds, by name) a VirtualDisk and waits
//! for it to be Ready; ControllerPublish hot-plugs it with a VMBDA and waits for Attached;
//! Unpublish and DeleteVolume remove the objects and wait for them to be gone; expansion patches
//! the disk's size and waits for the capacity. Every wait has a deadline; when it passes while
//! the platform is still working the call answers Unavailable, so the sidecars retry and the
//! next call picks the operation up where the platform is.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use stratus_csi::backend::{ControllerBackend, ControllerCaps, CreateVolumeRequest, Volume};
use stratus_csi::BackendError;
use stratus_dvp_api::labels::{CLUSTER_UUID, MANAGED_BY, MANAGED_BY_DECKHOUSE};
use stratus_dvp_api::{VirtualDisk, VirtualDiskPvc, VirtualDiskSpec};
use tokio::time::Instant;

use crate::names::{disk_labels, disk_name, serial, vmbda_name};
use crate::parent::Parent;
use crate::plan::{plan_publish, PublishStep};
use crate::quantity::parse_bytes;
use crate::{SERIAL_KEY, STORAGE_CLASS_PARAM};

/// The size of a volume whose request names none.
pub const DEFAULT_SIZE: i64 = 1 << 30;

/// Settings of the DVP controller.
#[derive(Debug, Clone)]
pub struct DvpOptions {
    /// The tenant cluster's UUID, written as `dvp.deckhouse.io/cluster-uuid` on every disk.
    pub cluster_uuid: String,
    /// How long one call waits for a disk to be ready, attached, detached, grown or gone.
    pub operation_wait: Duration,
    /// Poll interval of the waits.
    pub poll: Duration,
}

impl Default for DvpOptions {
    fn default() -> Self {
        DvpOptions {
            cluster_uuid: String::new(),
            operation_wait: Duration::from_secs(10),
            poll: Duration::from_millis(200),
        }
    }
}

/// The DVP controller backend.
pub struct DvpController {
    parent: Parent,
    options: DvpOptions,
}

/// The size a CreateVolume asks for, or why it cannot be had (pure).
pub fn requested_size(required: i64, limit: i64) -> Result<i64, BackendError> {
    let size = match (required, limit) {
        (r, _) if r > 0 => r,
        (_, l) if l > 0 => l.min(DEFAULT_SIZE),
        _ => DEFAULT_SIZE,
    };
    if limit > 0 && size > limit {
        return Err(BackendError::InvalidArgument(format!(
            "required_bytes {required} exceeds limit_bytes {limit}"
        )));
    }
    Ok(size)
}

/// The parent StorageClass a request names; unknown parameters are errors (pure).
pub fn storage_class(
    parameters: &BTreeMap<String, String>,
) -> Result<Option<String>, BackendError> {
    let unknown: Vec<&String> = parameters
        .keys()
        .filter(|k| k.as_str() != STORAGE_CLASS_PARAM)
        .collect();
    if !unknown.is_empty() {
        return Err(BackendError::InvalidArgument(format!(
            "unknown StorageClass parameters {unknown:?} (known: {STORAGE_CLASS_PARAM})"
        )));
    }
    Ok(parameters
        .get(STORAGE_CLASS_PARAM)
        .filter(|s| !s.is_empty())
        .cloned())
}

fn spec_size(d: &VirtualDisk) -> Option<i64> {
    d.spec
        .persistent_volume_claim
        .as_ref()
        .and_then(|p| p.size.as_deref())
        .and_then(parse_bytes)
}

fn capacity(d: &VirtualDisk) -> Option<i64> {
    d.status
        .as_ref()
        .and_then(|s| s.capacity.as_deref())
        .and_then(parse_bytes)
}

fn phase(d: &VirtualDisk) -> &str {
    d.status.as_ref().map(|s| s.phase.as_str()).unwrap_or("")
}

/// The node an attachment of `disk` names (`vmbda-<disk>-<node>`).
fn node_of(disk: &str, vmbda: &str) -> Option<String> {
    vmbda
        .strip_prefix(&vmbda_name(disk, ""))
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

impl DvpController {
    /// Removes an attachment the platform reports `Failed` and answers the retryable error that
    /// makes the caller try again (which creates it anew).
    async fn replace_failed(&self, name: &str) -> BackendError {
        tracing::warn!(
            attachment = name,
            "the platform failed the hot plug; removing the attachment to retry"
        );
        match self.parent.delete_attachment(name).await {
            Ok(()) => BackendError::Unavailable(format!(
                "the platform failed to attach the disk (attachment {name} was Failed); removed it, the next attempt attaches anew"
            )),
            Err(e) => e,
        }
    }

    /// A controller writing in `parent`.
    pub fn new(parent: Parent, options: DvpOptions) -> DvpController {
        DvpController { parent, options }
    }

    /// Asks `check` until it answers, the deadline passes (Unavailable naming `what`) or it
    /// fails.
    async fn wait<T, F, Fut>(&self, what: &str, check: F) -> Result<T, BackendError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Option<T>, BackendError>>,
    {
        let deadline = Instant::now() + self.options.operation_wait;
        loop {
            if let Some(v) = check().await? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Unavailable(format!(
                    "{what} after {:?}; the platform is still working, retry",
                    self.options.operation_wait
                )));
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    fn to_volume(&self, d: &VirtualDisk, attached_to: Vec<String>) -> Volume {
        Volume {
            id: d.metadata.name.clone().unwrap_or_default(),
            capacity_bytes: capacity(d).or_else(|| spec_size(d)).unwrap_or(0),
            topology: None,
            source: None,
            attached_to,
            context: BTreeMap::new(),
        }
    }

    async fn existing_disk(&self, name: &str) -> Result<VirtualDisk, BackendError> {
        self.parent
            .disk(name)
            .await?
            .ok_or_else(|| BackendError::NotFound(format!("VirtualDisk {name} does not exist")))
    }

    fn new_disk(&self, name: &str, size: i64, class: Option<String>) -> VirtualDisk {
        let mut d = VirtualDisk::new(
            name,
            self.parent.namespace(),
            VirtualDiskSpec {
                persistent_volume_claim: Some(VirtualDiskPvc {
                    size: Some(size.to_string()),
                    storage_class_name: class,
                }),
                ..VirtualDiskSpec::default()
            },
        );
        d.metadata.labels = Some(disk_labels(name, &self.options.cluster_uuid));
        d
    }
}

#[async_trait]
impl ControllerBackend for DvpController {
    fn caps(&self) -> ControllerCaps {
        ControllerCaps {
            snapshots: false,
            clone: false,
            capacity: false,
            multi_attach: false,
        }
    }

    async fn create_volume(&self, req: &CreateVolumeRequest) -> Result<Volume, BackendError> {
        if req.source.is_some() {
            return Err(BackendError::InvalidArgument(
                "this driver creates no volumes from snapshots or other volumes".into(),
            ));
        }
        let size = requested_size(req.required_bytes, req.limit_bytes)?;
        let class = storage_class(&req.parameters)?;
        let disk_name = disk_name(&req.name);
        let name = disk_name.as_str();
        let disk = match self.parent.disk(name).await? {
            Some(d) => d,
            None => {
                let d = self
                    .parent
                    .create_disk(&self.new_disk(name, size, class))
                    .await?;
                tracing::info!(disk = name, volume = req.name, size, "created VirtualDisk");
                d
            }
        };
        if disk.metadata.deletion_timestamp.is_some() {
            return Err(BackendError::Unavailable(format!(
                "VirtualDisk {name} is being deleted; retry once it is gone"
            )));
        }
        if spec_size(&disk) != Some(size) {
            return Err(BackendError::AlreadyExists(format!(
                "VirtualDisk {name} exists with size {:?}, not {size} bytes",
                disk.spec
                    .persistent_volume_claim
                    .as_ref()
                    .and_then(|p| p.size.clone())
            )));
        }
        let ready = self
            .wait(&format!("VirtualDisk {name} is not Ready"), || async {
                let d = self.existing_disk(name).await?;
                match phase(&d) {
                    "Ready" => Ok(Some(d)),
                    "Failed" => Err(BackendError::Internal(format!(
                        "the platform failed to provision VirtualDisk {name} (phase Failed)"
                    ))),
                    _ => Ok(None),
                }
            })
            .await?;
        Ok(self.to_volume(&ready, Vec::new()))
    }

    async fn delete_volume(&self, volume_id: &str) -> Result<(), BackendError> {
        let Some(disk) = self.parent.disk(volume_id).await? else {
            return Ok(());
        };
        if disk.metadata.deletion_timestamp.is_none() {
            let attachments = self.parent.attachments_of(volume_id).await?;
            if let Some(a) = attachments.first() {
                let (vm, name) = (
                    &a.spec.virtual_machine_name,
                    a.metadata.name.as_deref().unwrap_or_default(),
                );
                return Err(if a.metadata.deletion_timestamp.is_some() {
                    BackendError::Unavailable(format!(
                        "VirtualDisk {volume_id} is still being detached from VM {vm} ({name}); retrying"
                    ))
                } else {
                    BackendError::FailedPrecondition(format!(
                        "VirtualDisk {volume_id} is attached to VM {vm} by {name}"
                    ))
                });
            }
            self.parent.delete_disk(volume_id).await?;
            tracing::info!(disk = volume_id, "deleting VirtualDisk");
        }
        self.wait(&format!("VirtualDisk {volume_id} is not gone"), || async {
            Ok(self.parent.disk(volume_id).await?.is_none().then_some(()))
        })
        .await
    }

    async fn get_volume(&self, volume_id: &str) -> Result<Option<Volume>, BackendError> {
        let Some(d) = self.parent.disk(volume_id).await? else {
            return Ok(None);
        };
        let nodes = self
            .parent
            .attachments_of(volume_id)
            .await?
            .iter()
            .filter_map(|a| node_of(volume_id, a.metadata.name.as_deref().unwrap_or_default()))
            .collect();
        Ok(Some(self.to_volume(&d, nodes)))
    }

    async fn list_volumes(&self) -> Result<Vec<Volume>, BackendError> {
        let mut selector = format!("{MANAGED_BY}={MANAGED_BY_DECKHOUSE}");
        if !self.options.cluster_uuid.is_empty() {
            selector.push_str(&format!(",{CLUSTER_UUID}={}", self.options.cluster_uuid));
        }
        let mut disks: Vec<VirtualDisk> = self
            .parent
            .disks(&selector)
            .await?
            .into_iter()
            .filter(|d| d.metadata.deletion_timestamp.is_none())
            .collect();
        disks.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for a in self.parent.all_attachments().await? {
            let disk = a.spec.block_device_ref.name;
            if let Some(node) = node_of(&disk, a.metadata.name.as_deref().unwrap_or_default()) {
                nodes.entry(disk).or_default().push(node);
            }
        }
        Ok(disks
            .iter()
            .map(|d| {
                let name = d.metadata.name.clone().unwrap_or_default();
                self.to_volume(d, nodes.remove(&name).unwrap_or_default())
            })
            .collect())
    }

    async fn publish(
        &self,
        volume_id: &str,
        node_id: &str,
        _read_only: bool,
    ) -> Result<BTreeMap<String, String>, BackendError> {
        let disk = self.existing_disk(volume_id).await?;
        let vm = self.parent.vm_of_node(node_id).await?.ok_or_else(|| {
            BackendError::NotFound(format!("no VirtualMachine backs node {node_id}"))
        })?;
        let uid = disk.metadata.uid.clone().unwrap_or_default();
        let context = BTreeMap::from([(SERIAL_KEY.to_string(), serial(&uid))]);
        let mine = vmbda_name(volume_id, node_id);
        let attachments = self.parent.attachments_of(volume_id).await?;
        match plan_publish(&attachments, vm.name(), &mine)? {
            PublishStep::Create => {
                self.parent.create_attachment(&mine, volume_id, &vm).await?;
                tracing::info!(
                    disk = volume_id,
                    vm = vm.name(),
                    attachment = mine,
                    "attaching"
                );
            }
            PublishStep::Replace => return Err(self.replace_failed(&mine).await),
            PublishStep::Done | PublishStep::Wait => {}
        }
        self.wait(&format!("attachment {mine} is not Attached"), || async {
            let Some(a) = self.parent.attachment(&mine).await? else {
                return Err(BackendError::Unavailable(format!(
                    "attachment {mine} disappeared while attaching; retrying"
                )));
            };
            match plan_publish(&[a], vm.name(), &mine)? {
                PublishStep::Done => Ok(Some(())),
                PublishStep::Replace => Err(self.replace_failed(&mine).await),
                PublishStep::Create | PublishStep::Wait => Ok(None),
            }
        })
        .await?;
        Ok(context)
    }

    async fn unpublish(&self, volume_id: &str, node_id: &str) -> Result<(), BackendError> {
        let names: Vec<String> = if node_id.is_empty() {
            self.parent
                .attachments_of(volume_id)
                .await?
                .into_iter()
                .filter_map(|a| a.metadata.name)
                .collect()
        } else {
            vec![vmbda_name(volume_id, node_id)]
        };
        for name in &names {
            self.parent.delete_attachment(name).await?;
        }
        for name in &names {
            self.wait(&format!("attachment {name} is not gone"), || async {
                Ok(self.parent.attachment(name).await?.is_none().then_some(()))
            })
            .await?;
        }
        Ok(())
    }

    async fn expand(&self, volume_id: &str, required_bytes: i64) -> Result<i64, BackendError> {
        let disk = self.existing_disk(volume_id).await?;
        if spec_size(&disk).unwrap_or(0) < required_bytes {
            self.parent
                .resize_disk(volume_id, &required_bytes.to_string())
                .await?;
            tracing::info!(
                disk = volume_id,
                size = required_bytes,
                "resizing VirtualDisk"
            );
        }
        self.wait(
            &format!("VirtualDisk {volume_id} has not grown"),
            || async {
                let d = self.existing_disk(volume_id).await?;
                Ok(capacity(&d).filter(|c| *c >= required_bytes))
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parameters_and_nodes() {
        assert_eq!(requested_size(5 << 30, 0), Ok(5 << 30));
        assert_eq!(requested_size(0, 0), Ok(DEFAULT_SIZE));
        assert_eq!(requested_size(0, 1 << 20), Ok(1 << 20));
        assert!(matches!(
            requested_size(2 << 30, 1 << 30),
            Err(BackendError::InvalidArgument(_))
        ));
        let p = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            storage_class(&p(&[(STORAGE_CLASS_PARAM, "ceph")])),
            Ok(Some("ceph".into()))
        );
        assert_eq!(storage_class(&p(&[])), Ok(None));
        assert!(storage_class(&p(&[("type", "x")])).is_err());
        assert_eq!(node_of("d", "vmbda-d-node-1").as_deref(), Some("node-1"));
        assert_eq!(node_of("d", "other"), None);
    }
}
