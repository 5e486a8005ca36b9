//! The route and node-ipam controllers against a real kube-apiserver and moto, with the CCM
//! running as the shipped RBAC identity: routes in every tagged table, foreign routes untouched,
//! replacement, deletion, `NetworkUnavailable`, request counts, and pod-CIDR allocation.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{setup, Setup, WAIT, ZONE};
use stratus_scenarios::kube_fixture::{self, condition, get_node, pod_cidrs};
use stratus_scenarios::route_fixture::{self as rf, routes};
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::Identity;

const CLUSTER_CIDR: &str = "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56";

fn pid(instance: &str) -> String {
    format!("aws:///{ZONE}/{instance}")
}

fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(d, t)| (d.to_string(), t.to_string()))
        .collect()
}

/// Waits until `table` holds exactly `want`.
async fn wait_routes(
    s: &Setup,
    table: &str,
    want: &BTreeMap<String, String>,
    log: impl Fn() -> String,
) {
    let result = wait_for(&format!("routes of {table}"), WAIT, || async {
        Ok((routes(&s.ec2, table).await? == *want).then_some(()))
    })
    .await;
    if let Err(e) = result {
        let got = routes(&s.ec2, table).await.unwrap();
        panic!("{e}\nwant {want:?}\ngot  {got:?}\n{}", log());
    }
}

async fn wait_network_available(s: &Setup, node: &str) {
    wait_for(
        &format!("NetworkUnavailable=False on {node}"),
        WAIT,
        || async {
            Ok(get_node(&s.admin, node)
                .await?
                .and_then(|n| condition(&n, "NetworkUnavailable"))
                .filter(|c| c == &("False".to_string(), "RouteCreated".to_string())))
        },
    )
    .await
    .unwrap();
}

/// The node's pod CIDRs once it has some.
async fn wait_pod_cidrs(s: &Setup, name: &str) -> Vec<String> {
    wait_for(&format!("pod CIDRs of {name}"), WAIT, || async {
        Ok(get_node(&s.admin, name)
            .await?
            .map(|n| pod_cidrs(&n))
            .filter(|c| !c.is_empty()))
    })
    .await
    .unwrap()
}

fn count(counts: &BTreeMap<String, u64>, action: &str) -> u64 {
    counts.get(&format!("ec2:{action}")).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_follow_nodes_in_every_cluster_table() {
    let s = setup("routes", true).await;
    let vpc = rf::vpc_of_subnet(&s.ec2, &s.subnet).await.unwrap();
    let rt_a = rf::cluster_route_table(&s.ec2, &vpc, "routes")
        .await
        .unwrap();
    let rt_b = rf::cluster_route_table(&s.ec2, &vpc, "routes")
        .await
        .unwrap();
    let rt_other = rf::route_table(&s.ec2, &vpc, &[]).await.unwrap();
    let igw = rf::internet_gateway(&s.ec2, &vpc).await.unwrap();
    // Foreign routes: outside the cluster CIDR, and inside it but to a gateway.
    rf::add_gateway_route(&s.ec2, &rt_a, "0.0.0.0/0", &igw)
        .await
        .unwrap();
    rf::add_gateway_route(&s.ec2, &rt_b, "10.244.200.0/24", &igw)
        .await
        .unwrap();
    let inst = s.launch(4).await;
    let (a, b, old, new) = (&inst[0].id, &inst[1].id, &inst[2].id, &inst[3].id);
    // Left from before: n2's CIDR still points at an old instance, a gone node's route remains,
    // and an untagged table has a cluster-CIDR route of its own.
    for table in [&rt_a, &rt_b] {
        rf::add_instance_route(&s.ec2, table, "10.244.2.0/24", old)
            .await
            .unwrap();
    }
    rf::add_instance_route(&s.ec2, &rt_a, "10.244.9.0/24", old)
        .await
        .unwrap();
    rf::add_instance_route(&s.ec2, &rt_other, "10.244.9.0/24", old)
        .await
        .unwrap();
    let other_before = routes(&s.ec2, &rt_other).await.unwrap();
    kube_fixture::create_initialized_node(
        &s.admin,
        "n1",
        &pid(a),
        &["10.244.1.0/24", "fd00:10:244:1::/64"],
    )
    .await
    .unwrap();
    kube_fixture::create_initialized_node(&s.admin, "n2", &pid(b), &["10.244.2.0/24"])
        .await
        .unwrap();
    s.env.reset_aws_request_counts().await.unwrap();
    let ccm = s.start_ccm(&[CLUSTER_CIDR, "--route-reconciliation-period=1s"]);
    let log = || ccm.log();

    let local = ("10.0.0.0/16", "local");
    let mut want_a = expect(&[
        local,
        ("0.0.0.0/0", &igw),
        ("10.244.1.0/24", a),
        ("fd00:10:244:1::/64", a),
        ("10.244.2.0/24", b),
    ]);
    let mut want_b = expect(&[
        local,
        ("10.244.200.0/24", &igw),
        ("10.244.1.0/24", a),
        ("fd00:10:244:1::/64", a),
        ("10.244.2.0/24", b),
    ]);
    wait_routes(&s, &rt_a, &want_a, log).await;
    wait_routes(&s, &rt_b, &want_b, log).await;
    wait_network_available(&s, "n1").await;
    wait_network_available(&s, "n2").await;
    for i in [a, b] {
        assert_eq!(
            rf::source_dest_check(&s.ec2, i).await.unwrap(),
            Some(false),
            "{i}"
        );
    }
    let counts = s.env.aws_request_counts().await.unwrap();
    assert_eq!(count(&counts, "CreateRoute"), 4, "{counts:?}\n{}", log());
    assert_eq!(count(&counts, "ReplaceRoute"), 2, "{counts:?}");
    assert_eq!(count(&counts, "DeleteRoute"), 1, "{counts:?}");
    assert_eq!(count(&counts, "ModifyInstanceAttribute"), 2, "{counts:?}");
    println!("routes created: {counts:?}");

    // Steady state: one DescribeRouteTables per period, no write to EC2 or Kubernetes.
    let ccm_user = Identity::CloudControllerManager.username();
    s.env.reset_aws_request_counts().await.unwrap();
    let writes_before = s.env.kube_writes_by(ccm_user).unwrap();
    let window = Duration::from_millis(3500);
    tokio::time::sleep(window).await; // a measurement window, not a wait for a condition
    let counts = s.env.aws_request_counts().await.unwrap();
    let describes = count(&counts, "DescribeRouteTables");
    assert!(
        (2..=5).contains(&describes),
        "{describes} DescribeRouteTables in {window:?}"
    );
    for write in [
        "CreateRoute",
        "ReplaceRoute",
        "DeleteRoute",
        "ModifyInstanceAttribute",
    ] {
        assert_eq!(
            count(&counts, write),
            0,
            "{write} in steady state: {counts:?}"
        );
    }
    assert_eq!(
        s.env.kube_writes_by(ccm_user).unwrap(),
        writes_before,
        "kube writes in steady state"
    );
    println!("steady state over {window:?}: {counts:?}");

    // The node behind n2 changes: n2 comes back on a new instance, the old one is terminated.
    kube_fixture::delete_node(&s.admin, "n2").await.unwrap();
    kube_fixture::create_initialized_node(&s.admin, "n2", &pid(new), &["10.244.2.0/24"])
        .await
        .unwrap();
    ec2_fixture::terminate(&s.ec2, std::slice::from_ref(b))
        .await
        .unwrap();
    want_a.insert("10.244.2.0/24".into(), new.clone());
    want_b.insert("10.244.2.0/24".into(), new.clone());
    wait_routes(&s, &rt_a, &want_a, log).await;
    wait_routes(&s, &rt_b, &want_b, log).await;
    assert_eq!(
        rf::source_dest_check(&s.ec2, new).await.unwrap(),
        Some(false)
    );
    wait_network_available(&s, "n2").await;

    // n1 is deleted: its IPv4 and IPv6 routes leave both tables; foreign routes stay.
    kube_fixture::delete_node(&s.admin, "n1").await.unwrap();
    for want in [&mut want_a, &mut want_b] {
        want.remove("10.244.1.0/24");
        want.remove("fd00:10:244:1::/64");
    }
    wait_routes(&s, &rt_a, &want_a, log).await;
    wait_routes(&s, &rt_b, &want_b, log).await;
    assert_eq!(
        routes(&s.ec2, &rt_other).await.unwrap(),
        other_before,
        "untagged table touched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocates_node_cidrs_and_routes_follow() {
    let s = setup("ipam", true).await;
    let vpc = rf::vpc_of_subnet(&s.ec2, &s.subnet).await.unwrap();
    let rt = rf::cluster_route_table(&s.ec2, &vpc, "ipam").await.unwrap();
    let inst = s.launch(5).await;
    let id = |i: usize| inst[i].id.clone();
    // A node from before keeps its CIDR (and its block is not handed out again); a node whose
    // CIDR is outside the cluster CIDR is reported, not changed.
    kube_fixture::create_initialized_node(&s.admin, "pre", &pid(&id(0)), &["10.244.0.0/24"])
        .await
        .unwrap();
    kube_fixture::create_initialized_node(&s.admin, "far", &pid(&id(0)), &["192.168.5.0/24"])
        .await
        .unwrap();
    for (i, name) in ["w1", "w2", "w3"].iter().enumerate() {
        kube_fixture::create_initialized_node(&s.admin, name, &pid(&id(i + 1)), &[])
            .await
            .unwrap();
    }
    // Four /24 blocks and four /64 blocks: room for exactly three more nodes.
    let ccm = s.start_ccm(&[
        "--allocate-node-cidrs=true",
        "--cluster-cidr=10.244.0.0/22,fd00:10:244::/62",
        "--node-cidr-mask-size-ipv4=24",
        "--node-cidr-mask-size-ipv6=64",
        "--route-reconciliation-period=1s",
    ]);
    let log = || ccm.log();
    assert_eq!(
        wait_pod_cidrs(&s, "w1").await,
        vec!["10.244.1.0/24", "fd00:10:244::/64"],
        "{}",
        log()
    );
    assert_eq!(
        wait_pod_cidrs(&s, "w2").await,
        vec!["10.244.2.0/24", "fd00:10:244:1::/64"]
    );
    assert_eq!(
        wait_pod_cidrs(&s, "w3").await,
        vec!["10.244.3.0/24", "fd00:10:244:2::/64"]
    );
    let w1 = get_node(&s.admin, "w1").await.unwrap().unwrap();
    assert_eq!(w1.spec.unwrap().pod_cidr.as_deref(), Some("10.244.1.0/24"));
    assert_eq!(
        pod_cidrs(&get_node(&s.admin, "far").await.unwrap().unwrap()),
        vec!["192.168.5.0/24"]
    );
    let outside = wait_for("PodCIDROutsideClusterCIDR event", WAIT, || async {
        Ok(kube_fixture::node_events(&s.admin, "far")
            .await?
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("PodCIDROutsideClusterCIDR")))
    })
    .await
    .unwrap();
    assert_eq!(outside.type_.as_deref(), Some("Warning"));

    let local = ("10.0.0.0/16", "local");
    let mut want = expect(&[
        local,
        ("10.244.0.0/24", &id(0)),
        ("10.244.1.0/24", &id(1)),
        ("fd00:10:244::/64", &id(1)),
        ("10.244.2.0/24", &id(2)),
        ("fd00:10:244:1::/64", &id(2)),
        ("10.244.3.0/24", &id(3)),
        ("fd00:10:244:2::/64", &id(3)),
    ]);
    wait_routes(&s, &rt, &want, log).await;
    for n in ["pre", "w1", "w2", "w3"] {
        wait_network_available(&s, n).await;
    }

    // The IPv4 range is full: a fifth node gets a CIDRNotAvailable Warning and no CIDR.
    kube_fixture::create_initialized_node(&s.admin, "w4", &pid(&id(4)), &[])
        .await
        .unwrap();
    let exhausted = wait_for("CIDRNotAvailable event", WAIT, || async {
        Ok(kube_fixture::node_events(&s.admin, "w4")
            .await?
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("CIDRNotAvailable")))
    })
    .await
    .unwrap();
    assert_eq!(exhausted.type_.as_deref(), Some("Warning"));
    assert!(pod_cidrs(&get_node(&s.admin, "w4").await.unwrap().unwrap()).is_empty());

    // w2 leaves: its blocks go to w4, and the routes follow.
    kube_fixture::delete_node(&s.admin, "w2").await.unwrap();
    assert_eq!(
        wait_pod_cidrs(&s, "w4").await,
        vec!["10.244.2.0/24", "fd00:10:244:1::/64"]
    );
    want.insert("10.244.2.0/24".into(), id(4));
    want.insert("fd00:10:244:1::/64".into(), id(4));
    wait_routes(&s, &rt, &want, log).await;
    wait_network_available(&s, "w4").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cluster_cidr_the_route_controller_is_skipped_with_a_warning() {
    let s = setup("nocidr", true).await;
    let ccm = s.start_ccm(&[]);
    wait_for("the skip warning", WAIT, || async {
        Ok(ccm
            .log()
            .contains("--cluster-cidr is not set: the route controller is not started")
            .then_some(()))
    })
    .await
    .unwrap();
    let counts = s.env.aws_request_counts().await.unwrap();
    assert_eq!(count(&counts, "DescribeRouteTables"), 0, "{counts:?}");
}
