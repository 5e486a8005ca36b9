//! Shared set-up of the cloud-controller-manager integration tests: a fresh real environment
//! with the shipped RBAC applied, a subnet in moto, and the CCM binary under test.

#![allow(dead_code)]

pub mod lb;
pub mod serving;

use std::path::PathBuf;
use std::time::Duration;

use stratus_scenarios::ccm::{write_cloud_config_with, CcmProcess};
use stratus_scenarios::{ec2_fixture, kube_fixture};
use stratus_testenv::{Identity, TestEnv};

pub const ZONE: &str = "us-east-1a";
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Setup {
    pub env: TestEnv,
    pub admin: kube::Client,
    /// EC2 client straight to moto, so the set-up is not counted as CCM traffic.
    pub ec2: aws_sdk_ec2::Client,
    pub subnet: String,
    pub cluster_id: String,
}

/// Starts the environment; applies `deploy/rbac.yaml` unless `rbac` is false.
pub async fn setup(cluster_id: &str, rbac: bool) -> Setup {
    let env = TestEnv::start().await.expect("test environment");
    let admin = env
        .kube_client(Identity::Admin)
        .await
        .expect("admin client");
    if rbac {
        let path = kube_fixture::repo_root().join("deploy/rbac.yaml");
        kube_fixture::apply_rbac_manifest(&admin, &path)
            .await
            .expect("apply RBAC");
    }
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await.expect("subnet");
    Setup {
        env,
        admin,
        ec2,
        subnet,
        cluster_id: cluster_id.to_string(),
    }
}

impl Setup {
    /// Starts the CCM binary with a cloud config for this cluster and fast periods.
    pub fn start_ccm(&self, extra: &[&str]) -> CcmProcess {
        self.start_ccm_with_config("", extra)
    }

    /// As [`Setup::start_ccm`], with `more_global` (whole lines) in the cloud config's `[Global]`.
    pub fn start_ccm_with_config(&self, more_global: &str, extra: &[&str]) -> CcmProcess {
        let mut args = vec![
            "--node-monitor-period=500ms",
            "--instance-cache-refresh-period=1s",
            // Leader election stays on (the upstream default), with short timings so a
            // restarted CCM does not wait long for its predecessor's lease.
            "--leader-elect-lease-duration=2s",
            "--leader-elect-renew-deadline=1500ms",
            "--leader-elect-retry-period=500ms",
        ];
        args.extend(extra);
        self.start_ccm_configured(more_global, &args)
    }

    /// Starts the CCM binary with a cloud config for this cluster and the default periods.
    pub fn start_ccm_at_defaults(&self, extra: &[&str]) -> CcmProcess {
        self.start_ccm_configured("", extra)
    }

    fn start_ccm_configured(&self, more_global: &str, extra: &[&str]) -> CcmProcess {
        let config = write_cloud_config_with(self.env.dir(), &self.cluster_id, more_global)
            .expect("cloud config");
        let mut args: Vec<String> = vec![
            "--cloud-provider=aws".into(),
            format!("--cloud-config={}", config.display()),
            "--v=4".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        CcmProcess::start(&ccm_binary(), &self.env, &args).expect("start ccm")
    }

    /// An uninitialised Node named after a new instance, waited on until the CCM initialised it.
    pub async fn initialized_node(&self) -> String {
        let inst = self.launch(1).await;
        let name = inst[0].id.clone();
        kube_fixture::create_uninitialized_node(&self.admin, &name, &[], Default::default())
            .await
            .unwrap();
        stratus_scenarios::wait_for(&format!("{name} initialized"), WAIT, || async {
            Ok(kube_fixture::get_node(&self.admin, &name)
                .await?
                .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
        })
        .await
        .unwrap();
        name
    }

    pub async fn launch(&self, count: i32) -> Vec<ec2_fixture::Launched> {
        ec2_fixture::launch(
            &self.ec2,
            &self.subnet,
            ZONE,
            count,
            Some(&self.cluster_id),
            "m5.large",
        )
        .await
        .expect("launch instances")
    }
}

pub fn ccm_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cloud-controller-manager"))
}
