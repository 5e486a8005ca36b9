//! capdvp's Prometheus metrics: reconciles by kind and outcome, parent calls by operation,
//! objects left behind by deletions that hit their deadline, runtime-extension calls by hook and
//! outcome, and how long machines took from creation to a running VM.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reconcile {
    kind: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Operation {
    operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookCall {
    hook: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

/// The metrics.
#[derive(Debug)]
pub struct Metrics {
    reconciles: Family<Reconcile, Counter>,
    parent_requests: Family<Operation, Counter>,
    orphaned: Family<Kind, Counter>,
    hook_calls: Family<HookCall, Counter>,
    ready_seconds: Histogram,
}

impl Metrics {
    /// Registers the metrics (prefix `capdvp_`).
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            reconciles: Family::default(),
            parent_requests: Family::default(),
            orphaned: Family::default(),
            hook_calls: Family::default(),
            ready_seconds: Histogram::new([0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]),
        };
        let r = registry.sub_registry_with_prefix("capdvp");
        r.register(
            "reconciles",
            "Reconciles by kind and result",
            m.reconciles.clone(),
        );
        r.register(
            "parent_requests",
            "Calls to the parent cluster's API by operation (watches excluded)",
            m.parent_requests.clone(),
        );
        r.register(
            "orphaned_objects",
            "Parent objects left behind by deletions that hit their deadline, by kind",
            m.orphaned.clone(),
        );
        r.register(
            "extension_requests",
            "Runtime-extension calls by hook and outcome (success, failure, error)",
            m.hook_calls.clone(),
        );
        r.register(
            "machine_ready_seconds",
            "Seconds from a DeckhouseMachine's creation to its VM running",
            m.ready_seconds.clone(),
        );
        m
    }

    /// Counts a reconcile.
    pub fn reconciled(&self, kind: &str, result: &str) {
        self.reconciles
            .get_or_create(&Reconcile {
                kind: kind.into(),
                result: result.into(),
            })
            .inc();
    }

    /// Counts a parent call.
    pub fn parent_request(&self, operation: &str) {
        self.parent_requests
            .get_or_create(&Operation {
                operation: operation.into(),
            })
            .inc();
    }

    /// Total parent calls so far.
    pub fn parent_requests_total(&self) -> u64 {
        // Families cannot be iterated; the known operations are summed.
        [
            "get_prerequisite",
            "create_vm",
            "get_vm",
            "list_vms",
            "list_disks",
            "create_disk",
            "create_secret",
            "delete_vm",
            "delete_disk",
            "delete_secret",
            "delete_attachment",
            "patch_vm",
        ]
        .iter()
        .map(|o| {
            self.parent_requests
                .get_or_create(&Operation {
                    operation: (*o).into(),
                })
                .get()
        })
        .sum()
    }

    /// Counts a runtime-extension call (`hook`: one of the four hooks; `outcome`: `success`,
    /// `failure` or `error`).
    pub fn hook_call(&self, hook: &str, outcome: &str) {
        self.hook_calls
            .get_or_create(&HookCall {
                hook: hook.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Counts an object left behind.
    pub fn orphaned(&self, kind: &str) {
        self.orphaned
            .get_or_create(&Kind { kind: kind.into() })
            .inc();
    }

    /// Records a machine becoming ready `seconds` after its creation.
    pub fn machine_ready(&self, seconds: f64) {
        self.ready_seconds.observe(seconds);
    }
}
