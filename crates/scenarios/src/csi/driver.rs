//! A CSI driver binary started by a test in its directory: serving on `csi.sock`, logging to
//! `driver.log` (appended, so a restarted driver's log follows the first one's), keeping its loop
//! devices' backing files under `loops/`; and a gRPC channel over its socket.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tonic::transport::Channel;

use crate::wait_for;

/// How long a driver may take to create its socket.
const SOCKET_DEADLINE: Duration = Duration::from_secs(30);

/// The socket a driver started in `dir` serves on (give it `--endpoint=unix://<this>`).
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("csi.sock")
}

/// Where a driver started in `dir` keeps its loop devices' backing files.
pub fn loops_dir(dir: &Path) -> PathBuf {
    dir.join("loops")
}

/// The log so far of the driver started in `dir`.
pub fn driver_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("driver.log")).unwrap_or_default()
}

/// Starts `program args` (killed on drop) with `envs`, its stderr appended to `dir/driver.log`,
/// after removing a stale socket; returns the child and its socket once the socket exists, or
/// fails within 30 s with the log.
pub async fn start(
    program: &Path,
    dir: &Path,
    args: &[String],
    envs: &[(String, String)],
) -> Result<(Child, PathBuf)> {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let socket = socket(dir);
    let _ = std::fs::remove_file(&socket);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("driver.log"))?;
    let child = Command::new(program)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let deadline = Instant::now() + SOCKET_DEADLINE;
    while !socket.exists() {
        if Instant::now() >= deadline {
            bail!(
                "{name} did not create {} within {} s; log:\n{}",
                socket.display(),
                SOCKET_DEADLINE.as_secs(),
                driver_log(dir)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((child, socket))
}

/// A gRPC channel over a CSI driver's unix socket, once the socket exists.
pub async fn connect(socket: &Path) -> Result<Channel> {
    wait_for("the driver's socket", Duration::from_secs(30), || async {
        Ok(socket.exists().then_some(()))
    })
    .await?;
    stratus_csi_sidecars::unix::channel(socket)
        .await
        .map_err(anyhow::Error::msg)
        .context("connecting to the driver's socket")
}
