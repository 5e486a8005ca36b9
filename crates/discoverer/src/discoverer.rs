//! The backend contract: what a cloud answers each run. Every method makes its cloud calls
//! once per run (one login, each list once); an error means the cloud could not be asked and the
//! reconciler retries the step; a backend never writes to Kubernetes.

use async_trait::async_trait;
use stratus_cloud::CloudError;

use crate::types::{CloudCondition, DiskMeta, InstanceType};

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The cloud refused or failed a call (after the call guard's own retries).
    #[error("cloud request {operation} failed: {message}")]
    Cloud {
        /// The API operation.
        operation: &'static str,
        /// The cloud's answer, without secrets.
        message: String,
    },
    /// The credentials were refused: retrying will not help until they are fixed.
    #[error("the cloud refused the credentials for {operation}: {message}")]
    Credentials {
        /// The API operation.
        operation: &'static str,
        /// The cloud's answer, without secrets.
        message: String,
    },
    /// The input (stored discovery data, configuration) is unusable.
    #[error("invalid input: {0}")]
    Input(String),
}

impl DiscoveryError {
    /// The error of a guarded cloud call: refused credentials stay refused, the rest may pass.
    pub fn from_cloud(operation: &'static str, e: CloudError) -> DiscoveryError {
        match e {
            CloudError::Unauthorized { message, .. } => {
                DiscoveryError::Credentials { operation, message }
            }
            other => DiscoveryError::Cloud {
                operation,
                message: other.to_string(),
            },
        }
    }

    /// Whether retrying can help.
    pub fn is_retryable(&self) -> bool {
        matches!(self, DiscoveryError::Cloud { .. })
    }
}

/// One cloud's inventory, as Deckhouse's `Discoverer` interface.
#[async_trait]
pub trait Discoverer: Send + Sync {
    /// The cloud's name (`aws`, `openstack`), for logs.
    fn cloud(&self) -> &'static str;

    /// A run starts: answers remembered for one run (a list two steps need) are forgotten.
    fn begin_run(&self) {}

    /// Completes when the cloud's inventory changed and a run should not wait for the period
    /// (a backend that watches its cloud); never, by default. Cancel-safe.
    async fn changed(&self) {
        std::future::pending::<()>().await
    }

    /// Instance types for the catalog; `None` when the cloud has none to offer (no catalog is
    /// written).
    async fn instance_types(&self) -> Result<Option<Vec<InstanceType>>, DiscoveryError>;

    /// The provider's discovery document given the stored one (`cloud-provider-discovery-data.json`
    /// of `d8-provider-cluster-configuration`, empty when absent); `None`: no Secret is written.
    async fn discovery_data(&self, stored: &[u8]) -> Result<Option<Vec<u8>>, DiscoveryError>;

    /// This cluster's CSI disks (never another cluster's, even in the same account).
    async fn disks_meta(&self) -> Result<Vec<DiskMeta>, DiscoveryError>;

    /// Conditions of the cloud that node-manager must know of.
    async fn check_cloud_conditions(&self) -> Result<Vec<CloudCondition>, DiscoveryError>;
}
