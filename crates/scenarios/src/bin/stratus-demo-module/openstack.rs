//! `make demo MODULE=openstack`: the OpenStack module on a local control plane, real Keystone and
//! the OpenStack simulators. The chart with `examples/cloud-provider-openstack.values.yaml`, its
//! provider configuration pointed at this Keystone; the cloud-data-discoverer's volume types; the
//! module controller's classes (expansion from its Cinder probe) and registration; a server's Node
//! initialised by the CCM; a claim with no class provisioned by the upstream csi-provisioner with
//! the Cinder plugin's controller and attached by the upstream csi-attacher; a LoadBalancer
//! Service given an Octavia load balancer with the server as its member.

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};
use stratus_csi_cinder::{DEVICE_PATH, DRIVER_NAME, TOPOLOGY_KEY};
use stratus_openstack_sim::{ServerSpec, SimHandle};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::csi::harness::{Tools, CINDER_CHART};
use stratus_scenarios::{openstack_fixture, wait_for};
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};

use super::story::{self, ControllerPod};
use super::{done, install_chart, run_discoverer, WAIT};

const CLUSTER: &str = "demo";
const ZONE: &str = "nova";
const SERVER: &str = "worker-0";

pub async fn run() -> anyhow::Result<()> {
    let tools = super::tools().await?;
    println!("==> starting etcd, kube-apiserver (RBAC on), Keystone (uWSGI) and the OpenStack simulators");
    let (cluster, cloud) = tokio::join!(KubeCluster::start(), OpenStackEnv::start());
    let (cluster, cloud) = (cluster?, cloud?);
    let admin = cluster.kube_client(Identity::Admin).await?;
    let sim = cloud.sim().context("in-process simulators")?;
    // The example's main network; `public` is the simulators' own external network.
    sim.create_network("prod-internal", "10.20.0.0/24", false)?;
    let creds = cloud.credentials();
    // The example's provider configuration, pointed at this Keystone; no
    // supportsOnlineDiskResize, so the module controller asks Cinder.
    let local = cluster.dir().join("local-cloud.values.yaml");
    std::fs::write(
        &local,
        format!(
            "supportsOnlineDiskResize: null\nproviderClusterConfiguration:\n  provider:\n    authURL: {}\n    domainName: {}\n    tenantName: {}\n    username: {}\n    password: {}\n    region: {}\n",
            creds.auth_url, creds.user_domain_name, creds.project_name, creds.username,
            creds.password, creds.region
        ),
    )?;
    install_chart(
        &admin,
        "openstack",
        &[&local],
        &["charts/cloud-provider-openstack/crds/openstackinstanceclasses.yaml"],
    )
    .await?;

    println!("==> running cloud-data-discoverer as system:serviceaccount:kube-system:cloud-data-discoverer against Keystone");
    let (discovery, _discoverer) =
        run_discoverer(&cluster, &admin, "openstack", creds.env_vars()).await?;
    for (key, value) in discovery.data.unwrap_or_default() {
        let doc: Value = serde_json::from_slice(&value.0).unwrap_or_default();
        let types: Vec<&str> = doc["volumeTypes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        println!("    {key}: zones {} · volumeTypes {types:?}", doc["zones"]);
    }

    let _controller = super::classes_and_registration(
        &cluster,
        &admin,
        "openstack",
        3,
        "one per Cinder volume type, `__DEFAULT__` → `default`; expansion from Cinder's microversions, probed once",
        "password",
    )
    .await?;

    let (server, ccm) = node(&cluster, &cloud, &admin).await?;
    volume(&cluster, &cloud, &admin, &tools, &server).await?;
    load_balancer(sim, &admin, &ccm).await?;
    done(&cluster);
    Ok(())
}

/// A server in the simulators and its Node, initialised by the CCM (run as its ServiceAccount
/// under `deploy/rbac.yaml`, load balancers on the tenant subnet with floating IPs from `public`).
async fn node(
    cluster: &KubeCluster,
    cloud: &OpenStackEnv,
    admin: &kube::Client,
) -> anyhow::Result<(String, CcmProcess)> {
    let sim = cloud.sim().context("in-process simulators")?;
    println!("\n==> a server {SERVER} in Nova ({ZONE}) and its kubelet's uninitialised Node");
    let server = sim
        .create_servers(&[ServerSpec::active(SERVER)])?
        .into_iter()
        .next()
        .context("no server made")?;
    let conf = cluster.dir().join("cloud.conf");
    std::fs::write(
        &conf,
        openstack_fixture::with_load_balancer_section(sim, &cloud.cloud_conf())?,
    )?;
    let args = [
        "--cloud-provider=openstack".to_string(),
        format!("--cloud-config={}", conf.display()),
        format!("--cluster-name={CLUSTER}"),
        "--node-monitor-period=1s".to_string(),
    ];
    let ccm = story::ccm_initialises(cluster, admin, SERVER, &args, Vec::new(), "").await?;
    Ok((server, ccm))
}

/// The Cinder plugin's controller pod; a claim with no class bound and attached.
async fn volume(
    cluster: &KubeCluster,
    cloud: &OpenStackEnv,
    admin: &kube::Client,
    tools: &Tools,
    server: &str,
) -> anyhow::Result<()> {
    let conf = format!("--cloud-config={}", cloud.cloud_conf_path().display());
    let pod = ControllerPod::start(
        cluster,
        tools,
        &CINDER_CHART,
        "cinder-csi-plugin",
        &[
            &conf,
            &format!("--cluster={CLUSTER}"),
            "--provide-node-service=false",
        ],
        &[],
        cluster.dir().join("cinder"),
    )
    .await?;
    // What the node plugin's registration makes the kubelet write.
    let zone = json!({"metadata": {"labels": {TOPOLOGY_KEY: ZONE}}});
    Api::<Node>::all(admin.clone())
        .patch(SERVER, &PatchParams::default(), &Patch::Merge(zone))
        .await?;
    csi_flow::csi_node(
        admin,
        SERVER,
        DRIVER_NAME,
        server,
        vec![TOPOLOGY_KEY.into()],
    )
    .await?;

    let (claims, pv, volume_id, secs) = pod
        .claim_bound(admin, SERVER, 2, DRIVER_NAME, DEVICE_PATH)
        .await?;
    let sim = cloud.sim().context("in-process simulators")?;
    let volume = cinder_volume(sim, &volume_id)?;
    println!(
        "    Bound in {secs:.2}s to {pv}: Cinder volume {volume_id}, {} GiB of type {} in {}",
        volume["size"],
        volume["volume_type"].as_str().unwrap_or(""),
        volume["availability_zone"].as_str().unwrap_or("")
    );
    let (device, secs) = pod.attached(&claims, &pv, SERVER).await?;
    let volume = cinder_volume(sim, &volume_id)?;
    println!(
        "    attached in {secs:.2}s: {device} on server {} ({})",
        volume["attachments"][0]["server_id"].as_str().unwrap_or(""),
        volume["status"].as_str().unwrap_or("")
    );
    Ok(())
}

fn cinder_volume(sim: &SimHandle, id: &str) -> anyhow::Result<Value> {
    sim.volumes()
        .into_iter()
        .find(|v| v["id"] == id)
        .with_context(|| format!("{id} is not in the simulators"))
}

/// A LoadBalancer Service given an Octavia load balancer with the server as its member.
async fn load_balancer(
    sim: &SimHandle,
    admin: &kube::Client,
    ccm: &CcmProcess,
) -> anyhow::Result<()> {
    let (_svc, ip, secs) = story::service_ingress(admin, SERVER, ccm).await?;
    let members = wait_for("the server a member", WAIT, || async {
        let members = sim.members();
        Ok((!members.is_empty()).then_some(members))
    })
    .await
    .with_context(|| ccm.log())?;
    let lb = sim.load_balancers().into_iter().next().unwrap_or_default();
    println!(
        "    ingress after {secs:.2}s: {ip} (floating IP of Octavia load balancer {} \"{}\", {})",
        lb["id"].as_str().unwrap_or(""),
        lb["name"].as_str().unwrap_or(""),
        lb["provisioning_status"].as_str().unwrap_or("")
    );
    for m in members {
        println!(
            "    member {}:{}",
            m["address"].as_str().unwrap_or(""),
            m["protocol_port"]
        );
    }
    Ok(())
}
