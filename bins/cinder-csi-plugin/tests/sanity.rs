//! csi-sanity (csi-test v5.6.0) against the real `cinder-csi-plugin` binary serving controller
//! and node: the controller talks to Keystone and the Cinder/Nova simulators through the
//! counting proxy, the node plugin formats and mounts loop devices standing in for the volumes.
//! Zero failures allowed; skipped specs are printed; no volume is left behind.

mod common;

use std::time::Duration;

use anyhow::Result;
use common::{node_server, sim, start_driver, wait_no_volumes};
use stratus_scenarios::csi::sanity;
use stratus_testenv::OpenStackEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_against_the_cinder_driver() -> Result<()> {
    let program = sanity::install().await?;
    let env = OpenStackEnv::start().await?;
    let node_id = node_server(&env, "csi-node-1")?;

    let dir = tempfile::tempdir()?;
    // csi-sanity skips the snapshot specs itself: the driver does not offer snapshots.
    sanity::passes(&program, dir.path(), || {
        start_driver(&env, dir.path(), &node_id)
    })
    .await?;
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
