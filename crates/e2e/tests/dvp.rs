//! The DVP end-to-end suite on a real node: the cloud-controller-manager chart installed from
//! an image of this build, nothing started by hand but the cloud — the parent (virtualization)
//! cluster, a kube-apiserver with the generated virtualization CRDs and the platform simulator
//! inside the test's network namespace, where a VirtualMachine labelled with the node's name
//! runs with the node IP.
//!
//! - the cloud-controller-manager chart with the module's DVP values (the parent's kubeconfig
//!   from a Secret, pointing at the parent through a relay on the node IP, the CCM's identity
//!   there bound to the shipped `deploy/dvp/parent-rbac.yaml` Role): the CCM pod runs as the
//!   chart says (the kubelet counts its probes passing; the kernel shows its process non-root,
//!   without capabilities or new privileges, on a read-only root) and initialises the
//!   kubelet-registered Node from the VM (provider ID, addresses, the uninitialized taint gone);
//! - a LoadBalancer Service gets a LoadBalancer Service in the parent (Deckhouse's name, ports
//!   to the tenant node port) selecting the node's VM by its per-LB label, and the parent's
//!   ingress; deleting the Service deletes the parent Service and the label.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use stratus_dvp_api::labels::{lb_selector_key, LB_LABEL_VALUE};
use stratus_dvp_api::VirtualMachine;
use stratus_e2e::dvp::{ccm_values, parent_secret, parent_service_name, Parent};
use stratus_e2e::dvp::{CCM_NAME, NAMESPACE, NODE_VM};
use stratus_e2e::phases::Phases;
use stratus_e2e::{chart, pods, probes, runtime};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::forward::NodeForward;
use stratus_testenv::node::netns::NODE_IP;
use stratus_testenv::node::{images, netns, RealCluster, NODE_NAME};

const DEADLINE: Duration = Duration::from_secs(90);
/// The chart's container name.
const CCM_CONTAINER: &str = "cloud-controller-manager";
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[test]
fn dvp_cloud_controller_manager_runs_as_a_pod_on_a_real_node() {
    netns::run(|| async {
        let mut phases = Phases::start("dvp_e2e");
        let parent = Parent::start().await.expect("the parent cluster");
        parent.node_vm().await.expect("the node's VM");
        phases.mark("parent_start");
        // The archives are imported by the cluster's start; the directory goes with the guard.
        let out = tempfile::Builder::new()
            .prefix("stratus-e2e-images-")
            .tempdir()
            .unwrap();
        let images = vec![images::stratus("cloud-controller-manager", out.path()).unwrap()];
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

        // The parent's kubeconfig, as Deckhouse hands it over: a Secret in kube-system.
        let relay = NodeForward::start(parent.apiserver_address().unwrap())
            .await
            .expect("a relay to the parent");
        let kubeconfig = parent
            .ccm_kubeconfig(&relay)
            .await
            .expect("the CCM's parent identity");
        Api::<Secret>::namespaced(client.clone(), "kube-system")
            .create(&PostParams::default(), &parent_secret(&kubeconfig))
            .await
            .expect("the parent kubeconfig Secret");

        // The CCM, from its chart and image, as the DVP module runs it.
        chart::install_with(
            &cluster,
            "cloud-controller-manager",
            "ccm",
            "kube-system",
            &ccm_values(),
        )
        .expect("helm install the CCM chart");
        let ccm_pods = pods::wait_ready(&client, "kube-system", &ccm_selector, 1, DEADLINE)
            .await
            .expect("the CCM pod runs");
        let ccm_pod = ccm_pods[0].metadata.name.clone().unwrap_or_default();
        probes::wait_passing(&client, NODE_NAME, &ccm_pod, CCM_CONTAINER, DEADLINE)
            .await
            .expect("the CCM's probes pass");
        let expected = runtime::Expected::of(&ccm_pods[0], CCM_CONTAINER).unwrap();
        assert_eq!(
            expected,
            runtime::Expected {
                user: runtime::User::Exactly(65532),
                read_only_root: true,
                no_new_privs: true,
                no_capabilities: true,
            },
            "the chart's defaults restrict the CCM"
        );
        let process = runtime::host_network_process("cloud-controller-manager")
            .expect("the CCM's process on the node");
        assert_eq!(
            process.problems(&expected),
            Vec::<String>::new(),
            "the CCM runs as the chart says: {process:?}"
        );
        phases.mark("ccm_ready");

        // The kubelet's Node, initialised from the VM.
        let nodes: Api<Node> = Api::all(client.clone());
        let provider_id = format!("dvp://{NODE_VM}");
        let node = match wait_for("the CCM to initialise the Node", DEADLINE, || {
            initialised(&nodes, &provider_id)
        })
        .await
        {
            Ok(node) => node,
            Err(e) => panic!("{e:#}\n{}", ccm_log().await),
        };
        let mut addresses: Vec<(String, String)> = node
            .status
            .and_then(|s| s.addresses)
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        addresses.sort();
        let ip = NODE_IP.to_string();
        assert_eq!(
            addresses,
            [
                ("ExternalIP".to_owned(), ip.clone()),
                ("Hostname".to_owned(), NODE_NAME.to_owned()),
                ("InternalIP".to_owned(), ip.clone()),
            ],
            "the VM's address is the Node's internal and external IP"
        );
        phases.mark("node_initialised");

        // A LoadBalancer Service: a LoadBalancer Service in the parent selecting the node's VM.
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
        }))
        .unwrap();
        let created = services
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        let lb_name = parent_service_name(created.metadata.uid.as_deref().unwrap_or_default());
        let label = lb_selector_key(&lb_name);
        let ingress = match wait_for("the Service's load balancer", DEADLINE, || {
            ingress_ip(&services, "web")
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
        let parent_services: Api<Service> = Api::namespaced(parent.admin.clone(), NAMESPACE);
        let parent_service = parent_services
            .get(&lb_name)
            .await
            .expect("the parent Service named by Deckhouse's rule");
        let spec = parent_service.spec.clone().unwrap_or_default();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        let forwarded: Vec<(i32, Option<IntOrString>)> = spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.port, p.target_port))
            .collect();
        assert_eq!(
            forwarded,
            vec![(80, Some(IntOrString::Int(node_port)))],
            "the parent Service forwards to the tenant node port"
        );
        assert_eq!(
            spec.selector.unwrap_or_default(),
            [(label.clone(), LB_LABEL_VALUE.to_owned())].into(),
            "the parent Service selects the VMs by the per-LB label"
        );
        let parent_ingress = ingress_ip(&parent_services, &lb_name).await.unwrap();
        assert_eq!(
            parent_ingress.as_deref(),
            Some(ingress.as_str()),
            "the tenant's ingress is the parent's"
        );
        let vms: Api<VirtualMachine> = Api::namespaced(parent.admin.clone(), NAMESPACE);
        let labelled = |vm: &VirtualMachine| vm.label(&label) == Some(LB_LABEL_VALUE);
        assert!(
            labelled(&vms.get(NODE_VM).await.unwrap()),
            "the node's VM carries {label}"
        );
        phases.mark("load_balancer");

        // Deleting the Service deletes the parent Service and the VM's label.
        services
            .delete("web", &DeleteParams::default())
            .await
            .unwrap();
        if let Err(e) = wait_for("the parent Service deleted", DEADLINE, || async {
            let gone = parent_services.get_opt(&lb_name).await?.is_none()
                && !labelled(&vms.get(NODE_VM).await?);
            Ok(gone.then_some(()))
        })
        .await
        {
            panic!("{e:#}\n{}", ccm_log().await);
        }
        phases.mark("load_balancer_deleted");

        cluster.teardown().await.expect("teardown leaves nothing");
        phases.mark("teardown");
        println!("Node {NODE_NAME} is {provider_id}; ingress {ingress}");
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

/// The first ingress IP of the Service `name`'s status.
async fn ingress_ip(services: &Api<Service>, name: &str) -> anyhow::Result<Option<String>> {
    let service = services.get(name).await?;
    Ok(service
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .and_then(|i| i.into_iter().next())
        .and_then(|i| i.ip))
}
