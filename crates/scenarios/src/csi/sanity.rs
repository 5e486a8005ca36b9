//! csi-sanity (csi-test v5.6.0, built by the test environment) against a driver a test started,
//! judged the same way for every driver: this machine's skips are decided first, each with its
//! reason, and printed — nothing else is skipped (csi-sanity skips the snapshot specs itself for
//! drivers without snapshots); the run has a deadline (csi-sanity hangs rather than fails when
//! the socket dies); the driver is killed and its loop devices released after the run; zero
//! failures are allowed, and a failure shows the failed specs and the driver log's tail.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use stratus_csi::devices::LoopDevices;
use stratus_testenv::tools::csi_sanity;
use tokio::process::Child;

use super::driver::{log_tail, loops_dir};

/// csi-sanity's whole run must finish within this.
pub const DEADLINE: Duration = Duration::from_secs(600);

/// Builds csi-sanity if needed (minutes the first time on a machine, so before anything with a
/// deadline starts); returns its binary.
pub async fn install() -> Result<PathBuf> {
    tokio::task::spawn_blocking(csi_sanity::ensure_installed).await?
}

/// Runs csi-sanity (`program`, from [`install`]) against the driver `start` brings up in
/// `dir` (with [`super::driver::start`]), then kills it and releases its loop devices; passes
/// when csi-sanity reports zero failures and skipped every spec this machine cannot run.
pub async fn passes<F, Fut>(program: &Path, dir: &Path, start: F) -> Result<()>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(Child, PathBuf)>>,
{
    // Skips are decided here, each with its reason, and printed; nothing else is skipped.
    let skips = csi_sanity::machine_skips(dir).await?;
    let (mut driver, socket) = start().await?;
    let run = csi_sanity::run(program, &socket, dir, &skips, DEADLINE).await?;
    let _ = driver.kill().await;
    let loops = LoopDevices::new(loops_dir(dir), 0);
    loops.release_all().await?;

    eprintln!(
        "csi-sanity finished in {:.1} s:\n{}\nskipped ({}):\n  {}",
        run.elapsed.as_secs_f64(),
        run.summary,
        run.skipped.len(),
        run.skipped.join("\n  ")
    );
    if !run.success {
        bail!(
            "csi-sanity failed ({}):\n{}\n{}\n{}",
            run.status,
            run.failures(),
            run.summary,
            log_tail(dir)
        );
    }
    assert!(run.summary.contains("0 Failed"), "{}", run.summary);
    for (spec, _) in &skips {
        assert!(
            run.skipped.iter().any(|s| s.contains(spec)),
            "{spec:?} was to be skipped but is not among the skipped specs"
        );
    }
    Ok(())
}
