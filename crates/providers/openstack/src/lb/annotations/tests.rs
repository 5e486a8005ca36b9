//! Table tests of the annotation families: each valid form, each invalid form (an error naming
//! the key), and the precedence annotation > class > `[LoadBalancer]`.

use std::collections::BTreeMap;

use stratus_cloud::{LoadBalancerRequest, ServiceRef};

use super::*;

fn request(pairs: &[(&str, &str)]) -> LoadBalancerRequest {
    LoadBalancerRequest {
        cluster_name: "kubernetes".into(),
        service: ServiceRef {
            namespace: "default".into(),
            name: "web".into(),
            uid: "u".into(),
        },
        ports: vec![],
        annotations: pairs
            .iter()
            .map(|(k, v)| {
                let key = if k.contains('/') {
                    k.to_string()
                } else {
                    format!("{PREFIX}{k}")
                };
                (key, v.to_string())
            })
            .collect(),
        source_ranges: vec![],
        local_traffic_only: false,
        health_check_node_port: None,
        requested_ip: None,
        external_ips: vec![],
        load_balancer_class: None,
        nodes: vec![],
    }
}

fn classes() -> BTreeMap<String, LoadBalancerClass> {
    let mut c = BTreeMap::new();
    c.insert(
        "fast".to_string(),
        LoadBalancerClass {
            floating_network_id: Some("aaaaaaaa-class-net".replace("class-net", "1111")),
            subnet_id: Some("bbbbbbbb-2222".into()),
            ..LoadBalancerClass::default()
        },
    );
    c
}

fn ok(pairs: &[(&str, &str)]) -> LbOptions {
    let config = LoadBalancerConfig {
        floating_network_id: Some("cccccccc-3333".into()),
        ..LoadBalancerConfig::default()
    };
    parse(&config, &classes(), &request(pairs)).expect("valid")
}

fn bad(pairs: &[(&str, &str)]) -> String {
    parse(&LoadBalancerConfig::default(), &classes(), &request(pairs))
        .expect_err("invalid")
        .to_string()
}

#[test]
fn defaults_come_from_the_config() {
    let o = ok(&[]);
    assert!(!o.internal);
    assert_eq!(o.lb_method, "ROUND_ROBIN");
    assert_eq!(o.floating_network_id.as_deref(), Some("cccccccc-3333"));
    assert_eq!(o.monitor, None);
    assert!(!o.keep_floatingip);
}

#[test]
fn every_family_parses() {
    let o = ok(&[
        (INTERNAL, "true"),
        ("lb-method", "SOURCE_IP"),
        ("proxy-protocol", "v2"),
        ("timeout-client-data", "60000"),
        ("timeout-member-connect", "5000"),
        ("timeout-member-data", "70000"),
        ("timeout-tcp-inspect", "10"),
        ("connection-limit", "100"),
        ("enable-health-monitor", "true"),
        ("health-monitor-delay", "10"),
        ("health-monitor-timeout", "5"),
        ("health-monitor-max-retries", "2"),
        ("health-monitor-max-retries-down", "4"),
        ("keep-floatingip", "true"),
        ("subnet-id", "dddddddd-4444"),
        ("member-subnet-id", "eeeeeeee-5555"),
        ("flavor-id", "f1"),
        ("availability-zone", "az1"),
        ("hostname", "web.example.com"),
        ("node-selector", "role=edge, zone"),
        (
            "default-tls-container-ref",
            "https://barbican/v1/containers/x",
        ),
    ]);
    assert!(o.internal);
    assert_eq!(o.lb_method, "SOURCE_IP");
    assert_eq!(o.proxy_protocol, Some("PROXYV2"));
    assert_eq!(o.timeouts, [Some(60000), Some(5000), Some(70000), Some(10)]);
    assert_eq!(o.connection_limit, Some(100));
    assert_eq!(
        o.monitor,
        Some(MonitorOptions {
            delay: 10,
            timeout: 5,
            max_retries: 2,
            max_retries_down: 4
        })
    );
    assert!(o.keep_floatingip);
    assert_eq!(o.subnet_id.as_deref(), Some("dddddddd-4444"));
    assert_eq!(o.member_subnet_id.as_deref(), Some("eeeeeeee-5555"));
    assert_eq!(o.flavor_id.as_deref(), Some("f1"));
    assert_eq!(o.availability_zone.as_deref(), Some("az1"));
    assert_eq!(o.hostname.as_deref(), Some("web.example.com"));
    assert_eq!(
        o.node_selector.get("role").map(String::as_str),
        Some("edge")
    );
    assert_eq!(o.node_selector.get("zone").map(String::as_str), Some(""));
    assert!(o.tls_container_ref.is_some());
    assert_eq!(
        o.address, None,
        "internal load balancers have no floating IP"
    );

    let o = ok(&[("x-forwarded-for", "true"), ("proxy-protocol", "false")]);
    assert!(o.x_forwarded_for && o.proxy_protocol.is_none());
    assert_eq!(
        ok(&[("proxy-protocol", "true")]).proxy_protocol,
        Some("PROXY")
    );
}

#[test]
fn class_and_addresses() {
    let o = ok(&[("class", "fast")]);
    assert_eq!(o.floating_network_id.as_deref(), Some("aaaaaaaa-1111"));
    assert_eq!(o.subnet_id.as_deref(), Some("bbbbbbbb-2222"));
    let o = ok(&[("class", "fast"), ("floating-network-id", "99999999-0000")]);
    assert_eq!(o.floating_network_id.as_deref(), Some("99999999-0000"));
    let o = ok(&[("load-balancer-address", "172.24.4.50")]);
    assert_eq!(o.address.as_deref(), Some("172.24.4.50"));
    let o = ok(&[(
        "loadbalancer.openstack.deckhouse.io/load-balancer-address",
        "172.24.4.51",
    )]);
    assert_eq!(o.address.as_deref(), Some("172.24.4.51"));
    let mut r = request(&[]);
    r.requested_ip = Some("172.24.4.52".into());
    let o = parse(&LoadBalancerConfig::default(), &classes(), &r).unwrap();
    assert_eq!(o.address.as_deref(), Some("172.24.4.52"));
}

#[test]
fn bad_values_name_their_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("lb-method", "RANDOM")], "lb-method"),
        (&[("proxy-protocol", "v3")], "proxy-protocol"),
        (&[("timeout-client-data", "-1")], "timeout-client-data"),
        (&[("connection-limit", "lots")], "connection-limit"),
        (&[("enable-health-monitor", "yes")], "enable-health-monitor"),
        (
            &[
                ("enable-health-monitor", "true"),
                ("health-monitor-delay", "2"),
                ("health-monitor-timeout", "5"),
            ],
            "health-monitor-timeout",
        ),
        (
            &[("health-monitor-max-retries", "11")],
            "health-monitor-max-retries",
        ),
        (&[("keep-floatingip", "maybe")], "keep-floatingip"),
        (
            &[("floating-network-id", "public net")],
            "floating-network-id",
        ),
        (&[("class", "slow")], "class"),
        (
            &[("load-balancer-address", "not-an-ip")],
            "load-balancer-address",
        ),
        (
            &[("x-forwarded-for", "true"), ("proxy-protocol", "true")],
            "x-forwarded-for",
        ),
        (&[("load-balancer-id", "abc")], "load-balancer-id"),
        (&[("no-such-key", "1")], "no-such-key"),
        (&[(INTERNAL, "sure")], INTERNAL),
    ];
    for (pairs, key) in cases {
        let text = bad(pairs);
        assert!(text.contains(key), "{pairs:?}: {text}");
    }
}
