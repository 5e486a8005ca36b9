//! The Helm chart (`charts/aws-load-balancer-controller`), checked with the real helm CLI: it
//! lints, refuses to render without a cluster name, and the Deployment's arguments are accepted
//! by the binary's own flag parser (every flag the chart writes exists).

use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use serde::Deserialize as _;
use stratus_albc::options::Options;
use stratus_scenarios::kube_fixture::repo_root;

fn chart_dir() -> PathBuf {
    repo_root().join("charts/aws-load-balancer-controller")
}

fn helm(args: &[&str]) -> std::process::Output {
    let paths = stratus_testenv::ensure_installed().expect("helm installed");
    Command::new(&paths.helm)
        .args(args)
        .output()
        .expect("run helm")
}

#[test]
fn chart_lints_renders_and_its_flags_parse() {
    let dir = chart_dir();
    let dir = dir.to_str().unwrap();
    let lint = helm(&["lint", dir, "--set", "clusterName=prod"]);
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );
    let missing = helm(&["template", "albc", dir]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("clusterName is required"));
    let out = helm(&[
        "template",
        "albc",
        dir,
        "-n",
        "kube-system",
        "--set",
        "clusterName=prod",
        "--set",
        "region=eu-central-1",
        "--set",
        "defaultTags.team=edge",
        "--set",
        "watchNamespace=shop",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut kinds = Vec::new();
    let mut deployment = None;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = serde_yaml::Value::deserialize(doc).unwrap();
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        if kind == "Deployment" {
            deployment = Some(serde_yaml::from_value::<Deployment>(v).unwrap());
        }
        kinds.push(kind);
    }
    for k in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} in {kinds:?}");
    }
    let d = deployment.expect("a Deployment");
    let c = &d.spec.unwrap().template.spec.unwrap().containers[0];
    let mut argv = vec!["aws-load-balancer-controller".to_string()];
    argv.extend(c.args.clone().unwrap());
    let opts = Options::parse_args(argv.clone()).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert_eq!(opts.cluster_name, "prod");
    assert_eq!(opts.aws_region.as_deref(), Some("eu-central-1"));
    assert_eq!(opts.default_tags["team"], "edge");
    assert_eq!(opts.watch_namespace, "shop");
    assert!(opts.enable_leader_election);
}
