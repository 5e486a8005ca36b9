//! The Neutron seam: the project's ports (paged), slimmed to the fields node addresses need.

use serde::Deserialize;
use stratus_cloud::CloudError;

use stratus_openstack_api::client::ServiceClient;

/// A fixed IP of a port.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FixedIp {
    /// The address.
    pub ip_address: String,
}

/// A port, as node addresses need it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Port {
    /// Its ID.
    pub id: String,
    /// The server it is attached to (empty when detached).
    #[serde(default)]
    pub device_id: String,
    /// `compute:<az>` for server ports.
    #[serde(default)]
    pub device_owner: String,
    /// `ACTIVE`, `DOWN`…
    #[serde(default)]
    pub status: String,
    /// Its fixed IPs, in order.
    #[serde(default)]
    pub fixed_ips: Vec<FixedIp>,
}

/// Ports per page.
pub const PAGE_SIZE: usize = 1000;

/// Neutron.
#[derive(Debug, Clone)]
pub struct Neutron {
    client: ServiceClient,
}

impl Neutron {
    /// Neutron through `client`.
    pub fn new(client: ServiceClient) -> Neutron {
        Neutron { client }
    }

    /// The ports attached to one server.
    pub async fn ports_of(&self, server_id: &str) -> Result<Vec<Port>, CloudError> {
        let path = format!(
            "/v2.0/ports?device_id={}&fields=id&fields=device_id&fields=device_owner&fields=status&fields=fixed_ips",
            crate::compute::encode(server_id)
        );
        self.client.list("ListPorts", &path, "ports").await
    }

    /// Every port of the project attached to a server (only the fields read are asked for).
    pub async fn list_server_ports(&self) -> Result<Vec<Port>, CloudError> {
        let path = format!(
            "/v2.0/ports?limit={PAGE_SIZE}&fields=id&fields=device_id&fields=device_owner&fields=status&fields=fixed_ips"
        );
        let ports: Vec<Port> = self.client.list("ListPorts", &path, "ports").await?;
        Ok(ports
            .into_iter()
            .filter(|p| p.device_owner.starts_with("compute:") && !p.device_id.is_empty())
            .collect())
    }
}
