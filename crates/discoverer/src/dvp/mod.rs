//! The DVP backend: the parent (virtualization) cluster's StorageClasses make the discovery
//! document (merged over the stored one, see [`data`]); orphaned disks are the tenant
//! namespace's VirtualDisks labelled with this cluster's `dvp.deckhouse.io/cluster-uuid`; no
//! instance types (VM sizes are free-form). A watch of the parent's StorageClasses wakes the loop
//! when one is added, changed or removed, so the document follows within seconds, not the next
//! period. Settings from `DVP_KUBERNETES_CONFIG_BASE64`, `DVP_NAMESPACE` and `CLUSTER_UUID`.

pub mod data;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use stratus_dvp::config::DvpConfig;
use stratus_dvp_api::labels::CLUSTER_UUID;

use crate::identity::ClusterIdentity;
use stratus_dvp_api::VirtualDisk;
use tokio::sync::Notify;

use crate::discoverer::{Discoverer, DiscoveryError};
use crate::types::{CloudCondition, DiskMeta, InstanceType};
use data::ParentClass;

/// The annotation marking a cluster's default StorageClass.
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// How long the loop waits after a StorageClass change for more to arrive (one run for a burst).
pub const SETTLE: Duration = Duration::from_secs(2);

/// Asks the parent cluster.
pub struct DvpDiscoverer {
    parent: kube::Client,
    namespace: String,
    cluster_uuid: ClusterIdentity,
    /// Where the UUID is looked for when not given (Deckhouse's ConfigMap in this cluster).
    tenant: Option<kube::Client>,
    changed: Arc<Notify>,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for DvpDiscoverer {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

fn from_kube(operation: &'static str, e: kube::Error) -> DiscoveryError {
    match &e {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => DiscoveryError::Credentials {
            operation,
            message: s.message.clone(),
        },
        _ => DiscoveryError::Cloud {
            operation,
            message: e.to_string(),
        },
    }
}

impl DvpDiscoverer {
    /// Connects to the parent named by `config` (no request yet) and starts the StorageClass
    /// watch.
    pub async fn connect(config: DvpConfig, cluster_uuid: Option<String>) -> Result<Self, String> {
        let parent = config.client().await?;
        let changed = Arc::new(Notify::new());
        let watch = tokio::spawn(watch_classes(parent.clone(), changed.clone()));
        Ok(DvpDiscoverer {
            parent,
            namespace: config.namespace,
            cluster_uuid: ClusterIdentity::new(cluster_uuid),
            tenant: None,
            changed,
            watch,
        })
    }
}

impl DvpDiscoverer {
    /// Looks for the cluster UUID, when `CLUSTER_UUID` is not given, in Deckhouse's ConfigMap
    /// of this (the tenant) cluster.
    pub fn finding_identity_with(mut self, tenant: kube::Client) -> Self {
        self.tenant = Some(tenant);
        self
    }
}

/// Signals `changed` on every StorageClass change, and after every (re-)listing: a change made
/// before the watch started, or while it was down, is not missed.
async fn watch_classes(parent: kube::Client, changed: Arc<Notify>) {
    let api: Api<StorageClass> = Api::all(parent);
    let mut events = watcher(api, watcher::Config::default()).boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                changed.notify_one();
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the parent StorageClass watch failed; retrying");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

fn parent_class(sc: &StorageClass) -> Option<ParentClass> {
    Some(ParentClass {
        name: sc.metadata.name.clone()?,
        volume_binding_mode: sc.volume_binding_mode.clone(),
        reclaim_policy: sc.reclaim_policy.clone(),
        allow_volume_expansion: sc.allow_volume_expansion,
        is_default: sc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_CLASS))
            .is_some_and(|v| v == "true"),
    })
}

#[async_trait]
impl Discoverer for DvpDiscoverer {
    fn cloud(&self) -> &'static str {
        "dvp"
    }

    async fn changed(&self) {
        self.changed.notified().await;
        tokio::time::sleep(SETTLE).await;
    }

    async fn instance_types(&self) -> Result<Option<Vec<InstanceType>>, DiscoveryError> {
        Ok(None)
    }

    async fn discovery_data(&self, stored: &[u8]) -> Result<Option<Vec<u8>>, DiscoveryError> {
        const OP: &str = "ListStorageClasses";
        let classes = Api::<StorageClass>::all(self.parent.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| from_kube(OP, e))?;
        let parent: Vec<ParentClass> = classes.items.iter().filter_map(parent_class).collect();
        data::document(stored, &parent).map(Some)
    }

    async fn disks_meta(&self) -> Result<Vec<DiskMeta>, DiscoveryError> {
        const OP: &str = "ListVirtualDisks";
        let found = self
            .cluster_uuid
            .get_or_find(
                "cluster UUID",
                "configmap kube-system/d8-cluster-uuid",
                || async {
                    match &self.tenant {
                        Some(kube) => crate::identity::deckhouse_cluster_uuid(kube).await,
                        None => Ok(None),
                    }
                },
            )
            .await;
        let Some(cluster) = &found else {
            return Ok(Vec::new());
        };
        let disks = Api::<VirtualDisk>::namespaced(self.parent.clone(), &self.namespace)
            .list(&ListParams::default().labels(&format!("{CLUSTER_UUID}={cluster}")))
            .await
            .map_err(|e| from_kube(OP, e))?;
        Ok(disks
            .items
            .into_iter()
            .filter_map(|d| {
                Some(DiskMeta {
                    id: d.metadata.uid.clone().unwrap_or_default(),
                    name: d.metadata.name?,
                })
            })
            .collect())
    }

    async fn check_cloud_conditions(&self) -> Result<Vec<CloudCondition>, DiscoveryError> {
        Ok(Vec::new())
    }
}
