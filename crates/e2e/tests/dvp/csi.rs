//! The CSI part of the DVP suite: the DVP CSI driver installed with its chart from images of this
//! build and the upstream controller sidecars (built by testenv, packed under their registry
//! names), its controller on the pod network reaching the parent through the relay as its own
//! identity under the shipped `deploy/dvp/csi-parent-rbac.yaml` Role. A StatefulSet's claim gets
//! a VirtualDisk in the parent (the provisioner's CreateVolume), hot-plugged into the node's VM
//! by a VirtualMachineBlockDeviceAttachment (the attacher's ControllerPublish; the simulator
//! plays the virtualization controller; the kubelet registered the node plugin with the Node's
//! name, which the VM carries as its hostname label), staged by our node plugin on a loop device (formatted
//! and mounted by the storage tools inside its image) and mounted into the pod; data the pod
//! wrote is there after the pod is deleted and rescheduled; deleting the claim detaches the disk
//! from the VM and deletes it.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use stratus_dvp_api::labels::{CLUSTER_UUID as UUID_LABEL, MANAGED_BY, MANAGED_BY_DECKHOUSE};
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment};
use stratus_e2e::capdvp::CLUSTER_UUID;
use stratus_e2e::dvp::{csi_values, parent_secret, Parent};
use stratus_e2e::dvp::{CSI_PARENT_SECRET, NAMESPACE, NODE_VM};
use stratus_e2e::volumes::{self, CLAIM, POD, WORKLOAD, WORKLOAD_SELECTOR};
use stratus_e2e::{chart, pods};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::forward::NodeForward;
use stratus_testenv::node::images::{self, ImageArchive};
use stratus_testenv::node::{RealCluster, NODE_NAME};

const DRIVER: &str = "csi.dvp.deckhouse.io";
const CONTROLLER: &str = "app=csi-dvp-controllerplugin";
const NODE: &str = "app=csi-dvp-nodeplugin";
const DEADLINE: Duration = Duration::from_secs(120);
/// The tenant StorageClass.
const CLASS: &str = "dvp-e2e";
/// The parent StorageClass the tenant class names (`dvpStorageClass`); the simulator takes any.
const PARENT_CLASS: &str = "e2e-parent-ssd";

/// Stratus's images this part runs: the driver and our node sidecars.
pub const STRATUS_IMAGES: [&str; 3] = [
    "dvp-csi-driver",
    "csi-node-driver-registrar",
    "csi-livenessprobe",
];

/// The other images this part runs: the upstream controller sidecars and the workload's probe.
pub fn foreign_images() -> Result<Vec<ImageArchive>> {
    let mut archives = images::csi_sidecars()?;
    archives.push(volumes::probe_image()?);
    Ok(archives)
}

/// The chart's pods give a StatefulSet's claim a VirtualDisk hot-plugged into the node's VM that
/// keeps its data across pods and goes with the claim; returns the disk's name.
pub async fn volume_keeps_data_across_pods(
    cluster: &RealCluster,
    client: &kube::Client,
    parent: &Parent,
    relay: &NodeForward,
) -> String {
    let kubeconfig = parent
        .csi_kubeconfig(relay)
        .await
        .expect("the CSI driver's parent identity");
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &parent_secret(CSI_PARENT_SECRET, &kubeconfig),
        )
        .await
        .expect("the CSI driver's parent kubeconfig Secret");
    let kubelet = cluster.kubelet_root();
    chart::install_with(
        cluster,
        "dvp-csi-driver",
        "dvp-csi",
        "kube-system",
        &csi_values(&kubelet, CLUSTER_UUID).expect("the CSI chart's values"),
    )
    .expect("helm install the DVP CSI chart");
    pods::wait_ready(client, "kube-system", NODE, 1, DEADLINE)
        .await
        .expect("the node plugin runs and registers");
    pods::wait_ready(client, "kube-system", CONTROLLER, 1, DEADLINE)
        .await
        .expect("the controller runs");
    // The kubelet registered the driver with the Node's name as its ID: the name the node's VM
    // carries as its hostname label, by which the controller finds the VM to attach to.
    let registered = wait_for("the kubelet to register the driver", DEADLINE, || {
        node_id(client)
    })
    .await
    .expect("the driver in the CSINode");
    assert_eq!(registered, NODE_NAME, "the node ID is the Node's name");

    let classes: Api<StorageClass> = Api::all(client.clone());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": CLASS},
                "provisioner": DRIVER,
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Delete",
                "allowVolumeExpansion": true,
                "parameters": {"dvpStorageClass": PARENT_CLASS, "csi.storage.k8s.io/fstype": "ext4"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let token = format!("e2e-{}", std::process::id());
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    sets.create(&PostParams::default(), &volumes::workload(&token, CLASS))
        .await
        .unwrap();
    let first = ready_workload(client, cluster).await;
    let wrote = volumes::log_of(client, &first, DEADLINE).await.unwrap();
    assert_eq!(
        wrote.trim(),
        format!("wrote {token}"),
        "the first pod writes"
    );

    // The claim's volume is a Ready VirtualDisk of 1 GiB in the parent, labelled as Deckhouse
    // labels it, hot-plugged into the node's VM.
    let (_, disk_name) = volumes::bound_volume(client).await.unwrap();
    let disks: Api<VirtualDisk> = Api::namespaced(parent.admin.clone(), NAMESPACE);
    let disk = disks
        .get(&disk_name)
        .await
        .expect("the claim's VirtualDisk in the parent");
    let pvc = disk
        .spec
        .persistent_volume_claim
        .clone()
        .unwrap_or_default();
    assert_eq!(pvc.size.as_deref(), Some("1073741824"), "1 GiB asked");
    assert_eq!(
        pvc.storage_class_name.as_deref(),
        Some(PARENT_CLASS),
        "the parent class the StorageClass names"
    );
    assert_eq!(
        disk.status.as_ref().map(|s| s.phase.as_str()),
        Some("Ready")
    );
    let labels = disk.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(UUID_LABEL).map(String::as_str),
        Some(CLUSTER_UUID)
    );
    assert_eq!(
        labels.get(MANAGED_BY).map(String::as_str),
        Some(MANAGED_BY_DECKHOUSE)
    );
    let attachments = attachments_of(parent, &disk_name).await.unwrap();
    let attached: Vec<(&str, &str)> = attachments
        .iter()
        .map(|a| {
            (
                a.spec.virtual_machine_name.as_str(),
                a.status.as_ref().map(|s| s.phase.as_str()).unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        attached,
        [(NODE_VM, "Attached")],
        "one attachment to the node's VM"
    );
    assert!(
        hotplugged(parent, &disk_name).await.unwrap(),
        "the node's VM shows the disk hot-plugged"
    );
    let staged = volumes::staged_mounts(&kubelet);
    assert!(
        staged
            .iter()
            .any(|m| m.contains("/dev/loop") && m.contains(" ext4 ")),
        "an ext4 loop device is mounted under the kubelet's root: {staged:?}"
    );

    // The pod goes; its replacement finds the data.
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first_uid = first.metadata.uid.clone();
    pods_api
        .delete(POD, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the first pod to be gone", DEADLINE, || {
        let pods_api = pods_api.clone();
        let first_uid = first_uid.clone();
        async move {
            let gone = match pods_api.get_opt(POD).await? {
                None => true,
                Some(p) => p.metadata.uid != first_uid,
            };
            Ok(gone.then_some(()))
        }
    })
    .await
    .unwrap();
    let second = ready_workload(client, cluster).await;
    assert_ne!(second.metadata.uid, first_uid, "a new pod");
    let found = volumes::log_of(client, &second, DEADLINE).await.unwrap();
    assert_eq!(
        found.trim(),
        format!("found {token}"),
        "the data outlived its pod"
    );

    // The claim goes: the disk leaves the VM and the parent.
    sets.delete(WORKLOAD, &DeleteParams::default())
        .await
        .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), "default")
        .delete(CLAIM, &DeleteParams::default())
        .await
        .unwrap();
    let gone = wait_for("the VirtualDisk detached and deleted", DEADLINE, || async {
        let gone = disks.get_opt(&disk_name).await?.is_none()
            && attachments_of(parent, &disk_name).await?.is_empty()
            && !hotplugged(parent, &disk_name).await?;
        Ok(gone.then_some(()))
    })
    .await;
    if let Err(e) = gone {
        panic!(
            "{e:#}\n--- controller\n{}\n--- node\n{}\n--- kubelet\n{}",
            pods::logs(client, "kube-system", CONTROLLER).await,
            pods::logs(client, "kube-system", NODE).await,
            cluster.log("kubelet", 40)
        );
    }
    assert!(
        volumes::staged_mounts(&kubelet).is_empty(),
        "nothing stays mounted from a loop device: {:?}",
        volumes::staged_mounts(&kubelet)
    );
    disk_name
}

/// The node ID the kubelet registered for the driver in the node's CSINode, once it has.
async fn node_id(client: &kube::Client) -> Result<Option<String>> {
    let Some(csi_node) = Api::<CSINode>::all(client.clone())
        .get_opt(NODE_NAME)
        .await?
    else {
        return Ok(None);
    };
    Ok(csi_node
        .spec
        .drivers
        .into_iter()
        .find(|d| d.name == DRIVER)
        .map(|d| d.node_id))
}

/// The parent's attachments of the VirtualDisk `disk`.
async fn attachments_of(
    parent: &Parent,
    disk: &str,
) -> Result<Vec<VirtualMachineBlockDeviceAttachment>> {
    let api: Api<VirtualMachineBlockDeviceAttachment> =
        Api::namespaced(parent.admin.clone(), NAMESPACE);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|a| a.spec.block_device_ref.kind == "VirtualDisk")
        .filter(|a| a.spec.block_device_ref.name == disk)
        .collect())
}

/// Whether the node's VM reports the VirtualDisk `disk` hot-plugged and attached.
pub async fn hotplugged(parent: &Parent, disk: &str) -> Result<bool> {
    let vm = Api::<VirtualMachine>::namespaced(parent.admin.clone(), NAMESPACE)
        .get(NODE_VM)
        .await?;
    Ok(vm
        .status
        .iter()
        .flat_map(|s| &s.block_device_refs)
        .any(|d| d.kind == "VirtualDisk" && d.name == disk && d.hotplugged && d.attached))
}

/// The workload's pod once Running and Ready; a failure carries the driver's logs and events.
pub async fn ready_workload(client: &kube::Client, cluster: &RealCluster) -> Pod {
    match pods::wait_ready(client, "default", WORKLOAD_SELECTOR, 1, DEADLINE).await {
        Ok(mut list) => list.remove(0),
        Err(e) => panic!(
            "{e:#}\n--- controller\n{}\n--- node\n{}\n--- kubelet\n{}",
            pods::logs(client, "kube-system", CONTROLLER).await,
            pods::logs(client, "kube-system", NODE).await,
            cluster.log("kubelet", 40)
        ),
    }
}
