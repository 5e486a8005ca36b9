//! Table tests of the desired tree and of `plan_step`: from any tree read back, the next step
//! leads to the desired one, and a matching tree needs none.

use std::collections::BTreeMap;

use serde_json::json;
use stratus_cloud::{
    LoadBalancerRequest, NodeAddress, NodeAddressType, Protocol, ServicePort, ServiceRef,
    TargetNode,
};

use super::*;
use crate::lb::annotations;
use stratus_openstack_api::config::LoadBalancerConfig;

fn node(name: &str, ip: &str) -> TargetNode {
    TargetNode {
        name: name.into(),
        provider_id: format!("openstack:///{name}"),
        labels: BTreeMap::new(),
        addresses: vec![
            NodeAddress::new(NodeAddressType::ExternalIP, "172.24.4.9"),
            NodeAddress::new(NodeAddressType::InternalIP, ip),
        ],
    }
}

fn request(annotations: &[(&str, &str)]) -> LoadBalancerRequest {
    LoadBalancerRequest {
        cluster_name: "c".into(),
        service: ServiceRef {
            namespace: "ns".into(),
            name: "web".into(),
            uid: "u".into(),
        },
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
        ],
        annotations: annotations
            .iter()
            .map(|(k, v)| (format!("{}{k}", annotations::PREFIX), v.to_string()))
            .collect(),
        source_ranges: vec![],
        local_traffic_only: false,
        health_check_node_port: None,
        requested_ip: None,
        external_ips: vec![],
        load_balancer_class: None,
        nodes: vec![node("b", "10.0.0.3"), node("a", "10.0.0.2")],
    }
}

fn spec(r: &LoadBalancerRequest) -> LbSpec {
    let o = annotations::parse(&LoadBalancerConfig::default(), &BTreeMap::new(), r).unwrap();
    desired(r, &o, "amphora").unwrap()
}

/// The tree Octavia would hold after creating `spec` with `create_body`.
fn built(spec: &LbSpec) -> ActualTree {
    let body = create_body(spec, &[]);
    let listeners = body["loadbalancer"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut listener = l.clone();
            listener["id"] = json!(format!("l{i}"));
            let p = &l["default_pool"];
            let mut pool = p.clone();
            pool["id"] = json!(format!("p{i}"));
            let monitor = (!p["healthmonitor"].is_null()).then(|| {
                let mut m = p["healthmonitor"].clone();
                m["id"] = json!(format!("m{i}"));
                m
            });
            ActualListener {
                listener,
                pool: Some(ActualPool {
                    pool,
                    members: p["members"].as_array().unwrap().clone(),
                    monitor,
                }),
            }
        })
        .collect();
    ActualTree {
        listeners,
        loose_pools: vec![],
    }
}

#[test]
fn desired_tree_follows_occm() {
    let r = request(&[]);
    let s = spec(&r);
    assert_eq!(s.name, "kube_service_c_ns_web");
    assert_eq!(s.listeners.len(), 2);
    assert_eq!(s.listeners[0].name, "listener_0_kube_service_c_ns_web");
    assert_eq!(s.listeners[1].protocol, "UDP");
    let m = &s.listeners[0].pool.members;
    assert_eq!(
        m.iter()
            .map(|m| (m.address.as_str(), m.port))
            .collect::<Vec<_>>(),
        [("10.0.0.2", 30080), ("10.0.0.3", 30080)],
        "InternalIP, sorted"
    );
    let s = spec(&request(&[
        ("proxy-protocol", "true"),
        ("enable-health-monitor", "true"),
    ]));
    assert_eq!(s.listeners[0].pool.protocol, "PROXY");
    assert_eq!(s.listeners[1].pool.protocol, "UDP", "no PROXY on UDP");
    assert_eq!(
        s.listeners[1].pool.monitor.as_ref().unwrap().kind,
        "UDP-CONNECT"
    );
    let mut local = request(&[("enable-health-monitor", "true")]);
    local.local_traffic_only = true;
    local.health_check_node_port = Some(32000);
    let s = spec(&local);
    assert_eq!(s.listeners[0].pool.monitor.as_ref().unwrap().kind, "HTTP");
    assert_eq!(s.listeners[0].pool.members[0].monitor_port, Some(32000));
    let mut selected = request(&[("node-selector", "edge=true")]);
    selected.nodes[0]
        .labels
        .insert("edge".into(), "true".into());
    assert_eq!(spec(&selected).listeners[0].pool.members.len(), 1);
}

#[test]
fn a_built_tree_needs_no_step_and_changes_need_one() {
    let r = request(&[("enable-health-monitor", "true")]);
    let s = spec(&r);
    let tree = built(&s);
    assert_eq!(plan_step(&tree, &s), None);

    // A node more: one member update.
    let mut more = r.clone();
    more.nodes.push(node("c", "10.0.0.4"));
    assert!(
        matches!(plan_step(&tree, &spec(&more)), Some(Step::SetMembers(p, m)) if p == "p0" && m.len() == 3)
    );

    // A port less: its listener goes.
    let mut fewer = r.clone();
    fewer.ports.pop();
    assert_eq!(
        plan_step(&tree, &spec(&fewer)),
        Some(Step::DeleteListener("l1".into()))
    );

    // A new timeout: the listener is updated.
    let s2 = spec(&request(&[
        ("enable-health-monitor", "true"),
        ("timeout-client-data", "9000"),
    ]));
    assert!(
        matches!(plan_step(&tree, &s2), Some(Step::UpdateListener(l, b)) if l == "l0" && b["timeout_client_data"] == 9000)
    );

    // Monitor off: deleted; another algorithm: pool updated.
    let s3 = spec(&request(&[]));
    assert_eq!(
        plan_step(&tree, &s3),
        Some(Step::DeleteMonitor("m0".into()))
    );
    let s4 = spec(&request(&[
        ("enable-health-monitor", "true"),
        ("lb-method", "SOURCE_IP"),
    ]));
    assert!(matches!(plan_step(&tree, &s4), Some(Step::UpdatePool(p, _)) if p == "p0"));

    // PROXY protocol: the pool's protocol cannot change, so it is replaced.
    let s5 = spec(&request(&[
        ("enable-health-monitor", "true"),
        ("proxy-protocol", "true"),
    ]));
    assert_eq!(plan_step(&tree, &s5), Some(Step::DeletePool("p0".into())));

    // A listener without pool gets one; a loose pool goes.
    let mut no_pool = tree.clone();
    no_pool.listeners[0].pool = None;
    assert!(
        matches!(plan_step(&no_pool, &s), Some(Step::CreatePool { listener_id, .. }) if listener_id == "l0")
    );
    let mut loose = tree.clone();
    loose.loose_pools.push(json!({"id": "px"}));
    assert_eq!(plan_step(&loose, &s), Some(Step::DeletePool("px".into())));

    // Nothing at all: the first listener is created.
    assert!(
        matches!(plan_step(&ActualTree::default(), &s), Some(Step::CreateListener(b)) if b["protocol_port"] == 80)
    );
}

#[test]
fn source_ranges_become_allowed_cidrs() {
    let mut r = request(&[]);
    r.source_ranges = vec!["10.1.0.0/16".into(), "10.0.0.0/8".into()];
    let s = spec(&r);
    assert_eq!(s.listeners[0].allowed_cidrs, ["10.0.0.0/8", "10.1.0.0/16"]);
    r.source_ranges.push("0.0.0.0/0".into());
    assert!(spec(&r).listeners[0].allowed_cidrs.is_empty());
}
