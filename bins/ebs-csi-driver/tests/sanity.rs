//! csi-sanity (csi-test v5.6.0) against the real `ebs-csi-driver` binary in `all` mode: the
//! controller talks to moto through the counting proxy, the node plugin formats and mounts loop
//! devices standing in for the volumes. Zero failures allowed; skipped specs are printed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use stratus_scenarios::ec2_fixture;
use stratus_testenv::AwsEnv;
use tokio::process::{Child, Command};
use tokio::time::{timeout, Instant};

const ZONE: &str = "us-east-1a";
/// csi-sanity's whole run must finish within this.
const SANITY_DEADLINE: Duration = Duration::from_secs(600);

/// Starts the driver; returns the child once its socket exists.
async fn start_driver(env: &AwsEnv, dir: &Path, node_id: &str) -> Result<(Child, PathBuf)> {
    let socket = dir.join("csi.sock");
    let log = std::fs::File::create(dir.join("driver.log"))?;
    let child = Command::new(env!("CARGO_BIN_EXE_ebs-csi-driver"))
        .arg("all")
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg(format!("--node-id={node_id}"))
        .arg(format!("--availability-zone={ZONE}"))
        .arg(format!(
            "--loop-devices-dir={}",
            dir.join("loops").display()
        ))
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
                std::fs::read_to_string(dir.join("driver.log")).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((child, socket))
}

/// The skipped specs of a JUnit report, as `name: message`.
fn skipped_specs(junit: &str) -> Vec<String> {
    junit
        .split("<testcase")
        .skip(1)
        .filter(|case| case.contains("<skipped"))
        .map(|case| {
            let name = case
                .split("name=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or("?");
            let message = case
                .split("<skipped message=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or("");
            format!("{name}: {message}")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_against_the_ebs_driver() -> Result<()> {
    let sanity =
        tokio::task::spawn_blocking(stratus_testenv::tools::csi_sanity::ensure_installed).await??;
    let env = AwsEnv::start().await?;
    let ec2 = ec2_fixture::client(env.aws_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let node = ec2_fixture::launch(&ec2, &subnet, ZONE, 1, None, "m5.large").await?;
    let node_id = node[0].id.clone();

    let dir = tempfile::tempdir()?;
    let (mut driver, socket) = start_driver(&env, dir.path(), &node_id).await?;
    let junit = dir.path().join("junit.xml");
    let mut cmd = Command::new(&sanity);
    cmd.arg(format!("--csi.endpoint=unix://{}", socket.display()))
        .arg(format!(
            "--csi.stagingdir={}",
            dir.path().join("staging").display()
        ))
        .arg(format!(
            "--csi.mountdir={}",
            dir.path().join("mount").display()
        ))
        .arg(format!("--csi.junitfile={}", junit.display()))
        .arg("--csi.testvolumesize=1073741824")
        .arg("--csi.testvolumeexpandsize=2147483648")
        .arg("--ginkgo.timeout=9m")
        .arg("--ginkgo.no-color")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let started = Instant::now();
    let output = timeout(SANITY_DEADLINE, cmd.output())
        .await
        .context("csi-sanity did not finish within its deadline (a hung socket?)")??;
    let elapsed = started.elapsed();
    let _ = driver.kill().await;
    let loops = stratus_csi_ebs::LoopDevices::new(dir.path().join("loops"), 0);
    loops.release_all().await?;

    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .lines()
        .filter(|l| l.contains("Passed") || l.starts_with("Ran "))
        .collect::<Vec<_>>()
        .join("\n");
    let report = std::fs::read_to_string(&junit).unwrap_or_default();
    let skipped = skipped_specs(&report);
    eprintln!(
        "csi-sanity finished in {:.1} s:\n{summary}\nskipped ({}):\n  {}",
        elapsed.as_secs_f64(),
        skipped.len(),
        skipped.join("\n  ")
    );
    if !output.status.success() {
        let log = std::fs::read_to_string(dir.path().join("driver.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        bail!(
            "csi-sanity failed ({}):\n{}\n{}\ndriver log tail:\n{}",
            output.status,
            stdout
                .lines()
                .filter(|l| l.contains("[FAIL]")
                    || l.contains("Expected")
                    || l.contains("rpc error"))
                .collect::<Vec<_>>()
                .join("\n"),
            summary,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    assert!(summary.contains("0 Failed"), "{summary}");
    Ok(())
}
