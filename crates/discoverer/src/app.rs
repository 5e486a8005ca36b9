//! The command line (Deckhouse's flags and environment, plus an optional `--cloud-provider`) and the
//! process: builds the backend, serves `/metrics` and `/healthz` (plain on loopback, or HTTPS with
//! kube-rbac-proxy's checks built in), runs the loop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use prometheus_client::registry::Registry;
use stratus_aws_api::{AwsApi, Ec2};
use stratus_cloud_kit::{ApiMetrics, RetryPolicy};
use stratus_kube_kit::client::{client, KubeClientArgs};
use stratus_runtime::backoff::Backoff;
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::logging::LoggingArgs;
use stratus_runtime::startup::{Problems, StartupError};
use stratus_serving::{
    AccessRule, AlwaysAllow, DecisionTtls, Readiness, ResourceRule, ReviewClients, SecureServer,
    ServingConfig, TlsSource,
};

use crate::aws::AwsDiscoverer;
pub use crate::cloud::CloudProvider;
use crate::discoverer::Discoverer;
use crate::dvp::DvpDiscoverer;
use crate::metrics::Metrics;
use crate::openstack::OpenStackDiscoverer;
use crate::outputs::Outputs;
use crate::reconciler::{Health, Reconciler, RetrySettings};
use stratus_dvp::config::DvpConfig;

/// The flags.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "cloud-data-discoverer",
    version = stratus_runtime::build_info::version(),
    about = "Publishes cloud inventory for Deckhouse: instance types, discovery data, orphaned disks"
)]
pub struct Options {
    /// The cloud; when unset, the one whose variables the environment holds (as Deckhouse runs
    /// it: no flag, one image per module; see [`crate::cloud::choose`]).
    #[arg(long = "cloud-provider", env = "CLOUD_PROVIDER", value_enum)]
    pub cloud_provider: Option<CloudProvider>,
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
    /// Serve HTTPS here instead of the plain `--listen-address`, with kube-rbac-proxy's checks
    /// built in: a bearer token the API server accepts (TokenReview), allowed to `get`
    /// `deployments/prometheus-metrics` of `--metrics-deployment` in `--metrics-namespace`
    /// (SubjectAccessReview); `/healthz` stays open.
    #[arg(long = "secure-listen-address", env = "SECURE_LISTEN_ADDRESS")]
    pub secure_listen_address: Option<SocketAddr>,
    /// PEM serving certificate for `--secure-listen-address`; self-signed (in memory) when unset.
    #[arg(long = "tls-cert-file", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `--tls-cert-file`.
    #[arg(long = "tls-private-key-file", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Namespace of the Deployment whose `prometheus-metrics` subresource grants the metrics.
    #[arg(
        long = "metrics-namespace",
        env = "POD_NAMESPACE",
        default_value = "kube-system"
    )]
    pub metrics_namespace: String,
    /// Name of that Deployment.
    #[arg(long = "metrics-deployment", default_value = "cloud-data-discoverer")]
    pub metrics_deployment: String,
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
    /// Settings are missing or wrong (every one named).
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// Kubernetes client.
    #[error(transparent)]
    Client(#[from] stratus_kube_kit::client::ClientError),
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
    /// The HTTPS server.
    #[error("--secure-listen-address: {0:#}")]
    Secure(anyhow::Error),
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
    /// The HTTPS settings when `--secure-listen-address` is set: kube-rbac-proxy's
    /// `resourceAttributes` as Deckhouse configures them for the discoverer.
    pub fn secure_serving(&self) -> Option<ServingConfig> {
        let address = self.secure_listen_address?;
        let tls = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => TlsSource::SelfSigned {
                cert_dir: None,
                hosts: stratus_serving::self_signed::default_hosts(address.ip()),
            },
        };
        Some(ServingConfig {
            address,
            tls,
            tls_policy: stratus_serving::TlsPolicy::default(),
            always_allow: AlwaysAllow::parse(&["/healthz", "/livez", "/readyz"])
                .expect("static paths"),
            token_ttl: Duration::from_secs(10),
            decision_ttls: DecisionTtls {
                allowed: Duration::from_secs(10),
                denied: Duration::from_secs(10),
            },
            access: AccessRule::Resource(ResourceRule {
                namespace: self.metrics_namespace.clone(),
                group: "apps".into(),
                version: "v1".into(),
                resource: "deployments".into(),
                subresource: "prometheus-metrics".into(),
                name: self.metrics_deployment.clone(),
            }),
            // Behind kube-rbac-proxy under Deckhouse; its own port takes bearer tokens only.
            client_auth: stratus_serving::ClientAuthSettings::default(),
            profiling: false,
            listen: Default::default(),
        })
    }

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
    let region = stratus_aws_api::region::resolve(
        None,
        "set AWS_REGION (or AWS_DEFAULT_REGION), or run on EC2 with instance metadata reachable",
    )
    .await
    .map_err(|e| AppError::Config(format!("--cloud-provider=aws: {e}")))?;
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .region(region)
        .load()
        .await;
    let metrics = Arc::new(ApiMetrics::register(registry));
    Ok(AwsDiscoverer::new(
        Ec2::new(
            aws_sdk_ec2::Client::new(&sdk),
            AwsApi::new("ec2", metrics, RetryPolicy::default()),
        ),
        cluster_id,
    ))
}

/// Builds the OpenStack backend from the `OS_*` variables `lookup` gives.
pub fn openstack_backend(
    lookup: &dyn Fn(&str) -> Option<String>,
    registry: &mut Registry,
) -> Result<OpenStackDiscoverer, AppError> {
    let settings = crate::openstack::env::settings(lookup)
        .map_err(|e| AppError::Config(format!("--cloud-provider=openstack: {e}")))?;
    let metrics = Arc::new(ApiMetrics::register(registry));
    OpenStackDiscoverer::new(settings, &metrics).map_err(AppError::Config)
}

/// Builds the DVP backend from the variables `lookup` gives.
pub async fn dvp_backend(
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<DvpDiscoverer, AppError> {
    let config = DvpConfig::load(lookup, None)
        .map_err(|e| AppError::Config(format!("--cloud-provider=dvp: {e}")))?;
    let cluster_uuid = lookup("CLUSTER_UUID").filter(|v| !v.trim().is_empty());
    DvpDiscoverer::connect(config, cluster_uuid)
        .await
        .map_err(AppError::Config)
}

/// Runs until `shutdown` completes.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AppError> {
    // Everything needed, checked before anything serves: every problem named at once.
    let mut problems = Problems::new();
    let kube = problems
        .take(opts.kube.config().await)
        .and_then(|c| problems.take(client(c)));
    let mut registry = Registry::default();
    let env = |name: &str| std::env::var(name).ok();
    let chosen = problems.take(crate::cloud::choose(opts.cloud_provider, &env));
    if let Some(chosen) = &chosen {
        tracing::info!(cloud = %chosen.how, "asking this cloud");
    }
    let discoverer: Option<Arc<dyn Discoverer>> = match chosen.map(|c| c.cloud) {
        None => None,
        Some(CloudProvider::Aws) => problems
            .take(aws_backend(opts.cluster_id.clone(), &mut registry).await)
            .map(|d| match &kube {
                Some(kube) => d.finding_identity_with(kube.clone()),
                None => d,
            })
            .map(|d| Arc::new(d) as Arc<dyn Discoverer>),
        Some(CloudProvider::Openstack) => problems
            .take(openstack_backend(&env, &mut registry))
            .map(|d| Arc::new(d) as Arc<dyn Discoverer>),
        Some(CloudProvider::Dvp) => problems
            .take(dvp_backend(&env).await)
            .map(|d| match &kube {
                Some(kube) => d.finding_identity_with(kube.clone()),
                None => d,
            })
            .map(|d| Arc::new(d) as Arc<dyn Discoverer>),
    };
    if let Some(config) = opts.secure_serving() {
        problems.take(stratus_serving::tls::check(&config.tls).map_err(|e| format!("{e:#}")));
    }
    problems.finish()?;
    let (Some(kube), Some(discoverer)) = (kube, discoverer) else {
        return Err(AppError::Config(
            "the startup check lost a part it found".into(),
        ));
    };
    let metrics = Arc::new(Metrics::register(&mut registry));
    let readiness = Readiness::default();
    let health = Health::new(&readiness);
    let registry = Arc::new(registry);
    let secure = match opts.secure_serving() {
        Some(config) => {
            let clients = ReviewClients {
                authentication: kube.clone(),
                authorization: kube.clone(),
            };
            Some(
                SecureServer::start(config, clients, registry, readiness)
                    .await
                    .map_err(AppError::Secure)?,
            )
        }
        None => {
            let address = crate::http::spawn(opts.listen_address, registry, health.clone())
                .await
                .map_err(|source| AppError::Listen {
                    address: opts.listen_address,
                    source,
                })?;
            tracing::info!(%address, "serving /metrics and /healthz");
            None
        }
    };
    let reconciler = Reconciler::new(
        discoverer,
        Outputs::new(kube),
        metrics,
        health,
        opts.retry(),
    );
    reconciler.run(opts.discovery_period, shutdown).await;
    if let Some(server) = secure {
        server.shutdown(Duration::from_secs(5)).await;
    }
    Ok(())
}
