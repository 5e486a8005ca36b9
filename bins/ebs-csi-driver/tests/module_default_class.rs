//! The module's headline on a fresh install: a PersistentVolumeClaim that names no class binds.
//! The module controller makes the AWS module's StorageClasses (the first by name the default),
//! the apiserver's DefaultStorageClass admission gives the claim that class, and the upstream
//! external-provisioner with the driver's controller on moto provisions it — once the claim
//! carries the node the scheduler picked, as WaitForFirstConsumer asks.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use common::flow::{node_instance, CHART, DRIVER, NODE};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use prometheus_client::registry::Registry;
use serde_json::json;
use stratus_module::driver::Driver;
use stratus_module::metrics::Metrics;
use stratus_module::Cloud;
use stratus_scenarios::csi::claims::Claims;
use stratus_scenarios::csi::harness::{self, ControllerSide, Kcm, Sidecar, Tools};
use stratus_scenarios::csi::{driver, flow as csi_flow};
use stratus_testenv::TestEnv;

const STEP: Duration = Duration::from_secs(60);
const DEADLINE: Duration = Duration::from_secs(180);
const PCC: &str =
    "apiVersion: deckhouse.io/v1\nkind: AWSClusterConfiguration\nprovider:\n  region: us-east-1\n";

async fn flow(env: &TestEnv, dir: &Path, tools: &Tools) -> Result<()> {
    let side = ControllerSide::start(
        env.cluster(),
        tools,
        &CHART,
        Kcm::default(),
        &[Sidecar::Provisioner],
        dir,
    )
    .await?;
    let admin = side.admin.clone();
    let (ec2, _instance) = node_instance(env, &admin).await?;
    let (driver, socket) = driver::start(
        Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
        dir,
        &[
            "controller".into(),
            format!("--endpoint=unix://{}", driver::socket(dir).display()),
            "--v=4".into(),
        ],
        &env.aws().env_vars(),
    )
    .await?;
    let _pod = side.start_pod(driver, &socket)?;

    // The module's glue: its classes from the (empty) settings.
    let pcc = stratus_scenarios::kube_fixture::opaque_secret(
        "d8-provider-cluster-configuration",
        &[("cloud-provider-cluster-configuration.yaml", PCC)],
    );
    Api::<Secret>::namespaced(admin.clone(), "kube-system")
        .create(&PostParams::default(), &pcc)
        .await?;
    let mut registry = Registry::default();
    let glue = Driver::new(
        admin.clone(),
        Cloud::Aws,
        None,
        Metrics::register(&mut registry),
    );
    assert_eq!(glue.reconcile().await, vec![]);

    // A claim with no class, placed on the node as the scheduler would.
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    }))?;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "default");
    let created = pvcs.create(&PostParams::default(), &claim).await?;
    let class = created
        .spec
        .and_then(|s| s.storage_class_name)
        .context("no default class was given")?;
    assert_eq!(class, "gp2", "the module's default class");
    pvcs.patch(
        "data",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": NODE}}}),
        ),
    )
    .await?;
    let claims = Claims {
        admin: admin.clone(),
        driver: DRIVER.into(),
        class,
        device_key: stratus_csi_ebs::shapes::DEVICE_PATH.into(),
    };
    let (_pv, volume_id) = claims.wait_bound("data", STEP).await?;
    let described = ec2.describe_volumes().volume_ids(&volume_id).send().await?;
    let volume = described
        .volumes()
        .first()
        .with_context(|| format!("{volume_id} is not in moto"))?;
    assert_eq!(volume.volume_type().map(|t| t.as_str()), Some("gp2"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_without_a_class_binds_through_the_modules_default() -> Result<()> {
    let tools = Tools::install().await?;
    let env = TestEnv::start().await?;
    let dir = tempfile::tempdir()?;
    let dir_path: PathBuf = dir.path().to_path_buf();
    harness::within(
        "the default-class flow",
        DEADLINE,
        &dir_path,
        &csi_flow::CONTROLLER_LOGS,
        flow(&env, &dir_path, &tools),
    )
    .await
}
