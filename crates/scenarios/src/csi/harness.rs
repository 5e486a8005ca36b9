//! The controller side of a CSI driver as its chart deploys it, outside a pod, on a real
//! kube-apiserver: the chart rendered by the real helm, its RBAC applied and its controller
//! ServiceAccount's kubeconfig written, kube-controller-manager's persistent-volume controllers
//! running, and the controller "pod" — the driver's controller service and the upstream sidecars
//! with the chart's arguments, authenticated as that ServiceAccount — which a test can SIGKILL
//! and start again, as a kubelet restarts a pod. The driver itself (its flags, its cloud) is the
//! caller's: it starts it with [`super::driver::start`] and hands it over.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use kube::Client;
use stratus_testenv::tools::csi_sidecars::{self, Sidecars};
use stratus_testenv::tools::kube_controller_manager;
use stratus_testenv::{Identity, KubeCluster};
use tokio::process::Child;

use super::flow::{
    kill_pod, kubeconfig_with_token, log_tails, render_chart_with, sidecar_args, spawn,
    RenderedChart,
};
use crate::kube_fixture::apply_rbac_manifest;
use crate::nth_fixture::service_account_token;

/// Where the charts run the controller.
pub const NAMESPACE: &str = "kube-system";

/// kube-controller-manager's controllers every flow runs: the binder, and the protection
/// controllers that lift the finalizers the apiserver's admission puts on every PVC and PV.
pub const PV_CONTROLLERS: [&str; 3] = [
    "persistentvolume-binder-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
];

/// The controller that grows a PV's file system size after its volume grew (beside
/// [`PV_CONTROLLERS`] where a flow expands a claim).
pub const EXPANDER: &str = "persistentvolume-expander-controller";

/// The upstream binaries a controller flow runs.
pub struct Tools {
    /// external-provisioner, external-attacher and external-resizer.
    pub sidecars: Sidecars,
    /// kube-controller-manager.
    pub kcm: PathBuf,
}

impl Tools {
    /// Builds them if needed (minutes the first time on a machine, so before anything with a
    /// deadline starts).
    pub async fn install() -> Result<Tools> {
        let sidecars = tokio::task::spawn_blocking(csi_sidecars::ensure_installed).await??;
        let kcm = tokio::task::spawn_blocking(kube_controller_manager::ensure_installed).await??;
        Ok(Tools { sidecars, kcm })
    }
}

/// A driver's chart: `charts/<name>`, rendered as `release` with `sets` (`key=value`), whose
/// controller Deployment runs as `service_account` in [`NAMESPACE`].
#[derive(Debug, Clone, Copy)]
pub struct Chart {
    /// The chart's directory under `charts/`.
    pub name: &'static str,
    /// The helm release.
    pub release: &'static str,
    /// The controller Deployment's ServiceAccount.
    pub service_account: &'static str,
    /// `--set` values.
    pub sets: &'static [&'static str],
}

/// The EBS driver's chart (`charts/aws-ebs-csi-driver`, release `ebs`), its controller's account.
pub const EBS_CHART: Chart = Chart {
    name: "aws-ebs-csi-driver",
    release: "ebs",
    service_account: "ebs-csi-controller-sa",
    sets: &[],
};

/// The Cinder plugin's chart (`charts/cinder-csi-plugin`, release `cinder`), its controller's
/// account.
pub const CINDER_CHART: Chart = Chart {
    name: "cinder-csi-plugin",
    release: "cinder",
    service_account: "csi-cinder-controller-sa",
    sets: &[],
};

/// The DVP driver's chart (`charts/dvp-csi-driver`, release `dvp`), pointed at the test
/// environment's tenant project in the parent, its controller's account.
pub const DVP_CHART: Chart = Chart {
    name: "dvp-csi-driver",
    release: "dvp",
    service_account: "csi-dvp-controller-sa",
    sets: &[
        "dvp.parentKubeconfigSecret.name=dvp-parent",
        "dvp.namespace=tenant-project",
    ],
};

/// A sidecar container of the chart's controller Deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sidecar {
    /// `csi-provisioner` (external-provisioner).
    Provisioner,
    /// `csi-attacher` (external-attacher).
    Attacher,
    /// `csi-resizer` (external-resizer).
    Resizer,
}

impl Sidecar {
    /// The container's name in the chart.
    pub fn container(self) -> &'static str {
        match self {
            Sidecar::Provisioner => "csi-provisioner",
            Sidecar::Attacher => "csi-attacher",
            Sidecar::Resizer => "csi-resizer",
        }
    }

    fn program(self, sidecars: &Sidecars) -> &Path {
        match self {
            Sidecar::Provisioner => &sidecars.provisioner,
            Sidecar::Attacher => &sidecars.attacher,
            Sidecar::Resizer => &sidecars.resizer,
        }
    }
}

/// How kube-controller-manager runs.
#[derive(Debug, Clone, Copy)]
pub struct Kcm<'a> {
    /// Controllers beside [`PV_CONTROLLERS`] (e.g. [`EXPANDER`]).
    pub extra_controllers: &'a [&'a str],
    /// Its `--v`.
    pub verbosity: u8,
}

impl Default for Kcm<'_> {
    fn default() -> Self {
        Kcm {
            extra_controllers: &[],
            verbosity: 2,
        }
    }
}

/// How the sidecars run beside the chart's arguments.
#[derive(Debug, Clone, Default)]
pub struct SidecarOptions {
    /// Arguments added to every sidecar's.
    pub extra: Vec<String>,
    /// The attacher retries within 5 s instead of its 5-minute backoff cap, so that recoveries
    /// show in seconds.
    pub quick_attacher_retries: bool,
}

/// A chart's RBAC applied to a cluster and its controller ServiceAccount's kubeconfig.
pub struct ChartAccount {
    /// A client of the cluster as its administrator.
    pub admin: Client,
    /// The rendered chart.
    pub chart: RenderedChart,
    /// The controller ServiceAccount's kubeconfig.
    pub kubeconfig: PathBuf,
}

/// Renders `chart`, applies its RBAC to `cluster` (failing when it rendered fewer than five
/// objects) and writes its controller ServiceAccount's kubeconfig into `dir`.
pub async fn chart_account(
    cluster: &KubeCluster,
    chart: &Chart,
    dir: &Path,
) -> Result<ChartAccount> {
    let Chart {
        name,
        release,
        service_account,
        sets,
    } = *chart;
    let rendered =
        tokio::task::spawn_blocking(move || render_chart_with(name, release, NAMESPACE, sets))
            .await??;
    let admin = cluster.kube_client(Identity::Admin).await?;
    let rbac_file = dir.join("rbac.yaml");
    std::fs::write(&rbac_file, &rendered.rbac)?;
    let applied = apply_rbac_manifest(&admin, &rbac_file).await?;
    anyhow::ensure!(
        applied >= 5,
        "the chart rendered only {applied} RBAC objects"
    );
    let token = service_account_token(&admin, NAMESPACE, service_account).await?;
    let kubeconfig = dir.join("kubeconfig-controller-sa.yaml");
    kubeconfig_with_token(&kubeconfig, cluster.apiserver_url(), &token)?;
    Ok(ChartAccount {
        admin,
        chart: rendered,
        kubeconfig,
    })
}

/// The cluster side of a driver's controller: RBAC, the controller ServiceAccount's
/// kubeconfig and kube-controller-manager (killed on drop), and which sidecars run beside the
/// driver.
pub struct ControllerSide {
    /// A client of the cluster as its administrator.
    pub admin: Client,
    /// The rendered chart.
    pub chart: RenderedChart,
    /// The controller ServiceAccount's kubeconfig.
    pub kubeconfig: PathBuf,
    /// Where the processes log.
    pub dir: PathBuf,
    sidecars: Vec<(PathBuf, Sidecar)>,
    _kcm: Child,
}

impl ControllerSide {
    /// Renders `chart`, applies its RBAC (failing when it rendered fewer than five objects),
    /// writes its controller ServiceAccount's kubeconfig and starts kube-controller-manager
    /// (`tools.kcm`, as administrator, [`PV_CONTROLLERS`] and `kcm`'s); the sidecars started
    /// later are `sidecars`, in this order; logs go to `dir`.
    pub async fn start(
        cluster: &KubeCluster,
        tools: &Tools,
        chart: &Chart,
        kcm: Kcm<'_>,
        sidecars: &[Sidecar],
        dir: &Path,
    ) -> Result<ControllerSide> {
        let ChartAccount {
            admin,
            chart: rendered,
            kubeconfig,
        } = chart_account(cluster, chart, dir).await?;

        let controllers: Vec<&str> = PV_CONTROLLERS
            .iter()
            .chain(kcm.extra_controllers)
            .copied()
            .collect();
        let kcm = spawn(
            &tools.kcm,
            &[
                format!(
                    "--kubeconfig={}",
                    cluster.kubeconfig(Identity::Admin).display()
                ),
                format!("--controllers={}", controllers.join(",")),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                format!("--v={}", kcm.verbosity),
            ],
            &dir.join("kcm.log"),
            &[],
        )?;
        Ok(ControllerSide {
            admin,
            chart: rendered,
            kubeconfig,
            dir: dir.to_path_buf(),
            sidecars: sidecars
                .iter()
                .map(|s| (s.program(&tools.sidecars).to_path_buf(), *s))
                .collect(),
            _kcm: kcm,
        })
    }

    /// Starts the sidecars on `socket` as the controller ServiceAccount, each logging to
    /// `<container without "csi-">.log`.
    pub fn start_sidecars(&self, socket: &Path, options: &SidecarOptions) -> Result<Vec<Child>> {
        let mut children = Vec::new();
        for (program, sidecar) in &self.sidecars {
            let container = sidecar.container();
            let mut args =
                sidecar_args(&self.chart, container, socket, &self.kubeconfig, NAMESPACE)?;
            args.extend(options.extra.iter().cloned());
            if options.quick_attacher_retries && *sidecar == Sidecar::Attacher {
                args.push("--retry-interval-max=5s".into());
            }
            let log = self
                .dir
                .join(format!("{}.log", container.trim_start_matches("csi-")));
            children.push(spawn(program, &args, &log, &[])?);
        }
        Ok(children)
    }

    /// Starts the controller pod: `driver` (started by the caller, serving on `socket`) and the
    /// sidecars beside it, with quick attacher retries.
    pub fn start_pod(&self, driver: Child, socket: &Path) -> Result<Pod> {
        let options = SidecarOptions {
            quick_attacher_retries: true,
            ..SidecarOptions::default()
        };
        let mut children = vec![driver];
        children.extend(self.start_sidecars(socket, &options)?);
        Ok(Pod { children })
    }
}

/// A controller pod: the driver and its sidecars, started and SIGKILLed together (killed on
/// drop too).
#[derive(Default)]
pub struct Pod {
    children: Vec<Child>,
}

impl Pod {
    /// SIGKILLs every process and reaps it, as a kubelet's restart would.
    pub async fn kill(&mut self) -> Result<()> {
        kill_pod(&mut self.children).await
    }
}

/// Runs `flow` within `deadline`; a failure carries the tails of `logs` in `dir`, and so does a
/// timeout (`what did not finish within …`).
pub async fn within<T>(
    what: &str,
    deadline: Duration,
    dir: &Path,
    logs: &[&str],
    flow: impl Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(deadline, flow)
        .await
        .with_context(|| {
            format!(
                "{what} did not finish within {deadline:?}\n{}",
                log_tails(dir, logs)
            )
        })?
        .map_err(|e| e.context(log_tails(dir, logs)))
}
