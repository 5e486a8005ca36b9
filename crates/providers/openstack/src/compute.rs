//! The Nova seam: the project's servers (paged `GET /servers/detail`), one server by ID, and a
//! flavor's name, read into the few fields the controllers use.

use std::collections::BTreeMap;

use serde::Deserialize;
use stratus_cloud::CloudError;

use stratus_openstack_api::client::errors::is_not_found;
use stratus_openstack_api::client::service::Listing;
use stratus_openstack_api::client::ServiceClient;

/// Servers per page of the listing.
pub const PAGE_SIZE: usize = 1000;

/// Nova's server statuses the controllers care about.
pub mod status {
    /// Being built: exists, no addresses yet.
    pub const BUILD: &str = "BUILD";
    /// Stopped: exists, shut down.
    pub const SHUTOFF: &str = "SHUTOFF";
    /// Deleted (soft-deleted servers of some clouds).
    pub const DELETED: &str = "DELETED";
    /// Being deleted.
    pub const SOFT_DELETED: &str = "SOFT_DELETED";
}

/// The flavor as a server carries it (microversion 2.47+: its name as `original_name`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ServerFlavor {
    /// The flavor's name at boot time (2.47+).
    #[serde(default)]
    pub original_name: Option<String>,
    /// The flavor's ID (before 2.47).
    #[serde(default)]
    pub id: Option<String>,
}

/// One address of a server, from `addresses`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerAddress {
    /// The IP address.
    pub addr: String,
    /// `fixed` or `floating`.
    #[serde(rename = "OS-EXT-IPS:type", default)]
    pub ip_type: String,
}

/// A server, slimmed to what the controllers read.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Server {
    /// Its UUID.
    pub id: String,
    /// Its name (nodes are often named after it).
    pub name: String,
    /// `BUILD`, `ACTIVE`, `SHUTOFF`, `ERROR`, `DELETED`…
    pub status: String,
    /// Its flavor.
    #[serde(default)]
    pub flavor: ServerFlavor,
    /// Its availability zone.
    #[serde(rename = "OS-EXT-AZ:availability_zone", default)]
    pub availability_zone: String,
    /// Addresses by network name.
    #[serde(default)]
    pub addresses: BTreeMap<String, Vec<ServerAddress>>,
    /// `accessIPv4`.
    #[serde(rename = "accessIPv4", default)]
    pub access_ipv4: String,
    /// `accessIPv6`.
    #[serde(rename = "accessIPv6", default)]
    pub access_ipv6: String,
    /// Metadata (`hostname` becomes a Hostname address, as upstream).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The host's opaque ID (the `topology.openstack.org/host-id` label).
    #[serde(rename = "hostId", default)]
    pub host_id: String,
}

impl Server {
    /// Whether the server is gone for good.
    pub fn is_gone(&self) -> bool {
        self.status == status::DELETED || self.status == status::SOFT_DELETED
    }

    /// Whether it is shut down.
    pub fn is_shutdown(&self) -> bool {
        self.status == status::SHUTOFF
    }
}

#[derive(Deserialize)]
struct OneServer {
    server: Server,
}

#[derive(Deserialize)]
struct OneFlavor {
    flavor: Flavor,
}

#[derive(Deserialize)]
struct Flavor {
    name: String,
}

/// Nova.
#[derive(Debug, Clone)]
pub struct Nova {
    client: ServiceClient,
}

impl Nova {
    /// Nova through `client` (which sends the microversion).
    pub fn new(client: ServiceClient) -> Nova {
        Nova { client }
    }

    /// Every server of the project, with Nova's clock reading when it answered.
    pub async fn list_servers(&self) -> Result<Listing<Server>, CloudError> {
        self.client
            .list_dated(
                "ListServers",
                &format!("/servers/detail?limit={PAGE_SIZE}"),
                "servers",
            )
            .await
    }

    /// The project's servers that changed at or after `since` (Nova's clock), deleted ones
    /// included (status `DELETED`): one request however many servers the caller cares about.
    pub async fn servers_changed_since(
        &self,
        since: jiff::Timestamp,
    ) -> Result<Listing<Server>, CloudError> {
        // Whole seconds in UTC, as Nova's ISO 8601 parser takes them everywhere.
        let since = jiff::Timestamp::from_second(since.as_second()).unwrap_or(since);
        self.client
            .list_dated(
                "ListChangedServers",
                &format!(
                    "/servers/detail?changes-since={}&limit={PAGE_SIZE}",
                    encode(&since.to_string())
                ),
                "servers",
            )
            .await
    }

    /// One server; `None` when Nova answers 404.
    pub async fn get_server(&self, id: &str) -> Result<Option<Server>, CloudError> {
        match self
            .client
            .get::<OneServer>("GetServer", &format!("/servers/{}", encode(id)))
            .await
        {
            Ok(s) => Ok(Some(s.server)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A flavor's name; `None` when it no longer exists.
    pub async fn flavor_name(&self, id: &str) -> Result<Option<String>, CloudError> {
        match self
            .client
            .get::<OneFlavor>("GetFlavor", &format!("/flavors/{}", encode(id)))
            .await
        {
            Ok(f) => Ok(Some(f.flavor.name)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Percent-encodes a path segment (IDs come from Nodes, which anyone may write).
pub fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_nova_server() {
        let body = r#"{"server": {"id": "8f1c", "name": "worker-1", "status": "SHUTOFF",
            "flavor": {"original_name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20, "extra_specs": {}},
            "OS-EXT-AZ:availability_zone": "nova", "hostId": "abc",
            "accessIPv4": "", "accessIPv6": "",
            "metadata": {"hostname": "w1"},
            "addresses": {"private": [{"addr": "10.0.0.5", "version": 4, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01"},
                                      {"addr": "172.24.4.9", "version": 4, "OS-EXT-IPS:type": "floating"}]}}}"#;
        let s: OneServer = serde_json::from_str(body).unwrap();
        let s = s.server;
        assert_eq!(s.flavor.original_name.as_deref(), Some("m1.small"));
        assert_eq!(s.availability_zone, "nova");
        assert!(s.is_shutdown() && !s.is_gone());
        assert_eq!(s.addresses["private"][1].ip_type, "floating");
        assert_eq!(s.metadata["hostname"], "w1");
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode("8f1c-aa"), "8f1c-aa");
        assert_eq!(encode("../x?y"), "..%2Fx%3Fy");
    }
}
