//! Starting one group's controllers, as the start plan decides, on a Node watch of their own.

use std::sync::Arc;

use anyhow::Context;
use stratus_cloud::Cloud;
use stratus_controllers::informer::NodeInformer;
use stratus_controllers::metrics::ControllerMetrics;
use stratus_controllers::{node, node_ipam, node_lifecycle, route, service, tagging};
use stratus_kube_kit::WatchHealth;
use stratus_serving::Readiness;
use tokio::task::JoinSet;

use crate::controller_clients::ControllerClients;
use crate::controllers::{CLOUD_NODE, CLOUD_NODE_LIFECYCLE, NODE_IPAM, ROUTE, SERVICE, TAGGING};
use crate::groups::ControllerGroup;
use crate::options::Options;
use crate::pod_network::PodNetwork;
use crate::readiness;
use crate::start_plan::{plan_start, CapabilitySet, Start, StartFlags};

/// What starting a group's controllers needs.
pub struct GroupStarter<'a> {
    /// The flags.
    pub opts: &'a Options,
    /// The pod-network flags, checked.
    pub network: &'a PodNetwork,
    /// The started provider.
    pub cloud: &'a Arc<dyn Cloud>,
    /// The CCM's own client (watches).
    pub client: &'a kube::Client,
    /// The clients controllers write with.
    pub clients: &'a ControllerClients,
    /// Readiness conditions.
    pub readiness: &'a Readiness,
    /// Controller metrics.
    pub metrics: &'a Arc<ControllerMetrics>,
}

/// What the provider can do, as the start plan reads it.
pub fn capabilities(cloud: &dyn Cloud) -> CapabilitySet {
    CapabilitySet {
        instances: cloud.instances().map(|_| ()).map_err(|e| e.0),
        load_balancer: cloud.load_balancer().map(|_| ()).map_err(|e| e.0),
        routes: cloud.routes().map(|_| ()).map_err(|e| e.0),
        node_tags: cloud.node_tags().map(|_| ()).map_err(|e| e.0),
    }
}

impl GroupStarter<'_> {
    /// Starts the group's controllers into `tasks`.
    pub async fn start(
        &self,
        group: &ControllerGroup,
        tasks: &mut JoinSet<()>,
    ) -> anyhow::Result<()> {
        if group.controllers.is_empty() {
            tracing::info!(lease = ?group.lease, "no controllers run under this lease");
            return Ok(());
        }
        let opts = self.opts;
        let flags = StartFlags {
            configure_cloud_routes: opts.configure_cloud_routes,
            cluster_cidr_set: !self.network.cluster_cidrs.is_empty(),
        };
        let plan = plan_start(
            &group.controllers,
            flags,
            &capabilities(self.cloud.as_ref()),
        );
        let first = !self.readiness.has_conditions();
        let mut informer = NodeInformer::new(self.client.clone());
        let sync_name = match &group.lease {
            Some(lease) if !first => format!("node-informer-sync-{lease}"),
            _ => "node-informer-sync".to_string(),
        };
        readiness::track_informer(self.readiness, &sync_name, "Node", informer.health());
        if first {
            readiness::track_gates(self.readiness, self.cloud.readiness_gates());
        }
        let mut started = 0usize;
        for (name, decision) in plan {
            if let Start::Skip { reason, warn } = decision {
                if warn {
                    tracing::warn!(controller = name, "{reason}");
                } else {
                    tracing::info!(controller = name, "{reason}");
                }
                continue;
            }
            // --controller-start-interval: a pause between one controller's start and the next.
            if started > 0 && !opts.controller_start_interval.is_zero() {
                tokio::time::sleep(opts.controller_start_interval).await;
            }
            started += 1;
            let client = self.clients.client_for(name).await?;
            let metrics = self.metrics.controller(name);
            match name {
                CLOUD_NODE => {
                    let cfg = node::NodeControllerConfig {
                        concurrency: opts.concurrent_node_syncs,
                        status_concurrency: opts.concurrent_node_status_updates,
                        min_resync: opts.min_resync_period,
                        status_update_frequency: opts.node_status_update_frequency,
                        ..node::NodeControllerConfig::default()
                    };
                    let events = informer.take_events().context("node events taken twice")?;
                    let instances = self.cloud.instances().map_err(anyhow::Error::msg)?;
                    tasks.spawn(node::run(
                        client,
                        informer.store(),
                        events,
                        instances,
                        cfg,
                        metrics,
                    ));
                }
                CLOUD_NODE_LIFECYCLE => {
                    let cfg = node_lifecycle::LifecycleConfig {
                        monitor_period: opts.node_monitor_period,
                        // Every provider's IDs are `<its name>://…`.
                        provider_scheme: Some(opts.cloud_provider.clone()),
                        ..node_lifecycle::LifecycleConfig::default()
                    };
                    let instances = self.cloud.instances().map_err(anyhow::Error::msg)?;
                    tasks.spawn(node_lifecycle::run(
                        client,
                        informer.store(),
                        instances,
                        cfg,
                        metrics,
                    ));
                }
                SERVICE => {
                    let lb = self.cloud.load_balancer().map_err(anyhow::Error::msg)?;
                    let cfg = service::ServiceControllerConfig {
                        cluster_name: opts.cluster_name.clone(),
                        concurrency: opts.concurrent_service_syncs,
                        reaper_period: opts.load_balancer_reaper_period,
                        node_quiet: opts.node_churn_quiet_period,
                        min_resync: opts.min_resync_period,
                        ..service::ServiceControllerConfig::default()
                    };
                    let health = WatchHealth::default();
                    readiness::track_informer(
                        self.readiness,
                        "service-informer-sync",
                        "Service",
                        health.clone(),
                    );
                    tasks.spawn(service::run(
                        client,
                        informer.store(),
                        lb,
                        cfg,
                        health,
                        metrics,
                    ));
                }
                ROUTE => {
                    let routes = self.cloud.routes().map_err(anyhow::Error::msg)?;
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
                        metrics,
                    ));
                }
                NODE_IPAM => {
                    let ranges = self
                        .network
                        .allocate
                        .clone()
                        .context("node-ipam runs only with --allocate-node-cidrs")?;
                    tasks.spawn(node_ipam::run(
                        client,
                        informer.store(),
                        informer.subscribe(),
                        node_ipam::NodeIpamConfig::new(ranges),
                        metrics,
                    ));
                }
                TAGGING => {
                    let tags = self.cloud.node_tags().map_err(anyhow::Error::msg)?;
                    let cfg = tagging_config(opts, tags.as_ref())?;
                    tasks.spawn(tagging::run(
                        client,
                        informer.store(),
                        informer.subscribe(),
                        tags,
                        cfg,
                        metrics,
                    ));
                }
                other => anyhow::bail!("the start plan let an unknown controller through: {other}"),
            }
            tracing::info!(controller = name, "controller started");
        }
        if let Some(watch) = informer.unclaimed_watch() {
            tasks.spawn(watch);
        }
        tracing::info!(cluster = %opts.cluster_name, cloud = %self.cloud.describe(), lease = ?group.lease, "cloud-controller-manager running");
        Ok(())
    }
}

/// The tagging controller's settings, the flags checked against what the cloud can tag.
fn tagging_config(
    opts: &Options,
    tags: &dyn stratus_cloud::NodeTags,
) -> anyhow::Result<tagging::TaggingConfig> {
    let args = &opts.tagging;
    let kinds = tags.resource_kinds();
    let mut problems: Vec<String> = args
        .resources
        .iter()
        .filter(|r| !kinds.contains(&r.as_str()))
        .map(|r| {
            format!(
                "--resources: {r:?} is not a supported resource (supported: {})",
                kinds.join(", ")
            )
        })
        .collect();
    let tag_set = args.tag_set();
    problems.extend(
        tags.check_tags(&tag_set)
            .into_iter()
            .map(|p| format!("--tags: {p}")),
    );
    if !problems.is_empty() {
        anyhow::bail!(
            "the tagging controller cannot start: {}",
            problems.join("; ")
        );
    }
    Ok(tagging::TaggingConfig {
        tags: tag_set,
        resources: args.resources.clone(),
        provider_scheme: Some(opts.cloud_provider.clone()),
        rate_limit: args.rate_limit,
        burst_limit: args.burst_limit,
        ..tagging::TaggingConfig::default()
    })
}
