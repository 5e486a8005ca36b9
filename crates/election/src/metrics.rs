//! Whether this replica leads each Lease it competes for, as client-go exports it:
//! `leader_election_master_status{name="<lease>"}` is 1 while leading, 0 otherwise.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of one Lease.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    /// The Lease name.
    pub name: String,
}

/// The gauge family of every Lease of the process.
#[derive(Debug, Clone, Default)]
pub struct ElectionMetrics {
    status: Family<LeaseLabels, Gauge>,
}

impl ElectionMetrics {
    /// Registers `leader_election_master_status` (client-go's name).
    pub fn register(registry: &mut Registry) -> ElectionMetrics {
        let m = ElectionMetrics::default();
        registry.register(
            "leader_election_master_status",
            "Whether this replica leads the Lease (1) or not (0)",
            m.status.clone(),
        );
        m
    }

    /// The gauge of `lease`.
    pub fn lease(&self, lease: &str) -> LeaderStatus {
        LeaderStatus(
            self.status
                .get_or_create(&LeaseLabels { name: lease.into() })
                .clone(),
        )
    }
}

/// One Lease's gauge.
#[derive(Debug, Clone, Default)]
pub struct LeaderStatus(Gauge);

impl LeaderStatus {
    /// Records whether this replica leads.
    pub fn set_leading(&self, leading: bool) {
        self.0.set(i64::from(leading));
    }

    /// Whether this replica leads, as last recorded.
    pub fn is_leading(&self) -> bool {
        self.0.get() == 1
    }
}
