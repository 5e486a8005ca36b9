//! What the driver's integration tests share: starting the real `ebs-csi-driver` binary in
//! `all` mode on moto with loop devices for the node side (the CSI harness of
//! `stratus_scenarios::csi`), and a gRPC channel to its socket.
#![allow(dead_code, unused_imports)] // each test binary uses a part of it

pub mod flow;

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use stratus_scenarios::csi::driver;
pub use stratus_scenarios::csi::driver::{connect, driver_log, loops_dir};
use stratus_testenv::AwsEnv;
use tokio::process::Child;

/// The zone of the test node and its volumes.
pub const ZONE: &str = "us-east-1a";

/// Starts the driver with its socket, log and loop devices in `dir`; returns the child once
/// it answers Probe.
pub async fn start_driver(env: &AwsEnv, dir: &Path, node_id: &str) -> Result<(Child, PathBuf)> {
    start_driver_with(env, dir, node_id, &[]).await
}

/// [`start_driver`] with `extra` flags.
pub async fn start_driver_with(
    env: &AwsEnv,
    dir: &Path,
    node_id: &str,
    extra: &[&str],
) -> Result<(Child, PathBuf)> {
    let mut args = vec![
        "all".into(),
        format!("--endpoint=unix://{}", driver::socket(dir).display()),
        format!("--node-id={node_id}"),
        format!("--availability-zone={ZONE}"),
        format!("--loop-devices-dir={}", loops_dir(dir).display()),
        "--operation-wait=5s".into(),
        "--v=4".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    driver::start(
        Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
        dir,
        &args,
        &env.env_vars(),
    )
    .await
}

/// Runs `program` with `args`: its standard output, or its standard error as the failure.
pub async fn output(program: &str, args: &[&std::ffi::OsStr]) -> Result<String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The loop device bound to the volume's backing file.
pub async fn loop_device(loops: &Path, volume_id: &str) -> Result<PathBuf> {
    let file = loops.join(format!("{volume_id}.img"));
    let out = output("losetup", &["-j".as_ref(), file.as_os_str()]).await?;
    let dev = out.split(':').next().unwrap_or("").trim();
    ensure!(!dev.is_empty(), "no loop device for {}", file.display());
    Ok(dev.into())
}
