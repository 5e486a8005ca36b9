//! The desired Octavia tree of a Service (a pure function of the request and its options), the
//! tree read back from Octavia, and [`plan_step`]: the one next change that brings the cloud
//! closer (Octavia accepts one change at a time per load balancer, each followed by
//! PENDING_UPDATE, so the driver applies a step and answers "pending" instead of waiting).

use serde_json::{json, Value};
use stratus_cloud::{LoadBalancerRequest, NodeAddressType, Protocol};

use super::annotations::LbOptions;
use super::names;

/// A member of a pool.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemberSpec {
    /// Node IP.
    pub address: String,
    /// Node port.
    pub port: u16,
    /// Node name.
    pub name: String,
    /// Member subnet.
    pub subnet_id: Option<String>,
    /// Health check port (`externalTrafficPolicy: Local`).
    pub monitor_port: Option<u16>,
}

/// A health monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorSpec {
    /// Name.
    pub name: String,
    /// `TCP`, `UDP-CONNECT`, `HTTP`.
    pub kind: String,
    /// Seconds.
    pub delay: u32,
    /// Seconds.
    pub timeout: u32,
    /// Successes.
    pub max_retries: u32,
    /// Failures.
    pub max_retries_down: u32,
    /// HTTP path (HTTP monitors).
    pub url_path: Option<String>,
}

/// A pool (the default pool of a listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    /// Name.
    pub name: String,
    /// Protocol.
    pub protocol: String,
    /// Algorithm.
    pub lb_method: String,
    /// Members, sorted.
    pub members: Vec<MemberSpec>,
    /// Monitor.
    pub monitor: Option<MonitorSpec>,
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Name.
    pub name: String,
    /// Protocol.
    pub protocol: String,
    /// Port.
    pub port: u16,
    /// Connection limit (-1: none).
    pub connection_limit: i64,
    /// Timeouts in ms (None: Octavia's default).
    pub timeouts: [Option<u32>; 4],
    /// Insert `X-Forwarded-For`.
    pub x_forwarded_for: bool,
    /// `allowed_cidrs` (empty: any).
    pub allowed_cidrs: Vec<String>,
    /// TLS container.
    pub tls_container_ref: Option<String>,
    /// Its default pool.
    pub pool: PoolSpec,
}

/// The whole load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbSpec {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// VIP subnet.
    pub vip_subnet_id: Option<String>,
    /// VIP network.
    pub vip_network_id: Option<String>,
    /// Octavia provider.
    pub provider: String,
    /// Flavor.
    pub flavor_id: Option<String>,
    /// Zone.
    pub availability_zone: Option<String>,
    /// Listeners, in Service port order.
    pub listeners: Vec<ListenerSpec>,
}

const TIMEOUT_KEYS: [&str; 4] = [
    "timeout_client_data",
    "timeout_member_connect",
    "timeout_member_data",
    "timeout_tcp_inspect",
];

/// The node's member address: its InternalIP, else its ExternalIP (IPv4 first).
pub fn member_address(node: &stratus_cloud::TargetNode) -> Option<String> {
    for kind in [NodeAddressType::InternalIP, NodeAddressType::ExternalIP] {
        let mut found: Vec<&str> = node
            .addresses
            .iter()
            .filter(|a| a.kind == kind)
            .map(|a| a.address.as_str())
            .collect();
        found.sort_by_key(|a| a.contains(':'));
        if let Some(a) = found.first() {
            return Some((*a).to_owned());
        }
    }
    None
}

/// The members of every pool: target nodes with an address, filtered by the node selector.
pub fn members(
    request: &LoadBalancerRequest,
    options: &LbOptions,
    node_port: u16,
) -> Vec<MemberSpec> {
    let monitor_port = if request.local_traffic_only {
        request.health_check_node_port
    } else {
        None
    };
    let mut out: Vec<MemberSpec> = request
        .nodes
        .iter()
        .filter(|n| {
            options.node_selector.iter().all(|(k, v)| {
                n.labels
                    .get(k)
                    .is_some_and(|have| v.is_empty() || have == v)
            })
        })
        .filter_map(|n| {
            Some(MemberSpec {
                address: member_address(n)?,
                port: node_port,
                name: n.name.clone(),
                subnet_id: options.member_subnet_id.clone(),
                monitor_port,
            })
        })
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.address == b.address);
    out
}

/// The desired tree of `request`.
pub fn desired(
    request: &LoadBalancerRequest,
    options: &LbOptions,
    provider: &str,
) -> Result<LbSpec, String> {
    let name = names::lb_name(&request.cluster_name, &request.service);
    let mut listeners = Vec::new();
    for (i, port) in request.ports.iter().enumerate() {
        let base = match port.protocol {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        };
        if options.x_forwarded_for && port.protocol != Protocol::Tcp {
            return Err(format!(
                "x-forwarded-for needs TCP ports; port {} is {base}",
                port.port
            ));
        }
        let (listener_protocol, pool_protocol) =
            match (options.x_forwarded_for, options.proxy_protocol) {
                (true, _) => ("HTTP", "HTTP".to_owned()),
                (false, Some(p)) if port.protocol == Protocol::Tcp => ("TCP", p.to_owned()),
                _ => (base, base.to_owned()),
            };
        let monitor = options.monitor.as_ref().map(|m| {
            let (kind, url_path) =
                if request.local_traffic_only && request.health_check_node_port.is_some() {
                    ("HTTP".to_owned(), Some("/healthz".to_owned()))
                } else if port.protocol == Protocol::Udp {
                    ("UDP-CONNECT".to_owned(), None)
                } else {
                    ("TCP".to_owned(), None)
                };
            MonitorSpec {
                name: names::monitor_name(i, &name),
                kind,
                delay: m.delay,
                timeout: m.timeout,
                max_retries: m.max_retries,
                max_retries_down: m.max_retries_down,
                url_path,
            }
        });
        let mut allowed: Vec<String> = request.source_ranges.clone();
        allowed.sort();
        allowed.dedup();
        if allowed.iter().any(|c| c == "0.0.0.0/0") {
            allowed.clear();
        }
        listeners.push(ListenerSpec {
            name: names::listener_name(i, &name),
            protocol: listener_protocol.to_owned(),
            port: port.port,
            connection_limit: options.connection_limit.unwrap_or(-1),
            timeouts: options.timeouts,
            x_forwarded_for: options.x_forwarded_for,
            allowed_cidrs: allowed,
            tls_container_ref: options.tls_container_ref.clone(),
            pool: PoolSpec {
                name: names::pool_name(i, &name),
                protocol: pool_protocol,
                lb_method: options.lb_method.to_owned(),
                members: members(request, options, port.node_port),
                monitor,
            },
        });
    }
    Ok(LbSpec {
        description: names::lb_description(&request.cluster_name, &request.service),
        name,
        vip_subnet_id: options.subnet_id.clone(),
        vip_network_id: options.network_id.clone(),
        provider: provider.to_owned(),
        flavor_id: options.flavor_id.clone(),
        availability_zone: options.availability_zone.clone(),
        listeners,
    })
}

/// A member's request body.
pub fn member_body(m: &MemberSpec) -> Value {
    let mut b = json!({"address": m.address, "protocol_port": m.port, "name": m.name});
    if let Some(s) = &m.subnet_id {
        b["subnet_id"] = json!(s);
    }
    if let Some(p) = m.monitor_port {
        b["monitor_port"] = json!(p);
    }
    b
}

/// A monitor's request body (without `pool_id`).
pub fn monitor_body(m: &MonitorSpec) -> Value {
    let mut b = json!({"name": m.name, "type": m.kind, "delay": m.delay, "timeout": m.timeout,
        "max_retries": m.max_retries, "max_retries_down": m.max_retries_down});
    if let Some(p) = &m.url_path {
        b["url_path"] = json!(p);
        b["http_method"] = json!("GET");
        b["expected_codes"] = json!("200");
    }
    b
}

/// A pool's request body (without members, monitor or parent).
pub fn pool_body(p: &PoolSpec) -> Value {
    json!({"name": p.name, "protocol": p.protocol, "lb_algorithm": p.lb_method})
}

/// A listener's changeable attributes.
pub fn listener_attrs(l: &ListenerSpec) -> Value {
    let mut b = json!({"name": l.name, "connection_limit": l.connection_limit,
        "allowed_cidrs": if l.allowed_cidrs.is_empty() { Value::Null } else { json!(l.allowed_cidrs) },
        "insert_headers": if l.x_forwarded_for { json!({"X-Forwarded-For": "true"}) } else { json!({}) }});
    for (k, v) in TIMEOUT_KEYS.iter().zip(l.timeouts) {
        if let Some(v) = v {
            b[*k] = json!(v);
        }
    }
    if let Some(t) = &l.tls_container_ref {
        b["default_tls_container_ref"] = json!(t);
    }
    b
}

/// A listener's create body (without parent).
pub fn listener_body(l: &ListenerSpec) -> Value {
    let mut b = listener_attrs(l);
    b["protocol"] = json!(l.protocol);
    b["protocol_port"] = json!(l.port);
    b
}

/// The fully populated create body of the load balancer.
pub fn create_body(spec: &LbSpec, tags: &[String]) -> Value {
    let listeners: Vec<Value> = spec
        .listeners
        .iter()
        .map(|l| {
            let mut pool = pool_body(&l.pool);
            pool["members"] = json!(l.pool.members.iter().map(member_body).collect::<Vec<_>>());
            if let Some(m) = &l.pool.monitor {
                pool["healthmonitor"] = monitor_body(m);
            }
            let mut b = listener_body(l);
            b["default_pool"] = pool;
            // Listeners carry the Service's name too: on a shared load balancer that is how
            // each Service knows its own (OCCM's convention).
            b["tags"] = json!(tags);
            b
        })
        .collect();
    let mut b = json!({"name": spec.name, "description": spec.description, "provider": spec.provider,
        "tags": tags, "listeners": listeners});
    if let Some(s) = &spec.vip_subnet_id {
        b["vip_subnet_id"] = json!(s);
    } else if let Some(n) = &spec.vip_network_id {
        b["vip_network_id"] = json!(n);
    }
    if let Some(f) = &spec.flavor_id {
        b["flavor_id"] = json!(f);
    }
    if let Some(z) = &spec.availability_zone {
        b["availability_zone"] = json!(z);
    }
    json!({ "loadbalancer": b })
}

/// A listener read from Octavia (its raw object) with its default pool, members and monitor.
#[derive(Debug, Clone, PartialEq)]
pub struct ActualListener {
    /// The listener.
    pub listener: Value,
    /// Its default pool.
    pub pool: Option<ActualPool>,
}

/// A pool read from Octavia.
#[derive(Debug, Clone, PartialEq)]
pub struct ActualPool {
    /// The pool.
    pub pool: Value,
    /// Its members.
    pub members: Vec<Value>,
    /// Its monitor.
    pub monitor: Option<Value>,
}

/// The children read from Octavia.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ActualTree {
    /// Listeners.
    pub listeners: Vec<ActualListener>,
    /// Pools no listener uses.
    pub loose_pools: Vec<Value>,
}

/// One change to the tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Delete a listener.
    DeleteListener(String),
    /// Delete a pool (and its members and monitor).
    DeletePool(String),
    /// Update a listener's attributes.
    UpdateListener(String, Value),
    /// Create a listener.
    CreateListener(Value),
    /// Create the default pool of a listener.
    CreatePool {
        /// The listener.
        listener_id: String,
        /// The pool body.
        body: Value,
    },
    /// Update a pool's algorithm or name.
    UpdatePool(String, Value),
    /// Replace a pool's members.
    SetMembers(String, Vec<MemberSpec>),
    /// Create a monitor.
    CreateMonitor(Value),
    /// Update a monitor.
    UpdateMonitor(String, Value),
    /// Delete a monitor.
    DeleteMonitor(String),
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_default().to_owned()
}

/// Whether every key of `want` has that value in `have`.
fn covers(have: &Value, want: &Value) -> bool {
    want.as_object().is_none_or(|w| {
        w.iter().all(|(k, v)| {
            let h = &have[k.as_str()];
            h == v
                || (v.is_null() && (h.is_null() || h == &json!([])))
                || (k == "insert_headers" && v == &json!({}) && h.is_null())
        })
    })
}

/// The members as Octavia holds them.
pub fn actual_members(members: &[Value]) -> Vec<MemberSpec> {
    let mut out: Vec<MemberSpec> = members
        .iter()
        .map(|m| MemberSpec {
            address: m["address"].as_str().unwrap_or_default().to_owned(),
            port: m["protocol_port"].as_u64().unwrap_or(0) as u16,
            name: m["name"].as_str().unwrap_or_default().to_owned(),
            subnet_id: m["subnet_id"].as_str().map(str::to_owned),
            monitor_port: m["monitor_port"].as_u64().map(|p| p as u16),
        })
        .collect();
    out.sort();
    out
}

/// Whether the members match (the subnet is compared only when we set one).
pub fn members_match(actual: &[MemberSpec], desired: &[MemberSpec]) -> bool {
    actual.len() == desired.len()
        && actual.iter().zip(desired).all(|(a, d)| {
            a.address == d.address
                && a.port == d.port
                && a.name == d.name
                && a.monitor_port == d.monitor_port
                && (d.subnet_id.is_none() || a.subnet_id == d.subnet_id)
        })
}

/// The next change, or None when the tree is as desired.
pub fn plan_step(actual: &ActualTree, desired: &LbSpec) -> Option<Step> {
    let key = |l: &Value| {
        (
            l["protocol"].as_str().unwrap_or_default().to_owned(),
            l["protocol_port"].as_u64().unwrap_or(0),
        )
    };
    // Listeners nobody wants, then their pools and unused pools.
    for a in &actual.listeners {
        if !desired
            .listeners
            .iter()
            .any(|d| key(&a.listener) == (d.protocol.clone(), u64::from(d.port)))
        {
            return Some(Step::DeleteListener(id(&a.listener)));
        }
    }
    if let Some(p) = actual.loose_pools.first() {
        return Some(Step::DeletePool(id(p)));
    }
    for d in &desired.listeners {
        let Some(a) = actual
            .listeners
            .iter()
            .find(|a| key(&a.listener) == (d.protocol.clone(), u64::from(d.port)))
        else {
            return Some(Step::CreateListener(listener_body(d)));
        };
        let attrs = listener_attrs(d);
        if !covers(&a.listener, &attrs) {
            return Some(Step::UpdateListener(id(&a.listener), attrs));
        }
        let Some(pool) = &a.pool else {
            return Some(Step::CreatePool {
                listener_id: id(&a.listener),
                body: pool_body(&d.pool),
            });
        };
        if pool.pool["protocol"] != d.pool.protocol.as_str() {
            return Some(Step::DeletePool(id(&pool.pool)));
        }
        let attrs = json!({"name": d.pool.name, "lb_algorithm": d.pool.lb_method});
        if !covers(&pool.pool, &attrs) {
            return Some(Step::UpdatePool(id(&pool.pool), attrs));
        }
        if !members_match(&actual_members(&pool.members), &d.pool.members) {
            return Some(Step::SetMembers(id(&pool.pool), d.pool.members.clone()));
        }
        match (&pool.monitor, &d.pool.monitor) {
            (None, None) => {}
            (Some(m), None) => return Some(Step::DeleteMonitor(id(m))),
            (None, Some(want)) => {
                let mut body = monitor_body(want);
                body["pool_id"] = json!(id(&pool.pool));
                return Some(Step::CreateMonitor(body));
            }
            (Some(m), Some(want)) => {
                if m["type"] != want.kind.as_str() {
                    return Some(Step::DeleteMonitor(id(m)));
                }
                let mut body = monitor_body(want);
                if let Some(o) = body.as_object_mut() {
                    o.remove("type");
                }
                if !covers(m, &body) {
                    return Some(Step::UpdateMonitor(id(m), body));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
