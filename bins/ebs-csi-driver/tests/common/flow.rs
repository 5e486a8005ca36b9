//! The sidecar flow the fault tests drive, on the CSI harness of `stratus_scenarios::csi`: the
//! chart's controller side (RBAC, ServiceAccount, kube-controller-manager's binder and
//! expander), the node's instance in moto, and the controller "pod" — the driver's controller
//! service behind the counting proxy in front of moto, and the upstream sidecars with the chart's
//! arguments — which can be SIGKILLed and started again, as a kubelet would restart it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use aws_sdk_ec2::types::{Filter, VolumeState};
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::harness::{
    self, Chart, ControllerSide, Kcm, Pod, Sidecar, Tools, EXPANDER,
};
use stratus_scenarios::csi::{driver, flow as csi_flow};
use stratus_scenarios::ec2_fixture;
use stratus_testenv::TestEnv;

use super::ZONE;

/// The driver's name.
pub const DRIVER: &str = "ebs.csi.aws.com";
/// The driver's chart.
pub const CHART: Chart = harness::EBS_CHART;
/// The node of the flow.
pub const NODE: &str = "ip-10-0-1-10.ec2.internal";
/// The StorageClass the flow's claims use.
pub const CLASS: &str = "ebs-gp3";
/// The logs a failure shows.
pub const LOGS: [&str; 5] = csi_flow::CONTROLLER_LOGS;

/// A running flow.
pub struct Flow {
    /// The environment (apiserver, etcd, moto, proxy).
    pub env: TestEnv,
    /// Logs and the socket.
    pub dir: PathBuf,
    /// The claims, attachments and StorageClass (as cluster admin).
    pub claims: Claims,
    /// EC2 on moto directly (uncounted).
    pub ec2: aws_sdk_ec2::Client,
    /// The node's instance.
    pub instance_id: String,
    /// Extra flags of the driver.
    pub driver_flags: Vec<String>,
    side: ControllerSide,
    pod: Pod,
}

impl std::ops::Deref for Flow {
    type Target = Claims;

    fn deref(&self) -> &Claims {
        &self.claims
    }
}

/// Launches the node's instance in moto and writes the Node and CSINode a kubelet and the
/// registrar would (the zone as topology); returns EC2 on moto (uncounted) and the instance.
pub async fn node_instance(
    env: &TestEnv,
    admin: &kube::Client,
) -> Result<(aws_sdk_ec2::Client, String)> {
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let instance_id = ec2_fixture::launch(&ec2, &subnet, ZONE, 1, None, "m5.large").await?[0]
        .id
        .clone();
    let zone_labels: BTreeMap<String, String> = [
        (stratus_csi_ebs::TOPOLOGY_KEY.to_string(), ZONE.to_string()),
        (
            stratus_csi_ebs::WELL_KNOWN_ZONE_KEY.to_string(),
            ZONE.to_string(),
        ),
    ]
    .into();
    csi_flow::node_objects(admin, NODE, DRIVER, &instance_id, zone_labels).await?;
    Ok((ec2, instance_id))
}

impl Flow {
    /// Sets everything up and starts the controller with `driver_flags` (and the resizer
    /// beside the provisioner and the attacher when `resizer`).
    pub async fn start(
        env: TestEnv,
        dir: &Path,
        tools: &Tools,
        resizer: bool,
        driver_flags: &[&str],
    ) -> Result<Flow> {
        let kcm = Kcm {
            extra_controllers: &[EXPANDER],
            ..Kcm::default()
        };
        let mut sidecars = vec![Sidecar::Provisioner, Sidecar::Attacher];
        if resizer {
            sidecars.push(Sidecar::Resizer);
        }
        let side = ControllerSide::start(env.cluster(), tools, &CHART, kcm, &sidecars, dir).await?;
        let admin = side.admin.clone();
        let (ec2, instance_id) = node_instance(&env, &admin).await?;
        let claims = Claims {
            admin,
            driver: DRIVER.into(),
            class: CLASS.into(),
            device_key: stratus_csi_ebs::shapes::DEVICE_PATH.into(),
        };
        claims.create_class(&[("type", "gp3")]).await?;
        let mut flow = Flow {
            env,
            dir: dir.to_path_buf(),
            claims,
            ec2,
            instance_id,
            driver_flags: driver_flags.iter().map(|f| f.to_string()).collect(),
            side,
            pod: Pod::default(),
        };
        flow.start_controller().await?;
        Ok(flow)
    }

    /// Starts the driver's controller service, then the sidecars.
    pub async fn start_controller(&mut self) -> Result<()> {
        let mut args = vec![
            "controller".to_string(),
            format!("--endpoint=unix://{}", driver::socket(&self.dir).display()),
            "--v=4".into(),
        ];
        args.extend(self.driver_flags.iter().cloned());
        let (driver, socket) = driver::start(
            Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
            &self.dir,
            &args,
            &self.env.aws().env_vars(),
        )
        .await?;
        self.pod = self.side.start_pod(driver, &socket)?;
        Ok(())
    }

    /// SIGKILLs the driver and its sidecars (the sidecars would exit on the lost connection).
    pub async fn kill_controller(&mut self) -> Result<()> {
        self.pod.kill().await
    }

    /// Volumes in moto (not deleted) whose tag `key` is `value`.
    pub async fn volumes_tagged(&self, key: &str, value: &str) -> Result<Vec<String>> {
        let out = self
            .ec2
            .describe_volumes()
            .filters(
                Filter::builder()
                    .name(format!("tag:{key}"))
                    .values(value)
                    .build(),
            )
            .send()
            .await?;
        Ok(out
            .volumes()
            .iter()
            .filter(|v| v.state() != Some(&VolumeState::Deleted))
            .filter_map(|v| v.volume_id().map(str::to_string))
            .collect())
    }

    /// The volume's attachments in moto: (instance, state, device).
    pub async fn attachments(&self, volume_id: &str) -> Result<Vec<(String, String, String)>> {
        let out = self
            .ec2
            .describe_volumes()
            .volume_ids(volume_id)
            .send()
            .await?;
        Ok(out
            .volumes()
            .iter()
            .flat_map(|v| v.attachments())
            .map(|a| {
                (
                    a.instance_id().unwrap_or_default().to_string(),
                    a.state()
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                    a.device().unwrap_or_default().to_string(),
                )
            })
            .collect())
    }

    /// A request count of the proxy (`ec2:CreateVolume`).
    pub async fn count(&self, key: &str) -> Result<u64> {
        Ok(self
            .env
            .aws_request_counts()
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

/// How long a whole test may take.
pub const DEADLINE: Duration = Duration::from_secs(300);

/// Runs `body` on a started flow (driver flags `flags`) within [`DEADLINE`], with the logs in
/// the failure.
pub async fn with_flow<F>(flags: &[&str], body: F) -> Result<()>
where
    F: for<'a> FnOnce(
        &'a mut Flow,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<()>> + Send + 'a>,
    >,
{
    let tools = Tools::install().await?;
    let env = TestEnv::start().await?;
    let tmp = tempfile::tempdir()?;
    let dir: PathBuf = tmp.path().to_path_buf();
    harness::within("the test", DEADLINE, &dir, &LOGS, async {
        let mut flow = Flow::start(env, &dir, &tools, false, flags).await?;
        body(&mut flow).await
    })
    .await
}
