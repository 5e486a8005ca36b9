//! Resilience of the real CCM binary against a real kube-apiserver and moto behind the
//! fault-injecting proxy: throttled AWS, AWS unreachable for 60 s, a restarted apiserver, and SIGKILLs
//! in the middle of a Service churn. Everything must converge with nothing duplicated or leaked.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::lb::{lb_setup, NS};
use common::{setup, WAIT, ZONE};
use futures::future::try_join_all;
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::route_fixture as rf;
use stratus_scenarios::service_fixture::{
    create_lb_service, delete_service, get_service, ingress_hostname, load_balancer_name,
};
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::{Fault, FaultKind};

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

/// How many Services the churn creates, over how many CCM lives (each one SIGKILLed).
const CHURN_SERVICES: usize = 200;
const CHURN_KILLS: usize = 10;
/// Services deleted per round after the first, picked at random among the live ones.
const CHURN_DELETES: usize = 16;
/// Every `NLB_EVERY`-th Service is an NLB, so target groups are churned too.
const NLB_EVERY: usize = 4;

/// The seed of the churn's random choices: `STRATUS_CHURN_SEED`, else the clock (printed, so a
/// failing run can be replayed).
fn churn_seed() -> u64 {
    let seed = std::env::var("STRATUS_CHURN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
    println!("churn seed: STRATUS_CHURN_SEED={seed}");
    seed
}

/// Every load balancer in moto, Classic and v2.
async fn all_load_balancers(lb: &common::lb::Lb) -> anyhow::Result<BTreeSet<String>> {
    let mut all: BTreeSet<String> = lb.lbs.classic_names().await?.into_iter().collect();
    all.extend(lb.lbs.v2_names().await?);
    Ok(all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkills_during_a_service_churn_leak_nothing() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(churn_seed());
    let lb = lb_setup("churn", 2).await;
    let vpc = rf::vpc_of_subnet(&lb.s.ec2, &lb.s.subnet).await.unwrap();
    let table = rf::cluster_route_table(&lb.s.ec2, &vpc, "churn")
        .await
        .unwrap();
    let routes_before = rf::routes(&lb.s.ec2, &table).await.unwrap();
    let node_rules_before = lb.node_group_sources().await;
    let ccm_args = [
        "--controllers=service,route",
        "--cluster-cidr=10.244.0.0/16",
        "--route-reconciliation-period=1s",
        "--concurrent-service-syncs=4",
    ];
    let start_ccm = || lb.s.start_ccm(&ccm_args);
    // Live Services and route nodes (name → (CIDR, instance)) as the test wants them.
    let mut live: Vec<String> = Vec::new();
    let mut route_nodes: BTreeMap<String, (String, String)> = BTreeMap::new();
    let per_round = CHURN_SERVICES / CHURN_KILLS;
    let mut next = 0usize;
    let mut added = 0usize;
    for round in 0..CHURN_KILLS {
        let mut ccm = start_ccm();
        for _ in 0..per_round {
            let name = format!("svc-{next}");
            let annotations = if next.is_multiple_of(NLB_EVERY) {
                common::lb::annotations(&[("type", "nlb")])
            } else {
                BTreeMap::new()
            };
            next += 1;
            create_lb_service(&lb.s.admin, NS, &name, &[80], annotations)
                .await
                .unwrap();
            live.push(name);
        }
        if round > 0 {
            for _ in 0..CHURN_DELETES {
                let victim = live.swap_remove(rng.random_range(0..live.len()));
                delete_service(&lb.s.admin, NS, &victim).await.unwrap();
            }
        }
        // Route churn: two nodes with pod CIDRs join, a random one leaves.
        for instance in lb.s.launch(2).await {
            ec2_fixture::set_instance_groups(
                &lb.s.ec2,
                &instance.id,
                std::slice::from_ref(&lb.node_group),
            )
            .await
            .unwrap();
            let name = format!("route-{}", instance.id);
            added += 1;
            let cidr = format!("10.244.{added}.0/24");
            kube_fixture::create_initialized_node(
                &lb.s.admin,
                &name,
                &format!("aws:///{ZONE}/{}", instance.id),
                &[&cidr],
            )
            .await
            .unwrap();
            route_nodes.insert(name, (cidr, instance.id));
        }
        let leaving = route_nodes
            .keys()
            .nth(rng.random_range(0..route_nodes.len()))
            .cloned()
            .unwrap();
        kube_fixture::delete_node(&lb.s.admin, &leaving)
            .await
            .unwrap();
        route_nodes.remove(&leaving);
        // SIGKILL after a random number of further AWS calls: anywhere in the work.
        let start: u64 = lb.s.env.aws_request_counts().await.unwrap().values().sum();
        let point = start + rng.random_range(3..150);
        wait_for("the kill point", LONG_WAIT, || async {
            let now: u64 = lb.s.env.aws_request_counts().await?.values().sum();
            Ok((now >= point).then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
        ccm.kill();
        println!("round {round}: killed after {} AWS calls", point - start);
    }
    // A last CCM finishes the work: one load balancer per live Service, none for the deleted
    // ones, and one route per live node.
    let ccm = start_ccm();
    let mut want = BTreeSet::new();
    for name in &live {
        let svc = wait_for(&format!("ingress of {name}"), LONG_WAIT, || async {
            Ok(get_service(&lb.s.admin, NS, name)
                .await?
                .filter(|s| ingress_hostname(s).is_some()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
        want.insert(load_balancer_name(&svc));
    }
    assert_eq!(want.len(), live.len(), "one name per Service");
    let converged = wait_for(
        "only the live Services' load balancers",
        LONG_WAIT,
        || async { Ok((all_load_balancers(&lb).await? == want).then_some(())) },
    )
    .await;
    if let Err(e) = converged {
        let got = all_load_balancers(&lb).await.unwrap();
        panic!("{e:#}\nwant {want:?}\ngot {got:?}\n{}", ccm.log());
    }
    let mut want_routes = routes_before.clone();
    for (cidr, instance) in route_nodes.values() {
        want_routes.insert(cidr.clone(), instance.clone());
    }
    wait_for("one route per live node", LONG_WAIT, || async {
        Ok((rf::routes(&lb.s.ec2, &table).await? == want_routes).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    // Then everything goes: zero load balancers, target groups, groups, rules and routes left.
    for name in &live {
        delete_service(&lb.s.admin, NS, name).await.unwrap();
    }
    for name in route_nodes.keys() {
        kube_fixture::delete_node(&lb.s.admin, name).await.unwrap();
    }
    lb.wait_no_leftovers().await;
    wait_for("no route left", LONG_WAIT, || async {
        Ok((rf::routes(&lb.s.ec2, &table).await? == routes_before).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    wait_for("no rule left on the node group", WAIT, || async {
        Ok((lb.node_group_sources().await == node_rules_before).then_some(()))
    })
    .await
    .unwrap();
}
