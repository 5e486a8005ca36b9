//! The `module-controller` command line and process: picks its cloud (`--cloud-provider`, else
//! the provider cluster configuration's `kind`), serves `/metrics` and the probes, elects a leader,
//! and reconciles on every change of what it reads (Secrets, StorageClasses, ModuleConfigs,
//! Nodes on AWS) and every resync period.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PartialObjectMeta};
use kube::runtime::watcher;
use prometheus_client::registry::Registry;
use stratus_election::{ElectionMetrics, LeaderElectionArgs, Leadership};
use stratus_kube_kit::client::{client, KubeClientArgs};
use stratus_runtime::duration::parse_go_duration;
use stratus_runtime::logging::LoggingArgs;
use stratus_serving::probes::{parse_bind_address, BindAddress};
use stratus_serving::{PlainMetricsServer, ProbeServer, Readiness};

use crate::driver::Driver;
use crate::inputs;
use crate::metrics::Metrics;
use crate::Cloud;

/// The command line.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "module-controller",
    version = stratus_runtime::build_info::version(),
    about = "The runtime glue of a Stratus cloud-provider module: StorageClasses, registration Secrets, spot-termination marks"
)]
pub struct Options {
    /// aws | openstack | dvp; default: the kind of `kube-system/d8-provider-cluster-configuration`.
    #[arg(long = "cloud-provider", env = "CLOUD_PROVIDER", value_enum)]
    pub cloud_provider: Option<Cloud>,
    /// The module chart's values (`settings:` and `global.defaultClusterStorageClass`), read
    /// where Deckhouse's ModuleConfig is not served.
    #[arg(long = "values")]
    pub values: Option<PathBuf>,
    /// How often everything is checked again without a change.
    #[arg(long = "resync-period", default_value = "10m", value_parser = parse_go_duration)]
    pub resync_period: Duration,
    /// Plain `/metrics` (`0` turns it off).
    #[arg(long = "metrics-bind-address", default_value = "127.0.0.1:8080", value_parser = parse_bind_address)]
    pub metrics_bind_address: BindAddress,
    /// `/healthz`, `/livez`, `/readyz` (`0` turns them off).
    #[arg(long = "health-probe-bind-address", default_value = ":8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: BindAddress,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub election: LeaderElectionArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub kube: KubeClientArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub logging: LoggingArgs,
}

/// Runs until `shutdown` resolves or the lease is lost.
pub async fn run(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    // Every local input is checked before anything is served or asked of the apiserver.
    if let Some(path) = opts.values.as_deref() {
        inputs::values_document(path)?;
    }
    let config = opts.kube.config().await?;
    let kube = client(config)?;
    let cloud = match opts.cloud_provider {
        Some(c) => c,
        None => detect_cloud(&kube).await?,
    };
    tracing::info!(
        cloud = cloud.name(),
        module = cloud.module(),
        "module controller"
    );
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let election_metrics = ElectionMetrics::register(&mut registry);
    let registry = Arc::new(registry);
    let readiness = Readiness::default();
    // Ready once started: a standby waiting for the lease is healthy too (a rollout of two
    // replicas would otherwise wait forever for the standby).
    let ready = readiness.add("started", "starting");
    let _metrics_server = match opts.metrics_bind_address.0 {
        Some(a) => {
            Some(PlainMetricsServer::start(a, "--metrics-bind-address", registry.clone()).await?)
        }
        None => None,
    };
    let _probes = match opts.health_probe_bind_address.0 {
        Some(a) => {
            Some(ProbeServer::start(a, "--health-probe-bind-address", readiness.clone()).await?)
        }
        None => None,
    };
    ready.set();
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let lease = opts.election.lease_name("stratus-module-controller");
    let namespace = stratus_election::pod_namespace().unwrap_or_else(|| "kube-system".into());
    let leadership = if opts.election.leader_elect {
        let config = opts
            .election
            .config_in(&lease, "module-controller", &namespace);
        tokio::select! {
            l = Leadership::acquire(kube.clone(), config, election_metrics.lease(&lease)) => Some(l?),
            _ = shutdown.clone() => return Ok(()),
        }
    } else {
        None
    };
    let mut lost = leadership.as_ref().map(|l| l.lost_signal());
    let driver = Driver::new(kube.clone(), cloud, opts.values.clone(), metrics);
    let mut triggers = triggers(&kube, cloud).await;
    let mut resync = tokio::time::interval(opts.resync_period);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let failures = driver.reconcile().await;
        let mut retry = failures
            .iter()
            .any(|f| f.reason == crate::driver::Reason::Kubernetes)
            .then(|| Box::pin(tokio::time::sleep(Duration::from_secs(5))));
        let lost_wait = async {
            match lost.as_mut() {
                Some(l) => {
                    let _ = l.wait_for(|l| *l).await;
                }
                None => std::future::pending().await,
            }
        };
        let retry_wait = async {
            match retry.as_mut() {
                Some(r) => r.as_mut().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.clone() => break,
            _ = lost_wait => anyhow::bail!("lost the lease {lease}"),
            _ = resync.tick() => {}
            _ = retry_wait => {}
            Some(()) = triggers.next() => {
                // Let a burst of events (our own writes among them) settle into one pass.
                let settle = tokio::time::sleep(Duration::from_millis(300));
                tokio::pin!(settle);
                loop {
                    tokio::select! {
                        _ = &mut settle => break,
                        Some(()) = triggers.next() => {}
                    }
                }
            }
        }
    }
    if let Some(l) = leadership {
        l.release().await;
    }
    Ok(())
}

/// The cloud whose provider cluster configuration the cluster holds.
async fn detect_cloud(kube: &kube::Client) -> anyhow::Result<Cloud> {
    let (ns, name) = inputs::CLUSTER_CONFIGURATION;
    let secret = Api::<Secret>::namespaced(kube.clone(), ns)
        .get_opt(name)
        .await?;
    let kind = secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(inputs::CLUSTER_CONFIGURATION_KEY).cloned())
        .and_then(|b| serde_yaml::from_slice::<serde_json::Value>(&b.0).ok())
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned));
    kind.as_deref()
        .and_then(Cloud::from_cluster_configuration_kind)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no --cloud-provider and secret {ns}/{name} key {} names no known kind \
                 (AWSClusterConfiguration, OpenStackClusterConfiguration, DVPClusterConfiguration)",
                inputs::CLUSTER_CONFIGURATION_KEY
            )
        })
}

/// A stream that yields on every change of what a reconcile reads.
async fn triggers(kube: &kube::Client, cloud: Cloud) -> BoxStream<'static, ()> {
    fn changes<S, T, E>(s: S) -> BoxStream<'static, ()>
    where
        S: futures::Stream<Item = Result<watcher::Event<T>, E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
        T: Send + 'static,
    {
        s.filter_map(|e| async move {
            match e {
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => Some(()),
                Ok(_) => None,
                Err(e) => {
                    tracing::debug!(error = %e, "watch interrupted; it resumes");
                    None
                }
            }
        })
        .boxed()
    }
    let secrets = Api::<PartialObjectMeta<Secret>>::namespaced(kube.clone(), "kube-system");
    let mut streams = Vec::new();
    for name in [inputs::CLUSTER_CONFIGURATION.1, inputs::DISCOVERY.1] {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        streams.push(changes(watcher::watcher(secrets.clone(), config)));
    }
    for name in crate::registration::secret_names(cloud) {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        streams.push(changes(watcher::watcher(secrets.clone(), config)));
    }
    streams.push(changes(watcher::watcher(
        Api::<StorageClass>::all(kube.clone()),
        watcher::Config::default(),
    )));
    if cloud == Cloud::Aws {
        streams.push(changes(watcher::watcher(
            Api::<Node>::all(kube.clone()),
            watcher::Config::default(),
        )));
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "ModuleConfig"),
        "moduleconfigs",
    );
    let module_configs = Api::<DynamicObject>::all_with(kube.clone(), &resource);
    if module_configs
        .list_metadata(&ListParams::default().limit(1))
        .await
        .is_ok()
    {
        streams.push(changes(watcher::watcher(
            module_configs,
            watcher::Config::default(),
        )));
    }
    stream::select_all(streams).boxed()
}
