//! kube-rs driver of the node-lifecycle controller: a periodic pass over the watched Nodes, one
//! batched look at the instances of those that are not Ready, then each one's action.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::Store;
use kube::Client;
use stratus_cloud::{CloudError, InstancesV2, NodeInfo};
use stratus_kube_kit::{wait_for_store, EventPublisher};
use tokio::time::Instant;

use super::plan::{plan_lifecycle, plan_pass, taint_patch, LifecycleAction};
use crate::metrics::ReconcileMetrics;
use crate::node_view::node_info;

/// Settings of the node-lifecycle controller.
#[derive(Debug, Clone)]
pub struct LifecycleConfig {
    /// `--node-monitor-period`.
    pub monitor_period: Duration,
    /// Nodes checked at once.
    pub concurrency: usize,
    /// The provider-ID scheme of this cloud (`aws`, `openstack`, `dvp`): nodes with another
    /// one are left alone; `None` manages every node with a providerID.
    pub provider_scheme: Option<String>,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            monitor_period: Duration::from_secs(5),
            concurrency: 8,
            provider_scheme: None,
        }
    }
}

/// Runs the controller forever over the shared Node cache.
pub async fn run(
    client: Client,
    store: Store<Node>,
    instances: Arc<dyn InstancesV2>,
    config: LifecycleConfig,
    metrics: ReconcileMetrics,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let events = EventPublisher::new(client, "cloud-node-lifecycle-controller");
    if !wait_for_store(&store).await {
        tracing::error!("node watch ended before its first list");
        return;
    }
    let mut tick = tokio::time::interval(config.monitor_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let pass = plan_pass(store.state(), config.provider_scheme.as_deref());
        for node in pass.untaint {
            // A Ready node runs: its leftover shutdown taint goes without asking the cloud.
            let started = Instant::now();
            let failure = act(
                &node,
                &LifecycleAction::RemoveShutdownTaint,
                &nodes,
                &events,
            )
            .await
            .err();
            metrics.record(started, failure);
        }
        if pass.check.is_empty() {
            continue;
        }
        tracing::trace!(nodes = pass.check.len(), "node lifecycle pass");
        // One batched look at every NotReady node's instance, then the per-node answers come
        // from what it saw.
        let infos: Vec<NodeInfo> = pass.check.iter().map(|n| node_info(n)).collect();
        let started = Instant::now();
        if let Err(e) = instances.refresh_instances(&infos).await {
            // An unreachable cloud never means "instance gone": act on none of them this pass.
            tracing::warn!(nodes = infos.len(), error = %e, "cannot look at the instances of the nodes that are not Ready");
            for _ in &pass.check {
                metrics.record(started, Some(e.category()));
            }
            continue;
        }
        drop(infos);
        let failures = futures::stream::iter(pass.check)
            .map(|node| check_node(node, &nodes, instances.as_ref(), &events, &metrics))
            .buffer_unordered(config.concurrency)
            .filter(|ok| futures::future::ready(!ok))
            .count()
            .await;
        if failures > 0 {
            tracing::warn!(failures, "node lifecycle pass could not check every node");
        }
    }
}

/// Checks one node and acts; returns whether the check succeeded.
async fn check_node(
    node: Arc<Node>,
    nodes: &Api<Node>,
    instances: &dyn InstancesV2,
    events: &EventPublisher,
    metrics: &ReconcileMetrics,
) -> bool {
    let started = Instant::now();
    let failure = check(node, nodes, instances, events).await.err();
    metrics.record(started, failure);
    failure.is_none()
}

/// One node's check; the error is the failure's category.
async fn check(
    node: Arc<Node>,
    nodes: &Api<Node>,
    instances: &dyn InstancesV2,
    events: &EventPublisher,
) -> Result<(), &'static str> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let info = node_info(&node);
    let observed: Result<(bool, bool), CloudError> = async {
        let exists = instances.instance_exists(&info).await?;
        let shutdown = exists && instances.instance_shutdown(&info).await?;
        Ok((exists, shutdown))
    }
    .await;
    let (exists, shutdown) = match observed {
        Ok(o) => o,
        Err(e) => {
            // An unreachable cloud never means "instance gone": do nothing this pass.
            tracing::debug!(node = %name, error = %e, "cannot check instance");
            return Err(e.category());
        }
    };
    let action = plan_lifecycle(&node, exists, shutdown);
    act(&node, &action, nodes, events).await
}

/// Carries out one action on a node; the error is the failure's category.
async fn act(
    node: &Node,
    action: &LifecycleAction,
    nodes: &Api<Node>,
    events: &EventPublisher,
) -> Result<(), &'static str> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let result = match action {
        LifecycleAction::Nothing => return Ok(()),
        LifecycleAction::Delete => {
            events
                .publish(node, false, "DeletingNode", "DeleteNode", format!("Deleting node {name} because its instance does not exist in the cloud provider"))
                .await;
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: node.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            nodes.delete(&name, &dp).await.map(|_| ())
        }
        taint => {
            let patch = taint_patch(node, taint).expect("taint action has a patch");
            nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        }
    };
    match result {
        Ok(()) => {
            tracing::info!(node = %name, action = ?action, "node lifecycle action done");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => {
            tracing::warn!(node = %name, action = ?action, error = %e, "node lifecycle action failed");
            Err("KubernetesAPI")
        }
    }
}
