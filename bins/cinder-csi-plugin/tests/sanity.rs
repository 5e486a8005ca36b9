//! csi-sanity (csi-test v5.6.0) against the real `cinder-csi-plugin` binary serving controller
//! and node: the controller talks to Keystone and the Cinder/Nova simulators through the
//! counting proxy, the node plugin formats and mounts loop devices standing in for the volumes.
//! Zero failures allowed; skipped specs are printed; no volume is left behind.

mod common;

use std::time::Duration;

use anyhow::{bail, Result};
use common::{driver_log, loops_dir, node_server, sim, start_driver, wait_no_volumes};
use stratus_testenv::tools::csi_sanity;
use stratus_testenv::OpenStackEnv;

/// csi-sanity's whole run must finish within this.
const SANITY_DEADLINE: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_against_the_cinder_driver() -> Result<()> {
    let sanity = tokio::task::spawn_blocking(csi_sanity::ensure_installed).await??;
    let env = OpenStackEnv::start().await?;
    let node_id = node_server(&env, "csi-node-1")?;

    let dir = tempfile::tempdir()?;
    // Skips are decided here, each with its reason, and printed; nothing else is skipped
    // (csi-sanity skips the snapshot specs itself: the driver does not offer snapshots).
    let skips = csi_sanity::machine_skips(dir.path()).await?;
    let (mut driver, socket) = start_driver(&env, dir.path(), &node_id).await?;
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
    let counts = env.request_counts().await?;
    eprintln!(
        "requests: {:?}",
        counts
            .iter()
            .filter(|(k, _)| k.starts_with("block-storage") || k.contains("volume"))
            .collect::<Vec<_>>()
    );
    wait_no_volumes(sim(&env)?, Duration::from_secs(10)).await?;
    assert!(sim(&env)?.attachments().is_empty(), "attachments left");
    Ok(())
}
