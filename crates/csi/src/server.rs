//! Serving the CSI services on a unix socket: the `--endpoint` address, the services this
//! process runs (controller, node or both) and the tonic server with graceful shutdown.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use stratus_csi_spec::v1::controller_server::ControllerServer;
use stratus_csi_spec::v1::identity_server::IdentityServer;
use stratus_csi_spec::v1::node_server::NodeServer;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;

use crate::backend::{ControllerBackend, NodeBackend};
use crate::controller::ControllerService;
use crate::identity::IdentityService;
use crate::metrics::CsiMetrics;
use crate::mount::Mounter;
use crate::node::NodeService;

/// The driver's name and version, as GetPluginInfo reports them.
#[derive(Debug, Clone)]
pub struct DriverInfo {
    /// `ebs.csi.aws.com`, `cinder.csi.openstack.org`.
    pub name: String,
    /// The vendor version.
    pub version: String,
}

/// Where the CSI services listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The unix socket's path.
    pub path: PathBuf,
}

/// Why an endpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The endpoint is not a unix socket address.
    #[error("endpoint {0:?} is not a unix socket address (unix:///path/to/csi.sock)")]
    BadEndpoint(String),
    /// Binding the socket failed.
    #[error("listening on {path}: {source}")]
    Listen {
        /// The socket path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("serving CSI: {0}")]
    Transport(#[from] tonic::transport::Error),
}

impl std::str::FromStr for Endpoint {
    type Err = ServeError;

    /// Accepts `unix:///abs/path`, `unix:/abs/path` and a bare absolute path.
    fn from_str(s: &str) -> Result<Self, ServeError> {
        let path = s
            .strip_prefix("unix://")
            .or_else(|| s.strip_prefix("unix:"))
            .unwrap_or(s);
        if path.is_empty()
            || !path.starts_with('/')
            || s.contains("://") && !s.starts_with("unix://")
        {
            return Err(ServeError::BadEndpoint(s.to_string()));
        }
        Ok(Endpoint {
            path: PathBuf::from(path),
        })
    }
}

/// The services one process runs.
#[derive(Clone, Default)]
pub struct Services {
    /// The Controller service's backend, in controller (or all-in-one) mode.
    pub controller: Option<Arc<dyn ControllerBackend>>,
    /// The Node service's backend and mounter, in node (or all-in-one) mode.
    pub node: Option<(Arc<dyn NodeBackend>, Arc<dyn Mounter>)>,
    /// The driver has no topology (every volume attaches anywhere): VOLUME_ACCESSIBILITY_CONSTRAINTS
    /// is not advertised.
    pub without_topology: bool,
}

/// Serves Identity plus the configured services on `endpoint` until `shutdown` completes. A
/// stale socket file left by a killed process is removed first.
pub async fn serve(
    endpoint: &Endpoint,
    info: DriverInfo,
    services: Services,
    metrics: Arc<CsiMetrics>,
    ready: Arc<AtomicBool>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let listen_err = |source| ServeError::Listen {
        path: endpoint.path.display().to_string(),
        source,
    };
    if let Some(parent) = endpoint.path.parent() {
        std::fs::create_dir_all(parent).map_err(listen_err)?;
    }
    match std::fs::remove_file(&endpoint.path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(listen_err(e)),
    }
    let listener = UnixListener::bind(&endpoint.path).map_err(listen_err)?;
    tracing::info!(endpoint = %endpoint.path.display(), driver = info.name, "serving CSI");
    let identity =
        IdentityService::new(info, services.controller.is_some(), ready, metrics.clone())
            .with_topology(!services.without_topology);
    let mut router = tonic::transport::Server::builder().add_service(IdentityServer::new(identity));
    if let Some(backend) = services.controller {
        router = router.add_service(ControllerServer::new(ControllerService::new(
            backend,
            metrics.clone(),
        )));
    }
    if let Some((backend, mounter)) = services.node {
        router = router.add_service(NodeServer::new(NodeService::new(
            backend,
            mounter,
            metrics.clone(),
        )));
    }
    router
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await?;
    let _ = std::fs::remove_file(&endpoint.path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        let ok = |s: &str| s.parse::<Endpoint>().unwrap().path;
        assert_eq!(ok("unix:///csi/csi.sock"), PathBuf::from("/csi/csi.sock"));
        assert_eq!(ok("unix:/csi/csi.sock"), PathBuf::from("/csi/csi.sock"));
        assert_eq!(ok("/csi/csi.sock"), PathBuf::from("/csi/csi.sock"));
        assert!("tcp://127.0.0.1:10000".parse::<Endpoint>().is_err());
        assert!("unix://relative.sock".parse::<Endpoint>().is_err());
        assert!("".parse::<Endpoint>().is_err());
    }
}
