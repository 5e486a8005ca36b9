//! `make bench-dvp`: N VirtualMachines in the parent cluster (the platform simulator runs them)
//! and N uninitialised Nodes named by their hostname labels; measures how long
//! `--cloud-provider=dvp` (under the shipped parent Role) takes to initialise them all, the
//! parent API requests on VirtualMachines it makes (from the parent apiserver's own
//! `apiserver_request_total`, so not our metrics) during initialisation and while idle, its
//! Kubernetes writes and peak RSS; then creates LB_SERVICES LoadBalancer Services and measures
//! the lag from each parent Service getting its address to the tenant Service showing it.
//! Prints JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};
use serde_json::json;
use stratus_dvp_api::{VirtualMachine, VmPhase};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::dvp_fixture::DvpFixture;
use stratus_scenarios::dvp_rbac::parent_role_rules;
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::{service_fixture, wait_for};
use stratus_testenv::{DvpEnv, Identity};
use tokio::time::Instant;

#[derive(Parser)]
struct Args {
    /// VirtualMachines (and Nodes).
    #[arg(long, default_value_t = 500)]
    nodes: usize,
    /// LoadBalancer Services.
    #[arg(long, default_value_t = 50)]
    lb_services: usize,
    /// Seconds measured idle after initialisation.
    #[arg(long, default_value_t = 10)]
    idle_seconds: u64,
    /// `--concurrent-node-syncs` of the CCM.
    #[arg(long, default_value_t = 8)]
    concurrent_node_syncs: u16,
}

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

/// `apiserver_request_total` on VirtualMachines (main resource, not `status`), by verb.
async fn vm_requests(parent: &kube::Client) -> anyhow::Result<BTreeMap<String, u64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = parent.request_text(request).await?;
    let mut by_verb = BTreeMap::new();
    for line in text.lines() {
        if !line.starts_with("apiserver_request_total{")
            || !line.contains("resource=\"virtualmachines\"")
            || !line.contains("subresource=\"\"")
        {
            continue;
        }
        let verb = line
            .split("verb=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?")
            .to_string();
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *by_verb.entry(verb).or_insert(0) += n as u64;
    }
    Ok(by_verb)
}

fn delta(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

fn ingress_ip(svc: &Service) -> Option<String> {
    svc.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    eprintln!("starting the tenant and parent clusters");
    let env = DvpEnv::start().await?;
    let admin = env.tenant.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    let parent = env.parent_admin().await?;
    let vars = env
        .bound_account_env("stratus-dvp-cloud-controller-manager", parent_role_rules()?)
        .await?;

    eprintln!("creating {} VMs and waiting until they run", args.nodes);
    let fixture = DvpFixture::new(parent.clone(), env.namespace(), "bench");
    let names: Vec<(String, String)> = (0..args.nodes)
        .map(|i| (format!("vm-{i:05}"), format!("node-{i:05}")))
        .collect();
    let created = futures::stream::iter(&names)
        .map(|(vm, node)| fixture.create_vm(vm, node))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let vms = Api::<VirtualMachine>::namespaced(parent.clone(), env.namespace());
    let total = args.nodes;
    wait_for("all VMs running", Duration::from_secs(600), || async {
        let list = vms.list(&ListParams::default()).await?.items;
        let running = list
            .iter()
            .filter(|vm| vm.phase() == Some(VmPhase::Running) && vm.ip_address().is_some())
            .count();
        Ok((running == total).then_some(()))
    })
    .await?;
    kube_fixture::create_uninitialized_nodes(&admin, names.iter().map(|(_, n)| n.as_str())).await?;

    let before_init = vm_requests(&parent).await?;
    let ccm_args = vec![
        "--cloud-provider=dvp".to_string(),
        "--controllers=cloud-node,cloud-node-lifecycle,service".to_string(),
        format!("--concurrent-node-syncs={}", args.concurrent_node_syncs),
    ];
    eprintln!("starting the cloud-controller-manager");
    let started = Instant::now();
    let mut ccm = CcmProcess::start_on(
        &sibling_binary("cloud-controller-manager")?,
        &env.tenant,
        vars,
        &ccm_args,
    )?;
    let nodes: Api<Node> = Api::all(admin.clone());
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
    let after_init = vm_requests(&parent).await?;
    let init_writes = env
        .tenant
        .kube_writes_by(Identity::CloudControllerManager.username())?;

    eprintln!("measuring {}s idle", args.idle_seconds);
    let idle_end = Instant::now() + Duration::from_secs(args.idle_seconds);
    // The idle window is the measurement itself: sample RSS while it passes.
    while Instant::now() < idle_end {
        peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after_idle = vm_requests(&parent).await?;
    let idle_writes = env
        .tenant
        .kube_writes_by(Identity::CloudControllerManager.username())?
        - init_writes;

    eprintln!("creating {} LoadBalancer Services", args.lb_services);
    for (_, node) in names.iter().take(10) {
        service_fixture::set_ready(&admin, node, true).await?;
    }
    let lb_started = Instant::now();
    for i in 0..args.lb_services {
        service_fixture::create_lb_service(
            &admin,
            "default",
            &format!("svc-{i:03}"),
            &[80],
            BTreeMap::new(),
        )
        .await?;
    }
    let parent_services = Api::<Service>::namespaced(parent.clone(), env.namespace());
    let tenant_services = Api::<Service>::namespaced(admin.clone(), "default");
    let mut parent_seen: BTreeMap<String, Instant> = BTreeMap::new();
    let mut tenant_seen: BTreeMap<String, (Instant, String)> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while tenant_seen.len() < args.lb_services {
        anyhow::ensure!(
            Instant::now() < deadline,
            "not every Service got an ingress:\n{}",
            ccm.log()
        );
        let now = Instant::now();
        for svc in parent_services.list(&ListParams::default()).await?.items {
            if let Some(ip) = ingress_ip(&svc) {
                parent_seen.entry(ip).or_insert(now);
            }
        }
        for svc in tenant_services.list(&ListParams::default()).await?.items {
            if let Some(ip) = ingress_ip(&svc) {
                let name = svc.metadata.name.clone().unwrap_or_default();
                tenant_seen.entry(name).or_insert((now, ip));
            }
        }
        peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lb_seconds = lb_started.elapsed().as_secs_f64();
    let mut lags: Vec<f64> = tenant_seen
        .values()
        .map(|(at, ip)| {
            parent_seen
                .get(ip)
                .map_or(0.0, |p| at.saturating_duration_since(*p).as_secs_f64())
        })
        .collect();
    lags.sort_by(f64::total_cmp);
    anyhow::ensure!(ccm.try_exit().is_none(), "the CCM exited:\n{}", ccm.log());

    let report = json!({
        "benchmark": "bench-dvp",
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "nodes": total,
        "concurrent_node_syncs": args.concurrent_node_syncs,
        "init_seconds": round(init_seconds, 2),
        "init_parent_vm_requests_by_verb": delta(&after_init, &before_init),
        "init_kube_writes_per_node": round(init_writes as f64 / total as f64, 2),
        "idle_seconds": args.idle_seconds,
        "idle_parent_vm_requests_by_verb": delta(&after_idle, &after_init),
        "idle_kube_writes": idle_writes,
        "lb_services": args.lb_services,
        "lb_seconds_until_all_ingress": round(lb_seconds, 2),
        "lb_ingress_lag_after_parent_seconds_p50": round(percentile(&lags, 50.0), 3),
        "lb_ingress_lag_after_parent_seconds_p95": round(percentile(&lags, 95.0), 3),
        "lb_ingress_lag_after_parent_seconds_max": round(lags.last().copied().unwrap_or(0.0), 3),
        "ccm_peak_rss_mib": round(peak_rss_kib as f64 / 1024.0, 1),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
