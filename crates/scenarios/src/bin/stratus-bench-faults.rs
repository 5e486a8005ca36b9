//! `make bench-faults`: N uninitialised Nodes join and M LoadBalancer Services are created while
//! the AWS proxy throttles a share of EC2 and ELB requests for a period; measures convergence,
//! duplicates, the request rate per second (at the proxy) and the CCM's own rate-limiter budget
//! (from its /metrics), and draws requests per second over time as SVG. Prints JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};
use serde_json::json;
use stratus_scenarios::ccm::{sibling_binary, write_cloud_config, CcmProcess};
use stratus_scenarios::ec2_fixture;
use stratus_scenarios::https::{self, Trust};
use stratus_scenarios::kube_fixture::{self, has_taint, UNINITIALIZED};
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::service_fixture::{create_lb_service, create_ready_node, ingress_hostname};
use stratus_scenarios::svg_chart::{line_chart, Series};
use stratus_testenv::proxy::{Fault, FaultKind};
use stratus_testenv::{Identity, TestEnv};

const CLUSTER: &str = "bench-faults";
const ZONE: &str = "us-east-1a";

#[derive(Parser)]
struct Args {
    /// Nodes that join (uninitialised, each backed by an instance).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// LoadBalancer Services created at the same time.
    #[arg(long, default_value_t = 50)]
    services: usize,
    /// Share of EC2 and ELB requests answered with a throttling error during the period.
    #[arg(long, default_value_t = 0.3)]
    throttle_rate: f64,
    /// Length of the throttled period, from the CCM's start.
    #[arg(long, default_value_t = 30)]
    throttle_seconds: u64,
    /// Where the SVG chart goes.
    #[arg(long, default_value = "bench/results/bench-faults.svg")]
    svg: PathBuf,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `stratus_aws_rate_limiter_rate_millicalls_per_second{class=..,service=..}` values, in calls/s.
fn limiter_rates(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("stratus_aws_rate_limiter_rate_millicalls_per_second{"))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once(' ')?;
            let labels = labels.split_once('{')?.1.trim_end_matches('}');
            let mut class = "";
            let mut service = "";
            for pair in labels.split(',') {
                let (k, v) = pair.split_once('=')?;
                match k {
                    "class" => class = v.trim_matches('"'),
                    "service" => service = v.trim_matches('"'),
                    _ => {}
                }
            }
            Some((
                format!("{service}:{class}"),
                value.parse::<f64>().ok()? / 1000.0,
            ))
        })
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let env = TestEnv::start().await?;
    let admin = env.kube_client(Identity::Admin).await?;
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await?;
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    ec2_fixture::make_public(&ec2, &subnet).await?;
    let node_group = ec2_fixture::node_security_group(&ec2, &subnet, CLUSTER).await?;
    let lbs = LbClients::new(env.moto_endpoint()).await;

    eprintln!("launching {} instances", args.nodes + 2);
    let launched = ec2_fixture::launch_many(
        &ec2,
        &subnet,
        ZONE,
        args.nodes + 2,
        Some(CLUSTER),
        "m5.large",
    )
    .await?;
    // Two ready nodes are the load balancers' targets; the rest join uninitialised.
    let (targets, joining) = launched.split_at(2);
    for i in targets {
        ec2_fixture::set_instance_groups(&ec2, &i.id, std::slice::from_ref(&node_group)).await?;
        create_ready_node(
            &admin,
            &i.private_dns,
            &format!("aws:///{ZONE}/{}", i.id),
            BTreeMap::new(),
        )
        .await?;
    }

    let port = free_port()?;
    let config = write_cloud_config(env.dir(), CLUSTER)?;
    let ccm_args = vec![
        "--cloud-provider=aws".to_string(),
        format!("--cloud-config={}", config.display()),
        "--controllers=cloud-node,service".to_string(),
        "--concurrent-node-syncs=8".to_string(),
        "--concurrent-service-syncs=8".to_string(),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".to_string(),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_string(),
    ];
    env.reset_aws_request_counts().await?;
    env.set_aws_faults(&[
        Fault {
            service: Some("ec2".into()),
            action: None,
            kind: FaultKind::Throttle,
            rate: args.throttle_rate,
        },
        Fault {
            service: Some("elasticloadbalancing".into()),
            action: None,
            kind: FaultKind::Throttle,
            rate: args.throttle_rate,
        },
    ])
    .await?;
    eprintln!(
        "starting the CCM; {} nodes join and {} Services are created; {:.0} % throttled for {} s",
        args.nodes,
        args.services,
        args.throttle_rate * 100.0,
        args.throttle_seconds
    );
    let started = Instant::now();
    let throttle_until = started + Duration::from_secs(args.throttle_seconds);
    let mut ccm = CcmProcess::start(
        &sibling_binary("cloud-controller-manager")?,
        &env,
        &ccm_args,
    )?;
    kube_fixture::create_uninitialized_nodes(
        &admin,
        joining.iter().map(|i| i.private_dns.as_str()),
    )
    .await?;
    let mut lb_names = BTreeSet::new();
    for i in 0..args.services {
        let svc = create_lb_service(
            &admin,
            "default",
            &format!("web-{i}"),
            &[80],
            BTreeMap::new(),
        )
        .await?;
        lb_names.insert(stratus_scenarios::service_fixture::load_balancer_name(&svc));
    }

    // Sample once a second until everything converged: limiter budgets from /metrics, RSS.
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let nodes: Api<Node> = Api::all(admin.clone());
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
    let mut limiter: Vec<(f64, BTreeMap<String, f64>)> = Vec::new();
    let mut peak_rss_kib = 0;
    let mut throttled_until = None;
    let converged_at = loop {
        anyhow::ensure!(ccm.try_exit().is_none(), "the CCM exited:\n{}", ccm.log());
        let now = Instant::now();
        if throttled_until.is_none() && now >= throttle_until {
            env.set_aws_faults(&[]).await?;
            throttled_until = Some(now.duration_since(started).as_secs_f64());
        }
        peak_rss_kib = peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        if let Ok(a) = https::get(addr, "/metrics", None, &Trust::Any).await {
            limiter.push((
                now.duration_since(started).as_secs_f64(),
                limiter_rates(&a.body),
            ));
        }
        let done_nodes = nodes
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|n| !has_taint(n, UNINITIALIZED))
            .count();
        let done_services = services
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|s| ingress_hostname(s).is_some())
            .count();
        if done_nodes == args.nodes + 2
            && done_services == args.services
            && throttled_until.is_some()
        {
            break now.duration_since(started).as_secs_f64();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "no convergence in 15 min:\n{}",
            ccm.log()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let throttled_until = throttled_until.unwrap_or(converged_at);

    // Duplicates: exactly one ELB and one managed group per Service.
    let made: BTreeSet<String> = lbs.classic_names().await?.into_iter().collect();
    let groups = ec2_fixture::security_groups_named(&ec2, "k8s-elb-a").await?;
    let timeline = env.aws_timeline().await?;
    let first = timeline.keys().next().copied().unwrap_or(0);
    let requests: Vec<(f64, f64)> = timeline
        .iter()
        .map(|(s, x)| ((s - first) as f64, x.requests as f64))
        .collect();
    let throttled: Vec<(f64, f64)> = timeline
        .iter()
        .map(|(s, x)| ((s - first) as f64, x.throttled as f64))
        .collect();
    let in_window = |t: f64| t < throttled_until;
    let mean = |pts: &[(f64, f64)], during: bool| {
        let v: Vec<f64> = pts
            .iter()
            .filter(|p| in_window(p.0) == during)
            .map(|p| p.1)
            .collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let min_rate = |key: &str| {
        limiter
            .iter()
            .filter_map(|(_, m)| m.get(key).copied())
            .fold(f64::INFINITY, f64::min)
    };
    let svg =
        line_chart(
            &format!(
            "AWS requests/s at the emulator: {} nodes join, {} ELBs ({:.0} % throttled for {} s)",
            args.nodes, args.services, args.throttle_rate * 100.0, args.throttle_seconds
        ),
            &[
                Series {
                    name: "requests/s",
                    color: "#1f77b4",
                    points: &requests,
                },
                Series {
                    name: "throttled/s",
                    color: "#d62728",
                    points: &throttled,
                },
            ],
            &[(0.0, throttled_until)],
            "throttling injected",
        );
    if let Some(dir) = args.svg.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.svg, svg).with_context(|| format!("write {}", args.svg.display()))?;
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let report = json!({
        "benchmark": "bench-faults",
        "nodes": args.nodes,
        "services": args.services,
        "throttle_rate": args.throttle_rate,
        "throttle_seconds": round(throttled_until),
        "converged_seconds": round(converged_at),
        "elbs": made.len(),
        "elbs_expected": lb_names.len(),
        "duplicate_or_missing_elbs": made.symmetric_difference(&lb_names).count(),
        "managed_security_groups": groups.len(),
        "aws_requests": timeline.values().map(|x| x.requests).sum::<u64>(),
        "aws_requests_throttled": timeline.values().map(|x| x.throttled).sum::<u64>(),
        "requests_per_second_while_throttled": round(mean(&requests, true)),
        "requests_per_second_after": round(mean(&requests, false)),
        "limiter_min_rate": {
            "ec2_read": round(min_rate("ec2:read")),
            "ec2_mutate": round(min_rate("ec2:mutate")),
            "elb_read": round(min_rate("elasticloadbalancing:read")),
            "elb_mutate": round(min_rate("elasticloadbalancing:mutate")),
        },
        "limiter_rate_at_end": limiter.last().map(|(_, m)| m.clone()).unwrap_or_default(),
        "ccm_peak_rss_mib": round(peak_rss_kib as f64 / 1024.0),
        "timeline": timeline.iter().map(|(s, x)| json!([s - first, x.requests, x.throttled])).collect::<Vec<_>>(),
        "svg": args.svg,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    anyhow::ensure!(
        made == lb_names,
        "ELBs made {made:?} != expected {lb_names:?}"
    );
    anyhow::ensure!(
        groups.len() == args.services,
        "{} managed groups for {} Services",
        groups.len(),
        args.services
    );
    Ok(())
}
