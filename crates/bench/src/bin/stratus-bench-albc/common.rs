//! Set-up and phases shared by both parts of the aws-load-balancer-controller benchmark: CRDs,
//! the VPC, hand-made EndpointSlices, the proxy's ELBv2 counts, target reads straight from moto,
//! the wait for the first registration and the churn phase.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use aws_sdk_elasticloadbalancingv2 as elbv2;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::{ec2_fixture, kube_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};

/// Namespace of everything the benchmark makes.
pub const NS: &str = "default";

/// Installs the chart's CRDs and waits until they are served.
pub async fn install_crds(admin: &kube::Client) -> anyhow::Result<()> {
    let chart = kube_fixture::repo_root().join("charts/aws-load-balancer-controller");
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for file in [
        "targetgroupbindings.elbv2.k8s.aws.yaml",
        "ingressclassparams.elbv2.k8s.aws.yaml",
    ] {
        let text = std::fs::read_to_string(chart.join("crds").join(file))?;
        crds.create(&PostParams::default(), &serde_yaml::from_str(&text)?)
            .await?;
    }
    for name in [
        "targetgroupbindings.elbv2.k8s.aws",
        "ingressclassparams.elbv2.k8s.aws",
    ] {
        wait_for("CRD established", Duration::from_secs(60), || async {
            let crd = crds.get(name).await?;
            Ok(crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(()))
        })
        .await?;
    }
    Ok(())
}

/// A VPC (10.0.0.0/16) in moto; its ID.
pub async fn vpc(ec2: &aws_sdk_ec2::Client) -> anyhow::Result<String> {
    Ok(ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await?
        .vpc()
        .and_then(|v| v.vpc_id())
        .context("vpc")?
        .to_string())
}

/// The EC2 client of the environment's moto.
pub async fn ec2(env: &TestEnv) -> aws_sdk_ec2::Client {
    ec2_fixture::client(env.moto_endpoint()).await
}

/// Sets the one EndpointSlice of Service `svc` to ready pods at `ips` (port 8080 named `http`).
pub async fn set_slice(admin: &kube::Client, svc: &str, ips: &[String]) -> anyhow::Result<()> {
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

/// Active (not draining) target IDs of a target group, sorted (read from moto, not counted).
pub async fn targets(elb: &elbv2::Client, arn: &str) -> anyhow::Result<Vec<String>> {
    let out = elb
        .describe_target_health()
        .target_group_arn(arn)
        .send()
        .await?;
    let mut v: Vec<String> = out
        .target_health_descriptions()
        .iter()
        .filter(|d| {
            d.target_health()
                .and_then(|h| h.state())
                .is_none_or(|s| s.as_str() != "draining")
        })
        .filter_map(|d| d.target().and_then(|t| t.id()).map(str::to_string))
        .collect();
    v.sort();
    Ok(v)
}

/// Whether every target group holds exactly its wanted targets.
pub async fn all_match(
    elb: &elbv2::Client,
    want: &[(String, Vec<String>)],
) -> anyhow::Result<bool> {
    for (arn, ips) in want {
        let mut w = ips.clone();
        w.sort();
        if targets(elb, arn).await? != w {
            return Ok(false);
        }
    }
    Ok(true)
}

/// ELBv2 requests the proxy counted since the last reset, by action.
pub async fn elbv2_requests(env: &TestEnv) -> anyhow::Result<BTreeMap<String, u64>> {
    Ok(env
        .aws_request_counts()
        .await?
        .into_iter()
        .filter(|(k, _)| k.starts_with("elasticloadbalancing"))
        .map(|(k, v)| (k.rsplit(':').next().unwrap_or(&k).to_string(), v))
        .collect())
}

/// Starts the controller (cluster `bench`, no election, no metrics server, no webhooks) with
/// `extra` flags.
pub fn spawn_controller(env: &TestEnv, extra: &[String]) -> anyhow::Result<CcmProcess> {
    let mut cmd = Command::new(sibling_binary("aws-load-balancer-controller")?);
    cmd.args([
        "--cluster-name=bench",
        "--enable-leader-election=false",
        "--metrics-bind-addr=0",
        "--webhook-bind-port=0",
    ])
    .args(extra)
    .envs(env.env_vars(Identity::Admin));
    CcmProcess::spawn(cmd, env.cluster())
}

/// Applies `change(c)` for `c` in `0..changes`, evenly over `seconds`; the seconds it took.
pub async fn paced<F, Fut>(changes: usize, seconds: u64, mut change: F) -> anyhow::Result<f64>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = tokio::time::Instant::now();
    let step = Duration::from_secs(seconds).div_f64(changes.max(1) as f64);
    for c in 0..changes {
        change(c).await?;
        tokio::time::sleep_until(started + step.mul_f64((c + 1) as f64)).await;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Target groups `arns[b]` paired with the endpoints `current[b]` they must hold.
fn wanted(arns: &[String], current: &[Vec<String>]) -> Vec<(String, Vec<String>)> {
    arns.iter().cloned().zip(current.iter().cloned()).collect()
}

/// Waits until every target group `arns[b]` holds exactly `current[b]`; the ELBv2 requests the
/// proxy counted until then, by action.
pub async fn wait_registered(
    env: &TestEnv,
    elb: &elbv2::Client,
    arns: &[String],
    current: &[Vec<String>],
) -> anyhow::Result<BTreeMap<String, u64>> {
    let want = wanted(arns, current);
    wait_for(
        "every endpoint registered",
        Duration::from_secs(300),
        || async { Ok(all_match(elb, &want).await?.then_some(())) },
    )
    .await?;
    elbv2_requests(env).await
}

/// The churn phase: `changes` pod replacements evenly over `seconds`, round robin over the
/// Services `svc-<b>` (one per target group `arns[b]`, endpoints `current[b]`), slot by slot;
/// `new_ip(b, slot, round)` names the replacement (`round` counts passes over all slots). Waits
/// until AWS holds the final endpoints; returns the JSON's `churn` section.
pub async fn churn(
    env: &TestEnv,
    admin: &kube::Client,
    elb: &elbv2::Client,
    arns: &[String],
    current: Vec<Vec<String>>,
    (changes, seconds): (usize, u64),
    new_ip: impl Fn(usize, usize, usize) -> String,
) -> anyhow::Result<serde_json::Value> {
    env.reset_aws_request_counts().await?;
    let started = tokio::time::Instant::now();
    let backends = current.len().max(1);
    let per = current.first().map_or(1, |c| c.len().max(1));
    let cur = std::sync::Mutex::new(current);
    let elapsed = paced(changes, seconds, |c| {
        let (b, slot, round) = (c % backends, (c / backends) % per, c / backends / per);
        let slice = {
            let mut cur = cur.lock().expect("current");
            cur[b][slot] = new_ip(b, slot, round);
            cur[b].clone()
        };
        let admin = admin.clone();
        async move { set_slice(&admin, &format!("svc-{b}"), &slice).await }
    })
    .await?;
    let want = wanted(arns, &cur.into_inner().expect("current"));
    wait_for("churn applied", Duration::from_secs(120), || async {
        Ok(all_match(elb, &want).await?.then_some(()))
    })
    .await?;
    let settled = started.elapsed().as_secs_f64();
    let requests = elbv2_requests(env).await?;
    let total: u64 = requests.values().sum();
    Ok(serde_json::json!({
        "changes": changes,
        "seconds": elapsed,
        "seconds_until_settled": settled,
        "elbv2_requests": requests,
        "elbv2_requests_total": total,
        "requests_per_target_group_per_second": total as f64
            / arns.len().max(1) as f64 / elapsed.max(1.0),
    }))
}
