//! csi-sanity (csi-test v5.6.0) against the real `ebs-csi-driver` binary in `all` mode: the
//! controller talks to moto through the counting proxy, the node plugin formats and mounts loop
//! devices standing in for the volumes. Zero failures allowed; skipped specs are printed.

mod common;

use std::time::Duration;

use anyhow::{bail, Result};
use common::{driver_log, loops_dir, start_driver, ZONE};
use stratus_scenarios::ec2_fixture;
use stratus_testenv::aws::EbsKnobs;
use stratus_testenv::tools::csi_sanity;
use stratus_testenv::AwsEnv;

/// csi-sanity's whole run must finish within this.
const SANITY_DEADLINE: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_against_the_ebs_driver() -> Result<()> {
    let sanity = tokio::task::spawn_blocking(csi_sanity::ensure_installed).await??;
    let env = AwsEnv::start().await?;
    // EC2's idempotency where moto lacks it: the driver relies on the ClientToken for a
    // repeated CreateVolume (and on VolumeInUse for a repeated attach).
    env.proxy_control()
        .set_ebs_knobs(&EbsKnobs {
            client_token: true,
            volume_in_use: true,
            ..Default::default()
        })
        .await?;
    let ec2 = ec2_fixture::client(env.aws_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let node = ec2_fixture::launch(&ec2, &subnet, ZONE, 1, None, "m5.large").await?;
    let node_id = node[0].id.clone();

    let dir = tempfile::tempdir()?;
    // Skips are decided here, each with its reason, and printed; nothing else is skipped.
    let skips = csi_sanity::machine_skips(dir.path()).await?;
    let (mut driver, socket) = start_driver(&env, dir.path(), &node_id).await?;
    let run = csi_sanity::run(&sanity, &socket, dir.path(), &skips, SANITY_DEADLINE).await?;
    let _ = driver.kill().await;
    let loops = stratus_csi_ebs::LoopDevices::new(loops_dir(dir.path()), 0);
    loops.release_all().await?;

    eprintln!(
        "csi-sanity finished in {:.1} s:\n{}\nskipped ({}):\n  {}",
        run.elapsed.as_secs_f64(),
        run.summary,
        run.skipped.len(),
        run.skipped.join("\n  ")
    );
    if !run.success {
        let log = driver_log(dir.path());
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        bail!(
            "csi-sanity failed ({}):\n{}\n{}\ndriver log tail:\n{}",
            run.status,
            run.failures(),
            run.summary,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
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
