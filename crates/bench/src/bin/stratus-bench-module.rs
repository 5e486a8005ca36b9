//! `make bench-module`: the shipped module-controller (release) on a real apiserver under its
//! RBAC, AWS module: NODES Nodes of which SPOT carry the termination handler's spot taint. Prints
//! JSON: seconds until every class, both registration Secrets and every spot mark are in place
//! (incl. startup), the controller's Kubernetes writes by resource (audit log; the Lease's
//! renewals apart), the writes over IDLE seconds after that, and the process's peak RSS.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::csi::harness::{chart_account, Chart, ChartAccount};
use stratus_scenarios::wait_for;
use stratus_testenv::KubeCluster;

const CHART: Chart = Chart {
    name: "module-controller",
    release: "module-controller",
    service_account: "module-controller",
    sets: &[],
};
const USER: &str = "system:serviceaccount:kube-system:module-controller";
const RESOURCES: [&str; 4] = ["storageclasses", "secrets", "configmaps", "nodes"];
const PCC: &str = "apiVersion: deckhouse.io/v1\nkind: AWSClusterConfiguration\nprovider:\n  region: eu-central-1\ntags:\n  team: bench\n";

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn writes(cluster: &KubeCluster) -> Result<serde_json::Map<String, serde_json::Value>> {
    RESOURCES
        .iter()
        .map(|r| Ok((r.to_string(), cluster.kube_writes_to(USER, r)?.into())))
        .collect()
}

fn total(w: &serde_json::Map<String, serde_json::Value>) -> u64 {
    w.values().filter_map(serde_json::Value::as_u64).sum()
}

fn node(i: usize, spot: bool) -> Result<Node> {
    let taints = if spot {
        serde_json::json!([{"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"}])
    } else {
        serde_json::json!([])
    };
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("node-{i:05}")},
        "spec": {"providerID": format!("aws:///eu-central-1a/i-{i:017x}"), "taints": taints}
    }))?)
}

#[tokio::main]
async fn main() -> Result<()> {
    let nodes: usize = arg("--nodes", "1000").parse().context("--nodes")?;
    let spot: usize = arg("--spot", "100").parse().context("--spot")?;
    let idle: u64 = arg("--idle-seconds", "60")
        .parse()
        .context("--idle-seconds")?;
    let binary = arg("--binary", "target/release/module-controller");

    let cluster = KubeCluster::start().await?;
    let ChartAccount {
        admin, kubeconfig, ..
    } = chart_account(&cluster, &CHART, cluster.dir()).await?;
    let pcc = stratus_scenarios::kube_fixture::opaque_secret(
        "d8-provider-cluster-configuration",
        &[("cloud-provider-cluster-configuration.yaml", PCC)],
    );
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .create(&PostParams::default(), &pcc)
        .await?;
    let node_api = Api::<Node>::all(admin.clone());
    for chunk in (0..nodes).collect::<Vec<_>>().chunks(50) {
        let creates = chunk.iter().map(|&i| {
            let api = node_api.clone();
            async move {
                api.create(&PostParams::default(), &node(i, i < spot)?)
                    .await
                    .map_err(anyhow::Error::from)
            }
        });
        futures::future::try_join_all(creates).await?;
    }

    let started = tokio::time::Instant::now();
    let mut command = Command::new(&binary);
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--metrics-bind-address=0", "--health-probe-bind-address=0"])
        .env("POD_NAMESPACE", "kube-system");
    let process =
        CcmProcess::spawn(command, &cluster).with_context(|| format!("starting {binary}"))?;
    let classes = Api::<StorageClass>::all(admin.clone());
    let secrets = Api::<Secret>::namespaced(admin.clone(), "kube-system");
    wait_for(
        "every class, registration and spot mark",
        Duration::from_secs(300),
        || async {
            let c = classes
                .list(&ListParams::default().labels("module=cloud-provider-aws"))
                .await?
                .items
                .len();
            let s = secrets
                .list(&ListParams::default().labels("cloud-provider.deckhouse.io/registration"))
                .await?
                .items
                .len();
            let marked = node_api
                .list_metadata(
                    &ListParams::default().labels("node.deckhouse.io/termination-in-progress=true"),
                )
                .await?
                .items
                .len();
            Ok((c == 4 && s == 2 && marked == spot).then_some(()))
        },
    )
    .await
    .with_context(|| process.log())?;
    let seconds = started.elapsed().as_secs_f64();
    // 4 classes, 2 registration Secrets, the status ConfigMap, a mark per spot node.
    let expected = (4 + 2 + 1 + spot) as u64;
    let first = wait_for(
        "the first pass's writes in the audit log",
        Duration::from_secs(30),
        || async {
            let w = writes(&cluster)?;
            Ok((total(&w) >= expected).then_some(w))
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(idle)).await;
    // The idle window's end: a marker write by someone else, once logged, bounds the log.
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("bench-marker".into()),
                    ..ObjectMeta::default()
                },
                ..Secret::default()
            },
        )
        .await?;
    wait_for(
        "the marker in the audit log",
        Duration::from_secs(30),
        || async {
            Ok(
                (cluster.kube_writes_to_object("stratus-admin", "secrets", "bench-marker")? > 0)
                    .then_some(()),
            )
        },
    )
    .await?;
    let after = writes(&cluster)?;
    let idle_writes = total(&after) - total(&first);
    let peak = process.peak_rss_kib();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "benchmark": "module-controller (aws): classes, registration, spot marks over a real apiserver",
            "binary": binary,
            "nodes": nodes,
            "spot_nodes": spot,
            "ready_seconds_incl_startup": seconds,
            "kubernetes_writes_first_pass": first,
            "kubernetes_writes_first_pass_total": total(&first),
            "idle_seconds": idle,
            "kubernetes_writes_idle": idle_writes,
            "peak_rss_mib": peak.map(|k| k as f64 / 1024.0),
        }))?
    );
    Ok(())
}
