//! The Helm chart (`charts/node-termination-handler`), checked with the real helm CLI: it
//! lints, renders a DaemonSet in IMDS mode (Deckhouse's values: 25Mi) and a Deployment with a
//! Lease Role in queue mode, sets only environment variables the binary reads, and its
//! ClusterRole and Role are exactly the ones in `deploy/node-termination-handler/rbac.yaml`.

use std::path::PathBuf;
use std::process::Command;

use clap::CommandFactory;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use serde::Deserialize;
use stratus_scenarios::kube_fixture::repo_root;
use stratus_termination::config::Options;

fn chart_dir() -> PathBuf {
    repo_root().join("charts/node-termination-handler")
}

fn helm(args: &[&str]) -> String {
    let paths = stratus_testenv::ensure_installed().expect("helm installed");
    let out = Command::new(&paths.helm)
        .args(args)
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn render(values: &str) -> Vec<serde_yaml::Value> {
    let file = std::env::temp_dir().join(format!("nth-values-{}.yaml", rand_suffix()));
    std::fs::write(&file, values).unwrap();
    let dir = chart_dir();
    let text = helm(&[
        "template",
        "nth",
        dir.to_str().unwrap(),
        "--namespace",
        "kube-system",
        "-f",
        file.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_file(&file);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn rand_suffix() -> String {
    format!("{}-{:?}", std::process::id(), std::thread::current().id()).replace(['(', ')'], "")
}

fn find<T: serde::de::DeserializeOwned>(docs: &[serde_yaml::Value], kind: &str) -> Option<T> {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .map(|d| serde_yaml::from_value(d.clone()).unwrap())
}

fn env_names(spec: &PodSpec) -> Vec<(String, Option<String>)> {
    spec.containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect()
}

/// Every variable the chart sets is one the binary reads.
fn assert_known(env: &[(String, Option<String>)]) {
    let known: Vec<String> = Options::command()
        .get_arguments()
        .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
        .chain(["AWS_ACCESS_KEY_ID".into(), "AWS_SECRET_ACCESS_KEY".into()])
        .collect();
    for (name, _) in env {
        assert!(
            known.contains(name),
            "the chart sets {name}, which the binary ignores"
        );
    }
}

fn shipped<T: serde::de::DeserializeOwned>(kind: &str) -> T {
    let text =
        std::fs::read_to_string(repo_root().join("deploy/node-termination-handler/rbac.yaml"))
            .unwrap();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .collect();
    find(&docs, kind).unwrap()
}

#[test]
fn chart_lints() {
    let dir = chart_dir();
    helm(&["lint", dir.to_str().unwrap()]);
}

#[test]
fn imds_mode_is_a_small_daemonset() {
    // Deckhouse's settings: cloud-ephemeral nodes, 25m/25Mi, system-node-critical.
    let docs = render(
        "nodeSelector:\n  node.deckhouse.io/type: CloudEphemeral\nresources:\n  requests:\n    cpu: 25m\n    memory: 25Mi\n",
    );
    assert!(find::<Deployment>(&docs, "Deployment").is_none());
    let ds: DaemonSet = find(&docs, "DaemonSet").expect("a DaemonSet");
    let spec = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    assert_eq!(
        spec.node_selector
            .as_ref()
            .unwrap()
            .get("node.deckhouse.io/type")
            .map(String::as_str),
        Some("CloudEphemeral")
    );
    let resources = spec.containers[0].resources.clone().unwrap();
    assert_eq!(resources.requests.unwrap()["memory"].0, "25Mi");
    let env = env_names(&spec);
    assert_known(&env);
    for (name, value) in [
        ("ENABLE_SQS_TERMINATION_DRAINING", "false"),
        ("ENABLE_SPOT_INTERRUPTION_DRAINING", "true"),
        ("ENABLE_SCHEDULED_EVENT_DRAINING", "true"),
        ("METADATA_TRIES", "3"),
        ("NODE_TERMINATION_GRACE_PERIOD", "120"),
    ] {
        assert!(
            env.iter()
                .any(|(n, v)| n == name && v.as_deref() == Some(value)),
            "{name}={value} missing in {env:?}"
        );
    }
    let role: ClusterRole = find(&docs, "ClusterRole").unwrap();
    assert_eq!(role.rules, shipped::<ClusterRole>("ClusterRole").rules);
    assert!(
        find::<Role>(&docs, "Role").is_none(),
        "no Lease rights in IMDS mode"
    );
}

#[test]
fn queue_mode_is_a_deployment_with_a_lease_role() {
    let docs = render(
        "enableSqsTerminationDraining: true\nqueueURL: https://sqs.us-east-1.amazonaws.com/1/q\nawsRegion: us-east-1\nheartbeatInterval: 30\nreplicas: 2\nwebhookURL: http://hooks\nwebhookTemplate: '{{ .EventID }}'\n",
    );
    assert!(find::<DaemonSet>(&docs, "DaemonSet").is_none());
    let deploy: Deployment = find(&docs, "Deployment").expect("a Deployment");
    let spec = deploy.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    let env = env_names(&pod);
    assert_known(&env);
    for (name, value) in [
        ("ENABLE_SQS_TERMINATION_DRAINING", "true"),
        ("QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q"),
        ("HEARTBEAT_INTERVAL", "30"),
        ("ENABLE_PROBES_SERVER", "true"),
        ("WEBHOOK_TEMPLATE", "{{ .EventID }}"),
    ] {
        assert!(
            env.iter()
                .any(|(n, v)| n == name && v.as_deref() == Some(value)),
            "{name}={value} missing in {env:?}"
        );
    }
    assert!(
        !env.iter().any(|(n, _)| n == "HEARTBEAT_UNTIL"),
        "unset values stay unset"
    );
    let role: Role = find(&docs, "Role").expect("a Lease Role");
    assert_eq!(role.rules, shipped::<Role>("Role").rules);
}
