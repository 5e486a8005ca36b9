//! csi-sanity (csi-test v5.6.0) against the real `ebs-csi-driver` binary in `all` mode: the
//! controller talks to moto through the counting proxy, the node plugin formats and mounts loop
//! devices standing in for the volumes. Zero failures allowed; skipped specs are printed.

mod common;

use anyhow::Result;
use common::{start_driver, ZONE};
use stratus_scenarios::csi::sanity;
use stratus_scenarios::ec2_fixture;
use stratus_testenv::aws::EbsKnobs;
use stratus_testenv::AwsEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_against_the_ebs_driver() -> Result<()> {
    let program = sanity::install().await?;
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
    sanity::passes(&program, dir.path(), || {
        start_driver(&env, dir.path(), &node_id)
    })
    .await
}
