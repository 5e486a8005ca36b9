//! The cloud-controller-manager's pod, checked the same way in every cloud's suite: Running and
//! Ready, its probes passing by the kubelet's own counters, and its process (on the host network)
//! as restricted as the chart's defaults say — uid 65532, read-only root, no new privileges, no
//! capabilities — read from `/proc`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use stratus_testenv::node::NODE_NAME;

use crate::{pods, probes, runtime};

/// The chart's container name.
pub const CONTAINER: &str = "cloud-controller-manager";

/// Waits for the CCM pod matching `selector` in kube-system and checks it runs as its chart
/// says; returns the pod.
pub async fn runs_as_its_chart_says(
    client: &kube::Client,
    selector: &str,
    deadline: Duration,
) -> Pod {
    let mut ccm_pods = pods::wait_ready(client, "kube-system", selector, 1, deadline)
        .await
        .expect("the CCM pod runs");
    let pod = ccm_pods.remove(0);
    let name = pod.metadata.name.clone().unwrap_or_default();
    probes::wait_passing(client, NODE_NAME, &name, CONTAINER, deadline)
        .await
        .expect("the CCM's probes pass");
    let expected = runtime::Expected::of(&pod, CONTAINER).unwrap();
    assert_eq!(
        expected,
        runtime::Expected {
            user: runtime::User::Exactly(65532),
            read_only_root: true,
            no_new_privs: true,
            no_capabilities: true,
        },
        "the chart's defaults restrict the CCM"
    );
    let process = runtime::host_network_process("cloud-controller-manager")
        .expect("the CCM's process on the node");
    assert_eq!(
        process.problems(&expected),
        Vec::<String>::new(),
        "the CCM runs as the chart says: {process:?}"
    );
    pod
}
