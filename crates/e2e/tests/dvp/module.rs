//! The DVP module as one release on the real node: `helm install cloud-provider-dvp` with the
//! shipped example values (pointed at the parent cluster through the relay) installs the CCM,
//! the DVP CSI driver, capdvp, the cloud-data-discoverer and the module controller at once, each
//! from an image of this build and each with its own parent identity under its shipped parent
//! RBAC. Every workload of the release comes up (capdvp beside the real Cluster API manager);
//! the CCM initialises the Node from its VM; the discoverer, on the pod network, writes the
//! parent's StorageClasses into the discovery data; the module controller, as a pod, turns them
//! into the module's classes (the example excludes `local-.*`; the parent's default is the
//! module's) and writes the registration Secret; a claim naming no class becomes a VirtualDisk
//! of the parent's default class, hot-plugged into the node's VM.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use serde_json::json;
use stratus_dvp_api::VirtualDisk;
use stratus_e2e::capdvp::{self, CLUSTER_UUID};
use stratus_e2e::dvp::{ccm_values, csi_values, parent_secret, Parent};
use stratus_e2e::dvp::{CSI_PARENT_SECRET, NAMESPACE, NODE_VM, PARENT_SECRET, PARENT_SECRET_KEY};
use stratus_e2e::{module, pack, volumes};
use stratus_testenv::core::capi::ClusterApiManager;
use stratus_testenv::node::forward::NodeForward;
use stratus_testenv::node::{netns, RealCluster};

use crate::csi;

const DEADLINE: Duration = Duration::from_secs(120);
const CLOUD: &str = "dvp";
/// The discoverer's ServiceAccount in the parent and its shipped parent RBAC.
const DISCOVERER_ACCOUNT: &str = "stratus-dvp-cloud-data-discoverer";
const DISCOVERER_RBAC: &str = "deploy/dvp/parent-discoverer-rbac.yaml";
const DISCOVERER_SECRET: &str = "dvp-discoverer-parent";
/// The parent's StorageClasses: (name, default); `local-path` is excluded by the example.
const PARENT_CLASSES: [(&str, bool); 3] = [
    ("linstor-thin-r1", true),
    ("ceph-rbd", false),
    ("local-path", false),
];

#[test]
fn the_dvp_module_chart_runs_as_one_release_on_a_real_node() {
    netns::run(|| async {
        let packing = tokio::task::spawn_blocking(move || {
            let names: Vec<&str> = ["cloud-controller-manager", "capdvp-controller-manager"]
                .into_iter()
                .chain(["cloud-data-discoverer", "module-controller"])
                .chain(csi::STRATUS_IMAGES)
                .collect();
            let mut archives = pack::stratus_images(&names)?;
            archives.extend(csi::foreign_images()?);
            anyhow::Ok(archives)
        });
        let parent = Parent::start().await.expect("the parent cluster");
        parent.node_vm().await.expect("the node's VM");
        for (name, default) in PARENT_CLASSES {
            let class: StorageClass = serde_json::from_value(json!({
                "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": default.to_string()}},
                "provisioner": "replicated.csi.storage.deckhouse.io",
                "allowVolumeExpansion": true, "volumeBindingMode": "WaitForFirstConsumer"
            }))
            .unwrap();
            Api::<StorageClass>::all(parent.admin.clone())
                .create(&PostParams::default(), &class)
                .await
                .unwrap();
        }
        let images = packing.await.unwrap().expect("the images");
        let cluster = RealCluster::start(&images).await.expect("the real cluster");
        let client = cluster.client().await.unwrap();
        let relay = NodeForward::start(parent.apiserver_address().unwrap())
            .await
            .expect("a relay to the parent");
        parent_identities(&client, &parent, &relay).await;
        capdvp::create_namespace(&client)
            .await
            .expect("the Cluster API namespace");
        // capdvp watches Cluster API's objects: their CRDs and manager come first.
        let capi = ClusterApiManager::start_with(&client, &cluster.kubeconfig(), cluster.dir())
            .await
            .expect("the Cluster API manager");
        let never = json!({"pullPolicy": "Never"});

        let started = tokio::time::Instant::now();
        module::install(
            &cluster,
            CLOUD,
            &json!({
                "provider": {"parameters": {"namespace": NAMESPACE}},
                "providerClusterConfiguration": {"provider": {"namespace": NAMESPACE}},
                "cloud-controller-manager": ccm_values(),
                "dvp-csi-driver": csi_values(&cluster.kubelet_root(), CLUSTER_UUID).unwrap(),
                "capdvp-controller-manager": capdvp::values(),
                "cloud-data-discoverer": {
                    "image": never,
                    "env": [
                        {"name": "DVP_KUBERNETES_CONFIG_BASE64", "valueFrom": {"secretKeyRef": {"name": DISCOVERER_SECRET, "key": PARENT_SECRET_KEY}}},
                        {"name": "DVP_NAMESPACE", "value": NAMESPACE},
                    ],
                },
                "module-controller": {"image": never},
            }),
        )
        .expect("helm install cloud-provider-dvp");
        let release = module::release(CLOUD);
        let (workloads, containers) = module::wait_all_ready(&client, &release, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}\n--- cluster-api ---\n{}", capi.log_tail(30)));
        println!(
            "{{\"module_dvp_ready_seconds\": {:.2}, \"module_dvp_workloads\": {}, \"module_dvp_containers_checked\": {containers}}}",
            started.elapsed().as_secs_f64(),
            workloads.len()
        );
        let ids: Vec<&str> = workloads.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(workloads.len(), 6, "the release's workloads: {ids:?}");

        // The CCM initialises the kubelet's Node from its VM.
        module::wait_node_initialised(&client, &format!("dvp://{NODE_VM}"), DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));

        // The parent's classes, through the discoverer, as the module's.
        let classes = module::storage_classes(&client, CLOUD, 2, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let names = module::names(&classes);
        assert_eq!(names, ["ceph-rbd", "linstor-thin-r1"], "local-.* excluded");
        let defaults = module::default_names(&classes);
        assert_eq!(defaults, ["linstor-thin-r1"], "the parent's default");
        for class in &classes {
            assert_eq!(class.provisioner, "csi.dvp.deckhouse.io");
            assert_eq!(
                class
                    .parameters
                    .as_ref()
                    .and_then(|p| p.get("dvpStorageClass")),
                class.metadata.name.as_ref(),
                "{class:?}"
            );
        }
        let registration = module::registration(&client, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(registration.get("type").map(String::as_str), Some("dvp"));
        assert_eq!(
            registration.get("capiClusterKind").map(String::as_str),
            Some("DeckhouseCluster")
        );

        // A claim naming no class: a VirtualDisk of the parent's default class, hot-plugged.
        let token = format!("module-{}", std::process::id());
        Api::<StatefulSet>::namespaced(client.clone(), "default")
            .create(
                &PostParams::default(),
                &volumes::workload_of_the_default_class(&token, "1Gi"),
            )
            .await
            .unwrap();
        let pod = csi::ready_workload(&client, &cluster).await;
        assert_eq!(
            volumes::log_of(&client, &pod, DEADLINE).await.unwrap(),
            format!("wrote {token}")
        );
        let (_, disk_name) = volumes::bound_volume(&client).await.unwrap();
        let disk = Api::<VirtualDisk>::namespaced(parent.admin.clone(), NAMESPACE)
            .get(&disk_name)
            .await
            .expect("the claim's VirtualDisk in the parent");
        assert_eq!(
            disk.spec
                .persistent_volume_claim
                .as_ref()
                .and_then(|c| c.storage_class_name.as_deref()),
            Some("linstor-thin-r1"),
            "the parent's default class"
        );
        assert!(
            csi::hotplugged(&parent, &disk_name).await.unwrap(),
            "hot-plugged into the node's VM"
        );

        drop(capi);
        cluster.teardown().await.expect("teardown leaves nothing");
    });
}

/// Each component's parent kubeconfig in its Secret, as its own ServiceAccount in the parent
/// under its shipped parent RBAC: the CCM's, the CSI driver's, capdvp's and the discoverer's.
async fn parent_identities(client: &kube::Client, parent: &Parent, relay: &NodeForward) {
    let identities = [
        (PARENT_SECRET, parent.ccm_kubeconfig(relay).await),
        (CSI_PARENT_SECRET, parent.csi_kubeconfig(relay).await),
        (
            capdvp::PARENT_SECRET,
            capdvp::parent_identity(parent, relay).await,
        ),
        (
            DISCOVERER_SECRET,
            parent
                .kubeconfig_under(DISCOVERER_ACCOUNT, DISCOVERER_RBAC, relay)
                .await,
        ),
    ];
    let secrets = Api::<Secret>::namespaced(client.clone(), "kube-system");
    for (name, kubeconfig) in identities {
        let kubeconfig = kubeconfig.unwrap_or_else(|e| panic!("{name}: {e:#}"));
        secrets
            .create(&PostParams::default(), &parent_secret(name, &kubeconfig))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    }
}
