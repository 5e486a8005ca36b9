//! `make bench-nodes`: N uninitialised Nodes backed by N moto instances, kept Ready as kubelets
//! keep them (a status report per node every report period); measures how long the
//! cloud-controller-manager takes to initialise them all, what it costs in EC2 requests (counted
//! at the emulator's proxy) and Kubernetes writes (counted from the apiserver audit log), then
//! the EC2 requests of a following idle window (≥ 6 minutes by default, so that periodic
//! re-lists fall into it), and the CCM's peak RSS at the end of initialisation and over the
//! whole run. Prints JSON. With `--tags`, the tagging controller runs too, and the nodes count
//! as done once their instances are tagged (the label recording it is set): the report adds the
//! CreateTags/DeleteTags calls of the join and of the idle window (`make bench-tagging`).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;
use stratus_scenarios::ccm::{sibling_binary, write_cloud_config, CcmProcess};
use stratus_scenarios::ec2_fixture;
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::kubelet::{self, Kubelets};
use stratus_testenv::{Identity, TestEnv};

const CLUSTER: &str = "bench";

#[derive(Parser)]
struct Args {
    /// Nodes (and instances).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Seconds of idle time measured after initialisation (6.5 minutes: more than one full
    /// re-list period of the CCM's default).
    #[arg(long, env = "STRATUS_BENCH_IDLE_SECONDS", default_value_t = 390)]
    idle_seconds: u64,
    /// Seconds between two status reports of one node's kubelet (kubelet's
    /// `nodeStatusReportFrequency` is 5 minutes; shorter means more Node updates for the CCM to
    /// watch). 0: nodes report Ready once and never again.
    #[arg(long, default_value_t = 60)]
    status_report_seconds: u64,
    /// `--concurrent-node-syncs` of the CCM.
    #[arg(long, default_value_t = 8)]
    concurrent_node_syncs: u16,
    /// `--instance-cache-refresh-period` of the CCM (its default when not given).
    #[arg(long)]
    cache_refresh: Option<String>,
    /// Also run the tagging controller with these `--tags` (key=value,…) on `instance`.
    #[arg(long)]
    tags: Option<String>,
}

/// The tagging controller's record of the tags applied (upstream's label).
const TAGGED_LABEL: &str = "k8s.io/cloud-provider-aws";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let env = TestEnv::start().await?;
    let admin = env.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, "us-east-1a").await?;

    eprintln!(
        "launching {} instances and registering their nodes",
        args.nodes
    );
    let launched = ec2_fixture::launch_many(
        &ec2,
        &subnet,
        "us-east-1a",
        args.nodes,
        Some(CLUSTER),
        "m5.large",
    )
    .await?;
    kube_fixture::create_uninitialized_nodes(
        &admin,
        launched.iter().map(|i| i.private_dns.as_str()),
    )
    .await?;
    // Kubelets report their nodes Ready as soon as they register (the cloud's initialisation
    // taint does not stop them), then every report period.
    let names: Vec<String> = launched.iter().map(|i| i.private_dns.clone()).collect();
    kubelet::report_all_ready(&admin, &names, 16).await?;
    let kubelets = (args.status_report_seconds > 0).then(|| {
        Kubelets::start(
            &admin,
            names,
            Duration::from_secs(args.status_report_seconds),
        )
    });

    env.reset_aws_request_counts().await?;
    let config = write_cloud_config(env.dir(), CLUSTER)?;
    let mut ccm_args = vec![
        "--cloud-provider=aws".to_string(),
        format!("--cloud-config={}", config.display()),
        format!("--concurrent-node-syncs={}", args.concurrent_node_syncs),
    ];
    if let Some(period) = &args.cache_refresh {
        ccm_args.push(format!("--instance-cache-refresh-period={period}"));
    }
    if let Some(tags) = &args.tags {
        ccm_args.push("--controllers=*,tagging".into());
        ccm_args.push(format!("--tags={tags}"));
        ccm_args.push("--resources=instance".into());
    }
    let tagging = args.tags.is_some();
    eprintln!("starting the cloud-controller-manager");
    let started = Instant::now();
    let mut ccm = CcmProcess::start(
        &sibling_binary("cloud-controller-manager")?,
        &env,
        &ccm_args,
    )?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let total = args.nodes;
    let mut peak_rss_kib = 0;
    // A watch, not a polling list: listing 1000 Nodes every 100 ms would load the apiserver
    // the CCM shares and slow what is measured.
    let mut initialised = HashSet::new();
    let mut tagged = HashSet::new();
    let mut events = std::pin::pin!(watcher(nodes.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects());
    let mut rss_tick = tokio::time::interval(Duration::from_millis(100));
    let deadline = tokio::time::sleep(Duration::from_secs(600));
    tokio::pin!(deadline);
    while initialised.len() < total || (tagging && tagged.len() < total) {
        tokio::select! {
            event = events.next() => {
                let node = event
                    .context("the Node watch ended")?
                    .context("watching Nodes")?;
                let name = node.metadata.name.clone().unwrap_or_default();
                if kube_fixture::label(&node, TAGGED_LABEL).is_some() {
                    tagged.insert(name.clone());
                }
                if has_taint(&node, UNINITIALIZED) {
                    initialised.remove(&name);
                } else {
                    initialised.insert(name);
                }
            }
            _ = rss_tick.tick() => {
                peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
            }
            _ = &mut deadline => anyhow::bail!(
                "timed out after 600 s: {} of {total} nodes initialised, {} tagged\n{}",
                initialised.len(),
                tagged.len(),
                ccm.log()
            ),
        }
    }
    let init_seconds = started.elapsed().as_secs_f64();
    let init_peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
    let init_ec2 = env.aws_request_counts().await?;
    let init_writes = env.kube_writes_by(Identity::CloudControllerManager.username())?;
    anyhow::ensure!(
        ccm.try_exit().is_none(),
        "the CCM exited during the benchmark:\n{}",
        ccm.log()
    );

    eprintln!("measuring {} idle seconds", args.idle_seconds);
    env.reset_aws_request_counts().await?;
    let idle_started = Instant::now();
    let idle_end = idle_started + Duration::from_secs(args.idle_seconds);
    // The idle window is the measurement itself: sample RSS while it passes.
    while Instant::now() < idle_end {
        peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let idle_ec2 = env.aws_request_counts().await?;
    let idle_writes =
        env.kube_writes_by(Identity::CloudControllerManager.username())? - init_writes;
    peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
    let end_rss_kib = ccm.rss_kib().unwrap_or(0);
    let (end_anon_kib, end_file_kib) = ccm.rss_anon_file_kib().unwrap_or_default();
    let kubelet_stats = match kubelets {
        Some(k) => k.stop().await,
        None => Default::default(),
    };
    anyhow::ensure!(
        ccm.try_exit().is_none(),
        "the CCM exited during the idle window:\n{}",
        ccm.log()
    );

    let mib = |kib: u64| (kib as f64 / 1024.0 * 10.0).round() / 10.0;
    let sum = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    let op = |m: &BTreeMap<String, u64>, name: &str| m.get(name).copied().unwrap_or(0);
    let tagging_report = tagging.then(|| {
        let creates = op(&init_ec2, "ec2:CreateTags");
        json!({
            "tags": args.tags,
            "join_create_tags_calls": creates,
            "join_delete_tags_calls": op(&init_ec2, "ec2:DeleteTags"),
            "join_create_tags_calls_per_node": (creates as f64 / total as f64 * 10000.0).round() / 10000.0,
            "nodes_tagged_per_create_tags_call": (total as f64 / creates.max(1) as f64 * 10.0).round() / 10.0,
            "idle_create_tags_calls": op(&idle_ec2, "ec2:CreateTags"),
            "idle_delete_tags_calls": op(&idle_ec2, "ec2:DeleteTags"),
        })
    });
    let report = json!({
        "benchmark": if tagging { "bench-tagging" } else { "bench-nodes" },
        "nodes": total,
        "concurrent_node_syncs": args.concurrent_node_syncs,
        "init_seconds": (init_seconds * 100.0).round() / 100.0,
        "init_ec2_requests": sum(&init_ec2),
        "init_ec2_requests_by_action": init_ec2,
        "init_ec2_requests_per_100_nodes": (sum(&init_ec2) as f64 * 100.0 / total as f64 * 100.0).round() / 100.0,
        "init_kube_writes": init_writes,
        "init_kube_writes_per_node": (init_writes as f64 / total as f64 * 100.0).round() / 100.0,
        "ccm_peak_rss_mib": mib(peak_rss_kib),
        "ccm_peak_rss_init_mib": mib(init_peak_rss_kib),
        "ccm_rss_at_end_mib": mib(end_rss_kib),
        "ccm_rss_at_end_anon_mib": mib(end_anon_kib),
        "ccm_rss_at_end_file_mib": mib(end_file_kib),
        "idle_seconds": args.idle_seconds,
        "status_report_seconds": args.status_report_seconds,
        "kubelet_status_reports": kubelet_stats.reports,
        "kubelet_status_report_failures": kubelet_stats.failures,
        "idle_ec2_requests": sum(&idle_ec2),
        "idle_ec2_requests_by_action": idle_ec2,
        "idle_ec2_requests_per_5_minutes": (sum(&idle_ec2) as f64 * 300.0 / args.idle_seconds.max(1) as f64 * 100.0).round() / 100.0,
        "idle_kube_writes": idle_writes,
        "tagging": tagging_report,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
