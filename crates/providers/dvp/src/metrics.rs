//! The DVP provider's metrics: direct parent-cluster requests (the watch cache answers the
//! steady state; these count the exceptions) and watch events, with bounded labels.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of a direct parent request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `get_vm`, `list_vms_by_hostname`, …
    pub operation: &'static str,
    /// `ok`, `not_found` or `error`.
    pub outcome: &'static str,
}

/// Labels of a watch event.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// `apply`, `delete`, `relist` or `error`.
    pub kind: &'static str,
}

/// The provider's metrics.
#[derive(Clone, Default)]
pub struct DvpMetrics {
    /// Direct requests to the parent API.
    pub requests: Family<RequestLabels, Counter>,
    /// Events of the shared VM watch.
    pub watch_events: Family<EventLabels, Counter>,
    /// VirtualMachines in the watch cache.
    pub cached_vms: Gauge,
}

impl DvpMetrics {
    /// Registers the metrics under `dvp_`.
    pub fn register(registry: &mut Registry) -> DvpMetrics {
        let metrics = DvpMetrics::default();
        let sub = registry.sub_registry_with_prefix("dvp");
        sub.register(
            "parent_requests",
            "Direct requests to the DVP parent cluster (the watch cache answers the rest)",
            metrics.requests.clone(),
        );
        sub.register(
            "vm_watch_events",
            "Events of the shared VirtualMachine watch",
            metrics.watch_events.clone(),
        );
        sub.register(
            "cached_vms",
            "VirtualMachines in the watch cache",
            metrics.cached_vms.clone(),
        );
        metrics
    }

    /// Counts one direct request.
    pub fn request(&self, operation: &'static str, outcome: &'static str) {
        self.requests
            .get_or_create(&RequestLabels { operation, outcome })
            .inc();
    }
}
