//! The desired NLB of a Service, as a pure function of the Service and its parsed annotations:
//! one listener and one target group per Service port (TCP, UDP, TLS when `ssl-cert` names the
//! port, TCP_UDP when a TCP and a UDP port share a number), the names, the tags, and the subnet
//! slots with their static private addresses.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::ingress::annotations::HealthCheck;
use crate::ingress::plan::{clip, hash8, target_group_name, GroupId};
use stratus_aws_api::sg_rules::{listener_rules, source_ranges as source_ranges_of, CidrRule};

use crate::service::annotations::{NlbAnnotations, NlbTls, SOURCE_RANGES};

/// Layer-4 protocol of a listener or a target group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum L4Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// TLS (terminated by the load balancer, or spoken to the targets).
    Tls,
    /// TCP and UDP on one port.
    TcpUdp,
}

impl L4Protocol {
    /// The ELBv2 spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            L4Protocol::Tcp => "TCP",
            L4Protocol::Udp => "UDP",
            L4Protocol::Tls => "TLS",
            L4Protocol::TcpUdp => "TCP_UDP",
        }
    }
}

/// One listener port: its listener and target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NlbPort {
    /// Listener port (the Service port).
    pub port: i32,
    /// The listener's protocol.
    pub protocol: L4Protocol,
    /// The target group's protocol.
    pub target_protocol: L4Protocol,
    /// Target group name (≤ 32 characters, stable per Service port, target protocol and
    /// target type).
    pub target_group: String,
    /// The port the load balancer reaches on the targets: the targetPort (`ip`; a name is
    /// resolved by the binding) or the NodePort (`instance`).
    pub target_port: Option<IntOrString>,
}

impl NlbPort {
    /// Whether the listener terminates TLS.
    pub fn tls(&self) -> bool {
        self.protocol == L4Protocol::Tls
    }

    /// The security-group protocols of its traffic (`TCP`, `UDP`).
    pub fn sg_protocols(&self) -> &'static [&'static str] {
        match self.protocol {
            L4Protocol::Udp => &["UDP"],
            L4Protocol::TcpUdp => &["TCP", "UDP"],
            L4Protocol::Tcp | L4Protocol::Tls => &["TCP"],
        }
    }
}

/// A subnet of the NLB and its static private address, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetSlot {
    /// Subnet ID.
    pub subnet: String,
    /// `private-ipv4-addresses` entry for it.
    pub private_ip: Option<Ipv4Addr>,
    /// `eip-allocations` entry for it.
    pub allocation: Option<String>,
}

/// The desired NLB of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NlbSpec {
    /// Namespace of the Service.
    pub namespace: String,
    /// The Service.
    pub service: String,
    /// The load balancer's AWS name.
    pub name: String,
    /// Internet-facing (else internal).
    pub internet_facing: bool,
    /// `ip` targets (else `instance`).
    pub ip: bool,
    /// Ports in Service order.
    pub ports: Vec<NlbPort>,
    /// Subnets asked for (empty: discovered by tags).
    pub subnets: Vec<String>,
    /// Static private addresses, one per subnet.
    pub private_ips: Vec<Ipv4Addr>,
    /// Elastic IP allocations, one per subnet.
    pub eip_allocations: Vec<String>,
    /// Instance targets only on nodes with these labels.
    pub node_labels: BTreeMap<String, String>,
    /// Attributes of every target group.
    pub tg_attributes: BTreeMap<String, String>,
    /// Health check of every target group.
    pub health: HealthCheck,
    /// Tags from the annotations.
    pub tags: BTreeMap<String, String>,
    /// Certificates, policy and ALPN of the TLS listeners.
    pub tls: Option<NlbTls>,
    /// Load-balancer attributes to hold.
    pub lb_attributes: BTreeMap<String, String>,
    /// Given frontend security groups (none: a managed one, when the gate is on).
    pub security_groups: Vec<String>,
    /// With given groups: attach the backend group and manage the targets' rules too.
    pub manage_backend_rules: bool,
    /// Who may reach the listeners (`spec.loadBalancerSourceRanges`, else the
    /// `load-balancer-source-ranges` annotation; none: everyone).
    pub source_ranges: Vec<String>,
}

/// The stack key of a Service (`namespace/name`), its `service.k8s.aws/stack` tag.
pub fn stack_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// `k8s-<ns>-<svc>-<hash>`, at most 32 characters, distinct from any Ingress group's name.
pub fn nlb_name(cluster: &str, namespace: &str, name: &str) -> String {
    format!(
        "k8s-{}-{}-{}",
        clip(namespace, 8),
        clip(name, 8),
        hash8(&[cluster, "service", namespace, name])
    )
}

/// Plans the NLB of `svc`; `Err` lists every problem.
pub fn plan_nlb(
    cluster: &str,
    svc: &Service,
    ann: &NlbAnnotations,
) -> Result<NlbSpec, Vec<String>> {
    let namespace = svc.metadata.namespace.clone().unwrap_or_default();
    let service = svc.metadata.name.clone().unwrap_or_default();
    let group = GroupId::Explicit(format!("service:{}", stack_key(&namespace, &service)));
    let mut problems = Vec::new();
    let mut ports = Vec::new();
    let spec = svc.spec.clone().unwrap_or_default();
    let service_ports = spec.ports.unwrap_or_default();
    for (i, p) in service_ports.iter().enumerate() {
        let udp = match p.protocol.as_deref().unwrap_or("TCP") {
            "TCP" => false,
            "UDP" => true,
            other => {
                problems.push(format!("port {}: protocol {other} (TCP or UDP)", p.port));
                continue;
            }
        };
        if !ann.ip_targets && p.node_port.is_none() {
            problems.push(format!(
                "port {}: instance targets need a NodePort (allocateLoadBalancerNodePorts is false)",
                p.port
            ));
        }
        let earlier = service_ports[..i].iter().find(|q| q.port == p.port);
        let twin = service_ports[i + 1..].iter().find(|q| q.port == p.port);
        let (listener, target) = match (earlier, twin) {
            // The first of a TCP and a UDP port with one number makes the TCP_UDP listener.
            (Some(_), _) => continue,
            (None, Some(q)) => match tcp_udp_twin(p, q, ann.ip_targets) {
                Ok(()) => (L4Protocol::TcpUdp, L4Protocol::TcpUdp),
                Err(problem) => {
                    problems.push(problem);
                    continue;
                }
            },
            (None, None) if udp => (L4Protocol::Udp, L4Protocol::Udp),
            (None, None) => match &ann.tls {
                Some(t) if t.ports.matches(port_u16(p.port), p.name.as_deref()) => {
                    let target = if t.backend_tls {
                        L4Protocol::Tls
                    } else {
                        L4Protocol::Tcp
                    };
                    (L4Protocol::Tls, target)
                }
                _ => (L4Protocol::Tcp, L4Protocol::Tcp),
            },
        };
        // The key names the target protocol only: turning TLS on at the listener keeps the
        // target group (and its targets).
        let key = IntOrString::String(format!("{}-{}", p.port, target.as_str()));
        let target_port = if ann.ip_targets {
            Some(p.target_port.clone().unwrap_or(IntOrString::Int(p.port)))
        } else {
            p.node_port.map(IntOrString::Int)
        };
        ports.push(NlbPort {
            port: p.port,
            protocol: listener,
            target_protocol: target,
            target_port,
            target_group: target_group_name(
                cluster,
                &group,
                &namespace,
                &service,
                &key,
                ann.ip_targets,
            ),
        });
    }
    if ports.is_empty() && problems.is_empty() {
        problems.push("the Service has no ports".into());
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(NlbSpec {
        name: nlb_name(cluster, &namespace, &service),
        namespace,
        service,
        internet_facing: ann.internet_facing,
        ip: ann.ip_targets,
        ports,
        subnets: ann.subnets.clone(),
        private_ips: ann.private_ips.clone(),
        eip_allocations: ann.eip_allocations.clone(),
        node_labels: ann.target_node_labels.clone(),
        tg_attributes: ann.tg_attributes.clone(),
        health: ann.health.clone(),
        tags: ann.tags.clone(),
        tls: ann.tls.clone(),
        lb_attributes: ann.lb_attributes.clone(),
        security_groups: ann.security_groups.clone(),
        manage_backend_rules: ann.manage_backend_rules,
        source_ranges: source_ranges(svc),
    })
}

/// `spec.loadBalancerSourceRanges`, else the `load-balancer-source-ranges` annotation.
fn source_ranges(svc: &Service) -> Vec<String> {
    let from_spec = svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.clone())
        .unwrap_or_default();
    if !from_spec.is_empty() {
        return from_spec;
    }
    svc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SOURCE_RANGES))
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The rules of the NLB's managed frontend group: each listener port over its protocols from
/// the source ranges, plus ICMP "fragmentation needed" (pure).
pub fn frontend_rules(spec: &NlbSpec) -> BTreeSet<CidrRule> {
    let ranges = source_ranges_of(&spec.source_ranges);
    let tcp: Vec<u16> = spec
        .ports
        .iter()
        .filter(|p| p.sg_protocols().contains(&"TCP"))
        .map(|p| port_u16(p.port))
        .collect();
    let mut rules = listener_rules(&tcp, &ranges);
    for p in spec
        .ports
        .iter()
        .filter(|p| p.sg_protocols().contains(&"UDP"))
    {
        for cidr in &ranges {
            rules.insert(CidrRule {
                protocol: "udp".into(),
                from: p.port,
                to: p.port,
                cidr: cidr.clone(),
                description: String::new(),
            });
        }
    }
    rules
}

fn port_u16(port: i32) -> u16 {
    u16::try_from(port).unwrap_or_default()
}

/// Whether two Service ports on one number can share a TCP_UDP listener and target group: one
/// TCP and one UDP, reaching the same pod port (ip targets) or node port (instance targets).
fn tcp_udp_twin(p: &ServicePort, q: &ServicePort, ip: bool) -> Result<(), String> {
    let proto = |s: &ServicePort| s.protocol.clone().unwrap_or_else(|| "TCP".into());
    let mut pair = [proto(p), proto(q)];
    pair.sort();
    if pair != ["TCP", "UDP"] {
        return Err(format!(
            "port {}: two ports with one number must be one TCP and one UDP (a TCP_UDP listener)",
            p.port
        ));
    }
    let target = |s: &ServicePort| s.target_port.clone().unwrap_or(IntOrString::Int(s.port));
    let same = if ip {
        target(p) == target(q)
    } else {
        p.node_port == q.node_port
    };
    if !same {
        let what = if ip { "targetPort" } else { "nodePort" };
        return Err(format!(
            "port {}: the TCP and UDP ports of a TCP_UDP listener need one {what}",
            p.port
        ));
    }
    Ok(())
}

/// Pairs the chosen subnets with the static addresses, as upstream: each address with the
/// subnet whose CIDR (`cidrs`, by subnet ID) holds it (in order where a CIDR is unknown), and
/// the Elastic IP allocations in order; as many of each as subnets, or none.
pub fn subnet_slots(
    chosen: &[String],
    cidrs: &BTreeMap<String, String>,
    ips: &[Ipv4Addr],
    allocations: &[String],
) -> Result<Vec<SubnetSlot>, String> {
    for (key, n, what) in [
        ("private-ipv4-addresses", ips.len(), "addresses"),
        ("eip-allocations", allocations.len(), "allocations"),
    ] {
        if n != 0 && n != chosen.len() {
            return Err(format!(
                "service.beta.kubernetes.io/aws-load-balancer-{key}: {n} {what} for {} subnets ({}): give one per subnet",
                chosen.len(),
                chosen.join(", ")
            ));
        }
    }
    let paired = pair_by_cidr(chosen, cidrs, ips)?;
    Ok(chosen
        .iter()
        .enumerate()
        .map(|(i, s)| SubnetSlot {
            subnet: s.clone(),
            private_ip: paired.get(i).copied(),
            allocation: allocations.get(i).cloned(),
        })
        .collect())
}

/// The address of each chosen subnet, in `chosen` order: the one its CIDR holds when every
/// CIDR is known, else `ips` as given.
fn pair_by_cidr(
    chosen: &[String],
    cidrs: &BTreeMap<String, String>,
    ips: &[Ipv4Addr],
) -> Result<Vec<Ipv4Addr>, String> {
    const KEY: &str = "service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses";
    let blocks: Option<Vec<stratus_cloud::Cidr>> = chosen
        .iter()
        .map(|s| {
            cidrs
                .get(s)
                .and_then(|c| stratus_cloud::Cidr::parse(c).ok())
        })
        .collect();
    let Some(blocks) = blocks.filter(|_| !ips.is_empty()) else {
        return Ok(ips.to_vec());
    };
    let mut out = Vec::new();
    for (subnet, block) in chosen.iter().zip(&blocks) {
        let inside: Vec<&Ipv4Addr> = ips
            .iter()
            .filter(|ip| block.contains_ip(std::net::IpAddr::V4(**ip)))
            .collect();
        match inside.as_slice() {
            [one] => out.push(**one),
            [] => return Err(format!("{KEY}: no address in subnet {subnet} ({block})")),
            many => {
                let list: Vec<String> = many.iter().map(ToString::to_string).collect();
                return Err(format!(
                    "{KEY}: {} are all in subnet {subnet} ({block}): give one per subnet",
                    list.join(", ")
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::annotations::parse;

    fn svc(ports: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "dns", "namespace": "kube-system"},
            "spec": {"type": "LoadBalancer", "ports": ports}}))
        .unwrap()
    }

    fn ann(ip: bool) -> NlbAnnotations {
        let mut a = parse(&BTreeMap::new()).unwrap();
        a.ip_targets = ip;
        a
    }

    #[test]
    fn a_listener_and_target_group_per_port() {
        let s = svc(serde_json::json!([
            {"name": "tcp", "port": 53, "protocol": "TCP", "nodePort": 30053},
            {"name": "udp", "port": 54, "protocol": "UDP", "nodePort": 30054}]));
        let spec = plan_nlb("c", &s, &ann(false)).unwrap();
        assert_eq!(spec.ports.len(), 2);
        assert_eq!(spec.ports[0].protocol, L4Protocol::Tcp);
        assert_eq!(spec.ports[1].protocol, L4Protocol::Udp);
        assert_ne!(spec.ports[0].target_group, spec.ports[1].target_group);
        assert!(spec.name.len() <= 32 && spec.ports.iter().all(|p| p.target_group.len() <= 32));
        // The target type is part of the name: switching it makes new groups.
        let ip = plan_nlb("c", &s, &ann(true)).unwrap();
        assert_ne!(ip.ports[0].target_group, spec.ports[0].target_group);
        assert_eq!(ip.name, spec.name);
    }

    #[test]
    fn bad_ports_are_problems() {
        let s = svc(serde_json::json!([
            {"port": 80, "protocol": "SCTP"}, {"port": 81},
            {"port": 82, "nodePort": 30082}, {"port": 82, "protocol": "UDP", "nodePort": 30083}]));
        let e = plan_nlb("c", &s, &ann(false)).unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(plan_nlb("c", &svc(serde_json::json!([])), &ann(true)).is_err());
    }

    #[test]
    fn ssl_ports_get_tls_listeners_on_the_same_target_groups() {
        let s = svc(serde_json::json!([
            {"name": "http", "port": 80, "nodePort": 30080},
            {"name": "https", "port": 443, "nodePort": 30443},
            {"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053}]));
        let plain = plan_nlb("c", &s, &ann(false)).unwrap();
        let ann_tls = parse(&BTreeMap::from([
            (
                "service.beta.kubernetes.io/aws-load-balancer-ssl-cert".to_string(),
                "arn:aws:acm:x".to_string(),
            ),
            (
                "service.beta.kubernetes.io/aws-load-balancer-ssl-ports".to_string(),
                "https".to_string(),
            ),
        ]))
        .unwrap();
        let tls = plan_nlb("c", &s, &ann_tls).unwrap();
        let protocols: Vec<(L4Protocol, L4Protocol)> = tls
            .ports
            .iter()
            .map(|p| (p.protocol, p.target_protocol))
            .collect();
        assert_eq!(
            protocols,
            vec![
                (L4Protocol::Tcp, L4Protocol::Tcp),
                (L4Protocol::Tls, L4Protocol::Tcp),
                (L4Protocol::Udp, L4Protocol::Udp)
            ]
        );
        // TLS at the listener keeps the target groups.
        for (a, b) in plain.ports.iter().zip(&tls.ports) {
            assert_eq!(a.target_group, b.target_group);
        }
    }

    #[test]
    fn a_tcp_and_a_udp_port_on_one_number_share_a_tcp_udp_listener() {
        let s = svc(serde_json::json!([
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
            {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353}]));
        let spec = plan_nlb("c", &s, &ann(true)).unwrap();
        assert_eq!(spec.ports.len(), 1);
        assert_eq!(spec.ports[0].protocol, L4Protocol::TcpUdp);
        assert_eq!(spec.ports[0].target_protocol, L4Protocol::TcpUdp);
        let apart = svc(serde_json::json!([
            {"port": 53, "protocol": "TCP", "targetPort": 5353},
            {"port": 53, "protocol": "UDP", "targetPort": 5354}]));
        let e = plan_nlb("c", &apart, &ann(true)).unwrap_err();
        assert!(e[0].contains("targetPort"), "{e:?}");
        let twice = svc(serde_json::json!([
            {"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "TCP"}]));
        assert!(plan_nlb("c", &twice, &ann(true)).is_err());
    }

    #[test]
    fn frontend_rules_open_each_listener_over_its_protocols_from_the_source_ranges() {
        let mut s = svc(serde_json::json!([
            {"name": "web", "port": 80, "targetPort": 8080},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
            {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353},
            {"name": "syslog", "port": 514, "protocol": "UDP", "targetPort": 514}]));
        let spec = plan_nlb("c", &s, &ann(true)).unwrap();
        let rules: Vec<(String, i32, String)> = frontend_rules(&spec)
            .into_iter()
            .filter(|r| !r.protocol.starts_with("icmp"))
            .map(|r| (r.protocol, r.from, r.cidr))
            .collect();
        let everyone = "0.0.0.0/0".to_string();
        assert_eq!(
            rules,
            vec![
                ("tcp".into(), 53, everyone.clone()),
                ("tcp".into(), 80, everyone.clone()),
                ("udp".into(), 53, everyone.clone()),
                ("udp".into(), 514, everyone.clone()),
            ]
        );
        assert_eq!(spec.ports[0].target_port, Some(IntOrString::Int(8080)));
        assert_eq!(spec.ports[1].sg_protocols(), &["TCP", "UDP"]);
        // The spec's source ranges win over the annotation.
        s.metadata.annotations = Some(BTreeMap::from([(
            SOURCE_RANGES.to_string(),
            "192.168.0.0/16".to_string(),
        )]));
        let from_annotation = plan_nlb("c", &s, &ann(true)).unwrap();
        assert_eq!(from_annotation.source_ranges, vec!["192.168.0.0/16"]);
        s.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()]);
        let from_spec = plan_nlb("c", &s, &ann(true)).unwrap();
        assert!(frontend_rules(&from_spec)
            .iter()
            .all(|r| r.cidr == "10.0.0.0/8"));
    }

    #[test]
    fn names_differ_per_cluster_and_service() {
        assert_ne!(nlb_name("a", "ns", "s"), nlb_name("b", "ns", "s"));
        assert_ne!(nlb_name("a", "ns", "s"), nlb_name("a", "ns", "t"));
        assert!(nlb_name("a", "a-very-long-namespace", "a-very-long-service-name").len() <= 32);
    }

    #[test]
    fn private_addresses_pair_with_subnets() {
        let chosen = vec!["subnet-1".to_string(), "subnet-2".to_string()];
        let ips: Vec<Ipv4Addr> = vec!["10.0.0.5".parse().unwrap(), "10.0.16.5".parse().unwrap()];
        let none = BTreeMap::new();
        let slots = subnet_slots(&chosen, &none, &ips, &[]).unwrap();
        assert_eq!(slots[1].private_ip, Some(ips[1]));
        assert!(subnet_slots(&chosen, &none, &ips[..1], &[]).is_err());
        assert!(subnet_slots(&chosen, &none, &[], &[])
            .unwrap()
            .iter()
            .all(|s| s.private_ip.is_none() && s.allocation.is_none()));
        let eips = vec!["eipalloc-1".to_string(), "eipalloc-2".to_string()];
        let slots = subnet_slots(&chosen, &none, &[], &eips).unwrap();
        assert_eq!(slots[0].allocation.as_deref(), Some("eipalloc-1"));
        let e = subnet_slots(&chosen, &none, &[], &eips[..1]).unwrap_err();
        assert!(e.contains("eip-allocations"), "{e}");
    }

    #[test]
    fn private_addresses_go_to_the_subnet_that_holds_them() {
        let chosen = vec!["subnet-1".to_string(), "subnet-2".to_string()];
        let cidrs = BTreeMap::from([
            ("subnet-1".to_string(), "10.0.0.0/20".to_string()),
            ("subnet-2".to_string(), "10.0.16.0/20".to_string()),
        ]);
        // Given in the other order: still each in its own subnet.
        let ips: Vec<Ipv4Addr> = vec!["10.0.16.5".parse().unwrap(), "10.0.0.5".parse().unwrap()];
        let slots = subnet_slots(&chosen, &cidrs, &ips, &[]).unwrap();
        assert_eq!(slots[0].private_ip, Some(ips[1]));
        assert_eq!(slots[1].private_ip, Some(ips[0]));
        let outside: Vec<Ipv4Addr> = vec!["10.0.0.5".parse().unwrap(), "10.9.0.5".parse().unwrap()];
        let e = subnet_slots(&chosen, &cidrs, &outside, &[]).unwrap_err();
        assert!(e.contains("no address in subnet subnet-2"), "{e}");
        let same: Vec<Ipv4Addr> = vec!["10.0.0.5".parse().unwrap(), "10.0.0.6".parse().unwrap()];
        let e = subnet_slots(&chosen, &cidrs, &same, &[]).unwrap_err();
        assert!(e.contains("are all in subnet subnet-1"), "{e}");
    }
}
