//! `make demo CLOUD=openstack`: a local control plane, a real Keystone and the OpenStack
//! simulators; three servers whose Nodes are named three ways (providerID, server name, kubelet
//! IP) initialised by the cloud-controller-manager, one server shut off (its Node tainted), one
//! deleted (its Node gone), and what it cost in OpenStack requests and Kubernetes writes.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use stratus_openstack_sim::{ServerSpec, ServerStatus};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::openstack_fixture::provider_id;
use stratus_scenarios::table::node_table;
use stratus_scenarios::wait_for;
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv, OpenStackOptions};

const WAIT: Duration = Duration::from_secs(120);
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

async fn node(admin: &kube::Client, name: &str) -> anyhow::Result<Option<Node>> {
    kube_fixture::get_node(admin, name).await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    println!("==> starting etcd, kube-apiserver (RBAC on), Keystone (uWSGI) and the OpenStack simulators");
    let started = Instant::now();
    let (cluster, cloud) = tokio::join!(
        KubeCluster::start(),
        OpenStackEnv::start_with(OpenStackOptions {
            zones: vec!["nova".into(), "nova-b".into()],
            ..OpenStackOptions::default()
        })
    );
    let (cluster, cloud) = (cluster?, cloud?);
    println!(
        "    ready in {:.1}s (Keystone at {}, cloud.conf in {})",
        started.elapsed().as_secs_f64(),
        cloud.auth_url(),
        cloud.cloud_conf_path().display()
    );
    let admin = cluster.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    let sim = cloud
        .sim()
        .ok_or_else(|| anyhow::anyhow!("in-process simulators"))?;

    println!("==> creating three servers in project stratus-cluster (one with a floating IP)");
    let specs = [
        ServerSpec {
            flavor: "m1.small".into(),
            fixed_ip: Some("10.0.1.10".into()),
            ..ServerSpec::active("worker-0")
        },
        ServerSpec {
            flavor: "m1.medium".into(),
            zone: Some("nova-b".into()),
            fixed_ip: Some("10.0.1.11".into()),
            floating_ip: true,
            ..ServerSpec::active("worker-1")
        },
        ServerSpec {
            flavor: "m1.large".into(),
            fixed_ip: Some("10.0.1.12".into()),
            ..ServerSpec::active("worker-2")
        },
    ];
    let ids = sim.create_servers(&specs)?;

    println!("==> registering uninitialised Nodes named three ways: providerID, server name, unrelated name + IP");
    let names = ["kubelet-a8f3", "worker-1", "edge-worker-7"];
    kube_fixture::create_uninitialized_node(&admin, names[0], &[], BTreeMap::new()).await?;
    Api::<Node>::all(admin.clone())
        .patch(
            names[0],
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"providerID": provider_id(&ids[0])}})),
        )
        .await?;
    kube_fixture::create_uninitialized_node(&admin, names[1], &[], BTreeMap::new()).await?;
    kube_fixture::create_uninitialized_node(&admin, names[2], &["10.0.1.12"], BTreeMap::new())
        .await?;

    println!("==> starting the cloud-controller-manager --cloud-provider=openstack as the shipped least-privilege identity");
    let conf = cluster.dir().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "{}\n[Networking]\npublic-network-name = public\n",
            cloud.cloud_conf()
        ),
    )?;
    let args = vec![
        "--cloud-provider=openstack".to_string(),
        format!("--cloud-config={}", conf.display()),
        "--node-monitor-period=1s".to_string(),
        "--instance-cache-refresh-period=2s".to_string(),
    ];
    let ccm = CcmProcess::start_on(
        &sibling_binary("cloud-controller-manager")?,
        &cluster,
        Vec::new(),
        &args,
    )?;
    let ccm_started = Instant::now();
    let nodes: Api<Node> = Api::all(admin.clone());
    let initialised = wait_for("every node initialised", WAIT, || async {
        let list = nodes.list(&ListParams::default()).await?.items;
        Ok(
            (list.len() == names.len() && list.iter().all(|n| !has_taint(n, UNINITIALIZED)))
                .then_some(list),
        )
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\n--- ccm log ---\n{}", ccm.log()))?;
    println!(
        "    initialised in {:.2}s\n",
        ccm_started.elapsed().as_secs_f64()
    );
    println!("{}", node_table(&initialised));

    println!("==> shutting off worker-0 (node {})", names[0]);
    sim.set_server_status(&ids[0], ServerStatus::Shutoff)?;
    let t = Instant::now();
    wait_for("the shutdown taint", WAIT, || async {
        Ok(node(&admin, names[0])
            .await?
            .filter(|n| has_taint(n, SHUTDOWN)))
    })
    .await?;
    println!(
        "    node {} tainted {SHUTDOWN}:NoSchedule {:.2}s later",
        names[0],
        t.elapsed().as_secs_f64()
    );

    println!("==> deleting worker-2 (node {})", names[2]);
    sim.delete_server(&ids[2])?;
    let t = Instant::now();
    wait_for("the node deleted", WAIT, || async {
        Ok(node(&admin, names[2]).await?.is_none().then_some(()))
    })
    .await?;
    println!(
        "    node {} deleted {:.2}s after its server",
        names[2],
        t.elapsed().as_secs_f64()
    );

    let counts = cloud.request_counts().await?;
    let writes = cluster.kube_writes_by(Identity::CloudControllerManager.username())?;
    println!(
        "\n==> what it cost ({:.0}s of CCM run time, refresh every 2s)",
        ccm_started.elapsed().as_secs_f64()
    );
    for (call, n) in &counts {
        println!("    {n:>4}  {call}");
    }
    println!(
        "    {:>4}  OpenStack requests in all\n    {writes:>4}  Kubernetes writes by the CCM",
        counts.values().sum::<u64>()
    );
    Ok(())
}
