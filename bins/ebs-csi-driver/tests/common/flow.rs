//! The sidecar flow as a harness the fault tests drive: the chart's RBAC and ServiceAccount,
//! kube-controller-manager's binder, the driver's controller service behind the counting proxy
//! in front of moto, and the upstream sidecars with the chart's arguments. The controller
//! "pod" (driver and sidecars) can be SIGKILLed and started again, as a kubelet would restart it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use aws_sdk_ec2::types::{Filter, VolumeState};
use stratus_scenarios::csi_claims::Claims;
use stratus_scenarios::csi_flow::{self, kubeconfig_with_token, spawn, RenderedChart};
use stratus_scenarios::ec2_fixture;
use stratus_scenarios::kube_fixture::apply_rbac_manifest;
use stratus_scenarios::nth_fixture::service_account_token;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::tools::csi_sidecars::Sidecars;
use stratus_testenv::{Identity, TestEnv};
use tokio::process::Child;

use super::ZONE;

/// The driver's name.
pub const DRIVER: &str = "ebs.csi.aws.com";
/// Where the chart runs the controller.
pub const NAMESPACE: &str = "kube-system";
/// The chart's controller ServiceAccount.
pub const CONTROLLER_SA: &str = "ebs-csi-controller-sa";
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
    sidecars: Sidecars,
    resizer: Option<PathBuf>,
    chart: RenderedChart,
    sa_kubeconfig: PathBuf,
    socket: PathBuf,
    pod: Vec<Child>,
    _kcm: Child,
}

impl std::ops::Deref for Flow {
    type Target = Claims;

    fn deref(&self) -> &Claims {
        &self.claims
    }
}

impl Flow {
    /// Sets everything up and starts the controller with `driver_flags`.
    pub async fn start(
        env: TestEnv,
        dir: &Path,
        sidecars: Sidecars,
        resizer: Option<PathBuf>,
        kcm: &Path,
        driver_flags: &[&str],
    ) -> Result<Flow> {
        let chart = tokio::task::spawn_blocking(|| {
            csi_flow::render_chart("aws-ebs-csi-driver", "ebs", NAMESPACE)
        })
        .await??;
        let admin = env.kube_client(Identity::Admin).await?;
        let rbac_file = dir.join("rbac.yaml");
        std::fs::write(&rbac_file, &chart.rbac)?;
        apply_rbac_manifest(&admin, &rbac_file).await?;
        let token = service_account_token(&admin, NAMESPACE, CONTROLLER_SA).await?;
        let sa_kubeconfig = dir.join("kubeconfig-controller-sa.yaml");
        kubeconfig_with_token(&sa_kubeconfig, env.apiserver_url(), &token)?;

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
        csi_flow::node_objects(&admin, NODE, DRIVER, &instance_id, zone_labels).await?;
        let kcm = spawn(
            kcm,
            &[
                format!("--kubeconfig={}", env.kubeconfig(Identity::Admin).display()),
                "--controllers=persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller,persistentvolume-expander-controller".into(),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--v=2".into(),
            ],
            &dir.join("kcm.log"),
            &[],
        )?;
        let claims = Claims {
            admin,
            driver: DRIVER.into(),
            class: CLASS.into(),
            device_key: stratus_csi_ebs::shapes::DEVICE_PATH.into(),
        };
        claims.create_class(&[("type", "gp3")]).await?;
        let mut flow = Flow {
            socket: dir.join("csi.sock"),
            env,
            dir: dir.to_path_buf(),
            claims,
            ec2,
            instance_id,
            driver_flags: driver_flags.iter().map(|f| f.to_string()).collect(),
            sidecars,
            resizer,
            chart,
            sa_kubeconfig,
            pod: Vec::new(),
            _kcm: kcm,
        };
        flow.start_controller().await?;
        Ok(flow)
    }

    /// Starts the driver's controller service, then the sidecars.
    pub async fn start_controller(&mut self) -> Result<()> {
        let _ = std::fs::remove_file(&self.socket);
        let mut args = vec![
            "controller".to_string(),
            format!("--endpoint=unix://{}", self.socket.display()),
            "--v=4".into(),
        ];
        args.extend(self.driver_flags.iter().cloned());
        let driver = spawn(
            Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
            &args,
            &self.dir.join("driver.log"),
            &self.env.aws().env_vars(),
        )?;
        self.pod.push(driver);
        let socket = self.socket.clone();
        wait_for("the driver's socket", Duration::from_secs(30), || async {
            Ok(socket.exists().then_some(()))
        })
        .await?;
        let mut containers = vec![
            (self.sidecars.provisioner.as_path(), "csi-provisioner"),
            (self.sidecars.attacher.as_path(), "csi-attacher"),
        ];
        if let Some(resizer) = &self.resizer {
            containers.push((resizer.as_path(), "csi-resizer"));
        }
        self.pod.extend(csi_flow::start_sidecars(
            &containers,
            &self.chart,
            &self.socket,
            &self.sa_kubeconfig,
            NAMESPACE,
            &self.dir,
        )?);
        Ok(())
    }

    /// SIGKILLs the driver and its sidecars (the sidecars would exit on the lost connection).
    pub async fn kill_controller(&mut self) -> Result<()> {
        csi_flow::kill_pod(&mut self.pod).await
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
