//! The DVP controller against the parent apiserver and the platform simulator, as the shipped
//! Role, for what csi-sanity and the sidecar flow do not reach: a VMBDA the platform marks
//! `Failed` is removed with a retryable error naming it and the retry attaches anew; a disk attached to another VM is
//! FailedPrecondition, and so is deleting it; a node without a VM is NotFound; publishing again
//! is idempotent; ListVolumes names the published node; Unpublish after the VM is gone succeeds
//! and leaves no VMBDA; expansion waits for the platform's capacity.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use common::{driver_env, node_vm, wait_parent_empty};
use kube::api::{Api, DeleteParams};
use stratus_csi::backend::{ControllerBackend, CreateVolumeRequest};
use stratus_csi::BackendError;
use stratus_csi_dvp::names::{serial, vmbda_name};
use stratus_csi_dvp::{DvpController, DvpOptions};
use stratus_dvp::config::DvpConfig;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment};
use stratus_testenv::DvpEnv;

fn request(name: &str) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        required_bytes: 1 << 30,
        limit_bytes: 0,
        parameters: BTreeMap::new(),
        metadata: BTreeMap::new(),
        topologies: Vec::new(),
        multi_attach: false,
        source: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_conflicting_and_orphaned_attachments() -> Result<()> {
    let env = DvpEnv::start().await?;
    node_vm(&env, "vm-a", "node-a").await?;
    node_vm(&env, "vm-b", "node-b").await?;
    let vars = driver_env(&env).await?;
    let config = DvpConfig::load(
        |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
        None,
    )?;
    let controller = DvpController::new(
        stratus_csi_dvp::app::connect(&config).await?,
        DvpOptions {
            cluster_uuid: "u".into(),
            operation_wait: Duration::from_secs(3),
            ..DvpOptions::default()
        },
    );
    let admin = env.parent_admin().await?;
    let vmbdas =
        Api::<VirtualMachineBlockDeviceAttachment>::namespaced(admin.clone(), env.namespace());

    // A Failed attachment is replaced: removed, with a retryable error naming it, and the
    // retry attaches anew once the platform can.
    let disk = controller.create_volume(&request("pvc-failed")).await?.id;
    let failed = vmbda_name(&disk, "node-a");
    env.sim().set_knobs(|k| {
        k.failed_attachments.insert(failed.clone());
    });
    for _ in 0..2 {
        let err = controller
            .publish(&disk, "node-a", false)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, BackendError::Unavailable(m) if m.contains(&failed) && m.contains("Failed")),
            "{err}"
        );
        let gone = tokio::time::Instant::now() + Duration::from_secs(10);
        while vmbdas.get_opt(&failed).await?.is_some() {
            assert!(
                tokio::time::Instant::now() < gone,
                "the Failed attachment stays"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    env.sim().set_knobs(|k| {
        k.failed_attachments.clear();
    });
    controller.publish(&disk, "node-a", false).await?;
    let attached = vmbdas.get(&failed).await?;
    assert_eq!(
        attached.status.map(|s| s.phase).as_deref(),
        Some("Attached")
    );
    controller.unpublish(&disk, "node-a").await?;
    assert!(vmbdas.get_opt(&failed).await?.is_none());

    // No VM for the node.
    let err = controller
        .publish(&disk, "node-x", false)
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::NotFound(_)), "{err}");

    // Attached to A: B is refused permanently; publishing to A again is idempotent.
    let ok = controller.create_volume(&request("pvc-ok")).await?.id;
    let ctx = controller.publish(&ok, "node-a", false).await?;
    let uid = Api::<VirtualDisk>::namespaced(admin.clone(), env.namespace())
        .get(&ok)
        .await?
        .metadata
        .uid
        .unwrap_or_default();
    assert_eq!(ctx.get("serial"), Some(&serial(&uid)), "{ctx:?}");
    assert_eq!(serial(&uid).len(), 32);
    assert_eq!(controller.publish(&ok, "node-a", false).await?, ctx);
    let err = controller.publish(&ok, "node-b", false).await.unwrap_err();
    assert!(
        matches!(&err, BackendError::FailedPrecondition(m) if m.contains("vm-a")),
        "{err}"
    );
    assert_eq!(
        controller.get_volume(&ok).await?.map(|v| v.attached_to),
        Some(vec!["node-a".to_string()])
    );
    let err = controller.delete_volume(&ok).await.unwrap_err();
    assert!(
        matches!(&err, BackendError::FailedPrecondition(m) if m.contains("attached")),
        "{err}"
    );
    let listed: Vec<(String, Vec<String>)> = controller
        .list_volumes()
        .await?
        .into_iter()
        .map(|v| (v.id, v.attached_to))
        .collect();
    assert_eq!(
        listed,
        vec![
            (disk.clone(), vec![]),
            (ok.clone(), vec!["node-a".to_string()])
        ],
        "ListVolumes reports the published node"
    );

    // The VM goes; unpublish still succeeds and leaves no attachment.
    Api::<VirtualMachine>::namespaced(admin.clone(), env.namespace())
        .delete("vm-a", &DeleteParams::default())
        .await?;
    controller.unpublish(&ok, "node-a").await?;
    assert!(vmbdas.get_opt(&vmbda_name(&ok, "node-a")).await?.is_none());

    // Expansion waits for the platform's capacity.
    assert_eq!(controller.expand(&ok, 3 << 30).await?, 3 << 30);

    controller.delete_volume(&ok).await?;
    controller.delete_volume(&disk).await?;
    wait_parent_empty(&env, Duration::from_secs(10)).await?;
    Ok(())
}
