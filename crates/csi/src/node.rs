//! The CSI Node service: stage (find the device, format if empty, grow an existing file system
//! smaller than its device, mount), publish (bind mount,
//! read-only, raw block), unstage/unpublish, expand (rescan + grow the file system), volume
//! stats and node info. Every step is idempotent: a retried call finds the mount it made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::node_server::Node;
use stratus_csi_spec::v1::node_service_capability::{rpc::Type as RpcType, Rpc, Type as CapType};
use stratus_csi_spec::v1::volume_capability::AccessType;
use tonic::{Request, Response, Status};

use crate::backend::NodeBackend;
use crate::controller::CONTEXT_FS_TYPE;
use crate::error::BackendError;
use crate::format::FormatOptions;
use crate::locks::OperationLocks;
use crate::metrics::CsiMetrics;
use crate::mount::{needs_grow, Mounter};
use crate::validate;

/// Serves the Node RPCs.
pub struct NodeService {
    backend: Arc<dyn NodeBackend>,
    mounter: Arc<dyn Mounter>,
    locks: OperationLocks,
    metrics: Arc<CsiMetrics>,
}

impl NodeService {
    /// A node plugin over the node backend and the mounter.
    pub fn new(
        backend: Arc<dyn NodeBackend>,
        mounter: Arc<dyn Mounter>,
        metrics: Arc<CsiMetrics>,
    ) -> Self {
        Self {
            backend,
            mounter,
            locks: OperationLocks::default(),
            metrics,
        }
    }
}

fn required<'a>(value: &'a str, field: &str) -> Result<&'a str, Status> {
    if value.is_empty() {
        Err(Status::invalid_argument(format!("{field} is required")))
    } else {
        Ok(value)
    }
}

fn capability(cap: Option<&csi::VolumeCapability>) -> Result<&csi::VolumeCapability, Status> {
    let cap = cap.ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
    // Multi-node modes are checked by the controller; the node only needs a known access type.
    validate::check_one(cap, true)?;
    Ok(cap)
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Status {
    Status::internal(format!("{what} {}: {e}", path.display()))
}

/// Mount options for a stage: the capability's flags, without duplicates.
pub fn stage_options(mount_flags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in mount_flags {
        if !out.contains(f) {
            out.push(f.clone());
        }
    }
    out
}

fn to_status(e: BackendError) -> Status {
    e.into()
}

impl NodeService {
    async fn stage(&self, req: csi::NodeStageVolumeRequest) -> Result<(), Status> {
        let id = required(&req.volume_id, "volume_id")?;
        let staging = PathBuf::from(required(&req.staging_target_path, "staging_target_path")?);
        let cap = capability(req.volume_capability.as_ref())?;
        let mount = match &cap.access_type {
            Some(AccessType::Mount(m)) => m.clone(),
            // A raw block volume is published straight from the device: nothing to stage.
            _ => return Ok(()),
        };
        let format = FormatOptions::from_context(&req.volume_context)
            .map_err(|e| Status::invalid_argument(format!("volume context: {e}")))?;
        let _guard = self.locks.try_lock(id)?;
        let context: BTreeMap<String, String> = req.publish_context.into_iter().collect();
        let device = self.backend.find_device(id, &context).await?;
        let fs_type = [
            Some(mount.fs_type.clone()),
            req.volume_context.get(CONTEXT_FS_TYPE).cloned(),
        ]
        .into_iter()
        .flatten()
        .find(|f| !f.is_empty())
        .unwrap_or_else(|| validate::DEFAULT_FS_TYPE.to_string());
        tokio::fs::create_dir_all(&staging)
            .await
            .map_err(|e| io("creating", &staging, e))?;
        if let Some(existing) = self.mounter.mount_at(&staging).await? {
            let same = same_device(&existing.source, &device).await;
            return if same {
                Ok(())
            } else {
                Err(Status::already_exists(format!(
                    "{} is already mounted from {}, not {}",
                    staging.display(),
                    existing.source,
                    device.display()
                )))
            };
        }
        let fs_type = match self.mounter.fs_type(&device).await? {
            None => {
                tracing::info!(volume = id, device = %device.display(), fs_type, "formatting");
                self.mounter.format(&device, &fs_type, &format).await?;
                fs_type
            }
            Some(found) if found != fs_type && !mount.fs_type.is_empty() => {
                return Err(Status::failed_precondition(format!(
                    "{} carries {found}, the capability asks for {fs_type}",
                    device.display()
                )))
            }
            Some(found) => {
                if found != "xfs" {
                    self.grow_if_smaller(id, &device, &found, None).await?;
                }
                found
            }
        };
        self.mounter
            .mount(
                &device,
                &staging,
                Some(&fs_type),
                &stage_options(&mount.mount_flags),
            )
            .await
            .map_err(to_status)?;
        if fs_type == "xfs" {
            // xfs grows only mounted: right after the mount, before anyone uses it.
            self.grow_if_smaller(id, &device, &fs_type, Some(&staging))
                .await?;
        }
        Ok(())
    }

    /// Grows an existing file system that is smaller than its device (the volume was expanded
    /// while unstaged, or an online resize was refused): offline before it is mounted
    /// (ext2/3/4), or at `mounted_at` right after (xfs, `xfs_growfs`).
    async fn grow_if_smaller(
        &self,
        id: &str,
        device: &Path,
        fs_type: &str,
        mounted_at: Option<&Path>,
    ) -> Result<(), Status> {
        let Some(fs_bytes) = self.mounter.fs_size(device, fs_type).await? else {
            return Ok(());
        };
        let device_bytes = self.mounter.device_size(device).await?;
        if !needs_grow(fs_bytes, device_bytes) {
            return Ok(());
        }
        tracing::info!(
            volume = id,
            device = %device.display(),
            fs_type,
            fs_bytes,
            device_bytes,
            mounted = mounted_at.is_some(),
            "growing the file system to its device"
        );
        match mounted_at {
            Some(mount_point) => self.mounter.resize_fs(device, mount_point).await,
            None => self.mounter.grow_offline(device, fs_type).await,
        }
        .map_err(to_status)
    }

    async fn unstage(&self, req: csi::NodeUnstageVolumeRequest) -> Result<(), Status> {
        let id = required(&req.volume_id, "volume_id")?;
        let staging = PathBuf::from(required(&req.staging_target_path, "staging_target_path")?);
        let _guard = self.locks.try_lock(id)?;
        while self.mounter.mount_at(&staging).await?.is_some() {
            self.mounter.unmount(&staging).await?;
        }
        Ok(())
    }

    async fn publish(&self, req: csi::NodePublishVolumeRequest) -> Result<(), Status> {
        let id = required(&req.volume_id, "volume_id")?;
        let target = PathBuf::from(required(&req.target_path, "target_path")?);
        let cap = capability(req.volume_capability.as_ref())?;
        let read_only = req.readonly || validate::read_only_mode(cap);
        let _guard = self.locks.try_lock(id)?;
        let (source, flags) = match &cap.access_type {
            Some(AccessType::Block(_)) => {
                let context: BTreeMap<String, String> =
                    req.publish_context.clone().into_iter().collect();
                let device = self.backend.find_device(id, &context).await?;
                if let Some(parent) = target.parent() {
                    tokio::fs::create_dir_all(parent)
                        .await
                        .map_err(|e| io("creating", parent, e))?;
                }
                if tokio::fs::metadata(&target).await.is_err() {
                    tokio::fs::File::create(&target)
                        .await
                        .map_err(|e| io("creating", &target, e))?;
                }
                (device, Vec::new())
            }
            Some(AccessType::Mount(m)) => {
                let staging = required(&req.staging_target_path, "staging_target_path")?;
                let staging = PathBuf::from(staging);
                if self.mounter.mount_at(&staging).await?.is_none() {
                    return Err(Status::failed_precondition(format!(
                        "volume {id} is not staged at {}",
                        staging.display()
                    )));
                }
                tokio::fs::create_dir_all(&target)
                    .await
                    .map_err(|e| io("creating", &target, e))?;
                (staging, m.mount_flags.clone())
            }
            None => unreachable!("checked by capability()"),
        };
        if self.mounter.mount_at(&target).await?.is_some() {
            return Ok(());
        }
        let mut options = stage_options(&flags);
        if read_only {
            options.push("ro".into());
        }
        self.mounter
            .mount(&source, &target, None, &options)
            .await
            .map_err(to_status)
    }

    async fn unpublish(&self, req: csi::NodeUnpublishVolumeRequest) -> Result<(), Status> {
        let id = required(&req.volume_id, "volume_id")?;
        let target = PathBuf::from(required(&req.target_path, "target_path")?);
        let _guard = self.locks.try_lock(id)?;
        while self.mounter.mount_at(&target).await?.is_some() {
            self.mounter.unmount(&target).await?;
        }
        match tokio::fs::metadata(&target).await {
            Ok(m) if m.is_dir() => tokio::fs::remove_dir(&target)
                .await
                .map_err(|e| io("removing", &target, e)),
            Ok(_) => tokio::fs::remove_file(&target)
                .await
                .map_err(|e| io("removing", &target, e)),
            Err(_) => Ok(()),
        }
    }

    async fn stats(
        &self,
        req: csi::NodeGetVolumeStatsRequest,
    ) -> Result<csi::NodeGetVolumeStatsResponse, Status> {
        required(&req.volume_id, "volume_id")?;
        let path = PathBuf::from(required(&req.volume_path, "volume_path")?);
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|_| Status::not_found(format!("{} does not exist", path.display())))?;
        let mounted = self.mounter.mount_at(&path).await?;
        let Some(mounted) = mounted else {
            return Err(Status::not_found(format!(
                "no volume is mounted at {}",
                path.display()
            )));
        };
        use csi::volume_usage::Unit;
        if !meta.is_dir() {
            // A raw block volume: its size is all we can tell.
            let device = PathBuf::from(&mounted.source);
            let device = if mounted.source == "devtmpfs" || mounted.source == "udev" {
                PathBuf::from(format!("/dev{}", mounted.root))
            } else {
                device
            };
            let size = self.mounter.device_size(&device).await?;
            return Ok(csi::NodeGetVolumeStatsResponse {
                usage: vec![csi::VolumeUsage {
                    total: size,
                    unit: Unit::Bytes as i32,
                    ..Default::default()
                }],
            });
        }
        let s = self.mounter.stats(&path)?;
        Ok(csi::NodeGetVolumeStatsResponse {
            usage: vec![
                csi::VolumeUsage {
                    available: s.available_bytes,
                    total: s.total_bytes,
                    used: s.used_bytes,
                    unit: Unit::Bytes as i32,
                },
                csi::VolumeUsage {
                    available: s.free_inodes,
                    total: s.total_inodes,
                    used: s.used_inodes,
                    unit: Unit::Inodes as i32,
                },
            ],
        })
    }

    async fn expand(&self, req: csi::NodeExpandVolumeRequest) -> Result<i64, Status> {
        let id = required(&req.volume_id, "volume_id")?;
        let path = PathBuf::from(required(&req.volume_path, "volume_path")?);
        if tokio::fs::metadata(&path).await.is_err() {
            return Err(Status::not_found(format!(
                "{} does not exist",
                path.display()
            )));
        }
        let _guard = self.locks.try_lock(id)?;
        let block = matches!(
            req.volume_capability
                .as_ref()
                .and_then(|c| c.access_type.as_ref()),
            Some(AccessType::Block(_))
        );
        let device = self.backend.find_device(id, &BTreeMap::new()).await?;
        let required = req
            .capacity_range
            .as_ref()
            .map(|r| r.required_bytes)
            .unwrap_or(0);
        self.backend.rescan(id, &device, required).await?;
        if !block {
            let mount_point = if self.mounter.mount_at(&path).await?.is_some() {
                path.clone()
            } else {
                return Err(Status::not_found(format!(
                    "no volume is mounted at {}",
                    path.display()
                )));
            };
            self.mounter.resize_fs(&device, &mount_point).await?;
        }
        Ok(self.mounter.device_size(&device).await?)
    }
}

/// Whether a mount source names the same device (symlinks such as by-id paths resolved).
async fn same_device(source: &str, device: &Path) -> bool {
    let a = tokio::fs::canonicalize(source).await.ok();
    let b = tokio::fs::canonicalize(device).await.ok();
    a.is_some() && a == b
}

fn node_cap(t: RpcType) -> csi::NodeServiceCapability {
    csi::NodeServiceCapability {
        r#type: Some(CapType::Rpc(Rpc { r#type: t as i32 })),
    }
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<csi::NodeStageVolumeRequest>,
    ) -> Result<Response<csi::NodeStageVolumeResponse>, Status> {
        self.metrics
            .observe("NodeStageVolume", async {
                self.stage(request.into_inner()).await?;
                Ok(Response::new(csi::NodeStageVolumeResponse {}))
            })
            .await
    }

    async fn node_unstage_volume(
        &self,
        request: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Result<Response<csi::NodeUnstageVolumeResponse>, Status> {
        self.metrics
            .observe("NodeUnstageVolume", async {
                self.unstage(request.into_inner()).await?;
                Ok(Response::new(csi::NodeUnstageVolumeResponse {}))
            })
            .await
    }

    async fn node_publish_volume(
        &self,
        request: Request<csi::NodePublishVolumeRequest>,
    ) -> Result<Response<csi::NodePublishVolumeResponse>, Status> {
        self.metrics
            .observe("NodePublishVolume", async {
                self.publish(request.into_inner()).await?;
                Ok(Response::new(csi::NodePublishVolumeResponse {}))
            })
            .await
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<csi::NodeUnpublishVolumeResponse>, Status> {
        self.metrics
            .observe("NodeUnpublishVolume", async {
                self.unpublish(request.into_inner()).await?;
                Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
            })
            .await
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<csi::NodeGetVolumeStatsResponse>, Status> {
        self.metrics
            .observe("NodeGetVolumeStats", async {
                self.stats(request.into_inner()).await.map(Response::new)
            })
            .await
    }

    async fn node_expand_volume(
        &self,
        request: Request<csi::NodeExpandVolumeRequest>,
    ) -> Result<Response<csi::NodeExpandVolumeResponse>, Status> {
        self.metrics
            .observe("NodeExpandVolume", async {
                let bytes = self.expand(request.into_inner()).await?;
                Ok(Response::new(csi::NodeExpandVolumeResponse {
                    capacity_bytes: bytes,
                }))
            })
            .await
    }

    async fn node_get_volume_health(
        &self,
        _request: Request<csi::NodeGetVolumeHealthRequest>,
    ) -> Result<Response<csi::NodeGetVolumeHealthResponse>, Status> {
        Err(Status::unimplemented(
            "NodeGetVolumeHealth is not supported",
        ))
    }

    async fn node_get_storage_health(
        &self,
        _request: Request<csi::NodeGetStorageHealthRequest>,
    ) -> Result<Response<csi::NodeGetStorageHealthResponse>, Status> {
        Err(Status::unimplemented(
            "NodeGetStorageHealth is not supported",
        ))
    }

    async fn node_get_capabilities(
        &self,
        _request: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<csi::NodeGetCapabilitiesResponse>, Status> {
        self.metrics
            .observe("NodeGetCapabilities", async {
                Ok(Response::new(csi::NodeGetCapabilitiesResponse {
                    capabilities: vec![
                        node_cap(RpcType::StageUnstageVolume),
                        node_cap(RpcType::GetVolumeStats),
                        node_cap(RpcType::ExpandVolume),
                    ],
                }))
            })
            .await
    }

    async fn node_get_info(
        &self,
        _request: Request<csi::NodeGetInfoRequest>,
    ) -> Result<Response<csi::NodeGetInfoResponse>, Status> {
        self.metrics
            .observe("NodeGetInfo", async {
                let topology = self.backend.topology();
                Ok(Response::new(csi::NodeGetInfoResponse {
                    node_id: self.backend.node_id(),
                    max_volumes_per_node: self.backend.max_volumes(),
                    accessible_topology: (!topology.is_empty()).then(|| csi::Topology {
                        segments: topology.into_iter().collect(),
                    }),
                }))
            })
            .await
    }
}
