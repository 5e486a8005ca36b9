//! The test-control handle: fixtures made directly in memory (a thousand servers in
//! milliseconds, each with a port and optionally a floating IP), statuses set by hand, and the
//! knobs that delay, stall or fail transitions. Not reachable over HTTP.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::model::{
    self, seed, Change, Knobs, ModelError, NetworkRequest, NewServer, ServerStatus,
};
use crate::Sim;

/// A server made by [`SimHandle::create_servers`].
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Server name.
    pub name: String,
    /// Flavor name or id (`m1.small`).
    pub flavor: String,
    /// Availability zone (None: the first).
    pub zone: Option<String>,
    /// Status it starts in (`Build` queues the usual build transition).
    pub status: ServerStatus,
    /// Network name or id its port is on (None: the seeded tenant network).
    pub network: Option<String>,
    /// A fixed IPv4 address to claim.
    pub fixed_ip: Option<String>,
    /// Give it a floating IP from the `public` network.
    pub floating_ip: bool,
    /// Metadata.
    pub metadata: Map<String, Value>,
}

impl ServerSpec {
    /// An ACTIVE `m1.small` server on the tenant network, no floating IP.
    pub fn active(name: impl Into<String>) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            flavor: "m1.small".into(),
            zone: None,
            status: ServerStatus::Active,
            network: None,
            fixed_ip: None,
            floating_ip: false,
            metadata: Map::new(),
        }
    }
}

/// A fixture that could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// No such resource.
    #[error("{0} {1} not found")]
    NotFound(&'static str, String),
    /// Bad fixture input.
    #[error("{0}")]
    Invalid(String),
}

impl From<ModelError> for SimError {
    fn from(e: ModelError) -> SimError {
        match e {
            ModelError::NotFound(kind, id) => SimError::NotFound(kind, id),
            ModelError::Invalid(m) | ModelError::Conflict(m) => SimError::Invalid(m),
        }
    }
}

/// Drives the simulated cloud from tests. Cheap to clone.
#[derive(Clone)]
pub struct SimHandle {
    pub(crate) sim: Arc<Sim>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle").finish_non_exhaustive()
    }
}

impl SimHandle {
    pub(crate) fn new(sim: Arc<Sim>) -> SimHandle {
        SimHandle { sim }
    }

    /// The project fixtures belong to.
    pub fn project_id(&self) -> String {
        self.sim.state().default_project.clone()
    }

    /// Makes servers at once (ports, addresses, floating IPs included); returns their ids in
    /// order.
    pub fn create_servers(&self, specs: &[ServerSpec]) -> Result<Vec<String>, SimError> {
        let mut state = self.sim.state();
        let now = Instant::now();
        let mut ids = Vec::with_capacity(specs.len());
        for spec in specs {
            let flavor = state
                .flavors
                .iter()
                .find(|f| f.name == spec.flavor || f.id == spec.flavor)
                .map(|f| f.id.clone())
                .ok_or_else(|| SimError::NotFound("flavor", spec.flavor.clone()))?;
            let network_key = spec.network.as_deref().unwrap_or(seed::INTERNAL_NETWORK);
            let network = state
                .network_id(network_key)
                .ok_or_else(|| SimError::NotFound("network", network_key.to_owned()))?;
            let image = state.images.keys().next().cloned();
            let project_id = state.default_project.clone();
            let user_id = state.default_user.clone();
            let az = spec.zone.clone().unwrap_or_else(|| state.zones[0].clone());
            let server = state.create_server(
                NewServer {
                    name: spec.name.clone(),
                    project_id,
                    user_id,
                    flavor_id: flavor,
                    image_id: image,
                    az,
                    networks: vec![NetworkRequest::Network {
                        id: network,
                        fixed_ip: spec.fixed_ip.clone(),
                    }],
                    metadata: spec.metadata.clone(),
                    tags: Vec::new(),
                    key_name: None,
                    security_groups: vec!["default".into()],
                    description: None,
                    status: (spec.status != ServerStatus::Build).then_some(spec.status),
                },
                now,
            )?;
            if spec.floating_ip {
                attach_floating_ip(&mut state, &server.id)?;
            }
            ids.push(server.id);
        }
        Ok(ids)
    }

    /// Gives a server a floating IP from `public` on its first port; returns the address.
    pub fn associate_floating_ip(&self, server_id: &str) -> Result<String, SimError> {
        attach_floating_ip(&mut self.sim.state(), server_id)
    }

    /// A server's status (None: gone).
    pub fn server_status(&self, id: &str) -> Option<ServerStatus> {
        self.sim.state().servers.get(id).map(|s| s.status)
    }

    /// Ids of every server.
    pub fn server_ids(&self) -> Vec<String> {
        self.sim.state().servers.keys().cloned().collect()
    }

    /// The id of the server named `name`.
    pub fn server_id(&self, name: &str) -> Option<String> {
        self.sim
            .state()
            .servers
            .values()
            .find(|s| s.name == name)
            .map(|s| s.id.clone())
    }

    /// Sets a server's status now (any pending transition of it is dropped).
    pub fn set_server_status(&self, id: &str, status: ServerStatus) -> Result<(), SimError> {
        let mut state = self.sim.state();
        if !state.servers.contains_key(id) {
            return Err(SimError::NotFound("server", id.to_owned()));
        }
        state.timed.retain(|t| t.id != id);
        state.apply(id, Change::Server(status));
        Ok(())
    }

    /// Deletes a server now (ports go, floating IPs are disassociated).
    pub fn delete_server(&self, id: &str) -> Result<(), SimError> {
        self.sim
            .state()
            .remove_server(id)
            .map(drop)
            .ok_or_else(|| SimError::NotFound("server", id.to_owned()))
    }

    /// The current knobs.
    pub fn knobs(&self) -> Knobs {
        self.sim.state().knobs.clone()
    }

    /// Changes the knobs (delays, stall, fail) for transitions queued from now on.
    pub fn update_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        change(&mut self.sim.state().knobs);
    }

    /// Sets the BUILD → ACTIVE delay.
    pub fn set_build_delay(&self, delay: Duration) {
        self.update_knobs(|k| k.build_delay = delay);
    }

    /// Stalls transitions queued from now on (they stay BUILD, creating, PENDING_* …) until
    /// [`SimHandle::release_stalled`].
    pub fn stall_transitions(&self, stall: bool) {
        self.update_knobs(|k| k.stall = stall);
    }

    /// Stalls the pending transition of one resource (if any).
    pub fn stall(&self, id: &str) {
        for t in self.sim.state().timed.iter_mut().filter(|t| t.id == id) {
            t.at = None;
        }
    }

    /// Makes every stalled transition due now.
    pub fn release_stalled(&self) {
        let now = Instant::now();
        let mut state = self.sim.state();
        for t in state.timed.iter_mut().filter(|t| t.at.is_none()) {
            t.at = Some(now);
        }
        state.settle(now);
    }

    /// Makes transitions queued from now on fail (servers ERROR, volumes `error`, load
    /// balancers `ERROR`).
    pub fn fail_transitions(&self, fail: bool) {
        self.update_knobs(|k| k.fail = fail);
    }

    /// Every server as the model holds it (for assertions on what a client created).
    pub fn servers(&self) -> Vec<model::Server> {
        self.sim.state().servers.values().cloned().collect()
    }

    /// The Neutron ports whose `device_id` is `server_id`.
    pub fn ports_of(&self, server_id: &str) -> Vec<serde_json::Value> {
        self.sim
            .state()
            .neutron
            .ports
            .values()
            .filter(|p| p["device_id"] == server_id)
            .cloned()
            .collect()
    }

    /// The id of the network named `name` (or with that id).
    pub fn network_id(&self, name: &str) -> Option<String> {
        self.sim.state().network_id(name)
    }

    /// Adds a network with one subnet; returns `(network id, subnet id)`.
    pub fn create_network(
        &self,
        name: &str,
        cidr: &str,
        external: bool,
    ) -> Result<(String, String), SimError> {
        let mut state = self.sim.state();
        let project = state.default_project.clone();
        let network = state.add_network(&project, name, external, external);
        let subnet = state.add_subnet(&project, &network, &format!("{name}-subnet"), cidr)?;
        Ok((network, subnet))
    }

    /// Adds an availability zone.
    pub fn add_zone(&self, zone: &str) {
        let mut state = self.sim.state();
        if !state.zones.iter().any(|z| z == zone) {
            state.zones.push(zone.to_owned());
        }
    }

    /// Adds `count` flavors `<prefix>-<n>` (n vCPUs mod 64 + 1, 1 GiB per vCPU, 10 GiB disk).
    pub fn add_flavors(&self, prefix: &str, count: usize) {
        let mut state = self.sim.state();
        for n in 0..count {
            let vcpus = (n % 64) as u32 + 1;
            let id = format!("{prefix}-{n}");
            state.flavors.push(model::Flavor {
                id: id.clone(),
                name: id,
                vcpus,
                ram: vcpus * 1024,
                disk: 10,
                ephemeral: 0,
                extra_specs: serde_json::Map::new(),
            });
        }
    }

    /// Adds `count` public active Glance images `<prefix>-<n>` owned by the project.
    pub fn add_images(&self, prefix: &str, count: usize) {
        let mut state = self.sim.state();
        let owner = state.default_project.clone();
        let now = crate::util::iso_z(crate::util::now_secs());
        for n in 0..count {
            let id = crate::util::new_id();
            state.images.insert(
                id.clone(),
                serde_json::json!({
                    "id": id, "name": format!("{prefix}-{n}"), "status": "active",
                    "visibility": "public", "owner": owner, "tags": [], "disk_format": "qcow2",
                    "container_format": "bare", "min_disk": 0, "min_ram": 0, "size": 1_000_000,
                    "created_at": now, "updated_at": now,
                    "self": format!("/v2/images/{id}"), "schema": "/v2/schemas/image",
                }),
            );
        }
    }

    /// Number of servers, ports and floating IPs (for leak checks).
    pub fn resource_counts(&self) -> (usize, usize, usize) {
        let state = self.sim.state();
        (
            state.servers.len(),
            state.neutron.ports.len(),
            state.neutron.floatingips.len(),
        )
    }
}

fn attach_floating_ip(state: &mut model::State, server_id: &str) -> Result<String, SimError> {
    let port = state
        .neutron
        .ports
        .values()
        .filter(|p| p["device_id"] == server_id)
        .min_by_key(|p| p["created_at"].as_str().unwrap_or_default().to_owned())
        .cloned()
        .ok_or_else(|| SimError::NotFound("port of server", server_id.to_owned()))?;
    let public = state
        .network_id(seed::PUBLIC_NETWORK)
        .ok_or_else(|| SimError::NotFound("network", seed::PUBLIC_NETWORK.to_owned()))?;
    let subnet = state.neutron.networks[&public]["subnets"][0]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let address = state.allocate_ip(&subnet)?.to_string();
    let fixed = port["fixed_ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["ip_address"].as_str())
        .find(|ip| !ip.contains(':'))
        .map(str::to_owned);
    let router = state
        .neutron
        .routers
        .values()
        .find(|r| r["external_gateway_info"]["network_id"] == public.as_str())
        .map_or(Value::Null, |r| r["id"].clone());
    let id = crate::util::new_id();
    let now = crate::util::iso_z(crate::util::now_secs());
    let project = state.default_project.clone();
    state.neutron.floatingips.insert(
        id.clone(),
        json!({
            "id": id, "floating_ip_address": address, "floating_network_id": public,
            "router_id": router, "port_id": port["id"], "fixed_ip_address": fixed, "status": "ACTIVE",
            "tenant_id": project, "project_id": project, "description": "", "dns_domain": "",
            "dns_name": "", "qos_policy_id": null, "port_details": null, "tags": [],
            "created_at": now, "updated_at": now, "revision_number": 0,
        }),
    );
    Ok(address)
}
