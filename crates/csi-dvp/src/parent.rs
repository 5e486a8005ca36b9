//! The parent cluster as the driver sees it: VirtualDisks, VMBDAs and VirtualMachines in the
//! tenant's namespace, with Kubernetes errors turned into the core's [`BackendError`]s (404 →
//! gone, 409 → conflict, 403 → a clear permission error, unreachable or 5xx → Unavailable so the
//! sidecars retry).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_csi::BackendError;
use stratus_dvp_api::labels::HOSTNAME;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment};

use crate::names::{vmbda_labels, VMBDA_DISK_LABEL};

/// The tenant namespace of the parent cluster.
#[derive(Clone)]
pub struct Parent {
    disks: Api<VirtualDisk>,
    vmbdas: Api<VirtualMachineBlockDeviceAttachment>,
    vms: Api<VirtualMachine>,
    namespace: String,
}

/// Turns a Kubernetes client error into the core's error, naming `what` was asked.
pub fn map_error(what: &str, e: kube::Error) -> BackendError {
    match &e {
        kube::Error::Api(s) if s.code == 404 => BackendError::NotFound(format!("{what}: {e}")),
        kube::Error::Api(s) if s.code == 409 => BackendError::AlreadyExists(format!("{what}: {e}")),
        kube::Error::Api(s) if s.code == 403 => BackendError::Internal(format!(
            "{what}: forbidden in the parent cluster (is the shipped Role bound?): {e}"
        )),
        kube::Error::Api(s) if s.code == 400 || s.code == 422 => {
            BackendError::InvalidArgument(format!("{what}: {e}"))
        }
        _ => BackendError::Unavailable(format!("{what}: parent cluster: {e}")),
    }
}

fn not_found(e: &BackendError) -> bool {
    matches!(e, BackendError::NotFound(_))
}

impl Parent {
    /// The namespace `namespace` of the parent reached by `client`.
    pub fn new(client: kube::Client, namespace: &str) -> Parent {
        Parent {
            disks: Api::namespaced(client.clone(), namespace),
            vmbdas: Api::namespaced(client.clone(), namespace),
            vms: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The disk, `None` if it does not exist.
    pub async fn disk(&self, name: &str) -> Result<Option<VirtualDisk>, BackendError> {
        self.disks
            .get_opt(name)
            .await
            .map_err(|e| map_error(&format!("reading VirtualDisk {name}"), e))
    }

    /// Disks matching a label selector.
    pub async fn disks(&self, selector: &str) -> Result<Vec<VirtualDisk>, BackendError> {
        Ok(self
            .disks
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| map_error("listing VirtualDisks", e))?
            .items)
    }

    /// Creates the disk; one created meanwhile under the same name is returned instead.
    pub async fn create_disk(&self, disk: &VirtualDisk) -> Result<VirtualDisk, BackendError> {
        let name = disk.metadata.name.clone().unwrap_or_default();
        match self.disks.create(&PostParams::default(), disk).await {
            Ok(d) => Ok(d),
            Err(kube::Error::Api(s)) if s.code == 409 => self.disk(&name).await?.ok_or_else(|| {
                BackendError::Unavailable(format!("VirtualDisk {name} is being replaced"))
            }),
            Err(e) => Err(map_error(&format!("creating VirtualDisk {name}"), e)),
        }
    }

    /// Deletes the disk; gone already is success.
    pub async fn delete_disk(&self, name: &str) -> Result<(), BackendError> {
        match self.disks.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = map_error(&format!("deleting VirtualDisk {name}"), e);
                if not_found(&e) {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Sets the disk's requested size.
    pub async fn resize_disk(&self, name: &str, size: &str) -> Result<(), BackendError> {
        let patch = json!({"spec": {"persistentVolumeClaim": {"size": size}}});
        self.disks
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| map_error(&format!("resizing VirtualDisk {name}"), e))?;
        Ok(())
    }

    /// The VM backing the tenant node `node`: the VM labelled with it as its hostname, else the
    /// VM of that name; `None` when there is neither.
    pub async fn vm_of_node(&self, node: &str) -> Result<Option<VirtualMachine>, BackendError> {
        let labelled = self
            .vms
            .list(&ListParams::default().labels(&format!("{HOSTNAME}={node}")))
            .await
            .map_err(|e| map_error(&format!("finding the VM of node {node}"), e))?
            .items;
        if let Some(vm) = labelled.into_iter().next() {
            return Ok(Some(vm));
        }
        self.vms
            .get_opt(node)
            .await
            .map_err(|e| map_error(&format!("reading VirtualMachine {node}"), e))
    }

    /// Every attachment of the disk.
    pub async fn attachments_of(
        &self,
        disk: &str,
    ) -> Result<Vec<VirtualMachineBlockDeviceAttachment>, BackendError> {
        Ok(self
            .vmbdas
            .list(&ListParams::default().labels(&format!("{VMBDA_DISK_LABEL}={disk}")))
            .await
            .map_err(|e| map_error(&format!("listing the attachments of {disk}"), e))?
            .items)
    }

    /// Every attachment the driver made (any disk).
    pub async fn all_attachments(
        &self,
    ) -> Result<Vec<VirtualMachineBlockDeviceAttachment>, BackendError> {
        Ok(self
            .vmbdas
            .list(&ListParams::default().labels(VMBDA_DISK_LABEL))
            .await
            .map_err(|e| map_error("listing attachments", e))?
            .items)
    }

    /// The attachment, `None` if it does not exist.
    pub async fn attachment(
        &self,
        name: &str,
    ) -> Result<Option<VirtualMachineBlockDeviceAttachment>, BackendError> {
        self.vmbdas
            .get_opt(name)
            .await
            .map_err(|e| map_error(&format!("reading attachment {name}"), e))
    }

    /// Creates the attachment `name` of `disk` to `vm`, owned by the VM (so it goes with it);
    /// one that exists already is success.
    pub async fn create_attachment(
        &self,
        name: &str,
        disk: &str,
        vm: &VirtualMachine,
    ) -> Result<(), BackendError> {
        let mut a =
            VirtualMachineBlockDeviceAttachment::new(name, &self.namespace, vm.name(), disk);
        a.metadata.labels = Some(vmbda_labels(disk, vm.name()));
        a.metadata.owner_references = Some(vec![OwnerReference {
            api_version: stratus_dvp_api::API_VERSION.into(),
            kind: "VirtualMachine".into(),
            name: vm.name().into(),
            uid: vm.metadata.uid.clone().unwrap_or_default(),
            controller: None,
            block_owner_deletion: None,
        }]);
        match self.vmbdas.create(&PostParams::default(), &a).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(map_error(&format!("creating attachment {name}"), e)),
        }
    }

    /// Deletes the attachment; gone already is success.
    pub async fn delete_attachment(&self, name: &str) -> Result<(), BackendError> {
        match self.vmbdas.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = map_error(&format!("deleting attachment {name}"), e);
                if not_found(&e) {
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }
}
