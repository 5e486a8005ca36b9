//! Names, labels and serials as Deckhouse's DVP CSI driver writes them (pure): the attachment
//! name `vmbda-<disk>-<node>`, the labels of a disk and of an attachment, and the serial a
//! hot-plugged disk shows inside the VM.

use std::collections::BTreeMap;

use md5::{Digest, Md5};
use stratus_dvp_api::labels::{CLUSTER_UUID, MANAGED_BY, MANAGED_BY_DECKHOUSE};

/// On a VirtualDisk: its own name (Deckhouse finds a volume's disk by it).
pub const DISK_NAME_LABEL: &str = "virtualDiskName";
/// On a VMBDA: the disk it attaches.
pub const VMBDA_DISK_LABEL: &str = "virtualMachineDiskName";
/// On a VMBDA: the VM it attaches to.
pub const VMBDA_VM_LABEL: &str = "virtualMachineName";
/// The udev name prefix of a QEMU SCSI disk in `/dev/disk/by-id`.
pub const BY_ID_PREFIX: &str = "scsi-0QEMU_QEMU_HARDDISK_";

/// The VirtualDisk name of the CSI volume named `volume`: the name itself when it is a valid
/// object name and label value (Kubernetes' `pvc-<uid>` always is, as Deckhouse relies on), else
/// `vd-<md5 hex of the name>`, so any CSI name maps to one disk, the same every time.
pub fn disk_name(volume: &str) -> String {
    if is_dns_label(volume) {
        volume.to_string()
    } else {
        format!("vd-{}", serial(volume))
    }
}

/// Whether `s` is a DNS label (lowercase letters, digits, '-'; at most 63; alphanumeric ends).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The name of the attachment of `disk` to `node`.
pub fn vmbda_name(disk: &str, node: &str) -> String {
    format!("vmbda-{disk}-{node}")
}

/// The labels of a new VirtualDisk.
pub fn disk_labels(disk: &str, cluster_uuid: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (MANAGED_BY.to_string(), MANAGED_BY_DECKHOUSE.to_string()),
        (DISK_NAME_LABEL.to_string(), disk.to_string()),
    ]);
    if !cluster_uuid.is_empty() {
        labels.insert(CLUSTER_UUID.to_string(), cluster_uuid.to_string());
    }
    labels
}

/// The labels of a new VMBDA.
pub fn vmbda_labels(disk: &str, vm: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (VMBDA_DISK_LABEL.to_string(), disk.to_string()),
        (VMBDA_VM_LABEL.to_string(), vm.to_string()),
    ])
}

/// The serial a hot-plugged disk carries: the md5 hex of the VirtualDisk's UID.
pub fn serial(disk_uid: &str) -> String {
    Md5::digest(disk_uid.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `/dev/disk/by-id` name of the disk with `serial`.
pub fn by_id_name(serial: &str) -> String {
    format!("{BY_ID_PREFIX}{serial}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_labels_and_serials() {
        assert_eq!(vmbda_name("pvc-1", "node-a"), "vmbda-pvc-1-node-a");
        let pvc = "pvc-0b8c4f3e-1d2a-4e5f-9a7b-123456789abc";
        assert_eq!(disk_name(pvc), pvc);
        for odd in ["Sanity-X", &"a".repeat(64), "-a", "a_b"] {
            let d = disk_name(odd);
            assert!(d.starts_with("vd-") && is_dns_label(&d), "{odd} → {d}");
            assert_eq!(d, disk_name(odd));
        }
        assert_ne!(disk_name("A"), disk_name("B"));
        let l = disk_labels("pvc-1", "c0ffee");
        assert_eq!(l[MANAGED_BY], "deckhouse");
        assert_eq!(l[CLUSTER_UUID], "c0ffee");
        assert_eq!(l[DISK_NAME_LABEL], "pvc-1");
        assert!(!disk_labels("pvc-1", "").contains_key(CLUSTER_UUID));
        assert_eq!(vmbda_labels("d", "vm")[VMBDA_VM_LABEL], "vm");
        // md5("") and md5("abc") are well known.
        assert_eq!(serial(""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(serial("abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            by_id_name("abc"),
            "scsi-0QEMU_QEMU_HARDDISK_abc".to_string()
        );
    }
}
