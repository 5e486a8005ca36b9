//! The sidecar flow as a harness: the chart's RBAC and ServiceAccount, kube-controller-manager's
//! binder, a Nova server and its Node/CSINode standing for the node, the driver's controller
//! service on Keystone and the simulators behind the counting proxy, and the upstream
//! provisioner, attacher and resizer with the chart's arguments. The controller "pod" (driver
//! and sidecars) can be SIGKILLed and started again, as a kubelet would restart it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use stratus_csi_cinder::{DEVICE_PATH, DRIVER_NAME, TOPOLOGY_KEY};
use stratus_openstack_sim::SimHandle;
use stratus_scenarios::csi_claims::Claims;
use stratus_scenarios::csi_flow::{self, kubeconfig_with_token, log_tails, spawn, RenderedChart};
use stratus_scenarios::kube_fixture::apply_rbac_manifest;
use stratus_scenarios::nth_fixture::service_account_token;
use stratus_testenv::tools::csi_sidecars::{self, Sidecars};
use stratus_testenv::tools::kube_controller_manager;
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv};
use tokio::process::Child;

use super::{start_driver_with, ZONE};

/// Where the chart runs the controller.
pub const NAMESPACE: &str = "kube-system";
/// The chart's controller ServiceAccount.
pub const CONTROLLER_SA: &str = "csi-cinder-controller-sa";
/// The node of the flow.
pub const NODE: &str = "node-1";
/// The StorageClass the flow's claims use (volume type `ssd`).
pub const CLASS: &str = "cinder-ssd";
/// The logs a failure shows.
pub const LOGS: [&str; 5] = csi_flow::CONTROLLER_LOGS;

/// A running flow.
pub struct Flow {
    /// Keystone, the simulators and the proxy.
    pub openstack: OpenStackEnv,
    /// Logs and the socket.
    pub dir: PathBuf,
    /// The claims, attachments and StorageClass (as cluster admin).
    pub claims: Claims,
    /// The Nova server of [`NODE`].
    pub node_server: String,
    sidecars: Sidecars,
    chart: RenderedChart,
    sa_kubeconfig: PathBuf,
    pod: Vec<Child>,
    _kcm: Child,
    _cluster: KubeCluster,
}

impl std::ops::Deref for Flow {
    type Target = Claims;

    fn deref(&self) -> &Claims {
        &self.claims
    }
}

impl Flow {
    /// Sets everything up; the controller is not started yet.
    pub async fn prepare(
        cluster: KubeCluster,
        openstack: OpenStackEnv,
        dir: &Path,
        sidecars: Sidecars,
        kcm: &Path,
    ) -> Result<Flow> {
        let chart = tokio::task::spawn_blocking(|| {
            csi_flow::render_chart("cinder-csi-plugin", "cinder", NAMESPACE)
        })
        .await??;
        let admin = cluster.kube_client(Identity::Admin).await?;
        let rbac_file = dir.join("rbac.yaml");
        std::fs::write(&rbac_file, &chart.rbac)?;
        let applied = apply_rbac_manifest(&admin, &rbac_file).await?;
        anyhow::ensure!(
            applied >= 5,
            "the chart rendered only {applied} RBAC objects"
        );
        let token = service_account_token(&admin, NAMESPACE, CONTROLLER_SA).await?;
        let sa_kubeconfig = dir.join("kubeconfig-controller-sa.yaml");
        kubeconfig_with_token(&sa_kubeconfig, cluster.apiserver_url(), &token)?;

        let node_server = super::node_server(&openstack, "csi-node-1")?;
        let labels: BTreeMap<String, String> =
            [(TOPOLOGY_KEY.to_string(), ZONE.to_string())].into();
        csi_flow::node_objects(&admin, NODE, DRIVER_NAME, &node_server, labels).await?;
        let kcm = spawn(
            kcm,
            &[
                format!("--kubeconfig={}", cluster.kubeconfig(Identity::Admin).display()),
                "--controllers=persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller".into(),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--v=2".into(),
            ],
            &dir.join("kcm.log"),
            &[],
        )?;
        let claims = Claims {
            admin,
            driver: DRIVER_NAME.into(),
            class: CLASS.into(),
            device_key: DEVICE_PATH.into(),
        };
        claims.create_class(&[("type", "ssd")]).await?;
        Ok(Flow {
            openstack,
            dir: dir.to_path_buf(),
            claims,
            node_server,
            sidecars,
            chart,
            sa_kubeconfig,
            pod: Vec::new(),
            _kcm: kcm,
            _cluster: cluster,
        })
    }

    /// The in-process simulator.
    pub fn sim(&self) -> &SimHandle {
        self.openstack
            .sim()
            .expect("the OpenStack test environment runs the simulator in process")
    }

    /// Starts the driver's controller service, then the sidecars.
    pub async fn start_controller(&mut self) -> Result<()> {
        let (driver, socket) = start_driver_with(
            &self.openstack,
            &self.dir,
            &self.node_server,
            &["--provide-node-service=false"],
        )
        .await?;
        self.pod.push(driver);
        self.pod.extend(csi_flow::start_sidecars(
            &[
                (self.sidecars.provisioner.as_path(), "csi-provisioner"),
                (self.sidecars.attacher.as_path(), "csi-attacher"),
                (self.sidecars.resizer.as_path(), "csi-resizer"),
            ],
            &self.chart,
            &socket,
            &self.sa_kubeconfig,
            NAMESPACE,
            &self.dir,
        )?);
        Ok(())
    }

    /// SIGKILLs the driver and its sidecars and reaps them.
    pub async fn kill_controller(&mut self) -> Result<()> {
        csi_flow::kill_pod(&mut self.pod).await
    }

    /// A request count of the proxy (`block-storage:POST /volumes`).
    pub async fn count(&self, key: &str) -> Result<u64> {
        Ok(self
            .openstack
            .request_counts()
            .await?
            .get(key)
            .copied()
            .unwrap_or(0))
    }

    /// The logs' tails, for failure messages.
    pub fn logs(&self) -> String {
        csi_flow::log_tails(&self.dir, &LOGS)
    }
}

/// How long a whole flow may take.
pub const DEADLINE: Duration = Duration::from_secs(300);

/// Runs `body` on a prepared flow (controller not started) within [`DEADLINE`], with the logs
/// in the failure; kills the controller after.
pub async fn with_flow<F>(body: F) -> Result<()>
where
    F: for<'a> FnOnce(
        &'a mut Flow,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<()>> + Send + 'a>,
    >,
{
    let sidecars = tokio::task::spawn_blocking(csi_sidecars::ensure_installed).await??;
    let kcm = tokio::task::spawn_blocking(kube_controller_manager::ensure_installed).await??;
    let cluster = KubeCluster::start().await?;
    let openstack = OpenStackEnv::start().await?;
    let tmp = tempfile::tempdir()?;
    let dir: PathBuf = tmp.path().to_path_buf();
    let run = async {
        let mut flow = Flow::prepare(cluster, openstack, &dir, sidecars, &kcm).await?;
        let result = body(&mut flow).await;
        let _ = flow.kill_controller().await;
        result.map_err(|e| e.context(flow.logs()))
    };
    tokio::time::timeout(DEADLINE, run).await.with_context(|| {
        format!(
            "the test did not finish within {DEADLINE:?}\n{}",
            log_tails(&dir, &LOGS)
        )
    })?
}
