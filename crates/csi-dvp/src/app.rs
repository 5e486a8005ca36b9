//! The `dvp-csi-driver` process: flags (`--endpoint`, `--cloud-config`, `--cluster-uuid`,
//! `--node-name`, `--http-endpoint`, `--provide-controller-service`, `--provide-node-service`),
//! the DVP configuration as Deckhouse passes it (`DVP_KUBERNETES_CONFIG_BASE64`, `DVP_NAMESPACE`
//! or the cloud-config file, read by the DVP provider's loader), and the wiring of the parent
//! client, metrics and the CSI server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{ArgAction, Parser};
use prometheus_client::registry::Registry;
use stratus_csi::devices::{DeviceFinder, LoopDevices};
use stratus_csi::metrics::CsiMetrics;
use stratus_csi::mount::SystemMounter;
use stratus_csi::{DriverInfo, Endpoint, Services};
use stratus_dvp::config::DvpConfig;
use stratus_runtime::startup::{Problems, StartupError};

use crate::controller::{DvpController, DvpOptions};
use crate::devices::SerialDevices;
use crate::node::{DvpNode, DEFAULT_ATTACH_LIMIT};
use crate::parent::Parent;
use crate::DRIVER_NAME;

/// Flags of `dvp-csi-driver`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "dvp-csi-driver",
    version = stratus_runtime::build_info::version(),
    about = "Stratus DVP CSI driver (csi.dvp.deckhouse.io)"
)]
pub struct Options {
    /// The CSI socket.
    #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///csi/csi.sock")]
    pub endpoint: String,
    /// A cloud-config file with `kubernetes_config_base64` and `namespace` (the environment
    /// variables DVP_KUBERNETES_CONFIG_BASE64 and DVP_NAMESPACE win).
    #[arg(long = "cloud-config")]
    pub cloud_config: Option<PathBuf>,
    /// The tenant cluster's UUID, written as `dvp.deckhouse.io/cluster-uuid` on disks. When
    /// empty or not a UUID (Deckhouse's template passes the socket URL on nodes), the controller
    /// reads the UUID Deckhouse keeps in this cluster's ConfigMap kube-system/d8-cluster-uuid.
    #[arg(long = "cluster-uuid", env = "CLUSTER_UUID", default_value = "")]
    pub cluster_uuid: String,
    /// This node's name (required with the node service).
    #[arg(long = "node-name", env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// Address of `/metrics` and `/healthz` (e.g. `0.0.0.0:9809`); off when empty.
    #[arg(long = "http-endpoint", default_value = "")]
    pub http_endpoint: String,
    /// Serve the Controller service.
    #[arg(long = "provide-controller-service", default_value_t = true, action = ArgAction::Set)]
    pub provide_controller: bool,
    /// Serve the Node service.
    #[arg(long = "provide-node-service", default_value_t = true, action = ArgAction::Set)]
    pub provide_node: bool,
    /// How long one call waits for a disk to be ready, attached, detached, grown or gone.
    #[arg(long = "operation-wait", default_value = "10s", value_parser = parse_duration)]
    pub operation_wait: Duration,
    /// Attachments NodeGetInfo reports the node can take.
    #[arg(long = "max-volumes-per-node", default_value_t = DEFAULT_ATTACH_LIMIT)]
    pub max_volumes: i64,
    /// Test environments only: back each volume by a loop device with its file in this
    /// directory instead of looking devices up by serial.
    #[arg(long = "loop-devices-dir")]
    pub loop_devices_dir: Option<PathBuf>,
    /// Initial size of loop devices, bytes.
    #[arg(long = "loop-device-size", default_value_t = 1 << 30)]
    pub loop_device_size: u64,
    /// Logging flags.
    #[command(flatten)]
    pub logging: stratus_runtime::logging::LoggingArgs,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    stratus_runtime::duration::parse_go_duration(s)
}

/// A problem with the flags or the start-up.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A flag value is wrong.
    #[error("invalid flag: {0}")]
    Flag(String),
    /// The DVP configuration is wrong (every problem listed).
    #[error("{0}")]
    Config(String),
    /// Settings are missing or wrong (every one named).
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] stratus_csi::server::ServeError),
    /// The HTTP endpoint failed.
    #[error("http endpoint: {0}")]
    Http(std::io::Error),
}

/// Reads the DVP configuration from the environment and the optional file.
pub fn load_config(path: Option<&PathBuf>) -> Result<DvpConfig, AppError> {
    let text = match path {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| AppError::Config(format!("--cloud-config {}: {e}", p.display())))?,
        ),
        None => None,
    };
    DvpConfig::load(
        |name| std::env::var(name).ok(),
        path.zip(text.as_deref()).map(|(p, t)| (p.as_path(), t)),
    )
    .map_err(|e| AppError::Config(e.to_string()))
}

/// A client of the parent namespace the configuration names.
pub async fn connect(config: &DvpConfig) -> Result<Parent, AppError> {
    let client = config.client().await.map_err(AppError::Config)?;
    Ok(Parent::new(client, &config.namespace))
}

/// How long the controller looks for the cluster's UUID at start.
const UUID_LOOKUP_WAIT: Duration = Duration::from_secs(10);

/// The cluster UUID the controller labels disks with: `given` when usable, else Deckhouse's
/// ConfigMap in this cluster (the pod's ServiceAccount, or `KUBECONFIG`); empty (disks unlabelled, with a warning
/// naming what to grant) when neither gives one.
async fn controller_cluster_uuid(given: &str) -> String {
    use stratus_kube_kit::deckhouse::{cluster_uuid, usable_cluster_uuid};
    if usable_cluster_uuid(given) {
        return given.trim().to_string();
    }
    let lookup = async {
        // The pod's ServiceAccount (or KUBECONFIG when set, as for any Kubernetes client).
        let config = kube::Config::infer()
            .await
            .map_err(|e| format!("this cluster's credentials: {e}"))?;
        let config = stratus_kube_kit::client::env_proxied(config).map_err(|e| e.to_string())?;
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        cluster_uuid(&client).await
    };
    match tokio::time::timeout(UUID_LOOKUP_WAIT, lookup).await {
        Ok(Ok(Some(uuid))) => {
            tracing::info!(%uuid, "cluster UUID from configmap kube-system/d8-cluster-uuid");
            uuid
        }
        Ok(Ok(None)) => {
            tracing::warn!("no --cluster-uuid and no configmap kube-system/d8-cluster-uuid: disks are created without dvp.deckhouse.io/cluster-uuid");
            String::new()
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "no --cluster-uuid and configmap kube-system/d8-cluster-uuid cannot be read (grant get on it): disks are created without dvp.deckhouse.io/cluster-uuid");
            String::new()
        }
        Err(_) => {
            tracing::warn!("no --cluster-uuid and configmap kube-system/d8-cluster-uuid did not answer in time: disks are created without dvp.deckhouse.io/cluster-uuid");
            String::new()
        }
    }
}

/// Runs the driver until `shutdown` completes.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AppError> {
    // Everything the services asked for need, checked before anything serves: every problem
    // named at once.
    let mut problems = Problems::new();
    let endpoint = problems.take(
        opts.endpoint
            .parse::<Endpoint>()
            .map_err(|e| format!("--endpoint: {e}")),
    );
    let http = problems.take(if opts.http_endpoint.is_empty() {
        Ok(None)
    } else {
        opts.http_endpoint
            .parse::<SocketAddr>()
            .map(Some)
            .map_err(|e| format!("--http-endpoint: {e}"))
    });
    let parent = if opts.provide_controller {
        match problems.take(load_config(opts.cloud_config.as_ref())) {
            Some(config) => {
                tracing::info!(server = %config.server, namespace = %config.namespace, "DVP parent cluster");
                problems.take(connect(&config).await)
            }
            None => None,
        }
    } else {
        None
    };
    let node_name = if opts.provide_node {
        problems.take(
            opts.node_name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .ok_or("--node-name (or NODE_NAME) is required for the node service"),
        )
    } else {
        None
    };
    problems.finish()?;
    let (Some(endpoint), Some(http)) = (endpoint, http) else {
        return Err(AppError::Flag(
            "the startup check lost a flag it read".into(),
        ));
    };
    let mut registry = Registry::with_prefix("stratus");
    let csi_metrics = Arc::new(CsiMetrics::register(&mut registry));
    let mut services = Services {
        without_topology: true,
        ..Services::default()
    };
    if let Some(parent) = parent {
        let cluster_uuid = controller_cluster_uuid(&opts.cluster_uuid).await;
        let controller = DvpController::new(
            parent,
            DvpOptions {
                cluster_uuid,
                operation_wait: opts.operation_wait,
                ..DvpOptions::default()
            },
        );
        services.controller = Some(Arc::new(controller));
    }
    if let Some(node) = node_name {
        let finder: Arc<dyn DeviceFinder> = match &opts.loop_devices_dir {
            Some(dir) => Arc::new(LoopDevices::new(dir.clone(), opts.loop_device_size)),
            None => Arc::new(SerialDevices::default()),
        };
        let node = DvpNode::new(node, opts.max_volumes, finder, Duration::from_secs(30));
        services.node = Some((Arc::new(node), Arc::new(SystemMounter::default())));
    }
    let ready = Arc::new(AtomicBool::new(false));
    let registry = Arc::new(Mutex::new(registry));
    if let Some(addr) = http {
        let bound = stratus_csi::http::spawn(addr, registry.clone(), ready.clone())
            .await
            .map_err(AppError::Http)?;
        tracing::info!(address = %bound, "serving /metrics and /healthz");
    }
    ready.store(true, Ordering::Relaxed);
    stratus_csi::serve(
        &endpoint,
        DriverInfo {
            name: DRIVER_NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        services,
        csi_metrics,
        ready,
        shutdown,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        let o = Options::try_parse_from([
            "dvp-csi-driver",
            "--endpoint=unix:///csi/csi.sock",
            "--cluster-uuid=u1",
            "--node-name=n1",
            "--provide-controller-service=false",
            "--operation-wait=3s",
        ])
        .unwrap();
        assert!(!o.provide_controller && o.provide_node);
        assert_eq!(
            (o.cluster_uuid.as_str(), o.node_name.as_deref()),
            ("u1", Some("n1"))
        );
        assert_eq!(o.operation_wait, Duration::from_secs(3));
    }
}
