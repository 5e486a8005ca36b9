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
use stratus_openstack_api::client::http::HttpClient;
use stratus_openstack_api::client::{guard, Session};
use stratus_openstack_api::config::{BlockStorageConfig, OpenStackConfig};
use stratus_runtime::startup::{Problems, StartupError};

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
    /// Upstream's deprecated node flag (Deckhouse passes the Kubernetes node name). As upstream,
    /// the node's ID is its Nova server UUID from the metadata service; only together with
    /// `--availability-zone` is this value taken as the server UUID.
    #[arg(long = "nodeid", env = "CSI_NODE_ID")]
    pub node_id: Option<String>,
    /// The node's availability zone (read from the metadata service when not given).
    #[arg(long = "availability-zone", env = "CSI_NODE_ZONE")]
    pub availability_zone: Option<String>,
    /// Where the node service asks for its identity when `--nodeid` or `--availability-zone` is
    /// not given (a Stratus flag, for test environments; upstream always asks this address).
    #[arg(long = "metadata-url", env = "CINDER_CSI_METADATA_URL", default_value = metadata::METADATA_URL)]
    pub metadata_url: String,
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
    /// Whether the cluster is topology-aware: when false, no zone is reported for nodes or
    /// volumes and VOLUME_ACCESSIBILITY_CONSTRAINTS is not advertised.
    #[arg(long = "with-topology", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub with_topology: bool,
    /// More topology of the node, `key=value` (comma-separated or repeated), e.g.
    /// `topology.kubernetes.io/region=REGION1`.
    #[arg(long = "additional-topology", value_delimiter = ',', value_parser = parse_topology_pair)]
    pub additional_topology: Vec<(String, String)>,
    /// The clouds whose `[Global "name"]` subsections hold credentials; only the unnamed
    /// `[Global]` cloud (the default, "") is served: one driver per cloud.
    #[arg(long = "cloud-name", value_delimiter = ',', default_value = "", value_parser = parse_cloud_name)]
    pub cloud_name: Vec<String>,
    /// Deprecated upstream and a no-op: the node service never uses OpenStack credentials.
    #[arg(long = "node-service-no-os-client", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub node_service_no_os_client: bool,
    /// Extra User-Agent entries sent to OpenStack after Stratus's own (repeatable).
    #[arg(long = "user-agent")]
    pub user_agent: Vec<String>,
    /// Logging flags.
    #[command(flatten)]
    pub logging: stratus_runtime::logging::LoggingArgs,
}

/// `--additional-topology`: `key=value` with both halves set.
fn parse_topology_pair(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
            Ok((k.trim().to_string(), v.trim().to_string()))
        }
        _ => Err("expected key=value".into()),
    }
}

/// `--cloud-name`: only the unnamed cloud.
fn parse_cloud_name(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        Ok(String::new())
    } else {
        Err(format!(
            "{value:?}: several clouds per driver ([Global \"{value}\"] subsections) are not supported; run one driver per cloud with its own --cloud-config"
        ))
    }
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

/// The attach limit NodeGetInfo reports.
pub fn attach_limit(block_storage: &BlockStorageConfig) -> i64 {
    block_storage
        .node_volume_attach_limit
        .map_or(DEFAULT_ATTACH_LIMIT, i64::from)
}

/// The longest the node service waits for the metadata service at start (off OpenStack it does
/// not answer at all).
const METADATA_WAIT: Duration = Duration::from_secs(5);

/// The node's ID and zone. As upstream, the node's ID is its Nova server UUID from the metadata
/// service and `--nodeid` (which Deckhouse's templates fill with the Kubernetes node name) is not
/// it; the zone is `--availability-zone` or the metadata service's. Only with both `--nodeid` and
/// `--availability-zone` (a Stratus flag, for environments without a metadata service) is
/// `--nodeid` taken as the server UUID and the metadata service not asked.
async fn node_identity(
    opts: &Options,
    config: &OpenStackConfig,
) -> Result<(String, String), String> {
    let given = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
    let (flag_id, flag_zone) = (given(&opts.node_id), given(&opts.availability_zone));
    if let (Some(id), Some(zone)) = (&flag_id, &flag_zone) {
        return Ok((id.clone(), zone.clone()));
    }
    let wait = config.metadata.request_timeout.min(METADATA_WAIT);
    let fetched = match HttpClient::new(&config.global.tls, wait) {
        Ok(http) => metadata::fetch(&http, &opts.metadata_url).await,
        Err(e) => Err(e.named("[Global] ")),
    };
    let m = fetched.map_err(|e| {
        let without = if flag_id.is_some() {
            "--availability-zone (or CSI_NODE_ZONE) is not set, so the node's server UUID and zone come from the metadata service (--nodeid is not the server UUID, as upstream)"
        } else {
            "--nodeid (or CSI_NODE_ID) and --availability-zone (or CSI_NODE_ZONE) are not set"
        };
        format!("{without}, and the metadata service did not answer: {e}")
    })?;
    if let Some(id) = flag_id.filter(|id| *id != m.uuid) {
        tracing::info!(
            nodeid = %id,
            server = %m.uuid,
            "--nodeid is not the node's ID (as upstream): the metadata service's server UUID is"
        );
    }
    Ok((m.uuid, flag_zone.unwrap_or(m.availability_zone)))
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
    let config = match opts.cloud_config.first() {
        None => {
            problems.push("--cloud-config is required");
            None
        }
        Some(path) => problems.take(
            OpenStackConfig::load(path)
                .map_err(|e| format!("--cloud-config {}: {e}", path.display())),
        ),
    };
    let client = match (&config, opts.provide_controller) {
        (Some(config), true) => problems.take(
            HttpClient::new(&config.global.tls, config.metadata.request_timeout)
                .map_err(|e| e.named("--cloud-config: [Global] "))
                .and_then(|c| c.with_extra_user_agent(&opts.user_agent)),
        ),
        _ => None,
    };
    let identity = match (&config, opts.provide_node) {
        (Some(config), true) => problems.take(node_identity(&opts, config).await),
        _ => None,
    };
    problems.finish()?;
    let (Some(endpoint), Some(http), Some(config)) = (endpoint, http, config) else {
        return Err(AppError::Flag(
            "the startup check lost a setting it read".into(),
        ));
    };
    let mut registry = Registry::with_prefix("stratus");
    let csi_metrics = Arc::new(CsiMetrics::register(&mut registry));
    let api_metrics = Arc::new(ApiMetrics::register(&mut registry));
    let mut services = Services {
        without_topology: !opts.with_topology,
        ..Services::default()
    };
    if let Some(client) = client {
        let global = &config.global;
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
                ignore_volume_az: config.block_storage.ignore_volume_az || !opts.with_topology,
                operation_wait: opts.operation_wait,
                ..CinderOptions::default()
            },
        );
        services.controller = Some(Arc::new(controller));
    }
    if let Some((node_id, zone)) = identity {
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
        )
        .with_topology(opts.with_topology, &opts.additional_topology);
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

    #[test]
    fn the_other_upstream_flags() {
        let base = [
            "cinder-csi-plugin",
            "--endpoint=unix:///csi/csi.sock",
            "--cloud-config=/etc/config/cloud.conf",
        ];
        let parse =
            |more: &[&str]| Options::try_parse_from(base.iter().chain(more.iter()).copied());
        let o = parse(&[]).unwrap();
        assert!(o.with_topology);
        assert!(o.additional_topology.is_empty());
        assert_eq!(o.cloud_name, vec![String::new()]);
        let o = parse(&[
            "--with-topology=false",
            "--additional-topology=topology.kubernetes.io/region=R1,rack=r7",
            "--additional-topology=room=4",
            "--cloud-name=",
            "--node-service-no-os-client",
            "--user-agent=deckhouse/1.70",
            "--nodeid=abc",
        ])
        .unwrap();
        assert!(!o.with_topology && o.node_service_no_os_client);
        assert_eq!(
            o.additional_topology,
            vec![
                ("topology.kubernetes.io/region".into(), "R1".into()),
                ("rack".into(), "r7".into()),
                ("room".into(), "4".into())
            ]
        );
        assert_eq!(o.user_agent, vec!["deckhouse/1.70"]);
        for (bad, flag) in [
            ("--additional-topology=novalue", "--additional-topology"),
            ("--cloud-name=other", "--cloud-name"),
            ("--with-topology=maybe", "--with-topology"),
        ] {
            let e = parse(&[bad]).unwrap_err().to_string();
            assert!(e.contains(flag), "{bad}: {e}");
        }
    }

    #[test]
    fn topology_follows_the_flags() {
        use crate::node::CinderNode;
        use stratus_csi::backend::NodeBackend;
        let node = |aware, extra: &[(String, String)]| {
            CinderNode::new(
                "n".into(),
                "nova".into(),
                1,
                Arc::new(LoopDevices::new("/tmp".into(), 1)),
                Duration::from_secs(1),
            )
            .with_topology(aware, extra)
        };
        let t = node(true, &[("rack".into(), "r7".into())]).topology();
        assert_eq!(t.get(crate::TOPOLOGY_KEY).map(String::as_str), Some("nova"));
        assert_eq!(t.get("rack").map(String::as_str), Some("r7"));
        assert!(node(false, &[("rack".into(), "r7".into())])
            .topology()
            .is_empty());
    }
}
