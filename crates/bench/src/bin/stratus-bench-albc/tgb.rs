//! The TargetGroupBinding part: `bindings` IP target groups over `endpoints` pod endpoints in
//! all — seconds until every endpoint is registered and ELBv2 requests per binding; then
//! `changes` endpoint changes over `churn_seconds` (pods replaced one by one) — ELBv2 requests
//! and requests per target group per second of churn; the controller's peak RSS.

use anyhow::Context;
use aws_sdk_elasticloadbalancingv2 as elbv2;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use stratus_scenarios::lb_fixture::LbClients;
use stratus_testenv::{Identity, TestEnv};
use tokio::time::Instant;

use crate::common::{self, NS};
use crate::Args;

fn ips(binding: usize, generation: usize, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.{}.{}.{}", 100 + binding, generation % 250, i + 1))
        .collect()
}

/// Runs the part in its own environment; its JSON report.
pub async fn run(args: &Args) -> anyhow::Result<serde_json::Value> {
    let env = TestEnv::start().await?;
    let admin = env.kube_client(Identity::Admin).await?;
    common::install_crds(&admin).await?;
    let vpc = common::vpc(&common::ec2(&env).await).await?;
    let elb = LbClients::new(env.moto_endpoint()).await.elbv2;
    let per = args.endpoints / args.bindings.max(1);
    let tgb_api = ApiResource {
        group: "elbv2.k8s.aws".into(),
        version: "v1beta1".into(),
        api_version: "elbv2.k8s.aws/v1beta1".into(),
        kind: "TargetGroupBinding".into(),
        plural: "targetgroupbindings".into(),
    };
    let tgbs: Api<DynamicObject> = Api::namespaced_with(admin.clone(), NS, &tgb_api);
    let mut arns = Vec::new();
    for b in 0..args.bindings {
        let name = format!("svc-{b}");
        let arn = elb
            .create_target_group()
            .name(format!("bench-{b}"))
            .protocol(elbv2::types::ProtocolEnum::Http)
            .port(8080)
            .vpc_id(&vpc)
            .target_type(elbv2::types::TargetTypeEnum::Ip)
            .send()
            .await?
            .target_groups()[0]
            .target_group_arn()
            .context("arn")?
            .to_string();
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))?;
        Api::<Service>::namespaced(admin.clone(), NS)
            .create(&PostParams::default(), &svc)
            .await?;
        common::set_slice(&admin, &name, &ips(b, 0, per)).await?;
        arns.push(arn);
    }
    env.reset_aws_request_counts().await?;
    let albc = common::spawn_controller(&env, &args.controller_flags)?;
    let started = Instant::now();
    for (b, arn) in arns.iter().enumerate() {
        let tgb: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
            "metadata": {"name": format!("svc-{b}")},
            "spec": {"serviceRef": {"name": format!("svc-{b}"), "port": 80},
                     "targetGroupARN": arn, "targetType": "ip"}}))?;
        tgbs.create(&PostParams::default(), &tgb).await?;
    }
    let current: Vec<Vec<String>> = (0..args.bindings).map(|b| ips(b, 0, per)).collect();
    let initial = common::wait_registered(&env, &elb, &arns, &current).await?;
    let initial_seconds = started.elapsed().as_secs_f64();
    let initial_total: u64 = initial.values().sum();

    // Churn: pods replaced one at a time, round-robin over the bindings, evenly over the window.
    let churn = common::churn(
        &env,
        &admin,
        &elb,
        &arns,
        current,
        (args.changes, args.churn_seconds),
        |b, i, round| format!("10.{}.{}.{}", 100 + b, 1 + round % 250, i + 1),
    )
    .await?;
    let peak_rss_kib = albc.peak_rss_kib();
    let (end_anon_kib, end_file_kib) = albc.rss_anon_file_kib().unwrap_or_default();
    Ok(serde_json::json!({
        "benchmark": "albc-targetgroupbinding",
        "bindings": args.bindings,
        "endpoints": per * args.bindings,
        "initial": {
            "seconds_until_all_registered": initial_seconds,
            "elbv2_requests": initial,
            "elbv2_requests_total": initial_total,
            "elbv2_requests_per_binding": initial_total as f64 / args.bindings as f64,
        },
        "churn": churn,
        "peak_rss_mib": peak_rss_kib.map(|k| k as f64 / 1024.0),
        "end_rss_anonymous_mib": end_anon_kib as f64 / 1024.0,
        "end_rss_file_backed_mib": end_file_kib as f64 / 1024.0,
    }))
}
