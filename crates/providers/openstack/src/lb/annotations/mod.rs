//! The Service annotations OCCM reads (`loadbalancer.openstack.org/*`, the beta internal
//! annotation, Deckhouse's `loadbalancer.openstack.deckhouse.io/*`), merged with `[LoadBalancer]`
//! and the chosen `[LoadBalancerClass]` into one typed [`LbOptions`]. Pure: every unknown key
//! and bad value is collected at once, and a Service with any problem is not changed.

use std::collections::BTreeMap;

use stratus_cloud::LoadBalancerRequest;
use stratus_cloud_kit::annotations::{
    parse_go_bool, AnnotationErrors, AnnotationReader, KeyTable, ProblemKind,
};

use stratus_openstack_api::config::{LbMethod, LoadBalancerClass, LoadBalancerConfig};

/// OCCM's prefix.
pub const PREFIX: &str = "loadbalancer.openstack.org/";
/// Deckhouse's prefix.
pub const DECKHOUSE_PREFIX: &str = "loadbalancer.openstack.deckhouse.io/";
/// The legacy internal annotation.
pub const INTERNAL: &str = "service.beta.kubernetes.io/openstack-internal-load-balancer";

/// Every OCCM key.
pub const KNOWN: &[&str] = &[
    "node-selector",
    "connection-limit",
    "floating-network-id",
    "floating-subnet",
    "floating-subnet-id",
    "floating-subnet-tags",
    "class",
    "keep-floatingip",
    "port-id",
    "lb-method",
    "proxy-protocol",
    "subnet-id",
    "network-id",
    "member-subnet-id",
    "timeout-client-data",
    "timeout-member-connect",
    "timeout-member-data",
    "timeout-tcp-inspect",
    "x-forwarded-for",
    "flavor-id",
    "availability-zone",
    "enable-health-monitor",
    "health-monitor-delay",
    "health-monitor-timeout",
    "health-monitor-max-retries",
    "health-monitor-max-retries-down",
    "hostname",
    "load-balancer-address",
    "default-tls-container-ref",
    "load-balancer-id",
];

/// OCCM's table.
pub const TABLE: KeyTable = KeyTable {
    prefix: PREFIX,
    known: KNOWN,
    max_chars: |_| 1024,
    ignorable: |_, _| false,
};

/// Deckhouse's table.
pub const DECKHOUSE_TABLE: KeyTable = KeyTable {
    prefix: DECKHOUSE_PREFIX,
    known: &["load-balancer-address", "load-balancer-id"],
    max_chars: |_| 255,
    ignorable: |_, _| false,
};

/// Health checking of the members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorOptions {
    /// Seconds between checks.
    pub delay: u32,
    /// Seconds a check may take.
    pub timeout: u32,
    /// Successes to become healthy.
    pub max_retries: u32,
    /// Failures to become unhealthy.
    pub max_retries_down: u32,
}

/// Everything a Service's load balancer is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbOptions {
    /// No floating IP (internal load balancer).
    pub internal: bool,
    /// Pool algorithm.
    pub lb_method: &'static str,
    /// `PROXY` or `PROXYV2` pools.
    pub proxy_protocol: Option<&'static str>,
    /// HTTP listeners inserting `X-Forwarded-For`.
    pub x_forwarded_for: bool,
    /// Listener timeouts in ms: client data, member connect, member data, TCP inspect.
    pub timeouts: [Option<u32>; 4],
    /// Listener connection limit (-1: none).
    pub connection_limit: Option<i64>,
    /// Health monitor, when enabled.
    pub monitor: Option<MonitorOptions>,
    /// Keep a floating IP we created when the Service goes.
    pub keep_floatingip: bool,
    /// Where a new floating IP comes from.
    pub floating_network_id: Option<String>,
    /// Its subnet.
    pub floating_subnet_id: Option<String>,
    /// VIP subnet.
    pub subnet_id: Option<String>,
    /// VIP network.
    pub network_id: Option<String>,
    /// Members' subnet.
    pub member_subnet_id: Option<String>,
    /// Octavia flavor.
    pub flavor_id: Option<String>,
    /// Octavia availability zone.
    pub availability_zone: Option<String>,
    /// The floating IP to use (annotation or `spec.loadBalancerIP`).
    pub address: Option<String>,
    /// TLS container of TERMINATED_HTTPS listeners.
    pub tls_container_ref: Option<String>,
    /// Hostname published instead of the address.
    pub hostname: Option<String>,
    /// Publish `<address>.<suffix>` as the hostname.
    pub ingress_hostname_suffix: Option<String>,
    /// Labels target nodes must carry.
    pub node_selector: BTreeMap<String, String>,
    /// A load balancer to share (`load-balancer-id`, or Deckhouse's).
    pub lb_id: Option<String>,
    /// A pre-made VIP port (`port-id`).
    pub port_id: Option<String>,
    /// Floating subnets by name pattern (`floating-subnet`: a glob, `~regexp`, `!` negates),
    /// when no floating subnet id is set.
    pub floating_subnet: Option<String>,
    /// Floating subnets by tags (`floating-subnet-tags`: `a,b` any, `&a,b` all, `!` negates).
    pub floating_subnet_tags: Option<String>,
}

fn method_name(m: LbMethod) -> &'static str {
    match m {
        LbMethod::RoundRobin => "ROUND_ROBIN",
        LbMethod::LeastConnections => "LEAST_CONNECTIONS",
        LbMethod::SourceIp => "SOURCE_IP",
        LbMethod::SourceIpPort => "SOURCE_IP_PORT",
    }
}

fn uuid_like(s: &str) -> bool {
    s.len() >= 8 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// Reads the annotations of `request` against the config and classes.
pub fn parse(
    config: &LoadBalancerConfig,
    classes: &BTreeMap<String, LoadBalancerClass>,
    request: &LoadBalancerRequest,
) -> Result<LbOptions, AnnotationErrors> {
    let annotations = &request.annotations;
    let mut r = AnnotationReader::new(TABLE, annotations);
    let mut d = AnnotationReader::new(DECKHOUSE_TABLE, annotations);
    let mut problems = Vec::new();

    let internal = match annotations.get(INTERNAL) {
        None => config.internal_lb,
        Some(v) => match parse_go_bool(v) {
            Some(b) => b,
            None => {
                problems.push(stratus_cloud_kit::annotations::AnnotationProblem {
                    key: INTERNAL.into(),
                    kind: ProblemKind::InvalidValue,
                    value: Some(v.clone()),
                    reason: "must be a boolean (true or false)".into(),
                });
                config.internal_lb
            }
        },
    };
    let class = r.string("class");
    let class_cfg = match &class {
        Some(name) => match classes.get(name) {
            Some(c) => Some(c.clone()),
            None => {
                let known: Vec<&str> = classes.keys().map(String::as_str).collect();
                r.invalid(
                    "class",
                    name,
                    format!(
                        "no [LoadBalancerClass \"{name}\"] in the cloud config (known: {})",
                        if known.is_empty() {
                            "none".into()
                        } else {
                            known.join(", ")
                        }
                    ),
                );
                None
            }
        },
        None => None,
    };
    let pick = |ann: Option<String>, class: Option<&Option<String>>, cfg: &Option<String>| {
        ann.or_else(|| class.and_then(|c| c.clone()))
            .or_else(|| cfg.clone())
    };
    let id = |r: &mut AnnotationReader, key: &'static str| {
        let v = r.string(key)?;
        if uuid_like(&v) {
            Some(v)
        } else {
            r.invalid(key, &v, "must be an OpenStack ID");
            None
        }
    };
    let floating_network = id(&mut r, "floating-network-id");
    let floating_subnet = id(&mut r, "floating-subnet-id");
    let subnet = id(&mut r, "subnet-id");
    let network = id(&mut r, "network-id");
    let member_subnet = id(&mut r, "member-subnet-id");
    let flavor = r.string("flavor-id");
    let zone = r.string("availability-zone");
    let floating_subnet_name = r.string("floating-subnet");
    if let Some(p) = floating_subnet_name.as_deref() {
        if let Err(e) = super::floating_subnets::NameMatcher::parse(p) {
            r.invalid("floating-subnet", p, e);
        }
    }
    let floating_subnet_tags = r.string("floating-subnet-tags");
    let lb_id = match id(&mut r, "load-balancer-id") {
        Some(v) => Some(v),
        None => {
            let v = d.string("load-balancer-id");
            match v {
                Some(v) if uuid_like(&v) => Some(v),
                Some(v) => {
                    d.invalid("load-balancer-id", &v, "must be an OpenStack ID");
                    None
                }
                None => None,
            }
        }
    };
    let port_id = id(&mut r, "port-id");

    let lb_method = match r.raw("lb-method") {
        None => method_name(config.lb_method),
        Some(v) => match [
            "ROUND_ROBIN",
            "LEAST_CONNECTIONS",
            "SOURCE_IP",
            "SOURCE_IP_PORT",
        ]
        .into_iter()
        .find(|m| *m == v)
        {
            Some(m) => m,
            None => {
                r.invalid(
                    "lb-method",
                    v,
                    "must be ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP or SOURCE_IP_PORT",
                );
                method_name(config.lb_method)
            }
        },
    };
    let proxy_protocol = match r.raw("proxy-protocol") {
        None => None,
        Some("v1") => Some("PROXY"),
        Some("v2") => Some("PROXYV2"),
        Some(v) => match parse_go_bool(v) {
            Some(true) => Some("PROXY"),
            Some(false) => None,
            None => {
                r.invalid("proxy-protocol", v, "must be true, false, v1 or v2");
                None
            }
        },
    };
    let x_forwarded_for = r.bool("x-forwarded-for").unwrap_or(false);
    if x_forwarded_for && proxy_protocol.is_some() {
        r.report(
            "x-forwarded-for",
            ProblemKind::Inconsistent,
            Some("true"),
            "cannot be combined with proxy-protocol".into(),
        );
    }
    let timeouts = [
        r.int_in("timeout-client-data", 0, 86_400_000),
        r.int_in("timeout-member-connect", 0, 86_400_000),
        r.int_in("timeout-member-data", 0, 86_400_000),
        r.int_in("timeout-tcp-inspect", 0, 86_400_000),
    ];
    let connection_limit = match r.raw("connection-limit") {
        None => None,
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n >= -1 => Some(n),
            _ => {
                r.invalid(
                    "connection-limit",
                    v,
                    "must be -1 or a non-negative integer",
                );
                None
            }
        },
    };
    let monitor_on = r
        .bool("enable-health-monitor")
        .unwrap_or(config.create_monitor);
    let secs = |d: std::time::Duration| u32::try_from(d.as_secs()).unwrap_or(u32::MAX);
    let delay = r
        .int_in("health-monitor-delay", 1, 86_400)
        .unwrap_or(secs(config.monitor_delay));
    let timeout = r
        .int_in("health-monitor-timeout", 1, 86_400)
        .unwrap_or(secs(config.monitor_timeout));
    let max_retries = r
        .int_in("health-monitor-max-retries", 1, 10)
        .unwrap_or(config.monitor_max_retries);
    let max_retries_down = r
        .int_in("health-monitor-max-retries-down", 1, 10)
        .unwrap_or(config.monitor_max_retries_down);
    if monitor_on && timeout > delay {
        r.report(
            "health-monitor-timeout",
            ProblemKind::Inconsistent,
            Some(&timeout.to_string()),
            format!("must not exceed the delay ({delay})"),
        );
    }
    let keep_floatingip = r.bool("keep-floatingip").unwrap_or(false);
    let mut address = r
        .string("load-balancer-address")
        .or_else(|| d.string("load-balancer-address"))
        .or_else(|| request.requested_ip.clone().filter(|s| !s.is_empty()));
    if let Some(a) = &address {
        if a.parse::<std::net::IpAddr>().is_err() {
            r.invalid("load-balancer-address", a, "must be an IP address");
            address = None;
        }
    }
    if internal && address.is_some() && r.present("load-balancer-address") {
        r.report(
            "load-balancer-address",
            ProblemKind::Inconsistent,
            address.as_deref(),
            "an internal load balancer has no floating IP".into(),
        );
    }
    let hostname = r.string("hostname");
    let tls = r
        .string("default-tls-container-ref")
        .or_else(|| config.default_tls_container_ref.clone());
    let node_selector = match r.key_values("node-selector") {
        Some((_, kv)) => kv
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        None => config.node_selector.clone(),
    };

    let c = class_cfg.as_ref();
    let floating_subnet_id = pick(
        floating_subnet,
        c.map(|c| &c.floating_subnet_id),
        &config.floating_subnet_id,
    );
    // Name pattern and tags: the annotations, else the class's, else `[LoadBalancer]`'s.
    let floating_subnet_spec = if floating_subnet_name.is_some() || floating_subnet_tags.is_some() {
        (floating_subnet_name, floating_subnet_tags)
    } else {
        match c.filter(|c| c.floating_subnet.is_some() || c.floating_subnet_tags.is_some()) {
            Some(c) => (c.floating_subnet.clone(), c.floating_subnet_tags.clone()),
            None => (
                config.floating_subnet.clone(),
                config.floating_subnet_tags.clone(),
            ),
        }
    };
    let options = LbOptions {
        internal,
        lb_method,
        proxy_protocol,
        x_forwarded_for,
        timeouts,
        connection_limit,
        monitor: monitor_on.then_some(MonitorOptions {
            delay,
            timeout,
            max_retries,
            max_retries_down,
        }),
        keep_floatingip,
        floating_network_id: pick(
            floating_network,
            c.map(|c| &c.floating_network_id),
            &config.floating_network_id,
        ),
        floating_subnet_id: floating_subnet_id.clone(),
        subnet_id: pick(subnet, c.map(|c| &c.subnet_id), &config.subnet_id),
        network_id: pick(network, c.map(|c| &c.network_id), &config.network_id),
        member_subnet_id: pick(
            member_subnet,
            c.map(|c| &c.member_subnet_id),
            &config.member_subnet_id,
        ),
        flavor_id: flavor.or_else(|| config.flavor_id.clone()),
        availability_zone: zone.or_else(|| config.availability_zone.clone()),
        address: if internal { None } else { address },
        tls_container_ref: tls,
        hostname,
        // As OCCM: the fake hostname is published only for PROXY-protocol load balancers
        // (kube-proxy would otherwise bypass the load balancer and drop the PROXY header).
        ingress_hostname_suffix: (config.enable_ingress_hostname && proxy_protocol.is_some())
            .then(|| config.ingress_hostname_suffix.clone()),
        node_selector,
        lb_id,
        port_id,
        // A subnet id (annotation, class or config, in that order) wins over any pattern.
        floating_subnet: if floating_subnet_id.is_some() {
            None
        } else {
            floating_subnet_spec.0
        },
        floating_subnet_tags: if floating_subnet_id.is_some() {
            None
        } else {
            floating_subnet_spec.1
        },
    };
    let mut all = problems;
    for reader in [r, d] {
        if let Err(e) = reader.finish() {
            all.extend(e.0);
        }
    }
    if all.is_empty() {
        Ok(options)
    } else {
        Err(AnnotationErrors(all))
    }
}

#[cfg(test)]
mod tests;
