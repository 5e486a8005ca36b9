//! The EBS CSI driver started exactly as Deckhouse's cloud-provider-aws module starts it.
//! Controller: `controller --endpoint=unix:///csi/csi.sock` with the two AWS key variables only
//! (no region: it comes from the instance metadata, as under Deckhouse): it answers the Identity
//! service and creates and deletes a volume on moto in the zone asked for. Node:
//! `node --endpoint=unix:///csi/csi.sock` and no variables: NodeGetInfo answers the instance ID
//! and zone the instance metadata gives. Test stand-ins: the socket lives in the test's
//! directory, `AWS_ENDPOINT_URL` points the SDK at moto (through the counting proxy), and
//! `AWS_EC2_METADATA_SERVICE_ENDPOINT` at amazon-ec2-metadata-mock on loopback (the real IMDS
//! emulator, its default instance `i-1234567890abcdef0` in `us-east-1a`).

mod common;

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use stratus_csi_ebs::{DRIVER_NAME, TOPOLOGY_KEY};
use stratus_scenarios::csi::contract::{create_volume, delete_volume, identity_answers, node_info};
use stratus_scenarios::csi::driver;
use stratus_testenv::tools::ec2_metadata_mock::Aemm;
use stratus_testenv::AwsEnv;

/// What amazon-ec2-metadata-mock reports by default.
const INSTANCE: &str = "i-1234567890abcdef0";
const ZONE: &str = "us-east-1a";

async fn start(
    dir: &Path,
    mode: &str,
    vars: &[(String, String)],
) -> Result<(tokio::process::Child, PathBuf)> {
    driver::start(
        Path::new(env!("CARGO_BIN_EXE_ebs-csi-driver")),
        dir,
        &[
            mode.to_string(),
            format!("--endpoint=unix://{}", driver::socket(dir).display()),
        ],
        vars,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_and_node_under_deckhouses_container_spec() -> Result<()> {
    let env = AwsEnv::start().await?;
    let aemm = Aemm::start(&[]).await?;
    let imds = (
        "AWS_EC2_METADATA_SERVICE_ENDPOINT".to_string(),
        aemm.url().to_string(),
    );
    let tmp = tempfile::tempdir()?;

    // Controller: the keys from the module's Secret, nothing else.
    let dir = tmp.path().join("controller");
    std::fs::create_dir_all(&dir)?;
    let vars = vec![
        ("AWS_ACCESS_KEY_ID".to_string(), "testing".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "testing".to_string()),
        (
            "AWS_ENDPOINT_URL".to_string(),
            env.aws_endpoint().to_string(),
        ),
        imds.clone(),
    ];
    let (_controller, socket) = start(&dir, "controller", &vars).await?;
    let log = || driver::log_tail(&dir);
    identity_answers(&socket, DRIVER_NAME)
        .await
        .with_context(log)?;
    let (id, topology) = create_volume(&socket, "pvc-deckhouse", &[], Some((TOPOLOGY_KEY, ZONE)))
        .await
        .with_context(log)?;
    ensure!(
        topology
            .iter()
            .any(|t| t.get(TOPOLOGY_KEY).map(String::as_str) == Some(ZONE)),
        "{id} is not in {ZONE}: {topology:?}"
    );
    let created = env
        .aws_request_counts()
        .await?
        .get("ec2:CreateVolume")
        .copied();
    ensure!(
        created == Some(1),
        "CreateVolume reached moto {created:?} times"
    );
    delete_volume(&socket, &id).await.with_context(log)?;

    // Node: no variables at all; its identity from the instance metadata.
    let dir = tmp.path().join("node");
    std::fs::create_dir_all(&dir)?;
    let (_node, socket) = start(&dir, "node", &[imds]).await?;
    let log = || driver::log_tail(&dir);
    identity_answers(&socket, DRIVER_NAME)
        .await
        .with_context(log)?;
    let (node_id, segments) = node_info(&socket).await.with_context(log)?;
    ensure!(node_id == INSTANCE, "NodeGetInfo answered {node_id:?}");
    ensure!(
        segments.get(TOPOLOGY_KEY).map(String::as_str) == Some(ZONE),
        "NodeGetInfo topology {segments:?}"
    );
    Ok(())
}
