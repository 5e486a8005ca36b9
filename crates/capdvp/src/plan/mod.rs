//! Pure reconcile plans of a DeckhouseMachine: what to wait for, what the parent objects look
//! like (VM, boot and additional disks, cloud-init Secret), what the Machine's status says about
//! a VM, and what deleting takes next. No I/O: the driver in [`crate::machine`] gathers the
//! observations, asks here, and carries the answer out.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use k8s_openapi::ByteString;
use stratus_dvp_api::{
    BlockDeviceRef, Cpu, DiskDataSource, DiskObjectRef, Memory, Provisioning, UserDataRef,
    VirtualDisk, VirtualDiskPvc, VirtualDiskSpec, VirtualMachine, VirtualMachineSpec, VmPhase,
};

use crate::api::infra::{
    DeckhouseMachineSpec, MachineAddress, MachineInitialization, VM_READY_CONDITION,
};
use crate::api::{DeckhouseMachine, DeckhouseMachineStatus};
use crate::names;

/// Condition reasons (Deckhouse's where it has them).
pub mod reasons {
    /// The VM runs.
    pub const VM_RUNNING: &str = "VMRunning";
    /// The VM is not running yet.
    pub const VM_NOT_READY: &str = "VMNotReady";
    /// The VM is stopped.
    pub const VM_STOPPED: &str = "VMInStoppedState";
    /// The VM is degraded.
    pub const VM_FAILED: &str = "VMInFailedState";
    /// A parent call failed.
    pub const VM_ERROR: &str = "VMError";
    /// The Cluster's infrastructure is not provisioned.
    pub const WAITING_FOR_CLUSTER: &str = "WaitingForClusterInfrastructure";
    /// The Machine has no bootstrap data yet.
    pub const WAITING_FOR_BOOTSTRAP: &str = "WaitingForBootstrapScript";
    /// No Cluster API Machine owns the DeckhouseMachine yet.
    pub const WAITING_FOR_OWNER: &str = "WaitingForMachineOwner";
    /// The VirtualMachineClass does not exist in the parent.
    pub const CLASS_NOT_FOUND: &str = "VirtualMachineClassNotFound";
    /// The boot image does not exist in the parent.
    pub const IMAGE_NOT_FOUND: &str = "BootImageNotFound";
    /// The parent refused to create the VM.
    pub const VM_REFUSED: &str = "VMCreationRefused";
    /// Deleting.
    pub const DELETING: &str = "Deleting";
}

/// Why a machine cannot proceed yet (or at all): a condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The condition reason.
    pub reason: &'static str,
    /// A sentence naming what is missing.
    pub message: String,
}

/// What the Cluster API side offers so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapiView {
    /// An owning Machine exists.
    pub owned: bool,
    /// The Cluster's name.
    pub cluster: String,
    /// The Cluster's infrastructure is provisioned.
    pub cluster_provisioned: bool,
    /// The Machine's bootstrap data Secret name, once set.
    pub data_secret: Option<String>,
}

/// The first thing a machine waits for on the Cluster API side, if any.
pub fn waiting_for(capi: &CapiView) -> Option<Blocked> {
    if !capi.owned {
        return Some(Blocked {
            reason: reasons::WAITING_FOR_OWNER,
            message: "waiting for a Cluster API Machine to own this DeckhouseMachine".into(),
        });
    }
    if !capi.cluster_provisioned {
        return Some(Blocked {
            reason: reasons::WAITING_FOR_CLUSTER,
            message: format!(
                "waiting for the infrastructure of Cluster {:?} to be provisioned",
                capi.cluster
            ),
        });
    }
    if capi.data_secret.is_none() {
        return Some(Blocked {
            reason: reasons::WAITING_FOR_BOOTSTRAP,
            message:
                "waiting for the Machine's bootstrap data Secret (spec.bootstrap.dataSecretName)"
                    .into(),
        });
    }
    None
}

/// Whether the parent holds the class and image a spec names (`None`: could not be checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prerequisites {
    /// The VirtualMachineClass exists.
    pub class: Option<bool>,
    /// The boot image exists.
    pub image: Option<bool>,
}

/// What is missing in the parent for `spec`, named.
pub fn missing_prerequisite(spec: &DeckhouseMachineSpec, found: Prerequisites) -> Option<Blocked> {
    if found.class == Some(false) {
        return Some(Blocked {
            reason: reasons::CLASS_NOT_FOUND,
            message: format!(
                "VirtualMachineClass {:?} does not exist in the parent cluster",
                spec.vm_class_name
            ),
        });
    }
    if found.image == Some(false) {
        return Some(Blocked {
            reason: reasons::IMAGE_NOT_FOUND,
            message: format!(
                "{} {:?} (spec.bootDiskImageRef) does not exist in the parent cluster",
                spec.boot_disk_image_ref.kind, spec.boot_disk_image_ref.name
            ),
        });
    }
    None
}

/// The VM's run policy for `spec` (`AlwaysOnUnlessStoppedManually` when unset).
pub fn run_policy(spec: &DeckhouseMachineSpec) -> String {
    spec.run_policy
        .clone()
        .unwrap_or_else(|| "AlwaysOnUnlessStoppedManually".into())
}

/// The VM's live-migration policy for `spec`: by role when unset (`PreferForced` for a
/// control-plane machine, `PreferSafe` otherwise).
pub fn live_migration_policy(spec: &DeckhouseMachineSpec, control_plane: bool) -> String {
    spec.live_migration_policy.clone().unwrap_or_else(|| {
        if control_plane {
            "PreferForced".into()
        } else {
            "PreferSafe".into()
        }
    })
}

/// Everything a machine's parent objects are made from.
#[derive(Debug, Clone)]
pub struct Render<'a> {
    /// The DeckhouseMachine's namespace.
    pub namespace: &'a str,
    /// The DeckhouseMachine's name.
    pub machine: &'a str,
    /// Its spec, defaults applied.
    pub spec: &'a DeckhouseMachineSpec,
    /// The parent namespace.
    pub parent_namespace: &'a str,
    /// The tenant cluster's UUID (a label).
    pub cluster_uuid: &'a str,
    /// A control-plane machine (live migration `PreferForced`, else `PreferSafe`).
    pub control_plane: bool,
}

impl Render<'_> {
    /// The VM's name.
    pub fn vm_name(&self) -> String {
        names::vm_name(self.machine)
    }

    fn meta(&self, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.parent_namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        }
    }

    /// The names of the disks, boot first.
    pub fn disk_names(&self) -> Vec<String> {
        let vm = self.vm_name();
        std::iter::once(names::boot_disk(&vm))
            .chain((0..self.spec.additional_disks.len()).map(|i| names::additional_disk(&vm, i)))
            .collect()
    }

    /// The VirtualMachine.
    pub fn vm(&self) -> VirtualMachine {
        let vm = self.vm_name();
        let spec = self.spec;
        let devices = self
            .disk_names()
            .into_iter()
            .map(|name| BlockDeviceRef {
                kind: "VirtualDisk".into(),
                name,
            })
            .collect();
        let migration = live_migration_policy(spec, self.control_plane);
        let mut out = VirtualMachine::new(
            &vm,
            self.parent_namespace,
            VirtualMachineSpec {
                run_policy: Some(run_policy(spec)),
                virtual_machine_class_name: spec.vm_class_name.clone(),
                cpu: Cpu {
                    cores: spec.cpu.cores,
                    core_fraction: Some(spec.cpu.cpu_fraction.clone()),
                },
                memory: Memory {
                    size: spec.memory.clone(),
                },
                block_device_refs: devices,
                live_migration_policy: Some(migration),
                os_type: Some("Generic".into()),
                bootloader: spec.bootloader.clone(),
                enable_paravirtualization: Some(true),
                provisioning: Some(Provisioning {
                    type_: "UserDataRef".into(),
                    user_data: None,
                    user_data_ref: Some(UserDataRef {
                        kind: "Secret".into(),
                        name: names::cloud_init_secret(&vm),
                    }),
                }),
            },
        );
        out.metadata = self.meta(
            vm,
            names::vm_labels(self.namespace, self.machine, self.cluster_uuid),
        );
        out
    }

    /// The disks, boot first, owned by `owner` (the VM).
    pub fn disks(&self, owner: &OwnerReference) -> Vec<VirtualDisk> {
        let spec = self.spec;
        let class = |c: &str| (!c.is_empty()).then(|| c.to_string());
        let mut sources = vec![(
            spec.root_disk_size.clone(),
            class(&spec.root_disk_storage_class),
            Some(DiskDataSource {
                type_: "ObjectRef".into(),
                object_ref: Some(DiskObjectRef {
                    kind: spec.boot_disk_image_ref.kind.clone(),
                    name: spec.boot_disk_image_ref.name.clone(),
                }),
            }),
        )];
        sources.extend(
            spec.additional_disks
                .iter()
                .map(|d| (d.size.clone(), class(&d.storage_class), None)),
        );
        self.disk_names()
            .into_iter()
            .zip(sources)
            .map(|(name, (size, storage_class_name, data_source))| {
                let mut disk = VirtualDisk::new(
                    &name,
                    self.parent_namespace,
                    VirtualDiskSpec {
                        data_source,
                        persistent_volume_claim: Some(VirtualDiskPvc {
                            size: (!size.is_empty()).then_some(size),
                            storage_class_name,
                        }),
                    },
                );
                disk.metadata = self.meta(
                    name,
                    names::object_labels(self.namespace, self.machine, self.cluster_uuid),
                );
                disk.metadata.owner_references = Some(vec![owner.clone()]);
                disk
            })
            .collect()
    }

    /// The cloud-init Secret carrying the bootstrap data, owned by `owner` (the VM).
    pub fn cloud_init(&self, data: &[u8], owner: &OwnerReference) -> Secret {
        let mut meta = self.meta(
            names::cloud_init_secret(&self.vm_name()),
            names::object_labels(self.namespace, self.machine, self.cluster_uuid),
        );
        meta.owner_references = Some(vec![owner.clone()]);
        Secret {
            metadata: meta,
            type_: Some(names::CLOUD_INIT_SECRET_TYPE.into()),
            data: Some(BTreeMap::from([(
                names::CLOUD_INIT_KEY.to_string(),
                ByteString(data.to_vec()),
            )])),
            ..Secret::default()
        }
    }
}

/// An owner reference to a VM (its children go with it).
pub fn vm_owner(vm: &VirtualMachine) -> OwnerReference {
    OwnerReference {
        api_version: stratus_dvp_api::API_VERSION.into(),
        kind: "VirtualMachine".into(),
        name: vm.name().into(),
        uid: vm.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// What a VM's state means for its machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmView {
    /// The machine is ready (v1beta1) — the VM runs.
    pub ready: bool,
    /// The VM's infrastructure is provisioned (it ran at least once with an address).
    pub provisioned: bool,
    /// Addresses to report.
    pub addresses: Vec<MachineAddress>,
    /// `VirtualMachineReady` is true.
    pub condition_true: bool,
    /// Its reason.
    pub reason: &'static str,
    /// Its message.
    pub message: String,
    /// A terminal failure (Degraded before the node joined).
    pub failure: Option<(String, String)>,
}

/// What the VM's phase means (Deckhouse's handling: Running → ready; Stopped → wait; Degraded
/// without a Node → terminal failure; others → not ready yet).
pub fn vm_view(vm: &VirtualMachine, has_node: bool) -> VmView {
    let name = vm.name();
    let phase = vm.phase();
    let ip = vm.ip_address();
    let mut addresses = vec![address("Hostname", name), address("InternalDNS", name)];
    if let Some(ip) = ip {
        addresses.push(address("InternalIP", ip));
        addresses.push(address("ExternalIP", ip));
    }
    let phase_text = vm
        .status
        .as_ref()
        .map(|s| s.phase.as_str())
        .filter(|p| !p.is_empty())
        .unwrap_or("Pending");
    let not_ready = |reason, message: String| VmView {
        ready: false,
        provisioned: false,
        addresses: addresses.clone(),
        condition_true: false,
        reason,
        message,
        failure: None,
    };
    match phase {
        Some(VmPhase::Running) if ip.is_some() => VmView {
            ready: true,
            provisioned: true,
            addresses: addresses.clone(),
            condition_true: true,
            reason: reasons::VM_RUNNING,
            message: format!("VirtualMachine {name} is running"),
            failure: None,
        },
        Some(VmPhase::Stopped | VmPhase::Stopping) => not_ready(
            reasons::VM_STOPPED,
            format!("VirtualMachine {name} is {phase_text}"),
        ),
        Some(VmPhase::Degraded) if !has_node => {
            let message = format!("VirtualMachine {name} is Degraded before its node joined");
            VmView {
                failure: Some(("VMInFailedState".into(), message.clone())),
                ..not_ready(reasons::VM_FAILED, message)
            }
        }
        Some(VmPhase::Degraded) => not_ready(
            reasons::VM_FAILED,
            format!("VirtualMachine {name} is Degraded"),
        ),
        _ => not_ready(
            reasons::VM_NOT_READY,
            format!("VirtualMachine {name} is {phase_text}"),
        ),
    }
}

fn address(type_: &str, address: &str) -> MachineAddress {
    MachineAddress {
        type_: type_.into(),
        address: address.into(),
    }
}

/// The condition `VirtualMachineReady` with `status`, keeping the transition time of `previous`
/// when the status did not change.
pub fn vm_condition(
    previous: &[Condition],
    status: bool,
    reason: &str,
    message: &str,
    now: Time,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == VM_READY_CONDITION && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(now);
    Condition {
        type_: VM_READY_CONDITION.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: since,
        observed_generation: None,
    }
}

/// The status with `condition` replacing the one of its type.
pub fn with_condition(
    mut status: DeckhouseMachineStatus,
    condition: Condition,
) -> DeckhouseMachineStatus {
    status.conditions.retain(|c| c.type_ != condition.type_);
    status.conditions.push(condition);
    status
}

/// The status a VM view gives, from the current one (provisioning, once reported, stays).
pub fn status_for_vm(
    current: &DeckhouseMachineStatus,
    view: &VmView,
    now: Time,
) -> DeckhouseMachineStatus {
    let was_provisioned = current
        .initialization
        .as_ref()
        .and_then(|i| i.provisioned)
        .unwrap_or(false);
    let provisioned = was_provisioned || view.provisioned;
    let mut init = current.initialization.clone().unwrap_or_default();
    if provisioned {
        init.provisioned = Some(true);
        init.infrastructure_provisioned = Some(true);
    }
    let status = DeckhouseMachineStatus {
        ready: view.ready,
        addresses: view.addresses.clone(),
        failure_reason: view
            .failure
            .as_ref()
            .map(|f| f.0.clone())
            .or(current.failure_reason.clone()),
        failure_message: view
            .failure
            .as_ref()
            .map(|f| f.1.clone())
            .or(current.failure_message.clone()),
        conditions: current.conditions.clone(),
        initialization: (init != MachineInitialization::default()).then_some(init),
    };
    let condition = vm_condition(
        &current.conditions,
        view.condition_true,
        view.reason,
        &view.message,
        now,
    );
    with_condition(status, condition)
}

/// The status of a machine blocked by `why`.
pub fn status_blocked(
    current: &DeckhouseMachineStatus,
    why: &Blocked,
    now: Time,
) -> DeckhouseMachineStatus {
    let condition = vm_condition(&current.conditions, false, why.reason, &why.message, now);
    with_condition(
        DeckhouseMachineStatus {
            ready: false,
            ..current.clone()
        },
        condition,
    )
}

/// What deleting a machine takes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteStep {
    /// Detach these hot-plugged disks (delete their VMBDAs) first.
    Detach(Vec<String>),
    /// Delete the VM.
    DeleteVm,
    /// Delete these disks and the cloud-init Secret.
    DeleteDisks(Vec<String>),
    /// Everything is gone: release the finalizer.
    Done,
    /// The deadline passed: mark what is left as orphaned, report it, release the finalizer.
    Orphan {
        /// The VM, if still there.
        vm: Option<String>,
        /// Disks still there.
        disks: Vec<String>,
    },
}

/// What the parent still holds of a machine being deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// The VMBDAs attaching disks to the VM.
    pub attachments: Vec<String>,
    /// The VM, if it exists.
    pub vm: Option<String>,
    /// Its disks that exist.
    pub disks: Vec<String>,
}

/// The next deletion step; `expired` when the deletion deadline passed.
pub fn delete_step(left: &Leftovers, expired: bool) -> DeleteStep {
    if left.attachments.is_empty() && left.vm.is_none() && left.disks.is_empty() {
        return DeleteStep::Done;
    }
    if expired {
        return DeleteStep::Orphan {
            vm: left.vm.clone(),
            disks: left.disks.clone(),
        };
    }
    if !left.attachments.is_empty() {
        return DeleteStep::Detach(left.attachments.clone());
    }
    if left.vm.is_some() {
        return DeleteStep::DeleteVm;
    }
    DeleteStep::DeleteDisks(left.disks.clone())
}

/// The annotations marking what a deletion left behind (Deckhouse's keys).
pub fn orphan_annotations(vm: Option<&str>, disks: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(vm) = vm {
        out.insert(names::ORPHANED_VM_ANNOTATION.to_string(), vm.to_string());
    }
    for disk in disks {
        out.insert(names::orphaned_disk_annotation(disk), disk.clone());
    }
    out
}

/// Whether a machine needs its status patched to `desired`.
pub fn needs_patch(machine: &DeckhouseMachine, desired: &DeckhouseMachineStatus) -> bool {
    machine.status.as_ref() != Some(desired)
}

#[cfg(test)]
mod tests;
