//! A CSI driver's volumes on the real node, whatever the cloud: the upstream controller
//! sidecars' references as testenv builds them, the probe image and the one-replica StatefulSet
//! that writes a token to its claim (`stratus-e2e-volume-probe`), its pod's line, the claim's
//! bound volume handle, and the loop devices mounted under the kubelet's root.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::Api;
use serde_json::json;
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::images::{self, ImageArchive};

/// The probe workload's image reference (packed with [`probe_image`]).
pub const PROBE_IMAGE: &str = "stratus.test/volume-probe:e2e";
/// The workload's StatefulSet, and the `app` label of its pods.
pub const WORKLOAD: &str = "data";
/// The selector of the workload's pods.
pub const WORKLOAD_SELECTOR: &str = "app=data";
/// The claim of the workload's one replica (`<template>-<set>-0`).
pub const CLAIM: &str = "data-data-0";
/// The workload's one pod.
pub const POD: &str = "data-0";

/// The probe binary of this build packed as [`PROBE_IMAGE`].
pub fn probe_image() -> Result<ImageArchive> {
    let probe = images::built_binary("stratus-e2e-volume-probe")?;
    images::foreign(&probe, PROBE_IMAGE)
}

/// The upstream controller sidecars (testenv's builds) and the probe workload, packed.
pub fn sidecar_and_probe_images() -> Result<Vec<ImageArchive>> {
    let mut archives = images::csi_sidecars().context("the upstream controller sidecars")?;
    archives.push(probe_image()?);
    Ok(archives)
}

/// `registry.k8s.io/sig-storage/<name>:<version>` of the upstream sidecar testenv builds (what
/// [`images::csi_sidecars`] packs).
pub fn sidecar_image(name: &str) -> Result<String> {
    let sidecar = stratus_testenv::tools::csi_sidecars::ALL
        .iter()
        .find(|s| s.name == name)
        .with_context(|| format!("testenv builds no CSI sidecar {name}"))?;
    Ok(format!(
        "registry.k8s.io/sig-storage/{name}:{}",
        sidecar.version
    ))
}

/// One replica writing `token` to a 1 GiB claim of `class` through the probe image (run as
/// root without capabilities, on a read-only root: it writes only its volume).
pub fn workload(token: &str, class: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": WORKLOAD},
        "spec": {
            "serviceName": WORKLOAD,
            "replicas": 1,
            "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": {
                "metadata": {"labels": {"app": WORKLOAD}},
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
    .expect("the workload's manifest is a StatefulSet")
}

/// [`workload`] whose claim names no class, of `size` (a quantity): the cluster's default class
/// provisions it.
pub fn workload_of_the_default_class(token: &str, size: &str) -> StatefulSet {
    let mut set = workload(token, "");
    for claim in set
        .spec
        .iter_mut()
        .flat_map(|s| s.volume_claim_templates.iter_mut().flatten())
    {
        if let Some(spec) = claim.spec.as_mut() {
            spec.storage_class_name = None;
            spec.resources = serde_json::from_value(json!({"requests": {"storage": size}}))
                .expect("a claim's resources");
        }
    }
    set
}

/// The first line the pod `pod` of `default` logged (the probe's `wrote …` or `found …`).
pub async fn log_of(client: &kube::Client, pod: &Pod, deadline: Duration) -> Result<String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    wait_for("the probe's line", deadline, || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let text = api.logs(&name, &Default::default()).await?;
            let line = text.lines().next().unwrap_or_default().trim().to_owned();
            Ok((!line.is_empty()).then_some(line))
        }
    })
    .await
}

/// The name of the PersistentVolume bound to the claim [`CLAIM`] of `default` and its CSI
/// volume handle.
pub async fn bound_volume(client: &kube::Client) -> Result<(String, String)> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let claim = claims.get(CLAIM).await?;
    let pv_name = claim
        .spec
        .and_then(|s| s.volume_name)
        .with_context(|| format!("claim {CLAIM} has no spec.volumeName"))?;
    let pv = Api::<PersistentVolume>::all(client.clone())
        .get(&pv_name)
        .await?;
    let handle = pv
        .spec
        .and_then(|s| s.csi)
        .with_context(|| format!("volume {pv_name} has no spec.csi"))?
        .volume_handle;
    Ok((pv_name, handle))
}

/// Mounts of loop devices under the kubelet's root `kubelet`, as `/proc/self/mounts` lines.
pub fn staged_mounts(kubelet: &Path) -> Vec<String> {
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
    fn the_workload_claims_the_class_and_passes_the_token() {
        let set = workload("t-1", "fast");
        let spec = set.spec.unwrap();
        let claim = &spec.volume_claim_templates.unwrap()[0];
        assert_eq!(
            claim.spec.as_ref().unwrap().storage_class_name.as_deref(),
            Some("fast")
        );
        let container = &spec.template.spec.unwrap().containers[0];
        assert_eq!(
            container.args.as_deref(),
            Some(&["/data/token".to_owned(), "t-1".to_owned()][..])
        );
        assert_eq!(container.image.as_deref(), Some(PROBE_IMAGE));
    }

    #[test]
    fn the_default_class_workload_names_no_class() {
        let set = workload_of_the_default_class("t-2", "8Gi");
        let claim = &set.spec.unwrap().volume_claim_templates.unwrap()[0];
        let spec = claim.spec.as_ref().unwrap();
        assert_eq!(spec.storage_class_name, None);
        let size = &spec.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"];
        assert_eq!(size.0, "8Gi");
    }

    #[test]
    fn an_unbuilt_sidecar_is_named() {
        let err = sidecar_image("csi-snapshotter-nope").unwrap_err();
        assert!(
            format!("{err:#}").contains("csi-snapshotter-nope"),
            "{err:#}"
        );
    }
}
