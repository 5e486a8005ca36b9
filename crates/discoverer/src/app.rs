//! The command line (Deckhouse's flags and environment, plus `--cloud-provider`) and the
//! process: builds the backend, serves `/metrics` and `/healthz`, runs the loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use prometheus_client::registry::Registry;
use stratus_aws::api_call::AwsApi;
use stratus_cloud_kit::{ApiMetrics, RetryPolicy};
use stratus_kube_kit::client::{client, KubeClientArgs};
use stratus_runtime::backoff::Backoff;
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::logging::LoggingArgs;

use crate::aws::AwsDiscoverer;
use crate::discoverer::Discoverer;
use crate::metrics::Metrics;
use crate::outputs::Outputs;
use crate::reconciler::{Health, Reconciler, RetrySettings};

/// Which cloud to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloudProvider {
    /// Amazon EC2.
    Aws,
    /// OpenStack (not built yet).
    Openstack,
}

/// The flags.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cloud-data-discoverer",
    about = "Publishes cloud inventory for Deckhouse: instance types, discovery data, orphaned disks"
)]
pub struct Options {
    /// The cloud.
    #[arg(long = "cloud-provider", env = "CLOUD_PROVIDER", value_enum)]
    pub cloud_provider: CloudProvider,
    /// Time between runs (Go duration).
    #[arg(long = "discovery-period", env = "DISCOVERY_PERIOD", default_value = "1h", value_parser = parse_go_duration)]
    pub discovery_period: Duration,
    /// Where `/metrics` and `/healthz` are served (plain HTTP; keep it on loopback behind an
    /// authorizing proxy).
    #[arg(
        long = "listen-address",
        env = "LISTEN_ADDRESS",
        default_value = "127.0.0.1:9000"
    )]
    pub listen_address: SocketAddr,
    /// This cluster's id in the cloud's tags (`kubernetes.io/cluster/<id>` on EBS volumes);
    /// without it no orphaned disk is reported.
    #[arg(long = "cluster-id", env = "CLUSTER_ID")]
    pub cluster_id: Option<String>,
    /// Attempts of one cloud step per run before `/healthz` turns 503.
    #[arg(long = "cloud-retry-attempts", default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..))]
    pub retry_attempts: u32,
    /// First delay between attempts (doubles, jittered, up to ten times this).
    #[arg(long = "cloud-retry-delay", default_value = "3s", value_parser = parse_go_duration)]
    pub retry_delay: Duration,
    /// The Kubernetes client.
    #[command(flatten)]
    pub kube: KubeClientArgs,
    /// Logging.
    #[command(flatten)]
    pub logging: LoggingArgs,
}

/// Why the process could not run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Kubernetes client.
    #[error(transparent)]
    Client(#[from] stratus_kube_kit::client::ClientError),
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
    /// The listener.
    #[error("--listen-address {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl Options {
    /// The retry settings the flags ask for.
    pub fn retry(&self) -> RetrySettings {
        RetrySettings {
            attempts: self.retry_attempts,
            backoff: Backoff::new(self.retry_delay, self.retry_delay * 10),
        }
    }
}

/// Builds the AWS backend from the standard AWS environment (`AWS_REGION`, credentials,
/// `AWS_ENDPOINT_URL`).
pub async fn aws_backend(
    cluster_id: Option<String>,
    registry: &mut Registry,
) -> Result<AwsDiscoverer, AppError> {
    // The call guard owns retries (and counts them); the SDK's own would multiply them.
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .load()
        .await;
    if sdk.region().is_none() {
        return Err(AppError::Config(
            "AWS_REGION is not set: the AWS discoverer needs a region".into(),
        ));
    }
    let metrics = Arc::new(ApiMetrics::register(registry));
    Ok(AwsDiscoverer::new(
        aws_sdk_ec2::Client::new(&sdk),
        AwsApi::new("ec2", metrics, RetryPolicy::default()),
        cluster_id,
    ))
}

/// Runs until `shutdown` completes.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AppError> {
    let kube = client(opts.kube.config().await?)?;
    let mut registry = Registry::default();
    let discoverer: Arc<dyn Discoverer> = match opts.cloud_provider {
        CloudProvider::Aws => Arc::new(aws_backend(opts.cluster_id.clone(), &mut registry).await?),
        CloudProvider::Openstack => {
            return Err(AppError::Config(
                "--cloud-provider=openstack: the OpenStack backend is not built yet".into(),
            ))
        }
    };
    let metrics = Arc::new(Metrics::register(&mut registry));
    let health = Health::default();
    let address = crate::http::spawn(opts.listen_address, Arc::new(registry), health.clone())
        .await
        .map_err(|source| AppError::Listen {
            address: opts.listen_address,
            source,
        })?;
    tracing::info!(%address, "serving /metrics and /healthz");
    let reconciler = Reconciler::new(
        discoverer,
        Outputs::new(kube),
        metrics,
        health,
        opts.retry(),
    );
    reconciler.run(opts.discovery_period, shutdown).await;
    Ok(())
}
