//! What the driver's integration tests share: the tenant node's VM in the parent (labelled with
//! the node name, as capdvp makes it), the driver's parent identity bound to the shipped
//! least-privilege Role, and the real `dvp-csi-driver` binary started against the parent
//! apiserver and the platform simulator, with loop devices for the node side (the CSI harness
//! of `stratus_scenarios::csi`).
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use kube::api::{Api, ListParams};
use stratus_dvp_api::{VirtualDisk, VirtualMachineBlockDeviceAttachment};
use stratus_scenarios::csi::driver;
pub use stratus_scenarios::csi::driver::{driver_log, loops_dir};
use stratus_scenarios::dvp_fixture::DvpFixture;
use stratus_scenarios::dvp_rbac::rules_in;
use stratus_testenv::DvpEnv;
use tokio::process::Child;
use tokio::time::Instant;

/// The driver's chart, pointed at the parent's tenant namespace.
pub const CHART: stratus_scenarios::csi::harness::Chart =
    stratus_scenarios::csi::harness::DVP_CHART;
/// The tenant node and the VM backing it (named differently: found by its hostname label).
pub const NODE: &str = "node-1";
/// The VM backing [`NODE`].
pub const VM: &str = "tenant-vm-1";
/// The parent StorageClass tenant StorageClasses name.
pub const PARENT_CLASS: &str = "linstor-thin-r2";

/// The tenant cluster's UUID the driver runs with.
pub const CLUSTER_UUID: &str = "5c1e7b2a-0d4f-4e59-9b1e-2f6a8c3d7e10";
/// The shipped parent RBAC the driver runs under.
pub const PARENT_RBAC: &str = "deploy/dvp/csi-parent-rbac.yaml";
/// The driver's ServiceAccount in the parent.
pub const PARENT_ACCOUNT: &str = "stratus-dvp-csi-driver";

/// Creates the VM `vm` backing tenant node `node` and waits until it runs.
pub async fn node_vm(env: &DvpEnv, vm: &str, node: &str) -> Result<()> {
    let fixture = DvpFixture::new(env.parent_admin().await?, env.namespace(), "csi");
    fixture.create_vm(vm, node).await?;
    fixture.running_ip(vm).await?;
    Ok(())
}

/// The environment giving the driver a parent identity bound to the shipped Role.
pub async fn driver_env(env: &DvpEnv) -> Result<Vec<(String, String)>> {
    env.bound_account_env(PARENT_ACCOUNT, rules_in(PARENT_RBAC, "Role")?)
        .await
}

/// Starts the driver with its socket, log and loop devices in `dir` and `extra` flags; returns
/// the child once it answers Probe.
pub async fn start_driver(
    vars: &[(String, String)],
    dir: &Path,
    node: &str,
    extra: &[&str],
) -> Result<(Child, PathBuf)> {
    let mut args = vec![
        format!("--endpoint=unix://{}", driver::socket(dir).display()),
        format!("--cluster-uuid={CLUSTER_UUID}"),
        format!("--node-name={node}"),
        format!("--loop-devices-dir={}", loops_dir(dir).display()),
        "--operation-wait=5s".into(),
        "--v=4".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    driver::start(
        Path::new(env!("CARGO_BIN_EXE_dvp-csi-driver")),
        dir,
        &args,
        vars,
    )
    .await
}

/// The VirtualDisks and VMBDAs in the tenant namespace of the parent, by name.
pub async fn parent_objects(env: &DvpEnv) -> Result<(Vec<String>, Vec<String>)> {
    let admin = env.parent_admin().await?;
    let disks = Api::<VirtualDisk>::namespaced(admin.clone(), env.namespace())
        .list(&ListParams::default())
        .await?
        .items;
    let vmbdas = Api::<VirtualMachineBlockDeviceAttachment>::namespaced(admin, env.namespace())
        .list(&ListParams::default())
        .await?
        .items;
    let names = |m: Vec<Option<String>>| m.into_iter().flatten().collect();
    Ok((
        names(disks.into_iter().map(|d| d.metadata.name).collect()),
        names(vmbdas.into_iter().map(|a| a.metadata.name).collect()),
    ))
}

/// Waits until the parent holds no VirtualDisks and no VMBDAs.
pub async fn wait_parent_empty(env: &DvpEnv, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let (disks, vmbdas) = parent_objects(env).await?;
        if disks.is_empty() && vmbdas.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("left in the parent: VirtualDisks {disks:?}, VMBDAs {vmbdas:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
