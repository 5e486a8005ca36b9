//! csi-sanity (csi-test v5.6.0) against the real `ebs-csi-driver` binary in `all` mode: the
//! controller talks to moto through the counting proxy, the node plugin formats and mounts loop
//! devices standing in for the volumes. Zero failures allowed; skipped specs are printed.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use common::{driver_log, loops_dir, start_driver, ZONE};
use stratus_scenarios::ec2_fixture;
use stratus_testenv::AwsEnv;
use tokio::process::Command;
use tokio::time::{timeout, Instant};

/// csi-sanity's whole run must finish within this.
const SANITY_DEADLINE: Duration = Duration::from_secs(600);

/// The csi-sanity spec that needs an online ext4 resize (resize2fs on a mounted file system).
const ONLINE_RESIZE_SPEC: &str =
    "NodeExpandVolume should work if node-expand is called after node-publish";

/// Runs `program args`, returning whether it succeeded and its stderr.
async fn attempt(program: &str, args: &[&std::ffi::OsStr]) -> Result<(bool, String)> {
    let out = Command::new(program)
        .args(args)
        .output()
        .await
        .with_context(|| format!("running {program}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

/// Runs `program args`, failing with its stderr.
async fn must(program: &str, args: &[&std::ffi::OsStr]) -> Result<String> {
    let out = Command::new(program)
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
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether this kernel lets resize2fs grow a mounted ext4 file system: a 32 MiB loop device is
/// formatted, mounted, grown to 64 MiB and resized online. `Err` only when the probe itself
/// cannot run. Some sandboxed kernels answer the resize ioctl with EPERM.
async fn online_ext4_resize_refusal(dir: &Path) -> Result<Option<String>> {
    let img = dir.join("probe.img");
    let mnt = dir.join("probe-mnt");
    std::fs::create_dir_all(&mnt)?;
    std::fs::File::create(&img)?.set_len(32 << 20)?;
    let dev = must(
        "losetup",
        &["--find".as_ref(), "--show".as_ref(), img.as_os_str()],
    )
    .await?;
    let dev = std::path::PathBuf::from(dev);
    let result = async {
        must(
            "mkfs.ext4",
            &["-q".as_ref(), "-F".as_ref(), dev.as_os_str()],
        )
        .await?;
        must("mount", &[dev.as_os_str(), mnt.as_os_str()]).await?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&img)?
            .set_len(64 << 20)?;
        must("losetup", &["-c".as_ref(), dev.as_os_str()]).await?;
        let (ok, stderr) = attempt("resize2fs", &[dev.as_os_str()]).await?;
        must("umount", &[mnt.as_os_str()]).await?;
        // resize2fs prints its banner first; the reason is the last line.
        let reason = stderr.lines().last().unwrap_or_default().trim().to_string();
        Ok::<_, anyhow::Error>((!ok).then_some(reason))
    }
    .await;
    if result.is_err() {
        let _ = attempt("umount", &[mnt.as_os_str()]).await;
    }
    must("losetup", &["-d".as_ref(), dev.as_os_str()]).await?;
    let _ = std::fs::remove_file(&img);
    result
}

/// `text` as a regular expression matching itself.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
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
    // Skips are decided here, each with its reason, and printed; nothing else is skipped.
    let mut skips: Vec<(&str, String)> = Vec::new();
    if let Some(refusal) = online_ext4_resize_refusal(dir.path()).await? {
        skips.push((
            ONLINE_RESIZE_SPEC,
            format!(
                "this kernel refuses online ext4 resizes (resize2fs on a mounted loop device: \
                 {refusal}); offline growth is proved by tests/expand.rs"
            ),
        ));
    }
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
    if !skips.is_empty() {
        let pattern = skips
            .iter()
            .map(|(spec, _)| regex_escape(spec))
            .collect::<Vec<_>>()
            .join("|");
        cmd.arg(format!("--ginkgo.skip={pattern}"));
    }
    for (spec, reason) in &skips {
        eprintln!("skipping {spec:?}: {reason}");
    }
    let started = Instant::now();
    let output = timeout(SANITY_DEADLINE, cmd.output())
        .await
        .context("csi-sanity did not finish within its deadline (a hung socket?)")??;
    let elapsed = started.elapsed();
    let _ = driver.kill().await;
    let loops = stratus_csi_ebs::LoopDevices::new(loops_dir(dir.path()), 0);
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
        let log = driver_log(dir.path());
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
    for (spec, _) in &skips {
        assert!(
            skipped.iter().any(|s| s.contains(spec)),
            "{spec:?} was to be skipped but is not among the skipped specs"
        );
    }
    Ok(())
}
