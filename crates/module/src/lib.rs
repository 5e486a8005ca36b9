//! The runtime glue of a Stratus cloud-provider module — what Deckhouse does with hooks and
//! templates, as pure plans plus a thin driver: StorageClasses from the module settings and the
//! discovery data, the node-manager registration Secrets from the provider cluster configuration,
//! the machine classes node-manager renders, and the spot-termination marks on AWS nodes; the
//! outcome of each part as a condition in the module's status ConfigMap.

pub mod app;
pub mod cloud;
pub mod driver;
pub mod inputs;
pub mod machine_classes;
pub mod metrics;
pub mod online_resize;
pub mod registration;
pub mod settings;
pub mod spot_marks;
pub mod status;
pub mod storage_classes;

pub use cloud::Cloud;

/// A plan could not be made from its inputs; the message names the key at fault and never
/// quotes a credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

impl PlanError {
    /// An error naming `key`.
    pub fn key(key: &str, why: impl std::fmt::Display) -> PlanError {
        PlanError(format!("{key}: {why}"))
    }
}
