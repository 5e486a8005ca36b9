//! `make bench-faults`: N uninitialised Nodes join and M LoadBalancer Services are created while
//! the AWS proxy throttles a share of EC2 and ELB requests for a period; then AWS becomes
//! unreachable (every connection dropped) for a while, during which more nodes join, Services are
//! created and nodes go NotReady. Measures convergence, duplicates, nodes deleted (must be none),
//! recovery after the outage, the request rate per second (at the proxy) and the CCM's own
//! rate-limiter budget (from its /metrics), and draws requests per second over time as SVG with
//! both fault periods marked. Prints JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

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
use stratus_scenarios::service_fixture::{
    create_lb_service, create_ready_node, ingress_hostname, set_ready,
};
use stratus_scenarios::svg_chart::{line_chart, Period, Series};
use stratus_testenv::{Fault, FaultKind};
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
    /// Length of the outage that follows convergence (0: none).
    #[arg(long, default_value_t = 60)]
    outage_seconds: u64,
    /// Nodes that join during the outage.
    #[arg(long, default_value_t = 20)]
    outage_nodes: usize,
    /// LoadBalancer Services created during the outage.
    #[arg(long, default_value_t = 5)]
    outage_services: usize,
    /// Initialised nodes set NotReady during the outage (the lifecycle controller must keep them).
    #[arg(long, default_value_t = 20)]
    outage_not_ready: usize,
    /// Where the SVG chart goes.
    #[arg(long, default_value = "bench/results/bench-faults.svg")]
    svg: PathBuf,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `stratus_cloud_rate_limiter_rate_millicalls_per_second{class=..,service=..}` values, in calls/s.
fn limiter_rates(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("stratus_cloud_rate_limiter_rate_millicalls_per_second{"))
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

/// Samples the CCM once a second: limiter budgets from /metrics and peak RSS.
struct Sampler {
    addr: SocketAddr,
    started: Instant,
    limiter: Vec<(f64, BTreeMap<String, f64>)>,
    peak_rss_kib: u64,
}

impl Sampler {
    async fn sample(&mut self, ccm: &mut CcmProcess) -> anyhow::Result<()> {
        anyhow::ensure!(ccm.try_exit().is_none(), "the CCM exited:\n{}", ccm.log());
        self.peak_rss_kib = self.peak_rss_kib.max(ccm.peak_rss_kib().unwrap_or(0));
        if let Ok(a) = https::get(self.addr, "/metrics", None, &Trust::Any).await {
            self.limiter.push((self.elapsed(), limiter_rates(&a.body)));
        }
        Ok(())
    }

    fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// Initialised nodes and Services with an ingress hostname.
async fn progress(admin: &kube::Client) -> anyhow::Result<(usize, usize)> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
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
    Ok((done_nodes, done_services))
}

/// Creates LoadBalancer Services `web-<from>`.. and returns their load-balancer names.
async fn create_services(
    admin: &kube::Client,
    range: std::ops::Range<usize>,
) -> anyhow::Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for i in range {
        let svc = create_lb_service(
            admin,
            "default",
            &format!("web-{i}"),
            &[80],
            BTreeMap::new(),
        )
        .await?;
        names.insert(stratus_scenarios::service_fixture::load_balancer_name(&svc));
    }
    Ok(names)
}

fn drop_everything() -> Fault {
    Fault {
        service: None,
        action: None,
        kind: FaultKind::Drop,
        rate: 1.0,
    }
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
        "--controllers=cloud-node,cloud-node-lifecycle,service".to_string(),
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
    let mut lb_names = create_services(&admin, 0..args.services).await?;

    // Phase 1, throttled: sample once a second until everything converged.
    let mut sampler = Sampler {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        started,
        limiter: Vec::new(),
        peak_rss_kib: 0,
    };
    let mut throttled_until = None;
    let converged_at = loop {
        sampler.sample(&mut ccm).await?;
        if throttled_until.is_none() && Instant::now() >= throttle_until {
            env.set_aws_faults(&[]).await?;
            throttled_until = Some(sampler.elapsed());
        }
        let (done_nodes, done_services) = progress(&admin).await?;
        if done_nodes == args.nodes + 2
            && done_services == args.services
            && throttled_until.is_some()
        {
            break sampler.elapsed();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "no convergence in 15 min:\n{}",
            ccm.log()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let throttled_until = throttled_until.unwrap_or(converged_at);

    // Phase 2, AWS unreachable: nodes join, Services are created, nodes go NotReady.
    let mut outage = None;
    let mut recovered_at = converged_at;
    let nodes_before = Api::<Node>::all(admin.clone())
        .list(&ListParams::default())
        .await?
        .items
        .len();
    let mut nodes_expected = args.nodes + 2;
    if args.outage_seconds > 0 {
        let more = ec2_fixture::launch_many(
            &ec2,
            &subnet,
            ZONE,
            args.outage_nodes,
            Some(CLUSTER),
            "m5.large",
        )
        .await?;
        eprintln!(
            "AWS unreachable for {} s; {} nodes join, {} Services are created, {} nodes go NotReady",
            args.outage_seconds, args.outage_nodes, args.outage_services, args.outage_not_ready
        );
        env.set_aws_faults(&[drop_everything()]).await?;
        let outage_start = sampler.elapsed();
        let outage_until = Instant::now() + Duration::from_secs(args.outage_seconds);
        kube_fixture::create_uninitialized_nodes(
            &admin,
            more.iter().map(|i| i.private_dns.as_str()),
        )
        .await?;
        nodes_expected += args.outage_nodes;
        lb_names.extend(
            create_services(&admin, args.services..args.services + args.outage_services).await?,
        );
        for i in joining.iter().take(args.outage_not_ready) {
            set_ready(&admin, &i.private_dns, false).await?;
        }
        // The outage lasts its length: sampled, not waited on a condition.
        while Instant::now() < outage_until {
            sampler.sample(&mut ccm).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        env.set_aws_faults(&[]).await?;
        let outage_end = sampler.elapsed();
        outage = Some((outage_start, outage_end));
        let services_expected = args.services + args.outage_services;
        recovered_at = loop {
            sampler.sample(&mut ccm).await?;
            let (done_nodes, done_services) = progress(&admin).await?;
            if done_nodes == nodes_expected && done_services == services_expected {
                break sampler.elapsed();
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(1800),
                "no recovery from the outage:\n{}",
                ccm.log()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
    }
    let nodes_after = Api::<Node>::all(admin.clone())
        .list(&ListParams::default())
        .await?
        .items
        .len();
    let nodes_deleted =
        (nodes_before + nodes_expected - (args.nodes + 2)).saturating_sub(nodes_after);

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
    let failed: Vec<(f64, f64)> = timeline
        .iter()
        .map(|(s, x)| ((s - first) as f64, x.failed as f64))
        .collect();
    let mean = |pts: &[(f64, f64)], from: f64, to: f64| {
        let v: Vec<f64> = pts
            .iter()
            .filter(|p| p.0 >= from && p.0 < to)
            .map(|p| p.1)
            .collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let min_rate = |key: &str| {
        sampler
            .limiter
            .iter()
            .filter_map(|(_, m)| m.get(key).copied())
            .fold(f64::INFINITY, f64::min)
    };
    let mut periods = vec![Period {
        start: 0.0,
        end: throttled_until,
        label: "throttling injected",
        color: "#f4c7c3",
    }];
    if let Some((start, end)) = outage {
        periods.push(Period {
            start,
            end,
            label: "AWS unreachable",
            color: "#c6dbef",
        });
    }
    let svg = line_chart(
        &format!(
            "AWS requests/s at the emulator: {} nodes, {} ELBs; {:.0} % throttled {} s, then unreachable {} s",
            args.nodes,
            args.services,
            args.throttle_rate * 100.0,
            args.throttle_seconds,
            args.outage_seconds
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
            Series {
                name: "failed/s",
                color: "#7f7f7f",
                points: &failed,
            },
        ],
        &periods,
    );
    if let Some(dir) = args.svg.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.svg, svg).with_context(|| format!("write {}", args.svg.display()))?;
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let outage_report = outage.map(|(start, end)| {
        json!({
            "seconds": round(end - start),
            "nodes_joined": args.outage_nodes,
            "services_created": args.outage_services,
            "nodes_set_not_ready": args.outage_not_ready,
            "nodes_deleted": nodes_deleted,
            "aws_requests_failed": timeline.values().map(|x| x.failed).sum::<u64>(),
            "requests_per_second_during": round(mean(&requests, start, end)),
            "recovered_seconds_after_outage": round(recovered_at - end),
        })
    });
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
        "requests_per_second_while_throttled": round(mean(&requests, 0.0, throttled_until)),
        "requests_per_second_after": round(mean(&requests, throttled_until, converged_at)),
        "limiter_min_rate": {
            "ec2_read": round(min_rate("ec2:read")),
            "ec2_mutate": round(min_rate("ec2:mutate")),
            "elb_read": round(min_rate("elasticloadbalancing:read")),
            "elb_mutate": round(min_rate("elasticloadbalancing:mutate")),
        },
        "limiter_rate_at_end": sampler.limiter.last().map(|(_, m)| m.clone()).unwrap_or_default(),
        "outage": outage_report,
        "ccm_peak_rss_mib": round(sampler.peak_rss_kib as f64 / 1024.0),
        "timeline": timeline.iter().map(|(s, x)| json!([s - first, x.requests, x.throttled, x.failed])).collect::<Vec<_>>(),
        "svg": args.svg,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    anyhow::ensure!(
        made == lb_names,
        "ELBs made {made:?} != expected {lb_names:?}"
    );
    anyhow::ensure!(
        groups.len() == lb_names.len(),
        "{} managed groups for {} Services",
        groups.len(),
        lb_names.len()
    );
    anyhow::ensure!(
        nodes_deleted == 0,
        "{nodes_deleted} nodes deleted during the outage"
    );
    Ok(())
}
