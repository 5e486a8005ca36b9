//! Network-topology labels (`topology.k8s.aws/network-node-layer-N`) from DescribeInstanceTopology,
//! which the AWS proxy answers (moto lacks it): supported instance types get them in batched
//! calls; other types get none, and a type EC2 has no topology for is not asked about again
//! (counted at the proxy).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{setup, WAIT, ZONE};
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, label, UNINITIALIZED};
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::aws::proxy::topology::network_nodes;

const LAYER: &str = "topology.k8s.aws/network-node-layer-";

async fn launch(s: &common::Setup, n: i32, instance_type: &str) -> Vec<String> {
    let launched = ec2_fixture::launch(
        &s.ec2,
        &s.subnet,
        ZONE,
        n,
        Some(&s.cluster_id),
        instance_type,
    )
    .await
    .unwrap();
    let mut ids = Vec::new();
    for i in launched {
        kube_fixture::create_uninitialized_node(&s.admin, &i.id, &[], BTreeMap::new())
            .await
            .unwrap();
        ids.push(i.id);
    }
    ids
}

async fn initialised(s: &common::Setup, id: &str) -> k8s_openapi::api::core::v1::Node {
    wait_for(&format!("{id} initialised"), WAIT, || async {
        Ok(get_node(&s.admin, id)
            .await?
            .filter(|n| !has_taint(n, UNINITIALIZED)))
    })
    .await
    .unwrap()
}

fn layers(node: &k8s_openapi::api::core::v1::Node) -> Vec<String> {
    (1..=5)
        .map_while(|l| label(node, &format!("{LAYER}{l}")).map(str::to_string))
        .collect()
}

async fn topology_calls(s: &common::Setup) -> u64 {
    s.env
        .aws_request_counts()
        .await
        .unwrap()
        .get("ec2:DescribeInstanceTopology")
        .copied()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supported_types_get_network_node_labels_and_others_cost_no_repeated_call() {
    let s = setup("topology", true).await;
    let p4d = launch(&s, 4, "p4d.24xlarge").await;
    // Matches the supported-type pattern, but EC2 describes no topology for it.
    let p3 = launch(&s, 1, "p3.2xlarge").await;
    // Does not match the pattern: never asked about.
    let m5 = launch(&s, 1, "m5.large").await;
    let ccm = s.start_ccm(&[
        "--controllers=cloud-node",
        "--concurrent-node-syncs=8",
        "--node-status-update-frequency=1s",
    ]);
    for id in &p4d {
        let node = initialised(&s, id).await;
        assert_eq!(
            layers(&node),
            network_nodes(ZONE, id, 3),
            "{id}\n{}",
            ccm.log()
        );
    }
    for id in p3.iter().chain(&m5) {
        let node = initialised(&s, id).await;
        assert!(layers(&node).is_empty(), "{id}: {node:?}");
        assert!(label(&node, "topology.k8s.aws/zone-id").is_some());
    }
    let first = topology_calls(&s).await;
    assert!(
        (1..=2).contains(&first),
        "five nodes of pattern types initialised at once: one or two batched calls, got {first}\n{}",
        ccm.log()
    );

    // More nodes of the other types join, and every node's addresses are refreshed each second
    // (each refresh reads the instance metadata again): no further call.
    let later: Vec<String> = [
        launch(&s, 1, "p3.2xlarge").await,
        launch(&s, 1, "m5.large").await,
    ]
    .concat();
    for id in &later {
        let node = initialised(&s, id).await;
        assert!(layers(&node).is_empty(), "{id}");
    }
    // A few address-refresh rounds: the measurement window itself.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        topology_calls(&s).await,
        first,
        "unsupported types and known answers are not asked again\n{}",
        ccm.log()
    );

    // A supported node joining later costs one call.
    let more = launch(&s, 1, "p4d.24xlarge").await;
    let node = initialised(&s, &more[0]).await;
    assert_eq!(layers(&node), network_nodes(ZONE, &more[0], 3));
    assert_eq!(topology_calls(&s).await, first + 1);
}
