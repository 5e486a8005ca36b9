//! The narrow EC2 seam of the EBS driver: the calls it makes, through the shared AWS call guard
//! (rate limiter, retries, metrics), paging inside, and single-ID describes of volumes,
//! instances and modifications coalesced by the core's batcher (filters, not ID lists, so one
//! missing ID does not fail the whole batch).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types::{
    Filter, ResourceType, Snapshot as Ec2Snapshot, Tag, TagSpecification, Volume as Ec2Volume,
    VolumeType,
};
use aws_sdk_ec2::Client;
use stratus_aws_api::pager::pages;
use stratus_aws_api::AwsApi;
use stratus_cloud::CloudError;
use stratus_csi::batch::{Batcher, FetchFn};
use stratus_csi::BackendError;

use crate::params::VolumeSpec;

/// IDs per batched describe.
const BATCH: usize = 500;
/// Volume names per batched describe by name tag (EC2 takes up to 200 values per filter).
const NAME_BATCH: usize = 200;
/// Least batching window of instance reads.
const INSTANCE_WINDOW: Duration = Duration::from_secs(1);

/// A volume as the driver needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    /// `vol-…`.
    pub id: String,
    /// Size in GiB.
    pub size_gib: i32,
    /// The availability zone.
    pub zone: String,
    /// `creating`, `available`, `in-use`, `deleting`, `error`.
    pub state: String,
    /// Attachments: (instance, device, state).
    pub attachments: Vec<Attachment>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// The snapshot it was created from.
    pub snapshot_id: Option<String>,
}

/// One attachment of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The instance.
    pub instance_id: String,
    /// The device name.
    pub device: String,
    /// `attaching`, `attached`, `detaching`, `detached`.
    pub state: String,
}

/// An instance as the attacher needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceInfo {
    /// Its block device mappings: device name → volume ID.
    pub devices: BTreeMap<String, String>,
}

/// A snapshot as the driver needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// `snap-…`.
    pub id: String,
    /// The volume it was taken of.
    pub volume_id: String,
    /// Size in GiB.
    pub size_gib: i32,
    /// Start time, seconds since the epoch.
    pub started_unix: i64,
    /// `pending`, `completed`, `error`.
    pub state: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

/// A volume modification's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModificationInfo {
    /// `modifying`, `optimizing`, `completed`, `failed`.
    pub state: String,
    /// The size asked for, GiB.
    pub target_size_gib: i32,
}

/// What the EBS backend asks EC2.
#[derive(Clone)]
pub struct Ec2 {
    client: Client,
    api: AwsApi,
    /// The shared EC2 seam (its volume and instance reads).
    seam: stratus_aws_api::Ec2,
    volumes: Batcher<String, VolumeInfo, BackendError>,
    named: Batcher<String, Vec<VolumeInfo>, BackendError>,
    instances: Batcher<String, InstanceInfo, BackendError>,
    modifications: Batcher<String, ModificationInfo, BackendError>,
}

/// Maps a failed EC2 call to the CSI error the sidecars handle right.
pub fn backend_error(err: CloudError) -> BackendError {
    match &err {
        CloudError::Throttled { .. } | CloudError::Unavailable { .. } => {
            BackendError::Unavailable(err.to_string())
        }
        CloudError::Rejected { code, .. } => match code.as_str() {
            "InvalidVolume.NotFound"
            | "InvalidSnapshot.NotFound"
            | "InvalidInstanceID.NotFound"
            | "InvalidAttachment.NotFound" => BackendError::NotFound(err.to_string()),
            "VolumeInUse" | "InvalidVolume.ZoneMismatch" => {
                BackendError::FailedPrecondition(err.to_string())
            }
            "IncorrectState" | "IncorrectModificationState" => {
                BackendError::Pending(err.to_string())
            }
            "VolumeLimitExceeded" | "AttachmentLimitExceeded" | "SnapshotLimitExceeded" => {
                BackendError::ResourceExhausted(err.to_string())
            }
            "IdempotentParameterMismatch" => BackendError::AlreadyExists(err.to_string()),
            "InvalidParameterValue"
            | "InvalidParameterCombination"
            | "InvalidParameter"
            | "InvalidVolumeID.Malformed"
            | "InvalidSnapshotID.Malformed"
            | "InvalidZone.NotFound" => BackendError::InvalidArgument(err.to_string()),
            _ => BackendError::Internal(err.to_string()),
        },
        CloudError::InvalidInput(_) => BackendError::InvalidArgument(err.to_string()),
        _ => BackendError::Internal(err.to_string()),
    }
}

fn filter(name: &str, values: impl IntoIterator<Item = String>) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values.into_iter().collect()))
        .build()
}

/// Volumes grouped by the value of their tag `key` (volumes without it are left out).
fn group_by_tag(volumes: Vec<VolumeInfo>, key: &str) -> HashMap<String, Vec<VolumeInfo>> {
    let mut out: HashMap<String, Vec<VolumeInfo>> = HashMap::new();
    for v in volumes {
        if let Some(value) = v.tags.get(key).cloned() {
            out.entry(value).or_default().push(v);
        }
    }
    out
}

fn tags_of(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_string(),
                t.value().unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

fn volume_info(v: &Ec2Volume) -> Option<VolumeInfo> {
    Some(VolumeInfo {
        id: v.volume_id()?.to_string(),
        size_gib: v.size().unwrap_or(0),
        zone: v.availability_zone().unwrap_or_default().to_string(),
        state: v
            .state()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        attachments: v
            .attachments()
            .iter()
            .filter_map(|a| {
                Some(Attachment {
                    instance_id: a.instance_id()?.to_string(),
                    device: a.device().unwrap_or_default().to_string(),
                    state: a
                        .state()
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                })
            })
            .collect(),
        tags: tags_of(v.tags()),
        snapshot_id: v
            .snapshot_id()
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    })
}

fn snapshot_info(s: &Ec2Snapshot) -> Option<SnapshotInfo> {
    Some(SnapshotInfo {
        id: s.snapshot_id()?.to_string(),
        volume_id: s.volume_id().unwrap_or_default().to_string(),
        size_gib: s.volume_size().unwrap_or(0),
        started_unix: s.start_time().map(|t| t.secs()).unwrap_or(0),
        state: s
            .state()
            .map(|x| x.as_str().to_string())
            .unwrap_or_default(),
        tags: tags_of(s.tags()),
    })
}

fn tag_spec(kind: ResourceType, tags: &BTreeMap<String, String>) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect(),
        ))
        .build()
}

impl Ec2 {
    /// The seam over `client`, calling through `api`, batching single describes within
    /// `window`.
    /// Lookups arriving within `window` share one describe; with `None` (`--batching=false`)
    /// every lookup is its own describe.
    pub fn new(client: Client, api: AwsApi, window: Option<Duration>) -> Ec2 {
        let (window, instance_window, batch, name_batch, instance_batch) = match window {
            Some(w) => (w, w.max(INSTANCE_WINDOW), BATCH, NAME_BATCH, 50),
            None => (Duration::ZERO, Duration::ZERO, 1, 1, 1),
        };
        let seam = stratus_aws_api::Ec2::new(client.clone(), api.clone());
        let volumes = {
            let seam = seam.clone();
            let fetch: FetchFn<String, VolumeInfo, BackendError> = Arc::new(move |ids| {
                let seam = seam.clone();
                Box::pin(async move {
                    let found = describe_volumes(&seam, vec![filter("volume-id", ids)]).await?;
                    Ok(found.into_iter().map(|v| (v.id.clone(), v)).collect())
                })
            });
            Batcher::new(window, batch, fetch)
        };
        let named = {
            let seam = seam.clone();
            let fetch: FetchFn<String, Vec<VolumeInfo>, BackendError> = Arc::new(move |names| {
                let seam = seam.clone();
                Box::pin(async move {
                    let tag = format!("tag:{}", crate::tags::VOLUME_NAME);
                    let found = describe_volumes(&seam, vec![filter(&tag, names)]).await?;
                    Ok(group_by_tag(found, crate::tags::VOLUME_NAME))
                })
            });
            Batcher::new(window, name_batch, fetch)
        };
        let instances = {
            let seam = seam.clone();
            let fetch: FetchFn<String, InstanceInfo, BackendError> = Arc::new(move |ids| {
                let seam = seam.clone();
                Box::pin(async move { describe_instances(&seam, ids).await })
            });
            // An instance is read once per node (its first attach in this process), so a
            // longer window costs a second once per node and gathers the nodes' first attaches
            // into one call.
            Batcher::new(instance_window, instance_batch, fetch)
        };
        let modifications = {
            let (client, api) = (client.clone(), api.clone());
            let fetch: FetchFn<String, ModificationInfo, BackendError> = Arc::new(move |ids| {
                let (client, api) = (client.clone(), api.clone());
                Box::pin(async move { describe_modifications(&client, &api, ids).await })
            });
            Batcher::new(window, batch, fetch)
        };
        Ec2 {
            client,
            api,
            seam,
            volumes,
            named,
            instances,
            modifications,
        }
    }

    /// The volume (batched), `None` when it does not exist.
    pub async fn volume(&self, id: &str) -> Result<Option<VolumeInfo>, BackendError> {
        self.volumes.get(id.to_string()).await
    }

    /// The volumes among `ids` that exist, in one describe (the state poller's fetch).
    pub async fn volumes_by_id(
        &self,
        ids: Vec<String>,
    ) -> Result<HashMap<String, VolumeInfo>, BackendError> {
        let found = describe_volumes(&self.seam, vec![filter("volume-id", ids)]).await?;
        Ok(found.into_iter().map(|v| (v.id.clone(), v)).collect())
    }

    /// The instance (batched), `None` when it does not exist.
    pub async fn instance(&self, id: &str) -> Result<Option<InstanceInfo>, BackendError> {
        self.instances.get(id.to_string()).await
    }

    /// The latest modification of the volume (batched).
    pub async fn modification(&self, id: &str) -> Result<Option<ModificationInfo>, BackendError> {
        self.modifications.get(id.to_string()).await
    }

    /// The volumes named `name` by their `CSIVolumeName` tag (batched: the CreateVolume calls
    /// of one window share one describe).
    pub async fn volumes_named(&self, name: &str) -> Result<Vec<VolumeInfo>, BackendError> {
        Ok(self.named.get(name.to_string()).await?.unwrap_or_default())
    }

    /// Volumes carrying tag `key` = `value`.
    pub async fn volumes_tagged(
        &self,
        key: &str,
        value: &str,
    ) -> Result<Vec<VolumeInfo>, BackendError> {
        describe_volumes(
            &self.seam,
            vec![filter(&format!("tag:{key}"), [value.to_string()])],
        )
        .await
    }

    /// Volumes carrying tag key `key`.
    pub async fn volumes_with_tag_key(&self, key: &str) -> Result<Vec<VolumeInfo>, BackendError> {
        describe_volumes(&self.seam, vec![filter("tag-key", [key.to_string()])]).await
    }

    /// Creates a volume.
    pub async fn create_volume(
        &self,
        spec: &VolumeSpec,
        zone: &str,
        snapshot: Option<&str>,
        token: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<VolumeInfo, BackendError> {
        let out = self
            .api
            .call("CreateVolume", || {
                self.client
                    .create_volume()
                    .availability_zone(zone)
                    .size(spec.size_gib)
                    .volume_type(VolumeType::from(spec.volume_type.as_str()))
                    .set_iops(spec.iops)
                    .set_throughput(spec.throughput)
                    .encrypted(spec.encrypted)
                    .set_kms_key_id(spec.kms_key_id.clone())
                    .set_snapshot_id(snapshot.map(str::to_string))
                    .client_token(token)
                    .tag_specifications(tag_spec(ResourceType::Volume, tags))
                    .send()
            })
            .await
            .map_err(backend_error)?;
        Ok(VolumeInfo {
            id: out.volume_id().unwrap_or_default().to_string(),
            size_gib: out.size().unwrap_or(spec.size_gib),
            zone: out.availability_zone().unwrap_or(zone).to_string(),
            state: out
                .state()
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            attachments: Vec::new(),
            tags: tags.clone(),
            snapshot_id: snapshot.map(str::to_string),
        })
    }

    /// Deletes a volume.
    pub async fn delete_volume(&self, id: &str) -> Result<(), BackendError> {
        self.api
            .call("DeleteVolume", || {
                self.client.delete_volume().volume_id(id).send()
            })
            .await
            .map(drop)
            .map_err(backend_error)
    }

    /// Attaches a volume at `device`.
    pub async fn attach(
        &self,
        volume: &str,
        instance: &str,
        device: &str,
    ) -> Result<(), BackendError> {
        self.api
            .call("AttachVolume", || {
                self.client
                    .attach_volume()
                    .volume_id(volume)
                    .instance_id(instance)
                    .device(device)
                    .send()
            })
            .await
            .map(drop)
            .map_err(backend_error)
    }

    /// Detaches a volume from an instance.
    pub async fn detach(&self, volume: &str, instance: &str) -> Result<(), BackendError> {
        self.api
            .call("DetachVolume", || {
                self.client
                    .detach_volume()
                    .volume_id(volume)
                    .instance_id(instance)
                    .send()
            })
            .await
            .map(drop)
            .map_err(backend_error)
    }

    /// Asks for a new size.
    pub async fn modify_size(&self, volume: &str, size_gib: i32) -> Result<(), BackendError> {
        self.api
            .call("ModifyVolume", || {
                self.client
                    .modify_volume()
                    .volume_id(volume)
                    .size(size_gib)
                    .send()
            })
            .await
            .map(drop)
            .map_err(backend_error)
    }

    /// Availability zones of the region.
    pub async fn zones(&self) -> Result<Vec<String>, BackendError> {
        let out = self
            .api
            .call("DescribeAvailabilityZones", || {
                self.client.describe_availability_zones().send()
            })
            .await
            .map_err(backend_error)?;
        Ok(out
            .availability_zones()
            .iter()
            .filter_map(|z| z.zone_name().map(str::to_string))
            .collect())
    }

    /// Creates a snapshot.
    pub async fn create_snapshot(
        &self,
        volume: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<SnapshotInfo, BackendError> {
        let out = self
            .api
            .call("CreateSnapshot", || {
                self.client
                    .create_snapshot()
                    .volume_id(volume)
                    .tag_specifications(tag_spec(ResourceType::Snapshot, tags))
                    .send()
            })
            .await
            .map_err(backend_error)?;
        Ok(SnapshotInfo {
            id: out.snapshot_id().unwrap_or_default().to_string(),
            volume_id: volume.to_string(),
            size_gib: out.volume_size().unwrap_or(0),
            started_unix: out.start_time().map(|t| t.secs()).unwrap_or(0),
            state: out
                .state()
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            tags: tags.clone(),
        })
    }

    /// Deletes a snapshot.
    pub async fn delete_snapshot(&self, id: &str) -> Result<(), BackendError> {
        self.api
            .call("DeleteSnapshot", || {
                self.client.delete_snapshot().snapshot_id(id).send()
            })
            .await
            .map(drop)
            .map_err(backend_error)
    }

    /// Snapshots matching the filters (name, value).
    pub async fn snapshots(
        &self,
        filters: &[(&str, &str)],
    ) -> Result<Vec<SnapshotInfo>, BackendError> {
        let filters: Vec<Filter> = filters
            .iter()
            .map(|(n, v)| filter(n, [v.to_string()]))
            .collect();
        let mut out = Vec::new();
        pages(
            &self.api,
            "DescribeSnapshots",
            |token| {
                self.client
                    .describe_snapshots()
                    .owner_ids("self")
                    .set_filters(Some(filters.clone()))
                    .max_results(1000)
                    .set_next_token(token)
                    .send()
            },
            |page| {
                out.extend(page.snapshots().iter().filter_map(snapshot_info));
                page.next_token().map(str::to_string)
            },
        )
        .await
        .map_err(backend_error)?;
        Ok(out)
    }
}

/// The volumes matching every filter, through the shared EC2 seam.
async fn describe_volumes(
    seam: &stratus_aws_api::Ec2,
    filters: Vec<Filter>,
) -> Result<Vec<VolumeInfo>, BackendError> {
    seam.describe_volumes(&filters, volume_info)
        .await
        .map_err(backend_error)
}

/// The devices of the instances `ids` that are not terminated, through the shared EC2 seam.
async fn describe_instances(
    seam: &stratus_aws_api::Ec2,
    ids: Vec<String>,
) -> Result<HashMap<String, InstanceInfo>, BackendError> {
    let found = seam
        .describe_instances(&[filter("instance-id", ids)], |instance| {
            let id = instance.instance_id()?;
            let terminated = instance
                .state()
                .and_then(|s| s.name())
                .is_some_and(|n| n.as_str() == "terminated");
            if terminated {
                return None;
            }
            let devices = instance
                .block_device_mappings()
                .iter()
                .filter_map(|m| {
                    let volume = m.ebs().and_then(|e| e.volume_id()).unwrap_or_default();
                    Some((m.device_name()?.to_string(), volume.to_string()))
                })
                .collect();
            Some((id.to_string(), InstanceInfo { devices }))
        })
        .await
        .map_err(backend_error)?;
    Ok(found.into_iter().collect())
}

async fn describe_modifications(
    client: &Client,
    api: &AwsApi,
    ids: Vec<String>,
) -> Result<HashMap<String, ModificationInfo>, BackendError> {
    let filters = vec![filter("volume-id", ids)];
    let page = api
        .call("DescribeVolumesModifications", || {
            client
                .describe_volumes_modifications()
                .set_filters(Some(filters.clone()))
                .send()
        })
        .await
        .map_err(backend_error)?;
    let mut out = HashMap::new();
    // The newest modification of each volume wins (answers list them oldest first).
    for m in page.volumes_modifications() {
        if let Some(id) = m.volume_id() {
            out.insert(
                id.to_string(),
                ModificationInfo {
                    state: m
                        .modification_state()
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                    target_size_gib: m.target_size().unwrap_or(0),
                },
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(id: &str, name: Option<&str>) -> VolumeInfo {
        VolumeInfo {
            id: id.into(),
            size_gib: 1,
            zone: "us-east-1a".into(),
            state: "available".into(),
            attachments: vec![],
            tags: name
                .map(|n| (crate::tags::VOLUME_NAME.to_string(), n.to_string()))
                .into_iter()
                .collect(),
            snapshot_id: None,
        }
    }

    #[test]
    fn a_batch_by_name_answers_each_name_its_volumes() {
        let grouped = group_by_tag(
            vec![
                volume("vol-1", Some("pvc-a")),
                volume("vol-2", Some("pvc-b")),
                volume("vol-3", Some("pvc-a")),
                volume("vol-4", None),
            ],
            crate::tags::VOLUME_NAME,
        );
        let ids =
            |name: &str| -> Vec<&str> { grouped[name].iter().map(|v| v.id.as_str()).collect() };
        assert_eq!(ids("pvc-a"), ["vol-1", "vol-3"]);
        assert_eq!(ids("pvc-b"), ["vol-2"]);
        assert_eq!(grouped.len(), 2);
    }
}
