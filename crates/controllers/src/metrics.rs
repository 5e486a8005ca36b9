//! Metrics every controller exports: reconciles, failures by category and reconcile duration,
//! labelled by controller (bounded: a handful of names; categories are error categories).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::time::Instant;

/// Labels of one controller.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// `cloud-node`, `service`…
    pub controller: String,
}

/// Labels of one failure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// `cloud-node`, `service`…
    pub controller: String,
    /// The error's category (`Throttled`, `KubernetesAPI`…).
    pub category: String,
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The metric families, shared by every controller of the process.
#[derive(Debug)]
pub struct ControllerMetrics {
    reconciles: Family<ControllerLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    duration: Family<ControllerLabels, Histogram, fn() -> Histogram>,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
        }
    }
}

impl ControllerMetrics {
    /// Registers `stratus_controller_reconciles_total`, `_reconcile_failures_total` and
    /// `_reconcile_duration_seconds`.
    pub fn register(registry: &mut Registry) -> Arc<ControllerMetrics> {
        let m = ControllerMetrics::default();
        let r = registry.sub_registry_with_prefix("stratus_controller");
        r.register(
            "reconciles",
            "Reconciles (or passes) run by a controller",
            m.reconciles.clone(),
        );
        r.register(
            "reconcile_failures",
            "Reconciles that failed, by error category",
            m.failures.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "How long one reconcile (or pass) took",
            m.duration.clone(),
        );
        Arc::new(m)
    }

    /// The handle one controller reports through; its series exist (at zero) from now on, so
    /// a controller that has not reconciled yet is visible too.
    pub fn controller(self: &Arc<Self>, name: &str) -> ReconcileMetrics {
        let labels = ControllerLabels {
            controller: name.to_string(),
        };
        let _ = self.reconciles.get_or_create(&labels);
        let _ = self.duration.get_or_create(&labels);
        ReconcileMetrics {
            labels,
            families: self.clone(),
        }
    }
}

/// One controller's metrics.
#[derive(Debug, Clone)]
pub struct ReconcileMetrics {
    labels: ControllerLabels,
    families: Arc<ControllerMetrics>,
}

impl ReconcileMetrics {
    /// Metrics of `name` that no registry exports (tests, tools).
    pub fn unregistered(name: &str) -> ReconcileMetrics {
        Arc::new(ControllerMetrics::default()).controller(name)
    }

    /// Records one reconcile that started at `started`; `failure` is its error category.
    pub fn record(&self, started: Instant, failure: Option<&str>) {
        self.families.reconciles.get_or_create(&self.labels).inc();
        self.families
            .duration
            .get_or_create(&self.labels)
            .observe(started.elapsed().as_secs_f64());
        if let Some(category) = failure {
            self.families
                .failures
                .get_or_create(&FailureLabels {
                    controller: self.labels.controller.clone(),
                    category: category.to_string(),
                })
                .inc();
        }
    }

    /// Reconciles recorded so far (tests).
    pub fn reconciles(&self) -> u64 {
        self.families.reconciles.get_or_create(&self.labels).get()
    }

    /// Failures of `category` recorded so far (tests).
    pub fn failures(&self, category: &str) -> u64 {
        self.families
            .failures
            .get_or_create(&FailureLabels {
                controller: self.labels.controller.clone(),
                category: category.to_string(),
            })
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn exports_reconciles_failures_and_durations() {
        let mut registry = Registry::default();
        let families = ControllerMetrics::register(&mut registry);
        let node = families.controller("cloud-node");
        node.record(Instant::now(), None);
        node.record(Instant::now(), Some("Throttled"));
        assert_eq!(node.reconciles(), 2);
        assert_eq!(node.failures("Throttled"), 1);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("stratus_controller_reconciles_total{controller=\"cloud-node\"} 2"));
        assert!(text.contains(
            "stratus_controller_reconcile_failures_total{controller=\"cloud-node\",category=\"Throttled\"} 1"
        ));
        assert!(text.contains(
            "stratus_controller_reconcile_duration_seconds_count{controller=\"cloud-node\"} 2"
        ));
    }
}
