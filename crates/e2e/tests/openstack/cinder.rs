//! The Cinder part of the OpenStack suite: the Cinder CSI plugin installed with its chart from
//! images of this build and the upstream controller sidecars (built by testenv, packed under
//! their registry names). The controller runs on the pod network: it reaches Keystone through a
//! relay on the node IP and the simulators through the catalog's `internal` endpoints, moved to
//! that relay. A StatefulSet's claim gets a Cinder volume, created by the provisioner, attached
//! to the node's server by the attacher (Nova's volume attachment, the volume `in-use`), staged
//! by our node plugin on a loop device (formatted and mounted by the storage tools inside its
//! image) and mounted into the pod; data the pod wrote is there after the pod is deleted and
//! rescheduled; deleting the claim detaches and deletes the volume.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};
use stratus_e2e::openstack::{pod_cloud_conf, NodeServer, CLUSTER_NAME, ZONE};
use stratus_e2e::phases::Phases;
use stratus_e2e::volumes::{self, WORKLOAD, WORKLOAD_SELECTOR};
use stratus_e2e::{chart, pods};
use stratus_openstack_sim::SimHandle;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::forward::NodeForward;
use stratus_testenv::node::images::{self, ImageArchive};
use stratus_testenv::node::RealCluster;
use stratus_testenv::OpenStackEnv;

const CONTROLLER: &str = "app=csi-cinder-controllerplugin";
const NODE: &str = "app=csi-cinder-nodeplugin";
const DEADLINE: Duration = Duration::from_secs(120);
/// The Secret the chart mounts as `/etc/config/cloud.conf` (`secret.name`).
const CLOUD_CONFIG: &str = "cinder-cloud-config";
const CLASS: &str = "cinder-standard";
const CLAIM: &str = "data-data-0";

/// The images this part runs: the driver, our node sidecars, the upstream controller sidecars
/// and the workload's probe.
pub fn images() -> Vec<ImageArchive> {
    let mut archives: Vec<_> = ["cinder-csi-plugin", "csi-node-driver-registrar"]
        .into_iter()
        .chain(["csi-livenessprobe"])
        .map(|name| images::stratus(name).unwrap())
        .collect();
    archives.extend(volumes::sidecar_and_probe_images().unwrap());
    archives
}

/// The chart's pods give a StatefulSet's claim a Cinder volume attached to the node's server
/// that keeps its data across pods and goes with the claim.
pub async fn volume_keeps_data_across_pods(
    cluster: &RealCluster,
    cloud: &OpenStackEnv,
    sim: &SimHandle,
    server: &NodeServer,
    phases: &mut Phases,
) {
    let client = cluster.client().await.unwrap();
    let _relay = pod_network_access(&client, cloud).await;
    let kubelet = cluster.kubelet_root();
    chart::install_with(
        cluster,
        "cinder-csi-plugin",
        "cinder",
        "kube-system",
        &values(&kubelet, &server.id),
    )
    .expect("helm install the Cinder chart");
    pods::wait_ready(&client, "kube-system", NODE, 1, DEADLINE)
        .await
        .expect("the node plugin runs and registers");
    pods::wait_ready(&client, "kube-system", CONTROLLER, 1, DEADLINE)
        .await
        .expect("the controller runs");
    phases.mark("cinder_ready");

    Api::<StorageClass>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": CLASS},
                "provisioner": "cinder.csi.openstack.org",
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Delete",
                "allowVolumeExpansion": true,
                "parameters": {"csi.storage.k8s.io/fstype": "ext4"},
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
    let first = ready_workload(&client, cluster).await;
    assert_eq!(
        volumes::log_of(&client, &first, DEADLINE).await.unwrap(),
        format!("wrote {token}"),
        "the first pod writes"
    );

    // One 1 GiB volume in the node's zone, in-use and attached to the node's server.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let volume_id = volume_of(&client, &claims).await;
    let volume = sim
        .volumes()
        .into_iter()
        .find(|v| v["id"] == volume_id.as_str())
        .expect("the Cinder volume");
    assert_eq!(volume["size"], 1, "{volume}");
    assert_eq!(volume["availability_zone"], ZONE, "{volume}");
    assert_eq!(volume["status"], "in-use", "{volume}");
    assert_eq!(
        attached_servers(&volume),
        [server.id.as_str()],
        "attached to the node's server: {volume}"
    );
    assert_eq!(
        volume["metadata"]["cinder.csi.openstack.org/cluster"], CLUSTER_NAME,
        "{volume}"
    );
    let staged = volumes::staged_mounts(&kubelet);
    assert!(
        staged
            .iter()
            .any(|m| m.contains("/dev/loop") && m.contains(" ext4 ")),
        "an ext4 loop device is mounted under the kubelet's root: {staged:?}"
    );
    phases.mark("cinder_volume");

    // The pod goes; its replacement finds the data.
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first_uid = first.metadata.uid.clone();
    let pod_name = format!("{WORKLOAD}-0");
    pods_api
        .delete(&pod_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the first pod to be gone", DEADLINE, || {
        let (pods_api, pod_name, first_uid) =
            (pods_api.clone(), pod_name.clone(), first_uid.clone());
        async move {
            let gone = match pods_api.get_opt(&pod_name).await? {
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
    assert_eq!(
        volumes::log_of(&client, &second, DEADLINE).await.unwrap(),
        format!("found {token}"),
        "the data outlived its pod"
    );
    phases.mark("cinder_data_kept");

    // The claim goes: the volume is detached from the server and deleted.
    sets.delete(WORKLOAD, &DeleteParams::default())
        .await
        .unwrap();
    claims
        .delete(CLAIM, &DeleteParams::default())
        .await
        .unwrap();
    if let Err(e) = wait_for("the Cinder volume to be deleted", DEADLINE, || async {
        let left = sim.volumes().iter().any(|v| v["id"] == volume_id.as_str());
        Ok((!left).then_some(()))
    })
    .await
    {
        panic!(
            "{e:#}\nvolumes: {:?}\n--- controller\n{}\n--- kubelet\n{}",
            sim.volumes(),
            pods::logs(&client, "kube-system", CONTROLLER).await,
            cluster.log("kubelet", 40)
        );
    }
    assert!(
        !sim.attachments().iter().any(|a| a.volume_id == volume_id),
        "no attachment of the volume is left: {:?}",
        sim.attachments()
    );
    assert!(
        volumes::staged_mounts(&kubelet).is_empty(),
        "nothing stays mounted from a loop device: {:?}",
        volumes::staged_mounts(&kubelet)
    );
    phases.mark("cinder_volume_deleted");
}

/// The chart's values: the images imported into the node, the testenv-built controller
/// sidecars, one controller replica, the node plugin under the cluster's kubelet root with its
/// volumes on loop devices (test-only) and the node's server and zone given (the simulators
/// serve no metadata service).
pub fn values(kubelet: &Path, server_id: &str) -> Value {
    let sidecar = |name: &str| volumes::sidecar_image(name).unwrap();
    json!({
        "image": {"pullPolicy": "Never"},
        "clusterID": CLUSTER_NAME,
        "secret": {"name": CLOUD_CONFIG},
        "sidecars": {
            "provisioner": {"image": sidecar("csi-provisioner")},
            "attacher": {"image": sidecar("csi-attacher")},
            "resizer": {"image": sidecar("csi-resizer")},
            "nodeDriverRegistrar": {"image": {"pullPolicy": "Never"}},
            "livenessProbe": {"image": {"pullPolicy": "Never"}},
        },
        "controller": {"replicas": 1},
        "node": {
            "kubeletPath": kubelet.display().to_string(),
            "additionalArgs": [format!("--loop-devices-dir={}", kubelet.join("stratus-cinder-loops").display())],
            "env": [
                {"name": "CSI_NODE_ID", "value": server_id},
                {"name": "CSI_NODE_ZONE", "value": ZONE},
            ],
        },
    })
}

/// The plugin's way to the cloud from the pod network: a relay on the node IP to the test's
/// proxy, the catalog's `internal` endpoints moved to it, and the chart's cloud config Secret
/// ([`CLOUD_CONFIG`]) reaching Keystone through it. The relay lives as long as the value.
pub async fn pod_network_access(client: &kube::Client, cloud: &OpenStackEnv) -> NodeForward {
    let proxy = cloud.endpoint().trim_start_matches("http://");
    let relay = NodeForward::start(proxy.parse().unwrap()).await.unwrap();
    cloud
        .move_interface("internal", &relay.http_url())
        .await
        .expect("the internal endpoints on the relay");
    let conf = pod_cloud_conf(cloud.credentials(), &relay.http_url());
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": CLOUD_CONFIG},
        "stringData": {"cloud.conf": conf},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    relay
}

/// The Cinder volume ID of the workload's bound claim.
pub async fn volume_of(client: &kube::Client, claims: &Api<PersistentVolumeClaim>) -> String {
    let claim = claims.get(CLAIM).await.unwrap();
    let pv_name = claim
        .spec
        .and_then(|s| s.volume_name)
        .expect("a bound volume");
    let pv = Api::<PersistentVolume>::all(client.clone())
        .get(&pv_name)
        .await
        .unwrap();
    pv.spec
        .and_then(|s| s.csi)
        .expect("a CSI volume")
        .volume_handle
}

/// The servers a volume's `attachments` name.
pub fn attached_servers(volume: &Value) -> Vec<&str> {
    volume["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["server_id"].as_str())
        .collect()
}

/// The workload's pod once Running and Ready; a failure carries the driver's logs and events.
pub async fn ready_workload(client: &kube::Client, cluster: &RealCluster) -> Pod {
    match pods::wait_ready(client, "default", WORKLOAD_SELECTOR, 1, DEADLINE).await {
        Ok(mut list) => list.remove(0),
        Err(e) => panic!(
            "{e:#}\n--- controller\n{}\n--- node\n{}\n--- events\n{}\n--- kubelet\n{}",
            pods::logs(client, "kube-system", CONTROLLER).await,
            pods::logs(client, "kube-system", NODE).await,
            pods::recent_events(client, "default").await,
            cluster.log("kubelet", 40)
        ),
    }
}
