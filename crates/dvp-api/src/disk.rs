//! `VirtualDisk` and `VirtualMachineBlockDeviceAttachment` (VMBDA): a tenant volume in the parent
//! and its hot-plug attachment to a VM.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::resource::namespaced_kind;

/// A virtual disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualDisk {
    /// `virtualization.deckhouse.io/v1alpha2`.
    #[serde(default)]
    pub api_version: String,
    /// `VirtualDisk`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: VirtualDiskSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VirtualDiskStatus>,
}

namespaced_kind!(VirtualDisk, "VirtualDisk", "virtualdisks");

/// `spec` of a VirtualDisk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualDiskSpec {
    /// What the disk is filled from (an image or snapshot); empty disk when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<DiskDataSource>,
    /// Where the disk's data lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<VirtualDiskPvc>,
}

/// `spec.dataSource` of a VirtualDisk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskDataSource {
    /// `HTTP|ContainerImage|ObjectRef|Upload`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The image or snapshot, for `ObjectRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<DiskObjectRef>,
}

/// `spec.dataSource.objectRef` of a VirtualDisk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskObjectRef {
    /// `VirtualImage|ClusterVirtualImage|VirtualDiskSnapshot`.
    pub kind: String,
    /// The object's name.
    pub name: String,
}

/// `spec.persistentVolumeClaim`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualDiskPvc {
    /// Requested size (a quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// The parent cluster's StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// `status` of a VirtualDisk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualDiskStatus {
    /// `Pending|Provisioning|…|Ready|Resizing|Failed|…`.
    #[serde(default)]
    pub phase: String,
    /// Provisioned capacity, e.g. `10Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
}

/// A hot-plug attachment of a disk to a VM.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineBlockDeviceAttachment {
    /// `virtualization.deckhouse.io/v1alpha2`.
    #[serde(default)]
    pub api_version: String,
    /// `VirtualMachineBlockDeviceAttachment`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: VmbdaSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VmbdaStatus>,
}

namespaced_kind!(
    VirtualMachineBlockDeviceAttachment,
    "VirtualMachineBlockDeviceAttachment",
    "virtualmachineblockdeviceattachments"
);

/// `spec` of a VMBDA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmbdaSpec {
    /// The VM to attach to.
    #[serde(default)]
    pub virtual_machine_name: String,
    /// What to attach.
    #[serde(default)]
    pub block_device_ref: AttachmentBlockDeviceRef,
}

/// `spec.blockDeviceRef` of a VMBDA.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentBlockDeviceRef {
    /// `VirtualDisk|VirtualImage|ClusterVirtualImage`.
    pub kind: String,
    /// The object's name.
    pub name: String,
}

/// `status` of a VMBDA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmbdaStatus {
    /// `Pending|InProgress|Attached|Failed|Terminating`.
    #[serde(default)]
    pub phase: String,
    /// The VM it is attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_name: Option<String>,
}

impl VirtualDisk {
    /// A disk with `apiVersion`/`kind` filled, ready to create.
    pub fn new(name: &str, namespace: &str, spec: VirtualDiskSpec) -> VirtualDisk {
        VirtualDisk {
            api_version: crate::API_VERSION.into(),
            kind: "VirtualDisk".into(),
            metadata: meta(name, namespace),
            spec,
            status: None,
        }
    }
}

impl VirtualMachineBlockDeviceAttachment {
    /// An attachment of the VirtualDisk `disk` to the VM `vm`, ready to create.
    pub fn new(name: &str, namespace: &str, vm: &str, disk: &str) -> Self {
        VirtualMachineBlockDeviceAttachment {
            api_version: crate::API_VERSION.into(),
            kind: "VirtualMachineBlockDeviceAttachment".into(),
            metadata: meta(name, namespace),
            spec: VmbdaSpec {
                virtual_machine_name: vm.into(),
                block_device_ref: AttachmentBlockDeviceRef {
                    kind: "VirtualDisk".into(),
                    name: disk.into(),
                },
            },
            status: None,
        }
    }
}

fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..ObjectMeta::default()
    }
}
