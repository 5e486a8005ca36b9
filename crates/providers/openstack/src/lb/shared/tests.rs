//! Table tests of the shared load-balancer decisions.

use serde_json::json;

use super::*;
use crate::lb::spec::{ActualListener, ListenerSpec, PoolSpec};

fn spec_with_ports(name: &str, ports: &[u16]) -> LbSpec {
    LbSpec {
        name: name.into(),
        description: String::new(),
        vip_subnet_id: None,
        vip_network_id: None,
        provider: "amphora".into(),
        flavor_id: None,
        availability_zone: None,
        listeners: ports
            .iter()
            .enumerate()
            .map(|(i, p)| ListenerSpec {
                name: format!("listener_{i}_{name}"),
                protocol: "TCP".into(),
                port: *p,
                connection_limit: -1,
                timeouts: [None; 4],
                x_forwarded_for: false,
                allowed_cidrs: vec![],
                tls_container_ref: None,
                pool: PoolSpec {
                    name: format!("pool_{i}_{name}"),
                    protocol: "TCP".into(),
                    lb_method: "ROUND_ROBIN".into(),
                    members: vec![],
                    monitor: None,
                },
            })
            .collect(),
    }
}

const ME: &str = "kube_service_c_ns_b";

#[test]
fn joining_respects_ownership_max_shared_and_internal() {
    // (lb, internal, max, expected)
    let owned = json!({"id": "1", "name": ME, "tags": [ME]});
    let other = json!({"id": "2", "name": "kube_service_c_ns_a", "tags": ["kube_service_c_ns_a"]});
    let full = json!({"id": "3", "name": "kube_service_c_ns_a",
        "tags": ["kube_service_c_ns_a", "kube_service_c_ns_x"]});
    let joined = json!({"id": "4", "name": "kube_service_c_ns_a",
        "tags": ["kube_service_c_ns_a", ME]});
    let users = json!({"id": "5", "name": "my-lb", "tags": ["team-a"]});
    let cases = [
        (&owned, false, 2, Ok(true)),
        (&owned, true, 2, Ok(true)),
        (&other, false, 2, Ok(false)),
        (&other, true, 2, Err(ShareError::Internal("2".into()))),
        (
            &full,
            false,
            2,
            Err(ShareError::Full {
                id: "3".into(),
                count: 2,
                max: 2,
            }),
        ),
        (&full, false, 3, Ok(false)),
        (&joined, false, 2, Ok(false)),
        (&users, false, 1, Ok(false)),
    ];
    for (lb, internal, max, want) in cases {
        assert_eq!(
            may_join(lb, ME, max, internal),
            want,
            "{lb} {internal} {max}"
        );
    }
}

#[test]
fn tags_are_added_and_removed_once() {
    let lb = json!({"tags": ["kube_service_c_ns_a"]});
    assert_eq!(
        tags_with(&lb, ME),
        Some(vec!["kube_service_c_ns_a".to_string(), ME.to_string()])
    );
    assert_eq!(tags_without(&lb, ME), None);
    let lb = json!({"tags": ["kube_service_c_ns_a", ME]});
    assert_eq!(tags_with(&lb, ME), None);
    assert_eq!(
        tags_without(&lb, ME),
        Some(vec!["kube_service_c_ns_a".to_string()])
    );
}

#[test]
fn the_whole_load_balancer_goes_only_with_its_last_service() {
    let cases = [
        (json!({"name": ME, "tags": [ME]}), true),
        (json!({"name": ME, "tags": []}), true),
        (
            json!({"name": ME, "tags": [ME, "kube_service_c_ns_a"]}),
            false,
        ),
        (json!({"name": "kube_service_c_ns_a", "tags": [ME]}), true),
        (json!({"name": "users-lb", "tags": [ME]}), false),
        (json!({"name": "users-lb", "tags": []}), false),
    ];
    for (lb, want) in cases {
        assert_eq!(delete_whole(&lb, ME), want, "{lb}");
    }
}

fn listener(port: u64, tags: &[&str]) -> ActualListener {
    ActualListener {
        listener: json!({"id": format!("l{port}"), "protocol": "TCP", "protocol_port": port, "tags": tags}),
        pool: None,
    }
}

#[test]
fn only_our_listeners_and_pools_are_ours_and_taken_ports_conflict() {
    let tree = ActualTree {
        listeners: vec![
            listener(80, &["kube_service_c_ns_a"]),
            listener(81, &[ME]),
            listener(82, &[]),
        ],
        loose_pools: vec![
            json!({"id": "p0", "name": "pool_0_kube_service_c_ns_a"}),
            json!({"id": "p1", "name": format!("pool_1_{ME}")}),
            json!({"id": "p2", "name": "users-pool"}),
        ],
    };
    let joined = ours(tree.clone(), ME, false);
    assert_eq!(
        joined
            .listeners
            .iter()
            .map(|l| l.listener["protocol_port"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![81]
    );
    assert_eq!(joined.loose_pools.len(), 1);
    let owned = ours(tree.clone(), ME, true);
    assert_eq!(
        owned.listeners.len(),
        2,
        "untagged listeners are the owner's"
    );
    assert_eq!(owned.loose_pools.len(), 2);

    let mut spec = spec_with_ports(ME, &[80, 81, 90]);
    assert_eq!(port_conflicts(&tree, &spec, ME, false), vec![80]);
    spec.listeners.retain(|l| l.port != 80);
    assert!(port_conflicts(&tree, &spec, ME, false).is_empty());
    let spec82 = spec_with_ports(ME, &[82]);
    assert_eq!(port_conflicts(&tree, &spec82, ME, false), vec![82]);
    assert!(port_conflicts(&tree, &spec82, ME, true).is_empty());
}
