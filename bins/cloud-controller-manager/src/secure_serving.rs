//! Secure serving wired into the CCM: token and access reviews through the CCM's own client
//! unless --authentication-kubeconfig / --authorization-kubeconfig name others, and readiness
//! while the informers of the leading controllers are listed and watching (a broken watch makes
//! the replica unready until it resumes) and once the AWS instance cache has synced.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use prometheus_client::registry::Registry;
use stratus_aws::instance_cache::InstanceCache;
use stratus_controllers::watch_health::{WatchHealth, WatchState};
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

/// Adds readiness condition `name`, met while the informer of `kind` (e.g. "Node") has listed
/// and its watch is healthy: it fails again, with the reason, while the watch is broken.
pub fn track_informer(readiness: &Readiness, name: &str, kind: &'static str, health: WatchHealth) {
    let flag: ReadyFlag = readiness.add(name, &not_listed(kind));
    let mut states = health.subscribe();
    tokio::spawn(async move {
        loop {
            let state = states.borrow_and_update().clone();
            match informer_readiness(kind, &state) {
                None => flag.set(),
                Some(reason) => flag.unset(&reason),
            }
            if states.changed().await.is_err() {
                return;
            }
        }
    });
}

fn not_listed(kind: &str) -> String {
    format!(
        "the {} informer has not listed {kind}s yet",
        kind.to_lowercase()
    )
}

/// Why an informer in `state` makes the replica unready; `None` when it does not.
fn informer_readiness(kind: &str, state: &WatchState) -> Option<String> {
    match &state.failure {
        Some(reason) => Some(format!(
            "the {kind} watch is failing, the cache may be stale: {reason}"
        )),
        None if !state.listed => Some(not_listed(kind)),
        None => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_informer_is_ready_while_listed_and_watching() {
        let fresh = WatchState::default();
        assert_eq!(
            informer_readiness("Node", &fresh).as_deref(),
            Some("the node informer has not listed Nodes yet")
        );
        let listed = WatchState {
            listed: true,
            failure: None,
        };
        assert_eq!(informer_readiness("Node", &listed), None);
        let broken = WatchState {
            listed: true,
            failure: Some("connection refused".into()),
        };
        assert_eq!(
            informer_readiness("Service", &broken).as_deref(),
            Some("the Service watch is failing, the cache may be stale: connection refused")
        );
    }
}
