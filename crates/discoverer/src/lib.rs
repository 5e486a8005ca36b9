//! cloud-data-discoverer as a library, compatible with Deckhouse's: every `--discovery-period`
//! (first run at once) it asks the cloud for its inventory through a [`Discoverer`] backend and
//! writes, only when something changed, the Secret `kube-system/d8-cloud-provider-discovery-data`
//! (`discovery-data.json`), the cluster-scoped `InstanceTypesCatalog` `for-cluster-autoscaler`
//! and the ConfigMap `kube-system/d8-cloud-provider-conditions`; it reads the Secret
//! `kube-system/d8-provider-cluster-configuration` and lists PersistentVolumes (orphaned disks).
//! Metrics carry Deckhouse's names (`cloud_data_discovery_*`); `/healthz` turns 503 once a
//! cloud step has exhausted its retries, and 200 again after a good run.

pub mod app;
pub mod aws;
pub mod catalog_object;
pub mod cloud;
pub mod discoverer;
pub mod dvp;
pub mod http;
pub mod identity;
pub mod metrics;
pub mod openstack;
pub mod outputs;
pub mod plan;
pub mod reconciler;
pub mod types;

pub use discoverer::{Discoverer, DiscoveryError};
pub use reconciler::{Health, Reconciler, RetrySettings};
pub use types::{CloudCondition, DiskMeta, InstanceType};
