//! Table tests of the security-group decisions: OCCM's names, the wanted rules per provider,
//! the rule diff leaving foreign rules alone, and port attach/detach plans.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use stratus_cloud::{LoadBalancerRequest, Protocol, ServicePort, ServiceRef};

use super::*;

fn svc() -> ServiceRef {
    ServiceRef {
        namespace: "ns".into(),
        name: "web".into(),
        uid: "0f1e".into(),
    }
}

fn request(source_ranges: &[&str], health: Option<u16>) -> LoadBalancerRequest {
    LoadBalancerRequest {
        cluster_name: "c".into(),
        service: svc(),
        ports: vec![
            ServicePort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: 80,
                node_port: 30080,
            },
            ServicePort {
                name: "dns".into(),
                protocol: Protocol::Udp,
                port: 53,
                node_port: 30053,
            },
            ServicePort {
                name: "none".into(),
                protocol: Protocol::Tcp,
                port: 81,
                node_port: 0,
            },
        ],
        annotations: BTreeMap::new(),
        source_ranges: source_ranges.iter().map(|s| s.to_string()).collect(),
        local_traffic_only: health.is_some(),
        health_check_node_port: health,
        requested_ip: None,
        external_ips: vec![],
        load_balancer_class: None,
        nodes: vec![],
    }
}

fn rule(protocol: &str, cidr: &str, port: u16) -> RuleSpec {
    RuleSpec {
        protocol: protocol.into(),
        ethertype: ethertype(cidr),
        remote_ip_prefix: cidr.into(),
        port,
    }
}

#[test]
fn names_are_occms() {
    assert_eq!(group_name(&svc()), "lb-sg-0f1e-ns-web");
    assert_eq!(
        group_description("c1", &svc()),
        "Security Group for ns/web Service LoadBalancer in cluster c1"
    );
    let long = ServiceRef {
        namespace: "n".repeat(200),
        name: "m".repeat(200),
        uid: "u".into(),
    };
    assert_eq!(group_name(&long).chars().count(), 255);
    let g = json!({"name": "lb-sg-0f1e-ns-web", "description": group_description("c1", &svc())});
    assert!(is_ours("c1", &g));
    assert!(!is_ours("c2", &g));
    assert!(!is_ours(
        "c1",
        &json!({"name": "default", "description": "Default security group"})
    ));
}

/// (provider, source ranges, health check port, expected rules)
type Case = (&'static str, Vec<&'static str>, Option<u16>, Vec<RuleSpec>);

#[test]
fn wanted_rules_per_provider() {
    let cases: Vec<Case> = vec![
        (
            "amphora",
            vec![],
            None,
            vec![
                rule("tcp", "10.0.0.0/24", 30080),
                rule("udp", "10.0.0.0/24", 30053),
            ],
        ),
        (
            "amphora",
            vec!["192.0.2.0/24"],
            Some(31000),
            vec![
                rule("tcp", "10.0.0.0/24", 30080),
                rule("tcp", "10.0.0.0/24", 31000),
                rule("udp", "10.0.0.0/24", 30053),
            ],
        ),
        (
            "ovn",
            vec![],
            None,
            vec![
                rule("tcp", "0.0.0.0/0", 30080),
                rule("udp", "0.0.0.0/0", 30053),
            ],
        ),
        (
            "ovn",
            vec!["192.0.2.0/24", "2001:db8::/64"],
            Some(31000),
            vec![
                rule("tcp", "10.0.0.0/24", 31000),
                rule("tcp", "192.0.2.0/24", 30080),
                rule("tcp", "2001:db8::/64", 30080),
                rule("udp", "192.0.2.0/24", 30053),
                rule("udp", "2001:db8::/64", 30053),
            ],
        ),
    ];
    for (provider, ranges, health, want) in cases {
        let mut want = want;
        want.sort();
        assert_eq!(
            wanted_rules(&request(&ranges, health), "10.0.0.0/24", provider),
            want,
            "{provider} {ranges:?} {health:?}"
        );
    }
    assert_eq!(
        wanted_rules(&request(&[], None), "fd00::/64", "amphora")[0].ethertype,
        "IPv6"
    );
}

#[test]
fn rule_diff_touches_only_managed_rules() {
    let existing = vec![
        json!({"id": "keep", "direction": "ingress", "protocol": "tcp", "ethertype": "IPv4",
            "remote_ip_prefix": "10.0.0.0/24", "port_range_min": 30080, "port_range_max": 30080}),
        json!({"id": "stale", "direction": "ingress", "protocol": "tcp", "ethertype": "IPv4",
            "remote_ip_prefix": "10.0.0.0/24", "port_range_min": 30999, "port_range_max": 30999}),
        json!({"id": "egress", "direction": "egress", "protocol": null, "ethertype": "IPv4",
            "remote_ip_prefix": null, "port_range_min": null, "port_range_max": null}),
        json!({"id": "range", "direction": "ingress", "protocol": "tcp", "ethertype": "IPv4",
            "remote_ip_prefix": "0.0.0.0/0", "port_range_min": 1, "port_range_max": 1024}),
        json!({"id": "group", "direction": "ingress", "protocol": "tcp", "ethertype": "IPv4",
            "remote_ip_prefix": null, "remote_group_id": "g", "port_range_min": 22, "port_range_max": 22}),
    ];
    let wanted = vec![
        rule("tcp", "10.0.0.0/24", 30080),
        rule("udp", "10.0.0.0/24", 30053),
    ];
    let (create, delete) = rule_diff(&wanted, &existing);
    assert_eq!(create, vec![rule("udp", "10.0.0.0/24", 30053)]);
    assert_eq!(delete, vec!["stale".to_string()]);
    let (create, delete) = rule_diff(&[], &existing);
    assert!(create.is_empty());
    assert_eq!(delete, vec!["keep".to_string(), "stale".to_string()]);
}

#[test]
fn member_ports_get_the_group_and_others_lose_it() {
    let port = |id: &str, ip: &str, subnet: &str, security: bool, groups: &[&str]| {
        json!({"id": id, "port_security_enabled": security, "security_groups": groups,
            "fixed_ips": [{"ip_address": ip, "subnet_id": subnet}]})
    };
    let a = port("pa", "10.0.0.2", "s1", true, &["default"]);
    assert!(is_member_port(&a, "10.0.0.2", None));
    assert!(is_member_port(&a, "10.0.0.2", Some("s1")));
    assert!(!is_member_port(&a, "10.0.0.2", Some("s2")));
    assert!(!is_member_port(&a, "10.0.0.3", None));
    let off = port("po", "10.0.0.2", "s1", false, &[]);
    assert!(
        !is_member_port(&off, "10.0.0.2", None),
        "port security off: no groups"
    );

    assert_eq!(
        attach(&a, "sg"),
        Some(PortChange {
            port: "pa".into(),
            groups: vec!["default".into(), "sg".into()]
        })
    );
    let b = port("pb", "10.0.0.3", "s1", true, &["default", "sg"]);
    assert_eq!(attach(&b, "sg"), None, "already there");

    let c = port("pc", "10.0.0.4", "s1", true, &["sg", "other"]);
    let keep: BTreeSet<String> = ["pb".to_string()].into();
    assert_eq!(
        detach(&[b, c], "sg", &keep),
        vec![PortChange {
            port: "pc".into(),
            groups: vec!["other".into()]
        }]
    );
}
