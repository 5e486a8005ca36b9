//! What the driver's integration tests share: starting the real `ebs-csi-driver` binary in
//! `all` mode on moto with loop devices for the node side (the CSI harness of
//! `stratus_scenarios::csi`), and a gRPC channel to its socket.
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

pub mod flow;

use std::path::{Path, PathBuf};

use anyhow::Result;
use stratus_scenarios::csi::driver;
pub use stratus_scenarios::csi::driver::{connect, driver_log, loops_dir};
use stratus_testenv::AwsEnv;
use tokio::process::Child;

/// The zone of the test node and its volumes.
pub const ZONE: &str = "us-east-1a";

/// Starts the driver with its socket, log and loop devices in `dir`; returns the child once
/// its socket exists.
pub async fn start_driver(env: &AwsEnv, dir: &Path, node_id: &str) -> Result<(Child, PathBuf)> {
    driver::start(
        Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
        dir,
        &[
            "all".into(),
            format!("--endpoint=unix://{}", driver::socket(dir).display()),
            format!("--node-id={node_id}"),
            format!("--availability-zone={ZONE}"),
            format!("--loop-devices-dir={}", loops_dir(dir).display()),
            "--operation-wait=5s".into(),
            "--v=4".into(),
        ],
        &env.env_vars(),
    )
    .await
}
