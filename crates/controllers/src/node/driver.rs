//! kube-rs driver of the cloud-node controller: watch Nodes, ask the cloud, apply the plan.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::Store;
use kube::Client;
use stratus_cloud::{CloudError, InstancesV2};
use stratus_kube_kit::EventPublisher;
use stratus_runtime::backoff::Backoff;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::plan::{desired_addresses, plan_address_update, plan_initialization, PlanError};
use crate::informer::NodeEvents;
use crate::metrics::ReconcileMetrics;
use crate::node_view::{has_taint, node_info, provider_id};
use crate::TAINT_UNINITIALIZED;

/// Field manager name of our patches.
const MANAGER: &str = "cloud-node-controller";

/// Settings of the cloud-node controller.
#[derive(Debug, Clone)]
pub struct NodeControllerConfig {
    /// `--concurrent-node-syncs`: nodes initialised at once.
    pub concurrency: u16,
    /// `--concurrent-node-status-updates`: initialised nodes whose addresses are refreshed at
    /// once (workers of their own, so a slow refresh never delays a joining node).
    pub status_concurrency: u16,
    /// `--node-status-update-frequency`: how often addresses are refreshed.
    pub status_update_frequency: Duration,
    /// Retry delays for a node that could not be initialised.
    pub backoff: Backoff,
    /// `--min-resync-period`: every node is synced again after [min, 2·min).
    pub min_resync: Duration,
}

impl Default for NodeControllerConfig {
    fn default() -> Self {
        Self {
            concurrency: 1,
            status_concurrency: 1,
            status_update_frequency: Duration::from_secs(300),
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(30)),
            min_resync: crate::resync::DEFAULT_MIN_RESYNC,
        }
    }
}

/// Why one reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    /// The cloud answered with an error.
    Cloud(#[from] CloudError),
    #[error(transparent)]
    /// The cloud's answer cannot initialise the node.
    Plan(#[from] PlanError),
    #[error("kubernetes API: {0}")]
    /// A Kubernetes write failed.
    Kube(#[from] kube::Error),
}

impl NodeError {
    fn category(&self) -> &'static str {
        match self {
            NodeError::Cloud(e) => e.category(),
            NodeError::Plan(e) => e.category(),
            NodeError::Kube(_) => "KubernetesAPI",
        }
    }
}

struct Ctx {
    nodes: Api<Node>,
    instances: Arc<dyn InstancesV2>,
    events: EventPublisher,
    config: NodeControllerConfig,
    metrics: ReconcileMetrics,
    failures: Mutex<HashMap<String, u32>>,
    /// Initialisations in flight (`--concurrent-node-syncs`).
    init_slots: Semaphore,
    /// Address refreshes in flight (`--concurrent-node-status-updates`).
    status_slots: Semaphore,
    /// resourceVersion of the half-initialised node our own status write produced, per node:
    /// its watch event must not start a second initialisation.
    own_intermediate: Mutex<HashMap<String, String>>,
}

/// Runs the controller, driving the shared Node watch, until the stream ends (it does not,
/// short of shutdown).
pub async fn run(
    client: Client,
    store: Store<Node>,
    events: NodeEvents,
    instances: Arc<dyn InstancesV2>,
    config: NodeControllerConfig,
    metrics: ReconcileMetrics,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let ctx = Arc::new(Ctx {
        nodes: nodes.clone(),
        instances,
        events: EventPublisher::new(client, MANAGER),
        config: config.clone(),
        metrics,
        failures: Mutex::new(HashMap::new()),
        init_slots: Semaphore::new(config.concurrency.max(1).into()),
        status_slots: Semaphore::new(config.status_concurrency.max(1).into()),
        own_intermediate: Mutex::new(HashMap::new()),
    });
    let workers = config
        .concurrency
        .max(1)
        .saturating_add(config.status_concurrency.max(1));
    Controller::for_stream(events, store)
        .with_config(Config::default().concurrency(workers))
        .reconcile_all_on(crate::resync::resync_ticks(config.min_resync))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, NodeError> {
    let started = Instant::now();
    let result = sync(node, &ctx).await;
    let failure = match &result {
        Err(e) => Some(e.category()),
        Ok(_) => None,
    };
    ctx.metrics.record(started, failure);
    result
}

async fn sync(node: Arc<Node>, ctx: &Ctx) -> Result<Action, NodeError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    {
        let mut own = ctx.own_intermediate.lock().expect("intermediate lock");
        if own.get(&name) == node.metadata.resource_version.as_ref() {
            return Ok(Action::requeue(ctx.config.status_update_frequency));
        }
        own.remove(&name);
    }
    let result = if has_taint(&node, TAINT_UNINITIALIZED) {
        let _slot = ctx.init_slots.acquire().await.expect("slots never close");
        initialise(&node, ctx).await
    } else if provider_id(&node).is_some() {
        let _slot = ctx.status_slots.acquire().await.expect("slots never close");
        refresh_addresses(&node, ctx).await
    } else {
        // A node that never belonged to the cloud: nothing to keep current.
        return Ok(Action::await_change());
    };
    match result {
        Ok(()) => {
            ctx.failures.lock().expect("failures lock").remove(&name);
            Ok(Action::requeue(ctx.config.status_update_frequency))
        }
        // Not a failure: the cloud is still getting the instance ready. Look again later,
        // without a Warning and without holding a worker.
        Err(NodeError::Cloud(CloudError::Pending { what, retry_after })) => {
            tracing::debug!(node = %name, what, retry_in_s = retry_after.as_secs_f32(), "instance not ready yet");
            Ok(Action::requeue(retry_after))
        }
        Err(e) => {
            if !matches!(e, NodeError::Kube(kube::Error::Api(ref s)) if s.code == 409) {
                let initialising = has_taint(&node, TAINT_UNINITIALIZED);
                let reason = if initialising {
                    format!("FailedToInitialize{}", e.category())
                } else {
                    format!("FailedToUpdateAddresses{}", e.category())
                };
                ctx.events
                    .publish(
                        node.as_ref(),
                        true,
                        &reason,
                        if initialising {
                            "InitializeNode"
                        } else {
                            "UpdateNodeAddresses"
                        },
                        e.to_string(),
                    )
                    .await;
            }
            Err(e)
        }
    }
}

async fn initialise(node: &Node, ctx: &Ctx) -> Result<(), NodeError> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let meta = ctx.instances.instance_metadata(&node_info(node)).await?;
    let same = |existing: &str| ctx.instances.is_same_instance(existing, &meta.provider_id);
    let mut plan = plan_initialization(node, &meta, same)?;
    let pp = PatchParams::default();
    if let Some(status) = plan.status_patch {
        let updated = ctx
            .nodes
            .patch_status(name, &pp, &Patch::Merge(&status))
            .await?;
        // The status write moved the resourceVersion; guard the node patch with the new one.
        if let Some(rv) = &updated.metadata.resource_version {
            ctx.own_intermediate
                .lock()
                .expect("intermediate lock")
                .insert(name.to_string(), rv.clone());
        }
        plan.node_patch["metadata"]["resourceVersion"] = updated.metadata.resource_version.into();
    }
    ctx.nodes
        .patch(name, &pp, &Patch::Merge(&plan.node_patch))
        .await?;
    tracing::info!(node = name, provider_id = %meta.provider_id, "node initialized");
    Ok(())
}

async fn refresh_addresses(node: &Node, ctx: &Ctx) -> Result<(), NodeError> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let meta = match ctx.instances.instance_metadata(&node_info(node)).await {
        Ok(m) => m,
        // A gone instance is the lifecycle controller's business; a pending one is looked at
        // again at the next refresh.
        Err(CloudError::InstanceNotFound(_) | CloudError::Pending { .. }) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let desired = desired_addresses(node, &meta.node_addresses)?;
    if let Some(patch) = plan_address_update(node, &desired) {
        ctx.nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(node = name, "node addresses updated");
    }
    Ok(())
}

/// The longest wait between retries after throttling or an outage.
const TRANSIENT_MAX_BACKOFF: Duration = Duration::from_secs(15);

fn error_policy(node: Arc<Node>, error: &NodeError, ctx: Arc<Ctx>) -> Action {
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut failures = ctx.failures.lock().expect("failures lock");
    let n = failures.entry(name.clone()).or_insert(0);
    *n += 1;
    // After throttling or an outage the node is retried within 15 s of the cloud coming back.
    let transient = matches!(
        error,
        NodeError::Cloud(CloudError::Throttled { .. } | CloudError::Unavailable { .. })
    );
    let backoff = if transient {
        ctx.config.backoff.capped(TRANSIENT_MAX_BACKOFF)
    } else {
        ctx.config.backoff
    };
    let delay = backoff.delay(*n);
    tracing::warn!(node = %name, error = %error, attempt = *n, retry_in_s = delay.as_secs_f32(), "node sync failed");
    Action::requeue(delay)
}
