//! The LoadBalancer capability: what the generic service controller asks a cloud.

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::{CloudError, NodeAddress, ServiceKey};

/// Transport protocol of a Service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// Parses the Kubernetes spelling (`TCP`, `UDP`, `SCTP`); unset means TCP.
    pub fn parse(s: Option<&str>) -> Option<Protocol> {
        match s.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }
}

/// One port a load balancer forwards to a node port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// The port's name (may be empty for a single-port Service).
    pub name: String,
    /// Its transport protocol.
    pub protocol: Protocol,
    /// The port clients connect to on the load balancer.
    pub port: u16,
    /// The node port traffic is forwarded to.
    pub node_port: u16,
}

/// Which Service a load balancer belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceRef {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: load-balancer names derive from it.
    pub uid: String,
}

impl ServiceRef {
    /// The upstream default load-balancer name: `a` + the UID without dashes, cut to 32 chars.
    ///
    /// UIDs are UUIDs, so only dashes are dropped in practice; anything else that is not an ASCII
    /// letter or digit (which no AWS load-balancer name may hold) is dropped as well, so the cut
    /// never splits a character.
    pub fn default_load_balancer_name(&self) -> String {
        std::iter::once('a')
            .chain(self.uid.chars().filter(char::is_ascii_alphanumeric))
            .take(32)
            .collect()
    }
}

impl ServiceRef {
    /// The Service's key, as re-sync requests name it.
    pub fn key(&self) -> ServiceKey {
        ServiceKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// A node that may receive load-balanced traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNode {
    /// `metadata.name`.
    pub name: String,
    /// `spec.providerID`.
    pub provider_id: String,
    /// `metadata.labels` (some clouds select targets by label).
    pub labels: BTreeMap<String, String>,
    /// `status.addresses` (members of IP-based load balancers are node addresses).
    pub addresses: Vec<NodeAddress>,
}

/// Everything a provider needs to build or update one load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerRequest {
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The Service.
    pub service: ServiceRef,
    /// The ports to forward.
    pub ports: Vec<ServicePort>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.loadBalancerSourceRanges`.
    pub source_ranges: Vec<String>,
    /// `externalTrafficPolicy: Local`: health checks go to `health_check_node_port`.
    pub local_traffic_only: bool,
    /// `spec.healthCheckNodePort`.
    pub health_check_node_port: Option<u16>,
    /// `spec.loadBalancerIP`, which some clouds reject.
    pub requested_ip: Option<String>,
    /// `spec.externalIPs`.
    pub external_ips: Vec<String>,
    /// `spec.loadBalancerClass` (unset, or the class this controller serves).
    pub load_balancer_class: Option<String>,
    /// The nodes that receive traffic, sorted by name.
    pub nodes: Vec<TargetNode>,
}

/// One address of a load balancer, as written to `status.loadBalancer.ingress`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ingress {
    /// A DNS name.
    pub hostname: Option<String>,
    /// An IP address.
    pub ip: Option<String>,
}

/// Load balancers for `type: LoadBalancer` Services, as `k8s.io/cloud-provider`'s interface.
///
/// Contracts:
/// - `ensure` is idempotent and may be interrupted at any point and called again;
/// - `ensure_deleted` succeeds when nothing is left (including when nothing existed);
/// - a load balancer that is still being built or changed answers [`CloudError::Pending`] with
///   when to look again: the controller requeues without a Warning Event and without holding a
///   worker while it waits;
/// - a provider that learns of a change in its cloud (an address appeared) may ask for a
///   Service to be synced again through [`LoadBalancer::resync_requests`];
/// - a provider whose `externalTrafficPolicy: Local` targets depend on where endpoints run says
///   so through [`LoadBalancer::targets_follow_endpoints`].
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// Creates or updates the load balancer and returns its ingress.
    async fn ensure(&self, request: &LoadBalancerRequest) -> Result<Vec<Ingress>, CloudError>;
    /// Brings the targets up to `request.nodes`, registering and deregistering only the change.
    /// Returns whether anything changed.
    async fn update_targets(&self, request: &LoadBalancerRequest) -> Result<bool, CloudError>;
    /// Deletes everything made for the Service.
    async fn ensure_deleted(
        &self,
        cluster_name: &str,
        service: &ServiceRef,
    ) -> Result<(), CloudError>;
    /// Deletes what was made for Services that no longer exist: everything this cluster owns
    /// whose Service is not in `live`. Returns how many load balancers were removed.
    async fn reap(&self, _cluster_name: &str, _live: &[ServiceRef]) -> Result<usize, CloudError> {
        Ok(0)
    }
    /// Services the provider wants synced again, as they come; `None` when it never asks.
    /// Each call subscribes anew.
    fn resync_requests(&self) -> Option<BoxStream<'static, ServiceKey>> {
        None
    }
    /// Whether the provider picks an `externalTrafficPolicy: Local` Service's targets by where
    /// its endpoints run (DVP probes kube-proxy's health check on each node): the service
    /// controller then syncs such a Service again when its EndpointSlices change, instead of
    /// waiting for the periodic pass.
    fn targets_follow_endpoints(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_matches_upstream_rule() {
        let s = ServiceRef {
            namespace: "ns".into(),
            name: "web".into(),
            uid: "3f2b7c1e-8d4a-4e5f-9a6b-0c1d2e3f4a5b".into(),
        };
        let n = s.default_load_balancer_name();
        assert_eq!(n, "a3f2b7c1e8d4a4e5f9a6b0c1d2e3f4a5");
        assert_eq!(n.len(), 32);
    }

    #[test]
    fn default_name_of_a_non_ascii_uid_does_not_panic() {
        // Regression: `String::truncate(32)` panicked when byte 32 fell inside a character.
        let s = ServiceRef {
            namespace: "ns".into(),
            name: "web".into(),
            uid: "0123456789012345678901234567890é-x".into(),
        };
        assert_eq!(
            s.default_load_balancer_name(),
            "a0123456789012345678901234567890"
        );
        let s = ServiceRef {
            uid: "ééé-1".into(),
            ..s
        };
        assert_eq!(s.default_load_balancer_name(), "a1");
    }

    #[test]
    fn protocols() {
        assert_eq!(Protocol::parse(None), Some(Protocol::Tcp));
        assert_eq!(Protocol::parse(Some("UDP")), Some(Protocol::Udp));
        assert_eq!(Protocol::parse(Some("tcp")), None);
    }
}
