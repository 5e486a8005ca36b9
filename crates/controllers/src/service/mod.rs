//! The service controller: cloud load balancers for `type: LoadBalancer` Services.
//!
//! `plan` holds the pure decisions, `node_trigger` turns node churn into one settled signal,
//! `driver` does the Kubernetes and cloud I/O.

pub mod driver;
pub mod node_trigger;
pub mod plan;

pub use driver::{run, ServiceControllerConfig};
