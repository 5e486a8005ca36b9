//! Prometheus metrics under upstream's names (`actions_total{node_action,node_status}`,
//! `events_error_total{event_error_where}`, `nth_tagged_nodes`, `nth_tagged_instances`) plus
//! Stratus ones (`nth_*`): notice-to-cordon latency, pods not evicted in time, queue message
//! outcomes. Upstream's `actions_node_total` is left out: it labels by node name and event id,
//! an unbounded series count upstream itself deprecated. Every label is bounded.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ActionLabels {
    node_action: &'static str,
    node_status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WhereLabels {
    event_error_where: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    pub(crate) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    outcome: &'static str,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.025, 2.0, 10))
}

/// The handler's metrics.
#[derive(Debug)]
pub struct Metrics {
    /// `actions_total{node_action,node_status}`.
    actions: Family<ActionLabels, Counter>,
    /// `events_error_total{event_error_where}`.
    events_error: Family<WhereLabels, Counter>,
    /// `nth_tagged_nodes`: Nodes whose instance carries `--managed-tag` (queue mode).
    pub(crate) tagged_nodes: Gauge,
    /// `nth_tagged_instances`: instances carrying `--managed-tag` (queue mode).
    pub(crate) tagged_instances: Gauge,
    /// `nth_notice_to_cordon_seconds`.
    pub(crate) notice_to_cordon: Histogram,
    /// `nth_drain_pods_not_evicted_total{reason}` (`pdb`, `error`).
    pub(crate) pods_not_evicted: Family<ReasonLabels, Counter>,
    /// `nth_drain_pods_force_deleted_total`.
    pub(crate) pods_force_deleted: Counter,
    /// `nth_queue_messages_total{outcome}`.
    queue_messages: Family<OutcomeLabels, Counter>,
}

impl Metrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            actions: Family::default(),
            events_error: Family::default(),
            tagged_nodes: Gauge::default(),
            tagged_instances: Gauge::default(),
            notice_to_cordon: latency_histogram(),
            pods_not_evicted: Family::default(),
            pods_force_deleted: Counter::default(),
            queue_messages: Family::default(),
        };
        registry.register("actions", "Number of actions", m.actions.clone());
        registry.register(
            "events_error",
            "Number of errors in events processing",
            m.events_error.clone(),
        );
        registry.register(
            "nth_tagged_nodes",
            "Number of nodes processing",
            m.tagged_nodes.clone(),
        );
        registry.register(
            "nth_tagged_instances",
            "Number of instances processing",
            m.tagged_instances.clone(),
        );
        registry.register(
            "nth_notice_to_cordon_seconds",
            "Seconds from an interruption notice being seen to the node being cordoned",
            m.notice_to_cordon.clone(),
        );
        registry.register(
            "nth_drain_pods_not_evicted",
            "Pods that could not be evicted before the instance's deadline (named in a Warning Event)",
            m.pods_not_evicted.clone(),
        );
        registry.register(
            "nth_drain_pods_force_deleted",
            "Evicted pods still terminating when the window closed, force-deleted so volumes detach",
            m.pods_force_deleted.clone(),
        );
        registry.register(
            "nth_queue_messages",
            "SQS messages by outcome (handled, dropped, retried)",
            m.queue_messages.clone(),
        );
        m
    }

    /// Counts one node action (`cordon`, `cordon-and-drain`, `uncordon`, `pre-drain`,
    /// `post-drain`).
    pub fn action(&self, node_action: &'static str, ok: bool) {
        self.actions
            .get_or_create(&ActionLabels {
                node_action,
                node_status: if ok { "success" } else { "error" },
            })
            .inc();
    }

    /// Counts one error of a monitor (`SPOT_ITN_MONITOR`, `SQS_MONITOR`, ...).
    pub fn error(&self, event_error_where: &str) {
        self.events_error
            .get_or_create(&WhereLabels {
                event_error_where: event_error_where.to_owned(),
            })
            .inc();
    }

    /// Counts one SQS message by outcome (`handled`, `dropped`, `retried`).
    pub fn queue_message(&self, outcome: &'static str) {
        self.queue_messages
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names_in_the_exposition() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        m.action("cordon-and-drain", true);
        m.error("SPOT_ITN_MONITOR");
        m.tagged_nodes.set(2);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "actions_total{node_action=\"cordon-and-drain\",node_status=\"success\"} 1",
            "events_error_total{event_error_where=\"SPOT_ITN_MONITOR\"} 1",
            "nth_tagged_nodes 2",
            "nth_tagged_instances 0",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }
}
