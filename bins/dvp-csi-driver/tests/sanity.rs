//! csi-sanity (csi-test v5.6.0) against the real `dvp-csi-driver` binary serving controller and
//! node: the controller talks to the parent kube-apiserver as a ServiceAccount bound to the
//! shipped least-privilege Role (`deploy/dvp/csi-parent-rbac.yaml`), the platform simulator
//! makes the VirtualDisks Ready and the VMBDAs Attached, and the node plugin formats and mounts
//! loop devices standing in for the disks. Zero failures allowed; skipped specs are printed; no
//! VirtualDisk or VMBDA is left behind.

mod common;

use std::time::Duration;

use anyhow::Result;
use common::{driver_env, node_vm, start_driver, wait_parent_empty};
use stratus_scenarios::csi::sanity;
use stratus_testenv::DvpEnv;

/// The tenant node csi-sanity publishes to, and its VM (named differently, found by label).
const NODE: &str = "csi-node-1";
const VM: &str = "csi-vm-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_against_the_dvp_driver() -> Result<()> {
    let program = sanity::install().await?;
    let env = DvpEnv::start().await?;
    node_vm(&env, VM, NODE).await?;
    let vars = driver_env(&env).await?;

    let dir = tempfile::tempdir()?;
    // csi-sanity skips the snapshot specs itself: the driver does not offer snapshots.
    sanity::passes(&program, dir.path(), || {
        start_driver(&vars, dir.path(), NODE, &[])
    })
    .await?;
    wait_parent_empty(&env, Duration::from_secs(10)).await?;
    Ok(())
}
