//! kube-rs driver of the tagging controller: a pass soon after Node changes (bursts coalesced),
//! the provider's batched tag calls, then the Node label and annotation recording the result.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::Client;
use stratus_cloud::{CloudError, NodeInfo, NodeTags, TagOutcome, TagSet};
use stratus_kube_kit::wait_for_store;
use stratus_runtime::backoff::Backoff;
use tokio::time::Instant;

use super::budget::Budget;
use super::plan::{checksum, plan_tagging, Batch, NodeTagView, Work, APPLIED_ANNOTATION};
use crate::informer::NodeChanges;
use crate::metrics::ReconcileMetrics;
use crate::node_view::node_info;

/// Settings of the tagging controller.
#[derive(Debug, Clone)]
pub struct TaggingConfig {
    /// `--tags`.
    pub tags: TagSet,
    /// `--resources`.
    pub resources: Vec<String>,
    /// Only nodes whose provider ID has this scheme are the provider's.
    pub provider_scheme: Option<String>,
    /// `--tagging-controller-rate-limit` (nodes per second; 0 = no limit).
    pub rate_limit: f64,
    /// `--tagging-controller-burst-limit` (0 = no limit).
    pub burst_limit: u32,
    /// How long a Node change waits for more changes before a pass.
    pub settle: Duration,
    /// Delays before a failed node is tried again.
    pub backoff: Backoff,
}

impl Default for TaggingConfig {
    fn default() -> Self {
        Self {
            tags: TagSet::new(),
            resources: vec!["instance".into()],
            provider_scheme: None,
            rate_limit: 0.0,
            burst_limit: 0,
            settle: Duration::from_millis(200),
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(300)),
        }
    }
}

/// A node that failed, and when to try it again.
struct Retry {
    failures: u32,
    not_before: Instant,
}

struct Ctx {
    nodes: Api<Node>,
    tags: Arc<dyn NodeTags>,
    config: TaggingConfig,
    desired_sum: String,
    /// Nodes whose resources carry tags of ours, with those tags (to untag them once deleted).
    known: HashMap<String, (NodeInfo, TagSet)>,
    retries: HashMap<String, Retry>,
}

/// Runs the controller until the Node watch ends.
pub async fn run(
    client: Client,
    store: Store<Node>,
    mut changes: NodeChanges,
    tags: Arc<dyn NodeTags>,
    config: TaggingConfig,
    metrics: ReconcileMetrics,
) {
    let mut budget = Budget::new(config.rate_limit, config.burst_limit, Instant::now());
    let mut ctx = Ctx {
        nodes: Api::all(client),
        tags,
        desired_sum: checksum(&config.tags),
        config,
        known: HashMap::new(),
        retries: HashMap::new(),
    };
    if !wait_for_store(&store).await {
        tracing::error!("node watch ended before its first list");
        return;
    }
    let mut wake: Option<Instant> = Some(Instant::now());
    loop {
        let by_change = tokio::select! {
            _ = sleep_until(wake) => false,
            changed = changes.changed() => {
                if changed.is_err() {
                    tracing::error!("node watch ended; tagging controller stops");
                    return;
                }
                true
            }
        };
        if by_change {
            tokio::time::sleep(ctx.config.settle).await;
            changes.borrow_and_update();
        }
        let started = Instant::now();
        let (deferred, failure) = pass(&mut ctx, &store, budget.as_mut()).await;
        metrics.record(started, failure);
        wake = ctx.retries.values().map(|r| r.not_before).min();
        if let (true, Some(b)) = (deferred > 0, budget.as_ref()) {
            let refill = Instant::now() + b.next_in();
            wake = Some(wake.map_or(refill, |w| w.min(refill)));
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The tagging view of a node, when it is the provider's and not waiting for a retry.
fn view(ctx: &Ctx, node: &Node, now: Instant) -> Option<NodeTagView> {
    let info = node_info(node);
    let pid = info.provider_id.as_deref().filter(|p| !p.is_empty())?;
    if let Some(scheme) = &ctx.config.provider_scheme {
        if !pid.starts_with(&format!("{scheme}://")) {
            return None;
        }
    }
    if ctx
        .retries
        .get(&info.name)
        .is_some_and(|r| r.not_before > now)
    {
        return None;
    }
    let labels = node.metadata.labels.as_ref();
    let annotations = node.metadata.annotations.as_ref();
    Some(NodeTagView {
        record: labels.and_then(|l| l.get(ctx.tags.record_label()).cloned()),
        applied: annotations
            .and_then(|a| a.get(APPLIED_ANNOTATION))
            .and_then(|v| serde_json::from_str::<TagSet>(v).ok()),
        info,
    })
}

/// One pass; returns the nodes deferred by the budget and the failure category, if any.
async fn pass(
    ctx: &mut Ctx,
    store: &Store<Node>,
    budget: Option<&mut Budget>,
) -> (usize, Option<&'static str>) {
    let now = Instant::now();
    let nodes = store.state();
    let present: std::collections::HashSet<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let views: Vec<NodeTagView> = nodes.iter().filter_map(|n| view(ctx, n, now)).collect();
    for v in &views {
        if let Some(applied) = v.known_applied(&ctx.config.tags, &ctx.desired_sum) {
            ctx.known
                .insert(v.info.name.clone(), (v.info.clone(), applied));
        }
    }
    let deleted: Vec<(String, TagSet)> = ctx
        .known
        .iter()
        .filter(|(name, _)| !present.contains(name.as_str()))
        .filter(|(name, _)| ctx.retries.get(*name).is_none_or(|r| r.not_before <= now))
        .map(|(name, (_, applied))| (name.clone(), applied.clone()))
        .collect();
    let mut budget = budget;
    let allowed = budget.as_mut().map(|b| b.available(now));
    let plan = plan_tagging(&ctx.config.tags, &views, &deleted, allowed);
    if plan.batches.is_empty() {
        return (plan.deferred, None);
    }
    let infos: HashMap<&str, &NodeInfo> = views
        .iter()
        .map(|v| (v.info.name.as_str(), &v.info))
        .collect();
    let infos: HashMap<String, NodeInfo> = plan
        .batches
        .iter()
        .flat_map(|b| b.nodes.iter())
        .filter_map(|name| {
            let info = infos
                .get(name.as_str())
                .copied()
                .or_else(|| ctx.known.get(name).map(|(i, _)| i))?;
            Some((name.clone(), info.clone()))
        })
        .collect();
    let mut failure = None;
    let mut processed = 0;
    for batch in &plan.batches {
        processed += batch.nodes.len();
        if let Some(category) = execute(ctx, batch, &infos).await {
            failure = Some(category);
        }
    }
    if let Some(b) = budget {
        b.take(processed, Instant::now());
    }
    (plan.deferred, failure)
}

/// Runs one batch and records each node's result; returns a failure category, if any failed.
async fn execute(
    ctx: &mut Ctx,
    batch: &Batch,
    infos: &HashMap<String, NodeInfo>,
) -> Option<&'static str> {
    let nodes: Vec<NodeInfo> = batch
        .nodes
        .iter()
        .map(|n| infos.get(n).cloned().unwrap_or_else(|| NodeInfo::named(n)))
        .collect();
    let results = ctx
        .tags
        .change_tags(&ctx.config.resources, &nodes, &batch.change)
        .await;
    tracing::info!(work = ?batch.work, nodes = nodes.len(), set = batch.change.set.len(), remove = batch.change.remove.len(), "tag change sent");
    let mut failure = None;
    for (info, result) in nodes.iter().zip(results) {
        let name = info.name.as_str();
        let outcome = match (batch.work, result) {
            (Work::Untag, Ok(_)) => {
                ctx.known.remove(name);
                Ok(())
            }
            (Work::Tag, Ok(TagOutcome::Applied)) => record(ctx, info).await,
            (Work::Tag, Ok(TagOutcome::Gone)) => Err(CloudError::InstanceNotFound(format!(
                "the instance of node {name} does not exist; not tagged"
            ))),
            (_, Err(e)) => Err(e),
        };
        match outcome {
            Ok(()) => {
                ctx.retries.remove(name);
            }
            Err(e) => {
                failure = Some(e.category());
                let failures = ctx.retries.get(name).map_or(0, |r| r.failures) + 1;
                let delay = ctx.config.backoff.jittered(failures);
                tracing::warn!(node = name, work = ?batch.work, error = %e, retry_in_s = delay.as_secs_f32(), "tagging failed");
                ctx.retries.insert(
                    name.to_string(),
                    Retry {
                        failures,
                        not_before: Instant::now() + delay,
                    },
                );
            }
        }
    }
    failure
}

/// Records on the Node that the desired tags are applied (checksum label, applied annotation).
async fn record(ctx: &mut Ctx, info: &NodeInfo) -> Result<(), CloudError> {
    let applied = serde_json::to_string(&ctx.config.tags).unwrap_or_default();
    let patch = serde_json::json!({
        "metadata": {
            "labels": BTreeMap::from([(ctx.tags.record_label(), ctx.desired_sum.as_str())]),
            "annotations": { APPLIED_ANNOTATION: applied },
        }
    });
    ctx.known
        .insert(info.name.clone(), (info.clone(), ctx.config.tags.clone()));
    match ctx
        .nodes
        .patch(&info.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(node = %info.name, "node tagged");
            Ok(())
        }
        // Deleted meanwhile: the next pass untags it.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(CloudError::Unavailable {
            operation: "patch node".into(),
            message: e.to_string(),
        }),
    }
}
