//! The node-lifecycle controller's cost and speed against a real kube-apiserver and moto: a
//! stopped or terminated instance behind a NotReady node is seen within seconds although the full
//! EC2 listing runs only every few minutes, NotReady nodes cost one batched DescribeInstances per
//! monitor period together, and Ready nodes cost nothing between two listings (all counted at
//! the AWS proxy).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{setup, WAIT, ZONE};
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::service_fixture::set_ready;
use stratus_scenarios::{ec2_fixture, wait_for};
use tokio::time::Instant;

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// How soon a stopped or terminated NotReady node must be acted on.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

async fn ec2_describes(s: &common::Setup) -> u64 {
    s.env
        .aws_request_counts()
        .await
        .unwrap()
        .get("ec2:DescribeInstances")
        .copied()
        .unwrap_or(0)
}

async fn ec2_total(s: &common::Setup) -> BTreeMap<String, u64> {
    s.env
        .aws_request_counts()
        .await
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.starts_with("ec2:"))
        .collect()
}

/// Waits until the proxy has seen at least `n` DescribeInstances.
async fn wait_describes(s: &common::Setup, n: u64, what: &str) {
    wait_for(what, WAIT, || async {
        Ok((ec2_describes(s).await >= n).then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_and_terminated_not_ready_nodes_are_seen_within_seconds() {
    let s = setup("seen-fast", true).await;
    let inst = s.launch(2).await;
    let (a, b) = (inst[0].id.clone(), inst[1].id.clone());
    for id in [&a, &b] {
        kube_fixture::create_uninitialized_node(&s.admin, id, &[], BTreeMap::new())
            .await
            .unwrap();
    }
    // Upstream's monitor period, and a full listing far away: only the lifecycle controller's
    // batched look at NotReady nodes can see the changes in time.
    let ccm = s.start_ccm(&[
        "--node-monitor-period=5s",
        "--instance-cache-refresh-period=10m",
    ]);
    for id in [&a, &b] {
        wait_for(&format!("{id} initialised"), WAIT, || async {
            Ok(get_node(&s.admin, id)
                .await?
                .filter(|n| !has_taint(n, UNINITIALIZED)))
        })
        .await
        .unwrap();
        set_ready(&s.admin, id, true).await.unwrap();
    }

    ec2_fixture::stop(&s.ec2, std::slice::from_ref(&a))
        .await
        .unwrap();
    set_ready(&s.admin, &a, false).await.unwrap();
    let stopped = Instant::now();
    wait_for(
        "shutdown taint on the stopped NotReady node",
        SEEN_WITHIN,
        || async {
            Ok(get_node(&s.admin, &a)
                .await?
                .filter(|n| has_taint(n, SHUTDOWN)))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ccm.log()));
    eprintln!("tainted {:?} after the stop", stopped.elapsed());

    ec2_fixture::start(&s.ec2, std::slice::from_ref(&a))
        .await
        .unwrap();
    let started = Instant::now();
    wait_for(
        "shutdown taint removed once the instance runs (node still NotReady)",
        SEEN_WITHIN,
        || async {
            Ok(get_node(&s.admin, &a)
                .await?
                .filter(|n| !has_taint(n, SHUTDOWN)))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ccm.log()));
    eprintln!("untainted {:?} after the start", started.elapsed());

    ec2_fixture::terminate(&s.ec2, std::slice::from_ref(&b))
        .await
        .unwrap();
    set_ready(&s.admin, &b, false).await.unwrap();
    let terminated = Instant::now();
    wait_for("terminated NotReady node deleted", SEEN_WITHIN, || async {
        Ok(get_node(&s.admin, &b).await?.is_none().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ccm.log()));
    eprintln!("deleted {:?} after the termination", terminated.elapsed());
    assert!(
        get_node(&s.admin, &a).await.unwrap().is_some(),
        "the running node is kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_nodes_cost_one_describe_per_monitor_period_and_ready_ones_none() {
    const NODES: usize = 100;
    let s = setup("batched", true).await;
    let launched = ec2_fixture::launch_many(
        &s.ec2,
        &s.subnet,
        ZONE,
        NODES,
        Some(&s.cluster_id),
        "m5.large",
    )
    .await
    .unwrap();
    // Initialised nodes without a Ready condition: NotReady, as after a network partition.
    let names: Vec<String> = launched.iter().map(|i| i.id.clone()).collect();
    let provider_ids: Vec<String> = names
        .iter()
        .map(|id| format!("aws:///{ZONE}/{id}"))
        .collect();
    futures::future::try_join_all(
        names
            .iter()
            .zip(&provider_ids)
            .map(|(id, pid)| kube_fixture::create_initialized_node(&s.admin, id, pid, &[])),
    )
    .await
    .unwrap();
    let period = Duration::from_secs(1);
    let ccm = s.start_ccm(&[
        "--controllers=cloud-node-lifecycle",
        "--node-monitor-period=1s",
        "--instance-cache-refresh-period=10m",
    ]);
    // The first listing and the first pass.
    wait_describes(&s, 2, "the first listing and lifecycle pass").await;

    s.env.reset_aws_request_counts().await.unwrap();
    let window = Duration::from_secs(10);
    let began = Instant::now();
    // The measurement window itself (nothing is waited for).
    tokio::time::sleep(window).await;
    let passes = began.elapsed().as_secs_f64() / period.as_secs_f64();
    let counts = ec2_total(&s).await;
    let describes = counts.get("ec2:DescribeInstances").copied().unwrap_or(0);
    assert!(
        describes as f64 <= passes.ceil() + 1.0 && describes as f64 >= passes.floor() - 2.0,
        "{NODES} NotReady nodes for {passes:.1} monitor periods cost {describes} DescribeInstances (one per period expected): {counts:?}\n{}",
        ccm.log()
    );
    assert_eq!(
        counts.keys().collect::<Vec<_>>(),
        vec!["ec2:DescribeInstances"],
        "nothing else is asked: {counts:?}"
    );
    for name in names.iter().take(3) {
        let node = get_node(&s.admin, name).await.unwrap().expect("node kept");
        assert!(!has_taint(&node, SHUTDOWN), "running instances: no taint");
    }

    // Every node reports Ready again: the lifecycle controller asks EC2 nothing.
    futures::future::try_join_all(names.iter().map(|n| set_ready(&s.admin, n, true)))
        .await
        .unwrap();
    // Until the CCM's watch has seen them all, passes may still ask: wait for two quiet
    // periods in a row.
    let last = std::sync::Mutex::new((ec2_describes(&s).await, Instant::now()));
    wait_for("the NotReady checks to stop", WAIT, || {
        let (s, last) = (&s, &last);
        async move {
            let now = ec2_describes(s).await;
            let mut last = last.lock().unwrap();
            if now != last.0 {
                *last = (now, Instant::now());
            }
            Ok((last.1.elapsed() >= 2 * period).then_some(()))
        }
    })
    .await
    .unwrap();
    s.env.reset_aws_request_counts().await.unwrap();
    tokio::time::sleep(window).await;
    let counts = ec2_total(&s).await;
    assert!(
        counts.is_empty(),
        "{NODES} Ready nodes for {window:?}: no EC2 request expected, got {counts:?}\n{}",
        ccm.log()
    );
}

/// All Ready: zero EC2 calls over 2 minutes with a 5-minute full listing, while the lifecycle
/// pass runs every 500 ms and every node's addresses are refreshed every 2 s (hundreds of each).
/// The window is the issue's: long enough that a per-minute listing would show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_ready_nodes_cost_no_ec2_call_for_two_minutes_with_a_five_minute_listing() {
    const NODES: i32 = 10;
    let window = Duration::from_secs(120);
    let s = setup("idle", true).await;
    let launched = s.launch(NODES).await;
    for i in &launched {
        kube_fixture::create_uninitialized_node(&s.admin, &i.id, &[], BTreeMap::new())
            .await
            .unwrap();
        set_ready(&s.admin, &i.id, true).await.unwrap();
    }
    let ccm = s.start_ccm(&[
        "--controllers=cloud-node,cloud-node-lifecycle",
        "--node-monitor-period=500ms",
        "--node-status-update-frequency=2s",
        "--instance-cache-refresh-period=5m",
    ]);
    for i in &launched {
        wait_for(&format!("{} initialised", i.id), WAIT, || async {
            Ok(get_node(&s.admin, &i.id)
                .await?
                .filter(|n| !has_taint(n, UNINITIALIZED)))
        })
        .await
        .unwrap();
    }
    let init = ec2_total(&s).await;
    assert_eq!(
        init.get("ec2:DescribeInstances").copied(),
        Some(1),
        "one listing initialises {NODES} nodes: {init:?}"
    );
    s.env.reset_aws_request_counts().await.unwrap();
    // The measurement window itself (nothing is waited for).
    tokio::time::sleep(window).await;
    let counts = ec2_total(&s).await;
    assert!(
        counts.is_empty(),
        "{NODES} Ready nodes for {window:?} (passes every 500 ms, address refresh every 2 s): no EC2 request expected, got {counts:?}\n{}",
        ccm.log()
    );
}
