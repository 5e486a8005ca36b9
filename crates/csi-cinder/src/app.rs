//! The `cinder-csi-plugin` process: upstream-compatible flags (`--endpoint`, `--cloud-config`,
//! `--cluster`, `--nodeid`, `--http-endpoint`, `--provide-controller-service`,
//! `--provide-node-service`), the `[Global]` and `[BlockStorage]` sections of `cloud.conf`, and
//! the wiring of the OpenStack session, metrics and the CSI server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{ArgAction, Parser};
use prometheus_client::registry::Registry;
use stratus_cloud_kit::ApiMetrics;
use stratus_csi::devices::{DeviceFinder, LoopDevices};
use stratus_csi::metrics::CsiMetrics;
use stratus_csi::mount::SystemMounter;
use stratus_csi::{DriverInfo, Endpoint, Services};
use stratus_openstack::client::http::HttpClient;
use stratus_openstack::client::{guard, Session};
use stratus_openstack::config::{BlockStorageConfig, OpenStackConfig};

use crate::cinder::CinderApi;
use crate::controller::{CinderController, CinderOptions};
use crate::devices::VirtioDevices;
use crate::metadata;
use crate::node::{CinderNode, DEFAULT_ATTACH_LIMIT};
use crate::DRIVER_NAME;

/// Flags of `cinder-csi-plugin`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cinder-csi-plugin",
    version = stratus_runtime::build_info::version(),
    about = "Stratus Cinder CSI driver (cinder.csi.openstack.org)"
)]
pub struct Options {
    /// The CSI socket.
    #[arg(long, default_value = "unix://tmp/csi.sock")]
    pub endpoint: String,
    /// The OpenStack cloud config (`[Global]` auth, `[BlockStorage]`); the first one given is
    /// read.
    #[arg(long = "cloud-config", required = true)]
    pub cloud_config: Vec<PathBuf>,
    /// The cluster's identifier, written as `cinder.csi.openstack.org/cluster` on volumes.
    #[arg(long, default_value = "")]
    pub cluster: String,
    /// The node's ID (its Nova server UUID; read from the metadata service when not given).
    #[arg(long = "nodeid", env = "CSI_NODE_ID")]
    pub node_id: Option<String>,
    /// The node's availability zone (read from the metadata service when not given).
    #[arg(long = "availability-zone", env = "CSI_NODE_ZONE")]
    pub availability_zone: Option<String>,
    /// Address of `/metrics` and `/healthz` (e.g. `0.0.0.0:9809`); off when empty.
    #[arg(long = "http-endpoint", default_value = "")]
    pub http_endpoint: String,
    /// Serve the Controller service.
    #[arg(long = "provide-controller-service", default_value_t = true, action = ArgAction::Set)]
    pub provide_controller: bool,
    /// Serve the Node service.
    #[arg(long = "provide-node-service", default_value_t = true, action = ArgAction::Set)]
    pub provide_node: bool,
    /// How long one call waits for a volume to be available, attached, detached or grown.
    #[arg(long = "operation-wait", default_value = "10s", value_parser = parse_duration)]
    pub operation_wait: Duration,
    /// Test environments only: back each volume by a loop device with its file in this
    /// directory instead of discovering virtio devices.
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
    /// The cloud config is wrong (every problem listed).
    #[error("invalid cloud config: {0}")]
    Config(String),
    /// The metadata service could not name the node.
    #[error("node metadata: {0}")]
    Metadata(String),
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] stratus_csi::server::ServeError),
    /// The HTTP endpoint failed.
    #[error("http endpoint: {0}")]
    Http(std::io::Error),
}

/// The attach limit NodeGetInfo reports.
pub fn attach_limit(block_storage: &BlockStorageConfig) -> i64 {
    block_storage
        .node_volume_attach_limit
        .map_or(DEFAULT_ATTACH_LIMIT, i64::from)
}

/// Runs the driver until `shutdown` completes.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AppError> {
    let endpoint: Endpoint = opts
        .endpoint
        .parse()
        .map_err(|e: stratus_csi::server::ServeError| AppError::Flag(e.to_string()))?;
    let http: Option<SocketAddr> = if opts.http_endpoint.is_empty() {
        None
    } else {
        Some(opts.http_endpoint.parse().map_err(|e| {
            AppError::Flag(format!("--http-endpoint {:?}: {e}", opts.http_endpoint))
        })?)
    };
    let path = opts
        .cloud_config
        .first()
        .ok_or_else(|| AppError::Flag("--cloud-config is required".into()))?;
    let config = OpenStackConfig::load(path).map_err(|e| AppError::Config(e.to_string()))?;
    let mut registry = Registry::with_prefix("stratus");
    let csi_metrics = Arc::new(CsiMetrics::register(&mut registry));
    let api_metrics = Arc::new(ApiMetrics::register(&mut registry));
    let mut services = Services::default();
    if opts.provide_controller {
        let global = &config.global;
        let client = HttpClient::new(&global.tls, config.metadata.request_timeout)
            .map_err(|e| AppError::Config(format!("[Global] {e}")))?;
        let session = Arc::new(Session::new(
            client,
            &global.auth_url,
            global.credentials.clone(),
            global.interface,
            global.region.clone(),
            guard("identity", &api_metrics),
        ));
        let controller = CinderController::new(
            CinderApi::new(session, &api_metrics),
            CinderOptions {
                cluster: Some(opts.cluster.clone()).filter(|c| !c.is_empty()),
                ignore_volume_az: config.block_storage.ignore_volume_az,
                operation_wait: opts.operation_wait,
                ..CinderOptions::default()
            },
        );
        services.controller = Some(Arc::new(controller));
    }
    if opts.provide_node {
        let (node_id, zone) = match (&opts.node_id, &opts.availability_zone) {
            (Some(id), Some(zone)) => (id.clone(), zone.clone()),
            (id, zone) => {
                let http = HttpClient::new(&config.global.tls, config.metadata.request_timeout)
                    .map_err(|e| AppError::Config(format!("[Global] {e}")))?;
                let m = metadata::fetch(&http, metadata::METADATA_URL)
                    .await
                    .map_err(AppError::Metadata)?;
                (
                    id.clone().unwrap_or(m.uuid),
                    zone.clone().unwrap_or(m.availability_zone),
                )
            }
        };
        let finder: Arc<dyn DeviceFinder> = match &opts.loop_devices_dir {
            Some(dir) => Arc::new(LoopDevices::new(dir.clone(), opts.loop_device_size)),
            None => Arc::new(VirtioDevices::new(config.block_storage.rescan_on_resize)),
        };
        let node = CinderNode::new(
            node_id,
            zone,
            attach_limit(&config.block_storage),
            finder,
            Duration::from_secs(30),
        );
        services.node = Some((Arc::new(node), Arc::new(SystemMounter)));
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
    fn flags_like_upstream() {
        let o = Options::try_parse_from([
            "cinder-csi-plugin",
            "--endpoint=unix:///csi/csi.sock",
            "--cloud-config=/etc/config/cloud.conf",
            "--cluster=c1",
            "--provide-node-service=false",
        ])
        .unwrap();
        assert!(o.provide_controller && !o.provide_node);
        assert_eq!(o.cluster, "c1");
        assert!(
            Options::try_parse_from(["x"]).is_err(),
            "--cloud-config is required"
        );
        let limit = |n| BlockStorageConfig {
            node_volume_attach_limit: n,
            ..BlockStorageConfig::default()
        };
        assert_eq!(attach_limit(&limit(None)), 256);
        assert_eq!(attach_limit(&limit(Some(20))), 20);
    }
}
