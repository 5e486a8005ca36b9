//! The InstancesV2 capability: what the node and node-lifecycle controllers ask a cloud.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::{CloudError, NodeAddress, NodeInfo, ProviderId};

/// Everything needed to initialise a node, answered in one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceMetadata {
    /// The provider ID to write to `spec.providerID`.
    pub provider_id: ProviderId,
    /// Value of `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// Addresses in the provider's preferred order.
    pub node_addresses: Vec<NodeAddress>,
    /// Value of `topology.kubernetes.io/zone` (empty when unknown).
    pub zone: String,
    /// Value of `topology.kubernetes.io/region` (empty when unknown).
    pub region: String,
    /// Provider-specific labels (e.g. `topology.k8s.aws/zone-id`).
    pub additional_labels: BTreeMap<String, String>,
}

/// Instance questions about a node, as `k8s.io/cloud-provider`'s `InstancesV2`.
///
/// Contracts:
/// - `instance_exists` answers `Ok(false)` only when the instance is really gone (terminated or
///   unknown to the cloud); a stopped instance exists. A cloud that cannot be reached answers
///   `Err`, never `Ok(false)`.
/// - `instance_shutdown` answers `Ok(true)` for a stopped (or stopping) instance.
/// - `instance_metadata` answers [`CloudError::InstanceNotFound`] when no instance matches, and
///   [`CloudError::Pending`] when the instance exists but cannot be described yet (no address).
/// - `is_same_instance` decides whether a providerID already on a node names the instance that
///   was found (clouds write the same instance several ways, e.g. with or without a zone).
#[async_trait]
pub trait InstancesV2: Send + Sync {
    /// Whether the instance behind the node still exists.
    async fn instance_exists(&self, node: &NodeInfo) -> Result<bool, CloudError>;
    /// Whether the instance behind the node is shut down.
    async fn instance_shutdown(&self, node: &NodeInfo) -> Result<bool, CloudError>;
    /// Metadata used to initialise the node.
    async fn instance_metadata(&self, node: &NodeInfo) -> Result<InstanceMetadata, CloudError>;
    /// Looks at the instances behind `nodes` again now, all together, so that the
    /// `instance_exists` and `instance_shutdown` answers that follow for these nodes reflect what
    /// the cloud says at this moment.
    ///
    /// Contract:
    /// - The node-lifecycle controller calls it once per `--node-monitor-period` with every
    ///   managed node (initialised, with a providerID) that is not Ready, then asks
    ///   `instance_exists`/`instance_shutdown` about each of them. It never calls it with an
    ///   empty list and never for Ready nodes: a cluster whose nodes are all Ready costs nothing
    ///   here.
    /// - A provider that answers instance questions from a shared, periodically listed view
    ///   asks the cloud about all of `nodes` in as few requests as its API allows (AWS: one
    ///   DescribeInstances by instance ID for up to 200 nodes), never one request per node.
    /// - `Err` means the cloud could not be asked (throttled, unreachable, refused): the
    ///   controller acts on none of these nodes in this pass. It never means an instance is gone.
    /// - A provider that asks the cloud on every `instance_exists`/`instance_shutdown` call needs
    ///   nothing here; the default does nothing.
    async fn refresh_instances(&self, nodes: &[NodeInfo]) -> Result<(), CloudError> {
        let _ = nodes;
        Ok(())
    }
    /// Whether the `existing` providerID of a node names the instance `found` names.
    fn is_same_instance(&self, existing: &str, found: &ProviderId) -> bool {
        existing == found.as_str()
    }
}
