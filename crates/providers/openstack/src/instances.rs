//! InstancesV2 for OpenStack, answered from the shared server view, with OCCM's provider IDs,
//! labels and address classification.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use stratus_cloud::{CloudError, InstanceMetadata, InstancesV2, NodeInfo, ProviderId};

use crate::addresses::node_addresses;
use crate::compute::{status, Nova, Server};
use crate::labels;
use crate::provider_id::OpenStackProviderId;
use crate::server_view::{Entry, ServerView};
use stratus_openstack_api::config::NetworkingConfig;

/// Label carrying the server's host ID, as upstream.
pub const HOST_ID_LABEL: &str = "topology.openstack.org/host-id";

/// How long a node whose server is still being built waits before it is looked at again.
pub const BUILD_RETRY: Duration = Duration::from_secs(2);

/// Deckhouse's switch (its OCCM patch): `true` keeps a Node whose server is gone instead of
/// letting the node-lifecycle controller delete it.
pub const SKIP_NODE_DELETION_ENV: &str = "SKIP_NODE_DELETION";

/// OpenStack answers to instance questions.
pub struct OpenStackInstances {
    /// [`SKIP_NODE_DELETION_ENV`]: a gone server is reported as existing.
    keep_nodes: bool,
    view: Arc<ServerView>,
    nova: Nova,
    region: Option<String>,
    regional_ids: bool,
    networking: NetworkingConfig,
    flavor_names: Mutex<HashMap<String, String>>,
}

impl OpenStackInstances {
    /// The capability over `view`; `regional_ids` writes `openstack://<region>/<id>`.
    pub fn new(
        view: Arc<ServerView>,
        nova: Nova,
        region: Option<String>,
        regional_ids: bool,
        networking: NetworkingConfig,
    ) -> Self {
        Self {
            keep_nodes: false,
            view,
            nova,
            region,
            regional_ids,
            networking,
            flavor_names: Mutex::new(HashMap::new()),
        }
    }

    /// With `keep`, a server that is gone is reported as existing, so its Node is never deleted
    /// ([`SKIP_NODE_DELETION_ENV`]).
    pub fn keeping_nodes(mut self, keep: bool) -> Self {
        self.keep_nodes = keep;
        self
    }

    async fn live(&self, node: &NodeInfo) -> Result<Option<Arc<Entry>>, CloudError> {
        Ok(self
            .view
            .find(node, self.region.as_deref())
            .await?
            .filter(|e| !e.server.is_gone()))
    }

    /// The instance type: the flavor's name (2.47+ servers carry it), else looked up by ID once.
    async fn instance_type(&self, server: &Server) -> Result<String, CloudError> {
        if let Some(name) = server.flavor.original_name.as_deref() {
            if labels::is_valid(name) {
                return Ok(name.to_string());
            }
        }
        let Some(id) = server.flavor.id.as_deref() else {
            return Ok(String::new());
        };
        if let Some(name) = self.flavor_names.lock().expect("flavors").get(id) {
            return Ok(name.clone());
        }
        let name = match self.nova.flavor_name(id).await? {
            Some(name) if labels::is_valid(&name) => name,
            _ => id.to_string(),
        };
        self.flavor_names
            .lock()
            .expect("flavors")
            .insert(id.to_string(), name.clone());
        Ok(name)
    }
}

fn describe_keys(node: &NodeInfo) -> String {
    match node.provider_id.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => format!("provider ID {p}"),
        None if node.known_ips().is_empty() => "server name".into(),
        None => "server name and IP".into(),
    }
}

#[async_trait]
impl InstancesV2 for OpenStackInstances {
    async fn instance_exists(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        let exists = self.live(node).await?.is_some();
        if !exists && self.keep_nodes {
            tracing::debug!(node = %node.name, "server gone, Node kept ({SKIP_NODE_DELETION_ENV})");
            return Ok(true);
        }
        Ok(exists)
    }

    async fn instance_shutdown(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        Ok(self
            .live(node)
            .await?
            .is_some_and(|e| e.server.is_shutdown()))
    }

    async fn instance_metadata(&self, node: &NodeInfo) -> Result<InstanceMetadata, CloudError> {
        let Some(entry) = self.live(node).await? else {
            return Err(CloudError::InstanceNotFound(format!(
                "no OpenStack server matches node {} (looked up by {})",
                node.name,
                describe_keys(node)
            )));
        };
        let server = &entry.server;
        let ports: Vec<_> = entry.ports.iter().collect();
        let node_addresses = node_addresses(server, &ports, &self.networking);
        if server.status == status::BUILD && node_addresses.is_empty() {
            return Err(CloudError::Pending {
                what: format!("server {} (still being built)", server.id),
                retry_after: BUILD_RETRY,
            });
        }
        let mut additional_labels = BTreeMap::new();
        let host = labels::sanitize(&server.host_id);
        if !host.is_empty() {
            additional_labels.insert(HOST_ID_LABEL.to_string(), host);
        }
        let region = if self.regional_ids {
            self.region.as_deref()
        } else {
            None
        };
        Ok(InstanceMetadata {
            provider_id: OpenStackProviderId::format(&server.id, region),
            instance_type: self.instance_type(server).await?,
            node_addresses,
            zone: labels::sanitize(&server.availability_zone),
            region: self.region.clone().unwrap_or_default(),
            additional_labels,
        })
    }

    /// One Nova request for all the NotReady nodes together (the servers changed since the last
    /// complete listing), so a stopped or deleted server is seen within one monitor period
    /// rather than at the next complete listing (`--instance-cache-refresh-period`, 5 minutes).
    async fn refresh_instances(&self, nodes: &[NodeInfo]) -> Result<(), CloudError> {
        if nodes.is_empty() {
            return Ok(());
        }
        self.view.refresh_changed().await
    }

    fn is_same_instance(&self, existing: &str, found: &ProviderId) -> bool {
        matches!(
            (OpenStackProviderId::parse(existing), OpenStackProviderId::parse(found.as_str())),
            (Ok(a), Ok(b)) if a.server == b.server
        )
    }
}
