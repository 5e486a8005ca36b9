//! The OpenStack end-to-end suite on a real node: every component installed with its chart from
//! an image of this build, nothing started by hand but the cloud — a real Keystone and the
//! simulators of Nova, Neutron and Octavia, inside the test's network namespace — where a
//! server named as the node has the node IP.
//!
//! - the cloud-controller-manager chart with Deckhouse's OpenStack arguments: the CCM pod runs
//!   as the chart says (the kubelet counts its liveness and readiness probes passing; the
//!   kernel shows its process non-root, without capabilities or new privileges, on a read-only
//!   root), initialises the kubelet-registered Node from the server, gives it a pod CIDR and
//!   routes that CIDR to the node on the router;
//! - a LoadBalancer Service gets an Octavia load balancer with the node as its member and the
//!   floating IP in its status; deleting the Service deletes both;
//! - the Cinder CSI plugin chart (`openstack/cinder.rs`): a StatefulSet's claim provisioned,
//!   attached to the node's server and staged on a loop device, its data surviving the pod's
//!   deletion, the volume deleted with the claim.
//!
//! A second test (`openstack/module.rs`) installs the same charts as one release, the module
//! chart `cloud-provider-openstack`, with the discoverer and the module controller.

mod cinder;

mod module;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};
use stratus_e2e::openstack::{ccm_values, cloud_conf, node_server, CCM_NAME, FLAVOR, ZONE};
use stratus_e2e::phases::Phases;
use stratus_e2e::{ccm, chart, pods};
use stratus_openstack_sim::SimHandle;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::netns::NODE_IP;
use stratus_testenv::node::{images, netns, RealCluster, NODE_NAME};
use stratus_testenv::OpenStackEnv;

const DEADLINE: Duration = Duration::from_secs(90);
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[test]
fn openstack_module_components_run_as_pods_on_a_real_node() {
    netns::run(|| async {
        let mut phases = Phases::start("openstack_e2e");
        let cloud = OpenStackEnv::start()
            .await
            .expect("Keystone and the simulators");
        let sim = cloud.sim().expect("in-process simulators").clone();
        let server = node_server(&sim).expect("the node's server");
        let conf = cloud_conf(&cloud, &sim, &server).expect("the CCM's cloud.conf");
        phases.mark("cloud_start");
        // The archives (packed, or from the machine's image cache) are imported by the cluster's
        // start.
        let mut images = vec![images::stratus("cloud-controller-manager").unwrap()];
        images.extend(cinder::images());
        phases.mark("images");
        let cluster = RealCluster::start(&images).await.expect("the real cluster");
        println!(
            "{{\"real_cluster_start_seconds\": {:.2}}}",
            cluster.started_in().as_secs_f64()
        );
        phases.mark("cluster_start");
        let client = cluster.client().await.unwrap();
        let ccm_selector = format!("app.kubernetes.io/name={CCM_NAME}");
        let ccm_log = || pods::logs(&client, "kube-system", &ccm_selector);

        // The CCM, from its chart and image, as Deckhouse's module runs it.
        chart::install_with(
            &cluster,
            "cloud-controller-manager",
            "ccm",
            "kube-system",
            &ccm_values(&conf),
        )
        .expect("helm install the CCM chart");
        ccm::runs_as_its_chart_says(&client, &ccm_selector, DEADLINE).await;
        phases.mark("ccm_ready");

        // The kubelet's Node, initialised from the server.
        let nodes: Api<Node> = Api::all(client.clone());
        let provider_id = format!("openstack:///{}", server.id);
        let node = match wait_for("the CCM to initialise the Node", DEADLINE, || {
            initialised(&nodes, &provider_id)
        })
        .await
        {
            Ok(node) => node,
            Err(e) => panic!("{e:#}\n{}", ccm_log().await),
        };
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let label = |key: &str| labels.get(key).map(String::as_str);
        assert_eq!(label("topology.kubernetes.io/zone"), Some(ZONE));
        assert_eq!(label("node.kubernetes.io/instance-type"), Some(FLAVOR));
        let addresses = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default();
        assert!(
            addresses
                .iter()
                .any(|a| a.type_ == "InternalIP" && a.address == NODE_IP.to_string()),
            "the server's fixed IP is the Node's InternalIP: {addresses:?}"
        );
        phases.mark("node_initialised");

        // Its pod CIDR, allocated by the CCM, routed to the node on the router.
        let pod_cidr = match wait_for("the Node's pod CIDR routed to it", DEADLINE, || {
            routed(&nodes, &sim, &server.router)
        })
        .await
        {
            Ok(cidr) => cidr,
            Err(e) => panic!(
                "{e:#}\nroutes: {:?}\n{}",
                sim.router_routes(&server.router),
                ccm_log().await
            ),
        };
        phases.mark("pod_route");

        // A LoadBalancer Service: an Octavia load balancer with the node as its member.
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
        }))
        .unwrap();
        services
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        let ingress = match wait_for("the Service's load balancer", DEADLINE, || {
            ingress_ip(&services)
        })
        .await
        {
            Ok(ip) => ip,
            Err(e) => panic!(
                "{e:#}\n{}\n{}",
                ccm_log().await,
                pods::recent_events(&client, "default").await
            ),
        };
        let node_port = services
            .get("web")
            .await
            .unwrap()
            .spec
            .unwrap()
            .ports
            .unwrap()[0]
            .node_port
            .expect("a node port");
        let balancer = balancer_behind(&sim, &ingress).expect("the floating IP's load balancer");
        assert_eq!(balancer["provisioning_status"], "ACTIVE");
        assert_eq!(balancer["vip_subnet_id"], server.subnet.as_str());
        let members: Vec<(String, i64)> = sim
            .members()
            .iter()
            .map(|m| {
                (
                    m["address"].as_str().unwrap_or_default().to_owned(),
                    m["protocol_port"].as_i64().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            members,
            vec![(NODE_IP.to_string(), i64::from(node_port))],
            "the node (its node port) is the load balancer's only member"
        );
        phases.mark("load_balancer");

        // Deleting the Service deletes the load balancer and releases its floating IP.
        services
            .delete("web", &DeleteParams::default())
            .await
            .unwrap();
        if let Err(e) = wait_for("the load balancer deleted", DEADLINE, || async {
            let gone = sim.load_balancers().is_empty()
                && !sim
                    .floating_ips()
                    .iter()
                    .any(|f| f["floating_ip_address"] == ingress.as_str());
            Ok(gone.then_some(()))
        })
        .await
        {
            panic!("{e:#}\n{}", ccm_log().await);
        }
        phases.mark("load_balancer_deleted");

        cinder::volume_keeps_data_across_pods(&cluster, &cloud, &sim, &server, &mut phases).await;

        cluster.teardown().await.expect("teardown leaves nothing");
        phases.mark("teardown");
        println!("pod CIDR {pod_cidr} routed to {NODE_IP}; ingress {ingress}");
        phases.print();
    });
}

/// The Node once it carries `provider_id` and no longer the uninitialized taint.
async fn initialised(nodes: &Api<Node>, provider_id: &str) -> anyhow::Result<Option<Node>> {
    let node = nodes.get(NODE_NAME).await?;
    let spec = node.spec.as_ref();
    let done = spec.and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
        && !spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .any(|t| t.key == UNINITIALIZED);
    Ok(done.then_some(node))
}

/// The Node's pod CIDR once the router routes it to the node IP.
async fn routed(
    nodes: &Api<Node>,
    sim: &SimHandle,
    router: &str,
) -> anyhow::Result<Option<String>> {
    let node = nodes.get(NODE_NAME).await?;
    let Some(cidr) = node.spec.and_then(|s| s.pod_cidr) else {
        return Ok(None);
    };
    let route = (cidr.clone(), NODE_IP.to_string());
    Ok(sim.router_routes(router).contains(&route).then_some(cidr))
}

/// The first ingress IP of the Service's status.
async fn ingress_ip(services: &Api<Service>) -> anyhow::Result<Option<String>> {
    let service = services.get("web").await?;
    Ok(service
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .and_then(|i| i.into_iter().next())
        .and_then(|i| i.ip))
}

/// The load balancer whose VIP port the floating IP `address` is on.
fn balancer_behind(sim: &SimHandle, address: &str) -> Option<Value> {
    let floating = sim
        .floating_ips()
        .into_iter()
        .find(|f| f["floating_ip_address"] == address)?;
    sim.load_balancers()
        .into_iter()
        .find(|lb| lb["vip_port_id"] == floating["port_id"])
}
