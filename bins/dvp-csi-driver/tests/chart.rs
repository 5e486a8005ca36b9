//! The DVP CSI chart rendered by the real helm: the parent kubeconfig Secret and the tenant
//! namespace become the controller's DVP_KUBERNETES_CONFIG_BASE64 / DVP_NAMESPACE, the cluster
//! UUID its `--cluster-uuid`, the node plugin gets its node name from the pod; rendering without
//! the parent values fails naming the missing one. (The chart's tenant RBAC is exercised by the
//! sidecar flow, whose sidecars run under it.)

use std::process::Command;

use serde::Deserialize;
use stratus_csi_dvp::DRIVER_NAME;
use stratus_scenarios::kube_fixture::repo_root;

fn render(sets: &[&str]) -> Result<Vec<serde_yaml::Value>, String> {
    let helm = stratus_testenv::ensure_installed()
        .expect("testenv install (builds helm)")
        .helm;
    let out = Command::new(helm)
        .args(["template", "dvp", "--namespace", "d8-csi"])
        .arg(repo_root().join("charts/dvp-csi-driver"))
        .args(sets.iter().flat_map(|s| ["--set", s]))
        .env("HELM_CONFIG_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_CACHE_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_DATA_HOME", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run helm");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect())
}

fn of_kind<'a>(docs: &'a [serde_yaml::Value], kind: &str) -> &'a serde_yaml::Value {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

fn env_of<'a>(container: &'a serde_yaml::Value, name: &str) -> &'a serde_yaml::Value {
    container["env"]
        .as_sequence()
        .and_then(|env| env.iter().find(|e| e["name"].as_str() == Some(name)))
        .unwrap_or_else(|| panic!("no {name} in {container:?}"))
}

#[test]
fn parent_values_render_the_deckhouse_environment() {
    let docs = render(&[
        "dvp.parentKubeconfigSecret.name=dvp-parent",
        "dvp.namespace=tenant-project",
        "clusterUUID=5c1e7b2a",
    ])
    .unwrap();
    let driver = &of_kind(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let kubeconfig = env_of(driver, "DVP_KUBERNETES_CONFIG_BASE64");
    assert_eq!(
        kubeconfig["valueFrom"]["secretKeyRef"]["name"],
        "dvp-parent"
    );
    assert_eq!(
        kubeconfig["valueFrom"]["secretKeyRef"]["key"],
        "kubeconfig-base64"
    );
    assert_eq!(env_of(driver, "DVP_NAMESPACE")["value"], "tenant-project");
    let args: Vec<&str> = driver["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(args.contains(&"--cluster-uuid=5c1e7b2a"), "{args:?}");
    assert!(args.contains(&"--provide-node-service=false"), "{args:?}");
    let node = &of_kind(&docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        env_of(node, "NODE_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    assert!(node["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .all(|e| e["name"] != "DVP_KUBERNETES_CONFIG_BASE64"));
    assert_eq!(of_kind(&docs, "CSIDriver")["metadata"]["name"], DRIVER_NAME);
}

#[test]
fn missing_parent_values_fail_naming_them() {
    let err = render(&["dvp.namespace=tenant-project"]).unwrap_err();
    assert!(
        err.contains("dvp.parentKubeconfigSecret.name is required"),
        "{err}"
    );
    let err = render(&["dvp.parentKubeconfigSecret.name=p"]).unwrap_err();
    assert!(err.contains("dvp.namespace is required"), "{err}");
}
