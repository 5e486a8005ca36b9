//! Read-only helpers over `core/v1 Node`: the cloud view of a node, taints, readiness.

use k8s_openapi::api::core::v1::{Node, Taint};
use stratus_cloud::{NodeAddress, NodeAddressType, NodeInfo};

use crate::ANNOTATION_PROVIDED_NODE_IP;

/// The node as a provider sees it.
pub fn node_info(node: &Node) -> NodeInfo {
    NodeInfo {
        name: node.metadata.name.clone().unwrap_or_default(),
        provider_id: provider_id(node).map(str::to_string),
        addresses: status_addresses(node),
        provided_node_ip: node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_PROVIDED_NODE_IP))
            .filter(|v| !v.is_empty())
            .cloned(),
    }
}

/// `spec.providerID`, when set and non-empty.
pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
}

/// `status.addresses` with known types.
pub fn status_addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|list| {
            list.iter()
                .filter_map(|a| {
                    Some(NodeAddress::new(
                        NodeAddressType::parse(&a.type_)?,
                        &a.address,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `spec.taints`.
pub fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or(&[])
}

/// Whether the node carries a taint with this key.
pub fn has_taint(node: &Node, key: &str) -> bool {
    taints(node).iter().any(|t| t.key == key)
}

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        NodeAddress as K8sAddress, NodeCondition, NodeSpec, NodeStatus,
    };

    #[test]
    fn reads_node_fields() {
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        node.metadata.annotations = Some(
            [(
                ANNOTATION_PROVIDED_NODE_IP.to_string(),
                "10.0.0.9".to_string(),
            )]
            .into(),
        );
        node.spec = Some(NodeSpec {
            provider_id: Some(String::new()),
            taints: Some(vec![Taint {
                key: "a".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        });
        node.status = Some(NodeStatus {
            addresses: Some(vec![
                K8sAddress {
                    type_: "InternalIP".into(),
                    address: "10.0.0.9".into(),
                },
                K8sAddress {
                    type_: "Weird".into(),
                    address: "x".into(),
                },
            ]),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        let info = node_info(&node);
        assert_eq!(info.name, "n1");
        assert_eq!(info.provider_id, None, "empty providerID counts as unset");
        assert_eq!(info.addresses.len(), 1);
        assert_eq!(info.provided_node_ip.as_deref(), Some("10.0.0.9"));
        assert!(has_taint(&node, "a"));
        assert!(!has_taint(&node, "b"));
        assert!(!is_ready(&node));
    }
}
