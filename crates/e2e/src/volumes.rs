//! What the storage parts of the suites share: the upstream controller sidecars and the probe
//! workload packed as images, the StatefulSet whose claim the probe writes a token to, the
//! probe's line, and the loop devices mounted under the kubelet's root.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::images::{self, ImageArchive};

/// The probe workload's image reference.
pub const PROBE_IMAGE: &str = "stratus.test/volume-probe:e2e";
/// The workload's StatefulSet (its pod is `data-0`, its claim `data-data-0`).
pub const WORKLOAD_NAME: &str = "data";
/// The workload's pods.
pub const WORKLOAD: &str = "app=data";

/// The upstream controller sidecars (testenv's builds) and the probe workload, packed.
pub fn sidecar_and_probe_images(out: &Path) -> Result<Vec<ImageArchive>> {
    let mut archives = images::csi_sidecars(out).context("the upstream controller sidecars")?;
    let probe = images::built_binary("stratus-e2e-volume-probe")?;
    archives.push(images::foreign(&probe, PROBE_IMAGE, out)?);
    Ok(archives)
}

/// `registry.k8s.io/sig-storage/<name>:<the version testenv builds>`.
pub fn sidecar_image(name: &str) -> Result<String> {
    let sidecar = stratus_testenv::tools::csi_sidecars::ALL
        .iter()
        .find(|s| s.name == name)
        .with_context(|| format!("testenv builds no sidecar {name}"))?;
    Ok(format!(
        "registry.k8s.io/sig-storage/{name}:{}",
        sidecar.version
    ))
}

/// One replica writing `token` to its 1 GiB claim of `class` through the probe image.
pub fn workload(class: &str, token: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": WORKLOAD_NAME},
        "spec": {
            "serviceName": WORKLOAD_NAME,
            "replicas": 1,
            "selector": {"matchLabels": {"app": WORKLOAD_NAME}},
            "template": {
                "metadata": {"labels": {"app": WORKLOAD_NAME}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "probe",
                        "image": PROBE_IMAGE,
                        "imagePullPolicy": "Never",
                        "args": ["/data/token", token],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        "securityContext": {
                            "runAsUser": 0,
                            "readOnlyRootFilesystem": true,
                            "allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}, "limits": {"memory": "32Mi"}},
                    }],
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }],
        },
    }))
    .expect("the workload's manifest")
}

/// The probe's first line in `pod`'s log (`wrote <token>` or `found <token>`), trimmed.
pub async fn probe_line(client: &kube::Client, pod: &Pod, deadline: Duration) -> Result<String> {
    let name = pod.metadata.name.clone().context("the pod's name")?;
    let namespace = pod.metadata.namespace.clone().unwrap_or("default".into());
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    wait_for("the probe's line", deadline, || {
        let (api, name) = (api.clone(), name.clone());
        async move {
            let text = api.logs(&name, &Default::default()).await?;
            Ok(text.lines().next().map(|l| l.trim().to_owned()))
        }
    })
    .await
}

/// Mounts of loop devices under the kubelet's root, as `/proc/self/mounts` lines.
pub fn loop_mounts(kubelet: &Path) -> Vec<String> {
    let root = kubelet.display().to_string();
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("/dev/loop") && l.contains(&root))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_claims_from_the_class_and_writes_the_token() {
        let set = workload("cinder", "t-1");
        let spec = set.spec.unwrap();
        let claim = &spec.volume_claim_templates.unwrap()[0];
        assert_eq!(
            claim.spec.as_ref().unwrap().storage_class_name.as_deref(),
            Some("cinder")
        );
        let container = &spec.template.spec.unwrap().containers[0];
        assert_eq!(container.args.as_ref().unwrap()[1], "t-1");
        assert_eq!(container.image.as_deref(), Some(PROBE_IMAGE));
    }
}
