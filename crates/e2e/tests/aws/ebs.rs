//! The EBS part of the AWS suite: the EBS CSI driver installed with its chart from images of
//! this build and the upstream controller sidecars (built by testenv, packed under their
//! registry names). A StatefulSet's claim gets an EBS volume in moto, created by the
//! provisioner, attached by the attacher, staged by our node plugin on a loop device (formatted
//! and mounted by the storage tools inside its image) and mounted into the pod; data the pod
//! wrote is there after the pod is deleted and rescheduled; deleting the claim detaches and
//! deletes the volume.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};
use stratus_e2e::aws::{env_values, pod_network_access, ZONE};
use stratus_e2e::{chart, pods, volumes};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::images::ImageArchive;
use stratus_testenv::node::RealCluster;
use stratus_testenv::AwsEnv;

const CONTROLLER: &str = "app=ebs-csi-controller";
const NODE: &str = "app=ebs-csi-node";
const DEADLINE: Duration = Duration::from_secs(120);

/// The images of Stratus's binaries this part runs: the driver and our node sidecars.
pub const STRATUS_IMAGES: &[&str] = &[
    "ebs-csi-driver",
    "csi-node-driver-registrar",
    "csi-livenessprobe",
];

/// The other images this part runs: the upstream controller sidecars and the workload's probe.
pub fn foreign_images() -> Vec<ImageArchive> {
    volumes::sidecar_and_probe_images().expect("the upstream sidecars and the probe")
}

/// The chart's pods give a StatefulSet's claim a volume that keeps its data across pods.
pub async fn volume_keeps_data_across_pods(
    cluster: &RealCluster,
    aws: &AwsEnv,
    ec2: &aws_sdk_ec2::Client,
    instance: &str,
) {
    let client = cluster.client().await.unwrap();
    // The controller runs on the pod network: AWS through a relay on the node IP.
    let (_relay, aws_pod_env) = pod_network_access(aws).await.unwrap();
    let kubelet = cluster.kubelet_root();
    chart::install_with(
        cluster,
        "aws-ebs-csi-driver",
        "ebs",
        "kube-system",
        &values(&kubelet, instance, &aws_pod_env),
    )
    .expect("helm install the EBS chart");
    pods::wait_ready(&client, "kube-system", NODE, 1, DEADLINE)
        .await
        .expect("the node plugin runs and registers");
    pods::wait_ready(&client, "kube-system", CONTROLLER, 1, DEADLINE)
        .await
        .expect("the controller runs");

    let classes: Api<StorageClass> = Api::all(client.clone());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "ebs-gp3"},
                "provisioner": "ebs.csi.aws.com",
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Delete",
                "allowVolumeExpansion": true,
                "parameters": {"type": "gp3", "csi.storage.k8s.io/fstype": "ext4"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let token = format!("e2e-{}", std::process::id());
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    sets.create(
        &PostParams::default(),
        &volumes::workload(&token, "ebs-gp3"),
    )
    .await
    .unwrap();
    let first = ready_workload(&client, cluster).await;
    let wrote = volumes::log_of(&client, &first, DEADLINE).await.unwrap();
    assert_eq!(
        wrote.trim(),
        format!("wrote {token}"),
        "the first pod writes"
    );

    // One gp3 volume of 1 GiB in moto, attached to the node's instance.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let (_, volume_id) = volumes::bound_volume(&client).await.unwrap();
    let volumes = ec2
        .describe_volumes()
        .volume_ids(&volume_id)
        .send()
        .await
        .unwrap();
    let volume = volumes.volumes().first().expect("the EBS volume");
    assert_eq!(volume.size(), Some(1));
    assert_eq!(volume.volume_type().map(|t| t.as_str()), Some("gp3"));
    assert_eq!(volume.availability_zone(), Some(ZONE));
    let attached: Vec<_> = volume
        .attachments()
        .iter()
        .filter_map(|a| a.instance_id())
        .collect();
    assert_eq!(attached, [instance], "attached to the node's instance");
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
        .delete(volumes::POD, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the first pod to be gone", DEADLINE, || {
        let pods_api = pods_api.clone();
        let first_uid = first_uid.clone();
        async move {
            let gone = match pods_api.get_opt(volumes::POD).await? {
                None => true,
                Some(p) => p.metadata.uid != first_uid,
            };
            Ok(gone.then_some(()))
        }
    })
    .await
    .unwrap();
    let second = ready_workload(&client, cluster).await;
    assert_ne!(second.metadata.uid, first_uid, "a new pod");
    let found = volumes::log_of(&client, &second, DEADLINE).await.unwrap();
    assert_eq!(
        found.trim(),
        format!("found {token}"),
        "the data outlived its pod"
    );

    // The claim goes: the volume is detached from the node and deleted.
    sets.delete("data", &DeleteParams::default()).await.unwrap();
    claims
        .delete(volumes::CLAIM, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the EBS volume to be deleted", DEADLINE, || {
        let ec2 = ec2.clone();
        let volume_id = volume_id.clone();
        async move {
            let left = ec2
                .describe_volumes()
                .send()
                .await?
                .volumes()
                .iter()
                .any(|v| v.volume_id() == Some(volume_id.as_str()));
            Ok((!left).then_some(()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", cluster.log("kubelet", 40)));
    assert!(
        volumes::staged_mounts(&kubelet).is_empty(),
        "nothing stays mounted from a loop device: {:?}",
        volumes::staged_mounts(&kubelet)
    );
}

/// The chart's values on the real node: images imported (`Never` pulled), the upstream
/// controller sidecars testenv builds, one controller replica on the pod network sent to AWS by
/// `aws_pod_env`, the node plugin under the kubelet's root `kubelet` as the node's `instance`,
/// its volumes loop devices backed by files (test-only).
pub fn values(kubelet: &Path, instance: &str, aws_pod_env: &[(String, String)]) -> Value {
    let sidecar = |name: &str| volumes::sidecar_image(name).unwrap();
    json!({
        "image": {"pullPolicy": "Never"},
        "sidecars": {
            "provisioner": {"image": sidecar("csi-provisioner")},
            "attacher": {"image": sidecar("csi-attacher")},
            "resizer": {"image": sidecar("csi-resizer")},
            "nodeDriverRegistrar": {"image": {"pullPolicy": "Never"}},
            "livenessProbe": {"image": {"pullPolicy": "Never"}},
        },
        "controller": {
            "replicas": 1,
            "env": env_values(aws_pod_env),
        },
        "node": {
            "kubeletPath": kubelet.display().to_string(),
            // Test-only: volumes appear as loop devices backed by files on the node.
            "additionalArgs": [format!("--loop-devices-dir={}", kubelet.join("stratus-ebs-loops").display())],
            "env": env_values(&[
                ("CSI_NODE_ID".to_owned(), instance.to_owned()),
                ("CSI_NODE_ZONE".to_owned(), ZONE.to_owned()),
            ]),
        },
    })
}

/// The workload's pod once Running and Ready; a failure carries the driver's logs and events.
pub async fn ready_workload(client: &kube::Client, cluster: &RealCluster) -> Pod {
    match pods::wait_ready(client, "default", volumes::WORKLOAD_SELECTOR, 1, DEADLINE).await {
        Ok(mut list) => list.remove(0),
        Err(e) => panic!(
            "{e:#}\n--- controller\n{}\n--- node\n{}\n--- kubelet\n{}",
            pods::logs(client, "kube-system", CONTROLLER).await,
            pods::logs(client, "kube-system", NODE).await,
            cluster.log("kubelet", 40)
        ),
    }
}
