//! kube-rs driver of the node-ipam controller: a pass over the shared Node store after each
//! change (bursts coalesced), writing planned pod CIDRs with a resourceVersion precondition.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::Client;
use serde_json::json;
use stratus_cloud::Cidr;
use stratus_kube_kit::{wait_for_store, EventPublisher};
use stratus_runtime::backoff::Backoff;
use tokio::time::Instant;

use super::cidr_set::{CidrSet, CidrSetError};
use super::plan::{Allocation, NodeCidrs, RangeAllocator, Report};
use crate::informer::NodeChanges;
use crate::metrics::ReconcileMetrics;

/// Settings of the node-ipam controller.
#[derive(Debug, Clone)]
pub struct NodeIpamConfig {
    /// `--cluster-cidr` with the node mask size of each, in flag order.
    pub ranges: Vec<(Cidr, u8)>,
    /// How long a Node change waits for more changes before a pass (coalesces bursts).
    pub settle: Duration,
    /// Node patches in flight at once.
    pub concurrency: usize,
    /// Retry delays after a failed write.
    pub backoff: Backoff,
}

impl NodeIpamConfig {
    /// Default tunables for `ranges`.
    pub fn new(ranges: Vec<(Cidr, u8)>) -> Self {
        Self {
            ranges,
            settle: Duration::from_millis(100),
            concurrency: 8,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(30)),
        }
    }

    /// The allocator's block sets; fails on a mask that does not fit its cluster CIDR.
    pub fn cidr_sets(&self) -> Result<Vec<CidrSet>, CidrSetError> {
        self.ranges
            .iter()
            .map(|(cidr, mask)| CidrSet::new(*cidr, *mask))
            .collect()
    }
}

/// Runs the controller until the Node watch ends.
pub async fn run(
    client: Client,
    store: Store<Node>,
    mut changes: NodeChanges,
    config: NodeIpamConfig,
    metrics: ReconcileMetrics,
) {
    let sets = match config.cidr_sets() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "node-ipam cannot start");
            return;
        }
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let events = EventPublisher::new(client, "node-ipam-controller");
    if !wait_for_store(&store).await {
        tracing::error!("node watch ended before its first list");
        return;
    }
    let mut allocator = RangeAllocator::new(sets);
    // (uid, reason) of Events already published, so a lasting condition is published once.
    let mut published: BTreeSet<(String, &'static str)> = BTreeSet::new();
    let mut failures = 0u32;
    loop {
        let started = Instant::now();
        let state = store.state();
        let views: Vec<NodeCidrs> = state.iter().map(|n| NodeCidrs::of(n)).collect();
        let pass = allocator.pass(&views);
        let uids: BTreeSet<&str> = views.iter().map(|n| n.uid.as_str()).collect();
        published.retain(|(uid, _)| uids.contains(uid.as_str()));
        for report in &pass.reports {
            publish(&events, &state, report, &mut published).await;
        }
        let api = &nodes;
        // Owned allocations go through the stream: the future stays Send for `spawn`.
        let failed: Vec<Allocation> = futures::stream::iter(pass.allocations)
            .map(|a| async move {
                let ok = write(api, &a).await;
                (a, ok)
            })
            .buffer_unordered(config.concurrency.max(1))
            .filter_map(|(a, ok)| async move { (!ok).then_some(a) })
            .collect()
            .await;
        for a in &failed {
            allocator.undo(&a.name, &a.uid);
        }
        failures = if failed.is_empty() { 0 } else { failures + 1 };
        metrics.record(started, (!failed.is_empty()).then_some("KubernetesAPI"));
        let retry = (failures > 0).then(|| config.backoff.delay(failures));
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    tracing::error!("node watch ended; node-ipam stops");
                    return;
                }
                tokio::time::sleep(config.settle).await;
                changes.borrow_and_update();
            }
            _ = sleep_or_never(retry) => {}
        }
    }
}

async fn sleep_or_never(delay: Option<Duration>) {
    match delay {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Writes `spec.podCIDR` and `spec.podCIDRs`, only if the node is still the one planned for
/// (resourceVersion precondition: a concurrent writer is never overwritten).
async fn write(nodes: &Api<Node>, a: &Allocation) -> bool {
    let cidrs: Vec<String> = a.cidrs.iter().map(Cidr::to_string).collect();
    let patch = json!({
        "metadata": {"resourceVersion": a.resource_version},
        "spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs},
    });
    match nodes
        .patch(&a.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(node = %a.name, pod_cidrs = ?cidrs, "pod CIDRs allocated");
            true
        }
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
            tracing::debug!(node = %a.name, code = s.code, "node changed before its pod CIDRs were written; planned again");
            false
        }
        Err(e) => {
            tracing::warn!(node = %a.name, error = %e, "cannot write pod CIDRs");
            false
        }
    }
}

async fn publish(
    events: &EventPublisher,
    nodes: &[Arc<Node>],
    report: &Report,
    published: &mut BTreeSet<(String, &'static str)>,
) {
    let (name, uid) = report.node();
    let (reason, note) = match report {
        Report::Exhausted { range, .. } => (
            "CIDRNotAvailable",
            format!("Node {name} status is now: CIDRNotAvailable (no free pod CIDR left in cluster CIDR {range})"),
        ),
        Report::Outside { cidrs, .. } => (
            "PodCIDROutsideClusterCIDR",
            format!(
                "Node {name} has pod CIDRs {} outside every cluster CIDR; they are left as they are",
                cidrs.join(", ")
            ),
        ),
        Report::Invalid { text, .. } => (
            "InvalidPodCIDR",
            format!("Node {name} has a pod CIDR {text:?} that is not a CIDR"),
        ),
    };
    if !published.insert((uid.to_string(), reason)) {
        return;
    }
    tracing::warn!(node = name, reason, "{note}");
    if let Some(node) = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name))
    {
        events
            .publish(node.as_ref(), true, reason, "AllocatePodCIDR", note)
            .await;
    }
}
