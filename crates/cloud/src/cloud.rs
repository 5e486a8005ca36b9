//! A started cloud: its capabilities (each present, or absent with the reason), readiness
//! gates and a description for logs.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::{InstancesV2, LoadBalancer, NodeTags, Routes};

/// Why a capability is absent, in words for the operator (e.g. "routes need RouteTableID or a
/// route table tagged for the cluster").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A capability, or why this cloud (as configured) does not have it.
pub type Capability<T> = Result<Arc<T>, Unsupported>;

/// A condition a leading replica must meet before it reports ready (e.g. "the instance cache has
/// listed once"). The future is lazy: nothing runs until the controllers start leading.
pub struct ReadinessGate {
    /// Condition name shown by `/readyz?verbose`, e.g. `instance-cache-sync`.
    pub name: &'static str,
    /// Why the replica is not ready while the gate is closed.
    pub pending: String,
    /// Completes when the gate opens.
    pub opened: BoxFuture<'static, ()>,
}

/// A cloud provider's capabilities, as `k8s.io/cloud-provider`'s `Interface`.
pub trait Cloud: Send + Sync {
    /// Instance questions for the node and node-lifecycle controllers.
    fn instances(&self) -> Capability<dyn InstancesV2>;

    /// Load balancers for `type: LoadBalancer` Services.
    fn load_balancer(&self) -> Capability<dyn LoadBalancer> {
        Err(Unsupported("this cloud has no load balancers".into()))
    }

    /// Pod-CIDR routes for the route controller.
    fn routes(&self) -> Capability<dyn Routes> {
        Err(Unsupported("this cloud has no routes".into()))
    }

    /// Tags on the resources behind nodes, for the `tagging` controller.
    fn node_tags(&self) -> Capability<dyn NodeTags> {
        Err(Unsupported("this cloud has no tagging controller".into()))
    }

    /// Gates to pass before a leading replica is ready; called once, when controllers start.
    fn readiness_gates(&self) -> Vec<ReadinessGate> {
        Vec::new()
    }

    /// Where the cloud runs, for the start-up log line (e.g. `region us-east-1`).
    fn describe(&self) -> String;
}
