//! The `capdvp-controller-manager` process: flags (the management cluster's `--kubeconfig`,
//! the parent's configuration as Deckhouse passes it — `DVP_KUBERNETES_CONFIG_BASE64` and
//! `DVP_NAMESPACE`, or `--cloud-config` — leader election, the probes, metrics and the runtime
//! extension as a controller-runtime manager serves them), then the controllers while this
//! replica leads. The extension server answers on every replica, leader or not.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use prometheus_client::registry::Registry;
use stratus_dvp::config::DvpConfig;
use stratus_election::{ElectionMetrics, LeaderElectionArgs, Leadership};
use stratus_kube_kit::client::{client, KubeClientArgs};
use stratus_kube_kit::events::EventPublisher;
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::startup::{Problems, StartupError};
use stratus_serving::listener::ListenOptions;
use stratus_serving::probes::{parse_bind_address, BindAddress};
use stratus_serving::{
    AccessRule, DecisionTtls, PlainMetricsServer, ProbeServer, Readiness, SecureServer,
    ServingArgs, ServingConfig, TlsSource,
};

use crate::controllers::{self, Parts};
use crate::extension::server::{ExtensionServer, ExtensionSettings};
use crate::machine::Settings;
use crate::manager_args::{cert_files, ManagerArgs, MetricsPlan};
use crate::metrics::Metrics;
use crate::parent::Parent;

/// The default of `--secure-port` (Stratus's HTTPS `/metrics` and probes): off, as a
/// controller-runtime manager serves no metrics unless asked (`--metrics-bind-address`).
pub const DEFAULT_SECURE_PORT: u16 = 0;
/// The controller name in Events.
pub const COMPONENT: &str = "capdvp-controller-manager";
/// The default Lease: the name Deckhouse's own capdvp elects on, so that during an image swap
/// the old and the new manager exclude each other; in the pod's namespace (Deckhouse grants
/// Leases only there), as controller-runtime chooses it.
pub const LEASE_NAME: &str = "70c82521.cluster.x-k8s.io";

/// Flags of `capdvp-controller-manager`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "capdvp-controller-manager",
    version = stratus_runtime::build_info::version(),
    about = "Cluster API infrastructure provider for DVP (DeckhouseCluster, DeckhouseMachine)"
)]
pub struct Options {
    /// The management cluster (where Cluster API runs).
    #[command(flatten)]
    pub kube: KubeClientArgs,
    /// A file with `kubernetes_config_base64` and `namespace` for the parent DVP cluster (the
    /// environment DVP_KUBERNETES_CONFIG_BASE64 and DVP_NAMESPACE wins).
    #[arg(long = "cloud-config")]
    pub cloud_config: Option<PathBuf>,
    /// The tenant cluster's UUID, the `dvp.deckhouse.io/cluster-uuid` label of parent objects.
    #[arg(long = "cluster-uuid", env = "CLUSTER_UUID", default_value = "")]
    pub cluster_uuid: String,
    /// Watch Cluster API objects in this namespace only (all namespaces when unset).
    #[arg(long = "namespace", alias = "watch-namespace", env = "WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// DeckhouseMachines reconciled at once.
    #[arg(
        long = "concurrency",
        alias = "deckhousemachine-concurrency",
        default_value_t = 16
    )]
    pub concurrency: u16,
    /// How long deleting a machine's VM and disks may take before they are marked orphaned
    /// (Deckhouse's annotations), reported, and the finalizer released.
    #[arg(long = "delete-timeout", default_value = "5m", value_parser = parse_go_duration)]
    pub delete_timeout: Duration,
    /// Leader election (on the management cluster).
    #[command(flatten)]
    pub election: LeaderElectionArgs,
    /// Secure serving of /metrics, /healthz, /livez, /readyz.
    #[command(flatten)]
    pub serving: ServingArgs,
    /// Plain-HTTP `/healthz`, `/livez` and `/readyz` for the kubelet's probes, as a
    /// controller-runtime manager serves them (`:8081`, `host:port`, or `0` for off).
    #[arg(long = "health-probe-bind-address", default_value = ":8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: BindAddress,
    /// The controller-runtime and Cluster API manager flags.
    #[command(flatten)]
    pub manager: ManagerArgs,
    /// Logging.
    #[command(flatten)]
    pub logging: stratus_runtime::logging::LoggingArgs,
}

/// Why the process could not run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Settings are missing or wrong (every one named).
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// The management cluster's client.
    #[error(transparent)]
    Client(#[from] stratus_kube_kit::client::ClientError),
    /// The parent configuration (every problem listed, no credential shown).
    #[error("{0}")]
    Config(String),
    /// Secure serving.
    #[error("{0:#}")]
    Serve(anyhow::Error),
    /// Leader election.
    #[error("leader election: {0}")]
    Election(String),
}

/// Reads the parent configuration from the environment and the optional file.
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

async fn parent_client(config: &DvpConfig) -> Result<kube::Client, AppError> {
    config.client().await.map_err(AppError::Config)
}

/// The startup problems of a certificate source: missing files named with the flags that chose
/// them, then whether the pair loads.
fn check_tls(source: &TlsSource, flags: &str) -> Result<(), String> {
    for file in cert_files(source) {
        if !file.is_file() {
            return Err(format!("{flags}: no file {}", file.display()));
        }
    }
    stratus_serving::tls::check(source).map_err(|e| format!("{flags}: {e:#}"))
}

/// The HTTPS metrics server of `--metrics-bind-address` with `--metrics-secure`: the secure
/// server's authentication and authorization, settings from the serving flags.
fn secure_metrics(plan: &MetricsPlan, serving: &ServingArgs, enable_http2: bool) -> ServingConfig {
    ServingConfig {
        address: plan.address,
        tls: plan.tls.clone(),
        tls_policy: serving.tls_policy(),
        always_allow: serving.authorization_always_allow_paths.clone(),
        token_ttl: serving.authentication_token_webhook_cache_ttl,
        decision_ttls: DecisionTtls {
            allowed: serving.authorization_webhook_cache_authorized_ttl,
            denied: serving.authorization_webhook_cache_unauthorized_ttl,
        },
        access: AccessRule::Path,
        // controller-runtime's metrics filter: bearer tokens only.
        client_auth: stratus_serving::ClientAuthSettings::default(),
        profiling: false,
        listen: ListenOptions {
            http1_only: !enable_http2,
            ..ListenOptions::default()
        },
    }
}

/// Runs until `shutdown` completes (or leadership is lost: then it returns an error so the
/// process restarts as a candidate, as controller-runtime does).
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), AppError> {
    // Everything needed, checked before anything serves: every problem named at once.
    let mut problems = Problems::new();
    for refusal in opts.manager.refusals() {
        problems.push(refusal);
    }
    let config = problems.take(load_config(opts.cloud_config.as_ref()));
    let parent = match &config {
        Some(config) => problems.take(parent_client(config).await),
        None => None,
    };
    let limit = opts.manager.client_limit();
    let mgmt = problems
        .take(opts.kube.config().await)
        .and_then(|c| match limit {
            Some(limit) => problems.take(limit.client(c).map_err(|e| format!("--kubeconfig: {e}"))),
            None => problems.take(client(c)),
        });
    let lease = opts.election.lease_name(LEASE_NAME);
    let lease_namespace = stratus_election::pod_namespace()
        .unwrap_or_else(|| stratus_election::DEFAULT_NAMESPACE.to_string());
    let election = opts.election.config_in(&lease, COMPONENT, &lease_namespace);
    if opts.election.leader_elect {
        problems.take(election.validate());
    }
    // Stratus's own secure port (Deckhouse's capdvp has none): the authentication ConfigMap is
    // read when allowed, never a reason not to start.
    let serving = opts.serving.serving(DEFAULT_SECURE_PORT).map(|mut s| {
        if let stratus_serving::Lookup::InCluster { tolerate_failure } = &mut s.client_auth.lookup {
            *tolerate_failure = true;
        }
        s
    });
    let metrics_plan = opts.manager.metrics();
    let extension = opts
        .manager
        .extension_address()
        .map(|address| ExtensionSettings {
            address,
            tls: opts.manager.extension_tls(),
            tls_policy: opts.serving.tls_policy(),
            listen: opts.manager.listen(),
        });
    if let Some(extension) = &extension {
        problems.take(check_tls(
            &extension.tls,
            "--webhook-cert-dir/--webhook-cert-name/--webhook-cert-key",
        ));
    }
    let secure_metrics_plan = metrics_plan.as_ref().filter(|p| p.secure);
    if let Some(plan) = secure_metrics_plan {
        problems.take(check_tls(
            &plan.tls,
            "--metrics-cert-path/--metrics-cert-name/--metrics-cert-key",
        ));
    }
    let mut reviews = None;
    if serving.is_some() || secure_metrics_plan.is_some() {
        if let Some(serving) = &serving {
            problems.take(stratus_serving::tls::check(&serving.tls).map_err(|e| format!("{e:#}")));
        }
        match &mgmt {
            Some(mgmt) => reviews = problems.take(opts.serving.review_clients(mgmt).await),
            None => {
                for problem in opts.serving.review_kubeconfig_problems().await {
                    problems.push(problem);
                }
            }
        }
    }
    problems.finish()?;
    let (Some(config), Some(parent), Some(mgmt)) = (config, parent, mgmt) else {
        return Err(AppError::Config(
            "the startup check lost a part it found".into(),
        ));
    };
    tracing::info!(server = %config.server, namespace = %config.namespace, "DVP parent cluster");
    let mut registry = Registry::default();
    let metrics = Arc::new(Metrics::register(&mut registry));
    let leader = ElectionMetrics::register(&mut registry).lease(&lease);
    let registry = Arc::new(registry);
    let readiness = Readiness::default();
    let synced = readiness.add("informer-sync", "the watches have not listed yet");
    let server = match (serving, reviews.clone()) {
        (Some(serving), Some(clients)) => Some(
            SecureServer::start(serving, clients, registry.clone(), readiness.clone())
                .await
                .map_err(AppError::Serve)?,
        ),
        _ => None,
    };
    let mut metrics_server = None;
    let mut _plain_metrics = None;
    match (metrics_plan, reviews) {
        (Some(plan), Some(clients)) if plan.secure => {
            metrics_server = Some(
                SecureServer::start(
                    secure_metrics(&plan, &opts.serving, opts.manager.enable_http2),
                    clients,
                    registry.clone(),
                    readiness.clone(),
                )
                .await
                .map_err(|e| AppError::Serve(e.context("--metrics-bind-address")))?,
            );
        }
        (Some(plan), None) if plan.secure => {
            // Never served in the clear instead: the startup check made the clients.
            return Err(AppError::Config(
                "--metrics-secure: no token and access review clients".into(),
            ));
        }
        (Some(plan), _) => {
            _plain_metrics = Some(
                PlainMetricsServer::start(plan.address, "--metrics-bind-address", registry.clone())
                    .await
                    .map_err(AppError::Serve)?,
            );
        }
        (None, _) => {}
    }
    let _probes = match opts.health_probe_bind_address.0 {
        Some(address) => Some(
            ProbeServer::start(address, "--health-probe-bind-address", readiness.clone())
                .await
                .map_err(AppError::Serve)?,
        ),
        None => None,
    };
    let parent = Parent::new(parent, &config.namespace, metrics.clone());
    let extension = match extension {
        Some(settings) => Some(
            ExtensionServer::start(settings, parent.clone(), metrics.clone())
                .await
                .map_err(AppError::Serve)?,
        ),
        None => {
            tracing::info!("--webhook-port=0: the runtime extension is off");
            None
        }
    };
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let leadership = if opts.election.leader_elect {
        tracing::info!(lease = %lease, namespace = %election.namespace, "leader election");
        let acquire = Leadership::acquire(mgmt.clone(), election, leader);
        tokio::select! {
            l = acquire => Some(l.map_err(|e| AppError::Election(e.to_string()))?),
            _ = shutdown.clone() => return Ok(()),
        }
    } else {
        None
    };
    let lost = leadership.as_ref().map(|l| l.lost_signal());
    let parts = Parts {
        mgmt: mgmt.clone(),
        parent,
        settings: Settings {
            cluster_uuid: opts.cluster_uuid.clone(),
            delete_timeout: opts.delete_timeout,
            sync_period: opts.manager.sync_period,
        },
        metrics,
        events: EventPublisher::new(mgmt, COMPONENT),
    };
    let lost_flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = {
        let shutdown = shutdown.clone();
        let lost_flag = lost_flag.clone();
        async move {
            match lost {
                Some(mut lost) => {
                    tokio::select! {
                        _ = shutdown => {}
                        _ = lost.wait_for(|l| *l) => {
                            lost_flag.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                }
                None => shutdown.await,
            }
        }
    };
    controllers::run(
        parts,
        opts.namespace.as_deref(),
        opts.concurrency.max(1),
        opts.manager.watch_filter(),
        stop,
        move || synced.set(),
    )
    .await;
    if let Some(l) = leadership {
        l.release().await;
    }
    let grace = Duration::from_secs(5);
    if let Some(extension) = extension {
        extension.shutdown(grace).await;
    }
    if let Some(server) = metrics_server {
        server.shutdown(grace).await;
    }
    if let Some(server) = server {
        server.shutdown(grace).await;
    }
    if lost_flag.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(AppError::Election("lost the lease".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        let o = Options::try_parse_from([
            "capdvp-controller-manager",
            "--cluster-uuid=u",
            "--delete-timeout=30s",
            "--leader-elect=false",
            "--secure-port=0",
            "--namespace=d8-cloud-instance-manager",
        ])
        .unwrap();
        assert_eq!(o.delete_timeout, Duration::from_secs(30));
        assert!(!o.election.leader_elect);
        assert!(o.serving.serving(DEFAULT_SECURE_PORT).is_none());
        assert_eq!(o.namespace.as_deref(), Some("d8-cloud-instance-manager"));
        assert_eq!(o.concurrency, 16);
        assert_eq!(
            o.health_probe_bind_address.0,
            Some("0.0.0.0:8081".parse().unwrap())
        );
        // Deckhouse's container spec: `--leader-elect` alone.
        let o = Options::try_parse_from(["capdvp-controller-manager", "--leader-elect"]).unwrap();
        assert!(o.election.leader_elect);
        assert_eq!(o.election.lease_name(LEASE_NAME), LEASE_NAME);
        let o =
            Options::try_parse_from(["capdvp-controller-manager", "--health-probe-bind-address=0"])
                .unwrap();
        assert_eq!(o.health_probe_bind_address.0, None);
    }

    /// A missing or broken certificate stops the start, naming the flags and the file.
    #[test]
    fn certificate_problems_name_the_flags_and_the_file() {
        let flags = "--webhook-cert-dir/--webhook-cert-name/--webhook-cert-key";
        let dir = std::env::temp_dir().join(format!("capdvp-certs-{}", std::process::id()));
        let source = crate::manager_args::cert_source(&dir, "tls.crt", "tls.key");
        let e = check_tls(&source, flags).unwrap_err();
        assert!(e.starts_with(flags), "{e}");
        assert!(
            e.contains(&dir.join("tls.crt").display().to_string()),
            "{e}"
        );
        std::fs::create_dir_all(&dir).unwrap();
        let pair = stratus_serving::self_signed::generate(&["localhost".to_string()]).unwrap();
        std::fs::write(dir.join("a.crt"), &pair.cert_pem).unwrap();
        std::fs::write(dir.join("a.key"), "not a key").unwrap();
        let named = crate::manager_args::cert_source(&dir, "a.crt", "a.key");
        let e = check_tls(&named, flags).unwrap_err();
        assert!(e.starts_with(flags) && e.contains("a.key"), "{e}");
        std::fs::write(dir.join("a.key"), &pair.key_pem).unwrap();
        check_tls(&named, flags).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
