//! Pure decisions of the cloud-node controller: which patches turn a node into an initialised one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde_json::{json, Value};
use stratus_cloud::{InstanceMetadata, NodeAddress, NodeAddressType};

use crate::node_view::{node_info, provider_id, status_addresses, taints};
use crate::TAINT_UNINITIALIZED;

/// Stable and legacy label keys written from instance metadata.
pub mod labels {
    /// The zone label.
    pub const ZONE: &str = "topology.kubernetes.io/zone";
    /// The region label.
    pub const REGION: &str = "topology.kubernetes.io/region";
    /// The instance-type label.
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    /// The legacy (beta) zone label, still written for older consumers.
    pub const LEGACY_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
    /// The legacy (beta) region label.
    pub const LEGACY_REGION: &str = "failure-domain.beta.kubernetes.io/region";
    /// The legacy (beta) instance-type label.
    pub const LEGACY_INSTANCE_TYPE: &str = "beta.kubernetes.io/instance-type";
}

/// Why a node cannot be initialised from what the cloud answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "node IP {0} (alpha.kubernetes.io/provided-node-ip) is not among the instance's addresses"
    )]
    /// The kubelet's node IP is not an address of the instance.
    ProvidedIpNotFound(String),
    #[error("node has providerID {have:?} but its instance is {want:?}; providerID is immutable")]
    /// The node names another instance than the one found.
    ProviderIdMismatch {
        /// The node's providerID.
        have: String,
        /// The instance found.
        want: String,
    },
}

impl PlanError {
    /// Short category for Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            PlanError::ProvidedIpNotFound(_) => "ProvidedNodeIPNotFound",
            PlanError::ProviderIdMismatch { .. } => "ProviderIDMismatch",
        }
    }
}

/// The writes that initialise one node.
#[derive(Debug, Clone, PartialEq)]
pub struct InitPlan {
    /// Merge patch for `nodes/status` (addresses), when they change.
    pub status_patch: Option<Value>,
    /// Merge patch for the node: providerID, labels, taints (guarded by resourceVersion).
    pub node_patch: Value,
}

/// The addresses to publish: the cloud's, with the kubelet's node IP first and its hostname kept.
pub fn desired_addresses(
    node: &Node,
    cloud: &[NodeAddress],
) -> Result<Vec<NodeAddress>, PlanError> {
    let mut out: Vec<NodeAddress> = cloud.to_vec();
    if let Some(ip) = node_info(node).provided_node_ip {
        let pos = out
            .iter()
            .position(|a| {
                a.address == ip
                    && matches!(
                        a.kind,
                        NodeAddressType::InternalIP | NodeAddressType::ExternalIP
                    )
            })
            .ok_or_else(|| PlanError::ProvidedIpNotFound(ip.clone()))?;
        let first = out.remove(pos);
        out.insert(0, first);
    }
    if !out.iter().any(|a| a.kind == NodeAddressType::Hostname) {
        if let Some(h) = status_addresses(node)
            .into_iter()
            .find(|a| a.kind == NodeAddressType::Hostname)
        {
            out.push(h);
        }
    }
    Ok(out)
}

fn addresses_json(addrs: &[NodeAddress]) -> Value {
    Value::Array(
        addrs
            .iter()
            .map(|a| json!({"type": a.kind.as_str(), "address": a.address}))
            .collect(),
    )
}

/// A `nodes/status` merge patch when the published addresses differ from `desired`.
pub fn plan_address_update(node: &Node, desired: &[NodeAddress]) -> Option<Value> {
    (status_addresses(node) != desired)
        .then(|| json!({"status": {"addresses": addresses_json(desired)}}))
}

/// Labels written from instance metadata (stable, legacy and provider-specific).
pub fn metadata_labels(meta: &InstanceMetadata) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        if !v.is_empty() {
            l.insert(k.to_string(), v.to_string());
        }
    };
    put(labels::INSTANCE_TYPE, &meta.instance_type);
    put(labels::LEGACY_INSTANCE_TYPE, &meta.instance_type);
    put(labels::ZONE, &meta.zone);
    put(labels::LEGACY_ZONE, &meta.zone);
    put(labels::REGION, &meta.region);
    put(labels::LEGACY_REGION, &meta.region);
    for (k, v) in &meta.additional_labels {
        put(k, v);
    }
    l
}

/// The patches that initialise `node` from `meta`; `same_instance` tells whether a providerID
/// already on the node names the instance of `meta` (the provider decides: clouds write one
/// instance several ways).
pub fn plan_initialization(
    node: &Node,
    meta: &InstanceMetadata,
    same_instance: impl Fn(&str) -> bool,
) -> Result<InitPlan, PlanError> {
    if let Some(have) = provider_id(node) {
        if !same_instance(have) {
            return Err(PlanError::ProviderIdMismatch {
                have: have.to_string(),
                want: meta.provider_id.to_string(),
            });
        }
    }
    let desired = desired_addresses(node, &meta.node_addresses)?;
    let remaining: Vec<_> = taints(node)
        .iter()
        .filter(|t| t.key != TAINT_UNINITIALIZED)
        .collect();
    let mut spec = json!({"taints": remaining});
    if provider_id(node).is_none() {
        spec["providerID"] = json!(meta.provider_id.as_str());
    }
    Ok(InitPlan {
        status_patch: plan_address_update(node, &desired),
        node_patch: json!({
            "metadata": {
                "resourceVersion": node.metadata.resource_version,
                "labels": metadata_labels(meta),
            },
            "spec": spec,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress as K8sAddress, NodeSpec, NodeStatus, Taint};
    use stratus_cloud::ProviderId;

    fn meta() -> InstanceMetadata {
        InstanceMetadata {
            provider_id: ProviderId::parse("aws:///us-east-1a/i-0abc").unwrap(),
            instance_type: "m5.large".into(),
            node_addresses: vec![
                NodeAddress::new(NodeAddressType::InternalIP, "10.0.0.5"),
                NodeAddress::new(NodeAddressType::InternalIP, "10.0.0.6"),
                NodeAddress::new(NodeAddressType::InternalDNS, "ip-10-0-0-5.ec2.internal"),
                NodeAddress::new(NodeAddressType::Hostname, "ip-10-0-0-5.ec2.internal"),
            ],
            zone: "us-east-1a".into(),
            region: "us-east-1".into(),
            additional_labels: [(
                "topology.k8s.aws/zone-id".to_string(),
                "use1-az1".to_string(),
            )]
            .into(),
        }
    }

    fn tainted_node() -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("worker-1".into());
        n.metadata.resource_version = Some("42".into());
        n.spec = Some(NodeSpec {
            taints: Some(vec![
                Taint {
                    key: TAINT_UNINITIALIZED.into(),
                    value: Some("true".into()),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                },
                Taint {
                    key: "dedicated".into(),
                    value: Some("db".into()),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                },
            ]),
            ..NodeSpec::default()
        });
        n
    }

    #[test]
    fn initialisation_sets_provider_id_labels_and_drops_only_our_taint() {
        let plan = plan_initialization(&tainted_node(), &meta(), same).unwrap();
        let p = &plan.node_patch;
        assert_eq!(p["metadata"]["resourceVersion"], "42");
        assert_eq!(p["spec"]["providerID"], "aws:///us-east-1a/i-0abc");
        assert_eq!(p["spec"]["taints"].as_array().unwrap().len(), 1);
        assert_eq!(p["spec"]["taints"][0]["key"], "dedicated");
        let l = &p["metadata"]["labels"];
        assert_eq!(l[labels::ZONE], "us-east-1a");
        assert_eq!(l[labels::REGION], "us-east-1");
        assert_eq!(l[labels::INSTANCE_TYPE], "m5.large");
        assert_eq!(l[labels::LEGACY_ZONE], "us-east-1a");
        assert_eq!(l["topology.k8s.aws/zone-id"], "use1-az1");
        let s = plan.status_patch.unwrap();
        assert_eq!(s["status"]["addresses"].as_array().unwrap().len(), 4);
        assert_eq!(s["status"]["addresses"][0]["address"], "10.0.0.5");
    }

    #[test]
    fn provided_node_ip_goes_first_and_must_exist() {
        let mut n = tainted_node();
        n.metadata.annotations = Some(
            [(
                crate::ANNOTATION_PROVIDED_NODE_IP.to_string(),
                "10.0.0.6".to_string(),
            )]
            .into(),
        );
        let got = desired_addresses(&n, &meta().node_addresses).unwrap();
        assert_eq!(got[0].address, "10.0.0.6");
        assert_eq!(got.len(), 4);
        n.metadata.annotations = Some(
            [(
                crate::ANNOTATION_PROVIDED_NODE_IP.to_string(),
                "192.168.9.9".to_string(),
            )]
            .into(),
        );
        assert_eq!(
            plan_initialization(&n, &meta(), same).unwrap_err(),
            PlanError::ProvidedIpNotFound("192.168.9.9".into())
        );
    }

    #[test]
    fn kubelet_hostname_is_kept_when_cloud_has_none() {
        let mut n = tainted_node();
        n.status = Some(NodeStatus {
            addresses: Some(vec![K8sAddress {
                type_: "Hostname".into(),
                address: "worker-1".into(),
            }]),
            ..NodeStatus::default()
        });
        let cloud = vec![NodeAddress::new(NodeAddressType::InternalIP, "10.0.0.5")];
        let got = desired_addresses(&n, &cloud).unwrap();
        assert_eq!(got.last().unwrap().address, "worker-1");
    }

    /// The provider's answer, as a table: the zone-less form names the same instance.
    fn same(existing: &str) -> bool {
        existing == "aws:///us-east-1a/i-0abc" || existing == "aws:////i-0abc"
    }

    #[test]
    fn existing_provider_id_is_kept_or_rejected() {
        let mut n = tainted_node();
        n.spec.as_mut().unwrap().provider_id = Some("aws:////i-0abc".into());
        let plan = plan_initialization(&n, &meta(), same).unwrap();
        assert!(plan.node_patch["spec"].get("providerID").is_none());
        n.spec.as_mut().unwrap().provider_id = Some("aws:///us-east-1a/i-0ffff".into());
        assert!(matches!(
            plan_initialization(&n, &meta(), same),
            Err(PlanError::ProviderIdMismatch { .. })
        ));
    }

    #[test]
    fn address_update_only_when_changed() {
        let mut n = tainted_node();
        let addrs = meta().node_addresses;
        assert!(plan_address_update(&n, &addrs).is_some());
        n.status = Some(NodeStatus {
            addresses: Some(
                addrs
                    .iter()
                    .map(|a| K8sAddress {
                        type_: a.kind.as_str().into(),
                        address: a.address.clone(),
                    })
                    .collect(),
            ),
            ..NodeStatus::default()
        });
        assert!(plan_address_update(&n, &addrs).is_none());
    }
}
