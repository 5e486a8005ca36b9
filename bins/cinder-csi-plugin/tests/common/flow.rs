//! The sidecar flow on the CSI harness of `stratus_scenarios::csi`: the chart's controller side
//! (RBAC, ServiceAccount, kube-controller-manager's binder), a Nova server and its Node/CSINode
//! standing for the node, and the controller "pod" — the driver's controller service on
//! Keystone and the simulators behind the counting proxy, and the upstream provisioner,
//! attacher and resizer with the chart's arguments — which can be SIGKILLed and started again,
//! as a kubelet would restart it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use stratus_csi_cinder::{DEVICE_PATH, DRIVER_NAME, TOPOLOGY_KEY};
use stratus_openstack_sim::SimHandle;
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::flow as csi_flow;
use stratus_scenarios::csi::harness::{self, Chart, ControllerSide, Kcm, Pod, Sidecar, Tools};
use stratus_testenv::{KubeCluster, OpenStackEnv};

use super::{start_driver_with, ZONE};

/// The driver's chart.
pub const CHART: Chart = harness::CINDER_CHART;
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
    side: ControllerSide,
    pod: Pod,
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
        tools: &Tools,
    ) -> Result<Flow> {
        let sidecars = [Sidecar::Provisioner, Sidecar::Attacher, Sidecar::Resizer];
        let side =
            ControllerSide::start(&cluster, tools, &CHART, Kcm::default(), &sidecars, dir).await?;
        let admin = side.admin.clone();

        let node_server = super::node_server(&openstack, "csi-node-1")?;
        let labels: BTreeMap<String, String> =
            [(TOPOLOGY_KEY.to_string(), ZONE.to_string())].into();
        csi_flow::node_objects(&admin, NODE, DRIVER_NAME, &node_server, labels).await?;
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
            side,
            pod: Pod::default(),
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
        self.pod = self.side.start_pod(driver, &socket)?;
        Ok(())
    }

    /// SIGKILLs the driver and its sidecars and reaps them.
    pub async fn kill_controller(&mut self) -> Result<()> {
        self.pod.kill().await
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
    let tools = Tools::install().await?;
    let cluster = KubeCluster::start().await?;
    let openstack = OpenStackEnv::start().await?;
    let tmp = tempfile::tempdir()?;
    let dir: PathBuf = tmp.path().to_path_buf();
    harness::within("the test", DEADLINE, &dir, &LOGS, async {
        let mut flow = Flow::prepare(cluster, openstack, &dir, &tools).await?;
        let result = body(&mut flow).await;
        let _ = flow.kill_controller().await;
        result
    })
    .await
}
