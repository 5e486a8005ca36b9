//! The cluster side both backends share: the chart's RBAC and its controller ServiceAccount's
//! kubeconfig, kube-controller-manager's PV controllers, and the controller pod — the driver
//! with the real external-provisioner and external-attacher run with the chart's arguments, all
//! three measured (the charts size the sidecars' memory from their peak RSS).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;
use serde_json::{json, Value};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::csi_flow::{self, kubeconfig_with_token, sidecar_args, spawn};
use stratus_scenarios::csi_node_probe::{self, mib};
use stratus_scenarios::kube_fixture::apply_rbac_manifest;
use stratus_scenarios::nth_fixture::service_account_token;
use stratus_testenv::tools::csi_sidecars::Sidecars;
use stratus_testenv::{Identity, KubeCluster};
use tokio::process::Child;

/// The namespace of the controller pod.
pub const NAMESPACE: &str = "kube-system";

/// The upstream binaries the flow runs.
pub struct Tools {
    /// external-provisioner and external-attacher.
    pub sidecars: Sidecars,
    /// kube-controller-manager.
    pub kcm: PathBuf,
}

/// A driver's chart: its directory name, the release name and the controller's ServiceAccount.
pub struct Chart {
    /// `charts/<name>`.
    pub name: &'static str,
    /// The helm release.
    pub release: &'static str,
    /// The controller Deployment's ServiceAccount.
    pub service_account: &'static str,
}

/// The running controller side; every process is killed on drop.
pub struct Pod {
    /// The driver's controller service.
    pub driver: CcmProcess,
    _kcm: Child,
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
    let (name, release) = (chart.name, chart.release);
    let rendered =
        tokio::task::spawn_blocking(move || csi_flow::render_chart(name, release, NAMESPACE))
            .await??;
    let admin = cluster.kube_client(Identity::Admin).await?;
    let rbac_file = dir.join("rbac.yaml");
    std::fs::write(&rbac_file, &rendered.rbac)?;
    apply_rbac_manifest(&admin, &rbac_file).await?;
    let token = service_account_token(&admin, NAMESPACE, chart.service_account).await?;
    let kubeconfig = dir.join("kubeconfig-controller-sa.yaml");
    kubeconfig_with_token(&kubeconfig, cluster.apiserver_url(), &token)?;

    let driver = CcmProcess::spawn(driver, cluster)?;
    // The socket answering is the driver being ready.
    drop(csi_node_probe::connect(socket).await?);
    let kcm = spawn(
        &tools.kcm,
        &[
            format!("--kubeconfig={}", cluster.kubeconfig(Identity::Admin).display()),
            "--controllers=persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller".into(),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--v=1".into(),
        ],
        &dir.join("kcm.log"),
        &[],
    )?;
    let args = |name: &str| -> Result<Vec<String>> {
        let mut args = sidecar_args(&rendered, name, socket, &kubeconfig, NAMESPACE)?;
        args.extend(extra.iter().cloned());
        Ok(args)
    };
    let provisioner = spawn(
        &tools.sidecars.provisioner,
        &args("csi-provisioner")?,
        &dir.join("provisioner.log"),
        &[],
    )?;
    let attacher = spawn(
        &tools.sidecars.attacher,
        &args("csi-attacher")?,
        &dir.join("attacher.log"),
        &[],
    )?;
    Ok(Pod {
        driver,
        _kcm: kcm,
        provisioner,
        attacher,
    })
}
