//! StorageClass parameters and the metadata of a new volume: a pure function of the request
//! and the flags, every problem reported at once.

use std::collections::BTreeMap;

use stratus_csi::Topology;

use crate::{CLUSTER_KEY, TOPOLOGY_KEY};

/// What a new Cinder volume looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSpec {
    /// The CO's name (the volume's name: the idempotency key).
    pub name: String,
    /// Size in GiB.
    pub size_gib: i64,
    /// `type` (None: Cinder's default type).
    pub volume_type: Option<String>,
    /// The zone (None: Cinder's default).
    pub zone: Option<String>,
    /// Metadata (cluster, PVC and PV names).
    pub metadata: BTreeMap<String, String>,
}

/// The keys `--extra-create-metadata` adds, stored under the `csi.storage.k8s.io/` prefix.
const CREATE_METADATA: [&str; 3] = ["pvc/name", "pvc/namespace", "pv/name"];

/// The zone a request asks for: the `availability` parameter, else the first topology naming
/// one.
pub fn requested_zone(
    parameters: &BTreeMap<String, String>,
    topologies: &[Topology],
) -> Option<String> {
    parameters
        .get("availability")
        .filter(|z| !z.is_empty())
        .cloned()
        .or_else(|| topologies.iter().find_map(|t| t.get(TOPOLOGY_KEY).cloned()))
}

/// Builds the spec of a volume named `name` of `size_gib` GiB; unknown parameters are errors.
pub fn volume_spec(
    name: &str,
    size_gib: i64,
    parameters: &BTreeMap<String, String>,
    create_metadata: &BTreeMap<String, String>,
    topologies: &[Topology],
    cluster: Option<&str>,
) -> Result<VolumeSpec, Vec<String>> {
    let problems: Vec<String> = parameters
        .keys()
        .filter(|k| !matches!(k.as_str(), "type" | "availability"))
        .map(|k| format!("unknown StorageClass parameter {k:?} (known: type, availability)"))
        .collect();
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut metadata = BTreeMap::new();
    if let Some(c) = cluster.filter(|c| !c.is_empty()) {
        metadata.insert(CLUSTER_KEY.to_string(), c.to_string());
    }
    for key in CREATE_METADATA {
        if let Some(v) = create_metadata.get(key) {
            metadata.insert(format!("csi.storage.k8s.io/{key}"), v.clone());
        }
    }
    Ok(VolumeSpec {
        name: name.to_string(),
        size_gib,
        volume_type: parameters.get("type").filter(|t| !t.is_empty()).cloned(),
        zone: requested_zone(parameters, topologies),
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parameters_metadata_and_zones() {
        let topo = vec![map(&[(TOPOLOGY_KEY, "nova-b")])];
        let spec = volume_spec(
            "pvc-1",
            2,
            &map(&[("type", "ssd")]),
            &map(&[
                ("pvc/name", "data"),
                ("pvc/namespace", "ns"),
                ("other", "x"),
            ]),
            &topo,
            Some("c1"),
        )
        .unwrap();
        assert_eq!(spec.volume_type.as_deref(), Some("ssd"));
        assert_eq!(spec.zone.as_deref(), Some("nova-b"));
        assert_eq!(spec.metadata[CLUSTER_KEY], "c1");
        assert_eq!(spec.metadata["csi.storage.k8s.io/pvc/name"], "data");
        assert_eq!(spec.metadata.len(), 3);
        let pinned = volume_spec(
            "n",
            1,
            &map(&[("availability", "nova")]),
            &map(&[]),
            &topo,
            None,
        )
        .unwrap();
        assert_eq!(pinned.zone.as_deref(), Some("nova"));
        assert!(pinned.metadata.is_empty());
        assert_eq!(
            volume_spec("n", 1, &map(&[]), &map(&[]), &[], None)
                .unwrap()
                .zone,
            None
        );
        let bad = volume_spec(
            "n",
            1,
            &map(&[("iops", "1"), ("fsType", "xfs")]),
            &map(&[]),
            &[],
            None,
        )
        .unwrap_err();
        assert_eq!(bad.len(), 2, "{bad:?}");
    }
}
