//! The CCM chart's DVP values: the parent kubeconfig Secret and the tenant namespace become the
//! DVP_KUBERNETES_CONFIG_BASE64 / DVP_NAMESPACE environment Deckhouse's DVP CCM reads; a Secret
//! without a namespace, or a bad namespace, fails the render with a clear message.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use stratus_scenarios::kube_fixture::repo_root;

fn run_helm(values: &str, name: &str) -> Result<String, String> {
    let helm = stratus_testenv::ensure_installed()
        .expect("testenv install (builds helm)")
        .helm;
    let file: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dvp-chart-{}-{name}.yaml", std::process::id()));
    std::fs::write(&file, values).unwrap();
    let chart = repo_root().join("charts/cloud-controller-manager");
    let out = Command::new(helm)
        .args(["template", "stratus"])
        .arg(&chart)
        .arg("--values")
        .arg(&file)
        .env("HELM_CONFIG_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_CACHE_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_DATA_HOME", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run helm");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

fn container_env(rendered: &str) -> serde_yaml::Value {
    for doc in serde_yaml::Deserializer::from_str(rendered) {
        let v = serde_yaml::Value::deserialize(doc).unwrap();
        if v["kind"].as_str() == Some("DaemonSet") {
            return v["spec"]["template"]["spec"]["containers"][0]["env"].clone();
        }
    }
    panic!("no DaemonSet rendered:\n{rendered}");
}

#[test]
fn dvp_values_render_the_deckhouse_environment() {
    let values = "
args: [--cloud-provider=dvp, '--controllers=cloud-node,cloud-node-lifecycle,service']
env:
  - {name: EXTRA, value: kept}
dvp:
  parentKubeconfigSecret: {name: dvp-parent}
  namespace: tenant-project
";
    let env = container_env(&run_helm(values, "ok").unwrap());
    let want: serde_yaml::Value = serde_yaml::from_str(
        "
- {name: EXTRA, value: kept}
- name: DVP_KUBERNETES_CONFIG_BASE64
  valueFrom: {secretKeyRef: {name: dvp-parent, key: kubeconfig-base64}}
- {name: DVP_NAMESPACE, value: tenant-project}
",
    )
    .unwrap();
    assert_eq!(env, want);

    // Without DVP values nothing DVP is rendered.
    let env = container_env(&run_helm("args: [--cloud-provider=aws]\n", "none").unwrap());
    assert!(env.is_null(), "{env:?}");
}

#[test]
fn dvp_values_without_a_namespace_or_with_a_bad_one_fail() {
    let err = run_helm(
        "dvp: {parentKubeconfigSecret: {name: dvp-parent}}\n",
        "no-ns",
    )
    .unwrap_err();
    assert!(err.contains("dvp.namespace"), "{err}");
    let err = run_helm("dvp: {namespace: Bad_NS}\n", "bad-ns").unwrap_err();
    assert!(err.contains("namespace"), "{err}");
    let err = run_helm("dvp: {kubeconfig: x}\n", "unknown").unwrap_err();
    assert!(err.contains("kubeconfig"), "{err}");
}
