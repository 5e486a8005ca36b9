//! The parent cluster as capdvp uses it: creates and deletes of VMs, disks, cloud-init Secrets
//! and VMBDAs in the tenant namespace, the in-place update of a VM's policies, and the existence
//! checks of the VM class and boot image.
//! Every call is counted by operation; errors say which object and whether the parent refused
//! (a 4xx answer: show it) or could not be reached (retry).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use stratus_dvp_api::{VirtualDisk, VirtualMachine, VirtualMachineBlockDeviceAttachment};

use crate::metrics::Metrics;

/// A failed parent call.
#[derive(Debug, thiserror::Error)]
pub enum ParentError {
    /// The parent answered with a refusal (forbidden, invalid, denied by admission).
    #[error("the parent cluster refused to {what}: {message}")]
    Refused {
        /// What was asked.
        what: String,
        /// The parent's message.
        message: String,
        /// The HTTP status.
        code: u16,
    },
    /// The parent could not be reached or failed.
    #[error("the parent cluster could not {what}: {source}")]
    Unavailable {
        /// What was asked.
        what: String,
        /// Why.
        source: kube::Error,
    },
}

fn classify(what: String, e: kube::Error) -> ParentError {
    match e {
        kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429 => {
            ParentError::Refused {
                what,
                message: s.message.clone(),
                code: s.code,
            }
        }
        source => ParentError::Unavailable { what, source },
    }
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The tenant namespace of the parent.
#[derive(Clone)]
pub struct Parent {
    client: kube::Client,
    namespace: String,
    metrics: Arc<Metrics>,
}

impl Parent {
    /// The namespace `namespace` of the parent reached by `client`.
    pub fn new(client: kube::Client, namespace: &str, metrics: Arc<Metrics>) -> Parent {
        Parent {
            client,
            namespace: namespace.to_string(),
            metrics,
        }
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn count(&self, operation: &str) {
        self.metrics.parent_request(operation);
    }

    /// Whether the cluster-scoped or namespaced object `kind`/`name` of the virtualization group
    /// exists; `None` when this identity may not look (no ClusterRole for it): not checked.
    pub async fn exists(
        &self,
        kind: &str,
        plural: &str,
        namespaced: bool,
        name: &str,
    ) -> Result<Option<bool>, ParentError> {
        self.count("get_prerequisite");
        let gvk = GroupVersionKind::gvk(stratus_dvp_api::GROUP, stratus_dvp_api::VERSION, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(self.client.clone(), &self.namespace, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        };
        match api.get_opt(name).await {
            Ok(found) => Ok(Some(found.is_some())),
            Err(e) if is_code(&e, 403) => Ok(None),
            Err(e) => Err(classify(format!("read {kind} {name}"), e)),
        }
    }

    /// The VM and disks labelled as the machine `namespace/name`'s, asked directly (one LIST
    /// each): the check before a deleted machine is let go, so a watch that missed an event never
    /// leaves objects behind unnoticed.
    pub async fn machine_objects(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(Option<String>, Vec<String>), ParentError> {
        let selector = format!(
            "{}={name},{}={namespace}",
            crate::names::MACHINE_LABEL,
            crate::names::MACHINE_NAMESPACE_LABEL
        );
        let lp = kube::api::ListParams::default().labels(&selector);
        self.count("list_vms");
        let vms = self
            .api::<VirtualMachine>()
            .list(&lp)
            .await
            .map_err(|e| classify(format!("list the VMs of {name}"), e))?;
        self.count("list_disks");
        let disks = self
            .api::<VirtualDisk>()
            .list(&lp)
            .await
            .map_err(|e| classify(format!("list the disks of {name}"), e))?;
        Ok((
            vms.items.first().map(|v| v.name().to_string()),
            disks
                .items
                .iter()
                .filter_map(|d| d.metadata.name.clone())
                .collect(),
        ))
    }

    /// Creates the VM; one that exists already (a create cut short, a stale cache) is read back.
    pub async fn create_vm(&self, vm: &VirtualMachine) -> Result<VirtualMachine, ParentError> {
        let name = vm.name().to_string();
        self.count("create_vm");
        let api: Api<VirtualMachine> = self.api();
        match api.create(&PostParams::default(), vm).await {
            Ok(vm) => Ok(vm),
            Err(e) if is_code(&e, 409) => {
                self.count("get_vm");
                api.get(&name)
                    .await
                    .map_err(|e| classify(format!("read VirtualMachine {name}"), e))
            }
            Err(e) => Err(classify(format!("create VirtualMachine {name}"), e)),
        }
    }

    /// The VM `name`, if it exists (read directly: the in-place update checks what it wrote).
    pub async fn vm(&self, name: &str) -> Result<Option<VirtualMachine>, ParentError> {
        self.count("get_vm");
        self.api::<VirtualMachine>()
            .get_opt(name)
            .await
            .map_err(|e| classify(format!("read VirtualMachine {name}"), e))
    }

    /// Merge-patches the VM `name` (an in-place update of its policies).
    pub async fn patch_vm(&self, name: &str, patch: &serde_json::Value) -> Result<(), ParentError> {
        self.count("patch_vm");
        self.api::<VirtualMachine>()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|e| classify(format!("patch VirtualMachine {name}"), e))
    }

    /// Creates the disk; existing already is success.
    pub async fn create_disk(&self, disk: &VirtualDisk) -> Result<(), ParentError> {
        self.count("create_disk");
        let name = disk.metadata.name.clone().unwrap_or_default();
        match self
            .api::<VirtualDisk>()
            .create(&PostParams::default(), disk)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, 409) => Ok(()),
            Err(e) => Err(classify(format!("create VirtualDisk {name}"), e)),
        }
    }

    /// Creates the cloud-init Secret; existing already is success.
    pub async fn create_secret(&self, secret: &Secret) -> Result<(), ParentError> {
        self.count("create_secret");
        let name = secret.metadata.name.clone().unwrap_or_default();
        match self
            .api::<Secret>()
            .create(&PostParams::default(), secret)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, 409) => Ok(()),
            Err(e) => Err(classify(format!("create Secret {name}"), e)),
        }
    }

    async fn delete<K>(&self, operation: &str, kind: &str, name: &str) -> Result<(), ParentError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        self.count(operation);
        match self
            .api::<K>()
            .delete(name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, 404) => Ok(()),
            Err(e) => Err(classify(format!("delete {kind} {name}"), e)),
        }
    }

    /// Deletes the VM; gone already is success.
    pub async fn delete_vm(&self, name: &str) -> Result<(), ParentError> {
        self.delete::<VirtualMachine>("delete_vm", "VirtualMachine", name)
            .await
    }

    /// Deletes the disk; gone already is success.
    pub async fn delete_disk(&self, name: &str) -> Result<(), ParentError> {
        self.delete::<VirtualDisk>("delete_disk", "VirtualDisk", name)
            .await
    }

    /// Deletes the Secret; gone already is success.
    pub async fn delete_secret(&self, name: &str) -> Result<(), ParentError> {
        self.delete::<Secret>("delete_secret", "Secret", name).await
    }

    /// Deletes the VMBDA (detaches its disk); gone already is success.
    pub async fn delete_attachment(&self, name: &str) -> Result<(), ParentError> {
        self.delete::<VirtualMachineBlockDeviceAttachment>(
            "delete_attachment",
            "VirtualMachineBlockDeviceAttachment",
            name,
        )
        .await
    }
}
