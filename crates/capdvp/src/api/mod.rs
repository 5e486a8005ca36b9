//! The kinds capdvp serves and reads: its own `infrastructure.cluster.x-k8s.io/v1alpha1`
//! DeckhouseCluster, DeckhouseMachine and DeckhouseMachineTemplate (the fields of Deckhouse's
//! CRDs), and the few fields of Cluster API's `cluster.x-k8s.io/v1beta2` Cluster and Machine it
//! reads. Every field is optional on read, so objects written by newer code always parse.

pub mod capi;
pub mod infra;
mod resource;

pub use capi::{Cluster, Machine};
pub use infra::{
    DeckhouseCluster, DeckhouseMachine, DeckhouseMachineSpec, DeckhouseMachineStatus,
    DeckhouseMachineTemplate,
};

/// The infrastructure API group.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The version capdvp serves.
pub const VERSION: &str = "v1alpha1";
/// `group/version`.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
/// Cluster API's group.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// The Cluster API version read.
pub const CAPI_VERSION: &str = "v1beta2";
/// `group/version` of Cluster API.
pub const CAPI_API_VERSION: &str = "cluster.x-k8s.io/v1beta2";
