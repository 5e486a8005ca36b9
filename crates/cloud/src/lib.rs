//! Cloud provider traits and domain types shared by every Stratus provider.
//!
//! This crate has no Kubernetes client: the generic controllers own all Kubernetes I/O and ask a
//! provider only cloud questions through the traits defined here. It watches and writes nothing.

pub mod cidr;
pub mod error;
pub mod instances;
pub mod load_balancer;
pub mod node;
pub mod routes;

pub use cidr::{Cidr, CidrError};
pub use error::CloudError;
pub use instances::{InstanceMetadata, InstancesV2};
pub use load_balancer::{
    Ingress, LoadBalancer, LoadBalancerRequest, Protocol, ServicePort, ServiceRef, TargetNode,
};
pub use node::{NodeAddress, NodeAddressType, NodeInfo};
pub use routes::{NextHop, Route, RouteTable, RouteTarget, Routes};

use std::sync::Arc;

/// A cloud provider: a name plus optional capabilities (as `k8s.io/cloud-provider`'s `Interface`).
pub trait Cloud: Send + Sync {
    /// Provider name as given to `--cloud-provider` (e.g. `aws`).
    fn provider_name(&self) -> &'static str;

    /// Instance lookups used by the node and node-lifecycle controllers, if supported.
    fn instances_v2(&self) -> Option<Arc<dyn InstancesV2>>;

    /// Load balancers for `type: LoadBalancer` Services, if supported.
    fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>> {
        None
    }

    /// Pod-CIDR routes for the route controller, if supported (and configured).
    fn routes(&self) -> Option<Arc<dyn Routes>> {
        None
    }
}
