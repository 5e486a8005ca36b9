//! The AWS module as one release on the real node: `helm install cloud-provider-aws` with the
//! shipped example values (pointed at moto and the node) installs every component's chart at
//! once — the CCM, the EBS CSI driver, the cloud-data-discoverer, the node-termination-handler
//! and the module controller — each from an image of this build. Every workload of the release
//! comes up; the CCM initialises the Node; the module controller, as a pod, turns the module
//! settings into StorageClasses (the example's `gp3` the default, with its IOPS and throughput)
//! and the provider cluster configuration into the registration Secret; a claim naming no class
//! gets a gp3 EBS volume with those parameters from the module's own driver; the discoverer
//! writes its catalog; the termination handler watches a quiet IMDS and drains nothing.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use stratus_e2e::aws::{env_values, node_instance, pod_network_access, CLUSTER_ID, ZONE};
use stratus_e2e::{module, pack, pods, volumes};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::{netns, NODE_NAME};
use stratus_testenv::tools::ec2_metadata_mock::Aemm;
use stratus_testenv::AwsEnv;

use crate::ebs;

const DEADLINE: Duration = Duration::from_secs(120);
const CLOUD: &str = "aws";

#[test]
fn the_aws_module_chart_runs_as_one_release_on_a_real_node() {
    netns::run(|| async {
        let aws = AwsEnv::start().await.expect("moto");
        let ec2 = stratus_scenarios::ec2_fixture::client(aws.moto_endpoint()).await;
        let instance = node_instance(&ec2).await.expect("the node's instance");
        let described = ec2
            .describe_instances()
            .instance_ids(&instance)
            .send()
            .await
            .unwrap();
        let subnet = described.reservations()[0].instances()[0]
            .subnet_id()
            .unwrap()
            .to_owned();
        let names: Vec<&str> = [
            "cloud-controller-manager",
            "cloud-data-discoverer",
            "node-termination-handler",
            "module-controller",
        ]
        .into_iter()
        .chain(ebs::STRATUS_IMAGES.iter().copied())
        .collect();
        let mut images = pack::stratus_images(&names).expect("the images");
        images.extend(ebs::foreign_images());
        let cluster = stratus_testenv::node::RealCluster::start(&images)
            .await
            .expect("the real cluster");
        let client = cluster.client().await.unwrap();
        // IMDS answers, with no interruption for a day.
        let aemm = Aemm::start(&["spot", "-d", "86400"]).await.unwrap();
        let (_relay, pod_env) = pod_network_access(&aws).await.unwrap();
        let never = json!({"pullPolicy": "Never"});

        let started = tokio::time::Instant::now();
        module::install(
            &cluster,
            CLOUD,
            &json!({
                "providerClusterConfiguration": {"provider": {"region": "us-east-1"}},
                "providerDiscoveryData": {
                    "zones": [ZONE],
                    "zoneToSubnetIdMap": {ZONE: subnet},
                },
                "cloud-controller-manager": {
                    "image": never,
                    "env": env_values(&aws.env_vars()),
                    "cloudConfig": {"contents": format!("[Global]\nKubernetesClusterID = {CLUSTER_ID}\n")},
                },
                "aws-ebs-csi-driver": ebs::values(&cluster.kubelet_root(), &instance, &pod_env),
                "cloud-data-discoverer": {
                    "image": never,
                    "clusterID": CLUSTER_ID,
                    "env": env_values(&pod_env),
                },
                "aws-node-termination-handler": {
                    "image": never,
                    "instanceMetadataURL": aemm.url(),
                },
                "module-controller": {"image": never},
            }),
        )
        .expect("helm install cloud-provider-aws");
        let release = module::release(CLOUD);
        let (workloads, containers) = module::wait_all_ready(&client, &release, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        println!(
            "{{\"module_aws_ready_seconds\": {:.2}, \"module_aws_workloads\": {}, \"module_aws_containers_checked\": {containers}}}",
            started.elapsed().as_secs_f64(),
            workloads.len()
        );
        let ids: Vec<&str> = workloads.iter().map(|w| w.id.as_str()).collect();
        for expected in [
            "DaemonSet/ebs-csi-node",
            "Deployment/ebs-csi-controller",
            "Deployment/module-controller",
        ] {
            assert!(ids.contains(&expected), "{expected} in {ids:?}");
        }
        assert_eq!(workloads.len(), 6, "the release's workloads: {ids:?}");

        // The CCM initialises the kubelet's Node from the instance.
        module::wait_node_initialised(&client, &format!("aws:///{ZONE}/{instance}"), DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));

        // The module controller, one of its two replicas leading, derives the classes…
        let classes = module::storage_classes(&client, CLOUD, 3, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let names = module::names(&classes);
        assert_eq!(names, ["gp2", "gp3", "io2-fast"], "sc1 and st1 excluded");
        let defaults = module::default_names(&classes);
        assert_eq!(defaults, ["gp3"], "the cluster's default class");
        assert!(
            classes.iter().all(|c| c.provisioner == "ebs.csi.aws.com"),
            "{classes:?}"
        );
        let leases: Api<Lease> = Api::namespaced(client.clone(), module::NAMESPACE);
        let holder = leases
            .get("stratus-module-controller")
            .await
            .expect("the module controller's Lease")
            .spec
            .and_then(|s| s.holder_identity);
        assert!(holder.is_some(), "a replica leads");

        // …and the registration Secret from the provider cluster configuration.
        let registration = module::registration(&client, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(registration.get("type").map(String::as_str), Some("aws"));
        assert_eq!(
            registration.get("region").map(String::as_str),
            Some("us-east-1")
        );
        assert_eq!(
            registration.get("zones").map(String::as_str),
            Some(r#"["us-east-1a"]"#)
        );
        assert_eq!(
            registration.get("instanceClassKind").map(String::as_str),
            Some("AWSInstanceClass")
        );

        // A claim naming no class: the default gp3, provisioned by the module's driver (8 GiB:
        // EBS allows gp3 500 IOPS per GiB, and the class asks 4000).
        let token = format!("module-{}", std::process::id());
        Api::<StatefulSet>::namespaced(client.clone(), "default")
            .create(
                &PostParams::default(),
                &volumes::workload_of_the_default_class(&token, "8Gi"),
            )
            .await
            .unwrap();
        let pod = ebs::ready_workload(&client, &cluster).await;
        assert_eq!(
            volumes::log_of(&client, &pod, DEADLINE).await.unwrap(),
            format!("wrote {token}")
        );
        let (_, volume_id) = volumes::bound_volume(&client).await.unwrap();
        let found = ec2
            .describe_volumes()
            .volume_ids(&volume_id)
            .send()
            .await
            .unwrap();
        let volume = found.volumes().first().expect("the EBS volume");
        assert_eq!(volume.volume_type().map(|t| t.as_str()), Some("gp3"));
        assert_eq!(volume.size(), Some(8));
        assert_eq!(volume.iops(), Some(4000), "the class's IOPS: {volume:?}");
        let attached: Vec<_> = volume
            .attachments()
            .iter()
            .filter_map(|a| a.instance_id())
            .collect();
        assert_eq!(attached, [instance.as_str()], "attached to the node");

        // The discoverer's catalog, from the pod network.
        let catalogs = Api::<DynamicObject>::all_with(
            client.clone(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "InstanceTypesCatalog"),
                "instancetypescatalogs",
            ),
        );
        wait_for(
            "the discoverer's instance-type catalog",
            DEADLINE,
            || async { Ok(catalogs.get_opt("for-cluster-autoscaler").await?) },
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

        // A quiet IMDS: the termination handler, up all along, cordoned nothing.
        let node = Api::<Node>::all(client.clone())
            .get(NODE_NAME)
            .await
            .unwrap();
        assert_ne!(
            node.spec.and_then(|s| s.unschedulable),
            Some(true),
            "the node is not cordoned\n{}",
            pods::logs(
                &client,
                module::NAMESPACE,
                "app.kubernetes.io/name=aws-node-termination-handler"
            )
            .await
        );

        cluster.teardown().await.expect("teardown leaves nothing");
    });
}
