//! Queue mode end to end, following upstream's e2e scenario list: the shipped binary under its
//! ServiceAccount, moto behind the counting proxy (EC2 instances, an SQS queue fed by an
//! EventBridge rule; lifecycle hooks filled in by the proxy), the real apiserver.

mod common;

use std::time::Duration;

use common::*;
use stratus_scenarios::ec2_fixture;
use stratus_scenarios::nth_fixture::{
    aws_config, create_node, create_pod, set_ready, tag_instances, EventQueue, KubeletSim,
    NthCluster, PodOptions,
};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::aws::lifecycle::Notify;
use stratus_testenv::{Fault, FaultKind};

const MANAGED: &str = "aws-node-termination-handler/managed";

fn pod() -> PodOptions {
    PodOptions {
        owner_kind: Some("ReplicaSet"),
        grace_seconds: Some(1),
        ..PodOptions::default()
    }
}

/// Spot interruption, rebalance recommendation, EC2 state change, AWS Health scheduled change,
/// ASG terminate (with heartbeats while a slow pod drains, completion after it is gone) and
/// launch hooks, an instance of another cluster, an instance that never joined, and an SQS
/// outage that the handler rides out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_scenarios() {
    let cluster = NthCluster::start().await.expect("cluster");
    let admin = &cluster.admin;
    let _kubelet = KubeletSim::start(admin.clone());
    let endpoint = cluster.env.aws_endpoint().to_owned();
    let conf = aws_config(&endpoint).await;
    let ec2 = ec2_fixture::client(&endpoint).await;
    let subnet = ec2_fixture::subnet(&ec2, "us-east-1a").await.unwrap();
    let all = ec2_fixture::launch(&ec2, &subnet, "us-east-1a", 9, None, "m5.large")
        .await
        .unwrap();
    let [spot, rebalance, state, health, term, launch, unmanaged, never_joined, late] =
        <[_; 9]>::try_from(all.clone()).unwrap();
    let managed: Vec<String> = all
        .iter()
        .filter(|i| i.id != unmanaged.id)
        .map(|i| i.id.clone())
        .collect();
    tag_instances(&ec2, &managed, MANAGED, "").await.unwrap();
    for i in [
        &spot, &rebalance, &state, &health, &term, &launch, &unmanaged, &late,
    ] {
        create_node(
            admin,
            &i.private_dns,
            &format!("aws:///{}/{}", i.zone, i.id),
        )
        .await
        .unwrap();
        create_pod(
            admin,
            "default",
            &format!("{}-web", i.id),
            &i.private_dns,
            &pod(),
        )
        .await
        .unwrap();
    }
    // The terminating instance runs a pod that takes 35 s to stop: heartbeats keep the hook.
    let slow = PodOptions {
        grace_seconds: Some(60),
        stop_seconds: Some(35),
        ..pod()
    };
    create_pod(admin, "default", "slow", &term.private_dns, &slow)
        .await
        .unwrap();
    set_ready(admin, &launch.private_dns, false).await.unwrap();

    let queue = EventQueue::create(&conf, "nth-events").await.unwrap();
    let metrics_port = free_port();
    let vars = vec![
        ("ENABLE_SQS_TERMINATION_DRAINING", "true".to_owned()),
        ("QUEUE_URL", queue.url.clone()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ENDPOINT", endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ("NAMESPACE", "kube-system".into()),
        ("POD_NAME", "aws-node-termination-handler-q".into()),
        ("EMIT_KUBERNETES_EVENTS", "true".into()),
        ("ENABLE_PROMETHEUS_SERVER", "true".into()),
        ("PROMETHEUS_SERVER_PORT", metrics_port.to_string()),
        ("HEARTBEAT_INTERVAL", "30".into()),
        ("SQS_MSG_VISIBILITY_TIMEOUT_SEC", "2".into()),
        ("TAINT_NODE", "true".into()),
    ];
    let mut nth = start(&cluster, "queue", &vars);

    let detail =
        |id: &str| serde_json::json!({ "instance-id": id, "instance-action": "terminate" });
    queue
        .put(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            detail(&spot.id),
        )
        .await
        .unwrap();
    queue
        .put(
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            detail(&rebalance.id),
        )
        .await
        .unwrap();
    queue
        .put(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            serde_json::json!({ "instance-id": state.id, "state": "stopping" }),
        )
        .await
        .unwrap();
    queue
        .put(
            "aws.health",
            "AWS Health Event",
            serde_json::json!({
                "service": "EC2", "eventTypeCategory": "scheduledChange",
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "affectedEntities": [{ "entityValue": health.id }],
            }),
        )
        .await
        .unwrap();
    queue
        .put(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            detail(&unmanaged.id),
        )
        .await
        .unwrap();
    let proxy = cluster.env.proxy_control();
    let notify = |instance: &str, transition: &str| Notify {
        group: "workers".into(),
        hook: "nth-hook".into(),
        instance_id: instance.to_owned(),
        transition: transition.into(),
    };
    let term_token = proxy
        .lifecycle_notify(&notify(&term.id, "terminate"))
        .await
        .unwrap();
    let never_token = proxy
        .lifecycle_notify(&notify(&never_joined.id, "terminate"))
        .await
        .unwrap();
    let launch_token = proxy
        .lifecycle_notify(&notify(&launch.id, "launch"))
        .await
        .unwrap();

    // Every interrupted node is cordoned and drained.
    for i in [&spot, &rebalance, &state, &health] {
        wait_cordoned(admin, &i.private_dns, &nth).await;
        wait_pods(admin, &i.private_dns, &[], &nth).await;
    }
    let (_, annotations) = wait_event(admin, "default", &spot.private_dns, "SQSTermination").await;
    assert_eq!(
        annotations.get("instance-id"),
        Some(&spot.id),
        "{annotations:?}"
    );
    assert!(taint(
        &node(admin, &spot.private_dns).await,
        stratus_termination::node::SPOT_ITN_TAINT
    )
    .is_some());

    // A never-joined instance's hook is completed at once.
    let completed = |token: String| async move {
        wait_for(
            &format!("CompleteLifecycleAction for {token}"),
            Duration::from_secs(60),
            || async {
                Ok(proxy.lifecycle_calls().await?.into_iter().find(|c| {
                    c.action == "CompleteLifecycleAction" && c.token == token && c.accepted
                }))
            },
        )
        .await
    };
    let call = completed(never_token).await.unwrap();
    assert_eq!(call.result, "CONTINUE");

    // The launch hook waits for the node to be Ready.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !proxy
            .lifecycle_calls()
            .await
            .unwrap()
            .iter()
            .any(|c| c.token == launch_token),
        "completed before the node was Ready"
    );
    set_ready(admin, &launch.private_dns, true).await.unwrap();
    completed(launch_token).await.unwrap();

    // The terminating node: cordoned, drained while heartbeats keep the hook, completed after.
    wait_cordoned(admin, &term.private_dns, &nth).await;
    let call = completed(term_token.clone()).await.unwrap();
    assert!(
        pods_on(admin, &term.private_dns).await.is_empty(),
        "completed before the drain ended"
    );
    let heartbeats: Vec<_> = proxy
        .lifecycle_calls()
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.action == "RecordLifecycleActionHeartbeat" && c.token == term_token)
        .collect();
    assert!(
        !heartbeats.is_empty(),
        "no heartbeat during a 35 s drain:\n{}",
        nth.log()
    );
    assert!(heartbeats.iter().all(|h| h.at_ms < call.at_ms));

    // The other cluster's instance: untouched, its message dropped.
    assert!(!unschedulable(&node(admin, &unmanaged.private_dns).await));
    wait_for("the queue to be empty", WAIT, || async {
        Ok((queue.depth().await? == 0).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", nth.log()));

    // Instances are looked up in batches, not one call per message.
    let counts = cluster.env.aws_request_counts().await.unwrap();
    let describes = counts.get("ec2:DescribeInstances").copied().unwrap_or(0);
    assert!(
        describes <= 4,
        "{describes} DescribeInstances for 8 messages: {counts:?}"
    );

    // SQS unreachable for a while: errors are counted and retried, the process stays up.
    cluster
        .env
        .set_aws_faults(&[Fault {
            service: Some("sqs".into()),
            action: None,
            kind: FaultKind::ServerError { status: 503 },
            rate: 1.0,
        }])
        .await
        .unwrap();
    let url = format!("http://127.0.0.1:{metrics_port}/metrics");
    wait_for("SQS errors to be counted", WAIT, || async {
        let text = http_get(&url).await?;
        Ok(text
            .contains(r#"events_error_total{event_error_where="SQS_MONITOR"}"#)
            .then_some(()))
    })
    .await
    .unwrap();
    cluster.env.set_aws_faults(&[]).await.unwrap();
    assert!(
        nth.try_exit().is_none(),
        "the handler exited:\n{}",
        nth.log()
    );
    queue
        .put(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            detail(&late.id),
        )
        .await
        .unwrap();
    wait_cordoned(admin, &late.private_dns, &nth).await;
    let text = http_get(&url).await.unwrap();
    assert!(
        text.contains(
            "stratus_cloud_api_requests_total{cloud=\"aws\",service=\"sqs\",operation=\"ReceiveMessage\"}"
        ),
        "{text}"
    );
}
