//! The CSI Identity service: driver name and version, plugin capabilities (controller service,
//! topology, online expansion) and readiness.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::identity_server::Identity;
use stratus_csi_spec::v1::plugin_capability::{self, service, volume_expansion};
use tonic::{Request, Response, Status};

use crate::metrics::CsiMetrics;
use crate::server::DriverInfo;

/// Serves GetPluginInfo, GetPluginCapabilities and Probe.
pub struct IdentityService {
    info: DriverInfo,
    with_controller: bool,
    topology: bool,
    ready: Arc<AtomicBool>,
    metrics: Arc<CsiMetrics>,
}

impl IdentityService {
    /// An identity for the driver; `with_controller` says whether this process serves the
    /// Controller service; `ready` is what Probe reports.
    pub fn new(
        info: DriverInfo,
        with_controller: bool,
        ready: Arc<AtomicBool>,
        metrics: Arc<CsiMetrics>,
    ) -> Self {
        Self {
            info,
            with_controller,
            topology: true,
            ready,
            metrics,
        }
    }

    /// Whether VOLUME_ACCESSIBILITY_CONSTRAINTS is advertised (yes unless told otherwise).
    pub fn with_topology(mut self, topology: bool) -> Self {
        self.topology = topology;
        self
    }
}

fn service_cap(t: service::Type) -> csi::PluginCapability {
    csi::PluginCapability {
        r#type: Some(plugin_capability::Type::Service(
            plugin_capability::Service { r#type: t as i32 },
        )),
    }
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _request: Request<csi::GetPluginInfoRequest>,
    ) -> Result<Response<csi::GetPluginInfoResponse>, Status> {
        self.metrics
            .observe("GetPluginInfo", async {
                Ok(Response::new(csi::GetPluginInfoResponse {
                    name: self.info.name.clone(),
                    vendor_version: self.info.version.clone(),
                    manifest: Default::default(),
                }))
            })
            .await
    }

    async fn get_plugin_capabilities(
        &self,
        _request: Request<csi::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<csi::GetPluginCapabilitiesResponse>, Status> {
        let mut capabilities = vec![csi::PluginCapability {
            r#type: Some(plugin_capability::Type::VolumeExpansion(
                plugin_capability::VolumeExpansion {
                    r#type: volume_expansion::Type::Online as i32,
                },
            )),
        }];
        if self.topology {
            capabilities.push(service_cap(service::Type::VolumeAccessibilityConstraints));
        }
        if self.with_controller {
            capabilities.push(service_cap(service::Type::ControllerService));
        }
        self.metrics
            .observe("GetPluginCapabilities", async {
                Ok(Response::new(csi::GetPluginCapabilitiesResponse {
                    capabilities,
                }))
            })
            .await
    }

    async fn probe(
        &self,
        _request: Request<csi::ProbeRequest>,
    ) -> Result<Response<csi::ProbeResponse>, Status> {
        let ready = self.ready.load(Ordering::Relaxed);
        self.metrics
            .observe("Probe", async {
                Ok(Response::new(csi::ProbeResponse { ready: Some(ready) }))
            })
            .await
    }
}
