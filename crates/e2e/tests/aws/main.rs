//! The AWS end-to-end suite on a real node: every component installed with its chart from an
//! image of this build, nothing started by hand. moto holds the node's instance (its private
//! address is the node IP).
//!
//! - the cloud-controller-manager chart: the CCM pod runs as the chart says (non-root,
//!   read-only root file system, no capabilities, probes passing by the kubelet's counters) and initialises the kubelet-registered Node;
//!   a LoadBalancer Service gets a classic ELB whose instance is the node;
//! - the cloud-data-discoverer chart: its pod (on the pod network, AWS through a relay on the
//!   node IP) writes the instance-type catalog (AWS has no discovery-data Secret);
//! - the EBS CSI driver chart (`aws/ebs.rs`): a StatefulSet's claim provisioned, attached and
//!   staged on a loop device, its data surviving the pod's deletion;
//! - the aws-load-balancer-controller chart (`aws/alb.rs`): its webhook injects readiness gates
//!   into real pods and a rollout waits for the targets' health;
//! - the node-termination-handler chart in IMDS mode (amazon-ec2-metadata-mock announcing a
//!   Spot interruption): the node is cordoned and drained, a PodDisruptionBudget honoured.
//!
//! A second test (`aws/module.rs`) installs the same charts as one release, the module chart
//! `cloud-provider-aws`, with its module controller.

mod alb;

mod ebs;

mod module;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;
use stratus_e2e::aws::{env_values, node_instance, pod_network_access, CLUSTER_ID, ZONE};
use stratus_e2e::{ccm, chart, pack, pods};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::{netns, RealCluster, NODE_NAME};
use stratus_testenv::tools::ec2_metadata_mock::Aemm;
use stratus_testenv::AwsEnv;

const DISCOVERER: &str = "app.kubernetes.io/instance=cdd";
const NTH: &str = "app.kubernetes.io/instance=nth";
const CCM: &str = "app.kubernetes.io/name=aws-cloud-controller-manager";
const POD_DEADLINE: Duration = Duration::from_secs(90);

#[test]
fn aws_module_components_run_as_pods_on_a_real_node() {
    netns::run(|| async {
        let aws = AwsEnv::start().await.expect("moto");
        let ec2 = stratus_scenarios::ec2_fixture::client(aws.moto_endpoint()).await;
        let instance = node_instance(&ec2).await.expect("the node's instance");
        // The archives (packed, or from the machine's image cache) are imported by the cluster's
        // start.
        let names: Vec<&str> = ["cloud-controller-manager", "cloud-data-discoverer"]
            .into_iter()
            .chain(["node-termination-handler"])
            .chain(ebs::STRATUS_IMAGES.iter().copied())
            .chain(alb::STRATUS_IMAGES.iter().copied())
            .collect();
        let mut images = pack::stratus_images(&names).expect("the images of this build");
        images.extend(ebs::foreign_images());
        let cluster = RealCluster::start(&images).await.expect("the real cluster");
        println!(
            "{{\"real_cluster_start_seconds\": {:.2}}}",
            cluster.started_in().as_secs_f64()
        );
        let client = cluster.client().await.unwrap();

        // The CCM, from its chart and image.
        chart::install_with(
            &cluster,
            "cloud-controller-manager",
            "ccm",
            "kube-system",
            &json!({
                "image": {"pullPolicy": "Never"},
                "env": env_values(&aws.env_vars()),
                "cloudConfig": {"contents": format!("[Global]\nKubernetesClusterID = {CLUSTER_ID}\n")},
            }),
        )
        .expect("helm install the CCM chart");
        ccm::runs_as_its_chart_says(&client, CCM, POD_DEADLINE).await;
        let nodes: Api<Node> = Api::all(client.clone());
        let provider_id = format!("aws:///{ZONE}/{instance}");
        let node = wait_for("the CCM to initialise the Node", POD_DEADLINE, || {
            let nodes = nodes.clone();
            let provider_id = provider_id.clone();
            async move {
                let node = nodes.get(NODE_NAME).await?;
                let initialised = node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
                    == Some(provider_id.as_str())
                    && !node
                        .spec
                        .as_ref()
                        .and_then(|s| s.taints.as_ref())
                        .into_iter()
                        .flatten()
                        .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized");
                Ok(initialised.then_some(node))
            }
        })
        .await
        .expect("the CCM initialises the Node");
        let labels = node.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get("topology.kubernetes.io/zone")
                .map(String::as_str),
            Some(ZONE)
        );
        assert_eq!(
            labels
                .get("node.kubernetes.io/instance-type")
                .map(String::as_str),
            Some("m5.large")
        );

        // A LoadBalancer Service: a classic ELB with the node's instance behind it.
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
        }))
        .unwrap();
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        services
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        let hostname = match wait_for("the Service's load balancer", POD_DEADLINE, || {
            let services = services.clone();
            async move {
                let service = services.get("web").await?;
                Ok(service
                    .status
                    .and_then(|s| s.load_balancer)
                    .and_then(|lb| lb.ingress)
                    .and_then(|i| i.into_iter().next())
                    .and_then(|i| i.hostname))
            }
        })
        .await
        {
            Ok(hostname) => hostname,
            Err(e) => panic!(
                "{e:#}\n{}\n{}",
                pods::logs(&client, "kube-system", CCM).await,
                pods::recent_events(&client, "default").await
            ),
        };
        let elb = stratus_scenarios::lb_fixture::LbClients::new(aws.moto_endpoint())
            .await
            .elb;
        let described = elb.describe_load_balancers().send().await.unwrap();
        let balancer = described
            .load_balancer_descriptions()
            .iter()
            .find(|lb| lb.dns_name() == Some(hostname.as_str()))
            .expect("the ELB named in the Service's status");
        let members: Vec<&str> = balancer
            .instances()
            .iter()
            .filter_map(|i| i.instance_id())
            .collect();
        assert_eq!(
            members,
            vec![instance.as_str()],
            "the node is the ELB's instance"
        );

        // The cloud-data-discoverer, on the pod network: AWS through a relay on the node IP.
        let (_relay, pod_env) = pod_network_access(&aws).await.unwrap();
        chart::install_with(
            &cluster,
            "cloud-data-discoverer",
            "cdd",
            "kube-system",
            &json!({
                "image": {"pullPolicy": "Never"},
                "cloudProvider": "aws",
                "clusterID": CLUSTER_ID,
                "env": env_values(&pod_env),
            }),
        )
        .expect("helm install the discoverer chart");
        pods::wait_ready(&client, "kube-system", DISCOVERER, 1, POD_DEADLINE)
            .await
            .expect("the discoverer pod runs");
        let catalogs = Api::<DynamicObject>::all_with(
            client.clone(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "InstanceTypesCatalog"),
                "instancetypescatalogs",
            ),
        );
        let catalog = match wait_for(
            "the discoverer's instance-type catalog",
            POD_DEADLINE,
            || {
                let catalogs = catalogs.clone();
                async move { Ok(catalogs.get_opt("for-cluster-autoscaler").await?) }
            },
        )
        .await
        {
            Ok(catalog) => catalog,
            Err(e) => panic!(
                "{e:#}\n{}",
                pods::logs(&client, "kube-system", DISCOVERER).await
            ),
        };
        let types = catalog.data["instanceTypes"].as_array().map_or(0, Vec::len);
        assert!(
            types > 0,
            "the catalog lists moto's instance types: {:?}",
            catalog.data
        );

        ebs::volume_keeps_data_across_pods(&cluster, &aws, &ec2, &instance).await;
        alb::readiness_gates_hold_a_rollout_until_targets_are_healthy(
            &cluster, &aws, &ec2, &instance,
        )
        .await;

        spot_interruption_drains_within_the_budget(&cluster, &client).await;

        cluster.teardown().await.expect("teardown leaves nothing");
    });
}

/// The termination handler's chart in IMDS mode, AEMM announcing a Spot interruption: the node
/// is cordoned and its pods evicted, but a PodDisruptionBudget of one unavailable pod keeps the
/// second replica running (its replacement cannot schedule on the cordoned node).
async fn spot_interruption_drains_within_the_budget(cluster: &RealCluster, client: &kube::Client) {
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1", "imagePullPolicy": "Never"}]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    pods::wait_ready(client, "default", "app=web", 2, POD_DEADLINE)
        .await
        .expect("two web pods");

    let in_two_minutes = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(120))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let aemm = Aemm::start(&["spot", "-t", &in_two_minutes]).await.unwrap();
    chart::install_with(
        cluster,
        "node-termination-handler",
        "nth",
        "kube-system",
        &json!({
            "image": {"pullPolicy": "Never"},
            "instanceMetadataURL": aemm.url(),
        }),
    )
    .expect("helm install the termination handler chart");
    pods::wait_ready(client, "kube-system", NTH, 1, POD_DEADLINE)
        .await
        .expect("the termination handler pod runs");

    let nodes: Api<Node> = Api::all(client.clone());
    let web_pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let drained = wait_for("a drain stopped by the budget", POD_DEADLINE, || {
        let (nodes, web_pods) = (nodes.clone(), web_pods.clone());
        async move {
            let node = nodes.get(NODE_NAME).await?;
            let cordoned = node.spec.and_then(|s| s.unschedulable) == Some(true);
            let list = web_pods
                .list(&ListParams::default().labels("app=web"))
                .await?;
            let running = list
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && pods::is_ready(p))
                .count();
            let pending = list
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
                .count();
            Ok((cordoned && running == 1 && pending >= 1).then_some(()))
        }
    })
    .await;
    if let Err(e) = drained {
        panic!(
            "{e:#}\n{}\nAEMM: {}",
            pods::logs(client, "kube-system", NTH).await,
            aemm.log()
        );
    }
    // The handler kept asking: the apiserver refused its evictions of the last replica for the
    // budget (429), as the audit log of the apiserver records.
    let refused = wait_for("evictions refused for the budget", POD_DEADLINE, || async {
        Ok((refused_evictions(cluster)? > 0).then_some(()))
    })
    .await;
    if let Err(e) = refused {
        panic!("{e:#}\n{}", pods::logs(client, "kube-system", NTH).await);
    }
}

/// Evictions the termination handler asked for and the apiserver refused with 429.
fn refused_evictions(cluster: &RealCluster) -> anyhow::Result<usize> {
    let log = std::fs::read_to_string(cluster.audit_log())?;
    Ok(log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| {
            event["objectRef"]["subresource"] == "eviction"
                && event["responseStatus"]["code"] == 429
                && event["user"]["username"]
                    .as_str()
                    .is_some_and(|u| u.contains("node-termination-handler"))
        })
        .count())
}
