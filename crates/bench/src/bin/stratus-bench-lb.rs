//! `make bench-lb`: N ready Nodes backed by moto instances, then S LoadBalancer Services created
//! at once; measures how long the cloud-controller-manager takes until every Service has its
//! Classic ELB hostname, what that costs in AWS requests (counted at the emulator's proxy) and
//! Kubernetes writes (apiserver audit log). Then C nodes join at once; measures how long until
//! every ELB has them all registered and what that churn costs per load balancer. Prints JSON;
//! a phase that misses its deadline is reported as such (with the CCM's Warning Events) and
//! makes the exit status non-zero.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;
use stratus_scenarios::ccm::{sibling_binary, write_cloud_config, CcmProcess};
use stratus_scenarios::ec2_fixture::{self, Launched};
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::service_fixture::{create_lb_service, create_ready_node, ingress_hostname};
use stratus_scenarios::{kube_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};

const CLUSTER: &str = "bench";
const ZONE: &str = "us-east-1a";
const NS: &str = "default";
/// Reason of the Event the CCM publishes after changing a load balancer's targets.
const UPDATED: &str = "UpdatedLoadBalancer";

#[derive(Parser)]
struct Args {
    /// LoadBalancer Services created at once.
    #[arg(long, default_value_t = 100)]
    services: usize,
    /// Ready nodes (and instances) before the Services are created.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Nodes that join at once after every load balancer is ready.
    #[arg(long, default_value_t = 20)]
    churn: usize,
    /// `--concurrent-service-syncs` of the CCM.
    #[arg(long, default_value_t = 8)]
    concurrent_service_syncs: u16,
    /// `--node-churn-quiet-period` of the CCM.
    #[arg(long, default_value = "1s")]
    node_churn_quiet_period: String,
    /// `--instance-cache-refresh-period` of the CCM.
    #[arg(long, default_value = "1m0s")]
    cache_refresh: String,
    /// A phase that has not finished after this many seconds is reported as incomplete.
    #[arg(long, default_value_t = 180)]
    deadline_seconds: u64,
    /// One pre-made security group for every ELB (`ElbSecurityGroup` in the cloud config) instead
    /// of one managed group per ELB. The nodes' group then needs one rule, not one per ELB.
    #[arg(long)]
    shared_elb_security_group: bool,
    /// Copy the CCM's log (`--v=2`) here at the end, for looking into where time went.
    #[arg(long)]
    ccm_log: Option<std::path::PathBuf>,
}

/// Rounds to two decimals for the report.
fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The counts of one AWS service (`ec2`, `elasticloadbalancing`), by action.
fn of_service(counts: &BTreeMap<String, u64>, service: &str) -> BTreeMap<String, u64> {
    counts
        .iter()
        .filter(|(k, _)| k.split(':').next() == Some(service))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn sum(m: &BTreeMap<String, u64>) -> u64 {
    m.values().sum()
}

/// The `q`-quantile (0..=1) of sorted seconds.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Launches `n` instances in `subnet` and puts each in the node security group.
async fn launch_nodes(
    ec2: &aws_sdk_ec2::Client,
    subnet: &str,
    group: &str,
    n: usize,
) -> anyhow::Result<Vec<Launched>> {
    let mut launched = Vec::with_capacity(n);
    while launched.len() < n {
        let batch = (n - launched.len()).min(250) as i32;
        launched.extend(
            ec2_fixture::launch(ec2, subnet, ZONE, batch, Some(CLUSTER), "m5.large").await?,
        );
    }
    let groups = [group.to_string()];
    let set = futures::stream::iter(launched.iter())
        .map(|i| ec2_fixture::set_instance_groups(ec2, &i.id, &groups))
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    for r in set {
        r?;
    }
    Ok(launched)
}

/// Creates one ready Node per instance, all at once.
async fn create_nodes(admin: &kube::Client, launched: &[Launched]) -> anyhow::Result<()> {
    let created = futures::future::join_all(launched.iter().map(|i| async move {
        let provider_id = format!("aws:///{ZONE}/{}", i.id);
        create_ready_node(admin, &i.private_dns, &provider_id, BTreeMap::new()).await
    }))
    .await;
    for r in created {
        r?;
    }
    Ok(())
}

/// How many times an Event stands for (its series count, else once).
fn occurrences(e: &Event) -> u64 {
    e.series
        .as_ref()
        .map_or(1, |s| u64::try_from(s.count).unwrap_or(1))
}

/// Every Event (events.k8s.io/v1) in the cluster.
async fn all_events(admin: &kube::Client) -> anyhow::Result<Vec<Event>> {
    Ok(Api::<Event>::all(admin.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

/// The CCM's Warning Events: reason → (count, one note).
async fn warnings(admin: &kube::Client) -> anyhow::Result<BTreeMap<String, (u64, String)>> {
    let mut out: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for e in all_events(admin).await? {
        if e.type_.as_deref() != Some("Warning") {
            continue;
        }
        let entry = out
            .entry(e.reason.clone().unwrap_or_default())
            .or_insert_with(|| (0, e.note.clone().unwrap_or_default()));
        entry.0 += occurrences(&e);
    }
    Ok(out)
}

/// Events with `reason` about Services in the bench namespace: Service name → occurrences.
async fn reason_counts(
    admin: &kube::Client,
    reason: &str,
) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for e in all_events(admin).await? {
        let Some(about) = e.regarding.as_ref() else {
            continue;
        };
        if e.reason.as_deref() == Some(reason)
            && about.kind.as_deref() == Some("Service")
            && about.namespace.as_deref() == Some(NS)
        {
            *out.entry(about.name.clone().unwrap_or_default())
                .or_insert(0) += occurrences(&e);
        }
    }
    Ok(out)
}

/// Registered instance counts of every Classic ELB, by name.
async fn registered_counts(lbs: &LbClients) -> anyhow::Result<BTreeMap<String, usize>> {
    let mut out = BTreeMap::new();
    let mut marker: Option<String> = None;
    loop {
        let page = lbs
            .elb
            .describe_load_balancers()
            .page_size(400)
            .set_marker(marker.take())
            .send()
            .await?;
        for d in page.load_balancer_descriptions() {
            if let Some(name) = d.load_balancer_name() {
                out.insert(name.to_string(), d.instances().len());
            }
        }
        match page.next_marker() {
            Some(m) if !m.is_empty() => marker = Some(m.to_string()),
            _ => return Ok(out),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let deadline = Duration::from_secs(args.deadline_seconds);
    let env = TestEnv::start().await?;
    let admin = env.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let lbs = LbClients::new(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let vpc = ec2_fixture::make_public(&ec2, &subnet).await?;
    let node_group = ec2_fixture::node_security_group(&ec2, &subnet, CLUSTER).await?;

    eprintln!(
        "launching {} instances and registering their ready nodes",
        args.nodes
    );
    let launched = launch_nodes(&ec2, &subnet, &node_group, args.nodes).await?;
    create_nodes(&admin, &launched).await?;

    let config = write_cloud_config(env.dir(), CLUSTER)?;
    if args.shared_elb_security_group {
        let group = ec2
            .create_security_group()
            .vpc_id(&vpc)
            .group_name("elb-shared")
            .description("every ELB of the cluster")
            .send()
            .await?
            .group_id()
            .context("group id")?
            .to_string();
        let text = std::fs::read_to_string(&config)?;
        std::fs::write(&config, format!("{text}ElbSecurityGroup = {group}\n"))?;
    }
    env.reset_aws_request_counts().await?;
    let ccm_args = vec![
        "--cloud-provider=aws".to_string(),
        format!("--cloud-config={}", config.display()),
        "--controllers=service".to_string(),
        format!(
            "--concurrent-service-syncs={}",
            args.concurrent_service_syncs
        ),
        format!("--node-churn-quiet-period={}", args.node_churn_quiet_period),
        format!("--instance-cache-refresh-period={}", args.cache_refresh),
        "--v=2".to_string(),
    ];
    eprintln!("starting the cloud-controller-manager");
    let mut ccm = CcmProcess::start(
        &sibling_binary("cloud-controller-manager")?,
        &env,
        &ccm_args,
    )?;
    let mut peak_rss_kib = 0;
    wait_for("the CCM running", Duration::from_secs(60), || {
        let log = ccm.log();
        async move {
            Ok(log
                .contains("cloud-controller-manager running")
                .then_some(()))
        }
    })
    .await
    .with_context(|| ccm.log())?;

    eprintln!("creating {} LoadBalancer Services at once", args.services);
    let names: Vec<String> = (0..args.services).map(|i| format!("svc-{i:03}")).collect();
    let started = Instant::now();
    let created = futures::future::join_all(
        names
            .iter()
            .map(|n| create_lb_service(&admin, NS, n, &[80], BTreeMap::new())),
    )
    .await;
    for r in created {
        r?;
    }
    let created_seconds = started.elapsed().as_secs_f64();
    let services: Api<Service> = Api::namespaced(admin.clone(), NS);
    let ready_at: Arc<Mutex<BTreeMap<String, f64>>> = Arc::default();
    let total = args.services;
    let all_ready = wait_for("every Service has an ingress", deadline, || {
        peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        let services = services.clone();
        let ready_at = ready_at.clone();
        async move {
            let list = services.list(&ListParams::default()).await?.items;
            let now = started.elapsed().as_secs_f64();
            let mut ready_at = ready_at.lock().expect("ready_at lock");
            for s in list.iter().filter(|s| ingress_hostname(s).is_some()) {
                let name = s.metadata.name.clone().unwrap_or_default();
                ready_at.entry(name).or_insert(now);
            }
            Ok((ready_at.len() == total).then_some(()))
        }
    })
    .await;
    let ready_seconds = all_ready
        .is_ok()
        .then(|| r2(started.elapsed().as_secs_f64()));
    let create_counts = env.aws_request_counts().await?;
    let create_writes = env.kube_writes_by(Identity::CloudControllerManager.username())?;
    let create_warnings = warnings(&admin).await?;
    let mut ready_times: Vec<f64> = ready_at
        .lock()
        .expect("ready_at lock")
        .values()
        .copied()
        .collect();
    ready_times.sort_by(f64::total_cmp);
    if let Some(status) = ccm.try_exit() {
        anyhow::bail!(
            "the CCM exited ({status}) during the benchmark:\n{}",
            ccm.log()
        );
    }
    let create_elb = of_service(&create_counts, "elasticloadbalancing");
    let create_ec2 = of_service(&create_counts, "ec2");
    let per_lb = |n: u64| r2(n as f64 / total as f64);
    let mut report = json!({
        "benchmark": "bench-lb",
        "services": total,
        "nodes": args.nodes,
        "churn_nodes": args.churn,
        "concurrent_service_syncs": args.concurrent_service_syncs,
        "node_churn_quiet_period": args.node_churn_quiet_period,
        "elb_security_group": if args.shared_elb_security_group { "shared" } else { "managed (one per ELB)" },
        "create_services_seconds": r2(created_seconds),
        "ready_services": ready_times.len(),
        "ready_seconds": ready_seconds,
        "ready_seconds_first": ready_times.first().copied().map(r2),
        "ready_seconds_p50": r2(quantile(&ready_times, 0.5)),
        "ready_seconds_p90": r2(quantile(&ready_times, 0.9)),
        "ready_seconds_last": ready_times.last().copied().map(r2),
        "create_elb_requests": sum(&create_elb),
        "create_elb_requests_per_lb": per_lb(sum(&create_elb)),
        "create_elb_requests_by_action": create_elb,
        "create_ec2_requests": sum(&create_ec2),
        "create_ec2_requests_by_action": create_ec2,
        "create_kube_writes": create_writes,
        "create_kube_writes_per_service": per_lb(create_writes),
        "create_warnings": create_warnings,
    });

    let mut complete = all_ready.is_ok();
    if complete {
        eprintln!("{} nodes join at once", args.churn);
        let churn_instances = launch_nodes(&ec2, &subnet, &node_group, args.churn).await?;
        let before = reason_counts(&admin, UPDATED).await?;
        env.reset_aws_request_counts().await?;
        let churn_started = Instant::now();
        create_nodes(&admin, &churn_instances).await?;
        let want = args.nodes + args.churn;
        // Watched at the apiserver first (the CCM reports each target update with an Event), so
        // polling the single-threaded emulator does not slow down the CCM's own requests; the
        // ELBs are then checked in moto.
        let first_update: Arc<Mutex<Option<f64>>> = Arc::default();
        let reported = wait_for(
            "an UpdatedLoadBalancer Event for every Service",
            deadline,
            || {
                peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
                let (admin, before, names) = (&admin, &before, &names);
                let first_update = first_update.clone();
                async move {
                    let now = reason_counts(admin, UPDATED).await?;
                    let updated = names
                        .iter()
                        .filter(|n| now.get(*n).unwrap_or(&0) > before.get(*n).unwrap_or(&0))
                        .count();
                    let mut first_update = first_update.lock().expect("first_update lock");
                    if first_update.is_none() && updated > 0 {
                        *first_update = Some(churn_started.elapsed().as_secs_f64());
                    }
                    Ok((updated == total).then_some(()))
                }
            },
        )
        .await;
        let reported_seconds = reported
            .is_ok()
            .then(|| r2(churn_started.elapsed().as_secs_f64()));
        let lbs = &lbs;
        let left = deadline
            .saturating_sub(churn_started.elapsed())
            .max(Duration::from_secs(10));
        let churned = wait_for("every ELB has the new nodes", left, || async move {
            let counts = registered_counts(lbs).await?;
            Ok((counts.len() == total && counts.values().all(|n| *n == want)).then_some(()))
        })
        .await;
        let churn_seconds = churned
            .is_ok()
            .then(|| r2(churn_started.elapsed().as_secs_f64()));
        complete = churned.is_ok();
        let churn_counts = env.aws_request_counts().await?;
        let churn_writes =
            env.kube_writes_by(Identity::CloudControllerManager.username())? - create_writes;
        let churn_lbs_complete = registered_counts(lbs)
            .await?
            .values()
            .filter(|n| **n == want)
            .count();
        let churn_elb = of_service(&churn_counts, "elasticloadbalancing");
        let churn_ec2 = of_service(&churn_counts, "ec2");
        let churn = json!({
            "churn_seconds": churn_seconds,
            "churn_first_update_seconds": first_update.lock().expect("first_update lock").map(r2),
            "churn_all_updates_reported_seconds": reported_seconds,
            "churn_lbs_complete": churn_lbs_complete,
            "churn_elb_requests": sum(&churn_elb),
            "churn_elb_requests_per_lb": per_lb(sum(&churn_elb)),
            "churn_elb_requests_by_action": churn_elb,
            "churn_ec2_requests": sum(&churn_ec2),
            "churn_ec2_requests_by_action": churn_ec2,
            "churn_kube_writes": churn_writes,
        });
        if let (Some(r), Some(c)) = (report.as_object_mut(), churn.as_object()) {
            r.extend(c.clone());
        }
    } else {
        report["churn_seconds"] = json!(null);
        report["churn_skipped"] = json!("not every Service got its load balancer");
    }
    peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
    report["ccm_peak_rss_mib"] = json!((peak_rss_kib as f64 / 1024.0 * 10.0).round() / 10.0);
    if let Some(path) = &args.ccm_log {
        std::fs::write(path, ccm.log()).with_context(|| format!("write {}", path.display()))?;
    }
    if let Some(status) = ccm.try_exit() {
        anyhow::bail!(
            "the CCM exited ({status}) during the benchmark:\n{}",
            ccm.log()
        );
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    if !complete {
        // An expected outcome, not a crash: no backtrace. Stop the CCM and the environment
        // first, as exiting skips destructors.
        drop(ccm);
        drop(env);
        eprintln!(
            "a phase missed its {}s deadline (see the report)",
            args.deadline_seconds
        );
        std::process::exit(1);
    }
    Ok(())
}
