//! csi-sanity, the CSI conformance suite of `github.com/kubernetes-csi/csi-test/v5` at a pinned
//! version: built once with `go install` into the cache (its own lock and stamp), and run
//! against a driver's socket by the drivers' tests, always inside a deadline (it hangs rather
//! than fails when the socket dies); [`run`] runs it and reads its report, [`machine_skips`]
//! names the specs this machine cannot run and why.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::{go, lock, progress, stamp_matches};
use crate::tools::install::{run_logged, Paths};

/// The Go module.
pub const MODULE: &str = "github.com/kubernetes-csi/csi-test/v5";
/// The pinned version.
pub const VERSION: &str = "v5.6.0";

/// The installed binary.
pub fn binary(paths: &Paths) -> PathBuf {
    paths.cache.join("bin/csi-sanity")
}

/// Installs csi-sanity unless the stamp records this version; returns the binary. Blocking.
pub fn ensure_installed() -> Result<PathBuf> {
    let paths = Paths::from_env()?;
    let out = binary(&paths);
    let bin_dir = paths.cache.join("bin");
    let stamp = bin_dir.join(".stamp-csi-sanity");
    let value = format!("{MODULE}@{VERSION}\n");
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    let _lock = lock(&paths, "csi-sanity")?;
    if stamp_matches(&stamp, &value, &[&out]) {
        return Ok(out);
    }
    fs::create_dir_all(&bin_dir)?;
    progress(&format!("building csi-sanity {VERSION} (first time only)"));
    // A private GOBIN, then a rename: a running csi-sanity is never overwritten in place.
    let gobin = bin_dir.join(format!(".csi-sanity-{}", std::process::id()));
    fs::create_dir_all(&gobin)?;
    let mut cmd = Command::new(go());
    cmd.env("GOBIN", &gobin)
        .env("CGO_ENABLED", "0")
        .args(["install", "-trimpath", "-ldflags", "-s -w"])
        .arg(format!("{MODULE}/cmd/csi-sanity@{VERSION}"))
        .stdin(Stdio::null());
    let result = run_logged(
        cmd,
        &paths.install_log,
        &format!("go install {MODULE}@{VERSION}"),
    );
    if result.is_ok() {
        fs::rename(gobin.join("csi-sanity"), &out)
            .with_context(|| format!("moving csi-sanity to {}", out.display()))?;
        fs::write(&stamp, value)?;
    }
    let _ = fs::remove_dir_all(&gobin);
    result.map(|()| out)
}

/// The csi-sanity spec that needs an online ext4 resize (resize2fs on a mounted file system).
pub const ONLINE_RESIZE_SPEC: &str =
    "NodeExpandVolume should work if node-expand is called after node-publish";

/// Runs `program args`, returning whether it succeeded and its stderr.
async fn attempt(program: &str, args: &[&std::ffi::OsStr]) -> Result<(bool, String)> {
    let out = tokio::process::Command::new(program)
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
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "{program} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether this kernel lets resize2fs grow a mounted ext4 file system: a 32 MiB loop device is
/// formatted, mounted, grown to 64 MiB and resized online. `Err` only when the probe itself
/// cannot run. Some sandboxed kernels answer the resize ioctl with EPERM.
pub async fn online_ext4_resize_refusal(dir: &std::path::Path) -> Result<Option<String>> {
    let img = dir.join("probe.img");
    let mnt = dir.join("probe-mnt");
    std::fs::create_dir_all(&mnt)?;
    std::fs::File::create(&img)?.set_len(32 << 20)?;
    let dev = must(
        "losetup",
        &["--find".as_ref(), "--show".as_ref(), img.as_os_str()],
    )
    .await?;
    let dev = PathBuf::from(dev);
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

/// The specs this machine cannot run, each with its reason (today: the online ext4 resize
/// when the kernel refuses it; offline growth is proved by the drivers' expand tests).
pub async fn machine_skips(dir: &std::path::Path) -> Result<Vec<(&'static str, String)>> {
    let mut skips = Vec::new();
    if let Some(refusal) = online_ext4_resize_refusal(dir).await? {
        skips.push((
            ONLINE_RESIZE_SPEC,
            format!(
                "this kernel refuses online ext4 resizes (resize2fs on a mounted loop device: \
                 {refusal}); offline growth is proved by the expand tests"
            ),
        ));
    }
    Ok(skips)
}

/// `text` as a regular expression matching itself.
pub fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// The skipped specs of a JUnit report, as `name: message`.
pub fn skipped_specs(junit: &str) -> Vec<String> {
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

/// What one csi-sanity run reported.
#[derive(Debug, Clone)]
pub struct SanityRun {
    /// Whether csi-sanity exited 0.
    pub success: bool,
    /// Its exit status, printed.
    pub status: String,
    /// Its standard output.
    pub stdout: String,
    /// The `Ran …` / `… Passed | … Failed` lines.
    pub summary: String,
    /// The skipped specs (`name: message`).
    pub skipped: Vec<String>,
    /// How long it ran.
    pub elapsed: std::time::Duration,
}

impl SanityRun {
    /// The failing specs and the errors they printed.
    pub fn failures(&self) -> String {
        self.stdout
            .lines()
            .filter(|l| l.contains("[FAIL]") || l.contains("Expected") || l.contains("rpc error"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs csi-sanity `binary` against `socket` with its staging, mount and JUnit files in `dir`,
/// skipping `skips`, within `deadline` (it hangs rather than fails on a dead socket).
pub async fn run(
    binary: &std::path::Path,
    socket: &std::path::Path,
    dir: &std::path::Path,
    skips: &[(&str, String)],
    deadline: std::time::Duration,
) -> Result<SanityRun> {
    let junit = dir.join("junit.xml");
    let mut cmd = tokio::process::Command::new(binary);
    cmd.arg(format!("--csi.endpoint=unix://{}", socket.display()))
        .arg(format!(
            "--csi.stagingdir={}",
            dir.join("staging").display()
        ))
        .arg(format!("--csi.mountdir={}", dir.join("mount").display()))
        .arg(format!("--csi.junitfile={}", junit.display()))
        .arg("--csi.testvolumesize=1073741824")
        .arg("--csi.testvolumeexpandsize=2147483648")
        .arg(format!(
            "--ginkgo.timeout={}s",
            deadline.as_secs().saturating_sub(30).max(60)
        ))
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
    for (spec, reason) in skips {
        eprintln!("skipping {spec:?}: {reason}");
    }
    let started = tokio::time::Instant::now();
    let output = tokio::time::timeout(deadline, cmd.output())
        .await
        .context("csi-sanity did not finish within its deadline (a hung socket?)")??;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let summary = stdout
        .lines()
        .filter(|l| l.contains("Passed") || l.starts_with("Ran "))
        .collect::<Vec<_>>()
        .join("\n");
    let report = fs::read_to_string(&junit).unwrap_or_default();
    Ok(SanityRun {
        success: output.status.success(),
        status: output.status.to_string(),
        summary,
        skipped: skipped_specs(&report),
        stdout,
        elapsed: started.elapsed(),
    })
}
