//! What the driver's integration tests share: a Nova server standing for the node, and the real
//! `cinder-csi-plugin` binary started on the OpenStack test cloud (Keystone + simulators) with
//! loop devices for the node side (the CSI harness of `stratus_scenarios::csi`).
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

pub mod flow;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use stratus_openstack_sim::{ServerSpec, SimHandle};
use stratus_scenarios::csi::driver;
pub use stratus_scenarios::csi::driver::{driver_log, loops_dir};
use stratus_testenv::OpenStackEnv;
use tokio::process::Child;
use tokio::time::Instant;

/// The zone of the test node and its volumes.
pub const ZONE: &str = "nova";
/// The `--cluster` the driver runs with.
pub const CLUSTER: &str = "stratus-test";

/// The in-process simulator of `env`.
pub fn sim(env: &OpenStackEnv) -> Result<&SimHandle> {
    env.sim().context("the OpenStack simulator runs in process")
}

/// Makes an ACTIVE Nova server standing for a node; returns its id.
pub fn node_server(env: &OpenStackEnv, name: &str) -> Result<String> {
    let ids = sim(env)?.create_servers(&[ServerSpec::active(name)])?;
    ids.into_iter().next().context("no server made")
}

/// Starts the driver (controller and node) with its socket, log and loop devices in `dir`;
/// returns the child once it answers Probe.
pub async fn start_driver(
    env: &OpenStackEnv,
    dir: &Path,
    node_id: &str,
) -> Result<(Child, PathBuf)> {
    start_driver_with(env, dir, node_id, &[]).await
}

/// [`start_driver`] with `extra` flags (e.g. `--provide-node-service=false`).
pub async fn start_driver_with(
    env: &OpenStackEnv,
    dir: &Path,
    node_id: &str,
    extra: &[&str],
) -> Result<(Child, PathBuf)> {
    let mut args = vec![
        format!("--endpoint=unix://{}", driver::socket(dir).display()),
        format!("--cloud-config={}", env.cloud_conf_path().display()),
        format!("--cluster={CLUSTER}"),
        format!("--nodeid={node_id}"),
        format!("--availability-zone={ZONE}"),
        format!("--loop-devices-dir={}", loops_dir(dir).display()),
        "--operation-wait=5s".into(),
        "--v=4".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    driver::start(
        Path::new(env!("CARGO_BIN_EXE_cinder-csi-plugin")),
        dir,
        &args,
        &[],
    )
    .await
}

/// Waits until the simulator holds no volumes (deletions finish after a delay).
pub async fn wait_no_volumes(sim: &SimHandle, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let left = sim.volumes();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{} volumes left: {:?}",
                left.len(),
                left.iter()
                    .map(|v| format!("{} {} {}", v["id"], v["name"], v["status"]))
                    .collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
