//! The AWS end-to-end suite on a real node: every component installed with its chart from an
//! image of this build, nothing started by hand. moto holds the node's instance (its private
//! address is the node IP).
//!
//! - the cloud-controller-manager chart: the CCM pod runs as the chart says (non-root,
//!   read-only root file system, probes passing) and initialises the kubelet-registered Node;
//!   a LoadBalancer Service gets a classic ELB whose instance is the node;
//! - the cloud-data-discoverer chart: its pod (on the pod network, AWS through a relay on the
//!   node IP) writes the instance-type catalog and the cloud conditions.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use stratus_e2e::aws::{env_values, node_instance, CLUSTER_ID, ZONE};
use stratus_e2e::{chart, pods};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::forward::NodeForward;
use stratus_testenv::node::{images, netns, RealCluster, NODE_NAME};
use stratus_testenv::AwsEnv;

const DISCOVERER: &str = "app.kubernetes.io/instance=cdd";
const CCM: &str = "app.kubernetes.io/name=aws-cloud-controller-manager";
const POD_DEADLINE: Duration = Duration::from_secs(90);

#[test]
fn aws_module_components_run_as_pods_on_a_real_node() {
    netns::run(|| async {
        let aws = AwsEnv::start().await.expect("moto");
        let ec2 = stratus_scenarios::ec2_fixture::client(aws.moto_endpoint()).await;
        let instance = node_instance(&ec2).await.expect("the node's instance");
        let out = tempdir();
        let images: Vec<_> = ["cloud-controller-manager", "cloud-data-discoverer"]
            .into_iter()
            .map(|name| images::stratus(name, &out).unwrap())
            .collect();
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
        pods::wait_ready(&client, "kube-system", CCM, 1, POD_DEADLINE)
            .await
            .expect("the CCM pod runs");
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
        let relay = NodeForward::start(
            aws.aws_endpoint()
                .trim_start_matches("http://")
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
        let pod_env: Vec<(String, String)> = aws
            .env_vars()
            .into_iter()
            .map(|(k, v)| {
                if k == "AWS_ENDPOINT_URL" {
                    (k, relay.http_url())
                } else {
                    (k, v)
                }
            })
            .collect();
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
        let conditions = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
            .get_opt("d8-cloud-provider-conditions")
            .await
            .unwrap();
        assert!(conditions.is_some(), "the discoverer writes its conditions");

        cluster.teardown().await.expect("teardown leaves nothing");
    });
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stratus-e2e-images-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
