//! The Neutron side of load balancers: floating IPs (found on the VIP port, by address, or
//! created with OCCM's description), the external network, and the subnets a VIP may use.

use http::Method;
use serde_json::{json, Value};
use stratus_cloud::CloudError;

use crate::compute::encode;
use stratus_openstack_api::client::errors::is_not_found;
use stratus_openstack_api::client::ServiceClient;

/// Neutron calls of the load balancers.
#[derive(Debug, Clone)]
pub struct FloatingIps {
    client: ServiceClient,
}

impl FloatingIps {
    /// Over `client` (Neutron).
    pub fn new(client: ServiceClient) -> FloatingIps {
        FloatingIps { client }
    }

    /// The Neutron client.
    pub fn client(&self) -> &ServiceClient {
        &self.client
    }

    /// The floating IPs on a port.
    pub async fn on_port(&self, port: &str) -> Result<Vec<Value>, CloudError> {
        self.client
            .list(
                "ListFloatingIps",
                &format!("/v2.0/floatingips?port_id={}", encode(port)),
                "floatingips",
            )
            .await
    }

    /// The floating IP with this address, if any.
    pub async fn by_address(&self, address: &str) -> Result<Option<Value>, CloudError> {
        let list: Vec<Value> = self
            .client
            .list(
                "ListFloatingIps",
                &format!("/v2.0/floatingips?floating_ip_address={}", encode(address)),
                "floatingips",
            )
            .await?;
        Ok(list.into_iter().next())
    }

    /// Every floating IP of the project.
    pub async fn all(&self) -> Result<Vec<Value>, CloudError> {
        self.client
            .list(
                "ListFloatingIps",
                "/v2.0/floatingips?limit=1000",
                "floatingips",
            )
            .await
    }

    /// Creates a floating IP on `network` (optionally in `subnet`, with `address`) for `port`.
    pub async fn create(
        &self,
        network: &str,
        subnet: Option<&str>,
        address: Option<&str>,
        port: &str,
        description: &str,
    ) -> Result<Value, CloudError> {
        let mut body =
            json!({"floating_network_id": network, "port_id": port, "description": description});
        if let Some(s) = subnet {
            body["subnet_id"] = json!(s);
        }
        if let Some(a) = address {
            body["floating_ip_address"] = json!(a);
        }
        let r = self
            .client
            .send(
                "CreateFloatingIp",
                Method::POST,
                "/v2.0/floatingips",
                Some(&json!({ "floatingip": body })),
            )
            .await?;
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        Ok(v["floatingip"].clone())
    }

    /// Points a floating IP at a port (None: detaches it).
    pub async fn associate(&self, fip: &str, port: Option<&str>) -> Result<(), CloudError> {
        self.client
            .send(
                "UpdateFloatingIp",
                Method::PUT,
                &format!("/v2.0/floatingips/{}", encode(fip)),
                Some(&json!({"floatingip": {"port_id": port}})),
            )
            .await
            .map(drop)
    }

    /// Changes a floating IP's description.
    pub async fn describe(&self, fip: &str, description: &str) -> Result<(), CloudError> {
        self.client
            .send(
                "UpdateFloatingIp",
                Method::PUT,
                &format!("/v2.0/floatingips/{}", encode(fip)),
                Some(&json!({"floatingip": {"description": description}})),
            )
            .await
            .map(drop)
    }

    /// Releases a floating IP (a missing one is fine).
    pub async fn delete(&self, fip: &str) -> Result<(), CloudError> {
        match self
            .client
            .send(
                "DeleteFloatingIp",
                Method::DELETE,
                &format!("/v2.0/floatingips/{}", encode(fip)),
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The first external network (`router:external=true`).
    pub async fn external_network(&self) -> Result<Option<String>, CloudError> {
        let list: Vec<Value> = self
            .client
            .list(
                "ListNetworks",
                "/v2.0/networks?router:external=true&fields=id",
                "networks",
            )
            .await?;
        Ok(list
            .first()
            .and_then(|n| n["id"].as_str())
            .map(str::to_owned))
    }

    /// The `(id, name)` of the subnets of `network`, filtered by a tag query `(key, tags)`.
    pub async fn subnets_of(
        &self,
        network: &str,
        tags: Option<(&str, &str)>,
    ) -> Result<Vec<(String, String)>, CloudError> {
        let mut path = format!(
            "/v2.0/subnets?network_id={}&fields=id&fields=name",
            encode(network)
        );
        if let Some((key, value)) = tags {
            path.push_str(&format!("&{key}={}", encode(value)));
        }
        let list: Vec<Value> = self.client.list("ListSubnets", &path, "subnets").await?;
        Ok(list
            .iter()
            .filter_map(|s| {
                Some((
                    s["id"].as_str()?.to_owned(),
                    s["name"].as_str().unwrap_or_default().to_owned(),
                ))
            })
            .collect())
    }

    /// Every subnet's `(id, cidr)`.
    pub async fn subnets(&self) -> Result<Vec<(String, String)>, CloudError> {
        let list: Vec<Value> = self
            .client
            .list(
                "ListSubnets",
                "/v2.0/subnets?fields=id&fields=cidr",
                "subnets",
            )
            .await?;
        Ok(list
            .iter()
            .filter_map(|s| Some((s["id"].as_str()?.to_owned(), s["cidr"].as_str()?.to_owned())))
            .collect())
    }
}
