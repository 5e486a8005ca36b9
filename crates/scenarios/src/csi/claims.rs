//! The Kubernetes side of the CSI drivers' sidecar flows: a StorageClass of the driver, claims
//! in `default`, and the VolumeAttachments kube-controller-manager's attach-detach controller
//! would make, with waits for Bound and attached and the attach error the attacher reports.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{
    StorageClass, VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use crate::wait::wait_for;

/// A StorageClass of `driver`: `parameters`, reclaim Delete, Immediate binding, expandable.
pub fn storage_class(
    name: &str,
    driver: &str,
    parameters: BTreeMap<String, String>,
) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: driver.into(),
        parameters: Some(parameters),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("Immediate".into()),
        allow_volume_expansion: Some(true),
        ..Default::default()
    }
}

/// A ReadWriteOnce claim `name` of `gib` GiB of `class`, with `labels`.
pub fn claim(
    name: &str,
    class: &str,
    gib: u32,
    labels: Option<BTreeMap<String, String>>,
) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels,
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".to_string(), Quantity(format!("{gib}Gi")))].into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// VolumeAttachment `name` of PV `pv` to `node` by `driver`, as kube-controller-manager's
/// attach-detach controller makes it, with `labels`.
pub fn attachment(
    name: &str,
    driver: &str,
    pv: &str,
    node: &str,
    labels: Option<BTreeMap<String, String>>,
) -> VolumeAttachment {
    VolumeAttachment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels,
            ..Default::default()
        },
        spec: VolumeAttachmentSpec {
            attacher: driver.into(),
            node_name: node.into(),
            source: VolumeAttachmentSource {
                persistent_volume_name: Some(pv.into()),
                ..Default::default()
            },
        },
        ..Default::default()
    }
}

/// Claims of one StorageClass of one driver, as a cluster admin.
pub struct Claims {
    /// Cluster admin.
    pub admin: kube::Client,
    /// The CSI driver's name (the class's provisioner, the attachments' attacher).
    pub driver: String,
    /// The StorageClass the claims use.
    pub class: String,
    /// The publish-context key of the device path (`devicePath` for EBS, `DevicePath` for Cinder).
    pub device_key: String,
}

impl Claims {
    /// Creates the StorageClass of [`storage_class`] with `parameters`.
    pub async fn create_class(&self, parameters: &[(&str, &str)]) -> Result<()> {
        let parameters = parameters
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Api::<StorageClass>::all(self.admin.clone())
            .create(
                &PostParams::default(),
                &storage_class(&self.class, &self.driver, parameters),
            )
            .await
            .with_context(|| format!("creating StorageClass {}", self.class))?;
        Ok(())
    }

    /// Creates claim `name` of `gib` GiB in `default`.
    pub async fn create_pvc(&self, name: &str, gib: u32) -> Result<()> {
        self.pvcs()
            .create(&PostParams::default(), &claim(name, &self.class, gib, None))
            .await
            .with_context(|| format!("creating claim {name}"))?;
        Ok(())
    }

    /// Claims in `default`.
    pub fn pvcs(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.admin.clone(), "default")
    }

    /// PersistentVolumes.
    pub fn pvs(&self) -> Api<PersistentVolume> {
        Api::all(self.admin.clone())
    }

    /// VolumeAttachments.
    pub fn vas(&self) -> Api<VolumeAttachment> {
        Api::all(self.admin.clone())
    }

    /// Waits until claim `name` is Bound; its PV's name and volume ID.
    pub async fn wait_bound(&self, name: &str, timeout: Duration) -> Result<(String, String)> {
        let pvcs = self.pvcs();
        let pv = wait_for(&format!("claim {name} to be bound"), timeout, || async {
            let pvc = pvcs.get(name).await?;
            let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
            Ok(bound
                .then(|| pvc.spec.and_then(|s| s.volume_name))
                .flatten())
        })
        .await?;
        let csi = self
            .pvs()
            .get(&pv)
            .await?
            .spec
            .and_then(|s| s.csi)
            .context("the PV has no CSI source")?;
        anyhow::ensure!(
            csi.driver == self.driver,
            "PV {pv} is of driver {}",
            csi.driver
        );
        Ok((pv, csi.volume_handle))
    }

    /// Creates VolumeAttachment `name` of PV `pv` to `node`.
    pub async fn attach(&self, name: &str, pv: &str, node: &str) -> Result<()> {
        self.vas()
            .create(
                &PostParams::default(),
                &attachment(name, &self.driver, pv, node, None),
            )
            .await
            .with_context(|| format!("creating VolumeAttachment {name}"))?;
        Ok(())
    }

    /// Waits until VolumeAttachment `name` is attached; its device path.
    pub async fn wait_attached(&self, name: &str, timeout: Duration) -> Result<String> {
        let vas = self.vas();
        let key = &self.device_key;
        wait_for(&format!("{name} to be attached"), timeout, || async {
            let status = vas.get(name).await?.status.unwrap_or_default();
            Ok(status.attached.then(|| {
                status
                    .attachment_metadata
                    .unwrap_or_default()
                    .get(key)
                    .cloned()
                    .unwrap_or_default()
            }))
        })
        .await
    }

    /// Deletes VolumeAttachment `name` and waits (`step`) until it is detached and gone.
    pub async fn detach(&self, name: &str, step: Duration) -> Result<()> {
        let vas = self.vas();
        vas.delete(name, &DeleteParams::default()).await?;
        wait_for(
            "the VolumeAttachment to be detached and gone",
            step,
            || async { Ok(vas.get_opt(name).await?.is_none().then_some(())) },
        )
        .await
    }

    /// Deletes claim `name` and waits (`step`) until its PV `pv` is deleted.
    pub async fn delete_claim(&self, name: &str, pv: &str, step: Duration) -> Result<()> {
        self.pvcs().delete(name, &DeleteParams::default()).await?;
        let pvs = self.pvs();
        wait_for("the PV to be deleted", step, || async {
            Ok(pvs.get_opt(pv).await?.is_none().then_some(()))
        })
        .await
    }

    /// Claims `data-0..n` of 1 GiB, each attached to `node` as `csi-<i>` once bound; returns
    /// each claim's PV and volume ID once every attachment is attached (`step` per wait).
    pub async fn provision_and_attach(
        &self,
        n: usize,
        node: &str,
        step: Duration,
    ) -> Result<Vec<(String, String)>> {
        for i in 0..n {
            self.create_pvc(&format!("data-{i}"), 1).await?;
        }
        let mut volumes = Vec::new();
        for i in 0..n {
            let (pv, volume) = self.wait_bound(&format!("data-{i}"), step).await?;
            self.attach(&format!("csi-{i}"), &pv, node).await?;
            volumes.push((pv, volume));
        }
        for i in 0..n {
            self.wait_attached(&format!("csi-{i}"), step).await?;
        }
        Ok(volumes)
    }

    /// Undoes [`Claims::provision_and_attach`]: deletes every `csi-<i>`, then each claim once its
    /// attachment is gone, and waits until the PVs `volumes` names are deleted.
    pub async fn detach_and_delete(
        &self,
        volumes: &[(String, String)],
        step: Duration,
    ) -> Result<()> {
        let vas = self.vas();
        for i in 0..volumes.len() {
            vas.delete(&format!("csi-{i}"), &DeleteParams::default())
                .await?;
        }
        for i in 0..volumes.len() {
            let name = format!("csi-{i}");
            wait_for(&format!("{name} to be gone"), step, || async {
                Ok(vas.get_opt(&name).await?.is_none().then_some(()))
            })
            .await?;
            self.pvcs()
                .delete(&format!("data-{i}"), &DeleteParams::default())
                .await?;
        }
        let pvs = self.pvs();
        for (pv, _) in volumes {
            wait_for(&format!("PV {pv} to be deleted"), step, || async {
                Ok(pvs.get_opt(pv).await?.is_none().then_some(()))
            })
            .await?;
        }
        Ok(())
    }

    /// The attach error of VolumeAttachment `name` and whether it is attached.
    pub async fn attach_error(&self, name: &str) -> Result<(Option<String>, bool)> {
        let status = self.vas().get(name).await?.status.unwrap_or_default();
        Ok((status.attach_error.and_then(|e| e.message), status.attached))
    }
}
