//! aws-load-balancer-controller benchmark (JSON on stdout), TargetGroupBinding part:
//! 1. `--bindings` IP target groups over `--endpoints` pod endpoints in all: seconds until every
//!    endpoint is registered, and ELBv2 requests per binding.
//! 2. `--changes` endpoint changes spread over `--churn-seconds` (pods replaced one by one):
//!    ELBv2 requests made, and requests per target group per second of churn.
//! 3. Peak resident memory of the controller.
//!
//! The controller runs on the real kube-apiserver with moto behind the counting proxy.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use aws_sdk_elasticloadbalancingv2 as elbv2;
use clap::Parser;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::{ec2_fixture, kube_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};
use tokio::time::Instant;

#[derive(Parser)]
struct Args {
    /// TargetGroupBindings (one target group and Service each).
    #[arg(long, default_value_t = 10)]
    bindings: usize,
    /// Pod endpoints over all bindings.
    #[arg(long, default_value_t = 200)]
    endpoints: usize,
    /// Endpoint changes during the churn phase.
    #[arg(long, default_value_t = 500)]
    changes: usize,
    /// Seconds the churn is spread over.
    #[arg(long, default_value_t = 10)]
    churn_seconds: u64,
}

const NS: &str = "default";

fn ips(binding: usize, generation: usize, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.{}.{}.{}", 100 + binding, generation % 250, i + 1))
        .collect()
}

async fn set_slice(admin: &kube::Client, svc: &str, ips: &[String]) -> anyhow::Result<()> {
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{svc}-a"), "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": ips.iter().map(|ip| serde_json::json!({
            "addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>()}))?;
    Api::<EndpointSlice>::namespaced(admin.clone(), NS)
        .patch(
            &format!("{svc}-a"),
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&slice),
        )
        .await?;
    Ok(())
}

async fn registered(elb: &elbv2::Client, arn: &str) -> anyhow::Result<usize> {
    let out = elb
        .describe_target_health()
        .target_group_arn(arn)
        .send()
        .await?;
    Ok(out
        .target_health_descriptions()
        .iter()
        .filter(|d| {
            d.target_health()
                .and_then(|h| h.state())
                .is_none_or(|s| s.as_str() != "draining")
        })
        .count())
}

async fn elbv2_requests(env: &TestEnv) -> anyhow::Result<BTreeMap<String, u64>> {
    Ok(env
        .aws_request_counts()
        .await?
        .into_iter()
        .filter(|(k, _)| k.starts_with("elasticloadbalancing"))
        .map(|(k, v)| (k.rsplit(':').next().unwrap_or(&k).to_string(), v))
        .collect())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let env = TestEnv::start().await?;
    let admin = env.kube_client(Identity::Admin).await?;
    let chart = kube_fixture::repo_root().join("charts/aws-load-balancer-controller");
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let text = std::fs::read_to_string(chart.join("crds/targetgroupbindings.elbv2.k8s.aws.yaml"))?;
    crds.create(&PostParams::default(), &serde_yaml::from_str(&text)?)
        .await?;
    wait_for("CRD established", Duration::from_secs(60), || async {
        let crd = crds.get("targetgroupbindings.elbv2.k8s.aws").await?;
        Ok(crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(()))
    })
    .await?;
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await?
        .vpc()
        .and_then(|v| v.vpc_id())
        .context("vpc")?
        .to_string();
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
        set_slice(&admin, &name, &ips(b, 0, per)).await?;
        arns.push(arn);
    }
    env.reset_aws_request_counts().await?;
    let mut cmd = Command::new(sibling_binary("aws-load-balancer-controller")?);
    cmd.args([
        "--cluster-name=bench",
        "--enable-leader-election=false",
        "--metrics-bind-addr=0",
    ])
    .envs(env.env_vars(Identity::Admin));
    let albc = CcmProcess::spawn(cmd, env.cluster())?;
    let started = Instant::now();
    for (b, arn) in arns.iter().enumerate() {
        let tgb: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
            "metadata": {"name": format!("svc-{b}")},
            "spec": {"serviceRef": {"name": format!("svc-{b}"), "port": 80},
                     "targetGroupARN": arn, "targetType": "ip"}}))?;
        tgbs.create(&PostParams::default(), &tgb).await?;
    }
    wait_for(
        "every endpoint registered",
        Duration::from_secs(300),
        || async {
            for arn in &arns {
                if registered(&elb, arn).await? < per {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await?;
    let initial_seconds = started.elapsed().as_secs_f64();
    let initial = elbv2_requests(&env).await?;
    let initial_total: u64 = initial.values().sum();

    // Churn: pods replaced one at a time, round-robin over the bindings, evenly over the window.
    env.reset_aws_request_counts().await?;
    let churn_started = Instant::now();
    let step = Duration::from_secs(args.churn_seconds).div_f64(args.changes.max(1) as f64);
    let mut current: Vec<Vec<String>> = (0..args.bindings).map(|b| ips(b, 0, per)).collect();
    for c in 0..args.changes {
        let b = c % args.bindings;
        let i = (c / args.bindings) % per.max(1);
        current[b][i] = format!(
            "10.{}.{}.{}",
            100 + b,
            1 + (c / args.bindings / per.max(1)) % 250,
            i + 1
        );
        set_slice(&admin, &format!("svc-{b}"), &current[b]).await?;
        tokio::time::sleep_until(churn_started + step.mul_f64((c + 1) as f64)).await;
    }
    let churn_elapsed = churn_started.elapsed().as_secs_f64();
    wait_for("churn applied", Duration::from_secs(120), || async {
        for (b, arn) in arns.iter().enumerate() {
            let out = elb
                .describe_target_health()
                .target_group_arn(arn)
                .send()
                .await?;
            let mut have: Vec<String> = out
                .target_health_descriptions()
                .iter()
                .filter(|d| {
                    d.target_health()
                        .and_then(|h| h.state())
                        .is_none_or(|s| s.as_str() != "draining")
                })
                .filter_map(|d| d.target().and_then(|t| t.id()).map(str::to_string))
                .collect();
            have.sort();
            let mut want = current[b].clone();
            want.sort();
            if have != want {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    let settled_seconds = churn_started.elapsed().as_secs_f64();
    let churn = elbv2_requests(&env).await?;
    let churn_total: u64 = churn.values().sum();
    let peak_rss_kib = albc.peak_rss_kib();
    let report = serde_json::json!({
        "benchmark": "albc-targetgroupbinding",
        "bindings": args.bindings,
        "endpoints": per * args.bindings,
        "initial": {
            "seconds_until_all_registered": initial_seconds,
            "elbv2_requests": initial,
            "elbv2_requests_total": initial_total,
            "elbv2_requests_per_binding": initial_total as f64 / args.bindings as f64,
        },
        "churn": {
            "changes": args.changes,
            "seconds": churn_elapsed,
            "seconds_until_settled": settled_seconds,
            "elbv2_requests": churn,
            "elbv2_requests_total": churn_total,
            "requests_per_target_group_per_second": churn_total as f64
                / args.bindings as f64 / churn_elapsed.max(1.0),
        },
        "peak_rss_mib": peak_rss_kib.map(|k| k as f64 / 1024.0),
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
