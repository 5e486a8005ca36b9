//! Wiring: cloud config → provider → Kubernetes client → enabled controllers, until a signal.

use std::sync::Arc;

use anyhow::{bail, Context};
use prometheus_client::registry::Registry;
use stratus_aws::config::CloudConfig;
use stratus_aws::instance_cache::CacheOptions;
use stratus_aws::{AwsCloud, AwsOptions};
use stratus_cloud::Cloud;
use stratus_controllers::informer::NodeInformer;
use stratus_controllers::{node, node_ipam, node_lifecycle, route, service};
use stratus_election::{ElectionConfig, Leadership};

use crate::options::{enabled_controllers, Options};
use crate::pod_network::PodNetwork;
use crate::secure_serving::{self, CacheSync};

/// Runs the cloud-controller-manager until SIGTERM/SIGINT.
pub async fn run(opts: Options, network: PodNetwork) -> anyhow::Result<()> {
    let controllers = enabled_controllers(&opts.controllers).map_err(anyhow::Error::msg)?;
    if opts.cloud_provider != stratus_aws::PROVIDER_NAME {
        bail!(
            "--cloud-provider: unknown provider {:?} (this build supports: aws)",
            opts.cloud_provider
        );
    }
    let config = match &opts.cloud_config {
        Some(path) => CloudConfig::load(path).map_err(|e| anyhow::anyhow!("{e}"))?,
        None => CloudConfig::default(),
    };
    if opts.leader_elect {
        election_config(&opts).validate()?;
    }
    // Refuse a config that cannot scope the cloud before touching any API.
    stratus_aws::cloud::scope_for(&config, opts.allow_untagged_cloud)?;
    let client = kube_client(&opts).await?;
    let mut registry = Registry::default();
    let aws = AwsOptions {
        allow_untagged_cloud: opts.allow_untagged_cloud,
        cache: CacheOptions {
            refresh_period: opts.instance_cache_refresh_period,
            ..CacheOptions::default()
        },
    };
    let cloud = AwsCloud::start(&config, aws, &mut registry).await?;
    let readiness = stratus_serving::Readiness::default();
    let cache_sync = CacheSync::new(&readiness);
    let server = secure_serving::start(&opts, &client, Arc::new(registry), readiness).await?;
    let instances = cloud
        .instances_v2()
        .context("provider has no instances support")?;
    // Controllers start only once this replica leads; a signal while waiting just exits.
    let mut leadership = if opts.leader_elect {
        let election = election_config(&opts);
        tokio::select! {
            l = Leadership::acquire(client.clone(), election) => Some(l?),
            _ = stratus_runtime::shutdown::signal() => {
                tracing::info!("shutting down before leading");
                return Ok(());
            }
        }
    } else {
        None
    };
    let mut tasks = tokio::task::JoinSet::new();
    let mut informer = NodeInformer::new(client.clone());
    cache_sync.track(informer.store(), cloud.instance_cache().clone());
    for name in &controllers {
        match *name {
            "cloud-node" => {
                let cfg = node::NodeControllerConfig {
                    concurrency: opts.concurrent_node_syncs,
                    status_update_frequency: opts.node_status_update_frequency,
                    ..node::NodeControllerConfig::default()
                };
                let events = informer.take_events().context("node events taken twice")?;
                tasks.spawn(node::run(
                    client.clone(),
                    informer.store(),
                    events,
                    Arc::clone(&instances),
                    cfg,
                ));
            }
            "cloud-node-lifecycle" => {
                let cfg = node_lifecycle::LifecycleConfig {
                    monitor_period: opts.node_monitor_period,
                    ..node_lifecycle::LifecycleConfig::default()
                };
                tasks.spawn(node_lifecycle::run(
                    client.clone(),
                    informer.store(),
                    Arc::clone(&instances),
                    cfg,
                ));
            }
            "service" => {
                let Some(lb) = cloud.load_balancer() else {
                    tracing::warn!(
                        "service controller needs KubernetesClusterID in the cloud config (load balancers are tagged with it); skipping"
                    );
                    continue;
                };
                let cfg = service::ServiceControllerConfig {
                    cluster_name: opts.cluster_name.clone(),
                    concurrency: opts.concurrent_service_syncs,
                    reaper_period: opts.load_balancer_reaper_period,
                    node_quiet: opts.node_churn_quiet_period,
                    ..service::ServiceControllerConfig::default()
                };
                tasks.spawn(service::run(client.clone(), informer.store(), lb, cfg));
            }
            "route" => {
                if !opts.configure_cloud_routes {
                    tracing::info!(
                        "--configure-cloud-routes=false: the route controller is not started"
                    );
                    continue;
                }
                if network.cluster_cidrs.is_empty() {
                    tracing::warn!("--configure-cloud-routes is true but --cluster-cidr is not set: the route controller is not started (pass --cluster-cidr, or --configure-cloud-routes=false to silence this)");
                    continue;
                }
                let Some(routes) = cloud.routes() else {
                    tracing::warn!("--configure-cloud-routes is true but the cloud config names neither RouteTableID nor a cluster ID: the route controller is not started");
                    continue;
                };
                let cfg = route::RouteControllerConfig {
                    cluster_cidrs: network.cluster_cidrs.clone(),
                    reconcile_period: opts.route_reconciliation_period,
                    ..route::RouteControllerConfig::default()
                };
                tasks.spawn(route::run(
                    client.clone(),
                    informer.store(),
                    informer.subscribe(),
                    routes,
                    cfg,
                ));
            }
            other => {
                tracing::warn!(
                    controller = other,
                    "controller is not available in this build yet; skipping"
                );
                continue;
            }
        }
        tracing::info!(controller = name, "controller started");
    }
    // node-ipam runs whenever --allocate-node-cidrs is true, whichever controllers are enabled
    // (as kube-controller-manager's, it is independent of the route controller).
    if let Some(ranges) = network.allocate.clone() {
        tasks.spawn(node_ipam::run(
            client.clone(),
            informer.store(),
            informer.subscribe(),
            node_ipam::NodeIpamConfig::new(ranges),
        ));
        tracing::info!(controller = "node-ipam", "controller started");
    }
    if let Some(watch) = informer.unclaimed_watch() {
        tasks.spawn(watch);
    }
    tracing::info!(cluster = %opts.cluster_name, region = cloud.region(), "cloud-controller-manager running");
    let lost = async {
        match leadership.as_mut() {
            Some(l) => l.lost().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = stratus_runtime::shutdown::signal() => tracing::info!("shutting down"),
        Some(r) = tasks.join_next() => {
            r.context("controller task panicked")?;
            bail!("a controller stopped unexpectedly");
        }
        _ = lost => {
            // As upstream: a replica that lost the lease stops acting at once, by exiting.
            bail!("leader election lost");
        }
    }
    tasks.abort_all();
    if let Some(l) = leadership {
        l.release().await;
    }
    if let Some(server) = server {
        server.shutdown(secure_serving::SHUTDOWN_GRACE).await;
    }
    Ok(())
}

/// The election settings from the upstream flags; the identity is the host name plus a random
/// suffix, as upstream.
fn election_config(opts: &Options) -> ElectionConfig {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "cloud-controller-manager".into());
    ElectionConfig {
        lease_name: opts.leader_elect_resource_name.clone(),
        namespace: opts.leader_elect_resource_namespace.clone(),
        identity: format!("{host}_{:016x}", rand::random::<u64>()),
        lease_duration: opts.leader_elect_lease_duration,
        renew_deadline: opts.leader_elect_renew_deadline,
        retry_period: opts.leader_elect_retry_period,
    }
}

async fn kube_client(opts: &Options) -> anyhow::Result<kube::Client> {
    let mut config = match &opts.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}: cannot read", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}: invalid", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig or run in a cluster")?,
    };
    if let Some(master) = &opts.master {
        config.cluster_url = master
            .parse()
            .with_context(|| format!("--master {master:?}: not a URL"))?;
    }
    kube::Client::try_from(config).context("cannot build the Kubernetes client")
}
