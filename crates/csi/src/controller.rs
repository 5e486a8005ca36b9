//! The CSI Controller service: validates each request, takes the per-volume lock, asks the
//! [`ControllerBackend`] and shapes the answer (volume context, topology, paging).

use std::collections::BTreeMap;
use std::sync::Arc;

use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::controller_server::Controller;
use stratus_csi_spec::v1::controller_service_capability::{
    rpc::Type as RpcType, Rpc, Type as CapType,
};
use stratus_csi_spec::v1::volume_content_source::{SnapshotSource, Type as SourceType};
use tonic::{Request, Response, Status};

use crate::backend::{ControllerBackend, CreateVolumeRequest, Topology, Volume, VolumeSource};
use crate::locks::OperationLocks;
use crate::metrics::CsiMetrics;
use crate::paging::page;
use crate::validate;

/// The volume context key carrying the file system chosen at provisioning.
pub const CONTEXT_FS_TYPE: &str = "fsType";
/// Size of a volume created without a capacity range.
pub const DEFAULT_VOLUME_BYTES: i64 = 1 << 30;

/// Serves the Controller RPCs for one backend.
pub struct ControllerService {
    backend: Arc<dyn ControllerBackend>,
    locks: OperationLocks,
    metrics: Arc<CsiMetrics>,
}

impl ControllerService {
    /// A controller over `backend`.
    pub fn new(backend: Arc<dyn ControllerBackend>, metrics: Arc<CsiMetrics>) -> Self {
        Self {
            backend,
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

fn to_topology(t: &Topology) -> csi::Topology {
    csi::Topology {
        segments: t.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    }
}

fn to_source(source: &Option<VolumeSource>) -> Option<csi::VolumeContentSource> {
    source.as_ref().map(|s| csi::VolumeContentSource {
        r#type: Some(match s {
            VolumeSource::Snapshot(id) => SourceType::Snapshot(SnapshotSource {
                snapshot_id: id.clone(),
            }),
            VolumeSource::Volume(id) => {
                SourceType::Volume(csi::volume_content_source::VolumeSource {
                    volume_id: id.clone(),
                })
            }
        }),
    })
}

fn to_csi_volume(v: &Volume) -> csi::Volume {
    csi::Volume {
        capacity_bytes: v.capacity_bytes,
        volume_id: v.id.clone(),
        volume_context: v
            .context
            .iter()
            .map(|(k, val)| (k.clone(), val.clone()))
            .collect(),
        content_source: to_source(&v.source),
        accessible_topology: v.topology.iter().map(to_topology).collect(),
    }
}

fn to_csi_snapshot(s: &crate::backend::Snapshot) -> csi::Snapshot {
    csi::Snapshot {
        size_bytes: s.size_bytes,
        snapshot_id: s.id.clone(),
        source_volume_id: s.source_volume_id.clone(),
        creation_time: Some(prost_types::Timestamp {
            seconds: s.created_unix,
            nanos: 0,
        }),
        ready_to_use: s.ready,
        group_snapshot_id: String::new(),
        accessible_topology: Vec::new(),
    }
}

/// The topologies a CreateVolume asks for: preferred first, then requisite, without repeats.
pub fn requested_topologies(req: Option<&csi::TopologyRequirement>) -> Vec<Topology> {
    let mut out: Vec<Topology> = Vec::new();
    if let Some(req) = req {
        for t in req.preferred.iter().chain(req.requisite.iter()) {
            let t: Topology = t
                .segments
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<BTreeMap<_, _>>();
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

fn cap(t: RpcType) -> csi::ControllerServiceCapability {
    csi::ControllerServiceCapability {
        r#type: Some(CapType::Rpc(Rpc { r#type: t as i32 })),
    }
}

impl ControllerService {
    async fn create(
        &self,
        req: csi::CreateVolumeRequest,
    ) -> Result<csi::CreateVolumeResponse, Status> {
        let name = required(&req.name, "name")?;
        let caps = self.backend.caps();
        let summary = validate::capabilities(&req.volume_capabilities, caps.multi_attach)?;
        let range = req.capacity_range.unwrap_or_default();
        let (required_bytes, limit_bytes) = validate::capacity(
            range.required_bytes,
            range.limit_bytes,
            DEFAULT_VOLUME_BYTES,
        )?;
        let (parameters, metadata, fs_param) = validate::split_parameters(&req.parameters);
        let source = match req.volume_content_source.and_then(|s| s.r#type) {
            None => None,
            Some(SourceType::Snapshot(s)) if caps.snapshots => Some(VolumeSource::Snapshot(
                required(&s.snapshot_id, "snapshot_id")?.to_string(),
            )),
            Some(SourceType::Volume(v)) if caps.clone => Some(VolumeSource::Volume(
                required(&v.volume_id, "volume_id")?.to_string(),
            )),
            Some(_) => {
                return Err(Status::invalid_argument(
                    "this driver cannot create a volume from that content source",
                ))
            }
        };
        let fs_type = fs_param.or(summary.fs_type.clone());
        if let Some(fs) = &fs_type {
            if !validate::FS_TYPES.contains(&fs.as_str()) {
                return Err(Status::invalid_argument(format!(
                    "fsType {fs:?} is not supported (one of {})",
                    validate::FS_TYPES.join(", ")
                )));
            }
        }
        let request = CreateVolumeRequest {
            name: name.to_string(),
            required_bytes,
            limit_bytes,
            parameters,
            metadata,
            topologies: requested_topologies(req.accessibility_requirements.as_ref()),
            multi_attach: summary.multi_node,
            source,
        };
        let _guard = self.locks.try_lock(name)?;
        let mut volume = self.backend.create_volume(&request).await?;
        if limit_bytes > 0 && volume.capacity_bytes > limit_bytes {
            return Err(Status::out_of_range(format!(
                "volume {} has {} bytes, more than limit_bytes {limit_bytes}",
                volume.id, volume.capacity_bytes
            )));
        }
        if let Some(fs) = fs_type {
            volume.context.insert(CONTEXT_FS_TYPE.into(), fs);
        }
        Ok(csi::CreateVolumeResponse {
            volume: Some(to_csi_volume(&volume)),
        })
    }

    async fn existing(&self, volume_id: &str) -> Result<Volume, Status> {
        self.backend
            .get_volume(volume_id)
            .await?
            .ok_or_else(|| Status::not_found(format!("volume {volume_id} does not exist")))
    }
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        request: Request<csi::CreateVolumeRequest>,
    ) -> Result<Response<csi::CreateVolumeResponse>, Status> {
        self.metrics
            .observe("CreateVolume", async {
                self.create(request.into_inner()).await.map(Response::new)
            })
            .await
    }

    async fn delete_volume(
        &self,
        request: Request<csi::DeleteVolumeRequest>,
    ) -> Result<Response<csi::DeleteVolumeResponse>, Status> {
        self.metrics
            .observe("DeleteVolume", async {
                let req = request.into_inner();
                let id = required(&req.volume_id, "volume_id")?;
                let _guard = self.locks.try_lock(id)?;
                self.backend.delete_volume(id).await?;
                Ok(Response::new(csi::DeleteVolumeResponse {}))
            })
            .await
    }

    async fn controller_publish_volume(
        &self,
        request: Request<csi::ControllerPublishVolumeRequest>,
    ) -> Result<Response<csi::ControllerPublishVolumeResponse>, Status> {
        self.metrics
            .observe("ControllerPublishVolume", async {
                let req = request.into_inner();
                let id = required(&req.volume_id, "volume_id")?;
                let node = required(&req.node_id, "node_id")?;
                let cap = req
                    .volume_capability
                    .as_ref()
                    .ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
                validate::check_one(cap, self.backend.caps().multi_attach)?;
                let _guard = self.locks.try_lock(id)?;
                let publish_context = self
                    .backend
                    .publish(id, node, req.readonly || validate::read_only_mode(cap))
                    .await?;
                Ok(Response::new(csi::ControllerPublishVolumeResponse {
                    publish_context: publish_context.into_iter().collect(),
                }))
            })
            .await
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<csi::ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<csi::ControllerUnpublishVolumeResponse>, Status> {
        self.metrics
            .observe("ControllerUnpublishVolume", async {
                let req = request.into_inner();
                let id = required(&req.volume_id, "volume_id")?;
                let _guard = self.locks.try_lock(id)?;
                self.backend.unpublish(id, &req.node_id).await?;
                Ok(Response::new(csi::ControllerUnpublishVolumeResponse {}))
            })
            .await
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<csi::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<csi::ValidateVolumeCapabilitiesResponse>, Status> {
        self.metrics
            .observe("ValidateVolumeCapabilities", async {
                let req = request.into_inner();
                let id = required(&req.volume_id, "volume_id")?;
                if req.volume_capabilities.is_empty() {
                    return Err(Status::invalid_argument("volume_capabilities are required"));
                }
                self.existing(id).await?;
                let multi = self.backend.caps().multi_attach;
                let problem = req
                    .volume_capabilities
                    .iter()
                    .find_map(|c| validate::check_one(c, multi).err());
                Ok(Response::new(match problem {
                    None => csi::ValidateVolumeCapabilitiesResponse {
                        confirmed: Some(csi::validate_volume_capabilities_response::Confirmed {
                            volume_context: req.volume_context,
                            volume_capabilities: req.volume_capabilities,
                            parameters: req.parameters,
                            mutable_parameters: req.mutable_parameters,
                        }),
                        message: String::new(),
                    },
                    Some(p) => csi::ValidateVolumeCapabilitiesResponse {
                        confirmed: None,
                        message: p.message().to_string(),
                    },
                }))
            })
            .await
    }

    async fn list_volumes(
        &self,
        request: Request<csi::ListVolumesRequest>,
    ) -> Result<Response<csi::ListVolumesResponse>, Status> {
        self.metrics
            .observe("ListVolumes", async {
                let req = request.into_inner();
                let mut volumes = self.backend.list_volumes().await?;
                volumes.sort_by(|a, b| a.id.cmp(&b.id));
                let (items, next_token) = page(
                    &volumes,
                    |v| v.id.as_str(),
                    &req.starting_token,
                    req.max_entries,
                )?;
                Ok(Response::new(csi::ListVolumesResponse {
                    entries: items
                        .iter()
                        .map(|v| csi::list_volumes_response::Entry {
                            volume: Some(to_csi_volume(v)),
                            status: Some(csi::list_volumes_response::VolumeStatus {
                                published_node_ids: v.attached_to.clone(),
                            }),
                        })
                        .collect(),
                    next_token,
                }))
            })
            .await
    }

    async fn get_capacity(
        &self,
        request: Request<csi::GetCapacityRequest>,
    ) -> Result<Response<csi::GetCapacityResponse>, Status> {
        self.metrics
            .observe("GetCapacity", async {
                if !self.backend.caps().capacity {
                    return Err(Status::unimplemented("GetCapacity is not supported"));
                }
                let req = request.into_inner();
                let (params, _, _) = validate::split_parameters(&req.parameters);
                let topology: Option<Topology> = req
                    .accessible_topology
                    .map(|t| t.segments.into_iter().collect());
                let available = self.backend.capacity(&params, topology.as_ref()).await?;
                Ok(Response::new(csi::GetCapacityResponse {
                    available_capacity: available.unwrap_or(0),
                    maximum_volume_size: None,
                    minimum_volume_size: None,
                }))
            })
            .await
    }

    async fn controller_get_capabilities(
        &self,
        _request: Request<csi::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<csi::ControllerGetCapabilitiesResponse>, Status> {
        let caps = self.backend.caps();
        let mut list = vec![
            cap(RpcType::CreateDeleteVolume),
            cap(RpcType::PublishUnpublishVolume),
            cap(RpcType::ListVolumes),
            cap(RpcType::ListVolumesPublishedNodes),
            cap(RpcType::ExpandVolume),
        ];
        if caps.snapshots {
            list.push(cap(RpcType::CreateDeleteSnapshot));
            list.push(cap(RpcType::ListSnapshots));
        }
        if caps.clone {
            list.push(cap(RpcType::CloneVolume));
        }
        if caps.capacity {
            list.push(cap(RpcType::GetCapacity));
        }
        if caps.multi_attach {
            list.push(cap(RpcType::SingleNodeMultiWriter));
        }
        self.metrics
            .observe("ControllerGetCapabilities", async {
                Ok(Response::new(csi::ControllerGetCapabilitiesResponse {
                    capabilities: list,
                }))
            })
            .await
    }

    async fn create_snapshot(
        &self,
        request: Request<csi::CreateSnapshotRequest>,
    ) -> Result<Response<csi::CreateSnapshotResponse>, Status> {
        self.metrics
            .observe("CreateSnapshot", async {
                if !self.backend.caps().snapshots {
                    return Err(Status::unimplemented("this driver has no snapshots"));
                }
                let req = request.into_inner();
                let name = required(&req.name, "name")?;
                let source = required(&req.source_volume_id, "source_volume_id")?;
                let params: BTreeMap<String, String> = req.parameters.into_iter().collect();
                let _guard = self.locks.try_lock(&format!("snapshot/{name}"))?;
                let snapshot = self.backend.create_snapshot(name, source, &params).await?;
                Ok(Response::new(csi::CreateSnapshotResponse {
                    snapshot: Some(to_csi_snapshot(&snapshot)),
                }))
            })
            .await
    }

    async fn delete_snapshot(
        &self,
        request: Request<csi::DeleteSnapshotRequest>,
    ) -> Result<Response<csi::DeleteSnapshotResponse>, Status> {
        self.metrics
            .observe("DeleteSnapshot", async {
                if !self.backend.caps().snapshots {
                    return Err(Status::unimplemented("this driver has no snapshots"));
                }
                let req = request.into_inner();
                let id = required(&req.snapshot_id, "snapshot_id")?;
                let _guard = self.locks.try_lock(id)?;
                self.backend.delete_snapshot(id).await?;
                Ok(Response::new(csi::DeleteSnapshotResponse {}))
            })
            .await
    }

    async fn list_snapshots(
        &self,
        request: Request<csi::ListSnapshotsRequest>,
    ) -> Result<Response<csi::ListSnapshotsResponse>, Status> {
        self.metrics
            .observe("ListSnapshots", async {
                if !self.backend.caps().snapshots {
                    return Err(Status::unimplemented("this driver has no snapshots"));
                }
                let req = request.into_inner();
                let all = self.backend.list_snapshots().await?;
                let mut filtered: Vec<_> = all
                    .into_iter()
                    .filter(|s| req.snapshot_id.is_empty() || s.id == req.snapshot_id)
                    .filter(|s| {
                        req.source_volume_id.is_empty()
                            || s.source_volume_id == req.source_volume_id
                    })
                    .collect();
                filtered.sort_by(|a, b| a.id.cmp(&b.id));
                let (items, next_token) = page(
                    &filtered,
                    |s| s.id.as_str(),
                    &req.starting_token,
                    req.max_entries,
                )?;
                Ok(Response::new(csi::ListSnapshotsResponse {
                    entries: items
                        .iter()
                        .map(|s| csi::list_snapshots_response::Entry {
                            snapshot: Some(to_csi_snapshot(s)),
                        })
                        .collect(),
                    next_token,
                }))
            })
            .await
    }

    async fn controller_expand_volume(
        &self,
        request: Request<csi::ControllerExpandVolumeRequest>,
    ) -> Result<Response<csi::ControllerExpandVolumeResponse>, Status> {
        self.metrics
            .observe("ControllerExpandVolume", async {
                let req = request.into_inner();
                let id = required(&req.volume_id, "volume_id")?;
                let range = req
                    .capacity_range
                    .ok_or_else(|| Status::invalid_argument("capacity_range is required"))?;
                let (bytes, limit) =
                    validate::capacity(range.required_bytes, range.limit_bytes, 0)?;
                if bytes == 0 {
                    return Err(Status::invalid_argument(
                        "capacity_range.required_bytes is required",
                    ));
                }
                let _guard = self.locks.try_lock(id)?;
                let size = self.backend.expand(id, bytes).await?;
                if limit > 0 && size > limit {
                    return Err(Status::out_of_range(format!(
                        "volume {id} would have {size} bytes, more than limit_bytes {limit}"
                    )));
                }
                let block = matches!(
                    req.volume_capability.and_then(|c| c.access_type),
                    Some(csi::volume_capability::AccessType::Block(_))
                );
                Ok(Response::new(csi::ControllerExpandVolumeResponse {
                    capacity_bytes: size,
                    node_expansion_required: !block,
                }))
            })
            .await
    }

    async fn get_snapshot(
        &self,
        _request: Request<csi::GetSnapshotRequest>,
    ) -> Result<Response<csi::GetSnapshotResponse>, Status> {
        Err(Status::unimplemented("GetSnapshot is not supported"))
    }

    async fn controller_get_volume(
        &self,
        _request: Request<csi::ControllerGetVolumeRequest>,
    ) -> Result<Response<csi::ControllerGetVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerGetVolume is not supported",
        ))
    }

    async fn controller_get_volume_health(
        &self,
        _request: Request<csi::ControllerGetVolumeHealthRequest>,
    ) -> Result<Response<csi::ControllerGetVolumeHealthResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerGetVolumeHealth is not supported",
        ))
    }

    async fn controller_list_volume_health(
        &self,
        _request: Request<csi::ControllerListVolumeHealthRequest>,
    ) -> Result<Response<csi::ControllerListVolumeHealthResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerListVolumeHealth is not supported",
        ))
    }

    async fn controller_modify_volume(
        &self,
        _request: Request<csi::ControllerModifyVolumeRequest>,
    ) -> Result<Response<csi::ControllerModifyVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerModifyVolume is not supported",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topologies_keep_preference_order_without_repeats() {
        let t = |z: &str| csi::Topology {
            segments: [("zone".to_string(), z.to_string())].into_iter().collect(),
        };
        let req = csi::TopologyRequirement {
            requisite: vec![t("a"), t("b")],
            preferred: vec![t("b")],
        };
        let got: Vec<String> = requested_topologies(Some(&req))
            .into_iter()
            .map(|t| t["zone"].clone())
            .collect();
        assert_eq!(got, vec!["b", "a"]);
        assert!(requested_topologies(None).is_empty());
    }
}
