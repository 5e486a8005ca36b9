//! The Kubernetes side of a run: reads the stored discovery data and the PersistentVolume names,
//! and creates or replaces the three outputs only when their content changed.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, Secret};
use k8s_openapi::ByteString;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::Client;

use crate::catalog_object::InstanceTypesCatalog;
use crate::plan::{conditions_action, conditions_json, write_action, WriteAction};
use crate::types::{CloudCondition, InstanceType};

/// Namespace of every namespaced object the discoverer touches.
pub const NAMESPACE: &str = "kube-system";
/// The Secret the discoverer writes.
pub const DISCOVERY_SECRET: &str = "d8-cloud-provider-discovery-data";
/// Its key.
pub const DISCOVERY_KEY: &str = "discovery-data.json";
/// The Secret dhctl writes, read for the stored discovery data.
pub const CLUSTER_CONFIGURATION_SECRET: &str = "d8-provider-cluster-configuration";
/// Its key holding the stored discovery data.
pub const STORED_DISCOVERY_KEY: &str = "cloud-provider-discovery-data.json";
/// The conditions ConfigMap.
pub const CONDITIONS_CONFIGMAP: &str = "d8-cloud-provider-conditions";
/// Its key.
pub const CONDITIONS_KEY: &str = "conditions";
/// The cluster-scoped catalog's name.
pub const CATALOG_NAME: &str = "for-cluster-autoscaler";

/// A Kubernetes request failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct KubeError {
    what: String,
    #[source]
    source: kube::Error,
}

fn ctx(what: impl Into<String>) -> impl FnOnce(kube::Error) -> KubeError {
    let what = what.into();
    move |source| KubeError { what, source }
}

/// Reads and writes the outputs.
#[derive(Clone)]
pub struct Outputs {
    client: Client,
}

impl Outputs {
    /// Outputs written with `client`.
    pub fn new(client: Client) -> Outputs {
        Outputs { client }
    }

    /// The stored discovery data (empty when the Secret or key is absent, e.g. hybrid clusters).
    pub async fn stored_discovery_data(&self) -> Result<Vec<u8>, KubeError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        let secret = api
            .get_opt(CLUSTER_CONFIGURATION_SECRET)
            .await
            .map_err(ctx(format!(
                "reading secret {NAMESPACE}/{CLUSTER_CONFIGURATION_SECRET}"
            )))?;
        Ok(secret
            .and_then(|s| s.data)
            .and_then(|mut d| d.remove(STORED_DISCOVERY_KEY))
            .map(|b| b.0)
            .unwrap_or_default())
    }

    /// Names of every PersistentVolume.
    pub async fn pv_names(&self) -> Result<BTreeSet<String>, KubeError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let list = api
            .list_metadata(&ListParams::default())
            .await
            .map_err(ctx("listing persistentvolumes"))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect())
    }

    /// Writes the discovery Secret if its `discovery-data.json` differs.
    pub async fn discovery_secret(&self, data: Vec<u8>) -> Result<WriteAction, KubeError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        let what = format!("writing secret {NAMESPACE}/{DISCOVERY_SECRET}");
        let existing = api.get_opt(DISCOVERY_SECRET).await.map_err(ctx(&what))?;
        let desired: BTreeMap<String, ByteString> =
            [(DISCOVERY_KEY.to_owned(), ByteString(data))].into();
        let stored = existing
            .as_ref()
            .map(|s| s.data.clone().unwrap_or_default());
        let action = write_action(stored.as_ref(), &desired);
        match (action, existing) {
            (WriteAction::Create, _) => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(DISCOVERY_SECRET.into()),
                        namespace: Some(NAMESPACE.into()),
                        ..Default::default()
                    },
                    data: Some(desired),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &secret)
                    .await
                    .map_err(ctx(&what))?;
            }
            (WriteAction::Replace, Some(mut secret)) => {
                secret.data = Some(desired);
                api.replace(DISCOVERY_SECRET, &PostParams::default(), &secret)
                    .await
                    .map_err(ctx(&what))?;
            }
            _ => {}
        }
        Ok(action)
    }

    /// Writes the `InstanceTypesCatalog` if its `instanceTypes` differ.
    pub async fn catalog(&self, types: &[InstanceType]) -> Result<WriteAction, KubeError> {
        let api: Api<InstanceTypesCatalog> = Api::all(self.client.clone());
        let what = format!("writing instancetypescatalog {CATALOG_NAME}");
        let existing = api.get_opt(CATALOG_NAME).await.map_err(ctx(&what))?;
        let action = write_action(
            existing.as_ref().map(|c| c.instance_types.as_slice()),
            types,
        );
        match (action, existing) {
            (WriteAction::Create, _) => {
                let obj = InstanceTypesCatalog::new(CATALOG_NAME, types.to_vec());
                api.create(&PostParams::default(), &obj)
                    .await
                    .map_err(ctx(&what))?;
            }
            (WriteAction::Replace, Some(mut obj)) => {
                obj.instance_types = types.to_vec();
                api.replace(CATALOG_NAME, &PostParams::default(), &obj)
                    .await
                    .map_err(ctx(&what))?;
            }
            _ => {}
        }
        Ok(action)
    }

    /// Writes the conditions ConfigMap if its `conditions` differ (never creates it empty).
    pub async fn conditions(
        &self,
        conditions: &[CloudCondition],
    ) -> Result<WriteAction, KubeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), NAMESPACE);
        let what = format!("writing configmap {NAMESPACE}/{CONDITIONS_CONFIGMAP}");
        let existing = api
            .get_opt(CONDITIONS_CONFIGMAP)
            .await
            .map_err(ctx(&what))?;
        let stored = existing.as_ref().map(|c| {
            c.data
                .as_ref()
                .and_then(|d| d.get(CONDITIONS_KEY).cloned())
                .unwrap_or_default()
        });
        let action = conditions_action(stored.as_ref(), conditions);
        let data: BTreeMap<String, String> =
            [(CONDITIONS_KEY.to_owned(), conditions_json(conditions))].into();
        match (action, existing) {
            (WriteAction::Create, _) => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(CONDITIONS_CONFIGMAP.into()),
                        namespace: Some(NAMESPACE.into()),
                        ..Default::default()
                    },
                    data: Some(data),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm)
                    .await
                    .map_err(ctx(&what))?;
            }
            (WriteAction::Replace, Some(mut cm)) => {
                cm.data = Some(data);
                api.replace(CONDITIONS_CONFIGMAP, &PostParams::default(), &cm)
                    .await
                    .map_err(ctx(&what))?;
            }
            _ => {}
        }
        Ok(action)
    }
}
