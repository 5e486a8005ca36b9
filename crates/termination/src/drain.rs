//! The drain driver: lists the node's pods, executes the [`plan_drain`] plan through the
//! Eviction API (PodDisruptionBudgets answer 429 and are retried until the window closes),
//! waits for the pods to be gone, force-deletes evicted pods still terminating at the close,
//! and reports what could not be evicted by name.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Client;

use crate::drain_plan::{
    at_close, plan_drain, AtClose, DrainOutcome, DrainPlan, DrainSettings, NotEvictedReason,
    PodView,
};
use crate::events::Recorder;
use crate::throttle::Throttle;

/// How often evictions refused by a PodDisruptionBudget are retried, and pods polled.
const RETRY_EVERY: Duration = Duration::from_millis(1000);
const POLL_EVERY: Duration = Duration::from_millis(500);

/// Why a drain failed.
#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    /// Listing the node's pods (`spec.nodeName` field selector) failed.
    #[error("listing the pods of node {node}: {source}")]
    List {
        /// The Node's name.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The plan refused the drain (kubectl drain's rules); nothing was evicted.
    #[error("cannot drain node {node}: {pods}")]
    Refused {
        /// The Node's name.
        node: String,
        /// Each refusing pod as `namespace/name` and why, joined by `; `.
        pods: String,
    },
    /// The window closed with pods whose eviction never went through.
    #[error("pods not evicted before the instance's deadline: {}", describe_not_evicted(.pods))]
    Incomplete {
        /// The pods never evicted (`namespace/name`) and why.
        pods: Vec<(String, NotEvictedReason)>,
        /// Evicted pods force-deleted at the close meanwhile.
        forced: Vec<String>,
    },
}

/// Builds the plan's view of a pod.
pub fn pod_view(pod: &Pod) -> PodView {
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let volumes = spec.volumes.unwrap_or_default();
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    PodView {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller_kind: meta
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|r| r.controller == Some(true)).or(o.first()))
            .map(|r| r.kind.clone()),
        mirror: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror")),
        local_storage: volumes.iter().any(|v| v.empty_dir.is_some()),
        attached_volumes: volumes.iter().any(|v| {
            v.persistent_volume_claim.is_some()
                || v.csi.is_some()
                || v.aws_elastic_block_store.is_some()
                || v.ephemeral.is_some()
        }),
        grace_seconds: spec.termination_grace_period_seconds,
        finished: phase == "Succeeded" || phase == "Failed",
        terminating: meta.deletion_timestamp.is_some(),
        priority: spec.priority.unwrap_or(0),
    }
}

/// Drains nodes.
#[derive(Clone)]
pub struct Drainer {
    client: Client,
    throttle: Arc<Throttle>,
    settings: DrainSettings,
    use_apiserver_cache: bool,
    recorder: Recorder,
}

impl Drainer {
    /// A drainer applying `settings`; every API call waits on `throttle`, pod lists read the
    /// apiserver's cache when `use_apiserver_cache` (`--use-apiserver-cache`), and one Event
    /// per eviction goes to `recorder`.
    pub fn new(
        client: Client,
        throttle: Arc<Throttle>,
        settings: DrainSettings,
        use_apiserver_cache: bool,
        recorder: Recorder,
    ) -> Drainer {
        Drainer {
            client,
            throttle,
            settings,
            use_apiserver_cache,
            recorder,
        }
    }

    /// The pods on `node`.
    pub async fn list_pods(&self, node: &str) -> Result<Vec<Pod>, DrainError> {
        self.throttle.acquire().await;
        let mut params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        if self.use_apiserver_cache {
            params = params.match_any();
        }
        Api::<Pod>::all(self.client.clone())
            .list(&params)
            .await
            .map(|l| l.items)
            .map_err(|source| DrainError::List {
                node: node.to_owned(),
                source,
            })
    }

    /// Drains `node` so that it is empty before `deadline`.
    pub async fn drain(&self, node: &str, deadline: Timestamp) -> Result<DrainOutcome, DrainError> {
        let pods = self.list_pods(node).await?;
        let views: Vec<PodView> = pods.iter().map(pod_view).collect();
        let plan = plan_drain(&views, &self.settings, Timestamp::now(), deadline);
        if !plan.proceeds() {
            let pods = plan
                .refused
                .iter()
                .map(|(p, r)| format!("{} {}", p.key(), r.message()))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(DrainError::Refused {
                node: node.to_owned(),
                pods,
            });
        }
        tracing::info!(node, pods = plan.evictions.len(), skipped = plan.skipped.len(),
            close_at = %plan.close_at, "draining");
        if self.recorder.enabled() {
            let labels: BTreeMap<String, BTreeMap<String, String>> = pods
                .iter()
                .map(|p| {
                    (
                        p.metadata.uid.clone().unwrap_or_default(),
                        p.metadata.labels.clone().unwrap_or_default(),
                    )
                })
                .collect();
            for e in &plan.evictions {
                let empty = BTreeMap::new();
                let l = labels.get(&e.pod.uid).unwrap_or(&empty);
                self.recorder
                    .pod_eviction(&e.pod.namespace, &e.pod.name, l, node)
                    .await;
            }
        }
        tracing::debug!(node, "pod eviction events emitted");
        let outcome = self.execute(node, &plan).await;
        if outcome.not_evicted.is_empty() {
            Ok(outcome)
        } else {
            Err(DrainError::Incomplete {
                pods: outcome.not_evicted,
                forced: outcome.forced,
            })
        }
    }

    async fn execute(&self, node: &str, plan: &DrainPlan) -> DrainOutcome {
        let close = tokio_deadline(plan.close_at);
        // uid -> eviction
        let mut pending: BTreeMap<String, &crate::drain_plan::Eviction> = plan
            .evictions
            .iter()
            .map(|e| (e.pod.uid.clone(), e))
            .collect();
        let mut evicted: BTreeSet<String> = plan
            .evictions
            .iter()
            .filter(|e| e.wait_only)
            .map(|e| e.pod.uid.clone())
            .collect();
        let mut refusals: BTreeMap<String, NotEvictedReason> = BTreeMap::new();
        let mut outcome = DrainOutcome::default();
        let mut next_attempt = tokio::time::Instant::now();
        loop {
            // Send the evictions not yet accepted.
            if tokio::time::Instant::now() >= next_attempt {
                let attempts = pending
                    .values()
                    .filter(|e| !evicted.contains(&e.pod.uid))
                    .map(|e| async move { (e.pod.uid.clone(), self.evict(e).await) });
                let results = futures::future::join_all(attempts).await;
                tracing::debug!(node, attempted = results.len(), "eviction round done");
                for (uid, result) in results {
                    match result {
                        Ok(()) => {
                            evicted.insert(uid.clone());
                            refusals.remove(&uid);
                        }
                        Err(reason) => {
                            refusals.insert(uid, reason);
                        }
                    }
                }
                next_attempt = tokio::time::Instant::now() + RETRY_EVERY;
            }
            // Which planned pods are still there?
            let present: BTreeSet<String> = match self.list_pods(node).await {
                Ok(pods) => pods.iter().filter_map(|p| p.metadata.uid.clone()).collect(),
                Err(e) => {
                    tracing::warn!(node, error = %e, "listing pods while draining");
                    pending.keys().cloned().collect()
                }
            };
            pending.retain(|uid, e| {
                if present.contains(uid) {
                    true
                } else {
                    outcome.evicted.push(e.pod.key());
                    false
                }
            });
            if pending.is_empty() {
                return outcome;
            }
            if tokio::time::Instant::now() >= close {
                break;
            }
            tokio::time::sleep(POLL_EVERY.min(close - tokio::time::Instant::now())).await;
        }
        // The window closed.
        tracing::info!(node, left = pending.len(), "the drain window closed");
        for (uid, e) in pending {
            match at_close(evicted.contains(&uid), refusals.get(&uid).copied()) {
                AtClose::ForceDelete => {
                    self.force_delete(&e.pod).await;
                    outcome.forced.push(e.pod.key());
                }
                AtClose::GiveUp(reason) => outcome.not_evicted.push((e.pod.key(), reason)),
            }
        }
        outcome
    }

    async fn evict(&self, e: &crate::drain_plan::Eviction) -> Result<(), NotEvictedReason> {
        self.throttle.acquire().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &e.pod.namespace);
        // Built by hand: kube's `Api::evict` serialises `delete_options` in snake case, which
        // the apiserver ignores (the pod's own grace period would apply).
        let eviction = Eviction {
            metadata: ObjectMeta {
                name: Some(e.pod.name.clone()),
                namespace: Some(e.pod.namespace.clone()),
                ..ObjectMeta::default()
            },
            delete_options: Some(DeleteOptions {
                grace_period_seconds: Some(e.grace_seconds.max(0)),
                ..DeleteOptions::default()
            }),
        };
        tracing::debug!(pod = %e.pod.key(), grace = e.grace_seconds, "evicting");
        let answer = api
            .create_subresource::<Eviction, serde_json::Value>(
                "eviction",
                &e.pod.name,
                &PostParams::default(),
                &eviction,
            )
            .await;
        tracing::debug!(pod = %e.pod.key(), ok = answer.is_ok(), "eviction answered");
        match answer {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 429 => {
                tracing::debug!(pod = %e.pod.key(), message = %s.message, "eviction refused by a disruption budget");
                Err(NotEvictedReason::DisruptionBudget)
            }
            Err(err) => {
                tracing::warn!(pod = %e.pod.key(), error = %err, "eviction failed");
                Err(NotEvictedReason::Error)
            }
        }
    }

    async fn force_delete(&self, pod: &PodView) {
        self.throttle.acquire().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        match api.delete(&pod.name, &params).await {
            Ok(_) => {
                tracing::warn!(pod = %pod.key(), "force-deleted a pod still terminating at the close of the window")
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => tracing::warn!(pod = %pod.key(), error = %e, "force delete failed"),
        }
    }
}

/// `ns/a (PodDisruptionBudget), ns/b (eviction errors)`.
pub fn describe_not_evicted(pods: &[(String, NotEvictedReason)]) -> String {
    pods.iter()
        .map(|(p, r)| format!("{p} ({})", reason_text(*r)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn reason_text(reason: NotEvictedReason) -> &'static str {
    match reason {
        NotEvictedReason::DisruptionBudget => "PodDisruptionBudget",
        NotEvictedReason::Error => "eviction errors",
    }
}

/// The tokio instant of a wall-clock time (now if past).
pub fn tokio_deadline(at: Timestamp) -> tokio::time::Instant {
    let left = at.duration_since(Timestamp::now());
    let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
    tokio::time::Instant::now() + left
}
