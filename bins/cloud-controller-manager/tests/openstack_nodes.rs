//! The node and node-lifecycle controllers with `--cloud-provider=openstack`: a real
//! kube-apiserver, a real Keystone and the Nova/Neutron simulators behind the counting and fault
//! proxy, the CCM binary as a process under the shipped RBAC. The tests without faults share one
//! Keystone (see `openstack_common`); the outage and the token-expiry tests bring their own.

mod openstack_common;

use std::time::Duration;

use openstack_common::{failure_lines, setup, shared, Setup, SHUTDOWN, WAIT};
use stratus_openstack_sim::{ServerSpec, ServerStatus};
use stratus_scenarios::behaviour;
use stratus_scenarios::kube_fixture::{self, addresses, get_node, has_taint, label};
use stratus_scenarios::openstack_fixture::{provider_id, OpenStackFixture};
use stratus_scenarios::wait_for;
use stratus_testenv::{Fault, FaultKind};
use stratus_testenv::{Identity, OpenStackEnv, OpenStackOptions};
use tokio::time::Instant;

/// The flavor, zone and region every simulated server has unless told otherwise.
const FLAVOR: &str = "m1.small";
const ZONE: &str = "nova";
const REGION: &str = "RegionOne";

fn assert_cloud_labels(node: &k8s_openapi::api::core::v1::Node, name: &str) {
    assert_eq!(
        label(node, "node.kubernetes.io/instance-type"),
        Some(FLAVOR),
        "{name}"
    );
    assert_eq!(
        label(node, "topology.kubernetes.io/zone"),
        Some(ZONE),
        "{name}"
    );
    assert_eq!(
        label(node, "topology.kubernetes.io/region"),
        Some(REGION),
        "{name}"
    );
}

fn provider_id_of(node: &k8s_openapi::api::core::v1::Node) -> Option<&str> {
    node.spec.as_ref()?.provider_id.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_named_three_ways_are_initialised() {
    let cloud = shared().await;
    let s = setup(cloud, "naming").await;
    let specs = [
        ServerSpec {
            fixed_ip: Some("10.0.201.11".into()),
            ..ServerSpec::active(s.name("by-id"))
        },
        ServerSpec {
            fixed_ip: Some("10.0.201.12".into()),
            ..ServerSpec::active(s.name("by-name"))
        },
        ServerSpec {
            fixed_ip: Some("10.0.201.13".into()),
            ..ServerSpec::active(s.name("by-ip"))
        },
    ];
    let ids = s.sim().create_servers(&specs).expect("servers");
    let floating = s.sim().associate_floating_ip(&ids[1]).expect("floating IP");

    // By providerID (the node name says nothing), by name = server name, by a kubelet IP.
    let by_id = s.name("kubelet-a");
    let by_name = s.name("by-name");
    let by_ip = s.name("kubelet-c");
    s.node(&by_id, Some(&provider_id(&ids[0])), &[]).await;
    s.node(&by_name, None, &[]).await;
    s.node(&by_ip, None, &["10.0.201.13"]).await;
    let ccm = s.start_ccm("", &[]);

    for (name, id, ip) in [
        (&by_id, &ids[0], "10.0.201.11"),
        (&by_name, &ids[1], "10.0.201.12"),
        (&by_ip, &ids[2], "10.0.201.13"),
    ] {
        let node = s.initialized(name, &ccm).await;
        assert_eq!(
            provider_id_of(&node),
            Some(provider_id(id).as_str()),
            "{name}"
        );
        assert_cloud_labels(&node, name);
        let addrs = addresses(&node);
        assert!(
            addrs.contains(&("InternalIP".into(), ip.into())),
            "{name}: {addrs:?}"
        );
        assert!(
            !has_taint(&node, kube_fixture::UNINITIALIZED),
            "{name}: uninitialised taint removed"
        );
    }
    let node = get_node(&s.admin, &by_name).await.unwrap().unwrap();
    assert!(
        addresses(&node).contains(&("ExternalIP".into(), floating.clone())),
        "the floating IP {floating} is an ExternalIP: {:?}",
        addresses(&node)
    );
    let writes = s
        .cluster
        .kube_writes_by(Identity::CloudControllerManager.username())
        .unwrap();
    assert!(
        writes <= 6,
        "at most 2 writes per node, got {writes}\n{}",
        ccm.log()
    );
    assert!(
        failure_lines(&ccm.log()).is_empty(),
        "{:?}",
        failure_lines(&ccm.log())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutoff_active_and_deleted_servers_and_static_nodes() {
    let cloud = shared().await;
    let s = setup(cloud, "lifecycle").await;
    let ids = s.servers(&["stops", "goes"]);
    let (stops, goes) = (s.name("stops"), s.name("goes"));
    s.node(&stops, None, &[]).await;
    s.node(&goes, None, &[]).await;
    let static_before = kube_fixture::create_static_node(&s.admin, "on-prem-1")
        .await
        .unwrap();
    let ccm = s.start_ccm("", &[]);
    s.initialized(&stops, &ccm).await;
    s.initialized(&goes, &ccm).await;

    // Nodes without a Ready condition count as NotReady, as the lifecycle controller needs.
    s.sim()
        .set_server_status(&ids[0], ServerStatus::Shutoff)
        .unwrap();
    s.until(&stops, "tainted shut down", &ccm, |n| {
        n.is_some_and(|n| has_taint(n, SHUTDOWN))
    })
    .await;
    s.sim()
        .set_server_status(&ids[0], ServerStatus::Active)
        .unwrap();
    s.until(&stops, "untainted", &ccm, |n| {
        n.is_some_and(|n| !has_taint(n, SHUTDOWN))
    })
    .await;

    s.sim().delete_server(&ids[1]).unwrap();
    s.until(&goes, "deleted", &ccm, |n| n.is_none()).await;
    assert!(
        get_node(&s.admin, &stops).await.unwrap().is_some(),
        "the running server's node is kept"
    );
    let static_after = get_node(&s.admin, "on-prem-1")
        .await
        .unwrap()
        .expect("static node kept");
    assert_eq!(
        static_after.metadata.resource_version,
        static_before.metadata.resource_version,
        "the CCM must never write to a node that was never ours\n{}",
        ccm.log()
    );
}

/// Deckhouse's OCCM switch `SKIP_NODE_DELETION=true`: a Node whose server was deleted is kept,
/// while the lifecycle controller goes on tainting and untainting shut-off servers' Nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_node_deletion_keeps_the_nodes_of_deleted_servers() {
    let cloud = shared().await;
    let s = setup(cloud, "keepnodes").await;
    let ids = s.servers(&["gone", "stops"]);
    let (gone, stops) = (s.name("gone"), s.name("stops"));
    s.node(&gone, None, &[]).await;
    s.node(&stops, None, &[]).await;
    let fast = [
        "--node-monitor-period=500ms",
        "--instance-cache-refresh-period=1s",
    ];
    let ccm = s.start_ccm_with_env("", &fast, &[("SKIP_NODE_DELETION", "true")]);
    s.initialized(&gone, &ccm).await;
    s.initialized(&stops, &ccm).await;

    // The deleted server's node is looked at in the same passes that taint and untaint the other.
    s.sim().delete_server(&ids[0]).unwrap();
    s.sim()
        .set_server_status(&ids[1], ServerStatus::Shutoff)
        .unwrap();
    s.until(&stops, "tainted shut down", &ccm, |n| {
        n.is_some_and(|n| has_taint(n, SHUTDOWN))
    })
    .await;
    s.sim()
        .set_server_status(&ids[1], ServerStatus::Active)
        .unwrap();
    s.until(&stops, "untainted", &ccm, |n| {
        n.is_some_and(|n| !has_taint(n, SHUTDOWN))
    })
    .await;
    assert!(
        get_node(&s.admin, &gone).await.unwrap().is_some(),
        "the node of the deleted server was deleted despite SKIP_NODE_DELETION\n{}",
        ccm.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_passes_the_node_scenarios() {
    let cloud = shared().await;
    let s = setup(cloud, "behaviour").await;
    let fixture = OpenStackFixture::new(s.sim().clone(), &s.prefix);
    let ccm = s.start_ccm("", &[]);
    if let Err(e) = behaviour::nodes_join_stop_and_leave(&fixture, &s.admin).await {
        panic!("{e:#}\n--- ccm log ---\n{}", ccm.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_lifecycle_is_prompt_and_cheap_at_the_default_flags() {
    // A cloud of its own: the proxy then counts this CCM's requests alone.
    let cloud = OpenStackEnv::start().await.expect("OpenStack environment");
    let s = setup(&cloud, "defaults").await;
    let fixture = OpenStackFixture::new(s.sim().clone(), &s.prefix)
        .counting_at(cloud.proxy_control().endpoint);
    let ccm = s.start_ccm_at_defaults("", &[]);
    match behaviour::lifecycle_is_prompt_and_cheap(&fixture, &s.admin).await {
        Ok(cost) => eprintln!("OpenStack lifecycle at the default flags: {cost:?}"),
        Err(e) => panic!(
            "{e:#}\n--- requests ---\n{:?}\n--- ccm log ---\n{}",
            cloud.request_counts().await,
            ccm.log()
        ),
    }
}

/// How long Nova answers 503 in [`nova_outage_deletes_nothing_and_converges_after`].
const OUTAGE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nova_outage_deletes_nothing_and_converges_after() {
    let cloud = OpenStackEnv::start().await.expect("OpenStack environment");
    let s = setup(&cloud, "outage").await;
    let ids = s.servers(&["keeps", "goes"]);
    let (keeps, goes, late) = (s.name("keeps"), s.name("goes"), s.name("late"));
    s.node(&keeps, None, &[]).await;
    s.node(&goes, Some(&provider_id(&ids[1])), &[]).await;
    let ccm = s.start_ccm("", &[]);
    s.initialized(&keeps, &ccm).await;
    s.initialized(&goes, &ccm).await;

    cloud
        .set_faults(&[Fault {
            service: Some("compute".into()),
            action: None,
            kind: FaultKind::ServerError { status: 503 },
            rate: 1.0,
        }])
        .await
        .unwrap();
    let outage_end = Instant::now() + OUTAGE;
    cloud.reset_request_counts().await.unwrap();
    // While Nova is down a server goes and another comes with its node.
    s.sim().delete_server(&ids[1]).unwrap();
    s.servers(&["late"]);
    s.node(&late, None, &[]).await;

    let warning = wait_for("a Warning Event on the late node", WAIT, || async {
        let events = kube_fixture::node_events(&s.admin, &late).await?;
        Ok(events
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning")))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    let reason = warning.reason.clone().unwrap_or_default();
    assert!(reason.starts_with("FailedToInitialize"), "{warning:?}");

    // The outage window is the scenario: watch every node stay until it ends.
    while Instant::now() < outage_end {
        for name in [&keeps, &goes, &late] {
            assert!(
                get_node(&s.admin, name).await.unwrap().is_some(),
                "node {name} deleted while Nova answered 503\n{}",
                ccm.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let counts = cloud.request_counts().await.unwrap();
    let nova: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("compute:"))
        .map(|(_, v)| v)
        .sum();
    assert!(nova > 0, "the CCM kept asking Nova: {counts:?}");
    let late_node = get_node(&s.admin, &late).await.unwrap().unwrap();
    assert!(has_taint(&late_node, kube_fixture::UNINITIALIZED));

    cloud.set_faults(&[]).await.unwrap();
    let recovered = Instant::now();
    s.until(&goes, "deleted after the outage", &ccm, |n| n.is_none())
        .await;
    let node = s.initialized(&late, &ccm).await;
    assert_eq!(
        provider_id_of(&node),
        s.sim()
            .server_id(&late)
            .map(|id| provider_id(&id))
            .as_deref()
    );
    assert!(get_node(&s.admin, &keeps).await.unwrap().is_some());
    eprintln!(
        "converged {:.1}s after Nova recovered; {nova} Nova requests during the {}s outage",
        recovered.elapsed().as_secs_f64(),
        OUTAGE.as_secs()
    );
}

/// Keystone's token lifetime in [`tokens_expire_and_the_ccm_authenticates_again`].
const TOKEN_LIFETIME: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_expire_and_the_ccm_authenticates_again() {
    let cloud = OpenStackEnv::start_with(OpenStackOptions {
        token_expiration: TOKEN_LIFETIME,
        ..OpenStackOptions::default()
    })
    .await
    .expect("OpenStack environment with short tokens");
    let s: Setup<'_> = setup(&cloud, "tokens").await;
    let ids = s.servers(&["a", "b"]);
    let (a, b) = (s.name("a"), s.name("b"));
    s.node(&a, None, &[]).await;
    let ccm = s.start_ccm("", &[]);
    s.initialized(&a, &ccm).await;

    // The view lists every second; let at least two tokens expire under it.
    let tokens = |counts: &std::collections::BTreeMap<String, u64>| {
        counts
            .get("identity:POST /v3/auth/tokens")
            .copied()
            .unwrap_or(0)
    };
    wait_for("two re-authentications", WAIT, || async {
        let counts = cloud.request_counts().await?;
        Ok((tokens(&counts) >= 3).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));

    // Work after the re-authentications: a new node initialised, a server shut off.
    s.node(&b, None, &[]).await;
    s.initialized(&b, &ccm).await;
    s.sim()
        .set_server_status(&ids[0], ServerStatus::Shutoff)
        .unwrap();
    s.until(&a, "tainted shut down", &ccm, |n| {
        n.is_some_and(|n| has_taint(n, SHUTDOWN))
    })
    .await;

    let log = ccm.log();
    assert!(
        failure_lines(&log).is_empty(),
        "no reconcile failed across token expiries: {:#?}",
        failure_lines(&log)
    );
    let counts = cloud.request_counts().await.unwrap();
    let lists = counts
        .get("compute:GET /servers/detail")
        .copied()
        .unwrap_or(0);
    assert!(
        lists >= 5,
        "the view kept listing through the expiries: {counts:?}"
    );
}
