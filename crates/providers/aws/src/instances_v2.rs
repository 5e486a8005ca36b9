//! InstancesV2 for AWS, answered from the shared instance cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use stratus_cloud::{CloudError, InstanceMetadata, InstancesV2, NodeInfo, ProviderId};

use crate::config::IpFamily;
use crate::instance::Instance;
use crate::instance_cache::{lookup_keys, InstanceCache, LookupKey};
use crate::topology::{self, Topology};
use crate::zones::ZoneIds;
use stratus_aws_api::provider_id::{AwsProviderId, InstanceId};

/// Label carrying the AWS zone ID (stable across accounts, unlike zone names).
pub const ZONE_ID_LABEL: &str = "topology.k8s.aws/zone-id";

/// AWS answers to instance questions.
pub struct AwsInstances {
    cache: Arc<InstanceCache>,
    zones: ZoneIds,
    topology: Arc<Topology>,
    region: String,
    families: Vec<IpFamily>,
}

impl AwsInstances {
    /// Builds the capability over a running cache.
    pub fn new(
        cache: Arc<InstanceCache>,
        zones: ZoneIds,
        topology: Arc<Topology>,
        region: String,
        families: Vec<IpFamily>,
    ) -> Self {
        Self {
            cache,
            zones,
            topology,
            region,
            families,
        }
    }

    async fn live_instance(&self, node: &NodeInfo) -> Result<Arc<Instance>, CloudError> {
        match self.cache.find(node).await? {
            Some(i) if !i.state.is_gone() => Ok(i),
            Some(i) => Err(CloudError::InstanceNotFound(format!(
                "instance {} of node {} is terminated",
                i.id, node.name
            ))),
            None => Err(CloudError::InstanceNotFound(format!(
                "no EC2 instance matches node {} (looked up by {})",
                node.name,
                describe_keys(node)
            ))),
        }
    }
}

fn describe_keys(node: &NodeInfo) -> String {
    match &node.provider_id {
        Some(p) if !p.is_empty() => format!("provider ID {p}"),
        _ => {
            let mut s = "instance ID or private DNS name".to_string();
            if !node.known_ips().is_empty() {
                s.push_str(" and private IP");
            }
            s
        }
    }
}

#[async_trait]
impl InstancesV2 for AwsInstances {
    async fn instance_exists(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        match self.live_instance(node).await {
            Ok(_) => Ok(true),
            Err(CloudError::InstanceNotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_shutdown(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        match self.live_instance(node).await {
            Ok(i) => Ok(i.state.is_shutdown()),
            Err(CloudError::InstanceNotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_metadata(&self, node: &NodeInfo) -> Result<InstanceMetadata, CloudError> {
        let i = self.live_instance(node).await?;
        let mut additional_labels = BTreeMap::new();
        if !i.zone.is_empty() {
            if let Some(zone_id) = self.zones.zone_id(&i.zone).await? {
                additional_labels.insert(ZONE_ID_LABEL.to_string(), zone_id);
            }
        }
        if let Some(nodes) = self.topology.network_nodes(&i).await {
            additional_labels.extend(topology::labels(&nodes));
        }
        Ok(InstanceMetadata {
            provider_id: AwsProviderId::of(&i.zone, &i.id),
            instance_type: i.instance_type.clone(),
            node_addresses: i.node_addresses(&self.families),
            zone: i.zone.clone(),
            region: self.region.clone(),
            additional_labels,
        })
    }

    /// One DescribeInstances by instance ID (per 200 nodes) for every node that names its
    /// instance (by providerID or an `i-…` name); the answers go into the shared view.
    async fn refresh_instances(&self, nodes: &[NodeInfo]) -> Result<(), CloudError> {
        let ids: Vec<InstanceId> = nodes
            .iter()
            .filter_map(|n| match lookup_keys(n).ok()?.into_iter().next()? {
                LookupKey::Id(id) => Some(id),
                _ => None,
            })
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        self.cache.refresh_ids(&ids).await
    }

    fn is_same_instance(&self, existing: &str, found: &ProviderId) -> bool {
        AwsProviderId::same_instance(existing, found.as_str())
    }
}
