//! Handling one interruption of one node, the same in both modes (upstream's `draincordon`
//! handler): pre-drain (taints, reboot labels), cordon or cordon-and-drain fitted to the
//! event's deadline, webhook, out-of-service taint; with upstream's Events and metrics.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use crate::config::Options;
use crate::drain::{DrainError, Drainer};
use crate::drain_plan::drain_deadline;
use crate::events::{self, Recorder};
use crate::imds::NodeMetadata;
use crate::interruption::{action_for, Action, InterruptionEvent, Kind};
use crate::metrics::Metrics;
use crate::node::{self, NodeWriter};
use crate::webhook::Webhook;

/// Why handling failed.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// The event's Node does not exist (404 while labelling or cordoning it).
    #[error("node {0} not found in the cluster")]
    NodeNotFound(String),
    /// Labelling the node excluded from load balancers, or cordoning it, failed.
    #[error("cordoning node {node}: {source}")]
    Cordon {
        /// The Node's name.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The drain failed or left pods behind.
    #[error(transparent)]
    Drain(#[from] DrainError),
    /// Adding the `node.kubernetes.io/out-of-service` taint (`--enable-out-of-service-taint`)
    /// failed.
    #[error("tainting node {node} out of service: {source}")]
    OutOfService {
        /// The Node's name.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Everything needed to act on nodes.
#[derive(Clone)]
pub struct Handler {
    pub(crate) opts: Arc<Options>,
    pub(crate) nodes: NodeWriter,
    pub(crate) drainer: Drainer,
    pub(crate) recorder: Recorder,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) webhook: Option<Webhook>,
    /// This instance's metadata (IMDS mode; empty in queue mode).
    pub(crate) metadata: Arc<NodeMetadata>,
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl Handler {
    /// Handles `event` for its node; `annotations` are added to its Events. `seen` is when the
    /// notice was first seen (for the notice-to-cordon histogram).
    pub async fn handle(
        &self,
        event: &mut InterruptionEvent,
        annotations: &BTreeMap<String, String>,
        seen: tokio::time::Instant,
    ) -> Result<(), HandleError> {
        let node_name = event.node_name.clone();
        let opts = &self.opts;
        let action = action_for(
            event,
            opts.cordon_only,
            opts.enable_sqs_termination_draining,
            opts.enable_rebalance_draining,
        );
        if opts.dry_run {
            tracing::info!(node = %node_name, event_id = %event.event_id, ?action,
                "dry-run: node would have been cordoned{}", if action == Action::CordonAndDrain { " and drained" } else { "" });
        }
        self.pre_drain(event, annotations).await;

        if self.webhook.is_some() || self.recorder.enabled() {
            if let Ok(pods) = self.drainer.list_pods(&node_name).await {
                event.pods = pods
                    .iter()
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
            }
        }
        let result = self.act(event, action, annotations, seen).await;
        if let Some(webhook) = &self.webhook {
            webhook.post(&self.metadata, event).await;
        }
        result?;
        if opts.enable_out_of_service_taint && !opts.cordon_only {
            self.nodes
                .add_taint(
                    &node_name,
                    node::OUT_OF_SERVICE_TAINT,
                    node::OUT_OF_SERVICE_VALUE,
                    "NoExecute",
                )
                .await
                .map_err(|source| HandleError::OutOfService {
                    node: node_name.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    async fn act(
        &self,
        event: &InterruptionEvent,
        action: Action,
        annotations: &BTreeMap<String, String>,
        seen: tokio::time::Instant,
    ) -> Result<(), HandleError> {
        let node_name = &event.node_name;
        let metric_action = match action {
            Action::Cordon => "cordon",
            Action::CordonAndDrain => "cordon-and-drain",
        };
        let cordoned = async {
            if self.opts.exclude_from_load_balancers {
                self.nodes
                    .set_labels(
                        node_name,
                        &[(
                            node::EXCLUDE_FROM_LB_LABEL,
                            Some(node::EXCLUDE_FROM_LB_VALUE.into()),
                        )],
                    )
                    .await?;
            }
            self.nodes.cordon(node_name, true).await
        }
        .await;
        if let Err(e) = cordoned {
            if not_found(&e) {
                return Err(HandleError::NodeNotFound(node_name.clone()));
            }
            let (reason, what) = match action {
                Action::Cordon => (events::CORDON_ERROR, "cordon"),
                Action::CordonAndDrain => (events::CORDON_AND_DRAIN_ERROR, "cordon and drain"),
            };
            self.metrics.action(metric_action, false);
            self.recorder
                .node_event(
                    node_name,
                    true,
                    reason,
                    format!("There was a problem while trying to {what} the node: {e}"),
                    annotations,
                )
                .await;
            return Err(HandleError::Cordon {
                node: node_name.clone(),
                source: e,
            });
        }
        self.metrics
            .notice_to_cordon
            .observe(seen.elapsed().as_secs_f64());
        tracing::info!(node = %node_name, event_id = %event.event_id, latency_ms = seen.elapsed().as_millis() as u64, "node cordoned");

        if action == Action::Cordon || self.opts.dry_run {
            self.metrics.action(metric_action, true);
            let (reason, message) = match action {
                Action::Cordon => (events::CORDON, "Node successfully cordoned"),
                Action::CordonAndDrain => (
                    events::CORDON_AND_DRAIN,
                    "Node successfully cordoned and drained",
                ),
            };
            self.recorder
                .node_event(node_name, false, reason, message.into(), annotations)
                .await;
            return Ok(());
        }
        let deadline = drain_deadline(
            event.deadline,
            Timestamp::now(),
            SignedDuration::from_secs(self.opts.node_termination_grace_period.max(0)),
        );
        match self.drainer.drain(node_name, deadline).await {
            Ok(outcome) => {
                self.metrics.action(metric_action, true);
                self.metrics
                    .pods_force_deleted
                    .inc_by(outcome.forced.len() as u64);
                let mut message = "Node successfully cordoned and drained".to_owned();
                if !outcome.forced.is_empty() {
                    message.push_str(&format!(
                        "; force-deleted at the close of the window: {}",
                        outcome.forced.join(", ")
                    ));
                }
                self.recorder
                    .node_event(
                        node_name,
                        false,
                        events::CORDON_AND_DRAIN,
                        message,
                        annotations,
                    )
                    .await;
                Ok(())
            }
            Err(e) => {
                self.metrics.action(metric_action, false);
                if let DrainError::Incomplete { pods, forced } = &e {
                    self.metrics.pods_force_deleted.inc_by(forced.len() as u64);
                    // The metric counts by reason; the Event names the pods.
                    for (_, reason) in pods {
                        self.metrics
                            .pods_not_evicted
                            .get_or_create(&crate::metrics::ReasonLabels {
                                reason: reason.as_str(),
                            })
                            .inc();
                    }
                }
                self.recorder
                    .node_event(
                        node_name,
                        true,
                        events::CORDON_AND_DRAIN_ERROR,
                        format!(
                            "There was a problem while trying to cordon and drain the node: {e}"
                        ),
                        annotations,
                    )
                    .await;
                Err(e.into())
            }
        }
    }

    /// The pre-drain task: reboot labels for restarts, the kind's taint with `--taint-node`.
    async fn pre_drain(&self, event: &InterruptionEvent, annotations: &BTreeMap<String, String>) {
        let node_name = &event.node_name;
        let has_task = event.kind != Kind::StateChange && event.kind != Kind::AsgLaunchLifecycle;
        if !has_task {
            return;
        }
        let mut result: Result<(), kube::Error> = Ok(());
        if event.restart {
            result = self.mark_for_reboot(event).await;
        }
        if result.is_ok() && self.opts.taint_node {
            if let Some(key) = event.kind.taint_key() {
                result = self
                    .nodes
                    .add_taint(node_name, key, &event.event_id, &self.opts.taint_effect)
                    .await;
            }
        }
        match &result {
            Ok(()) => {
                self.recorder
                    .node_event(
                        node_name,
                        false,
                        events::PRE_DRAIN,
                        "Pre-drain task successfully executed".into(),
                        annotations,
                    )
                    .await
            }
            Err(e) => {
                tracing::warn!(node = %node_name, error = %e, "pre-drain task failed");
                self.recorder
                    .node_event(
                        node_name,
                        true,
                        events::PRE_DRAIN_ERROR,
                        format!("There was a problem executing the pre-drain task: {e}"),
                        annotations,
                    )
                    .await
            }
        }
        self.metrics.action("pre-drain", result.is_ok());
    }

    /// A scheduled reboot: label the node with the event id, and — unless it is already
    /// cordoned by someone else — with the uncordon-after-reboot action and its time.
    async fn mark_for_reboot(&self, event: &InterruptionEvent) -> Result<(), kube::Error> {
        let node_name = &event.node_name;
        let already = match self.nodes.get(node_name).await? {
            Some(n) => n.spec.and_then(|s| s.unschedulable).unwrap_or(false),
            None => false,
        };
        let mut labels = vec![(
            node::EVENT_ID_LABEL,
            Some(node::truncate_value(&event.event_id)),
        )];
        if !already {
            labels.push((node::ACTION_LABEL, Some(node::UNCORDON_AFTER_REBOOT.into())));
            labels.push((
                node::ACTION_TIME_LABEL,
                Some(Timestamp::now().as_second().to_string()),
            ));
        }
        self.nodes.set_labels(node_name, &labels).await
    }

    /// Undoes a cancelled interruption: uncordon, drop our labels and taints.
    pub async fn uncordon(&self, node_name: &str, annotations: &BTreeMap<String, String>) {
        let result = self.nodes.cordon(node_name, false).await;
        match &result {
            Ok(()) => {
                self.recorder
                    .node_event(
                        node_name,
                        false,
                        events::UNCORDON,
                        "Node successfully uncordoned".into(),
                        annotations,
                    )
                    .await
            }
            Err(e) => {
                self.recorder
                    .node_event(
                        node_name,
                        true,
                        events::UNCORDON_ERROR,
                        format!("There was a problem while trying to uncordon the node: {e}"),
                        annotations,
                    )
                    .await
            }
        }
        self.metrics.action("uncordon", result.is_ok());
        if let Err(e) = self.remove_marks(node_name).await {
            tracing::warn!(node = node_name, error = %e, "removing our labels and taints");
        }
    }

    /// Removes our labels (the exclude-from-load-balancers one only if we set it) and taints.
    pub async fn remove_marks(&self, node_name: &str) -> Result<(), kube::Error> {
        let mut labels = vec![
            (node::EVENT_ID_LABEL, None),
            (node::ACTION_LABEL, None),
            (node::ACTION_TIME_LABEL, None),
        ];
        if let Some(n) = self.nodes.get(node_name).await? {
            let ours = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(node::EXCLUDE_FROM_LB_LABEL))
                .is_some_and(|v| v == node::EXCLUDE_FROM_LB_VALUE);
            if ours {
                labels.push((node::EXCLUDE_FROM_LB_LABEL, None));
            }
        }
        self.nodes.set_labels(node_name, &labels).await?;
        if self.opts.taint_node {
            self.nodes
                .remove_taints(node_name, node::NTH_TAINTS)
                .await?;
        }
        Ok(())
    }
}
