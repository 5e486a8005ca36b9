//! The view of a Kubernetes Node that a provider needs to answer instance questions.

/// Kind of a node address, as in `core/v1 NodeAddressType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeAddressType {
    /// The host name.
    Hostname,
    /// An IP address inside the cluster's network.
    InternalIP,
    /// An IP address reachable from outside.
    ExternalIP,
    /// A DNS name inside the cluster's network.
    InternalDNS,
    /// A DNS name reachable from outside.
    ExternalDNS,
}

impl NodeAddressType {
    /// The Kubernetes API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeAddressType::Hostname => "Hostname",
            NodeAddressType::InternalIP => "InternalIP",
            NodeAddressType::ExternalIP => "ExternalIP",
            NodeAddressType::InternalDNS => "InternalDNS",
            NodeAddressType::ExternalDNS => "ExternalDNS",
        }
    }

    /// Parses the Kubernetes API spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Hostname" => NodeAddressType::Hostname,
            "InternalIP" => NodeAddressType::InternalIP,
            "ExternalIP" => NodeAddressType::ExternalIP,
            "InternalDNS" => NodeAddressType::InternalDNS,
            "ExternalDNS" => NodeAddressType::ExternalDNS,
            _ => return None,
        })
    }
}

/// One address of a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    /// What kind of address.
    pub kind: NodeAddressType,
    /// The address itself.
    pub address: String,
}

impl NodeAddress {
    /// Builds an address.
    pub fn new(kind: NodeAddressType, address: impl Into<String>) -> Self {
        Self {
            kind,
            address: address.into(),
        }
    }
}

/// What a provider may use to find the instance behind a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `spec.providerID`, when set.
    pub provider_id: Option<String>,
    /// Addresses the kubelet reported in `status.addresses`.
    pub addresses: Vec<NodeAddress>,
    /// The kubelet's `alpha.kubernetes.io/provided-node-ip` annotation, when set.
    pub provided_node_ip: Option<String>,
}

impl NodeInfo {
    /// A node known only by name.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// IPs the node is known by: the provided node IP first, then reported internal IPs.
    pub fn known_ips(&self) -> Vec<&str> {
        let mut ips: Vec<&str> = self.provided_node_ip.iter().map(String::as_str).collect();
        for a in &self.addresses {
            if a.kind == NodeAddressType::InternalIP && !ips.contains(&a.address.as_str()) {
                ips.push(&a.address);
            }
        }
        ips
    }
}
