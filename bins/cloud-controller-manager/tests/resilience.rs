//! Resilience of the real CCM binary against a real kube-apiserver and moto behind the
//! fault-injecting proxy: throttled AWS, AWS unreachable for 60 s, a restarted apiserver, and SIGKILLs
//! in the middle of a Service churn. Everything must converge with nothing duplicated or leaked.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::lb::{lb_setup, NS};
use common::{setup, WAIT};
use futures::future::try_join_all;
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::service_fixture::{
    create_lb_service, delete_service, get_service, ingress_hostname, load_balancer_name,
};
use stratus_scenarios::wait_for;
use stratus_testenv::proxy::{Fault, FaultKind};

const LONG_WAIT: Duration = Duration::from_secs(180);

fn throttle(service: &str, rate: f64) -> Fault {
    Fault {
        service: Some(service.into()),
        action: None,
        kind: FaultKind::Throttle,
        rate,
    }
}

async fn uninitialized(admin: &kube::Client, names: &[String]) -> anyhow::Result<Vec<String>> {
    let mut left = Vec::new();
    for name in names {
        match get_node(admin, name).await? {
            Some(n) if !has_taint(&n, UNINITIALIZED) => {}
            _ => left.push(name.clone()),
        }
    }
    Ok(left)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_aws_converges_without_duplicates() {
    let lb = lb_setup("throttled", 2).await;
    let launched = lb.s.launch(40).await;
    lb.s.env
        .set_aws_faults(&[throttle("ec2", 0.3), throttle("elasticloadbalancing", 0.3)])
        .await
        .unwrap();
    let _ccm = lb.s.start_ccm(&[
        "--controllers=cloud-node,service",
        "--concurrent-node-syncs=8",
        "--concurrent-service-syncs=4",
    ]);
    let names: Vec<String> = launched.iter().map(|i| i.id.clone()).collect();
    try_join_all(
        names
            .iter()
            .map(|n| kube_fixture::create_uninitialized_node(&lb.s.admin, n, &[], BTreeMap::new())),
    )
    .await
    .unwrap();
    let services: Vec<String> = (0..10).map(|i| format!("web-{i}")).collect();
    let mut lb_names = BTreeSet::new();
    for name in &services {
        let svc = create_lb_service(&lb.s.admin, NS, name, &[80], BTreeMap::new())
            .await
            .unwrap();
        lb_names.insert(load_balancer_name(&svc));
    }
    wait_for("every node initialised", LONG_WAIT, || async {
        Ok(uninitialized(&lb.s.admin, &names)
            .await?
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();
    for name in &services {
        wait_for(&format!("ingress of {name}"), LONG_WAIT, || async {
            Ok(get_service(&lb.s.admin, NS, name)
                .await?
                .filter(|s| ingress_hostname(s).is_some()))
        })
        .await
        .unwrap();
    }
    let timeline = lb.s.env.aws_timeline().await.unwrap();
    let throttled: u64 = timeline.values().map(|s| s.throttled).sum();
    assert!(throttled > 10, "throttling was injected: {timeline:?}");
    lb.s.env.set_aws_faults(&[]).await.unwrap();
    // Exactly one ELB and one group per Service: no retry made anything twice.
    let made: BTreeSet<String> = lb.lbs.classic_names().await.unwrap().into_iter().collect();
    assert_eq!(made, lb_names);
    let groups = stratus_scenarios::ec2_fixture::security_groups_named(&lb.s.ec2, "k8s-elb-a")
        .await
        .unwrap();
    assert_eq!(groups.len(), services.len(), "{groups:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cloud_deletes_no_node() {
    let s = setup("outage", true).await;
    let launched = s.launch(2).await;
    let ccm = s.start_ccm(&["--controllers=cloud-node,cloud-node-lifecycle"]);
    let mut names: Vec<String> = launched.iter().map(|i| i.id.clone()).collect();
    for name in &names {
        kube_fixture::create_uninitialized_node(&s.admin, name, &[], BTreeMap::new())
            .await
            .unwrap();
    }
    wait_for("two nodes initialised", WAIT, || async {
        Ok(uninitialized(&s.admin, &names[..2])
            .await?
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();

    // AWS goes away: every connection is dropped.
    s.env
        .set_aws_faults(&[Fault {
            service: None,
            action: None,
            kind: FaultKind::Drop,
            rate: 1.0,
        }])
        .await
        .unwrap();
    // A machine launched during the outage (the test talks to moto directly): the CCM's cache
    // has never seen it, so initialising its node needs AWS.
    names.push(s.launch(1).await[0].id.clone());
    let outage_from = s
        .env
        .aws_timeline()
        .await
        .unwrap()
        .keys()
        .last()
        .copied()
        .unwrap_or(0);
    kube_fixture::create_uninitialized_node(&s.admin, &names[2], &[], BTreeMap::new())
        .await
        .unwrap();
    // The outage lasts until the CCM has been failing to reach AWS for 60 s (instance-cache
    // refreshes every second, lookups of the new node) and the new node has a Warning.
    wait_for("a 60 s outage", Duration::from_secs(150), || async {
        let failing: Vec<u64> = s
            .env
            .aws_timeline()
            .await?
            .into_iter()
            .filter(|(second, x)| *second > outage_from && x.failed > 0)
            .map(|(second, _)| second)
            .collect();
        let lasted = match (failing.first(), failing.last()) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        };
        let warned = kube_fixture::node_events(&s.admin, &names[2])
            .await?
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason
                        .as_deref()
                        .is_some_and(|r| r.starts_with("FailedToInitialize"))
            });
        Ok((lasted >= 60 && warned).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    for name in &names {
        assert!(
            get_node(&s.admin, name).await.unwrap().is_some(),
            "{name} deleted during the outage"
        );
    }
    assert!(
        uninitialized(&s.admin, &names[2..]).await.unwrap().len() == 1,
        "nothing initialised without the cloud"
    );

    // AWS is back: the new node is initialised, nothing was lost.
    s.env.set_aws_faults(&[]).await.unwrap();
    wait_for("the third node initialised", WAIT, || async {
        Ok(uninitialized(&s.admin, &names)
            .await?
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_apiserver_is_followed_without_a_restart() {
    let mut s = setup("apiserver-restart", true).await;
    let launched = s.launch(2).await;
    // An apiserver outage shorter than the renew deadline keeps the leader leading (a longer
    // one makes it exit, as upstream); the restart here takes 10-20 s on a small machine.
    let mut ccm = s.start_ccm(&[
        "--controllers=cloud-node",
        "--leader-elect-lease-duration=90s",
        "--leader-elect-renew-deadline=60s",
        "--leader-elect-retry-period=2s",
    ]);
    let first = launched[0].id.clone();
    kube_fixture::create_uninitialized_node(&s.admin, &first, &[], BTreeMap::new())
        .await
        .unwrap();
    wait_for("first node initialised", WAIT, || async {
        Ok(uninitialized(&s.admin, std::slice::from_ref(&first))
            .await?
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();
    s.env.restart_apiserver().await.unwrap();
    let second = launched[1].id.clone();
    kube_fixture::create_uninitialized_node(&s.admin, &second, &[], BTreeMap::new())
        .await
        .unwrap();
    wait_for(
        "node created after the restart initialised",
        WAIT,
        || async {
            Ok(uninitialized(&s.admin, std::slice::from_ref(&second))
                .await?
                .is_empty()
                .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert!(
        ccm.try_exit().is_none(),
        "the CCM kept running: {}",
        ccm.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkills_during_a_service_churn_leak_nothing() {
    let lb = lb_setup("churn", 2).await;
    let mut live: Vec<String> = Vec::new();
    let mut next = 0;
    for round in 0..10u64 {
        let mut ccm = lb.ccm(&["--concurrent-service-syncs=4"]);
        // Churn: three new Services, the two oldest deleted.
        for _ in 0..3 {
            let name = format!("svc-{next}");
            next += 1;
            create_lb_service(&lb.s.admin, NS, &name, &[80], BTreeMap::new())
                .await
                .unwrap();
            live.push(name);
        }
        for name in live.drain(..2.min(live.len().saturating_sub(3))) {
            delete_service(&lb.s.admin, NS, &name).await.unwrap();
        }
        // Killed once it has made a round-dependent number of AWS calls: a different point of
        // the work each round.
        let start: u64 = lb.s.env.aws_request_counts().await.unwrap().values().sum();
        let point = start + 3 + (round * 7) % 23;
        wait_for("the kill point", WAIT, || async {
            let now: u64 = lb.s.env.aws_request_counts().await?.values().sum();
            Ok((now >= point).then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
        ccm.kill();
    }
    // A last CCM finishes the work: one ELB per live Service, none for the deleted ones.
    let _ccm = lb.ccm(&["--concurrent-service-syncs=4"]);
    let mut want = BTreeSet::new();
    for name in &live {
        let svc = lb.wait_ingress(name).await;
        want.insert(load_balancer_name(&svc));
    }
    wait_for("only the live Services' ELBs", WAIT, || async {
        let made: BTreeSet<String> = lb.lbs.classic_names().await?.into_iter().collect();
        Ok((made == want).then_some(()))
    })
    .await
    .unwrap();
    // Then everything goes: zero ELBs, target groups and groups left.
    for name in &live {
        delete_service(&lb.s.admin, NS, name).await.unwrap();
    }
    lb.wait_no_leftovers().await;
}
