//! The service controller: cloud load balancers for `type: LoadBalancer` Services.
//!
//! `plan` decides which Services are ours and what the cloud is asked, `sync_plan` how a sync
//! proceeds and answers errors, `node_trigger` turns node churn into one settled signal, and
//! `driver` does the Kubernetes and cloud I/O.

pub mod driver;
pub mod endpoint_trigger;
pub mod node_trigger;
pub mod plan;
pub mod sync_plan;

pub use driver::{run, ServiceControllerConfig};
