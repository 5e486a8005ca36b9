//! The Ingress driver's shared state, settings and error: what every step of a reconcile (plan,
//! apply, teardown) is handed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::networking::v1::Ingress;
use kube::runtime::reflector::Store;
use kube::Client;
use stratus_aws_api::subnets::SubnetCache;
use stratus_aws_api::ElbV2Api;
use stratus_cloud::CloudError;
use stratus_kube_kit::EventPublisher;

use crate::ingress::backend_group::SharedBackendGroup;
use crate::ingress::class::Classes;
use crate::ingress::live::Applied;
use crate::ingress::plan::GroupId;

/// The finalizer on managed Ingresses.
pub const FINALIZER: &str = "ingress.k8s.aws/resources";
/// Settings of the driver.
#[derive(Debug, Clone)]
pub struct IngressSettings {
    /// `--cluster-name`.
    pub cluster: String,
    /// `--ingress-class` (the legacy annotation value).
    pub ingress_class: String,
    /// VPC of the target groups.
    pub vpc: String,
    /// `--default-target-type=ip`.
    pub default_ip: bool,
    /// `--default-tags`.
    pub default_tags: BTreeMap<String, String>,
    /// The shared backend security group.
    pub backend: Arc<SharedBackendGroup>,
    /// `--ingress-max-concurrent-reconciles`.
    pub concurrency: u16,
}

/// Why one reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    /// AWS refused or failed.
    #[error("{0}")]
    Aws(#[from] CloudError),
    /// The Kubernetes API failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// No usable subnets.
    #[error("{0}")]
    Subnets(String),
}

/// Shared state.
pub struct IngressCtx {
    pub(crate) client: Client,
    pub(crate) alb: ElbV2Api,
    pub(crate) subnets: Arc<SubnetCache>,
    pub(crate) events: EventPublisher,
    pub(crate) settings: IngressSettings,
    pub(crate) ingresses: Store<Ingress>,
    pub(crate) classes: Classes,
    pub(crate) locks: Mutex<HashMap<GroupId, Arc<tokio::sync::Mutex<()>>>>,
    pub(crate) applied: Mutex<HashMap<GroupId, Applied>>,
}
