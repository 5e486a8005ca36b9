//! The desired shape of a Network Load Balancer (instance targets), computed from a Service
//! request and its annotations. Pure.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};
use stratus_cloud::{LoadBalancerRequest, Protocol};

use stratus_aws_api::annotations::{
    BackendProtocol, HealthCheckPort, HealthCheckProtocol, LbAnnotations,
};
use stratus_aws_api::sg_rules::CidrRule;
use stratus_aws_api::tags::ownership_tags;

/// Tag naming the load balancer a target group belongs to (found again by the reaper).
pub const LOAD_BALANCER_TAG: &str = "stratus.io/load-balancer-name";

/// Upstream defaults of an NLB health check.
pub const DEFAULT_HC_INTERVAL: i32 = 10;
/// Upstream's NLB health-check timeout (seconds).
pub const DEFAULT_HC_TIMEOUT: i32 = 10;
/// Upstream's NLB health-check thresholds.
pub const DEFAULT_HC_THRESHOLD: i32 = 3;

/// A target-group health check.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetHealthCheck {
    /// `TCP`, `HTTP` or `HTTPS`.
    pub protocol: String,
    /// A port number or `traffic-port`.
    pub port: String,
    /// Path for HTTP(S).
    pub path: Option<String>,
    /// Interval in seconds.
    pub interval: i32,
    /// Timeout in seconds.
    pub timeout: i32,
    /// Healthy threshold.
    pub healthy_threshold: i32,
    /// Unhealthy threshold.
    pub unhealthy_threshold: i32,
}

/// One listener and the target group behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPort {
    /// The listener port.
    pub port: i32,
    /// Listener protocol: `TCP`, `UDP` or `TLS`.
    pub protocol: String,
    /// Certificate ARN of a TLS listener.
    pub certificate: Option<String>,
    /// SSL policy of a TLS listener.
    pub ssl_policy: Option<String>,
    /// The target group's name.
    pub target_group: String,
    /// Target-group protocol: `TCP`, `UDP` or `TLS`.
    pub target_protocol: String,
    /// The node port targets listen on.
    pub node_port: i32,
}

/// Everything an NLB should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSpec {
    /// The NLB name.
    pub name: String,
    /// Internal scheme.
    pub internal: bool,
    /// One listener and target group per port.
    pub ports: Vec<NetworkPort>,
    /// The target groups' health check.
    pub health_check: TargetHealthCheck,
    /// Target-group attributes to set (only the two upstream allows).
    pub target_group_attributes: Vec<(String, String)>,
    /// Elastic IP allocations, one per subnet.
    pub eip_allocations: Vec<String>,
    /// Private IPv4 addresses, one per subnet.
    pub private_ipv4_addresses: Vec<String>,
    /// The tags (ownership plus the user's).
    pub tags: BTreeMap<String, String>,
    /// Tags of the target groups (ownership plus the load-balancer name).
    pub target_group_tags: BTreeMap<String, String>,
}

/// Target-group name as upstream: `k8s-<ns8>-<name8>-<hash10>` (32 characters at most), the
/// hash covering what a target group cannot change in place.
pub fn target_group_name(
    namespace: &str,
    service: &str,
    lb_name: &str,
    protocol: &str,
    node_port: i32,
) -> String {
    let part = |s: &str| -> String {
        let cut: String = s
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(8)
            .collect();
        cut.trim_matches('-').to_string()
    };
    let digest = Sha256::digest(format!("{lb_name}:{protocol}:{node_port}"));
    let hash: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let mut name = String::from("k8s");
    for p in [part(namespace), part(service)] {
        if !p.is_empty() {
            name.push('-');
            name.push_str(&p);
        }
    }
    name.push('-');
    name.push_str(&hash[..10]);
    name
}

/// Most listeners of one Network Load Balancer: the "listeners per Network Load Balancer" quota
/// of Elastic Load Balancing (50). One listener (and one target group) per Service port, so a
/// Service with more ports is refused before any AWS call.
pub const MAX_NLB_LISTENERS: usize = 50;

/// The desired NLB, or why the Service cannot have one.
pub fn network_spec(
    request: &LoadBalancerRequest,
    ann: &LbAnnotations,
    cluster_id: &str,
) -> Result<NetworkSpec, String> {
    if request.requested_ip.is_some() {
        return Err("spec.loadBalancerIP cannot be set for an AWS load balancer".into());
    }
    if request.ports.is_empty() {
        return Err("the Service has no ports".into());
    }
    if request.ports.len() > MAX_NLB_LISTENERS {
        return Err(format!(
            "the Service has {} ports, but a Network Load Balancer has at most {MAX_NLB_LISTENERS} listeners",
            request.ports.len()
        ));
    }
    let protocols: BTreeSet<Protocol> = request.ports.iter().map(|p| p.protocol).collect();
    if protocols.contains(&Protocol::Sctp) {
        return Err("an NLB does not support SCTP".into());
    }
    if protocols.len() > 1 {
        return Err(
            "mixed protocols (TCP and UDP) in one Service are not supported for an NLB".into(),
        );
    }
    let name = request.service.default_load_balancer_name();
    let mut ports = Vec::new();
    for p in &request.ports {
        let tls = ann
            .ssl
            .as_ref()
            .filter(|s| p.protocol == Protocol::Tcp && s.ports.matches(p.port, Some(&p.name)));
        let (protocol, certificate, ssl_policy) = match tls {
            Some(s) => (
                "TLS",
                Some(s.certificate_arn.clone()),
                s.negotiation_policy.clone(),
            ),
            None if p.protocol == Protocol::Udp => ("UDP", None, None),
            None => ("TCP", None, None),
        };
        let target_protocol = match (tls, ann.backend_protocol) {
            (Some(_), Some(BackendProtocol::Ssl)) => "TLS",
            _ if p.protocol == Protocol::Udp => "UDP",
            _ => "TCP",
        };
        ports.push(NetworkPort {
            port: i32::from(p.port),
            protocol: protocol.into(),
            certificate,
            ssl_policy,
            target_group: target_group_name(
                &request.service.namespace,
                &request.service.name,
                &name,
                target_protocol,
                i32::from(p.node_port),
            ),
            target_protocol: target_protocol.into(),
            node_port: i32::from(p.node_port),
        });
    }
    let hc = &ann.health_check;
    let local = request.local_traffic_only && request.health_check_node_port.is_some();
    let protocol = match hc.protocol {
        Some(HealthCheckProtocol::Tcp) => "TCP",
        Some(HealthCheckProtocol::Http) => "HTTP",
        Some(HealthCheckProtocol::Https) => "HTTPS",
        None if local => "HTTP",
        None => "TCP",
    };
    let port = match (hc.port, request.health_check_node_port) {
        (Some(HealthCheckPort::Port(n)), _) => n.to_string(),
        (Some(HealthCheckPort::TrafficPort), _) => "traffic-port".into(),
        (None, Some(n)) if local => n.to_string(),
        (None, _) => "traffic-port".into(),
    };
    let path = (protocol != "TCP").then(|| {
        hc.path
            .clone()
            .unwrap_or_else(|| if local { "/healthz" } else { "/" }.to_string())
    });
    let health_check = TargetHealthCheck {
        protocol: protocol.into(),
        port,
        path,
        interval: hc
            .interval_seconds
            .map_or(DEFAULT_HC_INTERVAL, |v| v as i32),
        timeout: hc.timeout_seconds.map_or(DEFAULT_HC_TIMEOUT, |v| v as i32),
        healthy_threshold: hc
            .healthy_threshold
            .map_or(DEFAULT_HC_THRESHOLD, |v| v as i32),
        unhealthy_threshold: hc
            .unhealthy_threshold
            .map_or(DEFAULT_HC_THRESHOLD, |v| v as i32),
    };
    let tags = ownership_tags(cluster_id, &request.service, &ann.additional_tags);
    let mut target_group_tags = tags.clone();
    target_group_tags.insert(LOAD_BALANCER_TAG.into(), name.clone());
    Ok(NetworkSpec {
        name,
        internal: ann.internal,
        ports,
        health_check,
        target_group_attributes: ann
            .target_group_attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
        eip_allocations: ann.eip_allocations.clone(),
        private_ipv4_addresses: ann
            .private_ipv4_addresses
            .iter()
            .map(|a| a.to_string())
            .collect(),
        tags,
        target_group_tags,
    })
}

/// Description prefixes of the rules an NLB gets on node groups (as upstream).
pub fn nlb_rule_descriptions(lb_name: &str) -> [String; 3] {
    [
        format!("kubernetes.io/rule/nlb/client={lb_name}"),
        format!("kubernetes.io/rule/nlb/health={lb_name}"),
        format!("kubernetes.io/rule/nlb/mtu={lb_name}"),
    ]
}

/// Rules node groups need for an NLB: clients to every node port from the source ranges,
/// health checks from the VPC, ICMP fragmentation-needed from the source ranges.
pub fn nlb_node_rules(
    spec: &NetworkSpec,
    source_ranges: &[String],
    vpc_cidrs: &[String],
) -> BTreeSet<CidrRule> {
    let [client, health, mtu] = nlb_rule_descriptions(&spec.name);
    let mut out = BTreeSet::new();
    for p in &spec.ports {
        let proto = if p.target_protocol == "UDP" {
            "udp"
        } else {
            "tcp"
        };
        for cidr in source_ranges {
            out.insert(CidrRule {
                protocol: proto.into(),
                from: p.node_port,
                to: p.node_port,
                cidr: cidr.clone(),
                description: client.clone(),
            });
        }
        let hc_port = spec.health_check.port.parse::<i32>().unwrap_or(p.node_port);
        for cidr in vpc_cidrs {
            out.insert(CidrRule {
                protocol: "tcp".into(),
                from: hc_port,
                to: hc_port,
                cidr: cidr.clone(),
                description: health.clone(),
            });
        }
    }
    for cidr in source_ranges {
        let icmp = if cidr.contains(':') { "icmpv6" } else { "icmp" };
        out.insert(CidrRule {
            protocol: icmp.into(),
            from: 3,
            to: 4,
            cidr: cidr.clone(),
            description: mtu.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_aws_api::annotations::{self, PREFIX};
    use stratus_cloud::{ServicePort, ServiceRef};

    fn request(ports: &[(Protocol, u16, u16)]) -> LoadBalancerRequest {
        LoadBalancerRequest {
            cluster_name: "kubernetes".into(),
            service: ServiceRef {
                namespace: "my-namespace".into(),
                name: "web-frontend".into(),
                uid: "11111111-2222-3333-4444-555555555555".into(),
            },
            ports: ports
                .iter()
                .map(|(proto, p, np)| ServicePort {
                    name: format!("p{p}"),
                    protocol: *proto,
                    port: *p,
                    node_port: *np,
                })
                .collect(),
            annotations: BTreeMap::new(),
            source_ranges: vec![],
            local_traffic_only: false,
            health_check_node_port: None,
            requested_ip: None,
            external_ips: Vec::new(),
            load_balancer_class: None,
            nodes: vec![],
        }
    }

    fn spec(req: &LoadBalancerRequest, pairs: &[(&str, &str)]) -> Result<NetworkSpec, String> {
        let mut map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect();
        map.insert(format!("{PREFIX}type"), "nlb".into());
        network_spec(req, &annotations::parse(&map).unwrap(), "c1")
    }

    #[test]
    fn target_group_names_are_valid_and_stable() {
        let a = target_group_name("my-namespace", "web-frontend", "lb", "TCP", 30080);
        assert!(a.len() <= 32, "{a}");
        assert!(a.starts_with("k8s-my-names-web-fron-"), "{a}");
        assert!(!a.contains("--"));
        assert_eq!(
            a,
            target_group_name("my-namespace", "web-frontend", "lb", "TCP", 30080)
        );
        assert_ne!(
            a,
            target_group_name("my-namespace", "web-frontend", "lb", "TCP", 30081)
        );
        let b = target_group_name("abcdefg-x", "a", "lb", "TCP", 1);
        assert!(!b.contains("--"), "{b}");
    }

    #[test]
    fn tcp_defaults_and_tls() {
        let req = request(&[(Protocol::Tcp, 80, 30080), (Protocol::Tcp, 443, 30443)]);
        let s = spec(&req, &[]).unwrap();
        assert_eq!(s.ports[0].protocol, "TCP");
        assert_eq!(s.health_check.port, "traffic-port");
        assert_eq!(s.health_check.interval, 10);
        assert_eq!(s.target_group_tags[LOAD_BALANCER_TAG], s.name);
        let s = spec(&req, &[("ssl-cert", "arn:aws:acm:x"), ("ssl-ports", "443")]).unwrap();
        assert_eq!(s.ports[0].protocol, "TCP");
        assert_eq!(s.ports[1].protocol, "TLS");
        assert_eq!(s.ports[1].target_protocol, "TCP");
    }

    #[test]
    fn local_policy_checks_the_health_node_port() {
        let mut req = request(&[(Protocol::Tcp, 80, 30080)]);
        req.local_traffic_only = true;
        req.health_check_node_port = Some(32100);
        let s = spec(&req, &[]).unwrap();
        assert_eq!(
            (
                s.health_check.protocol.as_str(),
                s.health_check.port.as_str()
            ),
            ("HTTP", "32100")
        );
        assert_eq!(s.health_check.path.as_deref(), Some("/healthz"));
        let rules = nlb_node_rules(&s, &["0.0.0.0/0".into()], &["10.0.0.0/16".into()]);
        assert!(rules
            .iter()
            .any(|r| r.from == 32100 && r.cidr == "10.0.0.0/16"));
        assert!(rules
            .iter()
            .any(|r| r.from == 30080 && r.cidr == "0.0.0.0/0"));
    }

    #[test]
    fn refuses_mixed_protocols_and_pinned_ips() {
        let req = request(&[(Protocol::Tcp, 53, 30053), (Protocol::Udp, 53, 30054)]);
        assert!(spec(&req, &[]).unwrap_err().contains("mixed protocols"));
        let mut req = request(&[(Protocol::Udp, 53, 30053)]);
        assert_eq!(spec(&req, &[]).unwrap().ports[0].protocol, "UDP");
        req.requested_ip = Some("1.2.3.4".into());
        assert!(spec(&req, &[]).is_err());
    }

    #[test]
    fn refuses_more_ports_than_listeners() {
        let ports: Vec<(Protocol, u16, u16)> =
            (1..=51).map(|p| (Protocol::Tcp, p, 30000 + p)).collect();
        let e = spec(&request(&ports), &[]).unwrap_err();
        assert!(
            e.contains("51 ports") && e.contains("at most 50 listeners"),
            "{e}"
        );
        assert!(spec(&request(&ports[..MAX_NLB_LISTENERS]), &[]).is_ok());
    }
}
