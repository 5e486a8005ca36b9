//! The EBS run: `ebs-csi-driver controller` on moto behind the counting proxy, instances in
//! moto standing for the nodes, `ebs-csi-driver node` on loop devices for the node plugin.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::Result;
use serde_json::{json, Value};
use stratus_csi::devices::LoopDevices;
use stratus_csi_ebs::{DRIVER_NAME, TOPOLOGY_KEY, WELL_KNOWN_ZONE_KEY};
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::csi::bench::{self as csi_bench, LoadSpec};
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::csi::node_probe::{self as csi_node_probe, mib};
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::aws::EbsKnobs;
use stratus_testenv::{Identity, TestEnv};
use tokio::time::Instant;

use stratus_scenarios::csi::harness::{Tools, EBS_CHART};

use crate::pod;
use crate::Args;

const ZONE: &str = "us-east-1a";

/// EC2 requests seen by the proxy, by action.
async fn ec2_requests(env: &TestEnv) -> Result<BTreeMap<String, u64>> {
    Ok(env
        .aws_request_counts()
        .await?
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("ec2:")?.to_string(), v)))
        .collect())
}

/// Request counts as JSON with their total, per-volume and describe figures.
fn requests_json(counts: &BTreeMap<String, u64>, volumes: usize) -> Value {
    let total: u64 = counts.values().sum();
    let describes: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("Describe"))
        .map(|(_, v)| v)
        .sum();
    let per = |n: u64| (n as f64 / volumes.max(1) as f64 * 1000.0).round() / 1000.0;
    json!({
        "by_action": counts,
        "total": total,
        "per_volume": per(total),
        "describes": describes,
        "describes_per_10_volumes": per(describes * 10),
    })
}

/// Volumes the driver made (tagged `CSIVolumeName`) that are not deleted, read from moto
/// directly (not counted).
async fn driver_volumes(ec2: &aws_sdk_ec2::Client) -> Result<usize> {
    let out = ec2.describe_volumes().send().await?;
    Ok(out
        .volumes()
        .iter()
        .filter(|v| v.state().is_none_or(|s| s.as_str() != "deleted"))
        .filter(|v| v.tags().iter().any(|t| t.key() == Some("CSIVolumeName")))
        .count())
}

/// Runs the EBS benchmark.
pub async fn run(args: &Args, tools: &Tools) -> Result<Value> {
    let env = TestEnv::start().await?;
    let cluster = env.cluster();
    let admin = cluster.kube_client(Identity::Admin).await?;
    let dir = cluster.dir().join("bench-csi-ebs");
    std::fs::create_dir_all(&dir)?;
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let instances =
        ec2_fixture::launch_many(&ec2, &subnet, ZONE, args.nodes(), None, "m5.large").await?;
    let mut nodes = Vec::new();
    for (i, instance) in instances.iter().enumerate() {
        let name = format!("ip-10-0-1-{}.ec2.internal", 10 + i);
        let labels: BTreeMap<String, String> = [
            (TOPOLOGY_KEY.to_string(), ZONE.to_string()),
            (WELL_KNOWN_ZONE_KEY.to_string(), ZONE.to_string()),
        ]
        .into();
        csi_flow::node_objects(&admin, &name, DRIVER_NAME, &instance.id, labels).await?;
        nodes.push(name);
    }

    let socket = dir.join("controller.sock");
    let bin = sibling_binary("ebs-csi-driver")?;
    let mut driver = Command::new(&bin);
    driver
        .arg("controller")
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg("--k8s-tag-cluster-id=bench")
        .args((!args.ebs_driver_args.iter().any(|a| a.starts_with("--v="))).then_some("--v=2"))
        .args(&args.ebs_driver_args)
        .envs(env.aws().env_vars());
    let chart = EBS_CHART;
    let pod = pod::start(
        cluster,
        tools,
        &chart,
        driver,
        &socket,
        &dir,
        &args.sidecar_extra_args(),
    )
    .await?;

    // EC2's own behaviour where moto lacks it: CreateVolume idempotent by ClientToken and
    // VolumeInUse for a second attach (the proxy's own describes are not counted).
    env.proxy_control()
        .set_ebs_knobs(&EbsKnobs {
            client_token: true,
            volume_in_use: true,
            ..Default::default()
        })
        .await?;
    env.reset_aws_request_counts().await?;
    let load = csi_bench::provision_and_attach(
        &admin,
        &LoadSpec {
            driver: DRIVER_NAME,
            parameters: [("type".to_string(), "gp3".to_string())].into(),
            nodes: &nodes,
            volumes: args.volumes,
            deadline: args.deadline(),
        },
    )
    .await?;
    let create = ec2_requests(&env).await?;
    let controller_rss_after_attach = pod.driver.rss_kib();
    let controller_peak_after_attach = pod.driver.peak_rss_kib();

    // The node plugin on the first node, with some of its volumes.
    let node_socket = dir.join("node.sock");
    let loops = dir.join("loops");
    let mut node_cmd = Command::new(&bin);
    node_cmd
        .arg("node")
        .arg(format!("--endpoint=unix://{}", node_socket.display()))
        .arg(format!("--node-id={}", instances[0].id))
        .arg(format!("--availability-zone={ZONE}"))
        .arg(format!("--loop-devices-dir={}", loops.display()))
        .arg("--v=2");
    let plugin = CcmProcess::spawn(node_cmd, cluster)?;
    let volumes: Vec<_> = load
        .attached
        .iter()
        .filter(|a| a.node == nodes[0])
        .take(args.node_volumes)
        .cloned()
        .collect();
    let node_plugin = csi_node_probe::probe(&plugin, &node_socket, &volumes, &dir).await;
    drop(plugin);
    LoopDevices::new(loops, 0).release_all().await?;
    let node_plugin = node_plugin?;

    env.reset_aws_request_counts().await?;
    let started = Instant::now();
    let deletion = csi_bench::delete_all(&admin, DRIVER_NAME, args.deadline()).await?;
    wait_for("zero volumes in moto", args.deadline(), || async {
        Ok((driver_volumes(&ec2).await? == 0).then_some(()))
    })
    .await?;
    let zero_seconds = started.elapsed().as_secs_f64();
    let delete = ec2_requests(&env).await?;

    Ok(json!({
        "complete": true,
        "cloud": "moto 5.2.5 behind the counting proxy (knobs: ClientToken idempotency, VolumeInUse)",
        "driver_extra_args": args.ebs_driver_args,
        "seconds_until_all_bound": load.all_bound_seconds,
        "seconds_until_all_attached": load.all_attached_seconds,
        "ec2_requests_create_and_attach": requests_json(&create, args.volumes),
        "target_describes_per_10_volumes": 1,
        "controller": {
            "rss_after_attach_mib": mib(controller_rss_after_attach),
            "peak_rss_after_attach_mib": mib(controller_peak_after_attach),
            "peak_rss_mib": mib(pod.driver.peak_rss_kib()),
        },
        "sidecars": pod.sidecars_json(),
        "node_plugin": node_plugin,
        "node_plugin_target_mib": 20,
        "deletion": {
            "seconds_until_detached": deletion.detached_seconds,
            "seconds_until_pvs_gone": deletion.pvs_gone_seconds,
            "seconds_until_zero_volumes": zero_seconds,
            "volumes_left": driver_volumes(&ec2).await?,
            "ec2_requests": requests_json(&delete, args.volumes),
        },
    }))
}
