//! EBS shapes in CSI terms, pure: the ClientToken of a volume name, the zone a request asks for,
//! a volume's topology, EC2 volumes and snapshots as CSI volumes and snapshots, and the publish
//! context naming the device.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use stratus_csi::backend::{Snapshot, Topology, Volume, VolumeSource};

use crate::ec2::{SnapshotInfo, VolumeInfo};
use crate::{TOPOLOGY_KEY, WELL_KNOWN_ZONE_KEY};

/// Bytes in a GiB (EBS sizes are whole GiB).
pub const GIB: i64 = 1 << 30;

/// The ClientToken of a CreateVolume: a digest of the name (EC2 allows 64 characters).
pub fn client_token(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The zone a request asks for: the first topology with a zone key.
pub fn requested_zone(topologies: &[Topology]) -> Option<String> {
    topologies.iter().find_map(|t| {
        t.get(TOPOLOGY_KEY)
            .or_else(|| t.get(WELL_KNOWN_ZONE_KEY))
            .cloned()
    })
}

pub(crate) fn topology(zone: &str) -> Topology {
    [
        (TOPOLOGY_KEY.to_string(), zone.to_string()),
        (WELL_KNOWN_ZONE_KEY.to_string(), zone.to_string()),
    ]
    .into_iter()
    .collect()
}

pub(crate) fn to_volume(v: &VolumeInfo) -> Volume {
    Volume {
        id: v.id.clone(),
        capacity_bytes: i64::from(v.size_gib) * GIB,
        topology: (!v.zone.is_empty()).then(|| topology(&v.zone)),
        source: v.snapshot_id.clone().map(VolumeSource::Snapshot),
        attached_to: v
            .attachments
            .iter()
            .filter(|a| a.state == "attached")
            .map(|a| a.instance_id.clone())
            .collect(),
        context: BTreeMap::new(),
    }
}

pub(crate) fn to_snapshot(s: &SnapshotInfo) -> Snapshot {
    Snapshot {
        id: s.id.clone(),
        source_volume_id: s.volume_id.clone(),
        size_bytes: i64::from(s.size_gib) * GIB,
        created_unix: s.started_unix,
        ready: s.state == "completed",
    }
}

/// The publish context key naming the device (upstream's `devicePath`).
pub const DEVICE_PATH: &str = "devicePath";

pub(crate) fn device_context(device: &str) -> BTreeMap<String, String> {
    [(DEVICE_PATH.to_string(), device.to_string())]
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_stable_and_short_enough() {
        assert_eq!(client_token("pvc-1"), client_token("pvc-1"));
        assert_ne!(client_token("pvc-1"), client_token("pvc-2"));
        assert_eq!(client_token("x").len(), 64);
    }

    #[test]
    fn zone_from_either_key() {
        let t = |k: &str, z: &str| -> Topology {
            [(k.to_string(), z.to_string())].into_iter().collect()
        };
        assert_eq!(
            requested_zone(&[t(TOPOLOGY_KEY, "a")]).as_deref(),
            Some("a")
        );
        assert_eq!(
            requested_zone(&[t("other", "x"), t(WELL_KNOWN_ZONE_KEY, "b")]).as_deref(),
            Some("b")
        );
        assert_eq!(requested_zone(&[]), None);
    }
}
