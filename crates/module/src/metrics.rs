//! The module controller's metrics: reconciles and failures by part and reason, and Kubernetes
//! writes by kind (an idle cluster adds none).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// `part` of a reconcile: `storage_classes`, `registration`, `spot_marks`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartLabel {
    /// The part.
    pub part: String,
}

/// A failed part and why (`settings`, `inputs`, `kubernetes`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The part.
    pub part: String,
    /// Why.
    pub reason: String,
}

/// A write: `create`, `patch`, `delete`, `replace`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// The resource (`storageclasses`, `secrets`, `nodes`).
    pub resource: String,
    /// The verb.
    pub verb: String,
}

/// The counters.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    reconciles: Family<PartLabel, Counter>,
    failures: Family<FailureLabels, Counter>,
    writes: Family<WriteLabels, Counter>,
    /// Every write, whatever its labels (for callers; not registered).
    all_writes: Counter,
}

impl Metrics {
    /// Registers them under `stratus_module_`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics::default();
        let sub = registry.sub_registry_with_prefix("stratus_module");
        sub.register(
            "reconciles",
            "Finished reconciles by part",
            m.reconciles.clone(),
        );
        sub.register(
            "reconcile_failures",
            "Failed reconciles by part and reason",
            m.failures.clone(),
        );
        sub.register(
            "kubernetes_writes",
            "Kubernetes writes by resource and verb",
            m.writes.clone(),
        );
        m
    }

    /// A part finished.
    pub fn reconciled(&self, part: &str) {
        self.reconciles
            .get_or_create(&PartLabel { part: part.into() })
            .inc();
    }

    /// A part failed.
    pub fn failed(&self, part: &str, reason: &str) {
        self.failures
            .get_or_create(&FailureLabels {
                part: part.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// A write was made.
    pub fn wrote(&self, resource: &str, verb: &str) {
        self.writes
            .get_or_create(&WriteLabels {
                resource: resource.into(),
                verb: verb.into(),
            })
            .inc();
        self.all_writes.inc();
    }

    /// Writes so far (all kinds).
    pub fn writes_total(&self) -> u64 {
        self.all_writes.get()
    }
}
