//! The Neutron calls of the route controller: a router's routes, atomic route additions and
//! removals, and the allowed-address-pairs of the port holding a node address.

use http::Method;
use serde_json::{json, Value};
use stratus_cloud::CloudError;

use crate::compute::encode;
use stratus_openstack_api::client::ServiceClient;

/// Neutron routers and ports.
#[derive(Debug, Clone)]
pub struct Router {
    client: ServiceClient,
}

impl Router {
    /// Over `client` (Neutron).
    pub fn new(client: ServiceClient) -> Router {
        Router { client }
    }

    /// The router's routes as `(destination, nexthop)`.
    pub async fn routes(&self, router: &str) -> Result<Vec<(String, String)>, CloudError> {
        let v: Value = self
            .client
            .get("GetRouter", &format!("/v2.0/routers/{}", encode(router)))
            .await?;
        Ok(v["router"]["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some((
                    r["destination"].as_str()?.to_owned(),
                    r["nexthop"].as_str()?.to_owned(),
                ))
            })
            .collect())
    }

    /// The `device_owner` of the port holding each fixed IP (one listing).
    pub async fn port_owners(
        &self,
    ) -> Result<std::collections::HashMap<String, String>, CloudError> {
        let ports: Vec<Value> = self
            .client
            .list(
                "ListPorts",
                "/v2.0/ports?limit=1000&fields=id&fields=fixed_ips&fields=device_owner",
                "ports",
            )
            .await?;
        let mut out = std::collections::HashMap::new();
        for port in &ports {
            let owner = port["device_owner"].as_str().unwrap_or_default();
            for ip in port["fixed_ips"].as_array().into_iter().flatten() {
                if let Some(a) = ip["ip_address"].as_str() {
                    out.insert(a.to_owned(), owner.to_owned());
                }
            }
        }
        Ok(out)
    }

    /// Adds (or removes) one route, atomically on the server.
    pub async fn change(
        &self,
        router: &str,
        destination: &str,
        nexthop: &str,
        add: bool,
    ) -> Result<(), CloudError> {
        let action = if add {
            "add_extraroutes"
        } else {
            "remove_extraroutes"
        };
        let body =
            json!({"router": {"routes": [{"destination": destination, "nexthop": nexthop}]}});
        self.client
            .send(
                "UpdateRouterRoutes",
                Method::PUT,
                &format!("/v2.0/routers/{}/{action}", encode(router)),
                Some(&body),
            )
            .await
            .map(drop)
    }

    /// Allows (or stops allowing) `cidr` on the port holding `address`; no port, nothing to do.
    pub async fn allow_on_port(
        &self,
        address: &str,
        cidr: &str,
        allow: bool,
    ) -> Result<(), CloudError> {
        let ports: Vec<Value> = self
            .client
            .list(
                "ListPorts",
                &format!(
                    "/v2.0/ports?fixed_ips=ip_address%3D{}&fields=id&fields=allowed_address_pairs",
                    encode(address)
                ),
                "ports",
            )
            .await?;
        for port in ports {
            let mut pairs: Vec<Value> = port["allowed_address_pairs"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let has = pairs.iter().any(|p| p["ip_address"] == cidr);
            if has == allow {
                continue;
            }
            if allow {
                pairs.push(json!({"ip_address": cidr}));
            } else {
                pairs.retain(|p| p["ip_address"] != cidr);
            }
            let id = port["id"].as_str().unwrap_or_default();
            self.client
                .send(
                    "UpdatePort",
                    Method::PUT,
                    &format!("/v2.0/ports/{}", encode(id)),
                    Some(&json!({"port": {"allowed_address_pairs": pairs}})),
                )
                .await?;
        }
        Ok(())
    }
}
