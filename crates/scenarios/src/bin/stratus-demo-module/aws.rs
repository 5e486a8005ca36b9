//! `make demo MODULE=aws`: the AWS module on a local control plane and moto. The chart with
//! `examples/cloud-provider-aws.values.yaml`; the module controller's StorageClasses and
//! registration Secret; a node's instance in moto and its Node initialised by the CCM; a claim
//! that names no class given the module's default, provisioned as an EBS volume by the upstream
//! external-provisioner with our driver's controller, and attached to the node's instance by the
//! upstream external-attacher; a LoadBalancer Service given a Classic ELB with the node behind it.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_csi_ebs::shapes::DEVICE_PATH;
use stratus_csi_ebs::{TOPOLOGY_KEY, WELL_KNOWN_ZONE_KEY};
use stratus_scenarios::ccm::{sibling_binary, write_cloud_config, CcmProcess};
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::harness::{ControllerSide, Kcm, Sidecar, Tools, EBS_CHART};
use stratus_scenarios::csi::{driver, flow as csi_flow};
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::service_fixture::{
    create_lb_service, get_service, ingress_hostname, load_balancer_name, set_ready,
};
use stratus_scenarios::table::{classic_table, node_table};
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};
use tokio::time::Instant;

use super::{
    done, install_chart, print_classes, print_registration, run_module_controller, wait_classes,
    WAIT,
};

const CLUSTER: &str = "demo";
const ZONE: &str = "us-east-1a";
const DRIVER: &str = "ebs.csi.aws.com";

pub async fn run() -> anyhow::Result<()> {
    println!("==> building or finding the CSI sidecars and kube-controller-manager (cached)");
    let tools = Tools::install().await?;
    println!("==> starting etcd, kube-apiserver (RBAC on) and moto on loopback ports");
    let env = TestEnv::start().await?;
    let cluster = env.cluster();
    let admin = env.kube_client(Identity::Admin).await?;
    install_chart(
        &admin,
        "aws",
        &[],
        &["charts/cloud-provider-aws/crds/awsinstanceclasses.yaml"],
    )
    .await?;
    let controller = run_module_controller(cluster, &admin).await?;
    let t0 = Instant::now();
    let made = wait_classes(&admin, "cloud-provider-aws", 3, &controller).await?;
    println!(
        "    StorageClasses in {:.2}s (gp3 replaced by the provision entry; sc1, st1 excluded):",
        t0.elapsed().as_secs_f64()
    );
    print_classes(&made)?;
    print_registration(&admin, "aws", "providerSecretAccessKey").await?;

    let (ec2, instance, node, ccm) = node(&env, &admin).await?;
    volume(&env, &admin, &tools, &ec2, &instance, &node).await?;
    load_balancer(&env, &admin, &node, &ccm).await?;
    done(cluster);
    Ok(())
}

/// An instance in moto tagged for the cluster, its Node registered uninitialised and initialised
/// by the CCM (run as its ServiceAccount under `deploy/rbac.yaml`).
async fn node(
    env: &TestEnv,
    admin: &kube::Client,
) -> anyhow::Result<(aws_sdk_ec2::Client, String, String, CcmProcess)> {
    println!("\n==> an EC2 instance in moto ({ZONE}, tagged kubernetes.io/cluster/{CLUSTER}) and its kubelet's uninitialised Node");
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let launched = ec2_fixture::launch(&ec2, &subnet, ZONE, 1, Some(CLUSTER), "m5.large").await?;
    let instance = launched.first().context("no instance launched")?.clone();
    ec2_fixture::make_public(&ec2, &subnet).await?;
    let group = ec2_fixture::node_security_group(&ec2, &subnet, CLUSTER).await?;
    ec2_fixture::set_instance_groups(&ec2, &instance.id, std::slice::from_ref(&group)).await?;
    kube_fixture::create_uninitialized_node(admin, &instance.private_dns, &[], BTreeMap::new())
        .await?;
    kube_fixture::apply_rbac_manifest(admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    println!("==> running the cloud-controller-manager as system:serviceaccount:kube-system:cloud-controller-manager");
    let config = write_cloud_config(env.dir(), CLUSTER)?;
    let ccm = CcmProcess::start(
        &sibling_binary("cloud-controller-manager")?,
        env,
        &[
            "--cloud-provider=aws".to_string(),
            format!("--cloud-config={}", config.display()),
            "--node-monitor-period=1s".to_string(),
        ],
    )?;
    let t0 = Instant::now();
    let nodes = Api::<Node>::all(admin.clone());
    let name = instance.private_dns.clone();
    let initialised = wait_for("the Node initialised", WAIT, || async {
        let node = nodes.get(&name).await?;
        Ok((!has_taint(&node, UNINITIALIZED)).then_some(node))
    })
    .await
    .with_context(|| ccm.log())?;
    println!("    initialised in {:.2}s", t0.elapsed().as_secs_f64());
    println!("{}", super::indent(&node_table(&[initialised])));
    Ok((ec2, instance.id, name, ccm))
}

/// The EBS driver's controller with the upstream provisioner and attacher (the driver chart's
/// arguments and RBAC) and kube-controller-manager's volume binder; a claim with no class bound
/// and attached.
async fn volume(
    env: &TestEnv,
    admin: &kube::Client,
    tools: &Tools,
    ec2: &aws_sdk_ec2::Client,
    instance: &str,
    node: &str,
) -> anyhow::Result<()> {
    println!("\n==> the EBS driver's controller with csi-provisioner and csi-attacher (upstream, the chart's arguments, as its ServiceAccount) and kube-controller-manager's volume controllers");
    let dir = env.dir().join("ebs");
    std::fs::create_dir_all(&dir)?;
    let side = ControllerSide::start(
        env.cluster(),
        tools,
        &EBS_CHART,
        Kcm::default(),
        &[Sidecar::Provisioner, Sidecar::Attacher],
        &dir,
    )
    .await?;
    let (driver, socket) = driver::start(
        &sibling_binary("ebs-csi-driver")?,
        &dir,
        &[
            "controller".into(),
            format!("--endpoint=unix://{}", driver::socket(&dir).display()),
        ],
        &env.aws().env_vars(),
    )
    .await?;
    let _pod = side.start_pod(driver, &socket)?;
    // What the node plugin's registration makes the kubelet write: the zone labels and the CSINode.
    let zone = json!({"metadata": {"labels": {TOPOLOGY_KEY: ZONE, WELL_KNOWN_ZONE_KEY: ZONE}}});
    Api::<Node>::all(admin.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(zone))
        .await?;
    csi_flow::csi_node(
        admin,
        node,
        DRIVER,
        instance,
        vec![TOPOLOGY_KEY.into(), WELL_KNOWN_ZONE_KEY.into()],
    )
    .await?;

    println!("==> a PersistentVolumeClaim that names no class, scheduled to {node}");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "annotations": {"volume.kubernetes.io/selected-node": node}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
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
        driver: DRIVER.into(),
        class,
        device_key: DEVICE_PATH.into(),
    };
    let logs = || csi_flow::log_tails(&dir, &csi_flow::CONTROLLER_LOGS);
    let t0 = Instant::now();
    let (pv, volume_id) = claims.wait_bound("data", WAIT).await.with_context(logs)?;
    let described = ec2.describe_volumes().volume_ids(&volume_id).send().await?;
    let volume = described.volumes().first().context("the volume in moto")?;
    println!(
        "    Bound in {:.2}s to {pv}: EBS {volume_id} in moto, {} GiB {} in {}, iops {} throughput {}",
        t0.elapsed().as_secs_f64(),
        volume.size().unwrap_or_default(),
        volume.volume_type().map(|t| t.as_str()).unwrap_or(""),
        volume.availability_zone().unwrap_or(""),
        volume.iops().unwrap_or_default(),
        volume.throughput().unwrap_or_default(),
    );
    println!("==> a VolumeAttachment for {pv} on {node}, as kube-controller-manager's attach-detach controller makes for a pod");
    let t1 = Instant::now();
    claims.attach("data-attachment", &pv, node).await?;
    let device = claims
        .wait_attached("data-attachment", WAIT)
        .await
        .with_context(logs)?;
    let described = ec2.describe_volumes().volume_ids(&volume_id).send().await?;
    let attachment = described
        .volumes()
        .first()
        .and_then(|v| v.attachments().first())
        .context("the attachment in moto")?;
    println!(
        "    attached in {:.2}s: {device} on {} ({})",
        t1.elapsed().as_secs_f64(),
        attachment.instance_id().unwrap_or(""),
        attachment.state().map(|s| s.as_str()).unwrap_or("")
    );
    Ok(())
}

/// A LoadBalancer Service given a Classic ELB with the node behind it.
async fn load_balancer(
    env: &TestEnv,
    admin: &kube::Client,
    node: &str,
    ccm: &CcmProcess,
) -> anyhow::Result<()> {
    println!("\n==> the kubelet reports Ready; Service default/web, type LoadBalancer, port 80");
    set_ready(admin, node, true).await?;
    create_lb_service(admin, "default", "web", &[80], BTreeMap::new()).await?;
    let t0 = Instant::now();
    let svc = wait_for("ingress of default/web", WAIT, || async {
        Ok(get_service(admin, "default", "web")
            .await?
            .filter(|s| ingress_hostname(s).is_some()))
    })
    .await
    .with_context(|| ccm.log())?;
    let lbs = LbClients::new(env.moto_endpoint()).await;
    let name = load_balancer_name(&svc);
    let elb = wait_for("the instance registered", WAIT, || async {
        Ok(lbs
            .classic(&name)
            .await?
            .filter(|d| d.instances().len() == 1))
    })
    .await
    .with_context(|| ccm.log())?;
    println!(
        "    ingress after {:.2}s: {}",
        t0.elapsed().as_secs_f64(),
        ingress_hostname(&svc).unwrap_or_default()
    );
    println!(
        "{}",
        super::indent(&classic_table(std::slice::from_ref(&elb)))
    );
    Ok(())
}
