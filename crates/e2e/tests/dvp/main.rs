//! The DVP end-to-end suite on a real node: the cloud-controller-manager and capdvp charts
//! installed from images of this build, nothing started by hand but the cloud — the parent
//! (virtualization) cluster, a kube-apiserver with the generated virtualization CRDs and the
//! platform simulator inside the test's network namespace, where a VirtualMachine labelled with
//! the node's name runs with the node IP — and the real Cluster API manager.
//!
//! - the cloud-controller-manager chart with the module's DVP values (the parent's kubeconfig
//!   from a Secret, pointing at the parent through a relay on the node IP, the CCM's identity
//!   there bound to the shipped `deploy/dvp/parent-rbac.yaml` Role): the CCM pod runs as the
//!   chart says (the kubelet counts its probes passing; the kernel shows its process non-root,
//!   without capabilities or new privileges, on a read-only root) and initialises the
//!   kubelet-registered Node from the VM (provider ID, addresses, the uninitialized taint gone);
//! - a LoadBalancer Service gets a LoadBalancer Service in the parent (Deckhouse's name, ports
//!   to the tenant node port) selecting the node's VM by its per-LB label, and the parent's
//!   ingress; deleting the Service deletes the parent Service and the label;
//! - the capdvp chart on the pod network (the parent through the same relay, as the shipped
//!   `deploy/dvp/capdvp-parent-rbac.yaml`), its probes passing and its process (found by its
//!   container's cgroup) as restricted as the chart says, under the real Cluster API manager: a
//!   MachineDeployment of one machine becomes a running VM in the parent with its boot disk and
//!   cloud-init Secret, whose providerID Cluster API copies onto its Machine; scaled to zero,
//!   the Machine, the VM, the disk and the Secret go;
//! - the DVP CSI driver chart (`dvp/csi.rs`): a StatefulSet's claim becomes a VirtualDisk in the
//!   parent hot-plugged into the node's VM, staged on a loop device, its data surviving the pod's
//!   deletion; deleting the claim detaches and deletes the disk.
//!
//! A second test (`dvp/module.rs`) installs the same charts as one release, the module chart
//! `cloud-provider-dvp`, with the discoverer and the module controller.

mod csi;

mod module;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::json;
use stratus_capdvp::names::{self, MACHINE_LABEL};
use stratus_dvp_api::labels::{lb_selector_key, CLUSTER_UUID as UUID_LABEL, LB_LABEL_VALUE};
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VmPhase};
use stratus_e2e::capdvp::{self, CAPI_NAMESPACE, CLUSTER, CLUSTER_UUID};
use stratus_e2e::dvp::{ccm_values, parent_secret, parent_service_name, Parent};
use stratus_e2e::dvp::{CCM_NAME, NAMESPACE, NODE_VM, PARENT_SECRET};
use stratus_e2e::phases::Phases;
use stratus_e2e::{ccm, chart, pack, pods, probes, runtime};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::core::capi::ClusterApiManager;
use stratus_testenv::node::forward::NodeForward;
use stratus_testenv::node::netns::NODE_IP;
use stratus_testenv::node::{netns, RealCluster, NODE_NAME};
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_secs(90);
/// The capdvp chart's container name.
const CAPDVP_CONTAINER: &str = "capdvp-controller-manager";
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[test]
fn dvp_module_components_run_as_pods_on_a_real_node() {
    netns::run(|| async {
        let mut phases = Phases::start("dvp_e2e");
        // The images are packed (or taken from the machine's image cache) while the parent
        // starts; the cluster's start imports them.
        let packing = tokio::task::spawn_blocking(move || {
            let names: Vec<&str> = ["cloud-controller-manager", "capdvp-controller-manager"]
                .into_iter()
                .chain(csi::STRATUS_IMAGES)
                .collect();
            let mut archives = pack::stratus_images(&names)?;
            archives.extend(csi::foreign_images()?);
            anyhow::Ok(archives)
        });
        let parent = Parent::start().await.expect("the parent cluster");
        parent.node_vm().await.expect("the node's VM");
        phases.mark("parent_start");
        let images = packing.await.unwrap().expect("the images");
        phases.mark("images");
        let asked = Instant::now();
        let cluster = RealCluster::start(&images).await.expect("the real cluster");
        let started_in = cluster.started_in();
        println!(
            "{{\"real_cluster_start_seconds\": {:.2}}}",
            started_in.as_secs_f64()
        );
        // Another suite may hold the machine's one real cluster for a while: that wait is timed
        // apart from the cluster's start.
        phases.record(
            "cluster_lock_wait",
            asked.elapsed().saturating_sub(started_in),
        );
        phases.record("cluster_start", started_in);
        let client = cluster.client().await.unwrap();
        // The parent as the node and its pods reach it.
        let relay = NodeForward::start(parent.apiserver_address().unwrap())
            .await
            .expect("a relay to the parent");

        let provider_id = ccm_initialises_the_node(&cluster, &client, &parent, &relay).await;
        phases.mark("ccm_node_initialised");
        let ingress = load_balancer_follows_its_service(&client, &parent).await;
        phases.mark("load_balancer");
        let disk = csi::volume_keeps_data_across_pods(&cluster, &client, &parent, &relay).await;
        phases.mark("csi_volume");
        let capi = ClusterApiManager::start_with(&client, &cluster.kubeconfig(), cluster.dir())
            .await
            .expect("the Cluster API manager");
        phases.mark("cluster_api_start");
        let vm = capdvp_makes_and_deletes_a_vm(&cluster, &client, &parent, &relay, &capi).await;
        phases.mark("capdvp_machine");

        drop(capi);
        cluster.teardown().await.expect("teardown leaves nothing");
        phases.mark("teardown");
        println!(
            "Node {NODE_NAME} is {provider_id}; ingress {ingress}; volume {disk}; capdvp's VM {vm}"
        );
        phases.print();
    });
}

/// The CCM chart with the module's DVP values: the pod runs as the chart says and initialises
/// the Node from the node's VM; returns the Node's provider ID.
async fn ccm_initialises_the_node(
    cluster: &RealCluster,
    client: &kube::Client,
    parent: &Parent,
    relay: &NodeForward,
) -> String {
    let ccm_selector = format!("app.kubernetes.io/name={CCM_NAME}");
    let ccm_log = || pods::logs(client, "kube-system", &ccm_selector);
    // The parent's kubeconfig, as Deckhouse hands it over: a Secret in kube-system.
    let kubeconfig = parent
        .ccm_kubeconfig(relay)
        .await
        .expect("the CCM's parent identity");
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &parent_secret(PARENT_SECRET, &kubeconfig),
        )
        .await
        .expect("the parent kubeconfig Secret");
    chart::install_with(
        cluster,
        "cloud-controller-manager",
        "ccm",
        "kube-system",
        &ccm_values(),
    )
    .expect("helm install the CCM chart");
    ccm::runs_as_its_chart_says(client, &ccm_selector, DEADLINE).await;

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
            ("InternalIP".to_owned(), ip),
        ],
        "the VM's address is the Node's internal and external IP"
    );
    provider_id
}

/// A LoadBalancer Service gets a LoadBalancer Service in the parent selecting the node's VM,
/// and its ingress; deleting it deletes the parent Service and the VM's label. Returns the
/// ingress IP.
async fn load_balancer_follows_its_service(client: &kube::Client, parent: &Parent) -> String {
    let ccm_selector = format!("app.kubernetes.io/name={CCM_NAME}");
    let ccm_log = || pods::logs(client, "kube-system", &ccm_selector);
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
            pods::recent_events(client, "default").await
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
    ingress
}

/// The capdvp chart on the pod network under the real Cluster API manager: a MachineDeployment
/// of one machine becomes a running VM in the parent (capdvp's labels, the cluster's UUID) whose
/// providerID Cluster API copies onto its Machine; scaled to zero, the VM and the Machine go.
/// Returns the VM's name.
async fn capdvp_makes_and_deletes_a_vm(
    cluster: &RealCluster,
    client: &kube::Client,
    parent: &Parent,
    relay: &NodeForward,
    capi: &ClusterApiManager,
) -> String {
    let log = || async {
        format!(
            "{}\n--- cluster-api ---\n{}",
            pods::logs(client, "kube-system", capdvp::SELECTOR).await,
            capi.log_tail(30)
        )
    };
    let kubeconfig = capdvp::parent_identity(parent, relay)
        .await
        .expect("capdvp's parent identity");
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &parent_secret(capdvp::PARENT_SECRET, &kubeconfig),
        )
        .await
        .expect("capdvp's parent kubeconfig Secret");
    capdvp::create_namespace(client)
        .await
        .expect("the Cluster API namespace");
    chart::install_with(
        cluster,
        "capdvp-controller-manager",
        "capdvp",
        "kube-system",
        &capdvp::values(),
    )
    .expect("helm install the capdvp chart");
    let capdvp_pods = pods::wait_ready(client, "kube-system", capdvp::SELECTOR, 1, DEADLINE)
        .await
        .expect("the capdvp pod runs");
    let pod = capdvp_pods[0].metadata.name.clone().unwrap_or_default();
    probes::wait_passing(client, NODE_NAME, &pod, CAPDVP_CONTAINER, DEADLINE)
        .await
        .expect("capdvp's probes pass");
    let expected = runtime::Expected::of(&capdvp_pods[0], CAPDVP_CONTAINER).unwrap();
    assert_eq!(
        expected,
        runtime::Expected {
            user: runtime::User::Exactly(1000),
            read_only_root: true,
            no_new_privs: true,
            no_capabilities: true,
        },
        "the chart restricts capdvp"
    );
    let process = runtime::container_process(&capdvp_pods[0], CAPDVP_CONTAINER)
        .expect("capdvp's process on the node");
    assert_eq!(
        process.problems(&expected),
        Vec::<String>::new(),
        "capdvp runs as the chart says: {process:?}"
    );

    capdvp::create_cluster(client, 1)
        .await
        .expect("the Cluster API objects");
    let clusters =
        Api::<DynamicObject>::namespaced_with(client.clone(), CAPI_NAMESPACE, &capdvp::clusters());
    if let Err(e) = wait_for(
        "the Cluster's infrastructure provisioned",
        DEADLINE,
        || async {
            let found = clusters.get(CLUSTER).await?;
            let provisioned = &found.data["status"]["initialization"]["infrastructureProvisioned"];
            Ok((*provisioned == true).then_some(()))
        },
    )
    .await
    {
        panic!("{e:#}\n{}", log().await);
    }
    let vms: Api<VirtualMachine> = Api::namespaced(parent.admin.clone(), NAMESPACE);
    let capdvp_vms = ListParams::default().labels(MACHINE_LABEL);
    let vm = match wait_for("capdvp's VM running in the parent", DEADLINE, || async {
        let list = vms.list(&capdvp_vms).await?.items;
        Ok(match list.as_slice() {
            [vm] if vm.phase() == Some(VmPhase::Running) => Some(vm.clone()),
            _ => None,
        })
    })
    .await
    {
        Ok(vm) => vm,
        Err(e) => panic!("{e:#}\n{}", log().await),
    };
    assert_eq!(
        vm.label(UUID_LABEL),
        Some(CLUSTER_UUID),
        "capdvp labels its VM with the cluster's UUID"
    );
    let disks: Api<VirtualDisk> = Api::namespaced(parent.admin.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(parent.admin.clone(), NAMESPACE);
    let boot_disk = names::boot_disk(vm.name());
    let cloud_init = names::cloud_init_secret(vm.name());
    assert!(
        disks.get_opt(&boot_disk).await.unwrap().is_some(),
        "capdvp made the boot disk {boot_disk}"
    );
    assert!(
        secrets.get_opt(&cloud_init).await.unwrap().is_some(),
        "capdvp made the cloud-init Secret {cloud_init}"
    );
    let provider_id = names::provider_id(vm.name());
    let machines =
        Api::<DynamicObject>::namespaced_with(client.clone(), CAPI_NAMESPACE, &capdvp::machines());
    if let Err(e) = wait_for(
        "the Machine provisioned with the VM's providerID",
        DEADLINE,
        || async {
            let list = machines.list(&ListParams::default()).await?.items;
            let done = list.len() == 1
                && list[0].data["spec"]["providerID"] == provider_id.as_str()
                && list[0].data["status"]["initialization"]["infrastructureProvisioned"] == true;
            Ok(done.then_some(()))
        },
    )
    .await
    {
        panic!("{e:#}\n{}", log().await);
    }

    // Scaled to zero: Cluster API deletes the Machine, capdvp the VM, its disk and Secret.
    capdvp::scale(client, 0).await.expect("scaling to zero");
    if let Err(e) = wait_for("the Machine and its VM deleted", DEADLINE, || async {
        let gone = vms.list(&capdvp_vms).await?.items.is_empty()
            && disks.get_opt(&boot_disk).await?.is_none()
            && secrets.get_opt(&cloud_init).await?.is_none()
            && machines
                .list(&ListParams::default())
                .await?
                .items
                .is_empty();
        Ok(gone.then_some(()))
    })
    .await
    {
        panic!("{e:#}\n{}", log().await);
    }
    vm.name().to_owned()
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
