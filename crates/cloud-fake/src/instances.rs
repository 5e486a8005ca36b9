//! Fake instances: found by providerID, node name or node IP, as a real provider finds them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use stratus_cloud::{CloudError, InstanceMetadata, InstancesV2, NodeAddress, NodeInfo, ProviderId};

use crate::knobs::Controls;

/// Whether an instance runs, is stopped, or is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    /// Running.
    Running,
    /// Shut down (still exists).
    Stopped,
    /// Terminated: unknown to the cloud.
    Gone,
    /// Exists but cannot be described yet (answers Pending).
    Starting,
}

/// One fake instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeInstance {
    /// Its ID; the provider ID is `fake:///<zone>/<id>`.
    pub id: String,
    /// The node name it serves (as the kubelet registers it).
    pub node_name: String,
    /// Availability zone.
    pub zone: String,
    /// Instance type.
    pub instance_type: String,
    /// Addresses, in order.
    pub addresses: Vec<NodeAddress>,
    /// State.
    pub state: InstanceState,
}

impl FakeInstance {
    /// The provider ID written to the node.
    pub fn provider_id(&self) -> ProviderId {
        ProviderId::new("fake", &format!("/{}/{}", self.zone, self.id))
            .expect("a fake provider ID is valid")
    }
}

/// The instances capability of the fake.
#[derive(Debug)]
pub struct FakeInstances {
    pub(crate) all: Mutex<BTreeMap<String, FakeInstance>>,
    pub(crate) controls: Arc<Controls>,
    pub(crate) region: String,
}

impl FakeInstances {
    fn find(&self, node: &NodeInfo) -> Option<FakeInstance> {
        let all = self.all.lock().expect("instances");
        let by_id = node
            .provider_id
            .as_deref()
            .and_then(|p| p.rsplit('/').next())
            .and_then(|id| all.get(id));
        let by_name = || all.values().find(|i| i.node_name == node.name);
        let by_ip = || {
            let ips = node.known_ips();
            all.values().find(|i| {
                i.addresses
                    .iter()
                    .any(|a| ips.contains(&a.address.as_str()))
            })
        };
        by_id.or_else(by_name).or_else(by_ip).cloned()
    }

    fn live(&self, node: &NodeInfo) -> Result<FakeInstance, CloudError> {
        match self.find(node) {
            Some(i) if i.state != InstanceState::Gone => Ok(i),
            _ => Err(CloudError::InstanceNotFound(format!(
                "no fake instance serves node {}",
                node.name
            ))),
        }
    }
}

#[async_trait]
impl InstancesV2 for FakeInstances {
    async fn instance_exists(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        self.controls
            .enter("instances", "instance_exists", &node.name)
            .await?;
        Ok(self.live(node).is_ok())
    }

    async fn instance_shutdown(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        self.controls
            .enter("instances", "instance_shutdown", &node.name)
            .await?;
        Ok(self
            .live(node)
            .is_ok_and(|i| i.state == InstanceState::Stopped))
    }

    async fn instance_metadata(&self, node: &NodeInfo) -> Result<InstanceMetadata, CloudError> {
        self.controls
            .enter("instances", "instance_metadata", &node.name)
            .await?;
        let i = self.live(node)?;
        if i.state == InstanceState::Starting {
            return Err(CloudError::Pending {
                what: format!("instance {}", i.id),
                retry_after: Duration::from_millis(500),
            });
        }
        Ok(InstanceMetadata {
            provider_id: i.provider_id(),
            instance_type: i.instance_type.clone(),
            node_addresses: i.addresses.clone(),
            zone: i.zone.clone(),
            region: self.region.clone(),
            additional_labels: BTreeMap::new(),
        })
    }

    /// Logged as one call whose subject is the node names, comma-separated, in the order given;
    /// the fake answers every question from its current state, so there is nothing to refresh.
    async fn refresh_instances(&self, nodes: &[NodeInfo]) -> Result<(), CloudError> {
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        self.controls
            .enter("instances", "refresh_instances", names.join(","))
            .await
    }

    fn is_same_instance(&self, existing: &str, found: &ProviderId) -> bool {
        existing.rsplit('/').next() == found.as_str().rsplit('/').next()
    }
}
