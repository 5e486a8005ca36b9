//! `VirtualMachine` (virtualization.deckhouse.io/v1alpha2): the tenant node's machine in the
//! parent namespace. Spec fields are those a tenant writes; status fields are those the platform
//! reports and Stratus reads (phase, IP address, block devices).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::resource::namespaced_kind;

/// A virtual machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachine {
    /// `virtualization.deckhouse.io/v1alpha2`.
    #[serde(default)]
    pub api_version: String,
    /// `VirtualMachine`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: VirtualMachineSpec,
    /// Observed state, written by the platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VirtualMachineStatus>,
}

namespaced_kind!(VirtualMachine, "VirtualMachine", "virtualmachines");

/// `spec` of a VirtualMachine (the fields Stratus writes or reads).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// `AlwaysOn|AlwaysOff|Manual|AlwaysOnUnlessStoppedManually` (platform default: the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<String>,
    /// The VirtualMachineClass.
    #[serde(default)]
    pub virtual_machine_class_name: String,
    /// CPU settings.
    #[serde(default)]
    pub cpu: Cpu,
    /// Memory settings.
    #[serde(default)]
    pub memory: Memory,
    /// Disks and images, in boot order.
    #[serde(default)]
    pub block_device_refs: Vec<BlockDeviceRef>,
    /// `Manual|Never|AlwaysSafe|PreferSafe|AlwaysForced|PreferForced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_migration_policy: Option<String>,
    /// `Windows|Generic|Legacy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<String>,
    /// `BIOS|EFI|EFIWithSecureBoot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<String>,
    /// Paravirtualized devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_paravirtualization: Option<bool>,
    /// Cloud-init or sysprep data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Provisioning>,
}

/// `spec.cpu`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Number of cores (at least 1).
    #[serde(default)]
    pub cores: i32,
    /// Guaranteed share: `5%|10%|25%|50%|100%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_fraction: Option<String>,
}

/// `spec.memory`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// A quantity, e.g. `2Gi`.
    #[serde(default)]
    pub size: String,
}

/// One entry of `spec.blockDeviceRefs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceRef {
    /// `ClusterVirtualImage|VirtualImage|VirtualDisk`.
    pub kind: String,
    /// The object's name.
    pub name: String,
}

/// `spec.provisioning`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provisioning {
    /// `UserData|UserDataRef|SysprepRef`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Inline cloud-init (for `UserData`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// The Secret holding cloud-init (for `UserDataRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_ref: Option<UserDataRef>,
}

/// `spec.provisioning.userDataRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserDataRef {
    /// `Secret`.
    pub kind: String,
    /// The Secret's name (same namespace).
    pub name: String,
}

/// `status` of a VirtualMachine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    /// See [`VmPhase`].
    #[serde(default)]
    pub phase: String,
    /// The platform node running the VM.
    #[serde(default)]
    pub node_name: String,
    /// The VirtualMachineIPAddress holding the VM's address.
    #[serde(default)]
    pub virtual_machine_ip_address_name: String,
    /// The VM's IP address (empty until assigned).
    #[serde(default)]
    pub ip_address: String,
    /// Block devices and whether each is attached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_refs: Vec<BlockDeviceStatusRef>,
}

/// One entry of `status.blockDeviceRefs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceStatusRef {
    /// `ClusterVirtualImage|VirtualImage|VirtualDisk`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// Size as a quantity string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Attached to the running VM.
    #[serde(default)]
    pub attached: bool,
    /// Device target inside the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Attached by hot plug (a VMBDA).
    #[serde(default)]
    pub hotplugged: bool,
    /// The VMBDA that attached it, if hot-plugged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_block_device_attachment_name: Option<String>,
}

/// `status.phase` of a VirtualMachine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VmPhase {
    /// Being scheduled.
    Pending,
    /// Booting.
    Starting,
    /// Running.
    Running,
    /// Shutting down.
    Stopping,
    /// Stopped.
    Stopped,
    /// Being deleted.
    Terminating,
    /// Live-migrating.
    Migrating,
    /// Paused.
    Pause,
    /// Failed to start or broke while running.
    Degraded,
}

impl VmPhase {
    /// Every phase.
    pub const ALL: [VmPhase; 9] = [
        VmPhase::Pending,
        VmPhase::Starting,
        VmPhase::Running,
        VmPhase::Stopping,
        VmPhase::Stopped,
        VmPhase::Terminating,
        VmPhase::Migrating,
        VmPhase::Pause,
        VmPhase::Degraded,
    ];

    /// The string the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            VmPhase::Pending => "Pending",
            VmPhase::Starting => "Starting",
            VmPhase::Running => "Running",
            VmPhase::Stopping => "Stopping",
            VmPhase::Stopped => "Stopped",
            VmPhase::Terminating => "Terminating",
            VmPhase::Migrating => "Migrating",
            VmPhase::Pause => "Pause",
            VmPhase::Degraded => "Degraded",
        }
    }

    /// Parses the API string; `None` for an empty or unknown phase.
    pub fn parse(text: &str) -> Option<VmPhase> {
        VmPhase::ALL.into_iter().find(|p| p.as_str() == text)
    }
}

impl VirtualMachine {
    /// A VM with `apiVersion`/`kind` filled, ready to create.
    pub fn new(name: &str, namespace: &str, spec: VirtualMachineSpec) -> VirtualMachine {
        VirtualMachine {
            api_version: crate::API_VERSION.into(),
            kind: "VirtualMachine".into(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }

    /// The reported phase, if any and known.
    pub fn phase(&self) -> Option<VmPhase> {
        self.status.as_ref().and_then(|s| VmPhase::parse(&s.phase))
    }

    /// The reported IP address, if assigned.
    pub fn ip_address(&self) -> Option<&str> {
        self.status
            .as_ref()
            .map(|s| s.ip_address.as_str())
            .filter(|ip| !ip.is_empty())
    }

    /// The value of a label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }

    /// The VM's name (empty if unnamed).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_round_trip_and_unknown_is_none() {
        for phase in VmPhase::ALL {
            assert_eq!(VmPhase::parse(phase.as_str()), Some(phase));
        }
        assert_eq!(VmPhase::parse(""), None);
        assert_eq!(VmPhase::parse("Failed"), None);
    }

    #[test]
    fn platform_objects_with_unknown_fields_parse() {
        let vm: VirtualMachine = serde_json::from_value(serde_json::json!({
            "apiVersion": "virtualization.deckhouse.io/v1alpha2",
            "kind": "VirtualMachine",
            "metadata": {"name": "vm-1", "namespace": "t", "labels": {"dvp.deckhouse.io/hostname": "n1"}},
            "spec": {"cpu": {"cores": 1}, "gpus": [{"gpuClassName": "x"}]},
            "status": {"phase": "Running", "ipAddress": "10.0.0.5", "stats": {"x": 1}}
        }))
        .unwrap();
        assert_eq!(vm.phase(), Some(VmPhase::Running));
        assert_eq!(vm.ip_address(), Some("10.0.0.5"));
        assert_eq!(vm.label(crate::labels::HOSTNAME), Some("n1"));
        let empty = VirtualMachine::default();
        assert_eq!((empty.phase(), empty.ip_address()), (None, None));
    }
}
