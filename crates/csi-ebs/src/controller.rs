//! The EBS controller backend: CreateVolume idempotent by a ClientToken derived from the name
//! (EC2 answers a repeat with the same volume, other parameters with
//! `IdempotentParameterMismatch`), attach/detach straight away with device names remembered per
//! node, expansion by ModifyVolume with batched modification polling, snapshots. Every wait
//! (available, attached, detached) goes through one shared volume-state poller, so concurrent
//! operations share each DescribeVolumes. Every wait has a deadline; when it passes the call
//! answers Pending (gRPC Aborted) so the sidecar retries and the next call picks the operation up
//! where the cloud is. What a publish or unpublish does next is decided by [`crate::plan`] from
//! the volume's attachments; this driver makes the calls.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use stratus_csi::backend::{
    ControllerBackend, ControllerCaps, CreateVolumeRequest, Snapshot, Volume, VolumeSource,
};
use stratus_csi::batch::FetchFn;
use stratus_csi::poller::{Poller, Waited};
use stratus_csi::validate::round_up_gib;
use stratus_csi::BackendError;
use tokio::time::Instant;

use crate::devices::NodeDevices;
use crate::ec2::{Ec2, VolumeInfo};
use crate::params::{volume_spec_with, InvalidTags};
use crate::plan::{
    attached_to, detach_targets, plan_refused, plan_repeat, still_attached, Refused, RepeatStep,
};
pub use crate::shapes::{client_token, requested_zone, DEVICE_PATH};
use crate::shapes::{device_context, to_snapshot, to_volume, GIB};
use crate::tags;

/// Interval of the modification polling of an expansion (its describes are batched).
const MODIFICATION_POLL: Duration = Duration::from_millis(250);
/// Volume IDs per DescribeVolumes of the poller.
const POLL_BATCH: usize = 500;

/// Settings of the EBS controller (flags of the binary).
#[derive(Debug, Clone)]
pub struct EbsOptions {
    /// `--k8s-tag-cluster-id`: adds `kubernetes.io/cluster/<id>=owned` and `KubernetesCluster`.
    pub cluster_id: Option<String>,
    /// `--extra-tags`: tags on every volume and snapshot.
    pub extra_tags: BTreeMap<String, String>,
    /// Zone for volumes created without topology (else the region's first zone).
    pub default_zone: Option<String>,
    /// How long one call waits for a volume to become available, attached or detached.
    pub operation_wait: Duration,
    /// How long a volume may stay `attaching` before the driver detaches it and fails.
    pub stuck_attaching: Duration,
    /// Least time between two DescribeVolumes of the shared volume-state poller.
    pub poll: Duration,
    /// How long after an operation the poller first looks at its volume.
    pub settle: Duration,
    /// What a `tagSpecification_N` that cannot be used does (`--warn-on-invalid-tag`).
    pub invalid_tags: InvalidTags,
}

impl Default for EbsOptions {
    fn default() -> Self {
        Self {
            cluster_id: None,
            extra_tags: BTreeMap::new(),
            default_zone: None,
            operation_wait: Duration::from_secs(10),
            stuck_attaching: Duration::from_secs(90),
            poll: Duration::from_secs(5),
            settle: Duration::from_secs(1),
            invalid_tags: InvalidTags::Refuse,
        }
    }
}

/// The EBS controller backend.
pub struct EbsController {
    ec2: Ec2,
    options: EbsOptions,
    devices: NodeDevices,
    attaching_since: Mutex<HashMap<(String, String), Instant>>,
    /// When this process last saw each (volume, node) attachment `attached`.
    attached_at: Mutex<HashMap<(String, String), Instant>>,
    poller: Poller<String, VolumeInfo, BackendError>,
}

impl EbsController {
    /// A controller over the EC2 seam.
    pub fn new(ec2: Ec2, options: EbsOptions) -> EbsController {
        let fetch: FetchFn<String, VolumeInfo, BackendError> = {
            let ec2 = ec2.clone();
            Arc::new(move |ids| {
                let ec2 = ec2.clone();
                Box::pin(async move { ec2.volumes_by_id(ids).await })
            })
        };
        let poller = Poller::new(options.settle, options.poll, POLL_BATCH, fetch);
        EbsController {
            ec2,
            options,
            devices: NodeDevices::default(),
            attaching_since: Mutex::new(HashMap::new()),
            attached_at: Mutex::new(HashMap::new()),
            poller,
        }
    }

    fn common_tags(&self) -> BTreeMap<String, String> {
        let mut t = self.options.extra_tags.clone();
        t.insert(tags::MANAGED.into(), "true".into());
        if let Some(id) = &self.options.cluster_id {
            t.insert(format!("{}{id}", tags::CLUSTER_PREFIX), "owned".into());
            t.insert(tags::KUBERNETES_CLUSTER.into(), id.clone());
        }
        t
    }

    async fn default_zone(&self) -> Result<String, BackendError> {
        if let Some(z) = &self.options.default_zone {
            return Ok(z.clone());
        }
        self.ec2
            .zones()
            .await?
            .into_iter()
            .min()
            .ok_or_else(|| BackendError::Internal("the region has no availability zones".into()))
    }

    /// Waits through the shared poller until `done` holds on the volume (`None`: EC2 does not
    /// show it, which right after an operation may be eventual consistency), or the deadline
    /// passes (Pending).
    async fn wait_volume(
        &self,
        id: &str,
        what: &str,
        done: impl Fn(Option<&VolumeInfo>) -> Result<bool, BackendError>,
    ) -> Result<Option<VolumeInfo>, BackendError> {
        let deadline = Instant::now() + self.options.operation_wait;
        match self.poller.wait(id.to_string(), deadline, done).await? {
            Waited::Done(v) => Ok(v),
            Waited::TimedOut(last) => {
                let state = match last {
                    None => "not looked at yet".to_string(),
                    Some(None) => "not found".to_string(),
                    Some(Some(v)) => format!("state {}", v.state),
                };
                Err(BackendError::Pending(format!(
                    "volume {id} is not {what} after {:?} ({state})",
                    self.options.operation_wait
                )))
            }
        }
    }

    async fn wait_available(&self, id: &str) -> Result<VolumeInfo, BackendError> {
        let v = self
            .wait_volume(id, "available", |v| match v.map(|v| v.state.as_str()) {
                Some("available" | "in-use") => Ok(true),
                Some("error") => Err(BackendError::Internal(format!(
                    "volume {id} failed to create (state error)"
                ))),
                _ => Ok(false),
            })
            .await?;
        v.ok_or_else(|| BackendError::NotFound(format!("volume {id} does not exist")))
    }

    /// Whether this process saw the attachment `attached` within `window`.
    fn seen_attached_within(&self, key: &(String, String), window: Duration) -> bool {
        self.attached_at
            .lock()
            .expect("attached")
            .get(key)
            .is_some_and(|at| at.elapsed() < window)
    }

    /// Reads the node's instance unless its device names are known already.
    async fn know_node(&self, node_id: &str) -> Result<(), BackendError> {
        if self.devices.knows(node_id) {
            return Ok(());
        }
        tracing::debug!(node = node_id, "reading the node's device names");
        let instance =
            self.ec2.instance(node_id).await?.ok_or_else(|| {
                BackendError::NotFound(format!("instance {node_id} does not exist"))
            })?;
        self.devices.learn(node_id, &instance.devices);
        Ok(())
    }

    /// Sends AttachVolume with a free device name; answers the device the volume is (being)
    /// attached at. A volume already attached (EC2 says VolumeInUse) is looked at: attached or
    /// attaching to this node is fine, to another node is FailedPrecondition.
    async fn attach(&self, volume_id: &str, node_id: &str) -> Result<String, BackendError> {
        self.know_node(node_id).await?;
        let device = self.devices.allocate(node_id, volume_id).ok_or_else(|| {
            self.devices.forget(node_id);
            BackendError::ResourceExhausted(format!("no free device name on {node_id}"))
        })?;
        let err = match self.ec2.attach(volume_id, node_id, &device).await {
            Ok(()) => {
                tracing::info!(volume = volume_id, node = node_id, device, "attaching");
                return Ok(device);
            }
            Err(e) => e,
        };
        self.devices.release_name(node_id, &device);
        match err {
            BackendError::FailedPrecondition(_) | BackendError::Pending(_) => {
                tracing::debug!(volume = volume_id, node = node_id, %err, "attach refused: looking");
                let v = self.ec2.volume(volume_id).await?.ok_or_else(|| {
                    BackendError::NotFound(format!("volume {volume_id} does not exist"))
                })?;
                match plan_refused(&v, node_id) {
                    Refused::Here(device) => {
                        self.devices.hold(node_id, volume_id, &device);
                        Ok(device)
                    }
                    Refused::Elsewhere { instance, state } => {
                        Err(BackendError::FailedPrecondition(format!(
                            "volume {volume_id} is attached to {instance} ({state}): {err}"
                        )))
                    }
                    Refused::NotYet => Err(BackendError::Pending(format!(
                        "volume {volume_id} cannot be attached to {node_id} yet: {err}"
                    ))),
                }
            }
            BackendError::InvalidArgument(msg) if msg.contains("in use") => {
                // The name is taken by something this process did not see: read the instance
                // again on the retry.
                self.devices.forget(node_id);
                Err(BackendError::Unavailable(format!(
                    "device name {device} is taken on {node_id}: {msg}"
                )))
            }
            BackendError::NotFound(msg) => {
                if msg.contains("nstance") {
                    self.devices.forget(node_id);
                }
                Err(BackendError::NotFound(msg))
            }
            e => Err(e),
        }
    }
}

#[async_trait]
impl ControllerBackend for EbsController {
    fn caps(&self) -> ControllerCaps {
        ControllerCaps {
            snapshots: true,
            clone: false,
            capacity: false,
            multi_attach: false,
        }
    }

    async fn create_volume(&self, req: &CreateVolumeRequest) -> Result<Volume, BackendError> {
        let size_gib = round_up_gib(req.required_bytes);
        if req.limit_bytes > 0 && size_gib * GIB > req.limit_bytes {
            return Err(BackendError::InvalidArgument(format!(
                "EBS sizes volumes in GiB: {size_gib} GiB exceeds limit_bytes {}",
                req.limit_bytes
            )));
        }
        let size_gib = i32::try_from(size_gib)
            .map_err(|_| BackendError::InvalidArgument(format!("{size_gib} GiB is too large")))?;
        let spec = volume_spec_with(
            &req.parameters,
            &req.metadata,
            size_gib,
            self.options.invalid_tags,
        )
        .map_err(|problems| BackendError::InvalidArgument(problems.join("; ")))?;
        let snapshot = match &req.source {
            None => None,
            Some(VolumeSource::Snapshot(id)) => {
                let found = self.ec2.snapshots(&[("snapshot-id", id)]).await?;
                if found.is_empty() {
                    return Err(BackendError::NotFound(format!(
                        "snapshot {id} does not exist"
                    )));
                }
                Some(id.as_str())
            }
            Some(VolumeSource::Volume(_)) => {
                return Err(BackendError::InvalidArgument(
                    "EBS volumes cannot be cloned by this driver".into(),
                ))
            }
        };
        let zone = match requested_zone(&req.topologies) {
            Some(z) => z,
            None => self.default_zone().await?,
        };
        let mut all_tags = self.common_tags();
        all_tags.extend(spec.tags.clone());
        all_tags.insert(tags::VOLUME_NAME.into(), req.name.clone());
        for (meta, key) in [
            ("pvc/name", tags::PVC_NAME),
            ("pvc/namespace", tags::PVC_NAMESPACE),
            ("pv/name", tags::PV_NAME),
        ] {
            if let Some(v) = req.metadata.get(meta) {
                all_tags.insert(key.into(), v.clone());
            }
        }
        let token = client_token(&req.name);
        let created = match self
            .ec2
            .create_volume(&spec, &zone, snapshot, &token, &all_tags)
            .await
        {
            Ok(v) => v,
            // IdempotentParameterMismatch: the name's volume exists with other parameters.
            Err(BackendError::AlreadyExists(msg)) => {
                let existing = self.ec2.volumes_named(&req.name).await.unwrap_or_default();
                let found: Vec<String> = existing
                    .iter()
                    .map(|v| format!("{} ({} GiB, {})", v.id, v.size_gib, v.state))
                    .collect();
                return Err(BackendError::AlreadyExists(format!(
                    "volume named {} exists with other parameters [{}]: {msg}",
                    req.name,
                    found.join(", ")
                )));
            }
            Err(e) => return Err(e),
        };
        tracing::info!(
            volume = created.id,
            name = req.name,
            zone,
            size_gib,
            state = created.state,
            "created volume"
        );
        let mut volume = match created.state.as_str() {
            "available" | "in-use" => to_volume(&created),
            "error" => {
                return Err(BackendError::Internal(format!(
                    "volume {} failed to create (state error)",
                    created.id
                )))
            }
            _ => to_volume(&self.wait_available(&created.id).await?),
        };
        // The formatting parameters reach the node plugin's mkfs in the volume context.
        volume.context.extend(spec.format_context.clone());
        Ok(volume)
    }

    async fn delete_volume(&self, volume_id: &str) -> Result<(), BackendError> {
        // No volume has an ID EC2 would call malformed.
        if !volume_id.starts_with("vol-") {
            return Ok(());
        }
        match self.ec2.delete_volume(volume_id).await {
            Ok(()) | Err(BackendError::NotFound(_)) => return Ok(()),
            // VolumeInUse: a detach still under way is waited for (through the poller), an
            // attachment is refused at once.
            Err(BackendError::FailedPrecondition(msg)) => {
                tracing::debug!(volume = volume_id, "delete: volume in use, looking");
                let detached = self
                    .wait_volume(volume_id, "detached", |v| {
                        let Some(v) = v else { return Ok(true) };
                        if let Some(a) = v
                            .attachments
                            .iter()
                            .find(|a| a.state == "attached" || a.state == "attaching")
                        {
                            return Err(BackendError::FailedPrecondition(format!(
                                "volume {volume_id} is {} to {}: {msg}",
                                a.state, a.instance_id
                            )));
                        }
                        Ok(v.attachments.iter().all(|a| a.state == "detached"))
                    })
                    .await?;
                if detached.is_none() {
                    return Ok(());
                }
            }
            Err(e) => return Err(e),
        }
        match self.ec2.delete_volume(volume_id).await {
            Ok(()) | Err(BackendError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn get_volume(&self, volume_id: &str) -> Result<Option<Volume>, BackendError> {
        Ok(self.ec2.volume(volume_id).await?.as_ref().map(to_volume))
    }

    async fn list_volumes(&self) -> Result<Vec<Volume>, BackendError> {
        let mut all = self.ec2.volumes_with_tag_key(tags::MANAGED).await?;
        all.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(all.iter().map(to_volume).collect())
    }

    async fn publish(
        &self,
        volume_id: &str,
        node_id: &str,
        _read_only: bool,
    ) -> Result<BTreeMap<String, String>, BackendError> {
        if !volume_id.starts_with("vol-") {
            return Err(BackendError::NotFound(format!(
                "volume {volume_id} does not exist"
            )));
        }
        let key = (volume_id.to_string(), node_id.to_string());
        let in_flight = self
            .attaching_since
            .lock()
            .expect("attaching")
            .contains_key(&key);
        let known = self.devices.device_of(node_id, volume_id);
        let device = match known {
            // This process attached it earlier: a retried call waits, a repeated one checks
            // (the attacher repeats a call right after its answer when its status update
            // conflicts: an attachment seen within a poll interval is answered from memory).
            Some(device) if in_flight => device,
            Some(device) if self.seen_attached_within(&key, self.options.poll) => {
                return Ok(device_context(&device));
            }
            Some(_) => {
                // Through the poller: repeats come in bursts (the attacher re-syncing) and share
                // its ticks.
                tracing::debug!(volume = volume_id, node = node_id, "publish again: looking");
                let v = self.poller.look(volume_id.to_string()).await?;
                match plan_repeat(v.as_ref(), node_id) {
                    RepeatStep::Attached(device) => {
                        self.attached_at
                            .lock()
                            .expect("attached")
                            .insert(key, Instant::now());
                        return Ok(device_context(&device));
                    }
                    RepeatStep::Wait(device) => device,
                    RepeatStep::Attach => {
                        self.devices.release(node_id, volume_id);
                        self.attach(volume_id, node_id).await?
                    }
                }
            }
            None => self.attach(volume_id, node_id).await?,
        };
        let since = *self
            .attaching_since
            .lock()
            .expect("attaching")
            .entry(key.clone())
            .or_insert_with(Instant::now);
        let waited = self
            .wait_volume(volume_id, "attached", |v| Ok(attached_to(v, node_id)))
            .await;
        match waited {
            Ok(_) => {
                self.attaching_since.lock().expect("attaching").remove(&key);
                self.attached_at
                    .lock()
                    .expect("attached")
                    .insert(key, Instant::now());
                Ok(device_context(&device))
            }
            Err(BackendError::Pending(msg)) if since.elapsed() >= self.options.stuck_attaching => {
                // Stuck: give the attachment back so a later attempt starts clean.
                self.attaching_since.lock().expect("attaching").remove(&key);
                self.devices.release(node_id, volume_id);
                let _ = self.ec2.detach(volume_id, node_id).await;
                Err(BackendError::Unavailable(format!(
                    "volume {volume_id} stuck attaching to {node_id} for {:?}; detached it to retry: {msg}",
                    self.options.stuck_attaching
                )))
            }
            Err(e) => Err(e),
        }
    }

    async fn unpublish(&self, volume_id: &str, node_id: &str) -> Result<(), BackendError> {
        if !volume_id.starts_with("vol-") {
            return Ok(());
        }
        let targets: Vec<String> = if node_id.is_empty() {
            // From every node: the volume says which.
            let Some(v) = self.ec2.volume(volume_id).await? else {
                return Ok(());
            };
            detach_targets(&v)
        } else {
            vec![node_id.to_string()]
        };
        let mut detaching = false;
        for instance in &targets {
            match self.ec2.detach(volume_id, instance).await {
                Ok(()) => detaching = true,
                // Not attached there, or the volume is gone.
                Err(BackendError::NotFound(_)) => {
                    self.devices.release(instance, volume_id);
                    self.attached_at
                        .lock()
                        .expect("attached")
                        .remove(&(volume_id.to_string(), instance.clone()));
                }
                // IncorrectState: already detaching, or `available`; the wait tells.
                Err(BackendError::Pending(_)) => detaching = true,
                Err(e) => return Err(e),
            }
        }
        if !detaching {
            return Ok(());
        }
        self.wait_volume(volume_id, "detached", |v| {
            Ok(!v.is_some_and(|v| still_attached(v, node_id)))
        })
        .await?;
        for instance in &targets {
            let key = (volume_id.to_string(), instance.clone());
            self.devices.release(instance, volume_id);
            self.attaching_since.lock().expect("attaching").remove(&key);
            self.attached_at.lock().expect("attached").remove(&key);
        }
        Ok(())
    }

    async fn expand(&self, volume_id: &str, required_bytes: i64) -> Result<i64, BackendError> {
        let v =
            self.ec2.volume(volume_id).await?.ok_or_else(|| {
                BackendError::NotFound(format!("volume {volume_id} does not exist"))
            })?;
        let want = i32::try_from(round_up_gib(required_bytes))
            .map_err(|_| BackendError::InvalidArgument("size too large".into()))?;
        if v.size_gib < want {
            match self.ec2.modify_size(volume_id, want).await {
                Ok(()) => {}
                // A modification under way: poll it below.
                Err(BackendError::Pending(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let deadline = Instant::now() + self.options.operation_wait;
        loop {
            if let Some(m) = self.ec2.modification(volume_id).await? {
                match m.state.as_str() {
                    "optimizing" | "completed" if m.target_size_gib >= want => {
                        return Ok(i64::from(m.target_size_gib) * GIB)
                    }
                    "failed" => {
                        return Err(BackendError::Internal(format!(
                            "modification of volume {volume_id} failed"
                        )))
                    }
                    _ => {}
                }
            }
            let current = self.ec2.volume(volume_id).await?;
            if let Some(v) = current.filter(|v| v.size_gib >= want) {
                return Ok(i64::from(v.size_gib) * GIB);
            }
            if Instant::now() >= deadline {
                return Err(BackendError::Pending(format!(
                    "volume {volume_id} is still being modified to {want} GiB"
                )));
            }
            tokio::time::sleep(MODIFICATION_POLL).await;
        }
    }

    async fn create_snapshot(
        &self,
        name: &str,
        source_volume_id: &str,
        _parameters: &BTreeMap<String, String>,
    ) -> Result<Snapshot, BackendError> {
        let tag_filter = format!("tag:{}", tags::SNAPSHOT_NAME);
        let existing = self.ec2.snapshots(&[(&tag_filter, name)]).await?;
        if let Some(s) = existing.first() {
            if s.volume_id != source_volume_id {
                return Err(BackendError::AlreadyExists(format!(
                    "snapshot {} named {name} is of volume {}, not {source_volume_id}",
                    s.id, s.volume_id
                )));
            }
            return Ok(to_snapshot(s));
        }
        if self.ec2.volume(source_volume_id).await?.is_none() {
            return Err(BackendError::NotFound(format!(
                "volume {source_volume_id} does not exist"
            )));
        }
        let mut all_tags = self.common_tags();
        all_tags.insert(tags::SNAPSHOT_NAME.into(), name.into());
        let s = self
            .ec2
            .create_snapshot(source_volume_id, &all_tags)
            .await?;
        tracing::info!(
            snapshot = s.id,
            name,
            volume = source_volume_id,
            "created snapshot"
        );
        Ok(to_snapshot(&s))
    }

    async fn delete_snapshot(&self, snapshot_id: &str) -> Result<(), BackendError> {
        if self
            .ec2
            .snapshots(&[("snapshot-id", snapshot_id)])
            .await?
            .is_empty()
        {
            return Ok(());
        }
        match self.ec2.delete_snapshot(snapshot_id).await {
            Ok(()) | Err(BackendError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn list_snapshots(&self) -> Result<Vec<Snapshot>, BackendError> {
        let mut all = self.ec2.snapshots(&[("tag-key", tags::MANAGED)]).await?;
        all.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(all.iter().map(to_snapshot).collect())
    }
}
