//! `make demo MODULE=openstack`: the OpenStack module on a local control plane, real Keystone and
//! the OpenStack simulators. The chart with `examples/cloud-provider-openstack.values.yaml`, its
//! provider configuration pointed at this Keystone; the cloud-data-discoverer's volume types; the
//! module controller's classes (expansion from its Cinder probe) and registration; a server's Node
//! initialised by the CCM; a claim with no class provisioned by the upstream csi-provisioner with
//! the Cinder plugin's controller and attached by the upstream csi-attacher; a LoadBalancer
//! Service given an Octavia load balancer with the server as its member.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::api::{Api, PostParams};
use serde_json::{json, Value};
use stratus_csi_cinder::{DEVICE_PATH, DRIVER_NAME, TOPOLOGY_KEY};
use stratus_openstack_sim::{ServerSpec, SimHandle};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::harness::{ControllerSide, Kcm, Sidecar, Tools, CINDER_CHART};
use stratus_scenarios::csi::{driver, flow as csi_flow};
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::service_fixture::{create_lb_service, get_service, set_ready};
use stratus_scenarios::table::node_table;
use stratus_scenarios::wait_for;
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};
use tokio::time::Instant;

use super::{
    done, install_chart, print_classes, print_registration, run_discoverer, run_module_controller,
    wait_classes, WAIT,
};

const CLUSTER: &str = "demo";
const ZONE: &str = "nova";
const SERVER: &str = "worker-0";

pub async fn run() -> anyhow::Result<()> {
    println!("==> building or finding the CSI sidecars and kube-controller-manager (cached)");
    let tools = Tools::install().await?;
    println!("==> starting etcd, kube-apiserver (RBAC on), Keystone (uWSGI) and the OpenStack simulators");
    let (cluster, cloud) = tokio::join!(KubeCluster::start(), OpenStackEnv::start());
    let (cluster, cloud) = (cluster?, cloud?);
    let admin = cluster.kube_client(Identity::Admin).await?;
    let sim = cloud.sim().context("in-process simulators")?;
    // The example's main network; `public` is the simulators' own external network.
    sim.create_network("prod-internal", "10.0.0.0/24", false)?;
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

    let controller = run_module_controller(&cluster, &admin).await?;
    let t0 = Instant::now();
    let made = wait_classes(&admin, "cloud-provider-openstack", 3, &controller).await?;
    println!(
        "    StorageClasses in {:.2}s, one per Cinder volume type (`__DEFAULT__` → `default`); expansion from Cinder's microversions (probed once):",
        t0.elapsed().as_secs_f64()
    );
    print_classes(&made)?;
    print_registration(&admin, "openstack", "password").await?;

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
    kube_fixture::create_uninitialized_node(admin, SERVER, &[], BTreeMap::new()).await?;
    kube_fixture::apply_rbac_manifest(admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    let subnet = sim
        .ports()
        .iter()
        .find(|p| p["device_id"] == server.as_str())
        .and_then(|p| p["fixed_ips"][0]["subnet_id"].as_str().map(str::to_owned))
        .context("the server's port")?;
    let public = sim.network_id("public").context("the public network")?;
    let conf = cluster.dir().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "{}\n[LoadBalancer]\nsubnet-id = {subnet}\nfloating-network-id = {public}\n",
            cloud.cloud_conf()
        ),
    )?;
    println!("==> running the cloud-controller-manager as system:serviceaccount:kube-system:cloud-controller-manager");
    let ccm = CcmProcess::start_on(
        &sibling_binary("cloud-controller-manager")?,
        cluster,
        Vec::new(),
        &[
            "--cloud-provider=openstack".to_string(),
            format!("--cloud-config={}", conf.display()),
            format!("--cluster-name={CLUSTER}"),
            "--node-monitor-period=1s".to_string(),
        ],
    )?;
    let t0 = Instant::now();
    let nodes = Api::<Node>::all(admin.clone());
    let initialised = wait_for("the Node initialised", WAIT, || async {
        let node = nodes.get(SERVER).await?;
        Ok((!has_taint(&node, UNINITIALIZED)).then_some(node))
    })
    .await
    .with_context(|| ccm.log())?;
    println!("    initialised in {:.2}s", t0.elapsed().as_secs_f64());
    println!("{}", super::indent(&node_table(&[initialised])));
    Ok((server, ccm))
}

/// The Cinder plugin's controller with the upstream provisioner and attacher (the plugin chart's
/// arguments and RBAC) and kube-controller-manager's volume binder; a claim with no class bound
/// and attached.
async fn volume(
    cluster: &KubeCluster,
    cloud: &OpenStackEnv,
    admin: &kube::Client,
    tools: &Tools,
    server: &str,
) -> anyhow::Result<()> {
    println!("\n==> the Cinder plugin's controller with csi-provisioner and csi-attacher (upstream, the chart's arguments, as its ServiceAccount) and kube-controller-manager's volume controllers");
    let dir = cluster.dir().join("cinder");
    std::fs::create_dir_all(&dir)?;
    let side = ControllerSide::start(
        cluster,
        tools,
        &CINDER_CHART,
        Kcm::default(),
        &[Sidecar::Provisioner, Sidecar::Attacher],
        &dir,
    )
    .await?;
    let (driver, socket) = driver::start(
        &sibling_binary("cinder-csi-plugin")?,
        &dir,
        &[
            format!("--endpoint=unix://{}", driver::socket(&dir).display()),
            format!("--cloud-config={}", cloud.cloud_conf_path().display()),
            format!("--cluster={CLUSTER}"),
            "--provide-node-service=false".into(),
        ],
        &[],
    )
    .await?;
    let _pod = side.start_pod(driver, &socket)?;
    // What the node plugin's registration makes the kubelet write.
    let zone = json!({"metadata": {"labels": {TOPOLOGY_KEY: ZONE}}});
    Api::<Node>::all(admin.clone())
        .patch(
            SERVER,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(zone),
        )
        .await?;
    csi_flow::csi_node(
        admin,
        SERVER,
        DRIVER_NAME,
        server,
        vec![TOPOLOGY_KEY.into()],
    )
    .await?;

    println!("==> a PersistentVolumeClaim that names no class, scheduled to {SERVER}");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "annotations": {"volume.kubernetes.io/selected-node": SERVER}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    }))?;
    let created = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &claim)
        .await?;
    let class = created
        .spec
        .and_then(|s| s.storage_class_name)
        .context("no default class was given")?;
    println!("    storageClassName: {class} (the module's default, given by the apiserver)");
    let claims = Claims {
        admin: admin.clone(),
        driver: DRIVER_NAME.into(),
        class,
        device_key: DEVICE_PATH.into(),
    };
    let logs = || csi_flow::log_tails(&dir, &csi_flow::CONTROLLER_LOGS);
    let sim = cloud.sim().context("in-process simulators")?;
    let t0 = Instant::now();
    let (pv, volume_id) = claims.wait_bound("data", WAIT).await.with_context(logs)?;
    let volume = cinder_volume(sim, &volume_id)?;
    println!(
        "    Bound in {:.2}s to {pv}: Cinder volume {volume_id}, {} GiB of type {} in {}",
        t0.elapsed().as_secs_f64(),
        volume["size"],
        volume["volume_type"].as_str().unwrap_or(""),
        volume["availability_zone"].as_str().unwrap_or("")
    );
    println!("==> a VolumeAttachment for {pv} on {SERVER}, as kube-controller-manager's attach-detach controller makes for a pod");
    let t1 = Instant::now();
    claims.attach("data-attachment", &pv, SERVER).await?;
    let device = claims
        .wait_attached("data-attachment", WAIT)
        .await
        .with_context(logs)?;
    let volume = cinder_volume(sim, &volume_id)?;
    println!(
        "    attached in {:.2}s: {device} on server {} ({})",
        t1.elapsed().as_secs_f64(),
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
    println!("\n==> the kubelet reports Ready; Service default/web, type LoadBalancer, port 80");
    set_ready(admin, SERVER, true).await?;
    create_lb_service(admin, "default", "web", &[80], BTreeMap::new()).await?;
    let t0 = Instant::now();
    let ip = wait_for("ingress of default/web", WAIT, || async {
        Ok(get_service(admin, "default", "web")
            .await?
            .and_then(|s| s.status?.load_balancer?.ingress?.first()?.ip.clone()))
    })
    .await
    .with_context(|| ccm.log())?;
    let members = wait_for("the server a member", WAIT, || async {
        let members = sim.members();
        Ok((!members.is_empty()).then_some(members))
    })
    .await
    .with_context(|| ccm.log())?;
    let lb = sim.load_balancers().into_iter().next().unwrap_or_default();
    println!(
        "    ingress after {:.2}s: {ip} (floating IP of Octavia load balancer {} \"{}\", {})",
        t0.elapsed().as_secs_f64(),
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
