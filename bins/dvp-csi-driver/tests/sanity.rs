//! csi-sanity (csi-test v5.6.0) against the real `dvp-csi-driver` binary serving controller and
//! node: the controller talks to the parent kube-apiserver as a ServiceAccount bound to the
//! shipped least-privilege Role (`deploy/dvp/csi-parent-rbac.yaml`), the platform simulator
//! makes the VirtualDisks Ready and the VMBDAs Attached, and the node plugin formats and mounts
//! loop devices standing in for the disks. Zero failures allowed; skipped specs are printed; no
//! VirtualDisk or VMBDA is left behind.

mod common;

use std::time::Duration;

use anyhow::{bail, Result};
use common::{driver_env, driver_log, loops_dir, node_vm, start_driver, wait_parent_empty};
use stratus_testenv::tools::csi_sanity;
use stratus_testenv::DvpEnv;

/// csi-sanity's whole run must finish within this.
const SANITY_DEADLINE: Duration = Duration::from_secs(600);
/// The tenant node csi-sanity publishes to, and its VM (named differently, found by label).
const NODE: &str = "csi-node-1";
const VM: &str = "csi-vm-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_against_the_dvp_driver() -> Result<()> {
    let sanity = tokio::task::spawn_blocking(csi_sanity::ensure_installed).await??;
    let env = DvpEnv::start().await?;
    node_vm(&env, VM, NODE).await?;
    let vars = driver_env(&env).await?;

    let dir = tempfile::tempdir()?;
    // Skips are decided here, each with its reason, and printed; nothing else is skipped
    // (csi-sanity skips the snapshot specs itself: the driver does not offer snapshots).
    let skips = csi_sanity::machine_skips(dir.path()).await?;
    let (mut driver, socket) = start_driver(&vars, dir.path(), NODE, &[]).await?;
    let run = csi_sanity::run(&sanity, &socket, dir.path(), &skips, SANITY_DEADLINE).await?;
    let _ = driver.kill().await;
    let loops = stratus_csi::devices::LoopDevices::new(loops_dir(dir.path()), 0);
    loops.release_all().await?;

    eprintln!(
        "csi-sanity finished in {:.1} s:\n{}\nskipped ({}):\n  {}",
        run.elapsed.as_secs_f64(),
        run.summary,
        run.skipped.len(),
        run.skipped.join("\n  ")
    );
    if !run.success {
        let log = driver_log(dir.path());
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        bail!(
            "csi-sanity failed ({}):\n{}\n{}\ndriver log tail:\n{}",
            run.status,
            run.failures(),
            run.summary,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    assert!(run.summary.contains("0 Failed"), "{}", run.summary);
    for (spec, _) in &skips {
        assert!(
            run.skipped.iter().any(|s| s.contains(spec)),
            "{spec:?} was to be skipped but is not among the skipped specs"
        );
    }
    wait_parent_empty(&env, Duration::from_secs(10)).await?;
    Ok(())
}
