//! Leader election with two and three replicas against a real kube-apiserver: one acts at a
//! time, a SIGKILLed leader is replaced within the lease duration, a SIGTERMed one hands over at
//! once, and no node is initialised (nor load balancer created) twice.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use common::lb::{lb_setup, NS};
use common::{setup, Setup, WAIT};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::service_fixture::{create_lb_service, load_balancer_name};
use stratus_scenarios::wait_for;
use stratus_testenv::Hold;

const ACQUIRED: &str = "acquired the lease";
const INITIALIZED: &str = "node initialized";

fn replica(s: &Setup) -> CcmProcess {
    s.start_ccm(&[
        "--controllers=cloud-node",
        "--leader-elect=true",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=250ms",
    ])
}

async fn wait_leader<'a>(replicas: &'a [&'a CcmProcess]) -> usize {
    wait_for("a leader", WAIT, || async {
        let leading: Vec<usize> = (0..replicas.len())
            .filter(|i| replicas[*i].log().contains(ACQUIRED))
            .collect();
        anyhow::ensure!(leading.len() <= 1, "two leaders: {leading:?}");
        Ok(leading.first().copied())
    })
    .await
    .unwrap()
}

async fn initialize(s: &Setup, name: &str) {
    kube_fixture::create_uninitialized_node(&s.admin, name, &[], BTreeMap::new())
        .await
        .unwrap();
    wait_for(&format!("{name} initialized"), WAIT, || async {
        Ok(get_node(&s.admin, name)
            .await?
            .filter(|n| !has_taint(n, UNINITIALIZED)))
    })
    .await
    .unwrap();
}

fn initializations(p: &CcmProcess) -> usize {
    p.log().matches(INITIALIZED).count()
}

/// The replica logs "node initialized" just after its patch lands, so the node can be seen
/// untainted a moment before the line is written: wait for the line, then count.
async fn wait_initializations(p: &CcmProcess, want: usize) {
    wait_for(
        &format!("{want} initialization(s) logged"),
        WAIT,
        || async { Ok((initializations(p) >= want).then_some(())) },
    )
    .await
    .unwrap();
    assert_eq!(initializations(p), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_acts_and_the_standby_takes_over() {
    let s = setup("election", true).await;
    let inst = s.launch(3).await;
    let mut a = replica(&s);
    let mut b = replica(&s);
    let first = wait_leader(&[&a, &b]).await;
    initialize(&s, &inst[0].id).await;
    let (leader, standby) = if first == 0 {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    wait_initializations(leader, 1).await;
    assert_eq!(initializations(standby), 0, "the standby never acts");

    // SIGKILL: the standby takes over once the lease has expired (4 s).
    let killed_at = Instant::now();
    leader.kill();
    wait_for("standby leads", WAIT, || async {
        Ok(standby.log().contains(ACQUIRED).then_some(()))
    })
    .await
    .unwrap();
    let takeover = killed_at.elapsed();
    assert!(takeover < Duration::from_secs(8), "took {takeover:?}");
    initialize(&s, &inst[1].id).await;
    wait_initializations(standby, 1).await;

    // SIGTERM: the leader releases the lease and a fresh standby takes over within 2 s.
    let c = replica(&s);
    // Let the new replica start and try at least once, so it is a waiting standby.
    wait_for("third replica waiting", WAIT, || async {
        Ok(c.log().contains("waiting for the lease").then_some(()))
    })
    .await
    .unwrap();
    let terminated_at = Instant::now();
    standby.terminate();
    wait_for("third replica leads", WAIT, || async {
        Ok(c.log().contains(ACQUIRED).then_some(()))
    })
    .await
    .unwrap();
    let handover = terminated_at.elapsed();
    assert!(handover < Duration::from_secs(2), "took {handover:?}");
    let status = standby.wait();
    assert!(
        status.is_some_and(|s| s.success()),
        "graceful exit: {status:?}"
    );
    initialize(&s, &inst[2].id).await;
    wait_initializations(&c, 1).await;
    // No node was initialised twice across all replicas.
    let total = initializations(&a) + initializations(&b) + initializations(&c);
    assert_eq!(total, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_in_the_middle_of_creating_a_load_balancer_makes_one() {
    let lb = lb_setup("election-lb", 2).await;
    // The leader dies while CreateLoadBalancer is in flight (AWS made the ELB, the answer is lost).
    lb.s.env
        .hold_aws_requests(&[Hold {
            action: "CreateLoadBalancer".into(),
            after_forward: true,
        }])
        .await
        .unwrap();
    let timings = [
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=250ms",
    ];
    let mut a = lb.ccm(&timings);
    let mut b = lb.ccm(&timings);
    let first = wait_leader(&[&a, &b]).await;
    let svc = create_lb_service(&lb.s.admin, NS, "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    let name = load_balancer_name(&svc);
    wait_for("ELB made by the leader", WAIT, || async {
        Ok(lb.lbs.classic(&name).await?.map(|_| ()))
    })
    .await
    .unwrap();
    let (leader, standby) = if first == 0 {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    leader.kill();
    lb.s.env.hold_aws_requests(&[]).await.unwrap();
    lb.wait_ingress("web").await;
    assert!(standby.log().contains(ACQUIRED));
    lb.assert_made_once(&name).await;
}
