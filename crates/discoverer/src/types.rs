//! The documents a discoverer returns, with Deckhouse's JSON field names: instance types
//! (Kubernetes quantities as strings), disk metadata and cloud conditions.

use serde::{Deserialize, Serialize};

/// One instance type of the `InstanceTypesCatalog` (`cpu`, `memory`, `rootDisk` are quantities).
/// Missing fields read as empty (a hand-edited stored entry then differs and is rewritten).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceType {
    /// The cloud's name of the type (`m5.large`, a flavor name).
    pub name: String,
    /// vCPUs, e.g. `2`.
    pub cpu: String,
    /// Memory, e.g. `8192Mi`.
    pub memory: String,
    /// Root disk, e.g. `20Gi` (`0` when the cloud does not say).
    pub root_disk: String,
}

/// One disk the cloud knows of that belongs to this cluster's CSI driver.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DiskMeta {
    /// The cloud's id (`vol-…`, a Cinder UUID).
    pub id: String,
    /// The name the CSI driver gave it, which is the PersistentVolume's name.
    pub name: String,
}

/// A cloud condition node-manager reports as an unmet requirement when `ok` is false.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudCondition {
    /// Short name.
    pub name: String,
    /// What is wrong (or fine).
    pub message: String,
    /// Whether the condition is met.
    pub ok: bool,
}
