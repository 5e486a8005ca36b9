//! Wiring: cloud config → provider → Kubernetes clients → controller groups, each started once its
//! lease is held (main lease, and the migration lease with --enable-leader-migration), until a
//! signal or a lost lease.

use std::sync::Arc;

use anyhow::{bail, Context};
use prometheus_client::registry::Registry;
use stratus_aws::config::CloudConfig;
use stratus_aws::instance_cache::CacheOptions;
use stratus_aws::{AwsCloud, AwsOptions};
use stratus_cloud::Cloud;
use stratus_controllers::informer::NodeInformer;
use stratus_controllers::watch_health::WatchHealth;
use stratus_controllers::{node, node_ipam, node_lifecycle, route, service};
use stratus_election::{ElectionConfig, Leadership};

use crate::controller_clients::ControllerClients;
use crate::migration;
use crate::options::{enabled_controllers, Options};
use crate::pod_network::PodNetwork;
use crate::secure_serving;

/// Runs the cloud-controller-manager until SIGTERM/SIGINT.
pub async fn run(opts: Options, network: PodNetwork) -> anyhow::Result<()> {
    let mut controllers = enabled_controllers(&opts.controllers).map_err(anyhow::Error::msg)?;
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
        election_config(&opts, &opts.leader_elect_resource_name).validate()?;
    }
    // node-ipam runs whenever --allocate-node-cidrs is true, whichever controllers are enabled
    // (as kube-controller-manager's, it is independent of the route controller).
    if network.allocate.is_some() {
        controllers.push("node-ipam");
    }
    let groups = controller_groups(&opts, &controllers)?;
    // Refuse a config that cannot scope the cloud before touching any API.
    stratus_aws::cloud::scope_for(&config, opts.allow_untagged_cloud)?;
    let kube_config = kube_config(&opts).await?;
    let client = kube::Client::try_from(kube_config.clone())
        .context("cannot build the Kubernetes client")?;
    let clients = if opts.use_service_account_credentials {
        ControllerClients::per_account(&kube_config, client.clone())
    } else {
        ControllerClients::shared(client.clone())
    };
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
    let server =
        secure_serving::start(&opts, &client, Arc::new(registry), readiness.clone()).await?;
    let starter = GroupStarter {
        opts: &opts,
        network: &network,
        cloud: &cloud,
        client: &client,
        clients: &clients,
        readiness: &readiness,
    };

    // Each group waits for its lease (if any), then starts its controllers. Standby replicas
    // start nothing: no watch, no cloud call.
    let mut acquiring = tokio::task::JoinSet::new();
    let mut unled = Vec::new();
    for (index, group) in groups.iter().enumerate() {
        match &group.lease {
            Some(lease) => {
                let election = election_config(&opts, lease);
                let client = client.clone();
                acquiring
                    .spawn(async move { (index, Leadership::acquire(client, election).await) });
            }
            None => unled.push(index),
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for index in unled {
        starter.start(&groups[index], &mut tasks).await?;
    }
    let mut leaders: Vec<Leadership> = Vec::new();
    let mut lost = tokio::task::JoinSet::new();
    let outcome: anyhow::Result<()> = loop {
        tokio::select! {
            _ = stratus_runtime::shutdown::signal() => {
                tracing::info!("shutting down");
                break Ok(());
            }
            Some(acquired) = acquiring.join_next() => {
                let (index, leadership) = acquired.context("leader election task panicked")?;
                let leadership = leadership?;
                let group = &groups[index];
                let mut signal = leadership.lost_signal();
                let lease = group.lease.clone().unwrap_or_default();
                lost.spawn(async move {
                    let _ = signal.wait_for(|l| *l).await;
                    lease
                });
                leaders.push(leadership);
                if let Err(e) = starter.start(group, &mut tasks).await {
                    break Err(e);
                }
            }
            Some(r) = tasks.join_next() => {
                break match r {
                    Err(e) => Err(anyhow::Error::new(e).context("controller task panicked")),
                    Ok(()) => Err(anyhow::anyhow!("a controller stopped unexpectedly")),
                };
            }
            Some(lease) = lost.join_next() => {
                // As upstream: a replica that lost a lease stops acting at once, by exiting.
                let lease = lease.unwrap_or_default();
                break Err(anyhow::anyhow!("leader election lost (lease {lease})"));
            }
        }
    };
    tasks.abort_all();
    acquiring.abort_all();
    if outcome.is_ok() {
        for leadership in leaders {
            leadership.release().await;
        }
    }
    if let Some(server) = server {
        server.shutdown(secure_serving::SHUTDOWN_GRACE).await;
    }
    outcome
}

/// Controllers that start together, once their lease (if any) is held.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ControllerGroup {
    /// The Lease to hold first; `None` without leader election.
    lease: Option<String>,
    controllers: Vec<&'static str>,
}

/// Splits the enabled controllers by lease: one group under the main lease, and with
/// --enable-leader-migration the migrated ones under the migration lease.
fn controller_groups(
    opts: &Options,
    controllers: &[&'static str],
) -> anyhow::Result<Vec<ControllerGroup>> {
    if !opts.enable_leader_migration {
        if opts.leader_migration_config.is_some() {
            tracing::warn!(
                "--leader-migration-config has no effect without --enable-leader-migration"
            );
        }
        return Ok(vec![ControllerGroup {
            lease: opts
                .leader_elect
                .then(|| opts.leader_elect_resource_name.clone()),
            controllers: controllers.to_vec(),
        }]);
    }
    if !opts.leader_elect {
        bail!("--enable-leader-migration needs leader election: drop --leader-elect=false");
    }
    let config = match &opts.leader_migration_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("--leader-migration-config {}: cannot read", path.display())
            })?;
            migration::parse(&text)
                .map_err(|e| anyhow::anyhow!("--leader-migration-config {}: {e}", path.display()))?
        }
        None => migration::default_config(),
    };
    if config.leader_name == opts.leader_elect_resource_name {
        bail!(
            "leader migration: leaderName {:?} must differ from --leader-elect-resource-name",
            config.leader_name
        );
    }
    let assignment = migration::assign(controllers, &config);
    for name in &assignment.unknown {
        tracing::warn!(controller = %name, "leader migration lists a controller this cloud-controller-manager does not have");
    }
    for name in &assignment.elsewhere {
        tracing::info!(
            controller = name,
            "leader migration assigns this controller to another component: not started"
        );
    }
    tracing::info!(
        lease = %config.leader_name,
        migrated = ?assignment.migrated,
        main = ?assignment.main,
        "leader migration enabled"
    );
    Ok(vec![
        ControllerGroup {
            lease: Some(opts.leader_elect_resource_name.clone()),
            controllers: assignment.main,
        },
        ControllerGroup {
            lease: Some(config.leader_name),
            controllers: assignment.migrated,
        },
    ])
}

/// What starting a group's controllers needs.
struct GroupStarter<'a> {
    opts: &'a Options,
    network: &'a PodNetwork,
    cloud: &'a AwsCloud,
    client: &'a kube::Client,
    clients: &'a ControllerClients,
    readiness: &'a stratus_serving::Readiness,
}

impl GroupStarter<'_> {
    /// Starts the group's controllers into `tasks`, on a Node watch of their own.
    async fn start(
        &self,
        group: &ControllerGroup,
        tasks: &mut tokio::task::JoinSet<()>,
    ) -> anyhow::Result<()> {
        if group.controllers.is_empty() {
            tracing::info!(lease = ?group.lease, "no controllers run under this lease");
            return Ok(());
        }
        let opts = self.opts;
        let cloud = self.cloud;
        let instances = cloud
            .instances_v2()
            .context("provider has no instances support")?;
        let first = !self.readiness.has_conditions();
        let mut informer = NodeInformer::new(self.client.clone());
        let sync_name = match &group.lease {
            Some(lease) if !first => format!("node-informer-sync-{lease}"),
            _ => "node-informer-sync".to_string(),
        };
        secure_serving::track_informer(self.readiness, &sync_name, "Node", informer.health());
        if first {
            secure_serving::track_instance_cache(self.readiness, cloud.instance_cache().clone());
        }
        for name in &group.controllers {
            let client = self.clients.client_for(name).await?;
            match *name {
                "cloud-node" => {
                    let cfg = node::NodeControllerConfig {
                        concurrency: opts.concurrent_node_syncs,
                        status_update_frequency: opts.node_status_update_frequency,
                        ..node::NodeControllerConfig::default()
                    };
                    let events = informer.take_events().context("node events taken twice")?;
                    tasks.spawn(node::run(
                        client,
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
                        client,
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
                    let health = WatchHealth::default();
                    secure_serving::track_informer(
                        self.readiness,
                        "service-informer-sync",
                        "Service",
                        health.clone(),
                    );
                    tasks.spawn(service::run(client, informer.store(), lb, cfg, health));
                }
                "route" => {
                    if !opts.configure_cloud_routes {
                        tracing::info!(
                            "--configure-cloud-routes=false: the route controller is not started"
                        );
                        continue;
                    }
                    if self.network.cluster_cidrs.is_empty() {
                        tracing::warn!("--configure-cloud-routes is true but --cluster-cidr is not set: the route controller is not started (pass --cluster-cidr, or --configure-cloud-routes=false to silence this)");
                        continue;
                    }
                    let Some(routes) = cloud.routes() else {
                        tracing::warn!("--configure-cloud-routes is true but the cloud config names neither RouteTableID nor a cluster ID: the route controller is not started");
                        continue;
                    };
                    let cfg = route::RouteControllerConfig {
                        cluster_cidrs: self.network.cluster_cidrs.clone(),
                        reconcile_period: opts.route_reconciliation_period,
                        ..route::RouteControllerConfig::default()
                    };
                    tasks.spawn(route::run(
                        client,
                        informer.store(),
                        informer.subscribe(),
                        routes,
                        cfg,
                    ));
                }
                "node-ipam" => {
                    let Some(ranges) = self.network.allocate.clone() else {
                        continue;
                    };
                    tasks.spawn(node_ipam::run(
                        client,
                        informer.store(),
                        informer.subscribe(),
                        node_ipam::NodeIpamConfig::new(ranges),
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
        if let Some(watch) = informer.unclaimed_watch() {
            tasks.spawn(watch);
        }
        tracing::info!(cluster = %opts.cluster_name, region = cloud.region(), lease = ?group.lease, "cloud-controller-manager running");
        Ok(())
    }
}

/// This process's candidate identity, the same for every lease it competes for.
static IDENTITY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The election settings from the upstream flags; the identity is the host name plus a random
/// suffix, as upstream.
fn election_config(opts: &Options, lease_name: &str) -> ElectionConfig {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "cloud-controller-manager".into());
    ElectionConfig {
        lease_name: lease_name.to_string(),
        namespace: opts.leader_elect_resource_namespace.clone(),
        identity: IDENTITY
            .get_or_init(|| format!("{host}_{:016x}", rand::random::<u64>()))
            .clone(),
        lease_duration: opts.leader_elect_lease_duration,
        renew_deadline: opts.leader_elect_renew_deadline,
        retry_period: opts.leader_elect_retry_period,
    }
}

async fn kube_config(opts: &Options) -> anyhow::Result<kube::Config> {
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
    Ok(config)
}
