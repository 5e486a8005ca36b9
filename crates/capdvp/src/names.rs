//! Names, labels and annotations of the parent objects capdvp makes for a DeckhouseMachine,
//! Deckhouse's where Deckhouse has them: the VM is named after the DeckhouseMachine, its
//! cloud-init Secret `cloud-init-<name>`, its disks `<name>-boot` and
//! `<name>-additional-disk-<i>`; providerID `dvp://<vm>`.

use std::collections::BTreeMap;

use sha1::{Digest, Sha1};
use stratus_dvp_api::labels::{CLUSTER_UUID, HOSTNAME, MANAGED_BY, MANAGED_BY_DECKHOUSE};

/// On every parent object capdvp makes: the DeckhouseMachine's name (the watch selector).
pub const MACHINE_LABEL: &str = "infrastructure.cluster.x-k8s.io/deckhouse-machine";
/// On every parent object capdvp makes: the DeckhouseMachine's namespace.
pub const MACHINE_NAMESPACE_LABEL: &str =
    "infrastructure.cluster.x-k8s.io/deckhouse-machine-namespace";
/// Deckhouse's annotation naming a VM left behind by a deletion that hit its deadline.
pub const ORPHANED_VM_ANNOTATION: &str = "dvp.deckhouse.io/orphaned-vm";
/// Prefix of Deckhouse's annotation naming a disk left behind (`-<sha1(name)[:4]>` follows).
pub const ORPHANED_DISK_ANNOTATION_PREFIX: &str = "dvp.deckhouse.io/orphaned-disk-";
/// The type of a cloud-init Secret.
pub const CLOUD_INIT_SECRET_TYPE: &str = "provisioning.virtualization.deckhouse.io/cloud-init";
/// The key of the cloud-init data in that Secret.
pub const CLOUD_INIT_KEY: &str = "userData";
/// The key of the bootstrap data in Cluster API's bootstrap Secret.
pub const BOOTSTRAP_KEY: &str = "value";
/// The VMBDA label naming its VM (Deckhouse's CSI driver sets it).
pub const VMBDA_VM_LABEL: &str = "virtualMachineName";
/// The providerID scheme.
pub const PROVIDER_ID_PREFIX: &str = "dvp://";

/// The VM of a DeckhouseMachine.
pub fn vm_name(machine: &str) -> String {
    machine.to_string()
}

/// The cloud-init Secret of a VM.
pub fn cloud_init_secret(vm: &str) -> String {
    format!("cloud-init-{vm}")
}

/// The boot disk of a VM.
pub fn boot_disk(vm: &str) -> String {
    format!("{vm}-boot")
}

/// The `index`-th additional disk of a VM.
pub fn additional_disk(vm: &str, index: usize) -> String {
    format!("{vm}-additional-disk-{index}")
}

/// `dvp://<vm>`.
pub fn provider_id(vm: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{vm}")
}

/// The annotation key naming an orphaned disk.
pub fn orphaned_disk_annotation(disk: &str) -> String {
    let digest = Sha1::digest(disk.as_bytes());
    let hex: String = digest.iter().take(2).map(|b| format!("{b:02x}")).collect();
    format!("{ORPHANED_DISK_ANNOTATION_PREFIX}{hex}")
}

/// Labels of every parent object of a machine.
pub fn object_labels(
    namespace: &str,
    machine: &str,
    cluster_uuid: &str,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (MANAGED_BY.to_string(), MANAGED_BY_DECKHOUSE.to_string()),
        (MACHINE_LABEL.to_string(), machine.to_string()),
        (MACHINE_NAMESPACE_LABEL.to_string(), namespace.to_string()),
    ]);
    if !cluster_uuid.is_empty() {
        labels.insert(CLUSTER_UUID.to_string(), cluster_uuid.to_string());
    }
    labels
}

/// Labels of the VM: those of every object plus the hostname (the CCM finds a node's VM by it).
pub fn vm_labels(namespace: &str, machine: &str, cluster_uuid: &str) -> BTreeMap<String, String> {
    let mut labels = object_labels(namespace, machine, cluster_uuid);
    labels.insert(HOSTNAME.to_string(), vm_name(machine));
    labels
}

/// The DeckhouseMachine (namespace, name) a parent object's labels name.
pub fn machine_of(labels: Option<&BTreeMap<String, String>>) -> Option<(String, String)> {
    let labels = labels?;
    Some((
        labels.get(MACHINE_NAMESPACE_LABEL)?.clone(),
        labels.get(MACHINE_LABEL)?.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deckhouse_names() {
        assert_eq!(cloud_init_secret("w-1"), "cloud-init-w-1");
        assert_eq!(boot_disk("w-1"), "w-1-boot");
        assert_eq!(additional_disk("w-1", 0), "w-1-additional-disk-0");
        assert_eq!(provider_id("w-1"), "dvp://w-1");
        let key = orphaned_disk_annotation("w-1-boot");
        assert_eq!(key.len(), ORPHANED_DISK_ANNOTATION_PREFIX.len() + 4);
        let labels = vm_labels("ns", "w-1", "u");
        assert_eq!(labels[HOSTNAME], "w-1");
        assert_eq!(
            machine_of(Some(&labels)),
            Some(("ns".to_string(), "w-1".to_string()))
        );
        assert!(!object_labels("ns", "w", "").contains_key(CLUSTER_UUID));
    }
}
