//! TargetGroupBinding end to end: the binary under the shipped RBAC against a real apiserver and
//! moto behind the counting proxy — diff-only, batched registration as endpoints scale, clean
//! deregistration on delete, no duplicates after a SIGKILL mid-registration, Warning Events for
//! bad bindings (and bindings by `spec.targetGroupName`), and instance mode on NodePorts.

mod common;

use std::collections::BTreeMap;

use common::{setup, NS, WAIT};
use kube::api::{Api, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_scenarios::service_fixture::events_about;
use stratus_scenarios::wait_for;
use stratus_testenv::Hold;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_targets_follow_endpoints_by_difference_only() {
    let t = setup().await;
    let arn = t.target_group("web-tg", "ip", 8080).await;
    t.service("web", false).await;
    let three = t.endpoints("web", 3).await;
    let albc = t.start(&[]);
    t.binding("web", "web", &arn, Some("ip")).await;
    t.wait_targets(&arn, &three).await;

    // 3 → 10: one RegisterTargets with the 7 new pods, nothing read again, nothing removed.
    t.env.reset_aws_request_counts().await.unwrap();
    let ten = t.endpoints("web", 10).await;
    t.wait_targets(&arn, &ten).await;
    let counts = t.elbv2_counts().await;
    assert_eq!(
        counts,
        BTreeMap::from([("RegisterTargets".to_string(), 1)]),
        "log:\n{}",
        albc.log()
    );

    // 10 → 2: one DeregisterTargets with the 8 gone pods.
    t.env.reset_aws_request_counts().await.unwrap();
    let two = t.endpoints("web", 2).await;
    t.wait_targets(&arn, &two).await;
    assert_eq!(
        t.elbv2_counts().await,
        BTreeMap::from([("DeregisterTargets".to_string(), 1)])
    );
    assert!(two.iter().all(|x| ten.contains(x)));

    // The binding carries the finalizer and its observed generation.
    let tgb = kube::Api::<stratus_albc::crd::TargetGroupBinding>::namespaced(t.admin.clone(), NS)
        .get("web")
        .await
        .unwrap();
    assert!(tgb
        .metadata
        .finalizers
        .unwrap_or_default()
        .contains(&stratus_albc::crd::TGB_FINALIZER.to_string()));
    assert_eq!(
        tgb.status.and_then(|s| s.observed_generation),
        tgb.metadata.generation
    );

    // Delete: every target deregistered, then the finalizer released.
    t.delete_binding("web").await;
    assert_eq!(t.targets(&arn).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_registration_leaves_no_duplicate_and_no_leak() {
    let t = setup().await;
    let arn = t.target_group("crash-tg", "ip", 8080).await;
    t.service("crash", false).await;
    let five = t.endpoints("crash", 5).await;
    // moto registers, the answer never reaches the controller.
    t.env
        .hold_aws_requests(&[Hold {
            action: "RegisterTargets".into(),
            after_forward: true,
        }])
        .await
        .unwrap();
    let mut first = t.start(&[]);
    t.binding("crash", "crash", &arn, None).await;
    wait_for("RegisterTargets sent", WAIT, || async {
        Ok(t.elbv2_counts()
            .await
            .get("RegisterTargets")
            .is_some_and(|n| *n >= 1)
            .then_some(()))
    })
    .await
    .unwrap();
    first.kill();
    t.env.hold_aws_requests(&[]).await.unwrap();
    t.env.release_held_aws_requests().await.unwrap();
    t.env.reset_aws_request_counts().await.unwrap();

    let second = t.start(&[]);
    // The successor reads what is registered and finds nothing to add.
    wait_for("successor synced", WAIT, || async {
        Ok(t.elbv2_counts()
            .await
            .contains_key("DescribeTargetHealth")
            .then_some(()))
    })
    .await
    .unwrap();
    t.wait_targets(&arn, &five).await;
    // Scale once more so the successor provably acted after its read.
    let six = t.endpoints("crash", 6).await;
    t.wait_targets(&arn, &six).await;
    let counts = t.elbv2_counts().await;
    assert_eq!(
        counts.get("RegisterTargets"),
        Some(&1),
        "{counts:?}\n{}",
        second.log()
    );
    assert_eq!(t.targets(&arn).await.len(), 6, "no duplicates");

    t.delete_binding("crash").await;
    assert_eq!(t.targets(&arn).await, Vec::<String>::new(), "no leak");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bindings_get_warnings_and_change_nothing() {
    let t = setup().await;
    let arn = t.target_group("bad-tg", "ip", 8080).await;
    let _albc = t.start(&[]);
    t.binding("orphan", "missing", &arn, Some("ip")).await;
    let warning = wait_for("warning on orphan", WAIT, || async {
        let events = events_about(&t.admin, "TargetGroupBinding", "orphan").await?;
        Ok(events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("ServiceNotFound")))
    })
    .await
    .unwrap();
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(warning
        .note
        .unwrap_or_default()
        .contains("service default/missing not found"));
    assert_eq!(t.targets(&arn).await, Vec::<String>::new());
    let counts = t.elbv2_counts().await;
    assert!(!counts.contains_key("RegisterTargets"), "{counts:?}");
    // Deleting a binding that never registered anything still completes.
    t.delete_binding("orphan").await;

    // spec.targetGroupName instead of the ARN: an unknown name is a Warning naming the field,
    // a known one is resolved and its group filled.
    t.service("named", false).await;
    let two = t.endpoints("named", 2).await;
    let tgbs = Api::<TargetGroupBinding>::namespaced(t.admin.clone(), NS);
    for (binding, group) in [("ghost", "no-such-tg"), ("named", "bad-tg")] {
        let tgb: TargetGroupBinding = serde_json::from_value(serde_json::json!({
            "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
            "metadata": {"name": binding},
            "spec": {"serviceRef": {"name": "named", "port": 80}, "targetGroupName": group,
                     "targetType": "ip"}}))
        .unwrap();
        tgbs.create(&PostParams::default(), &tgb).await.unwrap();
    }
    wait_for("warning on ghost", WAIT, || async {
        let events = events_about(&t.admin, "TargetGroupBinding", "ghost").await?;
        Ok(events.into_iter().find(|e| {
            e.note
                .as_deref()
                .unwrap_or_default()
                .contains("spec.targetGroupName")
        }))
    })
    .await
    .unwrap();
    t.wait_targets(&arn, &two).await;
    t.delete_binding("named").await;
    assert_eq!(t.targets(&arn).await, Vec::<String>::new());
    t.delete_binding("ghost").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_targets_are_ready_nodes_on_the_node_port() {
    let t = setup().await;
    let subnet = stratus_scenarios::ec2_fixture::subnet(&t.ec2, "us-east-1a")
        .await
        .unwrap();
    let launched = stratus_scenarios::ec2_fixture::launch(
        &t.ec2,
        &subnet,
        "us-east-1a",
        2,
        Some("test"),
        "m5.large",
    )
    .await
    .unwrap();
    for i in &launched {
        stratus_scenarios::service_fixture::create_ready_node(
            &t.admin,
            &i.private_dns,
            &format!("aws:///us-east-1a/{}", i.id),
            BTreeMap::new(),
        )
        .await
        .unwrap();
    }
    let arn = t.target_group("node-tg", "instance", 80).await;
    t.service("nodes", true).await;
    let svc = kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(t.admin.clone(), NS)
        .get("nodes")
        .await
        .unwrap();
    let node_port = svc.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    let _albc = t.start(&[]);
    // No targetType: read from the target group.
    t.binding("nodes", "nodes", &arn, None).await;
    let want: Vec<String> = launched
        .iter()
        .map(|i| format!("{}:{node_port}", i.id))
        .collect();
    t.wait_targets(&arn, &want).await;
    t.delete_binding("nodes").await;
    assert_eq!(t.targets(&arn).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_gate_is_set_once_the_target_is_healthy() {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::{Patch, PatchParams};

    let t = setup().await;
    let arn = t.target_group("gate-tg", "ip", 8080).await;
    t.service("gated", false).await;
    let cond = "target-health.elbv2.k8s.aws/gated";
    let pods: Api<Pod> = Api::namespaced(t.admin.clone(), NS);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gated-0"},
        "spec": {"containers": [{"name": "app", "image": "app"}],
                 "readinessGates": [{"conditionType": cond}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // What the kubelet would report: containers ready, the pod held back by the gate.
    pods.patch_status(
        "gated-0",
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"status": {"podIP": "10.2.0.5", "conditions": [
            {"type": "ContainersReady", "status": "True"},
            {"type": "Ready", "status": "False"}]}}),
        ),
    )
    .await
    .unwrap();
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gated-a", "labels": {"kubernetes.io/service-name": "gated"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.2.0.5"], "conditions": {"ready": false},
                       "targetRef": {"kind": "Pod", "name": "gated-0", "namespace": NS}}]}))
    .unwrap();
    Api::<EndpointSlice>::namespaced(t.admin.clone(), NS)
        .create(&PostParams::default(), &slice)
        .await
        .unwrap();
    let albc = t.start(&[]);
    t.binding("gated", "gated", &arn, Some("ip")).await;
    t.wait_targets(&arn, &["10.2.0.5:8080".to_string()]).await;
    wait_for("readiness gate condition", WAIT, || async {
        let p = pods.get("gated-0").await?;
        let met = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            // With the transition's time, as upstream records it.
            .any(|c| c.type_ == cond && c.status == "True" && c.last_transition_time.is_some());
        Ok(met.then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", albc.log()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_when_the_leader_stops() {
    let t = setup().await;
    t.lease_rbac().await;
    let arn = t.target_group("ha-tg", "ip", 8080).await;
    t.service("ha", false).await;
    let two = t.endpoints("ha", 2).await;
    let election = [
        "--enable-leader-election=true",
        "--leader-election-namespace=kube-system",
    ];
    let mut leader = t.start(&election);
    t.binding("ha", "ha", &arn, Some("ip")).await;
    t.wait_targets(&arn, &two).await;
    let standby = t.start(&election);
    // The leader stops cleanly (gives the lease up); the standby must act on the next change.
    leader.terminate();
    leader.wait();
    let three = t.endpoints("ha", 3).await;
    wait_for("standby registered the third pod", WAIT, || async {
        let mut want = three.clone();
        want.sort();
        Ok((t.targets(&arn).await == want).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", standby.log()));
}
