//! The test-control handle's load-balancer and network side: counts of every Octavia and
//! Neutron object a load balancer may leave behind, provisioning statuses set or stalled by
//! hand, injected 409s, the transition delay, and the routes of a router.

use std::time::Duration;

use serde_json::{json, Value};

use crate::model::Change;
use crate::SimHandle;

/// How many of each object exists (leak checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LbCounts {
    /// Octavia load balancers.
    pub load_balancers: usize,
    /// Listeners.
    pub listeners: usize,
    /// Pools.
    pub pools: usize,
    /// Members.
    pub members: usize,
    /// Health monitors.
    pub monitors: usize,
    /// Neutron floating IPs.
    pub floating_ips: usize,
    /// Security groups other than `default`.
    pub security_groups: usize,
    /// Neutron ports.
    pub ports: usize,
}

impl SimHandle {
    /// Counts of load-balancer objects and what they use in Neutron.
    pub fn lb_counts(&self) -> LbCounts {
        let state = self.sim.state();
        LbCounts {
            load_balancers: state.load_balancers.len(),
            listeners: state.octavia.listeners.len(),
            pools: state.octavia.pools.len(),
            members: state.octavia.members.len(),
            monitors: state.octavia.monitors.len(),
            floating_ips: state.neutron.floatingips.len(),
            security_groups: state
                .neutron
                .security_groups
                .values()
                .filter(|g| g["name"] != "default")
                .count(),
            ports: state.neutron.ports.len(),
        }
    }

    /// Every load balancer, as the API shows it.
    pub fn load_balancers(&self) -> Vec<Value> {
        self.sim.state().load_balancers.values().cloned().collect()
    }

    /// Every member (each with its `pool_id`).
    pub fn members(&self) -> Vec<Value> {
        self.sim.state().octavia.members.values().cloned().collect()
    }

    /// Every listener.
    pub fn listeners(&self) -> Vec<Value> {
        self.sim
            .state()
            .octavia
            .listeners
            .values()
            .cloned()
            .collect()
    }

    /// Every pool.
    pub fn pools(&self) -> Vec<Value> {
        self.sim.state().octavia.pools.values().cloned().collect()
    }

    /// Every health monitor.
    pub fn monitors(&self) -> Vec<Value> {
        self.sim
            .state()
            .octavia
            .monitors
            .values()
            .cloned()
            .collect()
    }

    /// Every floating IP.
    pub fn floating_ips(&self) -> Vec<Value> {
        self.sim
            .state()
            .neutron
            .floatingips
            .values()
            .cloned()
            .collect()
    }

    /// Every security group and its rules.
    pub fn security_groups(&self) -> Vec<Value> {
        self.sim
            .state()
            .neutron
            .security_groups
            .values()
            .cloned()
            .collect()
    }

    /// A port by id.
    pub fn port(&self, id: &str) -> Option<Value> {
        self.sim.state().neutron.ports.get(id).cloned()
    }

    /// Every port.
    pub fn ports(&self) -> Vec<Value> {
        self.sim.state().neutron.ports.values().cloned().collect()
    }

    /// The provisioning status of a load balancer (None: gone).
    pub fn lb_status(&self, id: &str) -> Option<String> {
        self.sim
            .state()
            .load_balancers
            .get(id)
            .and_then(|l| l["provisioning_status"].as_str().map(str::to_owned))
    }

    /// Sets a load balancer's provisioning status now (its queued transition dropped).
    pub fn set_lb_status(&self, id: &str, status: &'static str) {
        let mut state = self.sim.state();
        state.timed.retain(|t| t.id != id);
        state.apply(id, Change::LoadBalancer(status));
    }

    /// Sets the delay of each load-balancer provisioning transition.
    pub fn set_lb_delay(&self, delay: Duration) {
        self.update_knobs(|k| k.lb_delay = delay);
    }

    /// The next `n` mutating Octavia requests answer 409 (as a concurrent change would).
    pub fn inject_lb_conflicts(&self, n: u32) {
        self.sim.state().octavia.conflicts = n;
    }

    /// The id of the router named `name`.
    pub fn router_id(&self, name: &str) -> Option<String> {
        self.sim
            .state()
            .neutron
            .routers
            .values()
            .find(|r| r["name"] == name)
            .and_then(|r| r["id"].as_str().map(str::to_owned))
    }

    /// A router's routes as `(destination, nexthop)`.
    pub fn router_routes(&self, id: &str) -> Vec<(String, String)> {
        self.sim
            .state()
            .neutron
            .routers
            .get(id)
            .and_then(|r| r["routes"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|r| {
                (
                    r["destination"].as_str().unwrap_or_default().to_owned(),
                    r["nexthop"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Puts a route on a router directly (someone else's route).
    pub fn add_router_route(&self, id: &str, destination: &str, nexthop: &str) {
        if let Some(r) = self.sim.state().neutron.routers.get_mut(id) {
            if let Some(routes) = r["routes"].as_array_mut() {
                routes.push(json!({"destination": destination, "nexthop": nexthop}));
            }
        }
    }

    /// Makes a port on the tenant network owned by `owner` (a router interface, say); returns
    /// its address.
    pub fn create_port(&self, owner: &str) -> Result<String, crate::handle::SimError> {
        let mut state = self.sim.state();
        let project = state.default_project.clone();
        let network = state
            .network_id(crate::model::seed::INTERNAL_NETWORK)
            .ok_or_else(|| crate::handle::SimError::NotFound("network", "internal".into()))?;
        let port = state.create_port(&project, &network, None, "", owner, "", None)?;
        Ok(port["fixed_ips"][0]["ip_address"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// Makes a floating IP on the `public` network that belongs to nobody's load balancer;
    /// returns `(id, address)`.
    pub fn create_floating_ip(
        &self,
        description: &str,
    ) -> Result<(String, String), crate::handle::SimError> {
        let mut state = self.sim.state();
        let public = state
            .network_id(crate::model::seed::PUBLIC_NETWORK)
            .ok_or_else(|| crate::handle::SimError::NotFound("network", "public".into()))?;
        let subnet = state.neutron.networks[&public]["subnets"][0]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let address = state.allocate_ip(&subnet)?.to_string();
        let id = crate::util::new_id();
        let now = crate::util::iso_z(crate::util::now_secs());
        let project = state.default_project.clone();
        state.neutron.floatingips.insert(
            id.clone(),
            json!({
                "id": id, "floating_ip_address": address, "floating_network_id": public,
                "router_id": null, "port_id": null, "fixed_ip_address": null, "status": "DOWN",
                "tenant_id": project, "project_id": project, "description": description,
                "dns_domain": "", "dns_name": "", "qos_policy_id": null, "port_details": null,
                "tags": [], "created_at": now, "updated_at": now, "revision_number": 0,
            }),
        );
        Ok((id, address))
    }
}
