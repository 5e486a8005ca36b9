//! Every generic controller driver on the fake cloud and a real apiserver: what each writes, how
//! a Pending answer is waited out without a Warning, and how a provider's re-sync request
//! updates a Service's ingress. No real cloud is involved.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use stratus_cloud::{Cidr, Cloud, NextHop, RouteTarget};
use stratus_cloud_fake::{running, FakeCloud, InstanceState};
use stratus_controllers::informer::NodeInformer;
use stratus_controllers::metrics::ReconcileMetrics;
use stratus_controllers::{node, node_ipam, node_lifecycle, route, service};
use stratus_kube_kit::WatchHealth;
use stratus_scenarios::{kube_fixture, service_fixture, wait_for};
use stratus_testenv::{Identity, KubeCluster};

const WAIT: Duration = Duration::from_secs(30);

/// A cluster, an admin client, a fake cloud, and the controller tasks (aborted on drop).
struct Harness {
    _cluster: KubeCluster,
    admin: kube::Client,
    cloud: Arc<FakeCloud>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Harness {
    async fn start() -> Harness {
        let cluster = KubeCluster::start().await.expect("cluster");
        let admin = cluster.kube_client(Identity::Admin).await.expect("admin");
        Harness {
            _cluster: cluster,
            admin,
            cloud: FakeCloud::new(),
            tasks: Vec::new(),
        }
    }

    fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(tokio::spawn(task));
    }

    async fn node(&self, name: &str) -> Node {
        kube_fixture::get_node(&self.admin, name)
            .await
            .unwrap()
            .expect("node exists")
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn warnings(events: &[k8s_openapi::api::events::v1::Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| e.reason.clone().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn node_controller_initialises_and_waits_out_a_pending_instance_quietly() {
    let mut h = Harness::start().await;
    h.cloud.add_instance(running("f-1", "node-a", "10.0.0.1"));
    let mut starting = running("f-2", "node-b", "10.0.0.2");
    starting.state = InstanceState::Starting;
    h.cloud.add_instance(starting);
    let mut informer = NodeInformer::new(h.admin.clone());
    let metrics = ReconcileMetrics::unregistered("cloud-node");
    h.spawn(node::run(
        h.admin.clone(),
        informer.store(),
        informer.take_events().unwrap(),
        h.cloud.instances().unwrap(),
        node::NodeControllerConfig::default(),
        metrics.clone(),
    ));
    for name in ["node-a", "node-b"] {
        kube_fixture::create_uninitialized_node(&h.admin, name, &[], BTreeMap::new())
            .await
            .unwrap();
    }
    let a = wait_for("node-a initialised", WAIT, || async {
        Ok(kube_fixture::get_node(&h.admin, "node-a")
            .await?
            .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
    })
    .await
    .unwrap();
    assert_eq!(
        a.spec.as_ref().unwrap().provider_id.as_deref(),
        Some("fake:///fake-zone-a/f-1")
    );
    assert_eq!(
        kube_fixture::label(&a, "topology.kubernetes.io/zone"),
        Some("fake-zone-a")
    );
    assert_eq!(
        kube_fixture::label(&a, "node.kubernetes.io/instance-type"),
        Some("fake.large")
    );
    assert!(kube_fixture::addresses(&a).contains(&("InternalIP".into(), "10.0.0.1".into())));

    // The starting instance is asked about again and again, quietly.
    wait_for("node-b looked at three times", WAIT, || async {
        let asked = h
            .cloud
            .calls()
            .iter()
            .filter(|c| c.method == "instance_metadata" && c.subject == "node-b")
            .count();
        Ok((asked >= 3).then_some(()))
    })
    .await
    .unwrap();
    let b = h.node("node-b").await;
    assert!(kube_fixture::has_taint(&b, kube_fixture::UNINITIALIZED));
    let events = kube_fixture::node_events(&h.admin, "node-b").await.unwrap();
    assert!(warnings(&events).is_empty(), "{:?}", warnings(&events));
    assert_eq!(metrics.failures("Pending"), 0, "pending is no failure");

    h.cloud.set_state("f-2", InstanceState::Running);
    wait_for("node-b initialised once running", WAIT, || async {
        Ok(kube_fixture::get_node(&h.admin, "node-b")
            .await?
            .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
    })
    .await
    .unwrap();
    assert!(metrics.reconciles() >= 4);
}

#[tokio::test]
async fn lifecycle_taints_stopped_and_deletes_gone_instances() {
    let mut h = Harness::start().await;
    h.cloud.add_instance(running("f-3", "node-c", "10.0.0.3"));
    h.cloud.add_instance(running("f-4", "node-d", "10.0.0.4"));
    kube_fixture::create_initialized_node(&h.admin, "node-c", "fake:///fake-zone-a/f-3", &[])
        .await
        .unwrap();
    kube_fixture::create_initialized_node(&h.admin, "node-d", "fake:///fake-zone-a/f-4", &[])
        .await
        .unwrap();
    kube_fixture::create_static_node(&h.admin, "on-prem")
        .await
        .unwrap();
    // Deckhouse's static nodes carry `static://` provider IDs: another provider's, not ours.
    kube_fixture::create_initialized_node(&h.admin, "deckhouse-static", "static://", &[])
        .await
        .unwrap();
    let informer = NodeInformer::new(h.admin.clone());
    let store = informer.store();
    h.spawn(async move {
        informer.unclaimed_watch().unwrap().await;
    });
    h.spawn(node_lifecycle::run(
        h.admin.clone(),
        store,
        h.cloud.instances().unwrap(),
        node_lifecycle::LifecycleConfig {
            monitor_period: Duration::from_millis(200),
            provider_scheme: Some("fake".into()),
            ..Default::default()
        },
        ReconcileMetrics::unregistered("cloud-node-lifecycle"),
    ));
    h.cloud.set_state("f-3", InstanceState::Stopped);
    h.cloud.set_state("f-4", InstanceState::Gone);
    wait_for("node-c tainted shut down", WAIT, || async {
        Ok(kube_fixture::get_node(&h.admin, "node-c")
            .await?
            .filter(|n| kube_fixture::has_taint(n, "node.cloudprovider.kubernetes.io/shutdown")))
    })
    .await
    .unwrap();
    wait_for("node-d deleted", WAIT, || async {
        Ok(kube_fixture::get_node(&h.admin, "node-d")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    h.cloud.set_state("f-3", InstanceState::Running);
    wait_for("node-c untainted once running", WAIT, || async {
        Ok(kube_fixture::get_node(&h.admin, "node-c")
            .await?
            .filter(|n| !kube_fixture::has_taint(n, "node.cloudprovider.kubernetes.io/shutdown")))
    })
    .await
    .unwrap();
    assert!(
        kube_fixture::get_node(&h.admin, "on-prem")
            .await
            .unwrap()
            .is_some(),
        "a node that never was the cloud's is left alone"
    );
    assert!(
        kube_fixture::get_node(&h.admin, "deckhouse-static")
            .await
            .unwrap()
            .is_some(),
        "a node of another provider is left alone"
    );
    let asked: Vec<_> = h
        .cloud
        .calls()
        .into_iter()
        .filter(|c| c.subject.split(',').any(|s| s == "deckhouse-static"))
        .collect();
    assert!(
        asked.is_empty(),
        "the cloud was asked about a static node: {asked:?}"
    );
}

async fn ingress_of(admin: &kube::Client, name: &str) -> Option<(Option<String>, Option<String>)> {
    let svc: Service = Api::namespaced(admin.clone(), "default")
        .get(name)
        .await
        .ok()?;
    let first = svc.status?.load_balancer?.ingress?.into_iter().next()?;
    Some((first.hostname, first.ip))
}

#[tokio::test]
async fn service_controller_waits_out_pending_and_follows_resync_requests() {
    let mut h = Harness::start().await;
    service_fixture::create_ready_node(
        &h.admin,
        "worker-1",
        "fake:///fake-zone-a/f-9",
        BTreeMap::new(),
    )
    .await
    .unwrap();
    let informer = NodeInformer::new(h.admin.clone());
    let store = informer.store();
    h.spawn(async move {
        informer.unclaimed_watch().unwrap().await;
    });
    let metrics = ReconcileMetrics::unregistered("service");
    h.spawn(service::run(
        h.admin.clone(),
        store,
        h.cloud.load_balancer().unwrap(),
        service::ServiceControllerConfig {
            concurrency: 4,
            ..Default::default()
        },
        WatchHealth::default(),
        metrics.clone(),
    ));

    // A plain one: ingress from the cloud, targets from the ready node.
    service_fixture::create_lb_service(&h.admin, "default", "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    let ingress = wait_for("web ingress", WAIT, || async {
        Ok(ingress_of(&h.admin, "web").await)
    })
    .await
    .unwrap();
    assert_eq!(ingress.0.as_deref(), Some("web.default.lb.fake.example"));
    let lb = h.cloud.load_balancer_of("default", "web").unwrap();
    assert_eq!(lb.request.nodes.len(), 1);
    assert_eq!(lb.request.nodes[0].provider_id, "fake:///fake-zone-a/f-9");

    // Pending: asked again and again, no Warning, no ingress, then ready.
    h.cloud.hold_pending("default", "slow", true);
    service_fixture::create_lb_service(&h.admin, "default", "slow", &[80], BTreeMap::new())
        .await
        .unwrap();
    wait_for("slow asked three times", WAIT, || async {
        let asked = h
            .cloud
            .calls()
            .iter()
            .filter(|c| c.method == "ensure" && c.subject == "default/slow")
            .count();
        Ok((asked >= 3).then_some(()))
    })
    .await
    .unwrap();
    let events = service_fixture::events_about(&h.admin, "Service", "slow")
        .await
        .unwrap();
    assert!(warnings(&events).is_empty(), "{:?}", warnings(&events));
    let ensuring = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("EnsuringLoadBalancer"))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum::<i32>();
    assert_eq!(ensuring, 1, "one Ensuring event while pending");
    assert!(ingress_of(&h.admin, "slow").await.is_none());
    h.cloud.hold_pending("default", "slow", false);
    wait_for("slow ingress once ready", WAIT, || async {
        Ok(ingress_of(&h.admin, "slow").await)
    })
    .await
    .unwrap();

    // Re-sync: the address appears later in the cloud; the provider asks, the ingress follows
    // at once (the periodic full sync is ten minutes away).
    h.cloud.delay_addresses(true);
    service_fixture::create_lb_service(&h.admin, "default", "later", &[80], BTreeMap::new())
        .await
        .unwrap();
    wait_for("later's load balancer made", WAIT, || async {
        Ok(h.cloud.load_balancer_of("default", "later"))
    })
    .await
    .unwrap();
    assert!(ingress_of(&h.admin, "later").await.is_none());
    h.cloud.publish_ingress("default", "later", "192.0.2.10");
    let ingress = wait_for(
        "later's ingress after the re-sync request",
        Duration::from_secs(5),
        || async { Ok(ingress_of(&h.admin, "later").await) },
    )
    .await
    .unwrap();
    assert_eq!(ingress.1.as_deref(), Some("192.0.2.10"));

    // Deletion removes the load balancer, then the finalizer.
    service_fixture::delete_service(&h.admin, "default", "web")
        .await
        .unwrap();
    wait_for("web's load balancer deleted", WAIT, || async {
        Ok(h.cloud
            .load_balancer_of("default", "web")
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    wait_for("web gone", WAIT, || async {
        Ok(service_fixture::get_service(&h.admin, "default", "web")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(metrics.failures("Pending"), 0);
}

#[tokio::test]
async fn route_and_ipam_controllers_give_nodes_cidrs_and_routes() {
    let mut h = Harness::start().await;
    kube_fixture::create_initialized_node(&h.admin, "node-e", "fake:///fake-zone-a/f-5", &[])
        .await
        .unwrap();
    let cluster: Cidr = "10.244.0.0/16".parse().unwrap();
    let informer = NodeInformer::new(h.admin.clone());
    let (store, changes) = (informer.store(), informer.subscribe());
    let ipam_changes = informer.subscribe();
    h.spawn(async move {
        informer.unclaimed_watch().unwrap().await;
    });
    h.spawn(node_ipam::run(
        h.admin.clone(),
        store.clone(),
        ipam_changes,
        node_ipam::NodeIpamConfig::new(vec![(cluster, 24)]),
        ReconcileMetrics::unregistered("node-ipam"),
    ));
    h.spawn(route::run(
        h.admin.clone(),
        store,
        changes,
        h.cloud.routes().unwrap(),
        route::RouteControllerConfig {
            cluster_cidrs: vec![cluster],
            ..Default::default()
        },
        ReconcileMetrics::unregistered("route"),
    ));
    let node = wait_for("node-e pod CIDR", WAIT, || async {
        Ok(kube_fixture::get_node(&h.admin, "node-e")
            .await?
            .filter(|n| !kube_fixture::pod_cidrs(n).is_empty()))
    })
    .await
    .unwrap();
    let pod_cidr: Cidr = kube_fixture::pod_cidrs(&node)[0].parse().unwrap();
    assert!(cluster.contains(&pod_cidr), "{pod_cidr}");
    wait_for("route to node-e", WAIT, || async {
        Ok(h.cloud.routes_of("rt-main").into_iter().find(|r| {
            r.destination == pod_cidr && r.next_hop == NextHop::Target(RouteTarget("f-5".into()))
        }))
    })
    .await
    .unwrap();
    assert!(h.cloud.count("prepare_target") >= 1);
}
