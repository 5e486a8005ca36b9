//! The `ebs-csi-driver` process: upstream-compatible flags (mode `controller`/`node`/`all`,
//! `--endpoint`, `--http-endpoint`, `--extra-tags`, `--k8s-tag-cluster-id`,
//! `--volume-attach-limit`, `--reserved-volume-attachments`) plus the node's identity when
//! IMDS is not used, and the wiring of EC2, metrics and the CSI server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use prometheus_client::registry::Registry;
use stratus_aws_api::AwsApi;
use stratus_cloud_kit::{ApiMetrics, RetryPolicy};
use stratus_csi::metrics::CsiMetrics;
use stratus_csi::mount::SystemMounter;
use stratus_csi::{DriverInfo, Endpoint, Services};
use stratus_runtime::startup::{Problems, StartupError};

use crate::controller::{EbsController, EbsOptions};
use crate::ec2::Ec2;
use crate::node::{DeviceFinder, EbsNode, LoopDevices, NvmeDevices};
use crate::node_identity::{Source, NODE_NAME_VAR};
use crate::params::{usable_tags, InvalidTags};
use crate::DRIVER_NAME;

/// Which CSI services this process serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The Controller service (Deployment with the sidecars).
    Controller,
    /// The Node service (DaemonSet with the registrar).
    Node,
    /// Both.
    All,
}

/// Flags of `ebs-csi-driver`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "ebs-csi-driver",
    version = stratus_runtime::build_info::version(),
    about = "Stratus EBS CSI driver (ebs.csi.aws.com)"
)]
pub struct Options {
    /// Which services to run.
    #[arg(value_enum, default_value = "all")]
    pub mode: Mode,
    /// The CSI socket.
    #[arg(
        long,
        default_value = "unix:///var/lib/csi/sockets/pluginproxy/csi.sock"
    )]
    pub endpoint: String,
    /// Address of `/metrics` and `/healthz` (e.g. `0.0.0.0:3301`); off when empty.
    #[arg(long = "http-endpoint", default_value = "")]
    pub http_endpoint: String,
    /// Tags on every volume and snapshot: `key1=value1,key2=value2`.
    #[arg(long = "extra-tags", default_value = "")]
    pub extra_tags: String,
    /// Cluster ID: adds `kubernetes.io/cluster/<id>=owned` and `KubernetesCluster=<id>`.
    #[arg(long = "k8s-tag-cluster-id")]
    pub cluster_id: Option<String>,
    /// Volumes the node may attach; -1 for the default (25).
    #[arg(long = "volume-attach-limit", default_value_t = -1, allow_hyphen_values = true)]
    pub volume_attach_limit: i64,
    /// Attachments reserved for non-CSI volumes (root, ENIs); -1 for one (the root volume).
    #[arg(long = "reserved-volume-attachments", default_value_t = -1, allow_hyphen_values = true)]
    pub reserved_volume_attachments: i64,
    /// The node's instance ID (read from IMDS when not given).
    #[arg(long = "node-id", env = "CSI_NODE_ID")]
    pub node_id: Option<String>,
    /// The node's availability zone (read from IMDS when not given).
    #[arg(long = "availability-zone", env = "CSI_NODE_ZONE")]
    pub availability_zone: Option<String>,
    /// Zone of volumes created without topology (else the region's first zone).
    #[arg(long = "default-zone")]
    pub default_zone: Option<String>,
    /// How long one call waits for a volume to be available, attached or detached.
    #[arg(long = "operation-wait", default_value = "10s", value_parser = parse_duration)]
    pub operation_wait: Duration,
    /// How long a volume may stay `attaching` before the controller detaches it and fails the
    /// attach with a retryable code (a Stratus flag; upstream waits without bound).
    #[arg(long = "stuck-attaching-after", default_value = "90s", value_parser = parse_duration)]
    pub stuck_attaching: Duration,
    /// Least time between two DescribeVolumes of the shared volume-state poller that every
    /// wait (available, attached, detached) goes through (a Stratus flag).
    #[arg(long = "volume-poll-interval", default_value = "5s", value_parser = parse_duration)]
    pub volume_poll: Duration,
    /// How long after an operation the poller first looks at its volume (a Stratus flag).
    #[arg(long = "volume-poll-settle", default_value = "1s", value_parser = parse_duration)]
    pub volume_settle: Duration,
    /// Test environments only: back each volume by a loop device with its file in this
    /// directory instead of discovering NVMe devices.
    #[arg(long = "loop-devices-dir")]
    pub loop_devices_dir: Option<PathBuf>,
    /// Initial size of loop devices, bytes.
    #[arg(long = "loop-device-size", default_value_t = 1 << 30)]
    pub loop_device_size: u64,
    /// Serve `--http-endpoint` over HTTPS with this PEM certificate (chain after the leaf);
    /// needs `--metrics-key-file` and `--http-endpoint`.
    #[arg(long = "metrics-cert-file")]
    pub metrics_cert_file: Option<PathBuf>,
    /// The PEM private key of `--metrics-cert-file`.
    #[arg(long = "metrics-key-file")]
    pub metrics_key_file: Option<PathBuf>,
    /// OpenTelemetry trace export. Not built in: `true` is refused with the reason (the
    /// driver's spans go to the log with `--v=3`).
    #[arg(long = "enable-otel-tracing", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub enable_otel_tracing: bool,
    /// klog's `--logtostderr`: the log always goes to stderr (`false`, logging to files, is
    /// refused).
    #[arg(long = "logtostderr", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub logtostderr: bool,
    /// Deprecated upstream spelling of `--extra-tags` (merged with it; `--extra-tags` wins
    /// on the same key).
    #[arg(long = "extra-volume-tags", default_value = "")]
    pub extra_volume_tags: String,
    /// Log the AWS SDK's requests, attempts and retries at debug level whatever `--v` says
    /// (request signing and credential lookups stay quiet).
    #[arg(long = "aws-sdk-debug-log", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub aws_sdk_debug_log: bool,
    /// A tag EC2 would refuse (from `--extra-tags` or `tagSpecification_N`) is left out with a
    /// warning instead of failing the start or the request.
    #[arg(long = "warn-on-invalid-tag", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub warn_on_invalid_tag: bool,
    /// Appended to the AWS SDK's user agent (as `app/<value>`).
    #[arg(long = "user-agent-extra", default_value = "")]
    pub user_agent_extra: String,
    /// Batch the EC2 describes of concurrent requests (on by default here; upstream's
    /// default is off). `false`: one describe per lookup.
    #[arg(long = "batching", action = ArgAction::Set, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub batching: bool,
    /// Upstream's window for coalescing ControllerModifyVolume calls. This driver does not
    /// offer ControllerModifyVolume (VolumeAttributesClass) yet, so the value is checked and
    /// has no other effect.
    #[arg(long = "modify-volume-request-handler-timeout", default_value = "2s", value_parser = parse_duration)]
    pub modify_volume_timeout: Duration,
    /// Upstream's deprecated metrics. Stratus has no deprecated metrics; accepted, no effect.
    #[arg(long = "deprecated-metrics", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub deprecated_metrics: bool,
    /// A kubeconfig for the `kubernetes` metadata source (else the pod's ServiceAccount, or
    /// `KUBECONFIG`).
    #[arg(long = "kubeconfig")]
    pub kubeconfig: Option<PathBuf>,
    /// Where the node plugin learns its instance and zone when `--node-id` and
    /// `--availability-zone` do not both give them, tried in order: `imds`, `kubernetes` (its
    /// Node, named by `CSI_NODE_NAME`).
    #[arg(long = "metadata-sources", default_value = "imds,kubernetes", value_parser = parse_sources)]
    pub metadata_sources: MetadataSources,
    /// Format XFS volumes without `bigtime`, `inobtcount` and `reflink`, so that nodes with
    /// Linux 5.4 or older can mount them.
    #[arg(long = "legacy-xfs", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub legacy_xfs: bool,
    /// Upstream's prefix of CSI mount points for its per-volume NVMe metrics. This driver
    /// collects no per-volume NVMe metrics: accepted, with a warning when set.
    #[arg(long = "csi-mount-point-prefix", default_value = "")]
    pub csi_mount_point_prefix: String,
    /// Windows HostProcess containers: `true` is refused (Linux nodes only).
    #[arg(long = "windows-host-process", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub windows_host_process: bool,
    /// Logging flags.
    #[command(flatten)]
    pub logging: stratus_runtime::logging::LoggingArgs,
}

/// Targets whose debug events `--aws-sdk-debug-log` shows: the SDK's request pipeline and
/// the EC2 client, not the signer or the credential chain (they would print secrets).
pub const AWS_SDK_DEBUG_TARGETS: &[(&str, u8)] = &[("aws_smithy_runtime", 3), ("aws_sdk_ec2", 3)];

impl Options {
    /// Every value that cannot be honoured, named with the reason (no AWS or socket needed).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.enable_otel_tracing {
            problems.push("--enable-otel-tracing=true: OpenTelemetry export is not built into Stratus; the driver's spans go to the log (--v=3)".to_string());
        }
        if !self.logtostderr {
            problems.push(
                "--logtostderr=false: Stratus logs to stderr only (there are no log files)"
                    .to_string(),
            );
        }
        if self.windows_host_process {
            problems.push(
                "--windows-host-process=true: Stratus's EBS driver runs on Linux nodes only"
                    .to_string(),
            );
        }
        if self.volume_attach_limit != -1 && self.reserved_volume_attachments != -1 {
            problems.push(
                "only one of --volume-attach-limit and --reserved-volume-attachments may be given"
                    .to_string(),
            );
        }
        match (
            &self.metrics_cert_file,
            &self.metrics_key_file,
            self.http_endpoint.is_empty(),
        ) {
            (None, None, _) => {}
            (Some(_), Some(_), false) => {}
            (_, _, true) => problems
                .push("--metrics-cert-file/--metrics-key-file need --http-endpoint".to_string()),
            (None, Some(_), _) => {
                problems.push("--metrics-key-file needs --metrics-cert-file".to_string())
            }
            (Some(_), None, _) => {
                problems.push("--metrics-cert-file needs --metrics-key-file".to_string())
            }
        }
        if !self.user_agent_extra.is_empty()
            && aws_config::AppName::new(self.user_agent_extra.clone()).is_err()
        {
            problems.push(format!(
                "--user-agent-extra {:?}: only letters, digits and !#$%&'*+-.^_`|~ may be used",
                self.user_agent_extra
            ));
        }
        problems
    }

    /// What a tag EC2 would refuse does.
    pub fn invalid_tags(&self) -> InvalidTags {
        if self.warn_on_invalid_tag {
            InvalidTags::Warn
        } else {
            InvalidTags::Refuse
        }
    }

    /// `--extra-tags` over `--extra-volume-tags`, keeping the tags EC2 takes.
    pub fn extra_tags(&self) -> Result<BTreeMap<String, String>, Vec<String>> {
        let mut tags =
            parse_tags(&self.extra_volume_tags, "--extra-volume-tags").map_err(|e| vec![e])?;
        if !tags.is_empty() {
            tracing::warn!("--extra-volume-tags is deprecated: use --extra-tags");
        }
        tags.extend(parse_tags(&self.extra_tags, "--extra-tags").map_err(|e| vec![e])?);
        usable_tags(tags, self.invalid_tags(), "--extra-tags")
    }
}

/// `--metadata-sources`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataSources(pub Vec<Source>);

fn parse_sources(s: &str) -> Result<MetadataSources, String> {
    crate::node_identity::parse_sources(s).map(MetadataSources)
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

/// Parses `k=v,k2=v2` given by `flag`.
pub fn parse_tags(text: &str, flag: &str) -> Result<BTreeMap<String, String>, String> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(format!("{flag}: {pair:?} is not key=value")),
        })
        .collect()
}

/// The attach limit NodeGetInfo reports.
pub fn attach_limit(limit: i64, reserved: i64) -> i64 {
    let reserved = if reserved < 0 { 1 } else { reserved };
    if limit > 0 {
        limit
    } else {
        (26 - reserved).max(1)
    }
}

/// How the controller takes a region, for the message when it has none (as upstream: the
/// environment, else the instance metadata).
const HOW_TO_SET_REGION: &str =
    "set AWS_REGION (or AWS_DEFAULT_REGION), or run on EC2 with instance metadata reachable";

/// The node's instance and zone: the flags, else the first of `--metadata-sources` that answers
/// (a flag that is given wins over it); the problem names both flags and why each source gave
/// nothing.
async fn node_identity(opts: &Options) -> Result<(String, String), String> {
    let given = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
    let (id, zone) = (given(&opts.node_id), given(&opts.availability_zone));
    if let (Some(id), Some(zone)) = (&id, &zone) {
        return Ok((id.clone(), zone.clone()));
    }
    let node_name = std::env::var(NODE_NAME_VAR).ok();
    let found = crate::node_identity::resolve(
        &opts.metadata_sources.0,
        node_name.as_deref(),
        opts.kubeconfig.as_deref(),
    )
    .await
    .map_err(|e| {
        format!(
            "--node-id (or CSI_NODE_ID) and --availability-zone (or CSI_NODE_ZONE) are not both set, and {e}"
        )
    })?;
    Ok((id.unwrap_or(found.instance_id), zone.unwrap_or(found.zone)))
}

/// Runs the driver until `shutdown` completes.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), AppError> {
    // Everything this mode needs, checked before anything serves: every problem named at once.
    let mut problems = Problems::new();
    let endpoint = problems.take(
        opts.endpoint
            .parse::<Endpoint>()
            .map_err(|e| format!("--endpoint: {e}")),
    );
    for p in opts.problems() {
        problems.push(p);
    }
    let extra_tags = problems.take(opts.extra_tags().map_err(|p| p.join("; ")));
    let metrics_tls = match (&opts.metrics_cert_file, &opts.metrics_key_file) {
        (Some(cert), Some(key)) => Some(stratus_serving::TlsSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    let http = problems.take(if opts.http_endpoint.is_empty() {
        Ok(None)
    } else {
        opts.http_endpoint
            .parse::<SocketAddr>()
            .map(Some)
            .map_err(|e| format!("--http-endpoint: {e}"))
    });
    let controller = matches!(opts.mode, Mode::Controller | Mode::All);
    let node = matches!(opts.mode, Mode::Node | Mode::All);
    let region = if controller {
        problems.take(stratus_aws_api::region::resolve(None, HOW_TO_SET_REGION).await)
    } else {
        None
    };
    let identity = if node {
        problems.take(node_identity(&opts).await)
    } else {
        None
    };
    if !opts.csi_mount_point_prefix.is_empty() {
        tracing::warn!(
            prefix = %opts.csi_mount_point_prefix,
            "--csi-mount-point-prefix: this driver collects no per-volume NVMe metrics; the value has no effect"
        );
    }
    problems.finish()?;
    let (Some(endpoint), Some(extra_tags), Some(http)) = (endpoint, extra_tags, http) else {
        return Err(AppError::Flag(
            "the startup check lost a flag it read".into(),
        ));
    };
    let mut registry = Registry::with_prefix("stratus");
    let csi_metrics = Arc::new(CsiMetrics::register(&mut registry));
    let api_metrics = Arc::new(ApiMetrics::register(&mut registry));
    let mut services = Services::default();
    if let Some(region) = region {
        // Every call gets at least one look before its deadline (a look comes at most
        // max(settle, interval) after a call registers), else a busy poller could starve
        // retried waits until they count as stuck.
        let volume_poll = opts
            .volume_poll
            .min(opts.operation_wait.saturating_sub(opts.volume_settle));
        if volume_poll < opts.volume_poll {
            tracing::warn!(
                ?volume_poll,
                "--volume-poll-interval shortened to --operation-wait minus --volume-poll-settle"
            );
        }
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).region(region);
        if !opts.user_agent_extra.is_empty() {
            // Checked by `Options::problems`.
            if let Ok(name) = aws_config::AppName::new(opts.user_agent_extra.clone()) {
                loader = loader.app_name(name);
            }
        }
        let conf = loader.load().await;
        let client = aws_sdk_ec2::Client::new(&conf);
        let api = AwsApi::new("ec2", api_metrics.clone(), RetryPolicy::default());
        let window = opts.batching.then_some(Duration::from_millis(200));
        let ec2 = Ec2::new(client, api, window);
        let controller = EbsController::new(
            ec2,
            EbsOptions {
                cluster_id: opts.cluster_id.clone(),
                extra_tags,
                default_zone: opts.default_zone.clone(),
                operation_wait: opts.operation_wait,
                stuck_attaching: opts.stuck_attaching,
                poll: volume_poll,
                settle: opts.volume_settle,
                invalid_tags: opts.invalid_tags(),
            },
        );
        services.controller = Some(Arc::new(controller));
    }
    if let Some((node_id, zone)) = identity {
        let finder: Arc<dyn DeviceFinder> = match &opts.loop_devices_dir {
            Some(dir) => Arc::new(LoopDevices::new(dir.clone(), opts.loop_device_size)),
            None => Arc::new(NvmeDevices::default()),
        };
        let node = EbsNode::new(
            node_id,
            zone,
            attach_limit(opts.volume_attach_limit, opts.reserved_volume_attachments),
            finder,
            Duration::from_secs(30),
        );
        services.node = Some((
            Arc::new(node),
            Arc::new(SystemMounter::default().with_legacy_xfs(opts.legacy_xfs)),
        ));
    }
    let ready = Arc::new(AtomicBool::new(false));
    let registry = Arc::new(Mutex::new(registry));
    // Kept for the life of the process (dropping it stops the HTTPS endpoint).
    let mut _https = None;
    if let Some(addr) = http {
        match &metrics_tls {
            None => {
                let bound = stratus_csi::http::spawn(addr, registry.clone(), ready.clone())
                    .await
                    .map_err(AppError::Http)?;
                tracing::info!(address = %bound, "serving /metrics and /healthz");
            }
            Some(tls) => {
                let listener =
                    stratus_csi::https::spawn_tls(addr, tls, registry.clone(), ready.clone())
                        .await
                        .map_err(|e| AppError::Flag(format!("{e:#}")))?;
                tracing::info!(address = %listener.local_addr(), "serving /metrics and /healthz over HTTPS");
                _https = Some(listener);
            }
        }
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
            "ebs-csi-driver",
            "controller",
            "--endpoint=unix:///csi/csi.sock",
            "--extra-tags=team=storage,env=dev",
            "--k8s-tag-cluster-id=c1",
        ])
        .unwrap();
        assert_eq!(o.mode, Mode::Controller);
        assert_eq!(o.extra_tags().unwrap()["env"], "dev");
        assert!(parse_tags("novalue", "--extra-tags").is_err());
        assert_eq!(Options::try_parse_from(["x"]).unwrap().mode, Mode::All);
        assert!(Options::try_parse_from(["x", "sideways"]).is_err());
    }

    #[test]
    fn attach_limits() {
        assert_eq!(attach_limit(-1, -1), 25);
        assert_eq!(attach_limit(10, -1), 10);
        assert_eq!(attach_limit(-1, 3), 23);
    }
}
