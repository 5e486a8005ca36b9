//! `make demo MODULE=aws`: the AWS module on a local control plane and moto. The chart with
//! `examples/cloud-provider-aws.values.yaml`; the module controller's StorageClasses and
//! registration Secret; a node's instance in moto and its Node initialised by the CCM; a claim
//! that names no class given the module's default, provisioned as an EBS volume by the upstream
//! external-provisioner with our driver's controller, and attached to the node's instance by the
//! upstream external-attacher; a LoadBalancer Service given a Classic ELB with the node behind it.

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use stratus_csi_ebs::shapes::DEVICE_PATH;
use stratus_csi_ebs::{TOPOLOGY_KEY, WELL_KNOWN_ZONE_KEY};
use stratus_scenarios::ccm::{write_cloud_config, CcmProcess};
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::csi::harness::{Tools, EBS_CHART};
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::service_fixture::load_balancer_name;
use stratus_scenarios::table::classic_table;
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};

use super::story::{self, ControllerPod};
use super::{done, install_chart, WAIT};

const CLUSTER: &str = "demo";
const ZONE: &str = "us-east-1a";
const DRIVER: &str = "ebs.csi.aws.com";

pub async fn run() -> anyhow::Result<()> {
    let tools = super::tools().await?;
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
    let _controller = super::classes_and_registration(
        cluster,
        &admin,
        "aws",
        3,
        "gp3 replaced by the provision entry; sc1, st1 excluded",
        "providerSecretAccessKey",
    )
    .await?;

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
    let config = write_cloud_config(env.dir(), CLUSTER)?;
    let args = [
        "--cloud-provider=aws".to_string(),
        format!("--cloud-config={}", config.display()),
        "--node-monitor-period=1s".to_string(),
    ];
    let name = instance.private_dns.clone();
    let ccm = story::ccm_initialises(env.cluster(), admin, &name, &args, env.aws().env_vars(), "")
        .await?;
    Ok((ec2, instance.id, name, ccm))
}

/// The EBS driver's controller pod; a claim with no class bound and attached.
async fn volume(
    env: &TestEnv,
    admin: &kube::Client,
    tools: &Tools,
    ec2: &aws_sdk_ec2::Client,
    instance: &str,
    node: &str,
) -> anyhow::Result<()> {
    let pod = ControllerPod::start(
        env.cluster(),
        tools,
        &EBS_CHART,
        "ebs-csi-driver",
        &["controller"],
        &env.aws().env_vars(),
        env.dir().join("ebs"),
    )
    .await?;
    // What the node plugin's registration makes the kubelet write: the zone labels and the CSINode.
    let zone = json!({"metadata": {"labels": {TOPOLOGY_KEY: ZONE, WELL_KNOWN_ZONE_KEY: ZONE}}});
    Api::<Node>::all(admin.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(zone))
        .await?;
    let keys = vec![TOPOLOGY_KEY.into(), WELL_KNOWN_ZONE_KEY.into()];
    csi_flow::csi_node(admin, node, DRIVER, instance, keys).await?;

    let (claims, pv, volume_id, secs) = pod
        .claim_bound(admin, node, 10, DRIVER, DEVICE_PATH)
        .await?;
    let described = ec2.describe_volumes().volume_ids(&volume_id).send().await?;
    let volume = described.volumes().first().context("the volume in moto")?;
    println!(
        "    Bound in {secs:.2}s to {pv}: EBS {volume_id} in moto, {} GiB {} in {}, iops {} throughput {}",
        volume.size().unwrap_or_default(),
        volume.volume_type().map(|t| t.as_str()).unwrap_or(""),
        volume.availability_zone().unwrap_or(""),
        volume.iops().unwrap_or_default(),
        volume.throughput().unwrap_or_default(),
    );
    let (device, secs) = pod.attached(&claims, &pv, node).await?;
    let described = ec2.describe_volumes().volume_ids(&volume_id).send().await?;
    let attachment = described
        .volumes()
        .first()
        .and_then(|v| v.attachments().first())
        .context("the attachment in moto")?;
    println!(
        "    attached in {secs:.2}s: {device} on {} ({})",
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
    let (svc, ingress, secs) = story::service_ingress(admin, node, ccm).await?;
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
    println!("    ingress after {secs:.2}s: {ingress}");
    println!(
        "{}",
        super::indent(&classic_table(std::slice::from_ref(&elb)))
    );
    Ok(())
}
