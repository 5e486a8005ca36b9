//! Wiring: provider (config checked first) → Kubernetes clients → controller groups, each
//! started once its lease is held (main lease, and the migration lease with
//! --enable-leader-migration), until a signal or a lost lease.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;
use stratus_cloud::{ConfiguredProvider, Providers};
use stratus_controllers::metrics::ControllerMetrics;
use stratus_election::{ElectionMetrics, Leadership};
use stratus_runtime::startup::Problems;
use stratus_serving::{Readiness, ReviewClients, SecureServer};
use tokio::task::JoinSet;

use crate::controller_clients::ControllerClients;
use crate::controllers::{enabled_controllers, NODE_IPAM};
use crate::groups::{controller_groups, ControllerGroup};
use crate::options::Options;
use crate::pod_network::PodNetwork;
use crate::starter::GroupStarter;

/// How long in-flight HTTPS requests may take to finish at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The component name, for identities and certificates.
const COMPONENT: &str = "cloud-controller-manager";

/// What [`check`] found usable.
struct Checked {
    configured: Box<dyn ConfiguredProvider>,
    groups: Vec<ControllerGroup>,
    kube_config: kube::Config,
    client: kube::Client,
    /// The token and access review clients; `None` when not serving.
    reviews: Option<ReviewClients>,
}

/// Everything the process needs before it serves or calls a cloud — the controllers, the
/// provider's config and the settings it resolves from its environment (e.g. the AWS region),
/// leader election and migration, the kubeconfigs, the serving certificate — checked at once:
/// every problem is named in one error.
async fn check(
    providers: Providers<'_>,
    opts: &Options,
    network: &PodNetwork,
) -> anyhow::Result<Checked> {
    let mut problems = Problems::new();
    let controllers = problems.take(enabled_controllers(&opts.controllers));
    let provider = problems.take(providers.find(&opts.cloud_provider));
    if opts.election.leader_elect {
        problems.take(
            opts.election
                .config(&opts.lease_name(), COMPONENT)
                .validate(),
        );
    }
    let mut configured =
        provider.and_then(|p| problems.take(p.configure(&opts.provider_options())));
    if let Some(configured) = configured.as_mut() {
        for missing in configured.missing().await {
            problems.push(missing);
        }
    }
    let controllers = controllers.map(|mut controllers| {
        if network.allocate.is_some() {
            controllers.push(NODE_IPAM);
        }
        controllers
    });
    let groups = controllers
        .as_ref()
        .and_then(|c| problems.take(controller_groups(opts, c).map_err(|e| format!("{e:#}"))));
    let kube_config = problems.take(opts.client.config().await);
    let client = kube_config
        .as_ref()
        .and_then(|c| problems.take(stratus_kube_kit::client::client(c.clone())))
        .map(|c| opts.api.limit(c));
    problems.take(opts.webhooks.enabled());
    problems.take(crate::options::check_gated_flags(opts));
    let mut reviews = None;
    if let Some(config) = opts.serving_config() {
        problems.take(stratus_serving::tls::check(&config.tls).map_err(|e| format!("{e:#}")));
        match &client {
            Some(client) => reviews = problems.take(opts.serving.review_clients(client).await),
            None => {
                for problem in opts.serving.review_kubeconfig_problems().await {
                    problems.push(problem);
                }
            }
        }
    }
    problems.finish()?;
    let (Some(configured), Some(groups), Some(kube_config), Some(client)) =
        (configured, groups, kube_config, client)
    else {
        anyhow::bail!("the startup check lost a part it found");
    };
    Ok(Checked {
        configured,
        groups,
        kube_config,
        client,
        reviews,
    })
}

/// Runs the cloud-controller-manager with `providers` until SIGTERM/SIGINT.
pub async fn run(
    providers: Providers<'_>,
    opts: Options,
    network: PodNetwork,
) -> anyhow::Result<()> {
    let Checked {
        configured,
        groups,
        kube_config,
        client,
        reviews,
    } = check(providers, &opts, &network).await?;
    let clients = if opts.use_service_account_credentials {
        ControllerClients::per_account(&kube_config, client.clone(), opts.api.clone())
    } else {
        ControllerClients::shared(client.clone())
    };
    let mut registry = Registry::default();
    let controller_metrics = ControllerMetrics::register(&mut registry);
    let election_metrics = ElectionMetrics::register(&mut registry);
    let cloud = configured.start(&mut registry).await?;
    let readiness = Readiness::default();
    let server = match (opts.serving_config(), reviews) {
        (Some(config), Some(reviews)) => {
            Some(SecureServer::start(config, reviews, Arc::new(registry), readiness.clone()).await?)
        }
        _ => {
            tracing::info!("--secure-port=0: not serving HTTPS");
            None
        }
    };
    let starter = GroupStarter {
        opts: &opts,
        network: &network,
        cloud: &cloud,
        client: &client,
        clients: &clients,
        readiness: &readiness,
        metrics: &controller_metrics,
    };

    // Each group waits for its lease (if any), then starts its controllers. Standby replicas
    // start nothing: no watch, no cloud call.
    let mut acquiring = JoinSet::new();
    let mut unled = Vec::new();
    for (index, group) in groups.iter().enumerate() {
        match &group.lease {
            Some(lease) => {
                let election = opts.election.config(lease, COMPONENT);
                let status = election_metrics.lease(lease);
                let client = client.clone();
                acquiring.spawn(async move {
                    (index, Leadership::acquire(client, election, status).await)
                });
            }
            None => unled.push(index),
        }
    }
    let mut tasks = JoinSet::new();
    for index in unled {
        starter.start(&groups[index], &mut tasks).await?;
    }
    let mut leaders: Vec<Leadership> = Vec::new();
    let mut lost = JoinSet::new();
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
        server.shutdown(SHUTDOWN_GRACE).await;
    }
    outcome
}
