//! Pure checks of CSI requests: volume capabilities, capacity ranges, StorageClass parameters
//! that belong to the CO (`csi.storage.k8s.io/…`). Each bad input becomes InvalidArgument with
//! a message naming the field.

use std::collections::BTreeMap;

use stratus_csi_spec::v1::volume_capability::access_mode::Mode;
use stratus_csi_spec::v1::volume_capability::AccessType;
use stratus_csi_spec::v1::VolumeCapability;
use tonic::Status;

/// File systems the node plugin formats.
pub const FS_TYPES: &[&str] = &["ext4", "ext3", "xfs"];
/// The file system used when none is asked for.
pub const DEFAULT_FS_TYPE: &str = "ext4";
/// The prefix of parameters the external-provisioner passes for its own use.
const CO_PARAMETER_PREFIX: &str = "csi.storage.k8s.io/";
/// The fsType parameter key (both spellings upstream accepts).
const FS_TYPE_KEYS: &[&str] = &["csi.storage.k8s.io/fstype", "fsType", "fstype"];

/// What a set of capabilities asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapabilitySummary {
    /// Some capability is a raw block device.
    pub block: bool,
    /// Some capability asks for more than one node.
    pub multi_node: bool,
    /// The file system asked for by a mount capability, if any.
    pub fs_type: Option<String>,
}

/// Checks capabilities and summarises them; `multi_attach` says whether the backend can attach
/// one volume to several nodes.
pub fn capabilities(
    caps: &[VolumeCapability],
    multi_attach: bool,
) -> Result<CapabilitySummary, Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument("volume_capabilities are required"));
    }
    let mut summary = CapabilitySummary::default();
    for cap in caps {
        check_one(cap, multi_attach)?;
        match &cap.access_type {
            Some(AccessType::Block(_)) => summary.block = true,
            Some(AccessType::Mount(m)) if !m.fs_type.is_empty() => {
                summary.fs_type = Some(m.fs_type.clone())
            }
            _ => {}
        }
        if is_multi_node(cap) {
            summary.multi_node = true;
        }
    }
    Ok(summary)
}

/// Checks one capability: an access type and a supported access mode are required.
pub fn check_one(cap: &VolumeCapability, multi_attach: bool) -> Result<(), Status> {
    let mode = cap
        .access_mode
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("volume_capability.access_mode is required"))?;
    let mode = Mode::try_from(mode.mode).unwrap_or(Mode::Unknown);
    match &cap.access_type {
        None => {
            return Err(Status::invalid_argument(
                "volume_capability.access_type (block or mount) is required",
            ))
        }
        Some(AccessType::Mount(m)) => {
            if !m.fs_type.is_empty() && !FS_TYPES.contains(&m.fs_type.as_str()) {
                return Err(Status::invalid_argument(format!(
                    "fs_type {:?} is not supported (one of {})",
                    m.fs_type,
                    FS_TYPES.join(", ")
                )));
            }
        }
        Some(AccessType::Block(_)) => {}
    }
    supported_mode(mode, cap, multi_attach)
}

fn supported_mode(mode: Mode, cap: &VolumeCapability, multi_attach: bool) -> Result<(), Status> {
    let ok = match mode {
        Mode::Unknown => false,
        Mode::SingleNodeWriter | Mode::SingleNodeReaderOnly => true,
        // Only offered (the SINGLE_NODE_MULTI_WRITER capability) by backends that attach a
        // volume more than once; the others take the two classic single-node modes only.
        Mode::SingleNodeSingleWriter | Mode::SingleNodeMultiWriter => multi_attach,
        // A volume shared by several nodes is only safe as a raw block device (no file system
        // is cluster-aware), and only when the cloud can attach it more than once.
        Mode::MultiNodeReaderOnly | Mode::MultiNodeSingleWriter | Mode::MultiNodeMultiWriter => {
            multi_attach && matches!(cap.access_type, Some(AccessType::Block(_)))
        }
    };
    if ok {
        Ok(())
    } else {
        Err(Status::invalid_argument(format!(
            "access mode {} is not supported for this volume",
            mode.as_str_name()
        )))
    }
}

fn is_multi_node(cap: &VolumeCapability) -> bool {
    let mode = cap
        .access_mode
        .as_ref()
        .map(|m| Mode::try_from(m.mode).unwrap_or(Mode::Unknown))
        .unwrap_or(Mode::Unknown);
    matches!(
        mode,
        Mode::MultiNodeReaderOnly | Mode::MultiNodeSingleWriter | Mode::MultiNodeMultiWriter
    )
}

/// Whether a capability is read-only by its access mode.
pub fn read_only_mode(cap: &VolumeCapability) -> bool {
    let mode = cap
        .access_mode
        .as_ref()
        .map(|m| Mode::try_from(m.mode).unwrap_or(Mode::Unknown))
        .unwrap_or(Mode::Unknown);
    matches!(mode, Mode::SingleNodeReaderOnly | Mode::MultiNodeReaderOnly)
}

/// Splits StorageClass parameters into the driver's own and the CO's metadata
/// (`csi.storage.k8s.io/pvc/name`…); the fsType, in any spelling, goes to `fs_type`.
pub fn split_parameters(
    params: &std::collections::HashMap<String, String>,
) -> (
    BTreeMap<String, String>,
    BTreeMap<String, String>,
    Option<String>,
) {
    let mut own = BTreeMap::new();
    let mut co = BTreeMap::new();
    let mut fs_type = None;
    for (k, v) in params {
        if FS_TYPE_KEYS.iter().any(|f| f.eq_ignore_ascii_case(k)) {
            fs_type = Some(v.to_ascii_lowercase());
        } else if let Some(rest) = k.strip_prefix(CO_PARAMETER_PREFIX) {
            co.insert(rest.to_string(), v.clone());
        } else {
            own.insert(k.clone(), v.clone());
        }
    }
    (own, co, fs_type)
}

/// The requested size from a capacity range: `required` if set, else `limit`, else `default`.
/// A limit below the requirement, or negative numbers, are InvalidArgument.
pub fn capacity(required: i64, limit: i64, default: i64) -> Result<(i64, i64), Status> {
    if required < 0 || limit < 0 {
        return Err(Status::invalid_argument(
            "capacity_range must not be negative",
        ));
    }
    if limit > 0 && required > limit {
        return Err(Status::invalid_argument(format!(
            "capacity_range.required_bytes {required} exceeds limit_bytes {limit}"
        )));
    }
    let size = match (required, limit) {
        (0, 0) => default,
        (0, l) => l.min(default),
        (r, _) => r,
    };
    Ok((size, limit))
}

/// Rounds `bytes` up to whole GiB (clouds size volumes in GiB), at least 1 GiB.
pub fn round_up_gib(bytes: i64) -> i64 {
    const GIB: i64 = 1 << 30;
    (bytes.max(1) + GIB - 1) / GIB
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_csi_spec::v1::volume_capability::{AccessMode, BlockVolume, MountVolume};

    fn cap(mode: Mode, block: bool, fs: &str) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(if block {
                AccessType::Block(BlockVolume {})
            } else {
                AccessType::Mount(MountVolume {
                    fs_type: fs.into(),
                    ..Default::default()
                })
            }),
        }
    }

    #[test]
    fn capability_table() {
        use Mode::*;
        let cases = [
            (cap(SingleNodeWriter, false, "ext4"), false, true),
            (cap(SingleNodeWriter, false, "ntfs"), false, false),
            (cap(SingleNodeReaderOnly, true, ""), false, true),
            (cap(MultiNodeMultiWriter, true, ""), true, true),
            (cap(MultiNodeMultiWriter, true, ""), false, false),
            (cap(MultiNodeMultiWriter, false, "ext4"), true, false),
            (cap(Unknown, false, ""), false, false),
            (cap(SingleNodeMultiWriter, false, "ext4"), true, true),
            (cap(SingleNodeMultiWriter, false, "ext4"), false, false),
            (cap(SingleNodeSingleWriter, true, ""), false, false),
        ];
        for (i, (c, multi, ok)) in cases.into_iter().enumerate() {
            assert_eq!(check_one(&c, multi).is_ok(), ok, "case {i}");
        }
        let no_type = VolumeCapability {
            access_mode: Some(AccessMode {
                mode: SingleNodeWriter as i32,
            }),
            access_type: None,
        };
        assert!(check_one(&no_type, false).is_err());
        assert!(capabilities(&[], false).is_err());
    }

    #[test]
    fn capacity_table() {
        let g = 1 << 30;
        assert_eq!(capacity(0, 0, g).unwrap(), (g, 0));
        assert_eq!(capacity(5 * g, 0, g).unwrap(), (5 * g, 0));
        assert_eq!(capacity(0, g / 2, g).unwrap(), (g / 2, g / 2));
        assert!(capacity(2 * g, g, g).is_err());
        assert!(capacity(-1, 0, g).is_err());
        assert_eq!(round_up_gib(1), 1);
        assert_eq!(round_up_gib(g), 1);
        assert_eq!(round_up_gib(g + 1), 2);
    }

    #[test]
    fn parameters_split() {
        let params = [
            ("type", "gp3"),
            ("csi.storage.k8s.io/fstype", "XFS"),
            ("csi.storage.k8s.io/pvc/name", "data"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (own, co, fs) = split_parameters(&params);
        assert_eq!(own.get("type").map(String::as_str), Some("gp3"));
        assert_eq!(co.get("pvc/name").map(String::as_str), Some("data"));
        assert_eq!(fs.as_deref(), Some("xfs"));
    }
}
