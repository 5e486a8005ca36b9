//! The Cluster API (`cluster.x-k8s.io/v1beta2`) fields capdvp reads: a Machine's cluster and
//! bootstrap data Secret, and whether its Cluster's infrastructure is provisioned.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::resource::namespaced_kind;
use super::{CAPI_API_VERSION, CAPI_GROUP, CAPI_VERSION};

/// The label Cluster API puts on every object of a cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// The label Cluster API puts on control-plane Machines (and their infrastructure).
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";

/// A Cluster API Cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The fields read from the spec.
    #[serde(default)]
    pub spec: ClusterSpec,
    /// The fields read from the status.
    #[serde(default)]
    pub status: Option<ClusterStatus>,
}

namespaced_kind!(
    Cluster,
    CAPI_GROUP,
    CAPI_VERSION,
    CAPI_API_VERSION,
    "Cluster",
    "clusters"
);

/// `spec` of a Cluster (read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// Reconciliation paused.
    #[serde(default)]
    pub paused: Option<bool>,
}

/// `status` of a Cluster (read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// The v1beta2 initialization flags.
    #[serde(default)]
    pub initialization: Option<ClusterInitialization>,
}

/// `status.initialization` of a Cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    /// The infrastructure cluster reported provisioned.
    #[serde(default)]
    pub infrastructure_provisioned: Option<bool>,
    /// The control plane is initialized.
    #[serde(default)]
    pub control_plane_initialized: Option<bool>,
}

impl Cluster {
    /// Whether the Cluster's infrastructure is provisioned (the Machine may proceed).
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            .unwrap_or(false)
    }
}

/// A Cluster API Machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The fields read from the spec.
    #[serde(default)]
    pub spec: MachineSpec,
    /// The fields read from the status.
    #[serde(default)]
    pub status: Option<MachineStatus>,
}

namespaced_kind!(
    Machine,
    CAPI_GROUP,
    CAPI_VERSION,
    CAPI_API_VERSION,
    "Machine",
    "machines"
);

/// `spec` of a Machine (read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The Cluster's name.
    #[serde(default)]
    pub cluster_name: String,
    /// Bootstrap settings.
    #[serde(default)]
    pub bootstrap: MachineBootstrap,
    /// The infrastructure machine (a DeckhouseMachine).
    #[serde(default)]
    pub infrastructure_ref: Option<ContractRef>,
}

/// A v1beta2 contract-versioned reference (`apiGroup`, `kind`, `name`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractRef {
    /// The API group.
    #[serde(default)]
    pub api_group: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
    /// The name.
    #[serde(default)]
    pub name: String,
}

/// `spec.bootstrap` of a Machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineBootstrap {
    /// The Secret holding the bootstrap data (key `value`).
    #[serde(default)]
    pub data_secret_name: Option<String>,
}

/// `status` of a Machine (read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// The Node, once it joined.
    #[serde(default)]
    pub node_ref: Option<serde_json::Value>,
}

impl Machine {
    /// The bootstrap data Secret's name, once the bootstrap provider set it.
    pub fn data_secret_name(&self) -> Option<&str> {
        self.spec
            .bootstrap
            .data_secret_name
            .as_deref()
            .filter(|n| !n.is_empty())
    }

    /// Whether the Machine's Node joined.
    pub fn has_node_ref(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.node_ref.is_some())
    }

    /// Whether it is a control-plane Machine.
    pub fn is_control_plane(&self) -> bool {
        self.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL))
    }
}
