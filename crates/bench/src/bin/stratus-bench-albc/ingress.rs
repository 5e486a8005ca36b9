//! The Ingress part: `ingresses` IP-mode Ingresses in `groups` Ingress groups
//! (`alb.ingress.kubernetes.io/group.name`), one backend Service each, over `endpoints` pod
//! endpoints in all — seconds until every Ingress has a status hostname (and until every
//! endpoint is registered), ELBv2 requests per Ingress by action; then `changes` endpoint
//! changes over `churn_seconds` — ELBv2 requests and requests per target group per second of
//! churn; the controller's peak RSS.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, PostParams};
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::wait_for;
use stratus_testenv::{Identity, TestEnv};
use tokio::time::Instant;

use crate::common::{self, NS};
use crate::Args;

fn ips(svc: usize, generation: usize, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.{}.{}.{}", 30 + svc % 200, generation % 250, i + 1))
        .collect()
}

/// Two subnets (two zones) tagged for internal load balancers.
async fn subnets(ec2: &aws_sdk_ec2::Client, vpc: &str) -> anyhow::Result<()> {
    for (n, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
        let out = ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block(format!("10.0.{}.0/20", n * 16))
            .availability_zone(*zone)
            .send()
            .await?;
        let id = out.subnet().and_then(|s| s.subnet_id()).unwrap_or_default();
        ec2.create_tags()
            .resources(id)
            .tags(
                aws_sdk_ec2::types::Tag::builder()
                    .key("kubernetes.io/role/internal-elb")
                    .value("1")
                    .build(),
            )
            .send()
            .await?;
    }
    Ok(())
}

/// Target group ARN of each backend Service, by the ELBv2 tags the controller writes.
async fn backend_groups(
    elb: &aws_sdk_elasticloadbalancingv2::Client,
    services: usize,
) -> anyhow::Result<Option<Vec<String>>> {
    let mut arns = Vec::new();
    let mut marker = None;
    loop {
        let out = elb
            .describe_target_groups()
            .set_marker(marker)
            .send()
            .await?;
        arns.extend(
            out.target_groups()
                .iter()
                .filter_map(|g| g.target_group_arn().map(str::to_string)),
        );
        marker = out.next_marker().map(str::to_string);
        if marker.is_none() {
            break;
        }
    }
    let mut by_service = vec![None; services];
    for chunk in arns.chunks(20) {
        let out = elb
            .describe_tags()
            .set_resource_arns(Some(chunk.to_vec()))
            .send()
            .await?;
        for d in out.tag_descriptions() {
            let resource = d
                .tags()
                .iter()
                .find(|t| t.key() == Some("ingress.k8s.aws/resource"))
                .and_then(|t| t.value());
            let svc = resource
                .and_then(|r| r.strip_prefix(&format!("{NS}/svc-")))
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse::<usize>().ok());
            if let (Some(s), Some(arn)) = (svc, d.resource_arn()) {
                if s < services {
                    by_service[s] = Some(arn.to_string());
                }
            }
        }
    }
    Ok(by_service.into_iter().collect())
}

/// Runs the part in its own environment; its JSON report.
pub async fn run(args: &Args) -> anyhow::Result<serde_json::Value> {
    let env = TestEnv::start().await?;
    let admin = env.kube_client(Identity::Admin).await?;
    common::install_crds(&admin).await?;
    let ec2 = common::ec2(&env).await;
    let vpc = common::vpc(&ec2).await?;
    subnets(&ec2, &vpc).await?;
    let elb = LbClients::new(env.moto_endpoint()).await.elbv2;
    let n = args.ingresses.max(1);
    let per = args.endpoints / n;
    let class: IngressClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "alb"}, "spec": {"controller": "ingress.k8s.aws/alb"}}))?;
    Api::<IngressClass>::all(admin.clone())
        .create(&PostParams::default(), &class)
        .await?;
    for s in 0..n {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("svc-{s}")},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))?;
        Api::<Service>::namespaced(admin.clone(), NS)
            .create(&PostParams::default(), &svc)
            .await?;
        common::set_slice(&admin, &format!("svc-{s}"), &ips(s, 0, per)).await?;
    }
    env.reset_aws_request_counts().await?;
    let albc = common::spawn_controller(
        &env,
        &[
            vec![format!("--aws-vpc-id={vpc}")],
            args.controller_flags.clone(),
        ]
        .concat(),
    )?;
    let started = Instant::now();
    let ingresses = Api::<Ingress>::namespaced(admin.clone(), NS);
    for i in 0..n {
        let group = i % args.groups.max(1);
        let ing: Ingress = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("ing-{i}"), "annotations": {
                "alb.ingress.kubernetes.io/group.name": format!("group-{group}"),
                "alb.ingress.kubernetes.io/group.order": (i / args.groups.max(1)).to_string(),
                "alb.ingress.kubernetes.io/target-type": "ip"}},
            "spec": {"ingressClassName": "alb", "rules": [{
                "host": format!("h{i}.example.com"),
                "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                    "service": {"name": format!("svc-{i}"), "port": {"number": 80}}}}]}}]}}))?;
        ingresses.create(&PostParams::default(), &ing).await?;
    }
    wait_for(
        "every Ingress has a hostname",
        Duration::from_secs(600),
        || async {
            let list = ingresses.list(&Default::default()).await?;
            let done = list
                .items
                .iter()
                .filter(|ing| {
                    ing.status
                        .as_ref()
                        .and_then(|s| s.load_balancer.as_ref())
                        .and_then(|l| l.ingress.as_ref())
                        .and_then(|i| i.first())
                        .and_then(|i| i.hostname.as_ref())
                        .is_some()
                })
                .count();
            Ok((done == n).then_some(()))
        },
    )
    .await?;
    let hostname_seconds = started.elapsed().as_secs_f64();
    let arns = wait_for("every target group", Duration::from_secs(300), || async {
        backend_groups(&elb, n).await
    })
    .await?;
    let current: Vec<Vec<String>> = (0..n).map(|s| ips(s, 0, per)).collect();
    let initial = common::wait_registered(&env, &elb, &arns, &current).await?;
    let registered_seconds = started.elapsed().as_secs_f64();
    let initial_total: u64 = initial.values().sum();

    // Churn: pods replaced one at a time, round-robin over the backends.
    let churn = common::churn(
        &env,
        &admin,
        &elb,
        &arns,
        current,
        (args.changes, args.churn_seconds),
        |s, i, round| ips(s, 1 + round, per)[i].clone(),
    )
    .await?;
    let peak_rss_kib = albc.peak_rss_kib();
    let (end_anon_kib, end_file_kib) = albc.rss_anon_file_kib().unwrap_or_default();
    Ok(serde_json::json!({
        "benchmark": "albc-ingress",
        "ingresses": n,
        "groups": args.groups,
        "target_groups": n,
        "endpoints": per * n,
        "initial": {
            "seconds_until_all_hostnames": hostname_seconds,
            "seconds_until_all_registered": registered_seconds,
            "elbv2_requests": initial,
            "elbv2_requests_total": initial_total,
            "elbv2_requests_per_ingress": initial_total as f64 / n as f64,
        },
        "churn": churn,
        "peak_rss_mib": peak_rss_kib.map(|k| k as f64 / 1024.0),
        "end_rss_anonymous_mib": end_anon_kib as f64 / 1024.0,
        "end_rss_file_backed_mib": end_file_kib as f64 / 1024.0,
    }))
}
