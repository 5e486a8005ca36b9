//! kube-rs driver of the route controller: one reconciliation per period, and one soon after
//! each relevant Node change (bursts coalesced), over the shared Node store.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::Client;
use stratus_cloud::{Cidr, CloudError, RouteTarget, Routes};
use stratus_kube_kit::{wait_for_store, EventPublisher};
use tokio::time::Instant;

use super::plan::{
    condition_patch, fingerprint, is_routed, plan_routes, pod_cidrs, targets_to_prepare,
    ActionKind, NodeRoutes, RouteAction,
};
use crate::informer::NodeChanges;
use crate::metrics::ReconcileMetrics;
use crate::node_view::node_info;

/// Settings of the route controller.
#[derive(Debug, Clone)]
pub struct RouteControllerConfig {
    /// `--cluster-cidr`: routes are ours only inside these.
    pub cluster_cidrs: Vec<Cidr>,
    /// `--route-reconciliation-period`.
    pub reconcile_period: Duration,
    /// How long a Node change waits for more changes before reconciling (coalesces bursts).
    pub settle: Duration,
    /// Route writes (and target preparations) in flight at once.
    pub concurrency: usize,
}

impl Default for RouteControllerConfig {
    fn default() -> Self {
        Self {
            cluster_cidrs: Vec::new(),
            reconcile_period: Duration::from_secs(10),
            settle: Duration::from_millis(200),
            concurrency: 8,
        }
    }
}

/// Why a reconciliation did not finish cleanly.
#[derive(Debug, thiserror::Error)]
enum PassError {
    #[error("cannot list route tables: {0}")]
    List(CloudError),
    #[error("{0} route write(s) failed")]
    Writes(usize),
}

impl PassError {
    fn category(&self) -> &'static str {
        match self {
            PassError::List(e) => e.category(),
            PassError::Writes(_) => "RouteWriteFailed",
        }
    }
}

struct Ctx {
    nodes: Api<Node>,
    routes: Arc<dyn Routes>,
    events: EventPublisher,
    config: RouteControllerConfig,
    /// Problems already logged, so a persisting one is logged once.
    reported: BTreeSet<(String, String)>,
    /// The last failure Event published per node, so a persisting failure is published once.
    failure_events: HashMap<String, String>,
}

/// Runs the controller until the Node watch ends.
pub async fn run(
    client: Client,
    store: Store<Node>,
    mut changes: NodeChanges,
    routes: Arc<dyn Routes>,
    config: RouteControllerConfig,
    metrics: ReconcileMetrics,
) {
    let mut ctx = Ctx {
        nodes: Api::all(client.clone()),
        routes,
        events: EventPublisher::new(client, "route-controller"),
        config,
        reported: BTreeSet::new(),
        failure_events: HashMap::new(),
    };
    if !wait_for_store(&store).await {
        tracing::error!("node watch ended before its first list");
        return;
    }
    // Inputs of the last reconciliation: a change that leaves them as they were (a heartbeat, a
    // label, our own condition write) waits for the period, and so does the retry of a failure.
    let mut last_inputs: Option<u64> = None;
    let mut next_pass = Instant::now();
    loop {
        let by_change = tokio::select! {
            _ = tokio::time::sleep_until(next_pass) => false,
            changed = changes.changed() => {
                if changed.is_err() {
                    tracing::error!("node watch ended; route controller stops");
                    return;
                }
                true
            }
        };
        if by_change {
            tokio::time::sleep(ctx.config.settle).await;
            changes.borrow_and_update();
        }
        let nodes = store.state();
        let inputs: Vec<NodeRoutes> = nodes
            .iter()
            .map(|n| node_routes(n, ctx.routes.as_ref()))
            .collect();
        let print = fingerprint(&inputs);
        if by_change && last_inputs == Some(print) {
            continue;
        }
        last_inputs = Some(print);
        let started = Instant::now();
        let result = reconcile(&mut ctx, &nodes, &inputs).await;
        metrics.record(started, result.as_ref().err().map(PassError::category));
        if let Err(e) = result {
            tracing::warn!(error = %e, retry_in_s = ctx.config.reconcile_period.as_secs_f32(), "route reconciliation incomplete");
        }
        next_pass = Instant::now() + ctx.config.reconcile_period;
    }
}

/// The route view of one node.
fn node_routes(node: &Node, routes: &dyn Routes) -> NodeRoutes {
    let (pod_cidrs, bad_cidrs) = pod_cidrs(node);
    NodeRoutes {
        name: node.metadata.name.clone().unwrap_or_default(),
        target: routes.route_target(&node_info(node)).ok(),
        pod_cidrs,
        bad_cidrs,
    }
}

async fn reconcile(
    ctx: &mut Ctx,
    nodes: &[Arc<Node>],
    inputs: &[NodeRoutes],
) -> Result<(), PassError> {
    let tables = ctx.routes.route_tables().await.map_err(PassError::List)?;
    let plan = plan_routes(inputs, &tables, &ctx.config.cluster_cidrs);
    tracing::debug!(
        tables = tables.len(),
        nodes = inputs.len(),
        writes = plan.actions.len(),
        "route reconciliation"
    );
    let current: BTreeSet<(String, String)> = plan
        .problems
        .iter()
        .map(|p| (p.node.clone(), p.message.clone()))
        .collect();
    for (node, message) in current.difference(&ctx.reported) {
        tracing::warn!(node = %node, "{message}");
    }
    ctx.reported = current;

    let errors = execute(ctx, &plan.actions).await;
    let failed: Vec<bool> = errors.iter().map(Option::is_some).collect();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let outcome = plan.nodes.get(name);
        let routed = is_routed(outcome, &failed);
        let first_error = outcome
            .into_iter()
            .flat_map(|o| o.actions.iter())
            .find_map(|&i| errors[i].as_ref().map(|e| (&plan.actions[i], e)));
        report_failure(ctx, node, first_error).await;
        if let Some(patch) = condition_patch(node, routed, now.clone()) {
            match ctx
                .nodes
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => tracing::info!(node = name, routed, "NetworkUnavailable condition set"),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::warn!(node = name, error = %e, "cannot set NetworkUnavailable condition")
                }
            }
        }
    }
    match failed.iter().filter(|f| **f).count() {
        0 => Ok(()),
        n => Err(PassError::Writes(n)),
    }
}

/// Prepares each target once, then runs the writes; returns each action's error, if any.
async fn execute(ctx: &Ctx, actions: &[RouteAction]) -> Vec<Option<CloudError>> {
    let routes = ctx.routes.as_ref();
    let limit = ctx.config.concurrency.max(1);
    let prepared: HashMap<RouteTarget, Option<CloudError>> =
        futures::stream::iter(targets_to_prepare(actions))
            .map(|target| async move {
                let result = routes.prepare_target(&target).await.err();
                if let Some(e) = &result {
                    tracing::warn!(target = %target, error = %e, "cannot prepare route target");
                }
                (target, result)
            })
            .buffer_unordered(limit)
            .collect()
            .await;
    let prepared = &prepared;
    // Indexes, not references, go through the stream: the future stays Send for `spawn`.
    let mut results: Vec<(usize, Option<CloudError>)> = futures::stream::iter(0..actions.len())
        .map(|i| async move {
            let action = &actions[i];
            let blocked = action
                .target()
                .and_then(|t| prepared.get(t).cloned().flatten());
            match blocked {
                Some(e) => (i, Some(e)),
                None => (i, write_route(routes, action).await.err()),
            }
        })
        .buffer_unordered(limit)
        .collect()
        .await;
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, e)| e).collect()
}

/// One route write, logged.
async fn write_route(routes: &dyn Routes, action: &RouteAction) -> Result<(), CloudError> {
    let result = match &action.kind {
        ActionKind::Create(t) => {
            routes
                .create_route(&action.table, &action.destination, t)
                .await
        }
        ActionKind::Replace(t) => {
            routes
                .replace_route(&action.table, &action.destination, t)
                .await
        }
        ActionKind::Delete => {
            routes
                .delete_route(&action.table, &action.destination)
                .await
        }
    };
    match &result {
        Ok(()) => {
            tracing::info!(table = %action.table, destination = %action.destination, action = ?action.kind, "route written")
        }
        Err(e) => {
            tracing::warn!(table = %action.table, destination = %action.destination, action = ?action.kind, error = %e, "route write failed")
        }
    }
    result
}

/// Publishes a Warning Event for a node whose routes could not be written, once per distinct
/// failure; forgets the failure once the node's routes are written.
async fn report_failure(ctx: &mut Ctx, node: &Node, failure: Option<(&RouteAction, &CloudError)>) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let Some((action, error)) = failure else {
        ctx.failure_events.remove(&name);
        return;
    };
    let note = format!(
        "Could not {} route {} in route table {} for node {name}: {error}",
        match action.kind {
            ActionKind::Replace(_) => "replace",
            _ => "create",
        },
        action.destination,
        action.table
    );
    if ctx.failure_events.get(&name) == Some(&note) {
        return;
    }
    ctx.events
        .publish(
            node,
            true,
            "FailedToCreateRoute",
            "CreateRoute",
            note.clone(),
        )
        .await;
    ctx.failure_events.insert(name, note);
}
