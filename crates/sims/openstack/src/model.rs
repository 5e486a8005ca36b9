//! The simulated cloud's state: servers (typed: their rendering depends on the microversion and
//! on Neutron), the Neutron, Cinder, Glance and Octavia resources (kept as the JSON objects the
//! APIs answer, so filters and updates work on any field), IP allocation, and timed transitions
//! (BUILD → ACTIVE, creating → available, PENDING_CREATE → ACTIVE…) applied lazily on every
//! access, stalled or failed on request.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::util::{new_id, new_mac, now_secs};

/// A Nova server status (the `DELETED` status belongs to tombstones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerStatus {
    /// Being built.
    Build,
    /// Running.
    Active,
    /// Stopped.
    Shutoff,
    /// Failed.
    Error,
}

impl ServerStatus {
    /// The API's `status` string.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerStatus::Build => "BUILD",
            ServerStatus::Active => "ACTIVE",
            ServerStatus::Shutoff => "SHUTOFF",
            ServerStatus::Error => "ERROR",
        }
    }

    /// `OS-EXT-STS:vm_state`.
    pub fn vm_state(self) -> &'static str {
        match self {
            ServerStatus::Build => "building",
            ServerStatus::Active => "active",
            ServerStatus::Shutoff => "stopped",
            ServerStatus::Error => "error",
        }
    }

    /// `OS-EXT-STS:power_state` (0 no state, 1 running, 4 shutdown).
    pub fn power_state(self) -> u8 {
        match self {
            ServerStatus::Active => 1,
            ServerStatus::Shutoff => 4,
            ServerStatus::Build | ServerStatus::Error => 0,
        }
    }

    /// Parses an API status string.
    pub fn parse(text: &str) -> Option<ServerStatus> {
        match text.to_ascii_uppercase().as_str() {
            "BUILD" => Some(ServerStatus::Build),
            "ACTIVE" => Some(ServerStatus::Active),
            "SHUTOFF" => Some(ServerStatus::Shutoff),
            "ERROR" => Some(ServerStatus::Error),
            _ => None,
        }
    }
}

/// A Nova server.
#[derive(Debug, Clone)]
pub struct Server {
    /// UUID.
    pub id: String,
    /// Name.
    pub name: String,
    /// Owning project.
    pub project_id: String,
    /// Creating user.
    pub user_id: String,
    /// Flavor id.
    pub flavor_id: String,
    /// Image id (None: booted from a volume).
    pub image_id: Option<String>,
    /// Availability zone.
    pub az: String,
    /// Status.
    pub status: ServerStatus,
    /// `OS-EXT-STS:task_state` (`spawning`, `powering-off`, `deleting`…).
    pub task_state: Option<&'static str>,
    /// Metadata.
    pub metadata: Map<String, Value>,
    /// Tags.
    pub tags: Vec<String>,
    /// Created (Unix seconds).
    pub created: i64,
    /// Last change (Unix seconds).
    pub updated: i64,
    /// Creation order (lists are newest first).
    pub seq: u64,
    /// Key pair name.
    pub key_name: Option<String>,
    /// Security group names.
    pub security_groups: Vec<String>,
    /// When it first became ACTIVE.
    pub launched_at: Option<i64>,
    /// `hostId`.
    pub host_id: String,
    /// Description (2.19+).
    pub description: Option<String>,
}

/// A server deleted, kept for `changes-since` and `deleted=true` listings.
#[derive(Debug, Clone)]
pub struct Tombstone {
    /// The server as it was.
    pub server: Server,
    /// When it was deleted.
    pub deleted_at: i64,
}

/// What a timed transition does when it is due.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A server reaches a status.
    Server(ServerStatus),
    /// A server is gone (deletion finished).
    ServerGone,
    /// A volume's `status` becomes this.
    Volume(&'static str),
    /// A volume is gone.
    VolumeGone,
    /// A volume attachment (by attachment id) is attached.
    Attached,
    /// A volume attachment (by attachment id) is gone.
    Detached,
    /// A volume's extension to this size (GiB) is done.
    Extended(u64),
    /// A load balancer's `provisioning_status` becomes this (and `operating_status` follows).
    LoadBalancer(&'static str),
    /// A load balancer is gone.
    LoadBalancerGone,
}

/// A transition of one resource: due at `at` (None: stalled until released).
#[derive(Debug, Clone)]
pub struct Timed {
    /// The resource's id.
    pub id: String,
    /// What happens.
    pub change: Change,
    /// When (None: stalled).
    pub at: Option<Instant>,
}

/// Knobs for transitions, set through the handle.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// BUILD → ACTIVE.
    pub build_delay: Duration,
    /// os-stop / os-start.
    pub action_delay: Duration,
    /// Server deletion (task_state `deleting` until gone).
    pub delete_delay: Duration,
    /// Volumes: creating → available, deleting → gone.
    pub volume_delay: Duration,
    /// Load balancers: PENDING_* → ACTIVE / gone.
    pub lb_delay: Duration,
    /// Volume attachments: attaching → attached, detaching → gone.
    pub attach_delay: Duration,
    /// New transitions are stalled (never due until released).
    pub stall: bool,
    /// New server builds end in ERROR, new volumes in `error`, new load balancers in `ERROR`.
    pub fail: bool,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            build_delay: Duration::from_millis(500),
            action_delay: Duration::from_millis(200),
            delete_delay: Duration::ZERO,
            volume_delay: Duration::from_millis(200),
            lb_delay: Duration::from_millis(500),
            attach_delay: Duration::from_millis(200),
            stall: false,
            fail: false,
        }
    }
}

/// A Nova flavor.
#[derive(Debug, Clone)]
pub struct Flavor {
    /// Id (`1`, `2`…).
    pub id: String,
    /// Name (`m1.small`).
    pub name: String,
    /// vCPUs.
    pub vcpus: u32,
    /// RAM in MiB.
    pub ram: u32,
    /// Root disk in GiB.
    pub disk: u32,
    /// Ephemeral disk in GiB.
    pub ephemeral: u32,
    /// Extra specs.
    pub extra_specs: Map<String, Value>,
}

/// A server group.
#[derive(Debug, Clone)]
pub struct ServerGroup {
    /// UUID.
    pub id: String,
    /// Name.
    pub name: String,
    /// `affinity`, `anti-affinity`, `soft-affinity`, `soft-anti-affinity`.
    pub policy: String,
    /// Member server ids.
    pub members: Vec<String>,
    /// Owning project.
    pub project_id: String,
    /// Creating user.
    pub user_id: String,
}

/// The Neutron collections, each an id → JSON object map (listing order: by id).
#[derive(Debug, Default)]
pub struct Neutron {
    /// `networks`.
    pub networks: BTreeMap<String, Value>,
    /// `subnets`.
    pub subnets: BTreeMap<String, Value>,
    /// `ports`.
    pub ports: BTreeMap<String, Value>,
    /// `floatingips`.
    pub floatingips: BTreeMap<String, Value>,
    /// `security_groups`.
    pub security_groups: BTreeMap<String, Value>,
    /// `security_group_rules`.
    pub security_group_rules: BTreeMap<String, Value>,
    /// `routers`.
    pub routers: BTreeMap<String, Value>,
    used_ips: HashMap<String, HashSet<IpAddr>>,
    cursors: HashMap<String, u128>,
}

/// The whole simulated cloud.
#[derive(Debug)]
pub struct State {
    /// The project fixtures are created in (the CCM's project).
    pub default_project: String,
    /// The user fixtures are created by.
    pub default_user: String,
    seq: u64,
    /// Flavors, in listing order.
    pub flavors: Vec<Flavor>,
    /// Servers by id.
    pub servers: HashMap<String, Server>,
    /// Deleted servers.
    pub tombstones: Vec<Tombstone>,
    /// Server groups by id.
    pub server_groups: BTreeMap<String, ServerGroup>,
    /// Availability zones (the first is the default).
    pub zones: Vec<String>,
    /// Neutron.
    pub neutron: Neutron,
    /// Cinder volumes by id.
    pub volumes: BTreeMap<String, Value>,
    /// Cinder volume types by id.
    pub volume_types: BTreeMap<String, Value>,
    /// Volume attachments by attachment id.
    pub attachments: BTreeMap<String, crate::attachments::Attachment>,
    /// The default volume type's id.
    pub default_volume_type: String,
    /// Glance images by id.
    pub images: BTreeMap<String, Value>,
    /// Octavia load balancers by id.
    pub load_balancers: BTreeMap<String, Value>,
    /// Their listeners, pools, members and monitors.
    pub octavia: crate::octavia_model::OctaviaTree,
    /// Pending transitions.
    pub timed: Vec<Timed>,
    /// Transition knobs.
    pub knobs: Knobs,
}

/// Names of the seeded topology, for fixtures and tests.
pub mod seed {
    /// The tenant network servers get a port on by default.
    pub const INTERNAL_NETWORK: &str = "stratus-internal";
    /// Its IPv4 subnet.
    pub const INTERNAL_CIDR: &str = "10.0.0.0/16";
    /// Its IPv6 subnet.
    pub const INTERNAL_CIDR6: &str = "fd00:10::/64";
    /// The external network floating IPs come from.
    pub const PUBLIC_NETWORK: &str = "public";
    /// Its subnet.
    pub const PUBLIC_CIDR: &str = "172.24.4.0/24";
    /// The router between them.
    pub const ROUTER: &str = "stratus-router";
    /// The seeded image.
    pub const IMAGE: &str = "ubuntu-22-04";
    /// The default volume type.
    pub const VOLUME_TYPE: &str = "__DEFAULT__";
    /// The second volume type.
    pub const SSD_VOLUME_TYPE: &str = "ssd";
    /// The multi-attach volume type (`multiattach: <is> True`).
    pub const MULTIATTACH_VOLUME_TYPE: &str = "multiattach";
    /// The default availability zone.
    pub const ZONE: &str = "nova";
}

/// A failed state change, turned into the service's error by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelError {
    /// No such resource (kind, id).
    NotFound(&'static str, String),
    /// Bad input.
    Invalid(String),
    /// A conflict (IP in use, wrong state).
    Conflict(String),
}

impl State {
    /// A cloud seeded with flavors, a tenant network with IPv4 and IPv6 subnets, an external
    /// network, a router, the default security group, an image and volume types, all owned by
    /// `project` (shared ones visible to every project).
    pub fn new(project: &str, user: &str, zones: Vec<String>) -> State {
        let mut state = State {
            default_project: project.to_owned(),
            default_user: user.to_owned(),
            seq: 0,
            flavors: Vec::new(),
            servers: HashMap::new(),
            tombstones: Vec::new(),
            server_groups: BTreeMap::new(),
            zones: if zones.is_empty() {
                vec![seed::ZONE.to_owned()]
            } else {
                zones
            },
            neutron: Neutron::default(),
            volumes: BTreeMap::new(),
            volume_types: BTreeMap::new(),
            attachments: BTreeMap::new(),
            default_volume_type: String::new(),
            images: BTreeMap::new(),
            load_balancers: BTreeMap::new(),
            octavia: Default::default(),
            timed: Vec::new(),
            knobs: Knobs::default(),
        };
        for (id, name, vcpus, ram, disk) in [
            ("1", "m1.tiny", 1, 512, 1),
            ("2", "m1.small", 1, 2048, 20),
            ("3", "m1.medium", 2, 4096, 40),
            ("4", "m1.large", 4, 8192, 80),
            ("5", "m1.xlarge", 8, 16384, 160),
        ] {
            state.flavors.push(Flavor {
                id: id.into(),
                name: name.into(),
                vcpus,
                ram,
                disk,
                ephemeral: 0,
                extra_specs: Map::new(),
            });
        }
        let internal = state.add_network(project, seed::INTERNAL_NETWORK, false, false);
        state
            .add_subnet(
                project,
                &internal,
                "stratus-internal-v4",
                seed::INTERNAL_CIDR,
            )
            .expect("seed subnet");
        state
            .add_subnet(
                project,
                &internal,
                "stratus-internal-v6",
                seed::INTERNAL_CIDR6,
            )
            .expect("seed subnet");
        let public = state.add_network(project, seed::PUBLIC_NETWORK, true, true);
        let public_subnet = state
            .add_subnet(project, &public, "public-subnet", seed::PUBLIC_CIDR)
            .expect("seed subnet");
        let gateway_ip = state.allocate_ip(&public_subnet).expect("seed gateway");
        let now = now_secs();
        let router_id = new_id();
        state.neutron.routers.insert(
            router_id.clone(),
            json!({
                "id": router_id, "name": seed::ROUTER, "description": "", "status": "ACTIVE",
                "admin_state_up": true, "tenant_id": project, "project_id": project,
                "external_gateway_info": {"network_id": public, "enable_snat": true,
                    "external_fixed_ips": [{"subnet_id": public_subnet, "ip_address": gateway_ip.to_string()}]},
                "routes": [], "distributed": false, "ha": false, "flavor_id": null,
                "availability_zones": [seed::ZONE], "availability_zone_hints": [], "tags": [],
                "created_at": crate::util::iso_z(now), "updated_at": crate::util::iso_z(now),
                "revision_number": 1,
            }),
        );
        state.default_security_group(project);
        let image_id = new_id();
        state.images.insert(
            image_id.clone(),
            json!({
                "id": image_id, "name": seed::IMAGE, "status": "active", "visibility": "public",
                "protected": false, "os_hidden": false, "checksum": "6b3a5ac2bbd6a2fa2d9b5b7f8b1a8c3d",
                "os_hash_algo": "sha512", "os_hash_value": "0".repeat(128), "size": 666_000_000,
                "virtual_size": 2_361_393_152_u64, "disk_format": "qcow2", "container_format": "bare",
                "min_disk": 0, "min_ram": 0, "owner": project, "tags": [],
                "created_at": crate::util::iso_z(now), "updated_at": crate::util::iso_z(now),
                "self": format!("/v2/images/{image_id}"), "file": format!("/v2/images/{image_id}/file"),
                "schema": "/v2/schemas/image", "cinder_img_volume_type": seed::SSD_VOLUME_TYPE,
            }),
        );
        for (name, description, extra_specs) in [
            (seed::VOLUME_TYPE, "Default Volume Type", json!({})),
            (seed::SSD_VOLUME_TYPE, "Fast disks", json!({})),
            (
                seed::MULTIATTACH_VOLUME_TYPE,
                "Shared disks",
                json!({crate::attachments::MULTIATTACH_SPEC: "<is> True"}),
            ),
        ] {
            let id = new_id();
            if name == seed::VOLUME_TYPE {
                state.default_volume_type = id.clone();
            }
            state.volume_types.insert(
                id.clone(),
                json!({"id": id, "name": name, "description": description, "is_public": true,
                       "os-volume-type-access:is_public": true, "extra_specs": extra_specs, "qos_specs_id": null}),
            );
        }
        state
    }

    /// The next creation sequence number.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Adds a network; returns its id.
    pub fn add_network(
        &mut self,
        project: &str,
        name: &str,
        external: bool,
        shared: bool,
    ) -> String {
        let id = new_id();
        let now = crate::util::iso_z(now_secs());
        self.neutron.networks.insert(
            id.clone(),
            json!({
                "id": id, "name": name, "description": "", "status": "ACTIVE", "admin_state_up": true,
                "subnets": [], "shared": shared, "router:external": external, "tenant_id": project,
                "project_id": project, "mtu": 1450, "port_security_enabled": true, "tags": [],
                "availability_zones": [seed::ZONE], "availability_zone_hints": [],
                "ipv4_address_scope": null, "ipv6_address_scope": null, "is_default": external,
                "created_at": now, "updated_at": now, "revision_number": 1,
            }),
        );
        id
    }

    /// Adds a subnet to a network; returns its id.
    pub fn add_subnet(
        &mut self,
        project: &str,
        network_id: &str,
        name: &str,
        cidr: &str,
    ) -> Result<String, ModelError> {
        let (base, prefix) = parse_cidr(cidr)?;
        if !self.neutron.networks.contains_key(network_id) {
            return Err(ModelError::NotFound("network", network_id.to_owned()));
        }
        let v6 = base.is_ipv6();
        let gateway = add_to(base, 1);
        let last = last_host(base, prefix);
        let id = new_id();
        let now = crate::util::iso_z(now_secs());
        self.neutron.subnets.insert(
            id.clone(),
            json!({
                "id": id, "name": name, "description": "", "network_id": network_id,
                "cidr": format!("{base}/{prefix}"), "ip_version": if v6 { 6 } else { 4 },
                "gateway_ip": gateway.to_string(), "enable_dhcp": true,
                "allocation_pools": [{"start": add_to(base, 2).to_string(), "end": last.to_string()}],
                "dns_nameservers": [], "host_routes": [], "tenant_id": project, "project_id": project,
                "subnetpool_id": null, "ipv6_address_mode": if v6 { json!("slaac") } else { Value::Null },
                "ipv6_ra_mode": if v6 { json!("slaac") } else { Value::Null }, "service_types": [],
                "tags": [], "created_at": now, "updated_at": now, "revision_number": 0,
            }),
        );
        if let Some(subnets) = self
            .neutron
            .networks
            .get_mut(network_id)
            .and_then(|n| n["subnets"].as_array_mut())
        {
            subnets.push(json!(id));
        }
        self.neutron
            .used_ips
            .entry(id.clone())
            .or_default()
            .insert(gateway);
        Ok(id)
    }

    /// The project's `default` security group, created on first use.
    pub fn default_security_group(&mut self, project: &str) -> String {
        if let Some((id, _)) = self
            .neutron
            .security_groups
            .iter()
            .find(|(_, g)| g["name"] == "default" && g["project_id"] == project)
        {
            return id.clone();
        }
        let id = new_id();
        let now = crate::util::iso_z(now_secs());
        let mut rules = Vec::new();
        for ethertype in ["IPv4", "IPv6"] {
            for (direction, remote_group) in [("egress", Value::Null), ("ingress", json!(id))] {
                let rule_id = new_id();
                let rule = json!({
                    "id": rule_id, "security_group_id": id, "direction": direction,
                    "ethertype": ethertype, "protocol": null, "port_range_min": null,
                    "port_range_max": null, "remote_ip_prefix": null, "remote_group_id": remote_group,
                    "remote_address_group_id": null, "normalized_cidr": null, "description": "",
                    "tenant_id": project, "project_id": project, "created_at": now,
                    "updated_at": now, "revision_number": 0, "belongs_to_default_sg": true,
                });
                self.neutron
                    .security_group_rules
                    .insert(rule_id, rule.clone());
                rules.push(rule);
            }
        }
        self.neutron.security_groups.insert(
            id.clone(),
            json!({
                "id": id, "name": "default", "description": "Default security group",
                "tenant_id": project, "project_id": project, "stateful": true, "shared": false,
                "security_group_rules": rules, "tags": [], "created_at": now, "updated_at": now,
                "revision_number": 1,
            }),
        );
        id
    }

    /// A free address of a subnet, marked used.
    pub fn allocate_ip(&mut self, subnet_id: &str) -> Result<IpAddr, ModelError> {
        let subnet = self
            .neutron
            .subnets
            .get(subnet_id)
            .ok_or_else(|| ModelError::NotFound("subnet", subnet_id.to_owned()))?;
        let (base, prefix) = parse_cidr(subnet["cidr"].as_str().unwrap_or_default())?;
        let last = last_host(base, prefix);
        let cursor = self
            .neutron
            .cursors
            .entry(subnet_id.to_owned())
            .or_insert(2);
        let used = self
            .neutron
            .used_ips
            .entry(subnet_id.to_owned())
            .or_default();
        let span = ip_u128(last) - ip_u128(base) - 1;
        for step in 0..span {
            let offset = 2 + (*cursor - 2 + step) % span;
            let candidate = add_to(base, offset);
            if used.insert(candidate) {
                *cursor = offset + 1;
                return Ok(candidate);
            }
        }
        Err(ModelError::Conflict(format!(
            "No more IP addresses available on subnet {subnet_id}."
        )))
    }

    /// Marks a given address of a subnet used; a conflict if it already is or lies outside.
    pub fn claim_ip(&mut self, subnet_id: &str, ip: IpAddr) -> Result<(), ModelError> {
        let subnet = self
            .neutron
            .subnets
            .get(subnet_id)
            .ok_or_else(|| ModelError::NotFound("subnet", subnet_id.to_owned()))?;
        let (base, prefix) = parse_cidr(subnet["cidr"].as_str().unwrap_or_default())?;
        if !contains(base, prefix, ip) {
            return Err(ModelError::Invalid(format!(
                "IP address {ip} is not a valid IP for the specified subnet."
            )));
        }
        if !self
            .neutron
            .used_ips
            .entry(subnet_id.to_owned())
            .or_default()
            .insert(ip)
        {
            return Err(ModelError::Conflict(format!(
                "IP address {ip} already allocated in subnet {subnet_id}"
            )));
        }
        Ok(())
    }

    /// Frees an address.
    pub fn release_ip(&mut self, subnet_id: &str, ip: &str) {
        if let (Some(used), Ok(ip)) = (self.neutron.used_ips.get_mut(subnet_id), ip.parse()) {
            used.remove(&ip);
        }
    }

    /// Creates a port on `network_id`: `fixed_ips` as the API takes them (`subnet_id` and/or
    /// `ip_address`), or one address per subnet of the network when absent.
    #[allow(clippy::too_many_arguments)]
    pub fn create_port(
        &mut self,
        project: &str,
        network_id: &str,
        fixed_ips: Option<&[Value]>,
        device_id: &str,
        device_owner: &str,
        name: &str,
        security_groups: Option<Vec<String>>,
    ) -> Result<Value, ModelError> {
        let network = self
            .neutron
            .networks
            .get(network_id)
            .ok_or_else(|| ModelError::NotFound("network", network_id.to_owned()))?;
        let subnets: Vec<String> = network["subnets"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut ips = Vec::new();
        let requested: Vec<Value> = match fixed_ips {
            Some(list) => list.to_vec(),
            None => subnets.iter().map(|s| json!({"subnet_id": s})).collect(),
        };
        for request in &requested {
            let subnet_id = match request["subnet_id"].as_str() {
                Some(s) => s.to_owned(),
                None => {
                    let ip: IpAddr = request["ip_address"]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| ModelError::Invalid("Invalid fixed_ips entry".into()))?;
                    subnets
                        .iter()
                        .find(|s| {
                            self.neutron.subnets.get(*s).is_some_and(|sub| {
                                parse_cidr(sub["cidr"].as_str().unwrap_or_default())
                                    .is_ok_and(|(b, p)| contains(b, p, ip))
                            })
                        })
                        .cloned()
                        .ok_or_else(|| {
                            ModelError::Invalid(format!(
                                "No subnet of network {network_id} holds {ip}"
                            ))
                        })?
                }
            };
            if !subnets.contains(&subnet_id) {
                return Err(ModelError::Invalid(format!(
                    "Subnet {subnet_id} is not on network {network_id}"
                )));
            }
            let ip = match request["ip_address"].as_str() {
                Some(text) => {
                    let ip: IpAddr = text
                        .parse()
                        .map_err(|_| ModelError::Invalid(format!("Invalid IP address {text}")))?;
                    self.claim_ip(&subnet_id, ip)?;
                    ip
                }
                None => self.allocate_ip(&subnet_id)?,
            };
            ips.push(json!({"subnet_id": subnet_id, "ip_address": ip.to_string()}));
        }
        let groups = match security_groups {
            Some(groups) => groups,
            None if device_owner.starts_with("network:") => Vec::new(),
            None => vec![self.default_security_group(project)],
        };
        let id = new_id();
        let now = crate::util::iso_z(now_secs());
        let port = json!({
            "id": id, "name": name, "description": "", "network_id": network_id,
            "mac_address": new_mac(), "fixed_ips": ips, "device_id": device_id,
            "device_owner": device_owner, "status": if device_id.is_empty() { "DOWN" } else { "ACTIVE" },
            "admin_state_up": true, "tenant_id": project, "project_id": project,
            "security_groups": groups, "allowed_address_pairs": [], "extra_dhcp_opts": [],
            "binding:vnic_type": "normal", "port_security_enabled": true, "dns_name": "",
            "tags": [], "created_at": now, "updated_at": now, "revision_number": 1,
        });
        self.neutron.ports.insert(id, port.clone());
        Ok(port)
    }

    /// Deletes a port, freeing its addresses and disassociating its floating IPs.
    pub fn delete_port(&mut self, port_id: &str) -> Option<Value> {
        let port = self.neutron.ports.remove(port_id)?;
        for ip in port["fixed_ips"].as_array().into_iter().flatten() {
            self.release_ip(
                ip["subnet_id"].as_str().unwrap_or_default(),
                ip["ip_address"].as_str().unwrap_or_default(),
            );
        }
        for fip in self.neutron.floatingips.values_mut() {
            if fip["port_id"] == port_id {
                disassociate(fip);
            }
        }
        Some(port)
    }

    /// Adds a server (and a port on each requested network) in the default project or the
    /// given one; BUILD with a transition to ACTIVE (or ERROR), or directly `status`.
    pub fn create_server(&mut self, spec: NewServer, now: Instant) -> Result<Server, ModelError> {
        if !self.flavors.iter().any(|f| f.id == spec.flavor_id) {
            return Err(ModelError::Invalid(format!(
                "Flavor {} could not be found.",
                spec.flavor_id
            )));
        }
        let id = new_id();
        for network in &spec.networks {
            match network {
                NetworkRequest::Network { id: net, fixed_ip } => {
                    let fixed = fixed_ip.as_ref().map(|ip| vec![json!({"ip_address": ip})]);
                    self.create_port(
                        &spec.project_id,
                        net,
                        fixed.as_deref(),
                        &id,
                        &format!("compute:{}", spec.az),
                        "",
                        None,
                    )?;
                }
                NetworkRequest::Port(port_id) => {
                    let port = self
                        .neutron
                        .ports
                        .get_mut(port_id)
                        .ok_or_else(|| ModelError::NotFound("port", port_id.clone()))?;
                    if port["device_id"].as_str().is_some_and(|d| !d.is_empty()) {
                        return Err(ModelError::Conflict(format!(
                            "Port {port_id} is still in use."
                        )));
                    }
                    port["device_id"] = json!(id);
                    port["device_owner"] = json!(format!("compute:{}", spec.az));
                    port["status"] = json!("ACTIVE");
                }
            }
        }
        let created = now_secs();
        let server = Server {
            id: id.clone(),
            name: spec.name,
            project_id: spec.project_id,
            user_id: spec.user_id,
            flavor_id: spec.flavor_id,
            image_id: spec.image_id,
            az: spec.az,
            status: spec.status.unwrap_or(ServerStatus::Build),
            task_state: if spec.status.is_none() {
                Some("spawning")
            } else {
                None
            },
            metadata: spec.metadata,
            tags: spec.tags,
            created,
            updated: created,
            seq: self.next_seq(),
            key_name: spec.key_name,
            security_groups: spec.security_groups,
            launched_at: (spec.status == Some(ServerStatus::Active)).then_some(created),
            host_id: format!("{:x}", uuid::Uuid::new_v4().as_u128()),
            description: spec.description,
        };
        if spec.status.is_none() {
            let to = if self.knobs.fail {
                ServerStatus::Error
            } else {
                ServerStatus::Active
            };
            let delay = self.knobs.build_delay;
            self.schedule(&id, Change::Server(to), now, delay);
        }
        self.servers.insert(id, server.clone());
        Ok(server)
    }

    /// Queues a transition `delay` from `now` (stalled if the knob says so).
    pub fn schedule(&mut self, id: &str, change: Change, now: Instant, delay: Duration) {
        let at = (!self.knobs.stall).then_some(now + delay);
        self.timed.retain(|t| t.id != id);
        self.timed.push(Timed {
            id: id.to_owned(),
            change,
            at,
        });
    }

    /// Applies every transition due at `now`.
    pub fn settle(&mut self, now: Instant) {
        if self.timed.is_empty() {
            return;
        }
        let (due, rest): (Vec<Timed>, Vec<Timed>) = std::mem::take(&mut self.timed)
            .into_iter()
            .partition(|t| t.at.is_some_and(|at| at <= now));
        self.timed = rest;
        for t in due {
            self.apply(&t.id, t.change);
        }
    }

    /// Applies one transition now.
    pub fn apply(&mut self, id: &str, change: Change) {
        let now = now_secs();
        match change {
            Change::Server(status) => {
                if let Some(server) = self.servers.get_mut(id) {
                    server.status = status;
                    server.task_state = None;
                    server.updated = now;
                    if status == ServerStatus::Active && server.launched_at.is_none() {
                        server.launched_at = Some(now);
                    }
                }
            }
            Change::ServerGone => {
                self.remove_server(id);
            }
            Change::Volume(status) => {
                if let Some(volume) = self.volumes.get_mut(id) {
                    volume["status"] = json!(status);
                    volume["updated_at"] = json!(crate::util::iso_micro(now));
                }
            }
            Change::VolumeGone => {
                self.volumes.remove(id);
            }
            Change::Attached | Change::Detached | Change::Extended(_) => {
                self.apply_volume_change(id, change);
            }
            Change::LoadBalancer(status) => {
                if let Some(lb) = self.load_balancers.get_mut(id) {
                    lb["provisioning_status"] = json!(status);
                    lb["operating_status"] = json!(if status == "ACTIVE" {
                        "ONLINE"
                    } else {
                        "ERROR"
                    });
                    lb["updated_at"] = json!(crate::util::iso_plain(now));
                }
                self.octavia.settle(id, status);
            }
            Change::LoadBalancerGone => {
                self.octavia.remove_all(id);
                if let Some(lb) = self.load_balancers.remove(id) {
                    if let Some(port) = lb["vip_port_id"].as_str() {
                        // Octavia deletes the VIP ports it made; a port the user gave
                        // (`vip_port_id`) is only released.
                        let made = self
                            .neutron
                            .ports
                            .get(port)
                            .is_some_and(|p| p["device_owner"] == "Octavia");
                        if made {
                            self.delete_port(port);
                        } else if let Some(p) = self.neutron.ports.get_mut(port) {
                            p["device_id"] = json!("");
                        }
                    }
                }
            }
        }
    }

    /// Removes a server now: its ports are deleted (floating IPs disassociated), a tombstone
    /// kept.
    pub fn remove_server(&mut self, id: &str) -> Option<Server> {
        let server = self.servers.remove(id)?;
        self.timed.retain(|t| t.id != id);
        self.drop_server_attachments(id);
        let ports: Vec<String> = self
            .neutron
            .ports
            .iter()
            .filter(|(_, p)| p["device_id"] == id && is_compute_owner(&p["device_owner"]))
            .map(|(pid, _)| pid.clone())
            .collect();
        for port in ports {
            self.delete_port(&port);
        }
        for group in self.server_groups.values_mut() {
            group.members.retain(|m| m != id);
        }
        self.tombstones.push(Tombstone {
            server: server.clone(),
            deleted_at: now_secs(),
        });
        if self.tombstones.len() > 10_000 {
            self.tombstones.remove(0);
        }
        Some(server)
    }

    /// The flavor with this id.
    pub fn flavor(&self, id: &str) -> Option<&Flavor> {
        self.flavors.iter().find(|f| f.id == id)
    }

    /// The network named or with id `key`.
    pub fn network_id(&self, key: &str) -> Option<String> {
        if self.neutron.networks.contains_key(key) {
            return Some(key.to_owned());
        }
        self.neutron
            .networks
            .iter()
            .find(|(_, n)| n["name"] == key)
            .map(|(id, _)| id.clone())
    }
}

/// Whether a port's owner is a compute instance (`compute:<zone>`).
pub fn is_compute_owner(owner: &Value) -> bool {
    owner.as_str().is_some_and(|o| o.starts_with("compute:"))
}

/// Clears a floating IP's association.
pub fn disassociate(fip: &mut Value) {
    fip["port_id"] = Value::Null;
    fip["fixed_ip_address"] = Value::Null;
    fip["router_id"] = Value::Null;
    fip["status"] = json!("DOWN");
    fip["updated_at"] = json!(crate::util::iso_z(now_secs()));
}

/// A network a new server is attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkRequest {
    /// A new port on this network (id), optionally with a fixed IP.
    Network {
        /// Network id.
        id: String,
        /// A fixed IP to claim.
        fixed_ip: Option<String>,
    },
    /// An existing port.
    Port(String),
}

/// What a new server is made of.
#[derive(Debug, Clone)]
pub struct NewServer {
    /// Name.
    pub name: String,
    /// Project.
    pub project_id: String,
    /// User.
    pub user_id: String,
    /// Flavor id.
    pub flavor_id: String,
    /// Image id.
    pub image_id: Option<String>,
    /// Availability zone.
    pub az: String,
    /// Networks and ports.
    pub networks: Vec<NetworkRequest>,
    /// Metadata.
    pub metadata: Map<String, Value>,
    /// Tags.
    pub tags: Vec<String>,
    /// Key pair.
    pub key_name: Option<String>,
    /// Security group names.
    pub security_groups: Vec<String>,
    /// Description.
    pub description: Option<String>,
    /// Start directly in this status (fixtures); None: BUILD, then the build transition.
    pub status: Option<ServerStatus>,
}

/// Parses `a.b.c.d/n` or an IPv6 CIDR into the network address and prefix length.
pub fn parse_cidr(cidr: &str) -> Result<(IpAddr, u8), ModelError> {
    let bad = || ModelError::Invalid(format!("Invalid CIDR {cidr}"));
    let (ip, prefix) = cidr.split_once('/').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    if prefix > bits || prefix + 2 > bits {
        return Err(bad());
    }
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (bits - prefix)
    };
    let masked = ip_u128(ip) & mask & width_mask(ip);
    Ok((from_u128(ip, masked), prefix))
}

fn width_mask(like: IpAddr) -> u128 {
    if like.is_ipv4() {
        u32::MAX as u128
    } else {
        u128::MAX
    }
}

fn ip_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4) as u128,
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(like: IpAddr, value: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4((value as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(value.into()),
    }
}

fn add_to(base: IpAddr, offset: u128) -> IpAddr {
    from_u128(base, ip_u128(base).wrapping_add(offset))
}

/// The last usable host of a subnet (v4: before the broadcast address).
fn last_host(base: IpAddr, prefix: u8) -> IpAddr {
    let bits = if base.is_ipv4() { 32 } else { 128 };
    let size_minus_one = if bits - prefix == 128 {
        u128::MAX
    } else {
        (1u128 << (bits - prefix)) - 1
    };
    let top = ip_u128(base) | size_minus_one;
    from_u128(base, if base.is_ipv4() { top - 1 } else { top })
}

/// Whether `ip` lies in `base/prefix`.
pub fn contains(base: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    if base.is_ipv4() != ip.is_ipv4() {
        return false;
    }
    let bits = if base.is_ipv4() { 32 } else { 128 };
    let mask = if prefix == 0 {
        0
    } else {
        (u128::MAX << (bits - prefix)) & width_mask(ip)
    };
    ip_u128(ip) & mask == ip_u128(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_and_addresses_are_allocated_once() {
        assert_eq!(
            parse_cidr("10.0.3.7/16").unwrap(),
            ("10.0.0.0".parse().unwrap(), 16)
        );
        assert!(parse_cidr("10.0.0.0").is_err());
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(contains(
            "10.0.0.0".parse().unwrap(),
            16,
            "10.0.200.1".parse().unwrap()
        ));
        assert!(!contains(
            "10.0.0.0".parse().unwrap(),
            16,
            "10.1.0.1".parse().unwrap()
        ));
        assert_eq!(
            last_host("10.0.0.0".parse().unwrap(), 30).to_string(),
            "10.0.0.2"
        );

        let mut state = State::new("p", "u", vec![]);
        let net = state.network_id(seed::INTERNAL_NETWORK).unwrap();
        let port = state
            .create_port("p", &net, None, "dev", "compute:nova", "", None)
            .unwrap();
        let ips: Vec<&str> = port["fixed_ips"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ip| ip["ip_address"].as_str().unwrap())
            .collect();
        assert_eq!(ips, ["10.0.0.2", "fd00:10::2"]);
        let v4 = port["fixed_ips"][0]["subnet_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            state.claim_ip(&v4, "10.0.0.2".parse().unwrap()),
            Err(ModelError::Conflict(format!(
                "IP address 10.0.0.2 already allocated in subnet {v4}"
            )))
        );
        assert!(matches!(
            state.claim_ip(&v4, "192.168.0.1".parse().unwrap()),
            Err(ModelError::Invalid(_))
        ));
        assert_eq!(state.allocate_ip(&v4).unwrap().to_string(), "10.0.0.3");
        state.delete_port(port["id"].as_str().unwrap());
        assert_eq!(state.claim_ip(&v4, "10.0.0.2".parse().unwrap()), Ok(()));
        // A /30 has one usable address after the gateway; it is handed out once.
        let tiny = state
            .add_subnet("p", &net, "tiny", "192.168.9.0/30")
            .unwrap();
        assert_eq!(state.allocate_ip(&tiny).unwrap().to_string(), "192.168.9.2");
        assert!(matches!(
            state.allocate_ip(&tiny),
            Err(ModelError::Conflict(_))
        ));
    }

    #[test]
    fn transitions_apply_when_due_and_stall_until_released() {
        let mut state = State::new("p", "u", vec![]);
        let now = Instant::now();
        let spec = |name: &str| NewServer {
            name: name.into(),
            project_id: "p".into(),
            user_id: "u".into(),
            flavor_id: "2".into(),
            image_id: None,
            az: "nova".into(),
            networks: vec![],
            metadata: Map::new(),
            tags: vec![],
            key_name: None,
            security_groups: vec![],
            description: None,
            status: None,
        };
        let a = state.create_server(spec("a"), now).unwrap();
        assert_eq!(a.status, ServerStatus::Build);
        state.settle(now + Duration::from_millis(100));
        assert_eq!(state.servers[&a.id].status, ServerStatus::Build);
        state.settle(now + Duration::from_secs(1));
        assert_eq!(state.servers[&a.id].status, ServerStatus::Active);
        assert!(state.servers[&a.id].launched_at.is_some());

        state.knobs.stall = true;
        let b = state.create_server(spec("b"), now).unwrap();
        state.settle(now + Duration::from_secs(3600));
        assert_eq!(state.servers[&b.id].status, ServerStatus::Build);

        state.knobs.stall = false;
        state.knobs.fail = true;
        let c = state.create_server(spec("c"), now).unwrap();
        state.settle(now + Duration::from_secs(1));
        assert_eq!(state.servers[&c.id].status, ServerStatus::Error);
        assert!(state
            .create_server(
                NewServer {
                    flavor_id: "99".into(),
                    ..spec("d")
                },
                now
            )
            .is_err());
    }
}
