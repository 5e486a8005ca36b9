//! Volume expansion where this machine's kernel allows it: a volume is created on moto,
//! attached, staged (formatted ext4) and written, unstaged, expanded through
//! ControllerExpandVolume; its device grows as an EBS device does after ModifyVolume (the loop
//! device stand-in, through the driver's own rescan seam), and the next NodeStageVolume grows
//! the file system offline before mounting it. The new size is read from the real file system
//! (`stat -f` on the mount, `dumpe2fs` on the device), the data written before survives, and
//! the kubelet's follow-up NodeExpandVolume succeeds. Online resizes (resize2fs on a mounted
//! ext4) are refused by some sandboxed kernels and are not needed on this path.
//!
//! The same for xfs, which grows only mounted: NodeStageVolume mounts it, sees the file system
//! (`xfs_db`) smaller than the device and runs `xfs_growfs` before answering. xfsprogs comes
//! from `testenv install`; without `mkfs.xfs` the xfs test fails saying so.

mod common;

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use common::{connect, driver_log, loop_device, loops_dir, output, start_driver, ZONE};
use stratus_csi_ebs::{DeviceFinder, LoopDevices};
use stratus_csi_spec::v1 as csi;
use stratus_csi_spec::v1::controller_client::ControllerClient;
use stratus_csi_spec::v1::node_client::NodeClient;
use stratus_scenarios::csi::contract::mount_capability as capability;
use stratus_scenarios::ec2_fixture;
use stratus_testenv::AwsEnv;
use tokio::process::Command;

const GIB: i64 = 1 << 30;
/// The whole test must finish within this.
const DEADLINE: Duration = Duration::from_secs(180);

/// Total bytes of the file system mounted at `path`, as statfs reports it.
async fn mounted_fs_bytes(path: &Path) -> Result<i64> {
    let out = output(
        "stat",
        &[
            "-f".as_ref(),
            "-c".as_ref(),
            "%b %S".as_ref(),
            path.as_os_str(),
        ],
    )
    .await?;
    let mut it = out.split_whitespace().map(str::parse::<i64>);
    match (it.next(), it.next()) {
        (Some(Ok(blocks)), Some(Ok(size))) => Ok(blocks * size),
        _ => bail!("stat -f answered {out:?}"),
    }
}

/// Bytes of the file system on `device` (block count × block size from its superblock).
async fn superblock_bytes(device: &Path, fs_type: &str) -> Result<i64> {
    if fs_type == "xfs" {
        let out = output(
            "xfs_db",
            &[
                "-r".as_ref(),
                "-c".as_ref(),
                "sb 0".as_ref(),
                "-c".as_ref(),
                "print dblocks blocksize".as_ref(),
                device.as_os_str(),
            ],
        )
        .await?;
        return stratus_csi::mount::parse_xfs_db(&out).context("xfs_db shows no size");
    }
    let out = output("dumpe2fs", &["-h".as_ref(), device.as_os_str()]).await?;
    stratus_csi::mount::parse_dumpe2fs(&out).context("dumpe2fs shows no size")
}

async fn expand_unstaged(env: &AwsEnv, dir: &Path, fs_type: &str) -> Result<()> {
    let ec2 = ec2_fixture::client(env.aws_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let node_id = ec2_fixture::launch(&ec2, &subnet, ZONE, 1, None, "m5.large").await?[0]
        .id
        .clone();
    let (_driver, socket) = start_driver(env, dir, &node_id).await?;
    let channel = connect(&socket).await?;
    let mut controller = ControllerClient::new(channel.clone());
    let mut node = NodeClient::new(channel);
    let cap = capability(fs_type);

    let volume = controller
        .create_volume(csi::CreateVolumeRequest {
            name: format!("grow-{fs_type}"),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: GIB,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![cap.clone()],
            accessibility_requirements: Some(csi::TopologyRequirement {
                requisite: vec![csi::Topology {
                    segments: [(stratus_csi_ebs::TOPOLOGY_KEY.to_string(), ZONE.to_string())]
                        .into(),
                }],
                preferred: vec![],
            }),
            ..Default::default()
        })
        .await?
        .into_inner()
        .volume
        .context("CreateVolume answered no volume")?;
    let id = volume.volume_id.clone();
    let publish = controller
        .controller_publish_volume(csi::ControllerPublishVolumeRequest {
            volume_id: id.clone(),
            node_id: node_id.clone(),
            volume_capability: Some(cap.clone()),
            ..Default::default()
        })
        .await?
        .into_inner();
    let staging = dir.join("staging");
    let stage = csi::NodeStageVolumeRequest {
        volume_id: id.clone(),
        publish_context: publish.publish_context.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(cap.clone()),
        volume_context: volume.volume_context.clone(),
        ..Default::default()
    };
    node.node_stage_volume(stage.clone()).await?;
    let before = mounted_fs_bytes(&staging).await?;
    ensure!(
        before <= GIB,
        "a 1 GiB volume carries a {before}-byte file system"
    );
    std::fs::write(staging.join("kept.txt"), "written before the expansion")?;
    node.node_unstage_volume(csi::NodeUnstageVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await?;

    let expanded = controller
        .controller_expand_volume(csi::ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            volume_capability: Some(cap.clone()),
            ..Default::default()
        })
        .await?
        .into_inner();
    ensure!(
        expanded.capacity_bytes >= 2 * GIB && expanded.node_expansion_required,
        "ControllerExpandVolume answered {expanded:?}"
    );
    // The cloud grew the volume; the device shows the new size (EBS: after ModifyVolume).
    let loops = loops_dir(dir);
    let device = loop_device(&loops, &id).await?;
    LoopDevices::new(loops.clone(), 0)
        .rescan(&id, &device, expanded.capacity_bytes)
        .await?;
    ensure!(
        superblock_bytes(&device, fs_type).await? <= GIB,
        "the file system grew before it was staged again"
    );

    node.node_stage_volume(stage.clone()).await?;
    let after = mounted_fs_bytes(&staging).await?;
    // A mounted xfs has its grown superblock in the log until unmounted: read it at the end.
    let on_disk = if fs_type == "xfs" {
        after
    } else {
        superblock_bytes(&device, fs_type).await?
    };
    ensure!(
        after > GIB + GIB / 2 && on_disk > GIB + GIB / 2,
        "after the device grew to 2 GiB and the volume was staged again the file system is \
         {after} bytes (statfs), {on_disk} bytes (superblock); before {before}"
    );
    ensure!(
        std::fs::read_to_string(staging.join("kept.txt"))? == "written before the expansion",
        "the data written before the expansion is gone"
    );
    // What the kubelet does next: NodeExpandVolume on the staged volume, nothing left to grow.
    let grown = node
        .node_expand_volume(csi::NodeExpandVolumeRequest {
            volume_id: id.clone(),
            volume_path: staging.display().to_string(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(cap.clone()),
            ..Default::default()
        })
        .await?
        .into_inner();
    ensure!(
        grown.capacity_bytes >= 2 * GIB,
        "NodeExpandVolume answered {grown:?}"
    );
    ensure!(
        mounted_fs_bytes(&staging).await? == after,
        "NodeExpandVolume changed a file system that already filled its device"
    );
    eprintln!("{fs_type}: {before} bytes before, {after} bytes after the growth at staging");

    node.node_unstage_volume(csi::NodeUnstageVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await?;
    let unmounted = superblock_bytes(&device, fs_type).await?;
    ensure!(
        unmounted > GIB + GIB / 2,
        "unstaged, the {fs_type} superblock shows {unmounted} bytes"
    );
    controller
        .controller_unpublish_volume(csi::ControllerUnpublishVolumeRequest {
            volume_id: id.clone(),
            node_id,
            ..Default::default()
        })
        .await?;
    controller
        .delete_volume(csi::DeleteVolumeRequest {
            volume_id: id,
            ..Default::default()
        })
        .await?;
    Ok(())
}

/// Runs [`expand_unstaged`] for `fs_type`, leaving no mount or loop device behind.
async fn run(fs_type: &str) -> Result<()> {
    let env = AwsEnv::start().await?;
    let dir = tempfile::tempdir()?;
    let result = tokio::time::timeout(DEADLINE, expand_unstaged(&env, dir.path(), fs_type))
        .await
        .context("the expansion test did not finish within its deadline")
        .and_then(|r| r);
    // Leave no mounts or loop devices behind, whatever happened.
    let _ = Command::new("umount")
        .arg(dir.path().join("staging"))
        .output()
        .await;
    LoopDevices::new(loops_dir(dir.path()), 0)
        .release_all()
        .await?;
    result.map_err(|e| {
        let log = driver_log(dir.path());
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        e.context(format!("driver log tail:\n{}", tail.join("\n")))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staging_grows_the_file_system_of_an_expanded_volume_offline() -> Result<()> {
    run("ext4").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staging_grows_an_expanded_xfs_file_system_once_mounted() -> Result<()> {
    stratus_testenv::tools::xfsprogs::require()?;
    run("xfs").await
}
