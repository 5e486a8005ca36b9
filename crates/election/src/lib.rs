//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` does it:
//! a candidate takes the lease when it is free or its holder has not renewed it within the lease
//! duration (measured on the candidate's own clock), renews it every retry period, loses it when
//! renewals fail for the renew deadline, and gives it up on shutdown so a standby takes over at
//! once.

pub mod args;
pub mod decision;
pub mod elector;
pub mod metrics;

pub use args::{pod_namespace, LeaderElectionArgs, DEFAULT_NAMESPACE};
pub use decision::{decide, Decision, LeaseView, Observation};
pub use elector::{ElectionConfig, ElectionError, Leadership};
pub use metrics::{ElectionMetrics, LeaderStatus};
