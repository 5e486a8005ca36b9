//! The real cluster itself: a pod on the pod network runs from an imported image on the real
//! kubelet and is reachable through its Service (kube-proxy), the namespace holds only what the
//! cluster made, and teardown leaves nothing on the host.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, PostParams};
use stratus_e2e::pods;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::{netns, RealCluster, NODE_NAME};

#[test]
fn a_pod_runs_on_the_real_node_and_teardown_leaves_nothing() {
    netns::run(|| async {
        let cluster = RealCluster::start(&[])
            .await
            .expect("start the real cluster");
        println!(
            "{{\"real_cluster_start_seconds\": {:.2}}}",
            cluster.started_in().as_secs_f64()
        );
        let client = cluster.client().await.unwrap();
        let node = Api::<Node>::all(client.clone())
            .get(NODE_NAME)
            .await
            .unwrap();
        let taints = node.spec.unwrap().taints.unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized"),
            "kubelet with --cloud-provider=external marks its Node uninitialized: {taints:?}"
        );
        let addresses = node.status.unwrap().addresses.unwrap_or_default();
        assert!(
            addresses
                .iter()
                .any(|a| a.type_ == "InternalIP" && a.address == netns::NODE_IP.to_string()),
            "{addresses:?}"
        );

        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "sleeper", "labels": {"app": "sleeper"}},
            "spec": {
                "tolerations": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "operator": "Exists"}],
                "containers": [{
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10.1",
                    "imagePullPolicy": "Never",
                    "securityContext": {"readOnlyRootFilesystem": true, "runAsNonRoot": true, "allowPrivilegeEscalation": false}
                }]
            }
        }))
        .unwrap();
        Api::<Pod>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        let running = pods::wait_ready(
            &client,
            "default",
            "app=sleeper",
            1,
            Duration::from_secs(60),
        )
        .await
        .expect("the pod runs");
        let ip = running[0].status.as_ref().unwrap().pod_ip.clone().unwrap();
        assert!(ip.starts_with("10.244.0."), "a pod-network address: {ip}");

        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "sleeper"},
            "spec": {"selector": {"app": "sleeper"}, "ports": [{"port": 80}]}
        }))
        .unwrap();
        let service = Api::<Service>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        let cluster_ip = service.spec.unwrap().cluster_ip.unwrap();
        let rule = format!("-d {cluster_ip}/32");
        wait_for(
            "kube-proxy's rules for the Service",
            Duration::from_secs(30),
            || {
                let (rule, ip) = (rule.clone(), ip.clone());
                async move {
                    // This network namespace's rules: kube-proxy's never reach the host's.
                    let rules = std::process::Command::new("iptables-save").output()?;
                    let rules = String::from_utf8_lossy(&rules.stdout);
                    Ok((rules.contains(&rule) && rules.contains(&ip)).then_some(()))
                }
            },
        )
        .await
        .unwrap();

        let interfaces = netns::interfaces().unwrap();
        assert!(
            interfaces.iter().all(|i| i == "lo"
                || i == netns::NODE_INTERFACE
                || i == "cni0"
                || i.starts_with("veth")),
            "only the namespace's own interfaces: {interfaces:?}"
        );
        cluster.teardown().await.expect("teardown leaves nothing");
    });
}
