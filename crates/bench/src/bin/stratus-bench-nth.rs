//! Node-termination-handler benchmark (JSON on stdout):
//! 1. IMDS mode: notice-to-cordon latency over `--notices` Spot notices, from the second the
//!    real amazon-ec2-metadata-mock starts answering the notice to the node watch showing the
//!    node cordoned (a fresh handler per notice: one notice per instance).
//! 2. Queue mode: `--nodes` nodes and instances, one Spot interruption each through
//!    EventBridge → SQS: seconds until every node is cordoned (its drain started) and the
//!    DescribeInstances calls made.
//! 3. Idle resident memory of the IMDS-mode handler.

use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use stratus_scenarios::ec2_fixture;
use stratus_scenarios::nth_fixture::{
    aws_config, create_node, nth_binary, tag_instances, EventQueue, NthCluster, NthProcess,
};
use stratus_testenv::tools::ec2_metadata_mock::Aemm;

#[derive(Parser)]
struct Args {
    /// Spot notices for the latency measurement.
    #[arg(long, default_value_t = 50)]
    notices: usize,
    /// Nodes (and messages) for the queue measurement; 0 skips it.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Seconds the IMDS-mode handler idles before its memory is read.
    #[arg(long, default_value_t = 20)]
    idle_seconds: u64,
    /// Kubernetes API rate of the queue-mode handler (1000 cordons do not fit upstream's 5/s).
    #[arg(long, default_value_t = 200.0)]
    kube_api_qps: f64,
}

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn imds_vars(node: &str, aemm: &Aemm) -> Vec<(&'static str, String)> {
    vec![
        ("NODE_NAME", node.to_owned()),
        ("INSTANCE_METADATA_URL", aemm.url().to_owned()),
        ("ENABLE_SCHEDULED_EVENT_DRAINING", "false".into()),
    ]
}

async fn imds_latency(cluster: &NthCluster, notices: usize) -> anyhow::Result<serde_json::Value> {
    let admin = &cluster.admin;
    let name = "ip-10-0-0-1.ec2.internal";
    create_node(admin, name, "aws:///us-east-1a/i-1234567890abcdef0").await?;
    let nodes: Api<Node> = Api::all(admin.clone());
    let bin = nth_binary()?;
    let mut latencies = Vec::with_capacity(notices);
    let mut aemm = Aemm::start(&[
        "spot",
        "-t",
        "2099-01-01T00:00:00Z",
        "--mock-trigger-time",
        "2099-01-01T00:00:00Z",
    ])
    .await?;
    for i in 0..notices {
        // The notice appears at a whole second 2-3 s ahead (AEMM's trigger has 1 s precision).
        let trigger = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + 3)?;
        let stamp = trigger.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let action_time = (trigger + jiff::SignedDuration::from_secs(120))
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        aemm.restart(&["spot", "-t", &action_time, "--mock-trigger-time", &stamp])
            .await?;
        let log = cluster.env.dir().join(format!("nth-bench-{i}.log"));
        let nth = NthProcess::start(&bin, &cluster.kubeconfig, &imds_vars(name, &aemm), &[], log)?;
        let mut stream =
            Box::pin(watcher::watch_object(nodes.clone(), name).map_err(anyhow::Error::from));
        let seen = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(node) = stream.try_next().await? {
                if node.as_ref().is_some_and(unschedulable) {
                    return anyhow::Ok(jiff::Timestamp::now());
                }
            }
            anyhow::bail!("the node watch ended")
        })
        .await
        .with_context(|| format!("notice {i}: not cordoned within 20 s:\n{}", nth.log()))??;
        let latency = seen.duration_since(trigger).as_secs_f64();
        latencies.push(latency);
        drop(nth);
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": { "unschedulable": false } })),
            )
            .await?;
        eprintln!("notice {i}: {:.0} ms", latency * 1000.0);
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    Ok(serde_json::json!({
        "notices": latencies.len(),
        "poll_interval_ms": 500,
        "p50_seconds": percentile(&latencies, 50.0),
        "p99_seconds": percentile(&latencies, 99.0),
        "max_seconds": latencies.last().copied().unwrap_or(f64::NAN),
        "target_p99_seconds": 1.0,
    }))
}

async fn idle_rss(cluster: &NthCluster, seconds: u64) -> anyhow::Result<serde_json::Value> {
    let name = "ip-10-0-0-2.ec2.internal";
    create_node(&cluster.admin, name, "aws:///us-east-1a/i-2").await?;
    let aemm = Aemm::start(&[
        "spot",
        "-t",
        "2099-01-01T00:00:00Z",
        "--mock-trigger-time",
        "2099-01-01T00:00:00Z",
    ])
    .await?;
    let mut vars = imds_vars(name, &aemm);
    vars.push(("ENABLE_SCHEDULED_EVENT_DRAINING", "true".into()));
    let nth = NthProcess::start(
        &nth_binary()?,
        &cluster.kubeconfig,
        &vars,
        &[],
        cluster.env.dir().join("nth-idle.log"),
    )?;
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some(kib) = nth.rss_kib() {
            samples.push(kib);
        }
    }
    let last = *samples.last().context("no RSS sample")?;
    let mib = |field: &str| {
        nth.status_kib(field)
            .map_or(f64::NAN, |k| k as f64 / 1024.0)
    };
    Ok(serde_json::json!({
        "idle_seconds": seconds,
        "rss_anon_mib": mib("RssAnon:"),
        "rss_file_mib": mib("RssFile:"),
        "rss_mib": last as f64 / 1024.0,
        "peak_rss_mib": samples.iter().max().copied().unwrap_or(0) as f64 / 1024.0,
        "target_mib": 8.0,
    }))
}

async fn queue(cluster: &NthCluster, count: usize, qps: f64) -> anyhow::Result<serde_json::Value> {
    let admin = &cluster.admin;
    let endpoint = cluster.env.aws_endpoint().to_owned();
    let conf = aws_config(&endpoint).await;
    let ec2 = ec2_fixture::client(&endpoint).await;
    let subnet = ec2_fixture::subnet(&ec2, "us-east-1a").await?;
    let instances =
        ec2_fixture::launch_many(&ec2, &subnet, "us-east-1a", count, None, "m5.large").await?;
    let ids: Vec<String> = instances.iter().map(|i| i.id.clone()).collect();
    tag_instances(&ec2, &ids, "aws-node-termination-handler/managed", "").await?;
    futures::stream::iter(&instances)
        .map(|i| async move {
            let provider_id = format!("aws:///{}/{}", i.zone, i.id);
            create_node(admin, &i.private_dns, &provider_id).await
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    let queue = EventQueue::create(&conf, "nth-bench").await?;
    cluster.env.reset_aws_request_counts().await?;
    let vars = vec![
        ("ENABLE_SQS_TERMINATION_DRAINING", "true".to_owned()),
        ("QUEUE_URL", queue.url.clone()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ENDPOINT", endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ("NAMESPACE", "kube-system".into()),
        ("KUBE_API_QPS", qps.to_string()),
        ("KUBE_API_BURST", ((qps * 2.0) as u64).to_string()),
    ];
    let nth = NthProcess::start(
        &nth_binary()?,
        &cluster.kubeconfig,
        &vars,
        &[],
        cluster.env.dir().join("nth-queue.log"),
    )?;
    // Let it take the lease and prefetch the instances.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let nodes: Api<Node> = Api::all(admin.clone());
    let names: BTreeSet<String> = instances.iter().map(|i| i.private_dns.clone()).collect();
    let watch = {
        let names = names.clone();
        tokio::spawn(async move {
            let mut cordoned = BTreeSet::new();
            let mut stream =
                Box::pin(watcher::watcher(nodes, watcher::Config::default()).applied_objects());
            while let Some(Ok(node)) = stream.next().await {
                let name = node.metadata.name.clone().unwrap_or_default();
                if names.contains(&name) && unschedulable(&node) {
                    cordoned.insert(name);
                    if cordoned.len() == names.len() {
                        return Instant::now();
                    }
                }
            }
            Instant::now()
        })
    };
    let start = Instant::now();
    for chunk in ids.chunks(10) {
        let entries: Vec<_> = chunk
            .iter()
            .map(|id| {
                aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                    .source("aws.ec2")
                    .detail_type("EC2 Spot Instance Interruption Warning")
                    .detail(
                        serde_json::json!({ "instance-id": id, "instance-action": "terminate" })
                            .to_string(),
                    )
                    .build()
            })
            .collect();
        queue
            .events
            .put_events()
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    let put_seconds = start.elapsed().as_secs_f64();
    let done = tokio::time::timeout(Duration::from_secs(300), watch)
        .await
        .with_context(|| {
            format!(
                "not every node cordoned within 300 s:\n{}",
                nth.log()
                    .lines()
                    .rev()
                    .take(30)
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        })??;
    let seconds = done.duration_since(start).as_secs_f64();
    let counts = cluster.env.aws_request_counts().await?;
    let describes = counts.get("ec2:DescribeInstances").copied().unwrap_or(0);
    Ok(serde_json::json!({
        "messages": count,
        "nodes": count,
        "put_events_seconds": put_seconds,
        "seconds_until_every_drain_started": seconds,
        "target_seconds": 30,
        "describe_instances_calls": describes,
        "describe_instances_per_100_messages": describes as f64 * 100.0 / count as f64,
        "target_per_100_messages": 1,
        "kube_api_qps": qps,
        "aws_requests": counts,
    }))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cluster = NthCluster::start().await?;
    let imds = imds_latency(&cluster, args.notices).await?;
    let rss = idle_rss(&cluster, args.idle_seconds).await?;
    let queue = if args.nodes > 0 {
        queue(&cluster, args.nodes, args.kube_api_qps).await?
    } else {
        serde_json::Value::Null
    };
    let report = serde_json::json!({
        "benchmark": "node-termination-handler",
        "imds_notice_to_cordon": imds,
        "imds_idle_memory": rss,
        "queue": queue,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
