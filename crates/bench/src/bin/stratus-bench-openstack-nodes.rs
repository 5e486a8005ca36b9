//! `make bench-openstack-nodes`: N servers in the OpenStack simulators and N uninitialised Nodes
//! named after them; measures how long `--cloud-provider=openstack` takes to initialise them all,
//! the Nova, Neutron and Keystone requests it makes (counted at the proxy, not by our own
//! metrics) during initialisation and over an idle period of several cache refreshes, the
//! Kubernetes writes (apiserver audit log), and the CCM's peak RSS. Prints JSON.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde_json::json;
use stratus_openstack_sim::ServerSpec;
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::wait_for;
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};

#[derive(Parser)]
struct Args {
    /// Servers (and Nodes).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// `--instance-cache-refresh-period` of the CCM, in seconds.
    #[arg(long, default_value_t = 20)]
    refresh_seconds: u64,
    /// Refresh periods measured after initialisation (at least 2).
    #[arg(long, default_value_t = 3)]
    idle_periods: u64,
    /// `--concurrent-node-syncs` of the CCM.
    #[arg(long, default_value_t = 8)]
    concurrent_node_syncs: u16,
}

/// Requests per service (`compute`, `network`, `identity`) from the proxy's per-call counts.
fn by_service(counts: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (call, n) in counts {
        let service = call.split(':').next().unwrap_or(call).to_owned();
        *out.entry(service).or_insert(0) += n;
    }
    out
}

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.idle_periods >= 2,
        "--idle-periods must be at least 2 (got {})",
        args.idle_periods
    );
    eprintln!("starting the cluster, Keystone and the OpenStack simulators");
    let (cluster, cloud) = tokio::join!(KubeCluster::start(), OpenStackEnv::start());
    let (cluster, cloud) = (cluster?, cloud?);
    let admin = cluster.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    let sim = cloud.sim().context("in-process simulators")?;

    eprintln!(
        "creating {} servers and their uninitialised nodes",
        args.nodes
    );
    let names: Vec<String> = (0..args.nodes).map(|i| format!("node-{i:05}")).collect();
    let specs: Vec<ServerSpec> = names.iter().map(ServerSpec::active).collect();
    sim.create_servers(&specs)?;
    kube_fixture::create_uninitialized_nodes(&admin, names.iter().map(String::as_str)).await?;

    let conf = cluster.dir().join("cloud.conf");
    std::fs::write(&conf, cloud.cloud_conf())?;
    cloud.reset_request_counts().await?;
    let ccm_args = vec![
        "--cloud-provider=openstack".to_string(),
        format!("--cloud-config={}", conf.display()),
        format!("--concurrent-node-syncs={}", args.concurrent_node_syncs),
        format!("--instance-cache-refresh-period={}s", args.refresh_seconds),
    ];
    eprintln!("starting the cloud-controller-manager");
    let started = Instant::now();
    let mut ccm = CcmProcess::start_on(
        &sibling_binary("cloud-controller-manager")?,
        &cluster,
        Vec::new(),
        &ccm_args,
    )?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let total = args.nodes;
    let mut peak_rss_kib = 0;
    wait_for("all nodes initialised", Duration::from_secs(600), || {
        peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        let nodes = nodes.clone();
        async move {
            let list = nodes.list(&ListParams::default()).await?.items;
            let done = list.iter().filter(|n| !has_taint(n, UNINITIALIZED)).count();
            Ok((done == total).then_some(()))
        }
    })
    .await
    .with_context(|| ccm.log())?;
    let init_seconds = started.elapsed().as_secs_f64();
    let init_calls = cloud.request_counts().await?;
    let init_writes = cluster.kube_writes_by(Identity::CloudControllerManager.username())?;
    anyhow::ensure!(
        ccm.try_exit().is_none(),
        "the CCM exited during the benchmark:\n{}",
        ccm.log()
    );

    let idle = Duration::from_secs(args.refresh_seconds * args.idle_periods);
    eprintln!(
        "measuring {}s idle ({} refresh periods)",
        idle.as_secs(),
        args.idle_periods
    );
    cloud.reset_request_counts().await?;
    let idle_end = Instant::now() + idle;
    // The idle window is the measurement itself: sample RSS while it passes.
    while Instant::now() < idle_end {
        peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let idle_calls = cloud.request_counts().await?;
    let idle_writes =
        cluster.kube_writes_by(Identity::CloudControllerManager.username())? - init_writes;
    peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
    anyhow::ensure!(
        ccm.try_exit().is_none(),
        "the CCM exited during the idle period:\n{}",
        ccm.log()
    );

    let get = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    let idle_list_pages = get(&idle_calls, "compute:GET /servers/detail");
    let report = json!({
        "benchmark": "bench-openstack-nodes",
        "nodes": total,
        "concurrent_node_syncs": args.concurrent_node_syncs,
        "refresh_period_seconds": args.refresh_seconds,
        "init_seconds": round(init_seconds, 2),
        "init_requests_by_service": by_service(&init_calls),
        "init_requests_by_call": init_calls,
        "init_kube_writes": init_writes,
        "init_kube_writes_per_node": round(init_writes as f64 / total as f64, 2),
        "idle_seconds": idle.as_secs(),
        "idle_refresh_periods": args.idle_periods,
        "idle_requests_by_service": by_service(&idle_calls),
        "idle_requests_by_call": idle_calls,
        "idle_nova_list_pages_per_refresh_period": round(idle_list_pages as f64 / args.idle_periods as f64, 2),
        "idle_kube_writes": idle_writes,
        "ccm_peak_rss_mib": round(peak_rss_kib as f64 / 1024.0, 1),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
