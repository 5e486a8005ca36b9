//! The cluster's Nodes as a watched store (one list+watch, no API call per message): find the
//! node of an instance by PrivateDnsName (name or `kubernetes.io/hostname`, short name too, as
//! upstream) or by providerID (`--use-provider-id`), readiness for launch hooks, and the
//! node facts queue-mode Events carry as annotations.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use super::messages::{InstanceInfo, NodeRef};

/// The node store.
#[derive(Clone)]
pub struct NodeIndex {
    store: Store<Node>,
}

impl NodeIndex {
    /// Starts watching Nodes on the current runtime.
    pub fn start(client: Client) -> NodeIndex {
        let (store, writer) = reflector::store();
        let stream = watcher(Api::<Node>::all(client), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects();
        tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(item) = stream.next().await {
                if let Err(e) = item {
                    tracing::warn!(error = %e, "watching nodes");
                }
            }
        });
        NodeIndex { store }
    }

    /// Waits for the first complete list.
    pub async fn wait_synced(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    fn all(&self) -> Vec<Arc<Node>> {
        self.store.state()
    }

    /// The instance ids in the Nodes' providerIDs.
    pub fn instance_ids(&self) -> Vec<String> {
        self.all()
            .iter()
            .filter_map(|n| {
                n.spec
                    .as_ref()?
                    .provider_id
                    .as_deref()
                    .and_then(instance_id)
            })
            .map(str::to_owned)
            .collect()
    }

    /// The node of an instance.
    pub fn find(&self, info: &InstanceInfo, use_provider_id: bool) -> Option<NodeRef> {
        let nodes = self.all();
        let node = if use_provider_id {
            nodes.iter().find(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(instance_id)
                    == Some(info.instance_id.as_str())
            })
        } else {
            let dns = info.private_dns_name.as_str();
            if dns.is_empty() {
                return None;
            }
            let short = dns.split('.').next().unwrap_or(dns);
            nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(dns))
                .or_else(|| {
                    nodes.iter().find(|n| {
                        n.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("kubernetes.io/hostname"))
                            .is_some_and(|h| h == dns || h == short)
                    })
                })
        }?;
        Some(NodeRef {
            name: node.metadata.name.clone().unwrap_or_default(),
            ready: is_ready(node),
        })
    }

    /// Upstream's queue-mode Event annotations from a node.
    pub fn annotations(&self, name: &str) -> BTreeMap<String, String> {
        let Some(node) = self
            .all()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
        else {
            return BTreeMap::new();
        };
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let mut a = BTreeMap::new();
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        a.insert(
            "availability-zone".into(),
            label("topology.kubernetes.io/zone"),
        );
        a.insert(
            "instance-type".into(),
            label("node.kubernetes.io/instance-type"),
        );
        a.insert("region".into(), label("topology.kubernetes.io/region"));
        a.insert("local-hostname".into(), name.to_owned());
        let provider = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        a.insert(
            "instance-id".into(),
            provider.rsplit('/').next().unwrap_or_default().to_owned(),
        );
        for address in node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default()
        {
            let key = match address.type_.as_str() {
                "InternalIP" => "local-ipv4",
                "ExternalDNS" => "public-hostname",
                "ExternalIP" => "public-ipv4",
                _ => continue,
            };
            a.entry(key.to_owned()).or_insert(address.address);
        }
        a
    }
}

/// `aws:///us-east-1a/i-0abc` → `i-0abc`.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix("aws://")
        .and_then(|rest| rest.rsplit('/').next())
        .filter(|id| id.starts_with("i-"))
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("aws:///i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("gce://p/z/i-1"), None);
        assert_eq!(instance_id("aws:///us-east-1a/fargate-x"), None);
    }
}
