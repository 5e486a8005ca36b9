//! The OpenStack module as one release on the real node: `helm install cloud-provider-openstack`
//! with the shipped example values (pointed at Keystone, the simulators and the node) installs
//! the CCM, the Cinder CSI plugin, the cloud-data-discoverer and the module controller at once,
//! each from an image of this build. Every workload of the release comes up; the CCM initialises
//! the Node; the discoverer, on the pod network, writes the cloud's volume types into the
//! discovery data; the module controller, as a pod, turns them into StorageClasses (the
//! example's settings applied) and writes the registration Secret; a claim naming no class gets
//! a Cinder volume attached to the node's server from the module's own plugin.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, PostParams};
use serde_json::json;
use stratus_e2e::openstack::{ccm_values, cloud_conf, node_server};
use stratus_e2e::{module, volumes};
use stratus_testenv::node::{images, netns, RealCluster};
use stratus_testenv::{OpenStackCredentials, OpenStackEnv};

use crate::cinder;

const DEADLINE: Duration = Duration::from_secs(120);
const CLOUD: &str = "openstack";

#[test]
fn the_openstack_module_chart_runs_as_one_release_on_a_real_node() {
    netns::run(|| async {
        let cloud = OpenStackEnv::start()
            .await
            .expect("Keystone and the simulators");
        let sim = cloud.sim().expect("in-process simulators").clone();
        let server = node_server(&sim).expect("the node's server");
        let conf = cloud_conf(&cloud, &sim, &server).expect("the CCM's cloud.conf");
        let mut images: Vec<_> = ["cloud-controller-manager", "cloud-data-discoverer"]
            .into_iter()
            .chain(["module-controller"])
            .map(|name| images::stratus(name).unwrap())
            .collect();
        images.extend(cinder::images());
        let cluster = RealCluster::start(&images).await.expect("the real cluster");
        let client = cluster.client().await.unwrap();
        // The plugin's controller and the discoverer run on the pod network: the relay.
        let relay = cinder::pod_network_access(&client, &cloud).await;
        let through_relay = OpenStackCredentials {
            auth_url: format!("{}/identity/v3", relay.http_url()),
            interface: "internal".to_owned(),
            ..cloud.credentials().clone()
        };
        let discoverer_env: Vec<_> = through_relay
            .env_vars()
            .into_iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        let never = json!({"pullPolicy": "Never"});

        let started = tokio::time::Instant::now();
        module::install(
            &cluster,
            CLOUD,
            &json!({
                "cloud-controller-manager": ccm_values(&conf),
                "cinder-csi-plugin": cinder::values(&cluster.kubelet_root(), &server.id),
                "cloud-data-discoverer": {"image": never, "env": discoverer_env},
                "module-controller": {"image": never},
            }),
        )
        .expect("helm install cloud-provider-openstack");
        let release = module::release(CLOUD);
        let (workloads, containers) = module::wait_all_ready(&client, &release, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        println!(
            "{{\"module_openstack_ready_seconds\": {:.2}, \"module_openstack_workloads\": {}, \"module_openstack_containers_checked\": {containers}}}",
            started.elapsed().as_secs_f64(),
            workloads.len()
        );
        let ids: Vec<&str> = workloads.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(workloads.len(), 5, "the release's workloads: {ids:?}");

        // The CCM initialises the kubelet's Node from the server.
        module::wait_node_initialised(&client, &format!("openstack:///{}", server.id), DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));

        // The discoverer's volume types, turned into classes by the module controller.
        let classes = module::storage_classes(&client, CLOUD, 3, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let names = module::names(&classes);
        assert_eq!(names, ["default", "multiattach", "ssd"], "{classes:?}");
        let defaults = module::default_names(&classes);
        assert_eq!(defaults, ["default"], "the cloud's default type");
        assert!(
            classes
                .iter()
                .all(|c| c.provisioner == "cinder.csi.openstack.org"
                    && c.allow_volume_expansion == Some(true)),
            "supportsOnlineDiskResize: {classes:?}"
        );
        let registration = module::registration(&client, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(
            registration.get("type").map(String::as_str),
            Some("openstack")
        );
        assert_eq!(
            registration.get("instanceClassKind").map(String::as_str),
            Some("OpenStackInstanceClass")
        );

        // A claim naming no class: a Cinder volume from the module's plugin, on the server.
        let token = format!("module-{}", std::process::id());
        Api::<StatefulSet>::namespaced(client.clone(), "default")
            .create(
                &PostParams::default(),
                &volumes::workload_of_the_default_class(&token, "1Gi"),
            )
            .await
            .unwrap();
        let pod = cinder::ready_workload(&client, &cluster).await;
        assert_eq!(
            volumes::log_of(&client, &pod, DEADLINE).await.unwrap(),
            format!("wrote {token}")
        );
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
        let volume_id = cinder::volume_of(&client, &claims).await;
        let volume = sim
            .volumes()
            .into_iter()
            .find(|v| v["id"] == volume_id.as_str())
            .expect("the Cinder volume");
        assert_eq!(volume["status"], "in-use", "{volume}");
        assert_eq!(
            cinder::attached_servers(&volume),
            [server.id.as_str()],
            "attached to the node's server: {volume}"
        );
        drop(relay);

        cluster.teardown().await.expect("teardown leaves nothing");
    });
}
