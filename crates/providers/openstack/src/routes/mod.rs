//! Pod-network routes on the Neutron router of `[Route] router-id`: one extra route per node
//! pod CIDR to the node's address (IPv4 and IPv6), written with the atomic
//! `add_extraroutes`/`remove_extraroutes` calls (never a read-modify-write of the whole list
//! that could drop another writer's route), and the pod CIDR allowed on the node's port
//! (allowed-address-pairs) so Neutron's port security lets pod traffic through.
//!
//! A node's route target is its IPv4 InternalIP (else its first InternalIP); its IPv6 routes
//! point at its IPv6 InternalIP and are read back as the same target. A route's next hop is a
//! target when a server's port holds it, a blackhole when no port does, and anything else
//! (a router interface, a load balancer) otherwise, so those are never touched.

pub mod router;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use async_trait::async_trait;
use stratus_cloud::{
    Cidr, CloudError, NextHop, NodeAddressType, NodeInfo, Route, RouteTable, RouteTarget, Routes,
};

use router::Router;

/// The route capability over one router.
pub struct OpenStackRoutes {
    router_id: String,
    router: Router,
    /// Every address of each target (the IPv6 next hop of a target is found here).
    addresses: Mutex<HashMap<String, Vec<IpAddr>>>,
}

fn invalid(e: impl std::fmt::Display) -> CloudError {
    CloudError::InvalidInput(e.to_string())
}

/// The target and every InternalIP of a node (IPv4 first).
pub fn node_target(node: &NodeInfo) -> Option<(RouteTarget, Vec<IpAddr>)> {
    let mut ips: Vec<IpAddr> = node
        .addresses
        .iter()
        .filter(|a| a.kind == NodeAddressType::InternalIP)
        .filter_map(|a| a.address.parse().ok())
        .collect();
    ips.sort_by_key(|ip| ip.is_ipv6());
    let first = *ips.first()?;
    Some((RouteTarget(first.to_string()), ips))
}

/// What a next hop is: a server's address (a target), an address no port holds (a blackhole),
/// or anything else.
pub fn classify(hop: &str, owner: Option<&str>, target: impl Fn(&str) -> RouteTarget) -> NextHop {
    match owner {
        _ if hop.parse::<IpAddr>().is_err() => NextHop::Other(hop.to_owned()),
        None => NextHop::Blackhole,
        Some(o) if o.starts_with("compute:") => NextHop::Target(target(hop)),
        Some(o) => NextHop::Other(format!("{hop} ({o})")),
    }
}

impl OpenStackRoutes {
    /// Routes on `router_id` through Neutron.
    pub fn new(router_id: String, router: Router) -> OpenStackRoutes {
        OpenStackRoutes {
            router_id,
            router,
            addresses: Mutex::new(HashMap::new()),
        }
    }

    /// The next hop of `target` for a destination of this family.
    fn next_hop(&self, target: &RouteTarget, destination: &Cidr) -> Result<IpAddr, CloudError> {
        let primary: IpAddr = target.0.parse().map_err(invalid)?;
        if primary.is_ipv6() == destination.is_ipv6() {
            return Ok(primary);
        }
        self.addresses
            .lock()
            .expect("addresses lock")
            .get(&target.0)
            .and_then(|ips| ips.iter().find(|ip| ip.is_ipv6() == destination.is_ipv6()))
            .copied()
            .ok_or_else(|| {
                invalid(format!(
                    "node {target} has no {} InternalIP for {destination}",
                    if destination.is_ipv6() {
                        "IPv6"
                    } else {
                        "IPv4"
                    }
                ))
            })
    }

    /// The target owning a next-hop address.
    fn target_of(&self, hop: &str) -> RouteTarget {
        let addresses = self.addresses.lock().expect("addresses lock");
        addresses
            .iter()
            .find(|(_, ips)| ips.iter().any(|ip| ip.to_string() == hop))
            .map(|(t, _)| RouteTarget(t.clone()))
            .unwrap_or_else(|| RouteTarget(hop.to_owned()))
    }

    fn check_table(&self, table: &str) -> Result<(), CloudError> {
        if table == self.router_id {
            Ok(())
        } else {
            Err(invalid(format!("unknown route table {table}")))
        }
    }
}

#[async_trait]
impl Routes for OpenStackRoutes {
    fn route_target(&self, node: &NodeInfo) -> Result<RouteTarget, CloudError> {
        let (target, ips) = node_target(node)
            .ok_or_else(|| invalid(format!("node {} has no InternalIP yet", node.name)))?;
        self.addresses
            .lock()
            .expect("addresses lock")
            .insert(target.0.clone(), ips);
        Ok(target)
    }

    async fn route_tables(&self) -> Result<Vec<RouteTable>, CloudError> {
        let routes = self.router.routes(&self.router_id).await?;
        let owners = if routes.is_empty() {
            Default::default()
        } else {
            self.router.port_owners().await?
        };
        Ok(vec![RouteTable {
            id: self.router_id.clone(),
            routes: routes
                .into_iter()
                .filter_map(|(destination, hop)| {
                    let destination = Cidr::parse(&destination).ok()?;
                    let next_hop = classify(&hop, owners.get(&hop).map(String::as_str), |h| {
                        self.target_of(h)
                    });
                    Some(Route {
                        destination,
                        next_hop,
                    })
                })
                .collect(),
        }])
    }

    async fn prepare_target(&self, _target: &RouteTarget) -> Result<(), CloudError> {
        // Done per route: the allowed address pair names the pod CIDR.
        Ok(())
    }

    async fn create_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError> {
        self.check_table(table)?;
        let hop = self.next_hop(target, destination)?;
        self.router
            .allow_on_port(&hop.to_string(), &destination.to_string(), true)
            .await?;
        self.router
            .change(
                &self.router_id,
                &destination.to_string(),
                &hop.to_string(),
                true,
            )
            .await
    }

    async fn replace_route(
        &self,
        table: &str,
        destination: &Cidr,
        target: &RouteTarget,
    ) -> Result<(), CloudError> {
        self.delete_route(table, destination).await?;
        self.create_route(table, destination, target).await
    }

    async fn delete_route(&self, table: &str, destination: &Cidr) -> Result<(), CloudError> {
        self.check_table(table)?;
        let dest = destination.to_string();
        let routes = self.router.routes(&self.router_id).await?;
        for (d, hop) in routes {
            if Cidr::parse(&d).ok().as_ref() != Some(destination) {
                continue;
            }
            self.router.change(&self.router_id, &d, &hop, false).await?;
            // The node's port may be gone with the node; then nothing is left to clean.
            self.router.allow_on_port(&hop, &dest, false).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_cloud::NodeAddress;

    #[test]
    fn next_hops_and_targets() {
        let t = |h: &str| RouteTarget(h.to_owned());
        assert_eq!(
            classify("10.0.0.5", Some("compute:nova"), t),
            NextHop::Target(t("10.0.0.5"))
        );
        assert_eq!(classify("10.0.0.6", None, t), NextHop::Blackhole);
        assert!(matches!(
            classify("10.0.0.1", Some("network:router_interface"), t),
            NextHop::Other(_)
        ));
        assert!(matches!(classify("gw", None, t), NextHop::Other(_)));
        let node = NodeInfo {
            name: "n".into(),
            provider_id: None,
            addresses: vec![
                NodeAddress::new(NodeAddressType::InternalIP, "fd00::5"),
                NodeAddress::new(NodeAddressType::ExternalIP, "172.24.4.5"),
                NodeAddress::new(NodeAddressType::InternalIP, "10.0.0.5"),
            ],
            provided_node_ip: None,
        };
        let (target, ips) = node_target(&node).unwrap();
        assert_eq!(target.0, "10.0.0.5");
        assert_eq!(ips.len(), 2);
        assert!(node_target(&NodeInfo::named("x")).is_none());
    }
}
