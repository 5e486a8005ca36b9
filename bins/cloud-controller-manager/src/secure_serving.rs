//! Secure serving wired into the CCM: token and access reviews through the CCM's own client
//! unless --authentication-kubeconfig / --authorization-kubeconfig name others, and readiness
//! once the node informer(s) and the AWS instance cache of the leading controllers have synced.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use prometheus_client::registry::Registry;
use stratus_aws::instance_cache::InstanceCache;
use stratus_controllers::informer::{wait_until_listed, LISTED_POLL};
use stratus_serving::{Readiness, ReadyFlag, ReviewClients, SecureServer};

use crate::options::Options;

/// How long in-flight HTTPS requests may take to finish at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Starts the HTTPS server unless `--secure-port=0`.
pub async fn start(
    opts: &Options,
    own: &kube::Client,
    registry: Arc<Registry>,
    readiness: Readiness,
) -> anyhow::Result<Option<SecureServer>> {
    let Some(config) = opts.serving() else {
        tracing::info!("--secure-port=0: not serving HTTPS");
        return Ok(None);
    };
    if opts.authentication_skip_lookup {
        tracing::info!("--authentication-skip-lookup has no effect: client certificates and front-proxy headers are never trusted, so nothing is looked up");
    }
    let clients = ReviewClients {
        authentication: review_client(
            opts.authentication_kubeconfig.as_deref(),
            "--authentication-kubeconfig",
            own,
        )
        .await?,
        authorization: review_client(
            opts.authorization_kubeconfig.as_deref(),
            "--authorization-kubeconfig",
            own,
        )
        .await?,
    };
    SecureServer::start(config, clients, registry, readiness)
        .await
        .map(Some)
}

async fn review_client(
    path: Option<&Path>,
    flag: &str,
    own: &kube::Client,
) -> anyhow::Result<kube::Client> {
    let Some(path) = path else {
        return Ok(own.clone());
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("{flag} {}: cannot read", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .with_context(|| format!("{flag} {}: invalid", path.display()))?;
    kube::Client::try_from(config).with_context(|| format!("{flag}: cannot build the client"))
}

/// Adds readiness condition `name`, met once the node informer's store has its first list.
/// Conditions are added when a controller group starts leading: a standby replica has nothing to
/// sync and is ready.
pub fn track_node_informer(readiness: &Readiness, name: &str, nodes: Store<Node>) {
    let flag: ReadyFlag = readiness.add(name, "the node informer has not listed Nodes yet");
    tokio::spawn(async move {
        if wait_until_listed(&nodes, LISTED_POLL).await {
            flag.set();
        }
    });
}

/// Adds readiness condition `instance-cache-sync`, met once the AWS instance cache has completed
/// its first listing (waiting starts the listing).
pub fn track_instance_cache(readiness: &Readiness, instances: Arc<InstanceCache>) {
    let flag = readiness.add(
        "instance-cache-sync",
        "the AWS instance cache has not completed its first listing",
    );
    tokio::spawn(async move {
        instances.wait_until_synced().await;
        flag.set();
    });
}
