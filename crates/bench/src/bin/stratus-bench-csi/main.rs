//! CSI drivers benchmark (JSON on stdout), per backend (EBS on moto behind the counting proxy,
//! Cinder on the OpenStack simulators + Keystone behind theirs):
//! 1. `--volumes` PVCs provisioned by the real external-provisioner (with kube-controller-manager's
//!    PV binder) and attached by the real external-attacher through VolumeAttachments spread
//!    over `--volumes-per-node` per node: seconds until all are Bound and all attached, cloud
//!    requests by action and per volume.
//! 2. The node plugin serving NodeGetInfo and NodeStage/NodePublish of `--node-volumes` of those
//!    volumes on loop devices: its resident memory.
//! 3. Deletion of every VolumeAttachment and PVC: seconds and requests until zero volumes remain.
//! 4. The controller's peak resident memory over the whole run.

mod cinder;
mod ebs;
mod pod;

use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde_json::{json, Value};
use stratus_scenarios::csi::harness::Tools;

/// Which backends to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    Ebs,
    Cinder,
    Both,
}

/// Flags of `stratus-bench-csi`.
#[derive(Parser)]
pub struct Args {
    /// PVCs per backend.
    #[arg(long, default_value_t = 200)]
    pub volumes: usize,
    /// Which backend(s).
    #[arg(long, value_enum, default_value = "both")]
    backend: Backend,
    /// Volumes attached per node (nodes = volumes / this, rounded up).
    #[arg(long, default_value_t = 20)]
    pub volumes_per_node: usize,
    /// Volumes the node plugin stages and publishes on loop devices.
    #[arg(long, default_value_t = 5)]
    pub node_volumes: usize,
    /// `--kube-api-qps` of the provisioner and attacher (burst twice that); 0 keeps the chart's
    /// arguments (`sidecars.kubeApiQps` 20, burst 50).
    #[arg(long, default_value_t = 0)]
    pub sidecar_kube_api_qps: u32,
    /// Seconds provisioning and attaching (and, separately, deletion) may take.
    #[arg(long, default_value_t = 900)]
    pub deadline_seconds: u64,
    /// An extra argument of both sidecars (repeatable), e.g. `--sidecar-arg=--worker-threads=100`.
    #[arg(long = "sidecar-arg", allow_hyphen_values = true)]
    pub sidecar_args: Vec<String>,
    /// An extra flag of the EBS controller (repeatable), e.g. `--ebs-driver-arg=--volume-poll-interval=2s`.
    #[arg(long = "ebs-driver-arg", allow_hyphen_values = true)]
    pub ebs_driver_args: Vec<String>,
}

impl Args {
    /// How many nodes the volumes are attached to.
    pub fn nodes(&self) -> usize {
        self.volumes.div_ceil(self.volumes_per_node.max(1)).max(1)
    }

    /// The deadline of one phase.
    pub fn deadline(&self) -> Duration {
        Duration::from_secs(self.deadline_seconds)
    }

    /// Arguments added to the chart's sidecar arguments.
    pub fn sidecar_extra_args(&self) -> Vec<String> {
        let mut args = match self.sidecar_kube_api_qps {
            0 => Vec::new(),
            qps => vec![
                format!("--kube-api-qps={qps}"),
                format!("--kube-api-burst={}", qps * 2),
            ],
        };
        args.extend(self.sidecar_args.iter().cloned());
        args
    }
}

/// The build profile of the drivers beside this binary.
fn drivers_profile() -> &'static str {
    let in_release = std::env::current_exe()
        .map(|exe| exe.components().any(|c| c.as_os_str() == "release"))
        .unwrap_or(false);
    if in_release || !cfg!(debug_assertions) {
        "release"
    } else {
        "debug"
    }
}

fn outcome(result: anyhow::Result<Value>) -> Value {
    result.unwrap_or_else(|e| json!({ "complete": false, "error": format!("{e:#}") }))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tools = Tools::install().await?;
    let mut report = json!({
        "benchmark": "csi",
        // The drivers are this binary's siblings: release when they sit in a `release`
        // directory (`make bench-csi`, or release drivers copied beside a debug harness).
        "profile": drivers_profile(),
        "volumes": args.volumes,
        "nodes": args.nodes(),
        "volumes_per_node": args.volumes_per_node,
        "sidecar_extra_args": args.sidecar_extra_args(),
        "flow": "real kube-apiserver, kube-controller-manager PV binder, external-provisioner \
                 and external-attacher (chart arguments, chart RBAC), driver controller; \
                 VolumeAttachments made by the benchmark as a kube-controller-manager \
                 attach-detach controller would, once each PVC is Bound",
    });
    if matches!(args.backend, Backend::Ebs | Backend::Both) {
        report["ebs"] = outcome(ebs::run(&args, &tools).await);
    }
    if matches!(args.backend, Backend::Cinder | Backend::Both) {
        report["cinder"] = outcome(cinder::run(&args, &tools).await);
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
