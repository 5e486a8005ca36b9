//! IMDS mode end to end, following upstream's e2e scenario list: the shipped binary under its
//! ServiceAccount against the real amazon-ec2-metadata-mock and the real apiserver (pods made
//! directly on nodes, a kubelet stand-in finishing terminations). Scenarios of one cluster run
//! side by side, one node, one mock and one handler each.

mod common;

use std::collections::BTreeMap;

use common::*;
use stratus_scenarios::nth_fixture::{
    create_node, create_pdb, create_pod, KubeletSim, NthCluster, PodOptions,
};
use stratus_scenarios::wait::wait_for;
use stratus_termination::node as labels;
use stratus_testenv::tools::ec2_metadata_mock::Aemm;

fn base_vars(node: &str, aemm: &Aemm) -> Vec<(&'static str, String)> {
    vec![
        ("NODE_NAME", node.to_owned()),
        ("INSTANCE_METADATA_URL", aemm.url().to_owned()),
        ("POD_NAME", "aws-node-termination-handler-xyz".into()),
        ("NAMESPACE", "kube-system".into()),
        // Empty values count as unset, as upstream's chart renders them.
        ("WEBHOOK_URL", String::new()),
        ("DELETE_LOCAL_DATA", String::new()),
    ]
}

async fn web_and_daemon_pods(cluster: &NthCluster, node: &str) {
    let admin = &cluster.admin;
    let rs = PodOptions {
        owner_kind: Some("ReplicaSet"),
        grace_seconds: Some(1),
        labels: BTreeMap::from([("app".into(), format!("web-{node}"))]),
        ..PodOptions::default()
    };
    create_pod(admin, "default", &format!("{node}-web"), node, &rs)
        .await
        .unwrap();
    let ds = PodOptions {
        owner_kind: Some("DaemonSet"),
        ..PodOptions::default()
    };
    create_pod(admin, "default", &format!("{node}-ds"), node, &ds)
        .await
        .unwrap();
}

/// Spot ITN (taint, Events, metrics, webhook), scheduled maintenance and its cancellation,
/// rebalance monitoring and draining, ASG target lifecycle state, IMDSv2 only, cordon-only
/// and dry-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imds_scenarios() {
    let cluster = NthCluster::start().await.expect("cluster");
    let _kubelet = KubeletSim::start(cluster.admin.clone());
    tokio::join!(
        spot_itn(&cluster),
        scheduled_maintenance_and_cancellation(&cluster),
        uncordon_after_reboot(&cluster),
        rebalance(&cluster),
        asg_lifecycle(&cluster),
        imdsv2_only(&cluster),
        cordon_only_and_dry_run(&cluster),
        under_deckhouses_container_spec(&cluster),
    );
}

/// Node `name` on the mock's instance with a web and a daemon pod, and the mock announcing a
/// Spot interruption in two minutes.
async fn spot_node(cluster: &NthCluster, name: &str) -> Aemm {
    create_node(
        &cluster.admin,
        name,
        "aws:///us-east-1a/i-1234567890abcdef0",
    )
    .await
    .unwrap();
    web_and_daemon_pods(cluster, name).await;
    Aemm::start(&["spot", "-t", &in_seconds(120)])
        .await
        .unwrap()
}

/// Deckhouse's DaemonSet gives the handler `NODE_NAME` and nothing else (no args, ports or
/// probes): a spot interruption still cordons and drains its node. Stand-ins: the mock's URL as
/// `INSTANCE_METADATA_URL` (169.254.169.254 in a pod) and `KUBECONFIG` for the ServiceAccount.
async fn under_deckhouses_container_spec(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let name = "ip-10-0-0-20.ec2.internal";
    let aemm = spot_node(cluster, name).await;
    let vars = vec![
        ("NODE_NAME", name.to_owned()),
        ("INSTANCE_METADATA_URL", aemm.url().to_owned()),
    ];
    let nth = start(cluster, "deckhouse", &vars);
    wait_cordoned(admin, name, &nth).await;
    wait_pods(admin, name, &[&format!("{name}-ds")], &nth).await;
}

async fn spot_itn(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let name = "ip-10-0-0-1.ec2.internal";
    let aemm = spot_node(cluster, name).await;
    let hook = WebhookReceiver::start().await;
    let metrics_port = free_port();
    let mut vars = base_vars(name, &aemm);
    vars.extend([
        ("TAINT_NODE", "true".into()),
        ("EMIT_KUBERNETES_EVENTS", "true".into()),
        ("KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "team=infra".into()),
        ("ENABLE_PROMETHEUS_SERVER", "true".into()),
        ("PROMETHEUS_SERVER_PORT", metrics_port.to_string()),
        ("WEBHOOK_URL", hook.url.clone()),
        ("WEBHOOK_TEMPLATE", r#"{"id":"{{ .EventID }}","kind":"{{ .Kind }}","node":"{{ .NodeName }}","instance":"{{ .InstanceID }}","pods":"{{ join "," .Pods }}"}"#.into()),
    ]);
    let nth = start(cluster, "spot", &vars);
    wait_cordoned(admin, name, &nth).await;
    // The ReplicaSet pod is evicted; the DaemonSet pod stays.
    wait_pods(admin, name, &[&format!("{name}-ds")], &nth).await;
    let node = node(admin, name).await;
    let (value, effect) = taint(&node, labels::SPOT_ITN_TAINT).expect("spot taint");
    assert!(
        value.starts_with("spot-itn-") && value.len() == 63,
        "{value}"
    );
    assert_eq!(effect, "NoSchedule");

    let (message, annotations) = wait_event(admin, "default", name, "SpotInterruption").await;
    assert!(message.contains("Spot ITN received"), "{message}");
    assert_eq!(
        annotations.get("instance-id").map(String::as_str),
        Some("i-1234567890abcdef0")
    );
    assert_eq!(annotations.get("team").map(String::as_str), Some("infra"));
    wait_event(admin, "default", name, "CordonAndDrain").await;
    wait_event(admin, "default", name, "PreDrain").await;
    wait_event(admin, "default", &format!("{name}-web"), "PodEviction").await;

    let (line, body) = hook.wait_body().await;
    assert!(line.starts_with("POST"), "{line}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("the template renders JSON");
    assert_eq!(body["kind"], "SPOT_ITN");
    assert_eq!(body["node"], name);
    assert_eq!(body["instance"], "i-1234567890abcdef0");
    assert!(
        body["pods"]
            .as_str()
            .unwrap()
            .contains(&format!("{name}-web")),
        "{body}"
    );

    let url = format!("http://127.0.0.1:{metrics_port}/metrics");
    wait_for("the cordon-and-drain action metric", WAIT, || async {
        let text = http_get(&url).await?;
        Ok(text
            .contains(r#"actions_total{node_action="cordon-and-drain",node_status="success"} 1"#)
            .then_some(()))
    })
    .await
    .unwrap();
}

async fn scheduled_maintenance_and_cancellation(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let name = "ip-10-0-0-2.ec2.internal";
    create_node(admin, name, "aws:///us-east-1a/i-2")
        .await
        .unwrap();
    web_and_daemon_pods(cluster, name).await;
    // Starts in 60 s: within the 120 s node grace period, so the drain is due now.
    let not_before = in_seconds(60);
    let mut aemm = Aemm::start(&[
        "events",
        "-o",
        "system-reboot",
        "-t",
        "active",
        "-b",
        &not_before,
    ])
    .await
    .unwrap();
    let mut vars = base_vars(name, &aemm);
    vars.push(("ENABLE_SPOT_INTERRUPTION_DRAINING", "false".into()));
    vars.push(("TAINT_NODE", "true".into()));
    vars.push(("EMIT_KUBERNETES_EVENTS", "true".into()));
    let nth = start(cluster, "scheduled", &vars);
    wait_cordoned(admin, name, &nth).await;
    wait_pods(admin, name, &[&format!("{name}-ds")], &nth).await;
    let n = node(admin, name).await;
    assert_eq!(
        label(&n, labels::ACTION_LABEL).as_deref(),
        Some(labels::UNCORDON_AFTER_REBOOT)
    );
    assert_eq!(
        label(&n, labels::EVENT_ID_LABEL).as_deref(),
        Some("instance-event-1234567890abcdef0")
    );
    assert!(taint(&n, labels::SCHEDULED_MAINTENANCE_TAINT).is_some());

    // The event is cancelled: the node comes back, without our labels and taints.
    aemm.restart(&[
        "events",
        "-o",
        "system-reboot",
        "-t",
        "canceled",
        "-b",
        &not_before,
    ])
    .await
    .unwrap();
    let result = wait_for(
        "the node to be uncordoned after the cancellation",
        WAIT,
        || async {
            let n = node(admin, name).await;
            Ok((!unschedulable(&n)
                && label(&n, labels::ACTION_LABEL).is_none()
                && label(&n, labels::EVENT_ID_LABEL).is_none()
                && taint(&n, labels::SCHEDULED_MAINTENANCE_TAINT).is_none())
            .then_some(()))
        },
    )
    .await;
    if let Err(e) = result {
        panic!("{e:#}\n{}", nth.log());
    }
    wait_event(admin, "default", name, "Uncordon").await;
}

/// After a scheduled reboot the node comes back cordoned with our labels: a handler starting
/// on it uncordons it once the uptime shows the reboot happened.
async fn uncordon_after_reboot(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let name = "ip-10-0-0-9.ec2.internal";
    create_node(admin, name, "aws:///us-east-1a/i-9")
        .await
        .unwrap();
    let labelled_at = (jiff::Timestamp::now().as_second() - 100).to_string();
    let patch = serde_json::json!({
        "metadata": { "labels": {
            labels::ACTION_LABEL: labels::UNCORDON_AFTER_REBOOT,
            labels::ACTION_TIME_LABEL: labelled_at,
            labels::EVENT_ID_LABEL: "instance-event-1234567890abcdef0",
        }},
        "spec": { "unschedulable": true },
    });
    kube::Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone())
        .patch(name, &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    // Up for 10 s, labelled 100 s ago: the reboot happened.
    let uptime = cluster.env.dir().join("uptime");
    std::fs::write(&uptime, "10.00 20.00\n").unwrap();
    let aemm = Aemm::start(&["events", "-o", "system-reboot", "-t", "completed"])
        .await
        .unwrap();
    let mut vars = base_vars(name, &aemm);
    vars.push(("UPTIME_FROM_FILE", uptime.display().to_string()));
    let nth = start(cluster, "reboot", &vars);
    let result = wait_for(
        "the node to be uncordoned after the reboot",
        WAIT,
        || async {
            let n = node(admin, name).await;
            Ok((!unschedulable(&n) && label(&n, labels::ACTION_LABEL).is_none()).then_some(()))
        },
    )
    .await;
    if let Err(e) = result {
        panic!("{e:#}\n{}", nth.log());
    }
}

async fn rebalance(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let aemm = Aemm::start(&["spot", "-t", &in_seconds(3600), "-r", &in_seconds(0)])
        .await
        .unwrap();
    // Monitoring only: cordon.
    let watch = "ip-10-0-0-3.ec2.internal";
    create_node(admin, watch, "aws:///us-east-1a/i-3")
        .await
        .unwrap();
    web_and_daemon_pods(cluster, watch).await;
    let mut vars = base_vars(watch, &aemm);
    vars.push(("ENABLE_SPOT_INTERRUPTION_DRAINING", "false".into()));
    vars.push(("ENABLE_SCHEDULED_EVENT_DRAINING", "false".into()));
    vars.push(("ENABLE_REBALANCE_MONITORING", "true".into()));
    vars.push(("TAINT_NODE", "true".into()));
    let nth = start(cluster, "rebalance-monitor", &vars);
    wait_cordoned(admin, watch, &nth).await;
    assert!(taint(
        &node(admin, watch).await,
        labels::REBALANCE_RECOMMENDATION_TAINT
    )
    .is_some());
    // Draining too.
    let drain = "ip-10-0-0-4.ec2.internal";
    create_node(admin, drain, "aws:///us-east-1a/i-4")
        .await
        .unwrap();
    web_and_daemon_pods(cluster, drain).await;
    let mut vars = base_vars(drain, &aemm);
    vars.push(("ENABLE_SPOT_INTERRUPTION_DRAINING", "false".into()));
    vars.push(("ENABLE_SCHEDULED_EVENT_DRAINING", "false".into()));
    vars.push(("ENABLE_REBALANCE_DRAINING", "true".into()));
    let nth2 = start(cluster, "rebalance-drain", &vars);
    wait_cordoned(admin, drain, &nth2).await;
    wait_pods(admin, drain, &[&format!("{drain}-ds")], &nth2).await;
    // The monitoring-only node kept its pods.
    assert_eq!(pods_on(admin, watch).await.len(), 2, "{}", nth.log());
}

async fn asg_lifecycle(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let name = "ip-10-0-0-5.ec2.internal";
    create_node(admin, name, "aws:///us-east-1a/i-5")
        .await
        .unwrap();
    web_and_daemon_pods(cluster, name).await;
    let aemm = Aemm::start(&["asglifecycle", "--asg-termination-delay-sec", "1"])
        .await
        .unwrap();
    let mut vars = base_vars(name, &aemm);
    vars.push(("ENABLE_SPOT_INTERRUPTION_DRAINING", "false".into()));
    vars.push(("ENABLE_SCHEDULED_EVENT_DRAINING", "false".into()));
    vars.push(("ENABLE_ASG_LIFECYCLE_DRAINING", "true".into()));
    vars.push(("TAINT_NODE", "true".into()));
    let nth = start(cluster, "asg", &vars);
    wait_cordoned(admin, name, &nth).await;
    wait_pods(admin, name, &[&format!("{name}-ds")], &nth).await;
    assert!(taint(
        &node(admin, name).await,
        labels::ASG_LIFECYCLE_TERMINATION_TAINT
    )
    .is_some());
}

async fn imdsv2_only(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let name = "ip-10-0-0-6.ec2.internal";
    create_node(admin, name, "aws:///us-east-1a/i-6")
        .await
        .unwrap();
    let aemm = Aemm::start(&["spot", "-I", "-t", &in_seconds(120)])
        .await
        .unwrap();
    let nth = start(cluster, "imdsv2", &base_vars(name, &aemm));
    wait_cordoned(admin, name, &nth).await;
    assert!(
        aemm.log().contains("Token validated"),
        "AEMM saw no token:\n{}",
        aemm.log()
    );
}

async fn cordon_only_and_dry_run(cluster: &NthCluster) {
    let admin = &cluster.admin;
    let aemm = Aemm::start(&["spot", "-t", &in_seconds(120)])
        .await
        .unwrap();
    let cordon = "ip-10-0-0-7.ec2.internal";
    create_node(admin, cordon, "aws:///us-east-1a/i-7")
        .await
        .unwrap();
    web_and_daemon_pods(cluster, cordon).await;
    let mut vars = base_vars(cordon, &aemm);
    vars.push(("CORDON_ONLY", "true".into()));
    vars.push(("EXCLUDE_FROM_LOAD_BALANCERS", "true".into()));
    let nth = start(cluster, "cordon-only", &vars);
    wait_cordoned(admin, cordon, &nth).await;
    let n = node(admin, cordon).await;
    assert_eq!(
        label(&n, labels::EXCLUDE_FROM_LB_LABEL).as_deref(),
        Some(labels::EXCLUDE_FROM_LB_VALUE)
    );

    let dry = "ip-10-0-0-8.ec2.internal";
    create_node(admin, dry, "aws:///us-east-1a/i-8")
        .await
        .unwrap();
    web_and_daemon_pods(cluster, dry).await;
    let mut vars = base_vars(dry, &aemm);
    vars.push(("DRY_RUN", "true".into()));
    let nth_dry = start(cluster, "dry-run", &vars);
    wait_for("the dry-run handler to see the notice", WAIT, || async {
        Ok(nth_dry.log().contains("dry-run").then_some(()))
    })
    .await
    .unwrap();
    // Cordon-only kept the pods; dry-run touched nothing.
    assert_eq!(pods_on(admin, cordon).await.len(), 2, "{}", nth.log());
    let n = node(admin, dry).await;
    assert!(!unschedulable(&n), "dry-run cordoned:\n{}", nth_dry.log());
    assert_eq!(pods_on(admin, dry).await.len(), 2);
}

/// A Spot notice with 20 s left: pods with long grace periods are evicted with shortened ones
/// so they are gone in time, an evicted pod whose kubelet never confirms is force-deleted when
/// the window closes, and a pod its PodDisruptionBudget protects is left alone and reported by
/// name in a Warning Event and in `nth_drain_pods_not_evicted_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_fits_the_spot_window() {
    let cluster = NthCluster::start().await.expect("cluster");
    let admin = &cluster.admin;
    let _kubelet = KubeletSim::start(admin.clone());
    let name = "ip-10-0-1-1.ec2.internal";
    create_node(admin, name, "aws:///us-east-1a/i-11")
        .await
        .unwrap();
    let slow = PodOptions {
        owner_kind: Some("ReplicaSet"),
        grace_seconds: Some(300),
        ..PodOptions::default()
    };
    create_pod(admin, "default", "slow", name, &slow)
        .await
        .unwrap();
    let stuck = PodOptions {
        owner_kind: Some("ReplicaSet"),
        grace_seconds: Some(2),
        stop_seconds: Some(600),
        ..PodOptions::default()
    };
    create_pod(admin, "default", "stuck", name, &stuck)
        .await
        .unwrap();
    let guarded = PodOptions {
        owner_kind: Some("StatefulSet"),
        labels: BTreeMap::from([("app".into(), "db".into())]),
        ..PodOptions::default()
    };
    create_pod(admin, "default", "guarded", name, &guarded)
        .await
        .unwrap();
    create_pdb(admin, "default", "db", 0).await.unwrap();
    let local = PodOptions {
        empty_dir: true,
        grace_seconds: Some(1),
        ..PodOptions::default()
    };
    create_pod(admin, "default", "scratch", name, &local)
        .await
        .unwrap();

    let deadline = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(20);
    let aemm = Aemm::start(&[
        "spot",
        "-t",
        &deadline.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    ])
    .await
    .unwrap();
    let metrics_port = free_port();
    let mut vars = base_vars(name, &aemm);
    vars.extend([
        ("EMIT_KUBERNETES_EVENTS", "true".into()),
        ("ENABLE_PROMETHEUS_SERVER", "true".into()),
        ("PROMETHEUS_SERVER_PORT", metrics_port.to_string()),
        ("ENABLE_OUT_OF_SERVICE_TAINT", "true".into()),
    ]);
    let nth = start(&cluster, "window", &vars);
    wait_cordoned(admin, name, &nth).await;
    wait_pods(admin, name, &["guarded"], &nth).await;
    assert!(
        jiff::Timestamp::now() < deadline,
        "pods were gone only after the instance's deadline"
    );
    let (message, _) = wait_event(admin, "default", name, "CordonAndDrainError").await;
    assert!(
        message.contains("default/guarded (PodDisruptionBudget)"),
        "{message}"
    );
    assert!(!message.contains("slow"), "{message}");
    assert!(nth.log().contains("force-deleted"), "{}", nth.log());
    let log = nth.log();
    let forced: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("force-deleted a pod"))
        .collect();
    assert_eq!(
        forced.len(),
        1,
        "only the stuck pod is force-deleted: {forced:?}\n{log}"
    );
    assert!(forced[0].contains("default/stuck"), "{forced:?}");
    let text = http_get(&format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap();
    assert!(
        text.contains(r#"nth_drain_pods_not_evicted_total{reason="pdb"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("nth_drain_pods_force_deleted_total 1"),
        "{text}"
    );
    // The drain failed, so no out-of-service taint yet (the guarded pod still runs there).
    assert!(taint(&node(admin, name).await, labels::OUT_OF_SERVICE_TAINT).is_none());
}
