//! `make demo`: a local control plane and emulated AWS, EC2 instances with matching uninitialised
//! Nodes, the cloud-controller-manager initialising them (and giving them pod CIDRs), then one
//! instance terminated, then a LoadBalancer Service given a Classic ELB in front of the remaining
//! nodes, and the pod routes in the cluster's two route tables.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use stratus_scenarios::ccm::{sibling_binary, write_cloud_config, CcmProcess};
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::service_fixture::{
    create_lb_service, get_service, ingress_hostname, load_balancer_name, set_ready,
};
use stratus_scenarios::table::{classic_table, node_table};
use stratus_scenarios::{ec2_fixture, route_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};

const CLUSTER: &str = "demo";
const WAIT: Duration = Duration::from_secs(120);
const POD_CIDR: &str = "10.244.0.0/16";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    println!("==> starting etcd, kube-apiserver (RBAC on) and moto on loopback ports");
    let started = Instant::now();
    let env = TestEnv::start().await?;
    println!(
        "    ready in {:.1}s (state in {})",
        started.elapsed().as_secs_f64(),
        env.dir().display()
    );
    let admin = env.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;

    println!("==> launching EC2 instances in moto, tagged kubernetes.io/cluster/{CLUSTER}");
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let placement = [
        ("us-east-1a", "m5.large"),
        ("us-east-1b", "t3.medium"),
        ("us-east-1c", "c5.xlarge"),
    ];
    let subnets = ec2_fixture::subnets(&ec2, &placement.map(|(zone, _)| zone)).await?;
    let mut launched = Vec::new();
    for ((zone, ty), subnet) in placement.iter().zip(&subnets) {
        launched.extend(ec2_fixture::launch(&ec2, subnet, zone, 1, Some(CLUSTER), ty).await?);
    }
    println!("==> making the VPC public (internet gateway) and putting the instances in a node security group");
    ec2_fixture::make_public(&ec2, &subnets[0]).await?;
    let node_group = ec2_fixture::node_security_group(&ec2, &subnets[0], CLUSTER).await?;
    for i in &launched {
        ec2_fixture::set_instance_groups(&ec2, &i.id, std::slice::from_ref(&node_group)).await?;
    }
    println!("==> two route tables tagged for the cluster (the CCM keeps pod routes in both)");
    let vpc = route_fixture::vpc_of_subnet(&ec2, &subnets[0]).await?;
    let tables = [
        route_fixture::cluster_route_table(&ec2, &vpc, CLUSTER).await?,
        route_fixture::cluster_route_table(&ec2, &vpc, CLUSTER).await?,
    ];
    println!("==> registering uninitialised Nodes named three ways: instance ID, private DNS name, unrelated name + IP");
    let names = [
        launched[0].id.clone(),
        launched[1].private_dns.clone(),
        "edge-worker-7".to_string(),
    ];
    kube_fixture::create_uninitialized_node(&admin, &names[0], &[], BTreeMap::new()).await?;
    kube_fixture::create_uninitialized_node(&admin, &names[1], &[], BTreeMap::new()).await?;
    kube_fixture::create_uninitialized_node(
        &admin,
        &names[2],
        &[&launched[2].private_ip],
        BTreeMap::new(),
    )
    .await?;

    println!("==> running the cloud-controller-manager as system:serviceaccount:kube-system:cloud-controller-manager");
    let config = write_cloud_config(env.dir(), CLUSTER)?;
    let ccm_bin = sibling_binary("cloud-controller-manager")?;
    let args = vec![
        "--cloud-provider=aws".to_string(),
        format!("--cloud-config={}", config.display()),
        "--node-monitor-period=1s".to_string(),
        "--instance-cache-refresh-period=2s".to_string(),
        format!("--cluster-cidr={POD_CIDR}"),
        "--allocate-node-cidrs=true".to_string(),
        "--route-reconciliation-period=5s".to_string(),
    ];
    let ccm = CcmProcess::start(&ccm_bin, &env, &args)?;
    let t0 = Instant::now();
    let nodes: Api<Node> = Api::all(admin.clone());
    let initialised = wait_for("all nodes initialised", WAIT, || async {
        let list = nodes.list(&ListParams::default()).await?.items;
        Ok((list.len() == 3 && list.iter().all(|n| !has_taint(n, UNINITIALIZED))).then_some(list))
    })
    .await
    .with_context(|| ccm.log())?;
    println!(
        "    all 3 nodes initialised in {:.2}s\n",
        t0.elapsed().as_secs_f64()
    );
    println!("{}\n", node_table(&initialised));

    let victim = &launched[1];
    println!("==> terminating {} (node {})", victim.id, names[1]);
    ec2_fixture::terminate(&ec2, std::slice::from_ref(&victim.id)).await?;
    let t1 = Instant::now();
    let remaining = wait_for("terminated node deleted", WAIT, || async {
        let list = nodes.list(&ListParams::default()).await?.items;
        Ok((list.len() == 2).then_some(list))
    })
    .await
    .with_context(|| ccm.log())?;
    println!(
        "    node {} deleted {:.2}s after its instance was terminated\n",
        names[1],
        t1.elapsed().as_secs_f64()
    );
    println!("{}\n", node_table(&remaining));

    println!("==> the kubelets of the two remaining nodes report Ready");
    for node in &remaining {
        set_ready(
            &admin,
            node.metadata.name.as_deref().unwrap_or_default(),
            true,
        )
        .await?;
    }
    println!("==> creating Service default/web, type LoadBalancer, ports 80 and 443");
    create_lb_service(&admin, "default", "web", &[80, 443], BTreeMap::new()).await?;
    let t2 = Instant::now();
    let svc = wait_for("ingress of default/web", WAIT, || async {
        Ok(get_service(&admin, "default", "web")
            .await?
            .filter(|s| ingress_hostname(s).is_some()))
    })
    .await
    .with_context(|| ccm.log())?;
    println!(
        "    ingress after {:.2}s: {}",
        t2.elapsed().as_secs_f64(),
        ingress_hostname(&svc).unwrap_or_default()
    );
    let lbs = LbClients::new(env.moto_endpoint()).await;
    let elb_name = load_balancer_name(&svc);
    let elb = wait_for("both remaining instances registered", WAIT, || async {
        Ok(lbs
            .classic(&elb_name)
            .await?
            .filter(|d| d.instances().len() == remaining.len()))
    })
    .await
    .with_context(|| ccm.log())?;
    println!("\n{}\n", classic_table(std::slice::from_ref(&elb)));

    println!("==> pod routes: one per node pod CIDR (from --allocate-node-cidrs), in both tables");
    let node_list = nodes.list(&ListParams::default()).await?.items;
    let wanted: Vec<String> = node_list
        .iter()
        .filter_map(|n| n.spec.as_ref()?.pod_cidr.clone())
        .collect();
    let routed = wait_for("pod routes in both tables", WAIT, || async {
        let mut all = Vec::new();
        for t in &tables {
            let routes = route_fixture::routes(&ec2, t).await?;
            if !wanted.iter().all(|c| routes.contains_key(c)) {
                return Ok(None);
            }
            all.push((t.clone(), routes));
        }
        Ok(Some(all))
    })
    .await
    .with_context(|| ccm.log())?;
    println!("\n{:<24} {:<16} TARGET", "ROUTE-TABLE", "DESTINATION");
    for (table, routes) in &routed {
        for (dest, target) in routes.iter().filter(|(d, _)| d.starts_with("10.244.")) {
            println!("{table:<24} {dest:<16} {target}");
        }
    }
    println!();

    let counts = env.aws_request_counts().await?;
    let writes = env.kube_writes_by(Identity::CloudControllerManager.username())?;
    println!("==> cost, as seen by the emulator and the apiserver audit log:");
    for service in ["ec2", "elasticloadbalancing"] {
        let of: BTreeMap<&str, u64> = counts
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(service)?.strip_prefix(':')?, *v)))
            .collect();
        println!(
            "    {service} requests: {} {of:?}",
            of.values().sum::<u64>()
        );
    }
    println!("    Kubernetes writes by the CCM: {writes}");
    Ok(())
}
