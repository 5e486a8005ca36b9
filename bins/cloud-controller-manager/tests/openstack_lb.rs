//! The OpenStack service and route controllers against a real kube-apiserver, real Keystone and
//! the Octavia/Neutron simulators, the CCM running as the shipped RBAC identity: OCCM-named load
//! balancers created, updated (annotations, nodes) and deleted with zero Octavia or Neutron
//! objects left; user floating IPs untouched; a stalled PENDING load balancer blocking nobody;
//! ERROR recreated once; 503s retried without duplicates; pod routes on the router.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_openstack_sim::{LbCounts, ServerSpec, SimHandle};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::kube_fixture;
use stratus_scenarios::service_fixture::{
    create_lb_service, delete_node, delete_service, events_about, get_service, patch_service,
};
use stratus_scenarios::wait_for;
use stratus_testenv::proxy::{Fault, FaultKind};
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};
use tokio::time::Instant;

const NS: &str = "default";
const CLUSTER: &str = "oslb";
const WAIT: Duration = Duration::from_secs(60);
const P: &str = "loadbalancer.openstack.org/";

struct Os {
    cluster: KubeCluster,
    cloud: OpenStackEnv,
    admin: kube::Client,
    /// Server ids by node name.
    nodes: BTreeMap<String, String>,
}

fn sim(os: &Os) -> &SimHandle {
    os.cloud.sim().expect("in-process simulator")
}

async fn setup(nodes: usize) -> Os {
    let (cluster, cloud) = tokio::join!(KubeCluster::start(), OpenStackEnv::start());
    let (cluster, cloud) = (cluster.expect("cluster"), cloud.expect("openstack"));
    let admin = cluster.kube_client(Identity::Admin).await.expect("admin");
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("rbac");
    let mut os = Os {
        cluster,
        cloud,
        admin,
        nodes: BTreeMap::new(),
    };
    os.add_nodes(nodes).await;
    os
}

impl Os {
    /// Servers in the simulator and matching Ready Nodes with their InternalIP and a pod CIDR.
    async fn add_nodes(&mut self, n: usize) -> Vec<String> {
        let first = self.nodes.len();
        let specs: Vec<ServerSpec> = (first..first + n)
            .map(|i| ServerSpec::active(format!("node-{i}")))
            .collect();
        let ids = sim(self).create_servers(&specs).expect("servers");
        let mut names = Vec::new();
        for (i, id) in (first..).zip(ids) {
            let name = format!("node-{i}");
            let ip = sim(self)
                .ports()
                .into_iter()
                .find(|p| p["device_id"] == id.as_str())
                .and_then(|p| p["fixed_ips"][0]["ip_address"].as_str().map(str::to_owned))
                .expect("server port");
            create_node(
                &self.admin,
                &name,
                &format!("openstack:///{id}"),
                &ip,
                &format!("10.244.{i}.0/24"),
            )
            .await;
            self.nodes.insert(name.clone(), id);
            names.push(name);
        }
        names
    }

    fn cloud_conf(&self, extra: &str) -> std::path::PathBuf {
        let network = sim(self).network_id("stratus-internal").unwrap();
        let subnet = sim(self)
            .ports()
            .iter()
            .find(|p| p["network_id"] == network.as_str())
            .and_then(|p| p["fixed_ips"][0]["subnet_id"].as_str().map(str::to_owned))
            .expect("a port on the tenant subnet");
        let public = sim(self).network_id("public").unwrap();
        let text = format!(
            "{}\n[LoadBalancer]\nsubnet-id = {subnet}\nfloating-network-id = {public}\n{extra}\n",
            self.cloud.cloud_conf()
        );
        let path = self
            .cluster
            .dir()
            .join(format!("cloud-{}.conf", self.nodes.len()));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn ccm(&self, controllers: &str, extra_conf: &str, args: &[&str]) -> CcmProcess {
        let conf = self.cloud_conf(extra_conf);
        let mut all: Vec<String> = vec![
            "--cloud-provider=openstack".into(),
            format!("--cloud-config={}", conf.display()),
            format!("--cluster-name={CLUSTER}"),
            format!("--controllers={controllers}"),
            "--leader-elect-lease-duration=2s".into(),
            "--leader-elect-renew-deadline=1500ms".into(),
            "--leader-elect-retry-period=500ms".into(),
            "--v=4".into(),
        ];
        all.extend(args.iter().map(|s| s.to_string()));
        CcmProcess::start_on(
            std::path::Path::new(env!("CARGO_BIN_EXE_cloud-controller-manager")),
            &self.cluster,
            Vec::new(),
            &all,
        )
        .expect("start ccm")
    }

    async fn wait_ingress(&self, name: &str) -> (Service, String) {
        let svc = wait_for(&format!("ingress of {name}"), WAIT, || async {
            Ok(get_service(&self.admin, NS, name)
                .await?
                .filter(|s| ingress(s).is_some()))
        })
        .await
        .unwrap();
        let ip = ingress(&svc).unwrap();
        (svc, ip)
    }

    async fn wait_counts(&self, what: &str, want: impl Fn(&LbCounts) -> bool) {
        let waited = wait_for(what, WAIT, || async {
            let c = sim(self).lb_counts();
            Ok(want(&c).then_some(()))
        })
        .await;
        if let Err(e) = waited {
            panic!("{e}: {:?}", sim(self).lb_counts());
        }
    }
}

fn ingress(svc: &Service) -> Option<String> {
    let i = svc
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?;
    i.ip.clone().or_else(|| i.hostname.clone())
}

async fn create_node(
    admin: &kube::Client,
    name: &str,
    provider_id: &str,
    ip: &str,
    pod_cidr: &str,
) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let node = Node {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.into()),
            pod_cidr: Some(pod_cidr.into()),
            pod_cidrs: Some(vec![pod_cidr.into()]),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = NodeStatus {
        addresses: Some(vec![NodeAddress {
            type_: "InternalIP".into(),
            address: ip.into(),
        }]),
        conditions: Some(vec![k8s_openapi::api::core::v1::NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..NodeStatus::default()
    };
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
}

fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| {
            let key = if k.contains('/') {
                k.to_string()
            } else {
                format!("{P}{k}")
            };
            (key, v.to_string())
        })
        .collect()
}

fn lb_named<'a>(lbs: &'a [serde_json::Value], name: &str) -> Option<&'a serde_json::Value> {
    lbs.iter().find(|l| l["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octavia_load_balancers_are_created_updated_and_deleted_without_leaks() {
    let mut os = setup(2).await;
    let _ccm = os.ccm("service", "", &["--node-monitor-period=500ms"]);
    let user_fip = sim(&os).create_floating_ip("a user's address").unwrap();

    create_lb_service(
        &os.admin,
        NS,
        "web",
        &[80, 443],
        ann(&[
            ("enable-health-monitor", "true"),
            ("timeout-client-data", "60000"),
        ]),
    )
    .await
    .unwrap();
    let (svc, address) = os.wait_ingress("web").await;
    let lb_name = format!("kube_service_{CLUSTER}_{NS}_web");
    let lbs = sim(&os).load_balancers();
    let lb = lb_named(&lbs, &lb_name)
        .expect("OCCM-named load balancer")
        .clone();
    assert_eq!(lb["tags"], json!([lb_name]));
    assert_eq!(lb["provisioning_status"], "ACTIVE");
    let listeners = sim(&os).listeners();
    let mut names: Vec<&str> = listeners
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("listener_0_{lb_name}"),
            format!("listener_1_{lb_name}")
        ]
    );
    assert!(listeners.iter().all(|l| l["timeout_client_data"] == 60000));
    let node_ports: Vec<i64> = svc
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| i64::from(p.node_port.unwrap()))
        .collect();
    let members = sim(&os).members();
    assert_eq!(members.len(), 4, "2 nodes x 2 ports");
    assert!(members
        .iter()
        .all(|m| node_ports.contains(&m["protocol_port"].as_i64().unwrap())));
    assert_eq!(sim(&os).monitors().len(), 2);
    let fips = sim(&os).floating_ips();
    let ours = fips
        .iter()
        .find(|f| f["floating_ip_address"] == address.as_str())
        .expect("the ingress is a floating IP");
    assert_eq!(
        ours["description"],
        format!("Floating IP for Kubernetes external service {NS}/web from cluster {CLUSTER}")
    );
    assert_eq!(ours["port_id"], lb["vip_port_id"]);

    // An annotation change: one pool update.
    patch_service(
        &os.admin,
        NS,
        "web",
        json!({"metadata": {"annotations": {format!("{P}lb-method"): "SOURCE_IP"}}}),
    )
    .await
    .unwrap();
    wait_for("pools use SOURCE_IP", WAIT, || async {
        let pools = sim(&os).pools();
        Ok(
            (pools.len() == 2 && pools.iter().all(|p| p["lb_algorithm"] == "SOURCE_IP"))
                .then_some(()),
        )
    })
    .await
    .unwrap();

    // A node more: members follow through the batch update.
    sim(&os).set_lb_delay(Duration::from_millis(100));
    os.cloud.reset_request_counts().await.unwrap();
    os.add_nodes(1).await;
    wait_for("6 members", WAIT, || async {
        Ok((sim(&os).members().len() == 6).then_some(()))
    })
    .await
    .unwrap();
    let counts = os.cloud.request_counts().await.unwrap();
    let batches = counts
        .get("load-balancer:PUT /lbaas/pools/{id}/members")
        .copied()
        .unwrap_or(0);
    assert!(
        batches <= 4,
        "batch member updates per pool, not per member: {counts:?}"
    );

    // A bad annotation: a Warning Event, nothing changed.
    let before = sim(&os).pools();
    patch_service(
        &os.admin,
        NS,
        "web",
        json!({"metadata": {"annotations": {format!("{P}lb-method"): "RANDOM"}}}),
    )
    .await
    .unwrap();
    wait_for("warning about lb-method", WAIT, || async {
        let events = events_about(&os.admin, "Service", "web").await?;
        Ok(events
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.note.as_deref().is_some_and(|n| n.contains("lb-method"))
            })
            .then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(sim(&os).pools(), before, "nothing changed");

    // A Service on a user's floating IP: used, then left alone.
    create_lb_service(
        &os.admin,
        NS,
        "own-ip",
        &[8080],
        ann(&[("load-balancer-address", &user_fip.1)]),
    )
    .await
    .unwrap();
    let (_, own) = os.wait_ingress("own-ip").await;
    assert_eq!(own, user_fip.1);

    delete_service(&os.admin, NS, "web").await.unwrap();
    delete_service(&os.admin, NS, "own-ip").await.unwrap();
    os.wait_counts("zero load-balancer objects", |c| {
        c.load_balancers == 0
            && c.listeners == 0
            && c.pools == 0
            && c.members == 0
            && c.monitors == 0
            && c.floating_ips == 1
    })
    .await;
    let left = sim(&os).floating_ips();
    assert_eq!(
        left[0]["id"],
        user_fip.0.as_str(),
        "the user's floating IP is kept"
    );
    assert!(left[0]["port_id"].is_null(), "and detached");
    wait_for("services gone", WAIT, || async {
        Ok(get_service(&os.admin, NS, "web")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_stalls_block_nobody_errors_are_recreated_once_and_503s_make_no_duplicates() {
    let os = setup(2).await;
    sim(&os).set_lb_delay(Duration::from_millis(300));
    let _ccm = os.ccm("service", "", &[]);

    // A load balancer stuck in PENDING_CREATE.
    sim(&os).stall_transitions(true);
    create_lb_service(&os.admin, NS, "stuck", &[80], BTreeMap::new())
        .await
        .unwrap();
    os.wait_counts("the stuck load balancer exists", |c| c.load_balancers == 1)
        .await;
    sim(&os).stall_transitions(false);

    // Others still converge meanwhile.
    for name in ["free-a", "free-b"] {
        create_lb_service(&os.admin, NS, name, &[80], BTreeMap::new())
            .await
            .unwrap();
    }
    os.wait_ingress("free-a").await;
    os.wait_ingress("free-b").await;
    assert!(ingress(&get_service(&os.admin, NS, "stuck").await.unwrap().unwrap()).is_none());

    // Released: the ingress follows within about a second.
    let released = Instant::now();
    sim(&os).release_stalled();
    os.wait_ingress("stuck").await;
    let took = released.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "ingress {took:?} after ACTIVE"
    );

    // ERROR: deleted and made again, once.
    os.cloud.reset_request_counts().await.unwrap();
    sim(&os).stall_transitions(true);
    create_lb_service(&os.admin, NS, "broken", &[80], BTreeMap::new())
        .await
        .unwrap();
    let name = format!("kube_service_{CLUSTER}_{NS}_broken");
    let broken = wait_for("the broken load balancer exists", WAIT, || async {
        let lbs = sim(&os).load_balancers();
        Ok(lb_named(&lbs, &name).and_then(|l| l["id"].as_str().map(str::to_owned)))
    })
    .await
    .unwrap();
    sim(&os).stall_transitions(false);
    sim(&os).set_lb_status(&broken, "ERROR");
    os.wait_ingress("broken").await;
    let counts = os.cloud.request_counts().await.unwrap();
    assert_eq!(
        counts.get("load-balancer:POST /lbaas/loadbalancers"),
        Some(&2),
        "{counts:?}"
    );
    assert_eq!(
        counts.get("load-balancer:DELETE /lbaas/loadbalancers/{id}"),
        Some(&1),
        "{counts:?}"
    );

    // 503s and 409s on the way: retried, never duplicated.
    sim(&os).inject_lb_conflicts(2);
    os.cloud
        .set_faults(&[Fault {
            service: Some("load-balancer".into()),
            action: None,
            kind: FaultKind::ServerError { status: 503 },
            rate: 0.3,
        }])
        .await
        .unwrap();
    for i in 0..4 {
        create_lb_service(&os.admin, NS, &format!("flaky-{i}"), &[80], BTreeMap::new())
            .await
            .unwrap();
    }
    for i in 0..4 {
        os.wait_ingress(&format!("flaky-{i}")).await;
    }
    os.cloud.set_faults(&[]).await.unwrap();
    let lbs = sim(&os).load_balancers();
    assert_eq!(
        lbs.len(),
        8,
        "one load balancer per Service: {:?}",
        lbs.iter().map(|l| &l["name"]).collect::<Vec<_>>()
    );
    assert_eq!(
        sim(&os).floating_ips().len(),
        8,
        "one floating IP per Service"
    );

    for name in [
        "stuck", "free-a", "free-b", "broken", "flaky-0", "flaky-1", "flaky-2", "flaky-3",
    ] {
        delete_service(&os.admin, NS, name).await.unwrap();
    }
    os.wait_counts("everything deleted", |c| {
        c.load_balancers == 0
            && c.listeners == 0
            && c.pools == 0
            && c.members == 0
            && c.floating_ips == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_routes_follow_nodes_on_the_router() {
    let os = setup(2).await;
    let router = sim(&os).router_id("stratus-router").unwrap();
    // Routes we do not own: outside the cluster CIDR, and inside it to no node.
    sim(&os).add_router_route(&router, "192.168.50.0/24", "10.0.0.1");
    let interface = sim(&os).create_port("network:router_interface").unwrap();
    sim(&os).add_router_route(&router, "10.244.99.0/24", &interface);
    let _ccm = os.ccm(
        "route",
        &format!("[Route]\nrouter-id = {router}"),
        &[
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=1s",
        ],
    );
    let node_ip = |name: &str| {
        let id = &os.nodes[name];
        sim(&os)
            .ports()
            .into_iter()
            .find(|p| p["device_id"] == id.as_str())
            .unwrap()["fixed_ips"][0]["ip_address"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let want = |names: &[&str]| {
        let mut v: Vec<(String, String)> = names
            .iter()
            .map(|n| {
                let i = n.trim_start_matches("node-");
                (format!("10.244.{i}.0/24"), node_ip(n))
            })
            .collect();
        v.extend([
            ("192.168.50.0/24".to_owned(), "10.0.0.1".to_owned()),
            ("10.244.99.0/24".to_owned(), interface.clone()),
        ]);
        v.sort();
        v
    };
    let routes = |_: ()| {
        let mut r = sim(&os).router_routes(&router);
        r.sort();
        r
    };
    let both = want(&["node-0", "node-1"]);
    wait_for("a route per node", WAIT, || async {
        Ok((routes(()) == both).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", routes(())));
    let port = sim(&os)
        .ports()
        .into_iter()
        .find(|p| p["device_id"] == os.nodes["node-0"].as_str())
        .unwrap();
    assert_eq!(
        port["allowed_address_pairs"],
        json!([{"ip_address": "10.244.0.0/24"}])
    );

    delete_node(&os.admin, "node-1").await.unwrap();
    let one = want(&["node-0"]);
    wait_for("the gone node's route removed", WAIT, || async {
        Ok((routes(()) == one).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", routes(())));
}
