//! Wiring: provider (config checked first) → Kubernetes clients → controller groups, each
//! started once its lease is held (main lease, and the migration lease with
//! --enable-leader-migration), until a signal or a lost lease.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;
use stratus_cloud::Providers;
use stratus_controllers::metrics::ControllerMetrics;
use stratus_election::{ElectionMetrics, Leadership};
use stratus_serving::{Readiness, SecureServer};
use tokio::task::JoinSet;

use crate::controller_clients::ControllerClients;
use crate::controllers::{enabled_controllers, NODE_IPAM};
use crate::groups::controller_groups;
use crate::options::{Options, SECURE_PORT};
use crate::pod_network::PodNetwork;
use crate::starter::GroupStarter;

/// How long in-flight HTTPS requests may take to finish at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The component name, for identities and certificates.
const COMPONENT: &str = "cloud-controller-manager";

/// Runs the cloud-controller-manager with `providers` until SIGTERM/SIGINT.
pub async fn run(
    providers: Providers<'_>,
    opts: Options,
    network: PodNetwork,
) -> anyhow::Result<()> {
    let mut controllers = enabled_controllers(&opts.controllers).map_err(anyhow::Error::msg)?;
    let provider = providers.find(&opts.cloud_provider)?;
    if opts.election.leader_elect {
        opts.election
            .config(&opts.lease_name(), COMPONENT)
            .validate()?;
    }
    let configured = provider.configure(&opts.provider_options())?;
    if network.allocate.is_some() {
        controllers.push(NODE_IPAM);
    }
    let groups = controller_groups(&opts, &controllers)?;
    let kube_config = opts.client.config().await?;
    let client = stratus_kube_kit::client::client(kube_config.clone())?;
    let clients = if opts.use_service_account_credentials {
        ControllerClients::per_account(&kube_config, client.clone())
    } else {
        ControllerClients::shared(client.clone())
    };
    let mut registry = Registry::default();
    let controller_metrics = ControllerMetrics::register(&mut registry);
    let election_metrics = ElectionMetrics::register(&mut registry);
    let cloud = configured.start(&mut registry).await?;
    let readiness = Readiness::default();
    let server = match opts.serving.serving(SECURE_PORT) {
        None => {
            tracing::info!("--secure-port=0: not serving HTTPS");
            None
        }
        Some(config) => {
            let reviews = opts.serving.review_clients(&client).await?;
            Some(SecureServer::start(config, reviews, Arc::new(registry), readiness.clone()).await?)
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
