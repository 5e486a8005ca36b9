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
use stratus_scenarios::service_fixture::{
    create_lb_service, delete_node, delete_service, events_about, get_service, patch_service,
};
use stratus_scenarios::wait_for;
use stratus_scenarios::{kube_fixture, openstack_fixture};
use stratus_testenv::{Fault, FaultKind};
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
        let text = format!(
            "{}{extra}\n",
            openstack_fixture::with_load_balancer_section(sim(self), &self.cloud.cloud_conf())
                .expect("the simulators' networks")
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
    stratus_scenarios::service_fixture::ingress_address(svc)
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

/// The security group of a Service (`manage-security-groups`), by OCCM's name.
fn group_of(os: &Os, svc: &Service) -> Option<serde_json::Value> {
    let name = format!(
        "lb-sg-{}-{NS}-{}",
        svc.metadata.uid.as_deref().unwrap(),
        svc.metadata.name.as_deref().unwrap()
    );
    sim(os)
        .security_groups()
        .into_iter()
        .find(|g| g["name"] == name.as_str())
}

/// Ids of the ports holding security group `sg`.
fn ports_holding(os: &Os, sg: &str) -> Vec<String> {
    let mut out: Vec<String> = sim(os)
        .ports()
        .into_iter()
        .filter(|p| {
            p["security_groups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|x| x == sg))
        })
        .filter_map(|p| p["id"].as_str().map(str::to_owned))
        .collect();
    out.sort();
    out
}

/// The ports of the servers behind `nodes`.
fn node_ports(os: &Os, nodes: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = nodes
        .iter()
        .map(|n| {
            sim(os)
                .ports()
                .into_iter()
                .find(|p| p["device_id"] == os.nodes[*n].as_str())
                .and_then(|p| p["id"].as_str().map(str::to_owned))
                .expect("server port")
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_security_groups_open_node_ports_follow_nodes_and_go_with_the_service() {
    let mut os = setup(2).await;
    sim(&os).set_lb_delay(Duration::from_millis(100));
    let _ccm = os.ccm(
        "service",
        "manage-security-groups = true",
        &["--node-monitor-period=500ms"],
    );
    create_lb_service(&os.admin, NS, "web", &[80, 443], BTreeMap::new())
        .await
        .unwrap();
    let (svc, _) = os.wait_ingress("web").await;
    let node_ports_of_svc: Vec<u64> = svc
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| p.node_port.unwrap() as u64)
        .collect();
    let group = wait_for("the Service's security group", WAIT, || async {
        Ok(group_of(&os, &svc))
    })
    .await
    .unwrap();
    assert_eq!(
        group["description"],
        format!("Security Group for {NS}/web Service LoadBalancer in cluster {CLUSTER}")
    );
    let sg = group["id"].as_str().unwrap().to_owned();
    let node_ip: std::net::IpAddr = sim(&os)
        .ports()
        .into_iter()
        .find(|p| p["device_id"] == os.nodes["node-0"].as_str())
        .unwrap()["fixed_ips"][0]["ip_address"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let ingress_rules: Vec<&serde_json::Value> = group["security_group_rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["direction"] == "ingress")
        .collect();
    assert_eq!(ingress_rules.len(), 2, "one rule per node port: {group}");
    for r in &ingress_rules {
        assert_eq!(r["protocol"], "tcp");
        assert_eq!(r["port_range_min"], r["port_range_max"]);
        assert!(node_ports_of_svc.contains(&r["port_range_min"].as_u64().unwrap()));
        let from = stratus_cloud::Cidr::parse(r["remote_ip_prefix"].as_str().unwrap()).unwrap();
        assert!(from.contains_ip(node_ip), "from the member subnet: {r}");
    }
    assert_eq!(
        group["security_group_rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["direction"] == "egress")
            .count(),
        2,
        "Neutron's egress rules are left alone"
    );
    wait_for("the group on both member ports", WAIT, || async {
        Ok((ports_holding(&os, &sg) == node_ports(&os, &["node-0", "node-1"])).then_some(()))
    })
    .await
    .unwrap();

    // A node joins: its port gets the group; a node leaves: its port loses it.
    os.add_nodes(1).await;
    wait_for("the group on the new node's port", WAIT, || async {
        Ok(
            (ports_holding(&os, &sg) == node_ports(&os, &["node-0", "node-1", "node-2"]))
                .then_some(()),
        )
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", ports_holding(&os, &sg)));
    delete_node(&os.admin, "node-1").await.unwrap();
    wait_for("the group off the gone node's port", WAIT, || async {
        Ok((ports_holding(&os, &sg) == node_ports(&os, &["node-0", "node-2"])).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", ports_holding(&os, &sg)));

    delete_service(&os.admin, NS, "web").await.unwrap();
    os.wait_counts("no load balancer and no security group left", |c| {
        c.load_balancers == 0 && c.security_groups == 0 && c.floating_ips == 0
    })
    .await;
    assert!(
        ports_holding(&os, &sg).is_empty(),
        "no port refers to the group"
    );
}

/// The tenant subnet the nodes' ports are on.
fn tenant_subnet(os: &Os) -> String {
    let network = sim(os).network_id("stratus-internal").unwrap();
    sim(os)
        .ports()
        .iter()
        .find(|p| p["network_id"] == network.as_str())
        .and_then(|p| p["fixed_ips"][0]["subnet_id"].as_str().map(str::to_owned))
        .expect("a port on the tenant subnet")
}

/// A node's InternalIP (its server's first fixed IP).
fn node_address(os: &Os, node: &str) -> String {
    sim(os)
        .ports()
        .into_iter()
        .find(|p| p["device_id"] == os.nodes[node].as_str())
        .and_then(|p| p["fixed_ips"][0]["ip_address"].as_str().map(str::to_owned))
        .expect("server port")
}

/// Requests that changed something in Octavia or Neutron, by `service:METHOD path`.
fn mutations(counts: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    counts
        .iter()
        .filter(|(k, _)| {
            (k.starts_with("load-balancer:") || k.starts_with("network:")) && !k.contains(":GET ")
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_made_by_occm_is_adopted_as_it_is() {
    let os = setup(2).await;
    sim(&os).set_lb_delay(Duration::from_millis(100));
    // The Service exists and OCCM made its load balancer, members and floating IP, with OCCM's
    // names, tags and description; then the cluster switches to Stratus.
    create_lb_service(&os.admin, NS, "legacy", &[80, 443], BTreeMap::new())
        .await
        .unwrap();
    let svc = get_service(&os.admin, NS, "legacy").await.unwrap().unwrap();
    let name = format!("kube_service_{CLUSTER}_{NS}_legacy");
    let listeners: Vec<serde_json::Value> = svc
        .spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let members: Vec<serde_json::Value> = os
                .nodes
                .keys()
                .map(|n| {
                    json!({"name": n, "address": node_address(&os, n),
                        "protocol_port": p.node_port.unwrap()})
                })
                .collect();
            json!({"name": format!("listener_{i}_{name}"), "protocol": "TCP",
                "protocol_port": p.port, "connection_limit": -1, "tags": [name],
                "default_pool": {"name": format!("pool_{i}_{name}"), "protocol": "TCP",
                    "lb_algorithm": "ROUND_ROBIN", "members": members}})
        })
        .collect();
    let lb = sim(&os)
        .create_load_balancer(&json!({"loadbalancer": {
            "name": name, "provider": "amphora", "tags": [name],
            "description": format!("Kubernetes external service {NS}/legacy from cluster {CLUSTER}"),
            "vip_subnet_id": tenant_subnet(&os), "listeners": listeners}}))
        .await
        .expect("OCCM's load balancer");
    let lb_id = lb["id"].as_str().unwrap().to_owned();
    let (fip, address) = sim(&os)
        .create_floating_ip(&format!(
            "Floating IP for Kubernetes external service {NS}/legacy from cluster {CLUSTER}"
        ))
        .unwrap();
    sim(&os)
        .attach_floating_ip(&fip, lb["vip_port_id"].as_str().unwrap())
        .unwrap();
    wait_for("OCCM's load balancer ACTIVE", WAIT, || async {
        Ok((sim(&os).lb_status(&lb_id).as_deref() == Some("ACTIVE")).then_some(()))
    })
    .await
    .unwrap();
    let before = sim(&os).lb_counts();

    os.cloud.reset_request_counts().await.unwrap();
    let ccm = os.ccm("service", "", &[]);
    let (_, ingress) = os.wait_ingress("legacy").await;
    assert_eq!(ingress, address, "OCCM's floating IP is the ingress");
    let lbs = sim(&os).load_balancers();
    assert_eq!(lbs.len(), 1, "no second load balancer");
    assert_eq!(lbs[0]["id"], lb_id.as_str(), "the same load balancer");
    assert_eq!(sim(&os).lb_counts(), before, "nothing added or removed");
    let counts = os.cloud.request_counts().await.unwrap();
    assert_eq!(
        mutations(&counts),
        vec![],
        "adoption changes nothing in the cloud: {counts:?}\n--- ccm log ---\n{}",
        ccm.log()
    );

    // OCCM's floating IP carries OCCM's description, so it goes with the Service.
    delete_service(&os.admin, NS, "legacy").await.unwrap();
    os.wait_counts("OCCM's load balancer and floating IP deleted", |c| {
        c.load_balancers == 0 && c.listeners == 0 && c.pools == 0 && c.floating_ips == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_twenty_nodes_is_one_batch_member_update_per_pool() {
    let mut os = setup(2).await;
    sim(&os).set_lb_delay(Duration::from_millis(100));
    let _ccm = os.ccm("service", "", &[]);
    create_lb_service(&os.admin, NS, "web", &[80, 443], BTreeMap::new())
        .await
        .unwrap();
    os.wait_ingress("web").await;
    os.wait_counts("2 pools of 2 members", |c| c.members == 4)
        .await;

    os.cloud.reset_request_counts().await.unwrap();
    os.add_nodes(20).await;
    os.wait_counts("22 members in each pool", |c| c.members == 44)
        .await;
    let counts = os.cloud.request_counts().await.unwrap();
    let batches = counts
        .get("load-balancer:PUT /lbaas/pools/{id}/members")
        .copied()
        .unwrap_or(0);
    assert_eq!(batches, 2, "one batch member update per pool: {counts:?}");
    assert_eq!(
        mutations(&counts),
        vec![("load-balancer:PUT /lbaas/pools/{id}/members".to_string(), 2)],
        "no other change: {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_load_balancer_carries_each_services_listeners_and_outlives_its_guests() {
    let os = setup(2).await;
    sim(&os).set_lb_delay(Duration::from_millis(100));
    let _ccm = os.ccm("service", "", &[]);
    create_lb_service(&os.admin, NS, "owner", &[80], BTreeMap::new())
        .await
        .unwrap();
    let (_, address) = os.wait_ingress("owner").await;
    let owner_name = format!("kube_service_{CLUSTER}_{NS}_owner");
    let lb = lb_named(&sim(&os).load_balancers(), &owner_name)
        .unwrap()
        .clone();
    let lb_id = lb["id"].as_str().unwrap().to_owned();

    // A guest joins by id: its listener on the owner's load balancer, the same address.
    create_lb_service(
        &os.admin,
        NS,
        "guest",
        &[8080],
        ann(&[("load-balancer-id", &lb_id)]),
    )
    .await
    .unwrap();
    let (_, guest_address) = os.wait_ingress("guest").await;
    assert_eq!(guest_address, address, "the owner's floating IP");
    let guest_name = format!("kube_service_{CLUSTER}_{NS}_guest");
    let lbs = sim(&os).load_balancers();
    assert_eq!(lbs.len(), 1, "no load balancer of its own");
    assert_eq!(lbs[0]["tags"], json!([owner_name, guest_name]));
    let listeners = sim(&os).listeners();
    assert_eq!(listeners.len(), 2);
    let guest_listener = listeners
        .iter()
        .find(|l| l["protocol_port"] == 8080)
        .expect("the guest's listener");
    assert_eq!(guest_listener["name"], format!("listener_0_{guest_name}"));
    assert_eq!(guest_listener["tags"], json!([guest_name]));
    assert_eq!(sim(&os).floating_ips().len(), 1);

    // max-shared-lb (2) reached: a third Service is refused with a Warning, nothing changes.
    create_lb_service(
        &os.admin,
        NS,
        "third",
        &[9090],
        ann(&[("load-balancer-id", &lb_id)]),
    )
    .await
    .unwrap();
    wait_for("a warning about sharing", WAIT, || async {
        let events = events_about(&os.admin, "Service", "third").await?;
        Ok(events
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("already shared with 2 Services"))
            })
            .then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(sim(&os).listeners().len(), 2);
    delete_service(&os.admin, NS, "third").await.unwrap();

    // The guest leaves: only its listener and pool go.
    delete_service(&os.admin, NS, "guest").await.unwrap();
    os.wait_counts("the guest's listener and pool gone", |c| {
        c.load_balancers == 1 && c.listeners == 1 && c.pools == 1 && c.floating_ips == 1
    })
    .await;
    wait_for("the guest's tag gone", WAIT, || async {
        Ok((sim(&os).load_balancers()[0]["tags"] == json!([owner_name])).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(sim(&os).listeners()[0]["protocol_port"], 80);
    let (_, still) = os.wait_ingress("owner").await;
    assert_eq!(still, address);

    delete_service(&os.admin, NS, "owner").await.unwrap();
    os.wait_counts("nothing left", |c| {
        c.load_balancers == 0 && c.listeners == 0 && c.pools == 0 && c.floating_ips == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vip_port_and_floating_subnets_chosen_by_name_or_tags() {
    let os = setup(1).await;
    sim(&os).set_lb_delay(Duration::from_millis(100));
    let public = sim(&os).network_id("public").unwrap();
    sim(&os)
        .add_subnet(&public, "public-b", "198.51.100.0/24", &["lb", "b"])
        .unwrap();
    sim(&os)
        .add_subnet(&public, "public-c", "203.0.113.0/24", &["c"])
        .unwrap();
    let vip_address = sim(&os).create_port("").unwrap();
    let vip_port = sim(&os)
        .ports()
        .into_iter()
        .find(|p| p["fixed_ips"][0]["ip_address"] == vip_address.as_str())
        .and_then(|p| p["id"].as_str().map(str::to_owned))
        .unwrap();
    let _ccm = os.ccm("service", "", &[]);

    create_lb_service(
        &os.admin,
        NS,
        "on-port",
        &[80],
        ann(&[("port-id", &vip_port), ("floating-subnet", "public-?")]),
    )
    .await
    .unwrap();
    create_lb_service(
        &os.admin,
        NS,
        "by-tags",
        &[80],
        ann(&[("floating-subnet-tags", "c")]),
    )
    .await
    .unwrap();
    let (_, by_name) = os.wait_ingress("on-port").await;
    let (_, by_tags) = os.wait_ingress("by-tags").await;
    let lbs = sim(&os).load_balancers();
    let lb = lb_named(&lbs, &format!("kube_service_{CLUSTER}_{NS}_on-port")).unwrap();
    assert_eq!(lb["vip_port_id"], vip_port.as_str(), "the given VIP port");
    assert_eq!(lb["vip_address"], vip_address.as_str());
    // `public-?` matches public-b and public-c, not the seeded public subnet: the first match.
    assert!(
        by_name.starts_with("198.51.100.") || by_name.starts_with("203.0.113."),
        "{by_name}"
    );
    assert!(by_tags.starts_with("203.0.113."), "tagged c: {by_tags}");

    delete_service(&os.admin, NS, "on-port").await.unwrap();
    delete_service(&os.admin, NS, "by-tags").await.unwrap();
    os.wait_counts("load balancers and their floating IPs gone", |c| {
        c.load_balancers == 0 && c.floating_ips == 0
    })
    .await;
    let port = sim(&os).port(&vip_port).expect("the user's port is kept");
    assert_eq!(port["device_id"], "", "and released");
}

/// A write the audit log recorded, as `(verb, group, resource)`.
type WriteKey = (String, String, String);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openstack_ccm_makes_every_write_the_shipped_role_grants_and_no_other() {
    use stratus_testenv::core::rbac_required::REQUIRED;
    let os = setup(2).await;
    sim(&os).set_lb_delay(Duration::from_millis(100));
    let router = sim(&os).router_id("stratus-router").unwrap();
    // A node the cloud-node controller initialises (patch nodes, patch nodes/status).
    let fresh = sim(&os)
        .create_servers(&[ServerSpec::active("fresh")])
        .unwrap()
        .remove(0);
    stratus_scenarios::kube_fixture::create_uninitialized_node(
        &os.admin,
        "fresh",
        &[],
        BTreeMap::new(),
    )
    .await
    .unwrap();
    kube::Api::<Node>::all(os.admin.clone())
        .patch(
            "fresh",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": format!("openstack:///{fresh}")}})),
        )
        .await
        .unwrap();
    let ccm = os.ccm(
        "cloud-node,cloud-node-lifecycle,service,route",
        &format!("[Route]\nrouter-id = {router}"),
        &[
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=1s",
            "--node-monitor-period=500ms",
        ],
    );
    // A Warning repeated (create, then patch, events), then fixed (patch services/status).
    create_lb_service(&os.admin, NS, "web", &[80], ann(&[("lb-method", "RANDOM")]))
        .await
        .unwrap();
    // A server gone and its Node NotReady: the Node is deleted (delete nodes).
    sim(&os).delete_server(&os.nodes["node-1"]).unwrap();
    stratus_scenarios::service_fixture::set_ready(&os.admin, "node-1", false)
        .await
        .unwrap();

    let user = Identity::CloudControllerManager.username();
    let key = |w: &stratus_testenv::core::audit::Write| -> WriteKey {
        (w.verb.clone(), w.group.clone(), w.resource.clone())
    };
    // Every write REQUIRED lists, but the service-account ones (made only with
    // --use-service-account-credentials, which the SubjectAccessReview test covers).
    let expected: std::collections::BTreeSet<WriteKey> = REQUIRED
        .iter()
        .filter(|a| {
            ["create", "update", "patch", "delete"].contains(&a.verb)
                && !a.resource.starts_with("serviceaccounts")
        })
        .map(|a| (a.verb.into(), a.group.into(), a.resource.into()))
        .collect();
    let fixed = std::sync::atomic::AtomicBool::new(false);
    let nudged = std::sync::atomic::AtomicBool::new(false);
    let seen = wait_for("every granted write made", WAIT, || async {
        let events = events_about(&os.admin, "Service", "web").await?;
        let repeated = events
            .iter()
            .any(|e| e.series.as_ref().is_some_and(|s| s.count >= 2));
        // A first Event came and did not repeat yet: an unrelated annotation change makes the
        // controller sync again (its request fingerprint covers annotations), so the same
        // Warning is published again as a series (patch events) without waiting for a resync.
        if !events.is_empty() && !repeated && !nudged.load(std::sync::atomic::Ordering::Relaxed) {
            patch_service(
                &os.admin,
                NS,
                "web",
                json!({"metadata": {"annotations": {"example.com/nudge": "1"}}}),
            )
            .await?;
            nudged.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if repeated && !fixed.load(std::sync::atomic::Ordering::Relaxed) {
            patch_service(
                &os.admin,
                NS,
                "web",
                json!({"metadata": {"annotations": {format!("{P}lb-method"): "ROUND_ROBIN"}}}),
            )
            .await?;
            fixed.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let writes = stratus_testenv::core::audit::writes_by(&os.cluster, user)?;
        let seen: std::collections::BTreeSet<WriteKey> = writes.iter().map(key).collect();
        Ok(expected.is_subset(&seen).then_some(writes))
    })
    .await;
    let writes = seen.unwrap_or_else(|e| {
        let now = stratus_testenv::core::audit::writes_by(&os.cluster, user).unwrap();
        panic!(
            "{e}: expected {expected:?}, made {:?}\n--- ccm log ---\n{}",
            now.iter().map(key).collect::<Vec<_>>(),
            ccm.log()
        )
    });
    let all_required: std::collections::BTreeSet<WriteKey> = REQUIRED
        .iter()
        .map(|a| (a.verb.into(), a.group.into(), a.resource.into()))
        .collect();
    for w in &writes {
        assert!(
            all_required.contains(&key(w)),
            "a write the code list does not know: {w:?}"
        );
        assert_ne!(w.code, 403, "denied by the shipped role: {w:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkills_during_a_churn_of_fifty_services_leave_one_load_balancer_each_then_nothing() {
    const N: usize = 50;
    const CHURN_WAIT: Duration = Duration::from_secs(180);
    let os = setup(2).await;
    sim(&os).set_lb_delay(Duration::from_millis(200));
    let user_fip = sim(&os).create_floating_ip("a user's address").unwrap();
    let mut ccm = os.ccm("service", "", &[]);
    let names: Vec<String> = (0..N).map(|i| format!("churn-{i}")).collect();
    let mut kills = 0;
    for (i, name) in names.iter().enumerate() {
        create_lb_service(&os.admin, NS, name, &[80], BTreeMap::new())
            .await
            .unwrap();
        // Killed twice while the load balancers are being made.
        if i == N / 3 || i == 2 * N / 3 {
            os.wait_counts("some load balancers under way", |c| {
                c.load_balancers >= i / 2
            })
            .await;
            ccm.kill();
            kills += 1;
            ccm = os.ccm("service", "", &[]);
        }
    }
    let all_have_ingress = wait_for("an ingress on every Service", CHURN_WAIT, || async {
        for name in &names {
            if get_service(&os.admin, NS, name)
                .await?
                .as_ref()
                .and_then(ingress)
                .is_none()
            {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await;
    if let Err(e) = all_have_ingress {
        panic!(
            "{e}: {:?}\n--- ccm log ---\n{}",
            sim(&os).lb_counts(),
            ccm.log()
        );
    }
    let lbs = sim(&os).load_balancers();
    let mut lb_names: Vec<String> = lbs
        .iter()
        .filter_map(|l| l["name"].as_str().map(str::to_owned))
        .collect();
    lb_names.sort();
    let mut want: Vec<String> = names
        .iter()
        .map(|n| format!("kube_service_{CLUSTER}_{NS}_{n}"))
        .collect();
    want.sort();
    assert_eq!(lb_names, want, "exactly one load balancer per Service");
    assert_eq!(
        sim(&os).floating_ips().len(),
        N + 1,
        "one floating IP per Service, and the user's"
    );

    // Deleted, with one more kill half way.
    for (i, name) in names.iter().enumerate() {
        delete_service(&os.admin, NS, name).await.unwrap();
        if i == N / 2 {
            os.wait_counts("some load balancers deleted", |c| c.load_balancers < N)
                .await;
            ccm.kill();
            kills += 1;
            ccm = os.ccm("service", "", &[]);
        }
    }
    let gone = wait_for("nothing left", CHURN_WAIT, || async {
        let c = sim(&os).lb_counts();
        Ok((c.load_balancers == 0
            && c.listeners == 0
            && c.pools == 0
            && c.members == 0
            && c.monitors == 0
            && c.security_groups == 0
            && c.floating_ips == 1)
            .then_some(()))
    })
    .await;
    if let Err(e) = gone {
        panic!(
            "{e}: {:?}\n--- ccm log ---\n{}",
            sim(&os).lb_counts(),
            ccm.log()
        );
    }
    assert_eq!(kills, 3);
    let left = sim(&os).floating_ips();
    assert_eq!(
        left[0]["id"],
        user_fip.0.as_str(),
        "the user's address kept"
    );
    assert_eq!(left[0]["description"], "a user's address");
}
