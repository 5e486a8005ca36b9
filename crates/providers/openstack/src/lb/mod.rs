//! Octavia load balancers for `type: LoadBalancer` Services, drop-in compatible with OCCM
//! (names, tags, floating IP descriptions, annotations, `[LoadBalancer]` keys).
//!
//! [`OpenStackLoadBalancers`] implements [`stratus_cloud::LoadBalancer`] without ever waiting
//! for Octavia: a new load balancer is created fully populated in one call; while it (or any
//! later change) is PENDING_*, the answer is [`CloudError::Pending`] and the [`watcher`] asks
//! for a re-sync the moment it settles; each further change is one plan step. A load balancer in
//! ERROR is deleted and made again. Floating IPs we create carry OCCM's description and are the
//! only ones ever released.

pub mod annotations;
mod fip_create;
pub mod floating;
pub mod floating_subnets;
pub mod names;
pub mod octavia;
pub mod secgroups;
pub mod sg_neutron;
mod sg_sync;
pub mod shared;
mod shared_sync;
pub mod spec;
pub mod watcher;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;
use stratus_cloud::{
    Cidr, CloudError, Ingress, LoadBalancer, LoadBalancerRequest, ResyncRequests, ServiceKey,
    ServiceRef,
};
use tokio::sync::OnceCell;

use annotations::LbOptions;
use floating::FloatingIps;
use octavia::{is_conflict, Octavia};
use secgroups::{MemberPort, RuleSpec};
use sg_neutron::SecurityGroups;
use spec::{plan_step, LbSpec};
use stratus_openstack_api::config::{LoadBalancerClass, LoadBalancerConfig};
use watcher::{is_pending, Watcher};

/// How often pending load balancers are polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// When a pending Service is looked at again if no re-sync request came first.
pub const PENDING_BACKSTOP: Duration = Duration::from_secs(5);

/// What Stratus remembers of one load balancer between syncs (lost on restart: then the tree
/// is read back once).
#[derive(Debug, Clone, Default)]
struct Known {
    /// Its id.
    id: String,
    /// The tree it is known to hold.
    spec: Option<LbSpec>,
    /// Pool id per listener index, once read.
    pools: Option<Vec<String>>,
    /// The floating IP confirmed on its VIP.
    fip: Option<String>,
    /// The security group's rules and member ports last reconciled (`manage-security-groups`).
    sg: Option<(Vec<RuleSpec>, Vec<MemberPort>)>,
}

/// The OpenStack load-balancer capability.
pub struct OpenStackLoadBalancers {
    config: LoadBalancerConfig,
    classes: std::collections::BTreeMap<String, LoadBalancerClass>,
    octavia: Octavia,
    fips: FloatingIps,
    sgs: SecurityGroups,
    watcher: Arc<Watcher>,
    resync: ResyncRequests,
    known: Mutex<HashMap<String, Known>>,
    external_network: OnceCell<String>,
    subnets: OnceCell<Vec<(String, String)>>,
}

fn invalid(e: impl std::fmt::Display) -> CloudError {
    CloudError::InvalidInput(e.to_string())
}

fn pending(what: String) -> CloudError {
    CloudError::Pending {
        what,
        retry_after: PENDING_BACKSTOP,
    }
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

impl OpenStackLoadBalancers {
    /// Load balancers over Octavia and Neutron clients.
    pub fn new(
        config: LoadBalancerConfig,
        classes: std::collections::BTreeMap<String, LoadBalancerClass>,
        octavia: Octavia,
        fips: FloatingIps,
    ) -> OpenStackLoadBalancers {
        let resync = ResyncRequests::default();
        let watcher = Watcher::start(octavia.clone(), resync.clone(), POLL_INTERVAL);
        OpenStackLoadBalancers {
            config,
            classes,
            octavia,
            sgs: SecurityGroups::new(fips.client().clone()),
            fips,
            watcher,
            resync,
            known: Mutex::new(HashMap::new()),
            external_network: OnceCell::new(),
            subnets: OnceCell::new(),
        }
    }

    fn options(&self, request: &LoadBalancerRequest) -> Result<LbOptions, CloudError> {
        annotations::parse(&self.config, &self.classes, request).map_err(|e| {
            invalid(format!(
                "invalid annotations: {}",
                e.to_string().replace('\n', "; ")
            ))
        })
    }

    fn recall(&self, name: &str) -> Option<Known> {
        self.known.lock().expect("known lock").get(name).cloned()
    }

    fn remember(&self, name: &str, f: impl FnOnce(&mut Known)) {
        let mut known = self.known.lock().expect("known lock");
        f(known.entry(name.to_owned()).or_default());
    }

    fn forget(&self, name: &str) {
        self.known.lock().expect("known lock").remove(name);
    }

    /// The spec with a VIP subnet: configured, or the subnet holding the first member.
    async fn with_vip(&self, mut spec: LbSpec) -> Result<LbSpec, CloudError> {
        if spec.vip_subnet_id.is_some() || spec.vip_network_id.is_some() {
            return Ok(spec);
        }
        let address = spec
            .listeners
            .iter()
            .flat_map(|l| &l.pool.members)
            .map(|m| m.address.clone())
            .next()
            .ok_or_else(|| {
                invalid("no subnet-id or network-id in [LoadBalancer] and no node to take the subnet from")
            })?;
        let subnets = self.subnets.get_or_try_init(|| self.fips.subnets()).await?;
        let ip: std::net::IpAddr = address.parse().map_err(invalid)?;
        spec.vip_subnet_id = subnets
            .iter()
            .find(|(_, cidr)| Cidr::parse(cidr).is_ok_and(|c| c.contains_ip(ip)))
            .map(|(id, _)| id.clone());
        if spec.vip_subnet_id.is_none() {
            return Err(invalid(format!(
                "no subnet holds node address {address}; set subnet-id in [LoadBalancer]"
            )));
        }
        Ok(spec)
    }

    /// The load balancer of `name`: by the remembered id, else by name.
    async fn find(&self, name: &str) -> Result<Option<Value>, CloudError> {
        if let Some(k) = self.recall(name) {
            if let Some(lb) = self.octavia.get(&k.id).await? {
                if lb["name"] == name {
                    return Ok(Some(lb));
                }
            }
        }
        self.octavia.find(name).await
    }

    async fn floating_network(&self, options: &LbOptions) -> Result<String, CloudError> {
        if let Some(n) = &options.floating_network_id {
            return Ok(n.clone());
        }
        self.external_network
            .get_or_try_init(|| async {
                self.fips.external_network().await?.ok_or_else(|| {
                    invalid(
                        "no floating-network-id in [LoadBalancer] and no external network found",
                    )
                })
            })
            .await
            .cloned()
    }

    /// The public address of the load balancer: its floating IP, made or attached if needed.
    async fn ensure_fip(
        &self,
        request: &LoadBalancerRequest,
        options: &LbOptions,
        lb: &Value,
        name: &str,
    ) -> Result<String, CloudError> {
        let port = text(lb, "vip_port_id");
        let ours = names::fip_description(&request.cluster_name, &request.service);
        let kept = format!("Kept {ours}");
        if let Some(fip) = self.recall(name).and_then(|k| k.fip) {
            if options.address.as_ref().is_none_or(|a| *a == fip) {
                return Ok(fip);
            }
        }
        let on_port = self.fips.on_port(&port).await?;
        let mut address = None;
        for fip in &on_port {
            let a = text(fip, "floating_ip_address");
            if options.address.as_ref().is_none_or(|want| *want == a) {
                address = Some((text(fip, "id"), a, text(fip, "description")));
            } else {
                // Another address is asked for: ours is released, anyone else's detached.
                if text(fip, "description") == ours && !options.keep_floatingip {
                    self.fips.delete(&text(fip, "id")).await?;
                } else {
                    self.fips.associate(&text(fip, "id"), None).await?;
                }
            }
        }
        let (fip_id, address, description) = match address {
            Some(found) => found,
            None => match &options.address {
                Some(want) => match self.fips.by_address(want).await? {
                    Some(fip) => {
                        let busy = fip["port_id"].as_str().is_some_and(|p| p != port);
                        if busy {
                            return Err(invalid(format!(
                                "floating IP {want} is attached to another port"
                            )));
                        }
                        self.fips.associate(&text(&fip, "id"), Some(&port)).await?;
                        (text(&fip, "id"), want.clone(), text(&fip, "description"))
                    }
                    None => {
                        let network = self.floating_network(options).await?;
                        let fip = self
                            .create_fip(&network, options, Some(want), &port, &ours)
                            .await?;
                        (text(&fip, "id"), want.clone(), ours.clone())
                    }
                },
                None => {
                    let network = self.floating_network(options).await?;
                    let fip = self
                        .create_fip(&network, options, None, &port, &ours)
                        .await?;
                    (
                        text(&fip, "id"),
                        text(&fip, "floating_ip_address"),
                        ours.clone(),
                    )
                }
            },
        };
        // keep-floatingip: the address stops being ours, so no deletion ever releases it.
        if options.keep_floatingip && description == ours {
            self.fips.describe(&fip_id, &kept).await?;
        }
        self.remember(name, |k| k.fip = Some(address.clone()));
        Ok(address)
    }

    fn ingress(options: &LbOptions, address: String) -> Vec<Ingress> {
        if let Some(h) = &options.hostname {
            return vec![Ingress {
                hostname: Some(h.clone()),
                ip: None,
            }];
        }
        if let Some(suffix) = &options.ingress_hostname_suffix {
            return vec![Ingress {
                hostname: Some(format!("{address}.{suffix}")),
                ip: None,
            }];
        }
        vec![Ingress {
            hostname: None,
            ip: Some(address),
        }]
    }

    /// Sends the first pool whose members differ from `members` (per listener) its new members;
    /// whether a change was sent. The remembered tree follows.
    async fn push_members(
        &self,
        name: &str,
        known: &Known,
        members: &[Vec<spec::MemberSpec>],
    ) -> Result<bool, CloudError> {
        let Some(have) = known.spec.as_ref() else {
            return Ok(false);
        };
        let Some(i) = have
            .listeners
            .iter()
            .zip(members)
            .position(|(l, m)| !spec::members_match(&l.pool.members, m))
        else {
            return Ok(false);
        };
        let pools = match &known.pools {
            Some(p) => p.clone(),
            None => pool_ids(
                have.listeners.len(),
                name,
                &self.octavia.pools(&known.id).await?,
            ),
        };
        let pool = pools
            .get(i)
            .filter(|p| !p.is_empty())
            .cloned()
            .ok_or_else(|| pending(format!("pool {i} of {name}")))?;
        match self.octavia.set_members(&pool, &members[i]).await {
            Ok(()) => {}
            Err(e) if is_conflict(&e) => {
                return Err(pending(format!("load balancer {name} is busy")));
            }
            Err(e) => return Err(e),
        }
        self.remember(name, |k| {
            if let Some(s) = k.spec.as_mut() {
                s.listeners[i].pool.members = members[i].clone();
            }
            k.pools = Some(pools);
        });
        Ok(true)
    }

    /// Releases the floating IPs of a load balancer's VIP port: ours deleted, others detached.
    async fn release_fips(
        &self,
        cluster: &str,
        service: &ServiceRef,
        lb: &Value,
    ) -> Result<(), CloudError> {
        let port = text(lb, "vip_port_id");
        if port.is_empty() {
            return Ok(());
        }
        let ours = names::fip_description(cluster, service);
        for fip in self.fips.on_port(&port).await? {
            // Ours, or made by this cluster for another Service that shared the load balancer
            // (its owner, gone first): the load balancer goes, so does the address.
            let description = text(&fip, "description");
            if description == ours || names::fip_owner(cluster, &description).is_some() {
                self.fips.delete(&text(&fip, "id")).await?;
            } else {
                self.fips.associate(&text(&fip, "id"), None).await?;
            }
        }
        Ok(())
    }

    /// Deletes a load balancer (not pending) with its floating IPs handled.
    async fn delete_lb(
        &self,
        cluster: &str,
        service: &ServiceRef,
        lb: &Value,
    ) -> Result<(), CloudError> {
        self.release_fips(cluster, service, lb).await?;
        match self.octavia.delete(&text(lb, "id")).await {
            Err(e) if is_conflict(&e) => {
                Err(pending(format!("load balancer {}", text(lb, "name"))))
            }
            other => other,
        }
    }
}

#[async_trait]
impl LoadBalancer for OpenStackLoadBalancers {
    async fn ensure(&self, request: &LoadBalancerRequest) -> Result<Vec<Ingress>, CloudError> {
        let options = self.options(request)?;
        let spec = spec::desired(request, &options, &self.config.lb_provider).map_err(invalid)?;
        // A pre-made VIP port (`port-id`) brings its own subnet.
        let spec = if options.port_id.is_some() {
            spec
        } else {
            self.with_vip(spec).await?
        };
        let name = spec.name.clone();
        let key = request.service.key();
        let found = match &options.lb_id {
            Some(id) => Some(self.octavia.get(id).await?.ok_or_else(|| {
                invalid(format!("load balancer {id} (load-balancer-id) not found"))
            })?),
            None => self.find(&name).await?,
        };
        let Some(lb) = found else {
            let mut body = spec::create_body(&spec, std::slice::from_ref(&name));
            if let (Some(port), Some(lb)) = (&options.port_id, body["loadbalancer"].as_object_mut())
            {
                lb.remove("vip_subnet_id");
                lb.remove("vip_network_id");
                lb.insert("vip_port_id".into(), serde_json::json!(port));
            }
            let lb = match self.octavia.create(&body).await {
                Ok(lb) => lb,
                Err(e) if is_conflict(&e) => {
                    return Err(pending(format!("load balancer {name} (Octavia busy)")))
                }
                Err(e) => return Err(e),
            };
            let id = text(&lb, "id");
            tracing::info!(service = %format!("{}/{}", key.namespace, key.name), lb = %id, "creating load balancer");
            self.remember(&name, |k| {
                *k = Known {
                    id: id.clone(),
                    spec: Some(spec.clone()),
                    pools: None,
                    fip: None,
                    sg: None,
                }
            });
            self.watcher.watch(&id, key);
            return Err(pending(format!("load balancer {name} (PENDING_CREATE)")));
        };
        let id = text(&lb, "id");
        let owner = shared::may_join(&lb, &name, self.config.max_shared_lb, options.internal)
            .map_err(invalid)?;
        let status = text(&lb, "provisioning_status");
        if is_pending(&status) {
            self.watcher.watch(&id, key);
            return Err(pending(format!("load balancer {name} ({status})")));
        }
        if status == "ERROR" && !owner {
            return Err(invalid(format!(
                "shared load balancer {id} is in ERROR; only its owner may replace it"
            )));
        }
        if !owner {
            // Joining: the Service's name among the load balancer's tags first, so that a
            // deletion finds it even if the CCM stops before the listeners are made.
            if let Some(tags) = shared::tags_with(&lb, &name) {
                tracing::info!(lb = %id, service = %format!("{}/{}", key.namespace, key.name), "joining a shared load balancer");
                match self.octavia.set_tags(&id, &tags).await {
                    Err(e) if is_conflict(&e) => {}
                    other => other?,
                }
                self.watcher.watch(&id, key);
                return Err(pending(format!("load balancer {id} (joining)")));
            }
        }
        if status == "ERROR" {
            tracing::warn!(lb = %id, "load balancer in ERROR; deleting it to create it again");
            self.forget(&name);
            self.delete_lb(&request.cluster_name, &request.service, &lb)
                .await?;
            self.watcher.watch(&id, key);
            return Err(pending(format!(
                "load balancer {name} (ERROR, being replaced)"
            )));
        }
        let known = self.recall(&name).filter(|k| k.id == id);
        if let Some(k) = known.as_ref().filter(|k| only_members_differ(k, &spec)) {
            // Only nodes changed: one batch member update, no reading back.
            let members: Vec<_> = spec
                .listeners
                .iter()
                .map(|l| l.pool.members.clone())
                .collect();
            if self.push_members(&name, k, &members).await? {
                self.watcher.watch(&id, key);
                return Err(pending(format!("load balancer {name} (members changing)")));
            }
        }
        let known = self.recall(&name).filter(|k| k.id == id);
        if known.as_ref().and_then(|k| k.spec.as_ref()) != Some(&spec) {
            let full = self.octavia.tree(&id).await?;
            let taken = shared::port_conflicts(&full, &spec, &name, owner);
            if !taken.is_empty() {
                return Err(invalid(format!(
                    "listener port(s) {taken:?} of load balancer {id} belong to another Service or a user"
                )));
            }
            let tree = shared::ours(full, &name, owner);
            match plan_step(&tree, &spec) {
                Some(mut step) => {
                    if let spec::Step::CreateListener(body) = &mut step {
                        body["tags"] = serde_json::json!([name]);
                    }
                    tracing::info!(lb = %id, step = ?step, "updating load balancer");
                    self.remember(&name, |k| {
                        k.id = id.clone();
                        k.spec = None;
                        k.pools = None;
                    });
                    match self.octavia.apply(&id, &step).await {
                        Ok(()) => {}
                        Err(e) if is_conflict(&e) => {}
                        Err(e) => return Err(e),
                    }
                    self.watcher.watch(&id, key);
                    return Err(pending(format!("load balancer {name} (PENDING_UPDATE)")));
                }
                None => {
                    let pools = tree
                        .listeners
                        .iter()
                        .map(|l| {
                            l.pool
                                .as_ref()
                                .map(|p| text(&p.pool, "id"))
                                .unwrap_or_default()
                        })
                        .collect();
                    self.remember(&name, |k| {
                        k.id = id.clone();
                        k.spec = Some(spec.clone());
                        k.pools = Some(pools);
                    });
                }
            }
        }
        self.sync_security_group(
            request,
            &options,
            &name,
            spec.vip_subnet_id.as_deref(),
            spec.listeners.iter().flat_map(|l| &l.pool.members),
        )
        .await?;
        let address = if options.internal {
            text(&lb, "vip_address")
        } else if !owner {
            // A Service sharing a load balancer uses the owner's floating IP and never adds one
            // (it could expose the owner's internal Services).
            let on_port = self.fips.on_port(&text(&lb, "vip_port_id")).await?;
            on_port
                .first()
                .map(|f| text(f, "floating_ip_address"))
                .ok_or_else(|| {
                    invalid(format!(
                        "load balancer {id} has no floating IP and only its owner Service may attach one"
                    ))
                })?
        } else {
            self.ensure_fip(request, &options, &lb, &name).await?
        };
        Ok(Self::ingress(&options, address))
    }

    async fn update_targets(&self, request: &LoadBalancerRequest) -> Result<bool, CloudError> {
        let options = self.options(request)?;
        let name = names::lb_name(&request.cluster_name, &request.service);
        let Some(known) = self.recall(&name).filter(|k| k.spec.is_some()) else {
            // Nothing known (after a restart, or while changing): a full sync reads the tree.
            return Err(pending(format!("load balancer {name} not read yet")));
        };
        let members: Vec<_> = known
            .spec
            .iter()
            .flat_map(|s| &s.listeners)
            .map(|l| {
                request
                    .ports
                    .iter()
                    .find(|p| p.port == l.port)
                    .map(|p| spec::members(request, &options, p.node_port))
                    .unwrap_or_else(|| l.pool.members.clone())
            })
            .collect();
        let changed = self.push_members(&name, &known, &members).await?;
        let vip_subnet = known.spec.as_ref().and_then(|s| s.vip_subnet_id.clone());
        self.sync_security_group(
            request,
            &options,
            &name,
            vip_subnet.as_deref(),
            members.iter().flatten(),
        )
        .await?;
        let more = self.recall(&name).and_then(|k| k.spec).is_some_and(|s| {
            s.listeners
                .iter()
                .zip(&members)
                .any(|(l, m)| !spec::members_match(&l.pool.members, m))
        });
        if more {
            // Octavia takes one change at a time: the next pool once this one settles.
            self.watcher.watch(&known.id, request.service.key());
            return Err(pending(format!(
                "load balancer {name} (more pools to update)"
            )));
        }
        Ok(changed)
    }

    async fn ensure_deleted(
        &self,
        cluster_name: &str,
        service: &ServiceRef,
    ) -> Result<(), CloudError> {
        let name = names::lb_name(cluster_name, service);
        self.remove_security_group(service).await?;
        let found = match self.find(&name).await? {
            Some(lb) => Some(lb),
            None => self.octavia.find_tagged(&name).await?,
        };
        let Some(lb) = found else {
            self.forget(&name);
            return Ok(());
        };
        let status = text(&lb, "provisioning_status");
        if status == "PENDING_DELETE" {
            // Octavia is deleting it already; nothing is left for us to do.
            self.forget(&name);
            return Ok(());
        }
        if is_pending(&status) {
            self.watcher.watch(&text(&lb, "id"), service.key());
            return Err(pending(format!("load balancer {name} ({status})")));
        }
        if !shared::delete_whole(&lb, &name) {
            return self.leave_shared(&name, &lb, service).await;
        }
        self.delete_lb(cluster_name, service, &lb).await?;
        self.forget(&name);
        Ok(())
    }

    async fn reap(&self, cluster_name: &str, live: &[ServiceRef]) -> Result<usize, CloudError> {
        let groups = self.reap_security_groups(cluster_name, live).await?;
        let live: BTreeSet<(String, String)> = live
            .iter()
            .map(|s| (s.namespace.clone(), s.name.clone()))
            .collect();
        let mut reaped = 0;
        let lbs = self.octavia.list().await?;
        let mut vip_ports = BTreeSet::new();
        for lb in &lbs {
            vip_ports.insert(text(lb, "vip_port_id"));
            let Some((ns, svc)) = names::service_of(cluster_name, &text(lb, "name")) else {
                continue;
            };
            if live.contains(&(ns.clone(), svc.clone()))
                || is_pending(&text(lb, "provisioning_status"))
                || shared_with_others(cluster_name, lb, &live)
            {
                continue;
            }
            let service = ServiceRef {
                namespace: ns,
                name: svc,
                uid: String::new(),
            };
            tracing::info!(lb = %text(lb, "id"), name = %text(lb, "name"), "reaping load balancer of a vanished Service");
            self.delete_lb(cluster_name, &service, lb).await?;
            self.forget(&text(lb, "name"));
            reaped += 1;
        }
        // Our floating IPs whose Service is gone and whose port is no live load balancer's.
        for fip in self.fips.all().await? {
            let Some(owner) = names::fip_owner(cluster_name, &text(&fip, "description")) else {
                continue;
            };
            let port = text(&fip, "port_id");
            if live.contains(&owner) || (!port.is_empty() && vip_ports.contains(&port)) {
                continue;
            }
            tracing::info!(fip = %text(&fip, "floating_ip_address"), "releasing floating IP of a vanished Service");
            self.fips.delete(&text(&fip, "id")).await?;
        }
        Ok(reaped + groups)
    }

    fn resync_requests(&self) -> Option<BoxStream<'static, ServiceKey>> {
        Some(self.resync.subscribe())
    }
}

/// Whether another Service (a live one of this cluster, or any of another cluster) is tagged on
/// load balancer `lb`: the reaper leaves it.
fn shared_with_others(cluster: &str, lb: &Value, live: &BTreeSet<(String, String)>) -> bool {
    let own = text(lb, "name");
    lb["tags"].as_array().into_iter().flatten().any(|t| {
        let t = t.as_str().unwrap_or_default();
        t != own
            && t.starts_with(shared::SERVICE_PREFIX)
            && names::service_of(cluster, t).is_none_or(|s| live.contains(&s))
    })
}

/// Whether the remembered tree differs from `desired` in members only.
fn only_members_differ(known: &Known, desired: &LbSpec) -> bool {
    let Some(have) = &known.spec else {
        return false;
    };
    if have == desired || have.listeners.len() != desired.listeners.len() {
        return false;
    }
    let mut a = have.clone();
    for (l, d) in a.listeners.iter_mut().zip(&desired.listeners) {
        l.pool.members = d.pool.members.clone();
    }
    a == *desired
}

/// Pool ids by listener index, matched by OCCM's pool names (empty: not found).
fn pool_ids(listeners: usize, lb: &str, pools: &[Value]) -> Vec<String> {
    (0..listeners)
        .map(|i| {
            let want = names::pool_name(i, lb);
            pools
                .iter()
                .find(|p| p["name"] == want.as_str())
                .map(|p| text(p, "id"))
                .unwrap_or_default()
        })
        .collect()
}
