//! Cloud provider traits and domain types shared by every Stratus provider, and the provider
//! registry the binaries pick `--cloud-provider` from.
//!
//! This crate has no Kubernetes client: the generic controllers own all Kubernetes I/O and ask a
//! provider only cloud questions through the traits defined here. It watches and writes nothing.

pub mod cidr;
pub mod cloud;
pub mod error;
pub mod instances;
pub mod load_balancer;
pub mod node;
pub mod node_tags;
pub mod provider;
pub mod provider_id;
pub mod resync;
pub mod routes;
pub mod tags;

pub use cidr::{Cidr, CidrError};
pub use cloud::{Capability, Cloud, ReadinessGate, Unsupported};
pub use error::CloudError;
pub use instances::{InstanceMetadata, InstancesV2};
pub use load_balancer::{
    Ingress, LoadBalancer, LoadBalancerRequest, Protocol, ServicePort, ServiceRef, TargetNode,
};
pub use node::{NodeAddress, NodeAddressType, NodeInfo};
pub use node_tags::{NodeTags, TagChange, TagOutcome, TagSet};
pub use provider::{ConfiguredProvider, Provider, ProviderError, ProviderOptions, Providers};
pub use provider_id::{ProviderId, ProviderIdError};
pub use resync::{ResyncRequests, ServiceKey};
pub use routes::{NextHop, Route, RouteTable, RouteTarget, Routes};
