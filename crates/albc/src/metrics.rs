//! Controller metrics with bounded labels: reconciles by result, their duration, and targets
//! registered and deregistered.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of a reconcile: `ok` or an error category.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok` or the error category.
    pub result: String,
}

/// TargetGroupBinding controller metrics.
#[derive(Clone)]
pub struct TgbMetrics {
    reconciles: Family<ResultLabels, Counter>,
    duration: Histogram,
    registered: Counter,
    deregistered: Counter,
}

impl TgbMetrics {
    /// Registers the metrics under `albc_targetgroupbinding_`.
    pub fn register(registry: &mut Registry) -> TgbMetrics {
        let m = TgbMetrics {
            reconciles: Family::default(),
            duration: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            registered: Counter::default(),
            deregistered: Counter::default(),
        };
        let sub = registry.sub_registry_with_prefix("albc_targetgroupbinding");
        sub.register("reconciles", "Reconciles by result", m.reconciles.clone());
        sub.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile",
            m.duration.clone(),
        );
        sub.register(
            "targets_registered",
            "Targets registered",
            m.registered.clone(),
        );
        sub.register(
            "targets_deregistered",
            "Targets deregistered",
            m.deregistered.clone(),
        );
        m
    }

    /// Records one reconcile.
    pub fn record(&self, took: Duration, error: Option<&'static str>) {
        self.duration.observe(took.as_secs_f64());
        self.reconciles
            .get_or_create(&ResultLabels {
                result: error.unwrap_or("ok").to_string(),
            })
            .inc();
    }

    /// Counts targets changed.
    pub fn targets_changed(&self, registered: usize, deregistered: usize) {
        self.registered.inc_by(registered as u64);
        self.deregistered.inc_by(deregistered as u64);
    }
}
