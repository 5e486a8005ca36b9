//! The Cinder run: `cinder-csi-plugin` (controller service only) on Keystone and the OpenStack
//! simulators behind the counting proxy, Nova servers standing for the nodes, and the plugin's
//! node service on loop devices.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use stratus_csi::devices::LoopDevices;
use stratus_csi_cinder::{DRIVER_NAME, TOPOLOGY_KEY};
use stratus_openstack_sim::ServerSpec;
use stratus_scenarios::ccm::{sibling_binary, CcmProcess};
use stratus_scenarios::csi::bench::{self as csi_bench, LoadSpec};
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::csi::node_probe::{self as csi_node_probe, mib};
use stratus_scenarios::wait_for;
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};
use tokio::time::Instant;

use stratus_scenarios::csi::harness::{Tools, CINDER_CHART};

use crate::pod;
use crate::Args;

const ZONE: &str = "nova";

/// Request counts (`service:METHOD path`, IDs normalised) as JSON with totals per service, per
/// volume, and the reads (GETs) per 10 volumes.
fn requests_json(counts: &BTreeMap<String, u64>, volumes: usize) -> Value {
    let total: u64 = counts.values().sum();
    let mut by_service: BTreeMap<&str, u64> = BTreeMap::new();
    for (k, v) in counts {
        *by_service
            .entry(k.split(':').next().unwrap_or(k))
            .or_default() += v;
    }
    let gets: u64 = counts
        .iter()
        .filter(|(k, _)| k.contains(":GET "))
        .map(|(_, v)| v)
        .sum();
    let per = |n: u64| (n as f64 / volumes.max(1) as f64 * 1000.0).round() / 1000.0;
    json!({
        "by_request": counts,
        "by_service": by_service,
        "total": total,
        "per_volume": per(total),
        "gets": gets,
        "gets_per_10_volumes": per(gets * 10),
    })
}

/// The plugin's common flags.
fn plugin(openstack: &OpenStackEnv, socket: &std::path::Path) -> Result<Command> {
    let mut cmd = Command::new(sibling_binary("cinder-csi-plugin")?);
    cmd.arg(format!("--endpoint=unix://{}", socket.display()))
        .arg(format!(
            "--cloud-config={}",
            openstack.cloud_conf_path().display()
        ))
        .arg("--cluster=bench")
        .arg("--v=2");
    Ok(cmd)
}

/// Runs the Cinder benchmark.
pub async fn run(args: &Args, tools: &Tools) -> Result<Value> {
    let cluster = KubeCluster::start().await?;
    let openstack = OpenStackEnv::start().await?;
    let sim = openstack.sim().context("the simulator runs in process")?;
    let admin = cluster.kube_client(Identity::Admin).await?;
    let dir = cluster.dir().join("bench-csi-cinder");
    std::fs::create_dir_all(&dir)?;
    let specs: Vec<ServerSpec> = (0..args.nodes())
        .map(|i| ServerSpec::active(format!("bench-node-{i}")))
        .collect();
    let servers = sim.create_servers(&specs)?;
    let mut nodes = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        let name = format!("node-{i}");
        let labels: BTreeMap<String, String> =
            [(TOPOLOGY_KEY.to_string(), ZONE.to_string())].into();
        csi_flow::node_objects(&admin, &name, DRIVER_NAME, server, labels).await?;
        nodes.push(name);
    }

    let socket = dir.join("controller.sock");
    let mut driver = plugin(&openstack, &socket)?;
    driver.arg("--provide-node-service=false");
    let chart = CINDER_CHART;
    let pod = pod::start(
        &cluster,
        tools,
        &chart,
        driver,
        &socket,
        &dir,
        &args.sidecar_extra_args(),
    )
    .await?;

    openstack.reset_request_counts().await?;
    let load = csi_bench::provision_and_attach(
        &admin,
        &LoadSpec {
            driver: DRIVER_NAME,
            parameters: BTreeMap::new(),
            nodes: &nodes,
            volumes: args.volumes,
            deadline: args.deadline(),
        },
    )
    .await?;
    let create = openstack.request_counts().await?;
    let controller_rss_after_attach = pod.driver.rss_kib();
    let controller_peak_after_attach = pod.driver.peak_rss_kib();

    // The node plugin on the first node, with some of its volumes.
    let node_socket = dir.join("node.sock");
    let loops = dir.join("loops");
    let mut node_cmd = plugin(&openstack, &node_socket)?;
    node_cmd
        .arg("--provide-controller-service=false")
        .arg(format!("--nodeid={}", servers[0]))
        .arg(format!("--availability-zone={ZONE}"))
        .arg(format!("--loop-devices-dir={}", loops.display()));
    let node_plugin = CcmProcess::spawn(node_cmd, &cluster)?;
    let volumes: Vec<_> = load
        .attached
        .iter()
        .filter(|a| a.node == nodes[0])
        .take(args.node_volumes)
        .cloned()
        .collect();
    let probed = csi_node_probe::probe(&node_plugin, &node_socket, &volumes, &dir).await;
    drop(node_plugin);
    LoopDevices::new(loops, 0).release_all().await?;
    let probed = probed?;

    openstack.reset_request_counts().await?;
    let started = Instant::now();
    let deletion = csi_bench::delete_all(&admin, DRIVER_NAME, args.deadline()).await?;
    wait_for("zero volumes in Cinder", args.deadline(), || async {
        Ok(sim.volumes().is_empty().then_some(()))
    })
    .await?;
    let zero_seconds = started.elapsed().as_secs_f64();
    let delete = openstack.request_counts().await?;

    Ok(json!({
        "complete": true,
        "cloud": "Keystone + the OpenStack simulators (Cinder, Nova) behind the counting proxy",
        "seconds_until_all_bound": load.all_bound_seconds,
        "seconds_until_all_attached": load.all_attached_seconds,
        "requests_create_and_attach": requests_json(&create, args.volumes),
        "controller": {
            "rss_after_attach_mib": mib(controller_rss_after_attach),
            "peak_rss_after_attach_mib": mib(controller_peak_after_attach),
            "peak_rss_mib": mib(pod.driver.peak_rss_kib()),
        },
        "sidecars": pod.sidecars_json(),
        "node_plugin": probed,
        "node_plugin_target_mib": 20,
        "deletion": {
            "seconds_until_detached": deletion.detached_seconds,
            "seconds_until_pvs_gone": deletion.pvs_gone_seconds,
            "seconds_until_zero_volumes": zero_seconds,
            "volumes_left": sim.volumes().len(),
            "requests": requests_json(&delete, args.volumes),
        },
    }))
}
