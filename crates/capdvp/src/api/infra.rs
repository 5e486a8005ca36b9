//! capdvp's own kinds, `infrastructure.cluster.x-k8s.io/v1alpha1`, with the field names, defaults
//! and status of Deckhouse's CRDs: DeckhouseCluster (the cluster's infrastructure: nothing to make
//! in DVP, so it reports provisioned), DeckhouseMachine (one VM) and DeckhouseMachineTemplate
//! (what a MachineDeployment clones).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

use super::resource::namespaced_kind;
use super::{API_VERSION, GROUP, VERSION};

/// The finalizer on every DeckhouseMachine capdvp reconciled.
pub const MACHINE_FINALIZER: &str = "deckhousemachine.infrastructure.cluster.x-k8s.io";
/// The Machine condition reporting the VM.
pub const VM_READY_CONDITION: &str = "VirtualMachineReady";
/// The default number of cores.
pub const DEFAULT_CORES: i32 = 4;
/// The default CPU fraction.
pub const DEFAULT_CPU_FRACTION: &str = "100%";
/// The default memory.
pub const DEFAULT_MEMORY: &str = "8Gi";
/// The default boot image kind.
pub const DEFAULT_IMAGE_KIND: &str = "VirtualImage";
/// The default bootloader.
pub const DEFAULT_BOOTLOADER: &str = "EFI";

/// The infrastructure of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseCluster {
    /// `infrastructure.cluster.x-k8s.io/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `DeckhouseCluster`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: DeckhouseClusterSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeckhouseClusterStatus>,
}

namespaced_kind!(
    DeckhouseCluster,
    GROUP,
    VERSION,
    API_VERSION,
    "DeckhouseCluster",
    "deckhouseclusters"
);

/// `spec` of a DeckhouseCluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseClusterSpec {
    /// Where the control plane answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
}

/// `spec.controlPlaneEndpoint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiEndpoint {
    /// Host name or address.
    #[serde(default)]
    pub host: String,
    /// Port.
    #[serde(default)]
    pub port: i32,
}

/// `status` of a DeckhouseCluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseClusterStatus {
    /// The v1beta1 contract's readiness.
    #[serde(default)]
    pub ready: bool,
    /// A terminal problem's type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// A terminal problem's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// The v1beta2 contract's initialization flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
}

/// `status.initialization` of a DeckhouseCluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    /// The Cluster API v1beta2 contract field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
    /// Deckhouse's name for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// Whether the control plane is initialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// One VM of a cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseMachine {
    /// `infrastructure.cluster.x-k8s.io/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `DeckhouseMachine`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: DeckhouseMachineSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeckhouseMachineStatus>,
}

namespaced_kind!(
    DeckhouseMachine,
    GROUP,
    VERSION,
    API_VERSION,
    "DeckhouseMachine",
    "deckhousemachines"
);

/// `spec` of a DeckhouseMachine (Deckhouse's field names; defaults applied by the CRD schema
/// and again by [`DeckhouseMachineSpec::with_defaults`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseMachineSpec {
    /// `dvp://<vm name>`, set once the VM exists.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The parent's VirtualMachineClass.
    #[serde(default)]
    pub vm_class_name: String,
    /// Cores and their guaranteed share.
    #[serde(default, skip_serializing_if = "MachineCpu::is_unset")]
    pub cpu: MachineCpu,
    /// RAM (a quantity; the schema's default when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory: String,
    /// Size of the boot disk (a quantity).
    #[serde(default)]
    pub root_disk_size: String,
    /// The parent StorageClass of the boot disk.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root_disk_storage_class: String,
    /// More disks, attached after the boot disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_disks: Vec<AdditionalDisk>,
    /// The image the boot disk is filled from.
    #[serde(default)]
    pub boot_disk_image_ref: DiskImageRef,
    /// `BIOS|EFI|EFIWithSecureBoot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<String>,
    /// The VM's run policy (newer Deckhouse code); `AlwaysOnUnlessStoppedManually` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<String>,
    /// The VM's live-migration policy (newer Deckhouse code); by role when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_migration_policy: Option<String>,
}

/// `spec.cpu`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineCpu {
    /// Cores (default 4; the schema's default when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cores: i32,
    /// Guaranteed share, e.g. `100%` (the default when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpu_fraction: String,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl MachineCpu {
    /// Nothing set: the schema's defaults apply.
    pub fn is_unset(&self) -> bool {
        self.cores == 0 && self.cpu_fraction.is_empty()
    }
}

/// `spec.bootDiskImageRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskImageRef {
    /// `ClusterVirtualImage|VirtualImage|VirtualDiskSnapshot` (default `VirtualImage`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The image's name.
    #[serde(default)]
    pub name: String,
}

/// One of `spec.additionalDisks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalDisk {
    /// Size (a quantity).
    pub size: String,
    /// The parent StorageClass.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub storage_class: String,
}

/// `status` of a DeckhouseMachine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseMachineStatus {
    /// The v1beta1 contract's readiness: the VM runs.
    #[serde(default)]
    pub ready: bool,
    /// Host names and addresses of the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// A terminal problem's type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// A terminal problem's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// `VirtualMachineReady` and friends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The v1beta2 contract's initialization flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<MachineInitialization>,
}

/// One of `status.addresses`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineAddress {
    /// `Hostname|InternalIP|ExternalIP|InternalDNS|ExternalDNS`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}

/// `status.initialization` of a DeckhouseMachine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineInitialization {
    /// The Cluster API v1beta2 contract field: the VM is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
    /// Deckhouse's name for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The bootstrap data was copied into the cloud-init Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_secret_created: Option<bool>,
}

/// What a MachineDeployment clones into DeckhouseMachines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeckhouseMachineTemplate {
    /// `infrastructure.cluster.x-k8s.io/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `DeckhouseMachineTemplate`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The template.
    #[serde(default)]
    pub spec: DeckhouseMachineTemplateSpec,
}

namespaced_kind!(
    DeckhouseMachineTemplate,
    GROUP,
    VERSION,
    API_VERSION,
    "DeckhouseMachineTemplate",
    "deckhousemachinetemplates"
);

/// `spec` of a DeckhouseMachineTemplate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeckhouseMachineTemplateSpec {
    /// The machine template.
    #[serde(default)]
    pub template: DeckhouseMachineTemplateResource,
}

/// `spec.template` of a DeckhouseMachineTemplate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeckhouseMachineTemplateResource {
    /// The DeckhouseMachine spec every clone gets.
    #[serde(default)]
    pub spec: DeckhouseMachineSpec,
}

impl DeckhouseMachineSpec {
    /// The spec with the CRD's defaults filled where a field is empty (objects created before a
    /// default existed, or by clients that bypass defaulting, read the same).
    pub fn with_defaults(mut self) -> Self {
        if self.cpu.cores <= 0 {
            self.cpu.cores = DEFAULT_CORES;
        }
        if self.cpu.cpu_fraction.is_empty() {
            self.cpu.cpu_fraction = DEFAULT_CPU_FRACTION.into();
        }
        if self.memory.is_empty() {
            self.memory = DEFAULT_MEMORY.into();
        }
        if self.boot_disk_image_ref.kind.is_empty() {
            self.boot_disk_image_ref.kind = DEFAULT_IMAGE_KIND.into();
        }
        if self.bootloader.as_deref().unwrap_or_default().is_empty() {
            self.bootloader = Some(DEFAULT_BOOTLOADER.into());
        }
        self
    }
}

impl DeckhouseMachine {
    /// A DeckhouseMachine with `apiVersion`/`kind` filled, ready to create.
    pub fn new(name: &str, namespace: &str, spec: DeckhouseMachineSpec) -> Self {
        DeckhouseMachine {
            api_version: API_VERSION.into(),
            kind: "DeckhouseMachine".into(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The object's namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// Whether it carries capdvp's finalizer.
    pub fn has_finalizer(&self) -> bool {
        self.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == MACHINE_FINALIZER))
    }

    /// Whether deletion was requested.
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deckhouse_field_names_and_defaults() {
        let m: DeckhouseMachine = serde_json::from_value(serde_json::json!({
            "apiVersion": API_VERSION, "kind": "DeckhouseMachine",
            "metadata": {"name": "w-1", "namespace": "d8-cloud-instance-manager"},
            "spec": {"vmClassName": "generic", "rootDiskSize": "20Gi", "rootDiskStorageClass": "fast",
                     "bootDiskImageRef": {"name": "ubuntu"}, "providerID": "dvp://w-1",
                     "additionalDisks": [{"size": "5Gi", "storageClass": "slow"}], "unknown": 1}
        }))
        .unwrap();
        assert_eq!(m.spec.provider_id.as_deref(), Some("dvp://w-1"));
        let spec = m.spec.with_defaults();
        assert_eq!(
            (spec.cpu.cores, spec.cpu.cpu_fraction.as_str()),
            (4, "100%")
        );
        assert_eq!(spec.memory, "8Gi");
        assert_eq!(spec.boot_disk_image_ref.kind, "VirtualImage");
        assert_eq!(spec.bootloader.as_deref(), Some("EFI"));
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["cpu"]["cpuFraction"], "100%");
        assert_eq!(json["providerID"], "dvp://w-1");
    }
}
