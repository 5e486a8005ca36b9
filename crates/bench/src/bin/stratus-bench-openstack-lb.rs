//! `make bench-openstack-lb`: N ready Nodes backed by simulated Nova servers, then S
//! LoadBalancer Services at once while Octavia takes D ms per provisioning transition; measures
//! seconds until every Service has its floating IP as ingress, Octavia and Neutron requests per
//! load balancer (counted at the proxy), then one node joins and measures the requests of that
//! churn per load balancer, and the CCM's peak RSS. Prints JSON; a phase that misses its
//! deadline makes the exit status non-zero.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_openstack_sim::{ServerSpec, SimHandle};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::service_fixture::create_lb_service;
use stratus_scenarios::{kube_fixture, openstack_fixture, wait_for};
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};
use tokio::time::Instant;

const CLUSTER: &str = "bench";
const NS: &str = "default";

#[derive(Parser)]
struct Args {
    /// LoadBalancer Services created at once.
    #[arg(long, default_value_t = 100)]
    services: usize,
    /// Ready nodes before the Services are created.
    #[arg(long, default_value_t = 50)]
    nodes: usize,
    /// Milliseconds per Octavia provisioning transition.
    #[arg(long, default_value_t = 2000)]
    transition_ms: u64,
    /// `--concurrent-service-syncs` of the CCM.
    #[arg(long, default_value_t = 8)]
    concurrent_service_syncs: u16,
    /// A phase that has not finished after this many seconds is reported as incomplete.
    #[arg(long, default_value_t = 180)]
    deadline_seconds: u64,
}

async fn add_node(admin: &kube::Client, sim: &SimHandle, i: usize) -> anyhow::Result<()> {
    let id = sim
        .create_servers(&[ServerSpec::active(format!("node-{i}"))])?
        .remove(0);
    let ip = sim
        .ports()
        .into_iter()
        .find(|p| p["device_id"] == id.as_str())
        .and_then(|p| p["fixed_ips"][0]["ip_address"].as_str().map(str::to_owned))
        .context("server port")?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let name = format!("node-{i}");
    let node = Node {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("openstack:///{id}")),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    nodes.create(&PostParams::default(), &node).await?;
    let status = NodeStatus {
        addresses: Some(vec![NodeAddress {
            type_: "InternalIP".into(),
            address: ip,
        }]),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..NodeStatus::default()
    };
    nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    Ok(())
}

/// Octavia and Neutron requests of the load balancers (the server view's listings excluded).
fn lb_requests(counts: &BTreeMap<String, u64>) -> (u64, u64) {
    let octavia = counts
        .iter()
        .filter(|(k, _)| k.starts_with("load-balancer:"))
        .map(|(_, v)| v)
        .sum();
    let neutron = counts
        .iter()
        .filter(|(k, _)| {
            k.starts_with("network:")
                && ["floatingips", "/networks", "/subnets"]
                    .iter()
                    .any(|x| k.contains(x))
        })
        .map(|(_, v)| v)
        .sum();
    (octavia, neutron)
}

async fn with_ingress(admin: &kube::Client) -> anyhow::Result<usize> {
    let list = Api::<Service>::namespaced(admin.clone(), NS)
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .filter(|s| {
            s.status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .is_some_and(|i| !i.is_empty())
        })
        .count())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let deadline = Duration::from_secs(args.deadline_seconds);
    let (cluster, cloud) = tokio::join!(KubeCluster::start(), OpenStackEnv::start());
    let (cluster, cloud) = (cluster?, cloud?);
    let sim = cloud.sim().context("in-process simulator")?.clone();
    let admin = cluster.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    for i in 0..args.nodes {
        add_node(&admin, &sim, i).await?;
    }
    let conf = cluster.dir().join("bench-cloud.conf");
    std::fs::write(
        &conf,
        openstack_fixture::with_load_balancer_section(&sim, &cloud.cloud_conf())?,
    )?;
    sim.set_lb_delay(Duration::from_millis(args.transition_ms));
    let ccm_args: Vec<String> = vec![
        "--cloud-provider=openstack".into(),
        format!("--cloud-config={}", conf.display()),
        format!("--cluster-name={CLUSTER}"),
        "--controllers=service".into(),
        format!(
            "--concurrent-service-syncs={}",
            args.concurrent_service_syncs
        ),
        "--leader-elect=false".into(),
    ];
    let ccm = CcmProcess::start_on(
        &sibling_binary("cloud-controller-manager")?,
        &cluster,
        Vec::new(),
        &ccm_args,
    )?;
    cloud.reset_request_counts().await?;

    let started = Instant::now();
    for i in 0..args.services {
        create_lb_service(&admin, NS, &format!("svc-{i}"), &[80], BTreeMap::new()).await?;
    }
    let created = wait_for("every Service has an ingress", deadline, || async {
        Ok((with_ingress(&admin).await? == args.services).then_some(()))
    })
    .await;
    let ingress_seconds = started.elapsed().as_secs_f64();
    let counts = cloud.request_counts().await?;
    let (octavia, neutron) = lb_requests(&counts);
    let per_lb_create = (octavia + neutron) as f64 / args.services as f64;

    // One node joins: every pool gets it.
    cloud.reset_request_counts().await?;
    let churn_started = Instant::now();
    add_node(&admin, &sim, args.nodes).await?;
    let want = args.services * (args.nodes + 1);
    let churned = wait_for("every pool has the new node", deadline, || async {
        Ok((sim.members().len() == want).then_some(()))
    })
    .await;
    let churn_seconds = churn_started.elapsed().as_secs_f64();
    // Let the last re-syncs land before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let churn_counts = cloud.request_counts().await?;
    let (c_octavia, c_neutron) = lb_requests(&churn_counts);
    let per_lb_churn = (c_octavia + c_neutron) as f64 / args.services as f64;
    let report = json!({
        "benchmark": "openstack-lb",
        "services": args.services,
        "nodes": args.nodes,
        "transition_ms": args.transition_ms,
        "concurrent_service_syncs": args.concurrent_service_syncs,
        "create": {
            "complete": created.is_ok(),
            "seconds_until_all_ingress": ingress_seconds,
            "target_seconds": 30,
            "octavia_requests": octavia,
            "neutron_requests": neutron,
            "requests_per_lb": per_lb_create,
            "target_requests_per_lb": 8,
            "by_call": counts.iter().filter(|(k, _)| k.starts_with("load-balancer:") || k.contains("floatingips")).collect::<BTreeMap<_, _>>(),
        },
        "node_churn": {
            "complete": churned.is_ok(),
            "seconds": churn_seconds,
            "octavia_requests": c_octavia,
            "neutron_requests": c_neutron,
            "requests_per_lb": per_lb_churn,
            "target_requests_per_lb": 2,
            "by_call": churn_counts.iter().filter(|(k, _)| k.starts_with("load-balancer:")).collect::<BTreeMap<_, _>>(),
        },
        "ccm_peak_rss_mib": ccm.peak_rss_kib().map(|k| k as f64 / 1024.0),
        "lb_counts": format!("{:?}", sim.lb_counts()),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    drop(ccm);
    if created.is_err() || churned.is_err() {
        anyhow::bail!("a phase missed its deadline");
    }
    Ok(())
}
