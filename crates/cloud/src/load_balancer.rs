//! The LoadBalancer capability: what the generic service controller asks a cloud.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::CloudError;

/// Transport protocol of a Service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
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
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
    pub node_port: u16,
}

/// Which Service a load balancer belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
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

/// A node that may receive load-balanced traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNode {
    pub name: String,
    pub provider_id: String,
    pub labels: BTreeMap<String, String>,
}

/// Everything a provider needs to build or update one load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerRequest {
    pub cluster_name: String,
    pub service: ServiceRef,
    pub ports: Vec<ServicePort>,
    pub annotations: BTreeMap<String, String>,
    pub source_ranges: Vec<String>,
    /// `externalTrafficPolicy: Local`: health checks go to `health_check_node_port`.
    pub local_traffic_only: bool,
    pub health_check_node_port: Option<u16>,
    /// `spec.loadBalancerIP`, which some clouds reject.
    pub requested_ip: Option<String>,
    pub nodes: Vec<TargetNode>,
}

/// One address of a load balancer, as written to `status.loadBalancer.ingress`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ingress {
    pub hostname: Option<String>,
    pub ip: Option<String>,
}

/// Load balancers for `type: LoadBalancer` Services, as `k8s.io/cloud-provider`'s interface.
///
/// Contracts: `ensure` is idempotent and may be interrupted at any point and called again;
/// `ensure_deleted` succeeds when nothing is left (including when nothing existed).
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The ingress of the existing load balancer, if there is one.
    async fn get(&self, request: &LoadBalancerRequest) -> Result<Option<Vec<Ingress>>, CloudError>;
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
