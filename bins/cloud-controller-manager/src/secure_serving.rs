//! Secure serving wired into the CCM: token and access reviews through the CCM's own client
//! unless --authentication-kubeconfig / --authorization-kubeconfig name others, and readiness
//! once the node informer and the AWS instance cache have synced.

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

/// The readiness conditions of the caches; added before serving starts, so `/readyz` never
/// answers ready before they exist.
pub struct CacheSync {
    nodes: ReadyFlag,
    instances: ReadyFlag,
}

impl CacheSync {
    pub fn new(readiness: &Readiness) -> Self {
        Self {
            nodes: readiness.add(
                "node-informer-sync",
                "the node informer has not listed Nodes yet",
            ),
            instances: readiness.add(
                "instance-cache-sync",
                "the AWS instance cache has not completed its first listing",
            ),
        }
    }

    /// Sets each condition when its cache has synced (in background tasks).
    pub fn track(self, nodes: Store<Node>, instances: Arc<InstanceCache>) {
        let flag = self.nodes;
        tokio::spawn(async move {
            if wait_until_listed(&nodes, LISTED_POLL).await {
                flag.set();
            }
        });
        let flag = self.instances;
        tokio::spawn(async move {
            instances.wait_until_synced().await;
            flag.set();
        });
    }
}
