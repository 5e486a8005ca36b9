//! The StorageClass formatting parameters and `--legacy-xfs` reach the real `mkfs`: volumes are
//! created on moto with `blockSize`/`inodeSize` (ext4) and `blockSize` (xfs, the node plugin
//! started with `--legacy-xfs`), attached and staged on loop devices, and the file systems read
//! back with `dumpe2fs` and `xfs_info` carry them; a parameter the file system cannot take
//! (`bytesPerInode` on xfs) fails NodeStageVolume with InvalidArgument naming it and leaves the
//! device unformatted.

mod common;

use std::path::Path;

use anyhow::{ensure, Context, Result};
use common::{connect, loop_device, loops_dir, output, start_driver_with, ZONE};
use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::controller_client::ControllerClient;
use stratus_csi_spec::v1::node_client::NodeClient;
use stratus_scenarios::csi::contract::{create_request, mount_capability};
use stratus_scenarios::csi::driver;
use stratus_scenarios::ec2_fixture;
use stratus_testenv::AwsEnv;
use tokio::process::Command;
use tonic::transport::Channel;

struct Bed {
    controller: ControllerClient<Channel>,
    node: NodeClient<Channel>,
    node_id: String,
}

impl Bed {
    /// Creates a 1 GiB volume with `parameters`, attaches it and stages it as `fs_type` at
    /// `staging`: the volume and the stage's answer.
    async fn stage(
        &mut self,
        name: &str,
        fs_type: &str,
        parameters: &[(&str, &str)],
        staging: &Path,
    ) -> Result<(String, Result<(), tonic::Status>)> {
        let cap = mount_capability(fs_type);
        let volume = self
            .controller
            .create_volume(create_request(
                name,
                fs_type,
                parameters,
                Some((stratus_csi_ebs::TOPOLOGY_KEY, ZONE)),
            ))
            .await?
            .into_inner()
            .volume
            .context("CreateVolume answered no volume")?;
        let publish = self
            .controller
            .controller_publish_volume(csi::ControllerPublishVolumeRequest {
                volume_id: volume.volume_id.clone(),
                node_id: self.node_id.clone(),
                volume_capability: Some(cap.clone()),
                ..Default::default()
            })
            .await?
            .into_inner();
        let staged = self
            .node
            .node_stage_volume(csi::NodeStageVolumeRequest {
                volume_id: volume.volume_id.clone(),
                publish_context: publish.publish_context,
                staging_target_path: staging.display().to_string(),
                volume_capability: Some(cap),
                volume_context: volume.volume_context,
                ..Default::default()
            })
            .await
            .map(|_| ());
        Ok((volume.volume_id, staged))
    }

    async fn unstage(&mut self, volume_id: &str, staging: &Path) -> Result<()> {
        self.node
            .node_unstage_volume(csi::NodeUnstageVolumeRequest {
                volume_id: volume_id.into(),
                staging_target_path: staging.display().to_string(),
            })
            .await?;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formatting_parameters_and_legacy_xfs_reach_mkfs() -> Result<()> {
    let env = AwsEnv::start().await?;
    let ec2 = ec2_fixture::client(env.aws_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let node_id = ec2_fixture::launch(&ec2, &subnet, ZONE, 1, None, "m5.large").await?[0]
        .id
        .clone();
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path();
    let (_driver, socket) = start_driver_with(&env, dir, &node_id, &["--legacy-xfs"]).await?;
    let channel = connect(&socket).await?;
    let mut bed = Bed {
        controller: ControllerClient::new(channel.clone()),
        node: NodeClient::new(channel),
        node_id,
    };
    let log = || driver::log_tail(dir);

    // ext4: block and inode size.
    let staging = dir.join("ext4");
    let (id, staged) = bed
        .stage(
            "fmt-ext4",
            "ext4",
            &[("blockSize", "2048"), ("inodeSize", "512")],
            &staging,
        )
        .await?;
    staged.with_context(log)?;
    let device = loop_device(&loops_dir(dir), &id).await?;
    let sb = output("dumpe2fs", &["-h".as_ref(), device.as_os_str()]).await?;
    let field = |name: &str| {
        sb.lines()
            .find(|l| l.starts_with(name))
            .map(|l| l[name.len()..].trim().to_string())
    };
    ensure!(field("Block size:").as_deref() == Some("2048"), "{sb}");
    ensure!(field("Inode size:").as_deref() == Some("512"), "{sb}");
    bed.unstage(&id, &staging).await?;

    // xfs: block size, and the node's --legacy-xfs (no reflink, no bigtime).
    let staging = dir.join("xfs");
    let (id, staged) = bed
        .stage("fmt-xfs", "xfs", &[("blockSize", "2048")], &staging)
        .await?;
    staged.with_context(log)?;
    let info = output("xfs_info", &[staging.as_os_str()]).await?;
    ensure!(info.contains("bsize=2048"), "{info}");
    ensure!(info.contains("reflink=0"), "{info}");
    if info.contains("bigtime=") {
        ensure!(info.contains("bigtime=0"), "{info}");
    }
    bed.unstage(&id, &staging).await?;

    // A parameter xfs cannot take: InvalidArgument naming it, the device left unformatted.
    let staging = dir.join("refused");
    let (id, staged) = bed
        .stage("fmt-refused", "xfs", &[("bytesPerInode", "8192")], &staging)
        .await?;
    let status = staged.expect_err("bytesPerInode on xfs must fail NodeStageVolume");
    ensure!(
        status.code() == tonic::Code::InvalidArgument && status.message().contains("bytesPerInode"),
        "{status:?}"
    );
    let device = loop_device(&loops_dir(dir), &id).await?;
    let blkid = Command::new("blkid")
        .args(["-p", "-s", "TYPE", "-o", "value"])
        .arg(&device)
        .output()
        .await?;
    ensure!(
        String::from_utf8_lossy(&blkid.stdout).trim().is_empty(),
        "the refused volume was formatted"
    );
    Ok(())
}
