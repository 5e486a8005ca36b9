//! What the driver's integration tests share: starting the real `ebs-csi-driver` binary in
//! `all` mode on moto with loop devices for the node side, and a gRPC channel to its socket.
#![allow(dead_code)] // each test binary uses a part of it

pub mod flow;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hyper_util::rt::TokioIo;
use stratus_testenv::AwsEnv;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

/// The zone of the test node and its volumes.
pub const ZONE: &str = "us-east-1a";

/// Starts the driver with its socket, log and loop devices in `dir`; returns the child once
/// its socket exists.
pub async fn start_driver(env: &AwsEnv, dir: &Path, node_id: &str) -> Result<(Child, PathBuf)> {
    let socket = dir.join("csi.sock");
    let log = std::fs::File::create(dir.join("driver.log"))?;
    let child = Command::new(env!("CARGO_BIN_EXE_ebs-csi-driver"))
        .arg("all")
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg(format!("--node-id={node_id}"))
        .arg(format!("--availability-zone={ZONE}"))
        .arg(format!("--loop-devices-dir={}", loops_dir(dir).display()))
        .arg("--operation-wait=5s")
        .arg("--v=4")
        .envs(env.env_vars())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting ebs-csi-driver")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        if Instant::now() >= deadline {
            bail!(
                "ebs-csi-driver did not create {} within 30 s; log:\n{}",
                socket.display(),
                driver_log(dir)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((child, socket))
}

/// Where the driver started in `dir` keeps its loop devices' backing files.
pub fn loops_dir(dir: &Path) -> PathBuf {
    dir.join("loops")
}

/// The driver's log so far.
pub fn driver_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("driver.log")).unwrap_or_default()
}

/// A gRPC channel over the driver's unix socket.
pub async fn connect(socket: &Path) -> Result<Channel> {
    let socket = socket.to_path_buf();
    Endpoint::try_from("http://csi.invalid")?
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                tokio::net::UnixStream::connect(socket)
                    .await
                    .map(TokioIo::new)
            }
        }))
        .await
        .context("connecting to the driver's socket")
}
