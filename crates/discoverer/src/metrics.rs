//! Deckhouse's metrics (namespace `cloud_data`, subsystem `discovery`, all gauges):
//! `cloud_request_error{type}`, `update_resource_error`, `orphaned_disk_info{id,name}` and
//! `cloud_conditions_error{name,message}` (the last two reset every run); and one of Stratus's,
//! `runs_total{result=ok|failed}`, counting finished runs (when the first one is done, and how
//! many failed).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The step whose cloud request failed (`type` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Instance types.
    InstanceTypes,
    /// Discovery data.
    DiscoveryData,
    /// Disk metadata.
    DisksMeta,
}

impl Step {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Step::InstanceTypes => "instance_types",
            Step::DiscoveryData => "discovery_data",
            Step::DisksMeta => "disks_meta",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DiskLabels {
    id: String,
    name: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    name: String,
    message: String,
}

/// The discoverer's gauges.
#[derive(Debug, Default)]
pub struct Metrics {
    cloud_request_error: Family<TypeLabel, Gauge>,
    update_resource_error: Gauge,
    orphaned_disk_info: Family<DiskLabels, Gauge>,
    cloud_conditions_error: Family<ConditionLabels, Gauge>,
    runs: Family<ResultLabel, Counter>,
}

impl Metrics {
    /// Registers the gauges under `cloud_data_discovery_`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics::default();
        let sub = registry.sub_registry_with_prefix("cloud_data_discovery");
        sub.register(
            "cloud_request_error",
            "1 while the last cloud request of a step failed",
            m.cloud_request_error.clone(),
        );
        sub.register(
            "update_resource_error",
            "1 while the last Kubernetes update failed",
            m.update_resource_error.clone(),
        );
        sub.register(
            "orphaned_disk_info",
            "A disk of this cluster that no PersistentVolume names",
            m.orphaned_disk_info.clone(),
        );
        sub.register(
            "cloud_conditions_error",
            "An unmet cloud condition",
            m.cloud_conditions_error.clone(),
        );
        sub.register("runs", "Finished discovery runs", m.runs.clone());
        m
    }

    /// Counts a finished run.
    pub fn run_done(&self, failed: bool) {
        self.runs
            .get_or_create(&ResultLabel {
                result: if failed { "failed" } else { "ok" },
            })
            .inc();
    }

    /// Sets `cloud_request_error{type}` to 1 (failed) or 0.
    pub fn cloud_request(&self, step: Step, failed: bool) {
        self.cloud_request_error
            .get_or_create(&TypeLabel {
                r#type: step.label(),
            })
            .set(i64::from(failed));
    }

    /// Sets `update_resource_error` to 1 (failed) or 0.
    pub fn update_resource(&self, failed: bool) {
        self.update_resource_error.set(i64::from(failed));
    }

    /// Replaces the orphaned-disk series.
    pub fn orphaned_disks(&self, disks: &[crate::DiskMeta]) {
        self.orphaned_disk_info.clear();
        for d in disks {
            self.orphaned_disk_info
                .get_or_create(&DiskLabels {
                    id: d.id.clone(),
                    name: d.name.clone(),
                })
                .set(1);
        }
    }

    /// Replaces the unmet-condition series.
    pub fn conditions(&self, conditions: &[crate::CloudCondition]) {
        self.cloud_conditions_error.clear();
        for c in conditions.iter().filter(|c| !c.ok) {
            self.cloud_conditions_error
                .get_or_create(&ConditionLabels {
                    name: c.name.clone(),
                    message: c.message.clone(),
                })
                .set(1);
        }
    }
}
