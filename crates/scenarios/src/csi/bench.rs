//! The CSI benchmark's Kubernetes load, the same for every driver: a StorageClass, many PVCs,
//! a VolumeAttachment per PVC as soon as it is bound (spread over the nodes), the seconds until
//! all are Bound and attached, and the deletion back to nothing. The cloud side (which cloud,
//! which requests) is the caller's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use tokio::time::Instant;

use super::claims::{attachment, claim, storage_class};

/// The benchmark's StorageClass.
const CLASS: &str = "bench-csi";
/// The namespace of the benchmark's PVCs.
pub const NAMESPACE: &str = "default";
/// The label on every PVC and VolumeAttachment the benchmark makes.
const LABEL: &str = "stratus.io/bench";
/// How often the load is looked at while it converges.
const POLL: Duration = Duration::from_millis(250);
/// Concurrent API writes of the benchmark itself.
const WRITERS: usize = 16;

/// What to provision and where to attach it.
pub struct LoadSpec<'a> {
    /// The CSI driver name (`ebs.csi.aws.com`).
    pub driver: &'a str,
    /// StorageClass parameters.
    pub parameters: BTreeMap<String, String>,
    /// Kubernetes node names; PVC `i` is attached to node `i % nodes.len()`.
    pub nodes: &'a [String],
    /// How many PVCs.
    pub volumes: usize,
    /// How long provisioning and attaching may take in all.
    pub deadline: Duration,
}

/// A volume the load attached: what a kubelet would hand the node plugin.
#[derive(Debug, Clone)]
pub struct Attached {
    /// The node it is attached to.
    pub node: String,
    /// The cloud volume ID (the PV's volume handle).
    pub volume_id: String,
    /// The VolumeAttachment's attachment metadata (the publish context).
    pub publish_context: BTreeMap<String, String>,
    /// The PV's volume attributes (the volume context).
    pub volume_context: BTreeMap<String, String>,
}

/// How the load went.
pub struct LoadOutcome {
    /// Seconds from the first PVC created until every PVC is Bound.
    pub all_bound_seconds: f64,
    /// Seconds from the first PVC created until every VolumeAttachment is attached.
    pub all_attached_seconds: f64,
    /// Every attached volume.
    pub attached: Vec<Attached>,
}

/// How the deletion went.
pub struct DeletionOutcome {
    /// Seconds until every VolumeAttachment is detached and gone.
    pub detached_seconds: f64,
    /// Seconds until every PV of the driver is gone (its volume deleted by the provisioner).
    pub pvs_gone_seconds: f64,
}

/// The PVC of index `i`.
pub fn pvc_name(i: usize) -> String {
    format!("bench-{i:04}")
}

/// The node PVC `pvc` (named by [`pvc_name`]) is attached to.
pub fn node_for<'a>(pvc: &str, nodes: &'a [String]) -> Option<&'a String> {
    let index: usize = pvc.strip_prefix("bench-")?.parse().ok()?;
    nodes.get(index % nodes.len().max(1))
}

fn labels() -> Option<BTreeMap<String, String>> {
    Some([(LABEL.to_string(), "csi".to_string())].into())
}

fn selector() -> ListParams {
    ListParams::default().labels(&format!("{LABEL}=csi"))
}

/// Creates the StorageClass and `spec.volumes` PVCs, attaches each PVC's PV as soon as it is
/// bound, and returns once every VolumeAttachment is attached.
pub async fn provision_and_attach(admin: &Client, spec: &LoadSpec<'_>) -> Result<LoadOutcome> {
    Api::<StorageClass>::all(admin.clone())
        .create(
            &PostParams::default(),
            &storage_class(CLASS, spec.driver, spec.parameters.clone()),
        )
        .await?;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NAMESPACE);
    let vas = Api::<VolumeAttachment>::all(admin.clone());
    let started = Instant::now();
    futures::stream::iter(0..spec.volumes)
        .map(|i| {
            let pvcs = pvcs.clone();
            async move {
                pvcs.create(
                    &PostParams::default(),
                    &claim(&pvc_name(i), CLASS, 1, labels()),
                )
                .await
            }
        })
        .buffer_unordered(WRITERS)
        .try_collect::<Vec<_>>()
        .await
        .context("creating the PVCs")?;
    let mut attaching: BTreeSet<String> = BTreeSet::new();
    let mut all_bound_seconds = None;
    loop {
        let bound: Vec<(String, String)> = pvcs
            .list(&selector())
            .await?
            .into_iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .filter_map(|c| Some((c.metadata.name?, c.spec?.volume_name?)))
            .collect();
        if bound.len() == spec.volumes && all_bound_seconds.is_none() {
            all_bound_seconds = Some(started.elapsed().as_secs_f64());
        }
        let new: Vec<(String, String)> = bound
            .into_iter()
            .filter(|(pvc, _)| !attaching.contains(pvc))
            .collect();
        futures::stream::iter(new.iter())
            .map(|(pvc, pv)| {
                let vas = vas.clone();
                let node = node_for(pvc, spec.nodes).cloned().unwrap_or_default();
                async move {
                    vas.create(
                        &PostParams::default(),
                        &attachment(&format!("csi-{pvc}"), spec.driver, pv, &node, labels()),
                    )
                    .await
                }
            })
            .buffer_unordered(WRITERS)
            .try_collect::<Vec<_>>()
            .await
            .context("creating the VolumeAttachments")?;
        attaching.extend(new.into_iter().map(|(pvc, _)| pvc));
        let attached = vas
            .list(&selector())
            .await?
            .iter()
            .filter(|va| va.status.as_ref().is_some_and(|s| s.attached))
            .count();
        if attached == spec.volumes {
            break;
        }
        if started.elapsed() > spec.deadline {
            bail!(
                "after {:?}: {} of {} PVCs bound, {attached} attached",
                spec.deadline,
                attaching.len(),
                spec.volumes
            );
        }
        tokio::time::sleep(POLL).await;
    }
    let all_attached_seconds = started.elapsed().as_secs_f64();
    Ok(LoadOutcome {
        all_bound_seconds: all_bound_seconds.unwrap_or(all_attached_seconds),
        all_attached_seconds,
        attached: attached_volumes(admin).await?,
    })
}

/// The attached volumes as a kubelet would see them: node, volume handle, publish and volume
/// contexts.
async fn attached_volumes(admin: &Client) -> Result<Vec<Attached>> {
    let pvs: BTreeMap<String, PersistentVolume> = Api::<PersistentVolume>::all(admin.clone())
        .list(&ListParams::default())
        .await?
        .into_iter()
        .filter_map(|pv| Some((pv.metadata.name.clone()?, pv)))
        .collect();
    let mut out = Vec::new();
    for va in Api::<VolumeAttachment>::all(admin.clone())
        .list(&selector())
        .await?
    {
        let pv_name = va.spec.source.persistent_volume_name.unwrap_or_default();
        let csi = pvs
            .get(&pv_name)
            .and_then(|pv| pv.spec.as_ref()?.csi.clone())
            .with_context(|| format!("PV {pv_name} has no CSI source"))?;
        out.push(Attached {
            node: va.spec.node_name,
            volume_id: csi.volume_handle,
            publish_context: va
                .status
                .and_then(|s| s.attachment_metadata)
                .unwrap_or_default(),
            volume_context: csi.volume_attributes.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// Deletes every VolumeAttachment, waits for them to be detached and gone, then deletes every
/// PVC and waits for the driver's PVs to be gone.
pub async fn delete_all(
    admin: &Client,
    driver: &str,
    deadline: Duration,
) -> Result<DeletionOutcome> {
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), NAMESPACE);
    let vas = Api::<VolumeAttachment>::all(admin.clone());
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let started = Instant::now();
    vas.delete_collection(&DeleteParams::default(), &selector())
        .await?;
    loop {
        let left = vas.list(&selector()).await?.items.len();
        if left == 0 {
            break;
        }
        if started.elapsed() > deadline {
            bail!("{left} VolumeAttachments left after {deadline:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    let detached_seconds = started.elapsed().as_secs_f64();
    pvcs.delete_collection(&DeleteParams::default(), &selector())
        .await?;
    loop {
        let left = pvs
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|pv| {
                pv.spec
                    .as_ref()
                    .and_then(|s| s.csi.as_ref())
                    .is_some_and(|c| c.driver == driver)
            })
            .count();
        if left == 0 {
            break;
        }
        if started.elapsed() > deadline {
            bail!("{left} PVs of {driver} left after {deadline:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(DeletionOutcome {
        detached_seconds,
        pvs_gone_seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvcs_spread_over_the_nodes() {
        let nodes: Vec<String> = ["a", "b", "c"].map(String::from).into();
        assert_eq!(pvc_name(7), "bench-0007");
        assert_eq!(node_for(&pvc_name(0), &nodes).unwrap(), "a");
        assert_eq!(node_for(&pvc_name(4), &nodes).unwrap(), "b");
        assert_eq!(node_for("other", &nodes), None);
        assert_eq!(node_for(&pvc_name(1), &[]), None);
    }
}
