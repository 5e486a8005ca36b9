//! The cluster side both backends share, on the CSI harness of `stratus_scenarios::csi`: the
//! chart's RBAC and its controller ServiceAccount's kubeconfig, kube-controller-manager's PV
//! controllers, and the controller pod — the driver with the real external-provisioner and
//! external-attacher run with the chart's arguments, all three measured (the charts size the
//! sidecars' memory from their peak RSS).

use std::path::Path;
use std::process::Command;

use anyhow::Result;
use serde_json::{json, Value};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::csi::driver;
use stratus_scenarios::csi::harness::{Chart, ControllerSide, Kcm, Sidecar, SidecarOptions, Tools};
use stratus_scenarios::csi::node_probe::mib;
use stratus_testenv::KubeCluster;
use tokio::process::Child;

/// The running controller side; every process is killed on drop.
pub struct Pod {
    /// The driver's controller service.
    pub driver: CcmProcess,
    _side: ControllerSide,
    provisioner: Child,
    attacher: Child,
}

impl Pod {
    /// The sidecars' peak RSS so far, by container name (`{"csi-provisioner": {"peak_rss_mib": …}}`).
    pub fn sidecars_json(&self) -> Value {
        let peak = |child: &Child| mib(child.id().and_then(peak_rss_kib));
        json!({
            "csi-provisioner": { "peak_rss_mib": peak(&self.provisioner) },
            "csi-attacher": { "peak_rss_mib": peak(&self.attacher) },
        })
    }
}

/// VmHWM of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Applies `chart`'s RBAC, then starts kube-controller-manager's PV controllers, the driver
/// (`driver`, serving on `socket`) and the sidecars authenticated as the chart's ServiceAccount,
/// with `extra` arguments after the chart's; logs go to `dir`.
pub async fn start(
    cluster: &KubeCluster,
    tools: &Tools,
    chart: &Chart,
    driver: Command,
    socket: &Path,
    dir: &Path,
    extra: &[String],
) -> Result<Pod> {
    let kcm = Kcm {
        verbosity: 1,
        ..Kcm::default()
    };
    let sidecars = [Sidecar::Provisioner, Sidecar::Attacher];
    let side = ControllerSide::start(cluster, tools, chart, kcm, &sidecars, dir).await?;
    let driver = CcmProcess::spawn(driver, cluster)?;
    // The socket answering is the driver being ready.
    drop(driver::connect(socket).await?);
    let options = SidecarOptions {
        extra: extra.to_vec(),
        quick_attacher_retries: false,
    };
    let mut sidecars = side.start_sidecars(socket, &options)?.into_iter();
    let (Some(provisioner), Some(attacher)) = (sidecars.next(), sidecars.next()) else {
        anyhow::bail!("the sidecars did not start");
    };
    Ok(Pod {
        driver,
        _side: side,
        provisioner,
        attacher,
    })
}
