//! The Kubernetes reads and writes of the driver, each write counted; nothing is written when
//! the object already says what it should.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::ByteString;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch,
    PatchParams, PostParams,
};
use serde_json::json;

use crate::metrics::Metrics;
use crate::status::{self, Condition};
use crate::storage_classes::Change;
use crate::{spot_marks, Cloud};

const MANAGER: &str = "stratus-module-controller";

/// Every StorageClass of the cluster.
pub async fn storage_classes(client: &kube::Client) -> Result<Vec<StorageClass>, kube::Error> {
    Ok(Api::<StorageClass>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

/// Carries out `changes`; a foreign class of a wanted name is logged and left alone.
pub async fn apply_storage_class_changes(
    client: &kube::Client,
    metrics: &Metrics,
    changes: &[Change],
) -> Result<(), kube::Error> {
    let api = Api::<StorageClass>::all(client.clone());
    let post = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    for change in changes {
        match change {
            Change::Create(sc) => {
                api.create(&post, sc).await?;
                metrics.wrote("storageclasses", "create");
                tracing::info!(class = change.name(), "created storage class");
            }
            Change::Patch(name, body) => {
                api.patch(name, &PatchParams::apply(MANAGER), &Patch::Merge(body))
                    .await?;
                metrics.wrote("storageclasses", "patch");
                tracing::info!(class = %name, "updated storage class");
            }
            Change::Recreate(sc) => {
                // Immutable fields changed: PVCs name their class, so they stay bound.
                delete_and_wait(&api, change.name()).await?;
                metrics.wrote("storageclasses", "delete");
                api.create(&post, sc).await?;
                metrics.wrote("storageclasses", "create");
                tracing::info!(
                    class = change.name(),
                    "recreated storage class (its parameters changed)"
                );
            }
            Change::Delete(name) => {
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
                metrics.wrote("storageclasses", "delete");
                tracing::info!(class = %name, "deleted storage class (no longer wanted)");
            }
            Change::Foreign(name) => {
                tracing::warn!(class = %name, "a storage class of this name exists and is not the module's; left alone");
            }
        }
    }
    Ok(())
}

async fn delete_and_wait(api: &Api<StorageClass>, name: &str) -> Result<(), kube::Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    }
    // StorageClasses have no finalizers: gone at once unless a client added one.
    for _ in 0..50 {
        if api.get_opt(name).await?.is_none() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Creates the module's VolumeSnapshotClass when the snapshot API is served and it is absent.
pub async fn ensure_snapshot_class(
    client: &kube::Client,
    metrics: &Metrics,
    cloud: Cloud,
) -> Result<(), kube::Error> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
        "volumesnapshotclasses",
    );
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    match api.get_opt(cloud.snapshot_class()).await {
        Ok(Some(_)) => return Ok(()),
        Ok(None) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e),
    }
    // get_opt maps a missing resource to None too: check the API is served before creating.
    if let Err(kube::Error::Api(e)) = api.list_metadata(&ListParams::default().limit(1)).await {
        if e.code == 404 {
            return Ok(());
        }
    }
    let mut object = DynamicObject::new(cloud.snapshot_class(), &resource);
    object.metadata.labels = Some(cloud.module_labels());
    object.data = json!({"driver": cloud.provisioner(), "deletionPolicy": "Delete"});
    api.create(
        &PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        },
        &object,
    )
    .await?;
    metrics.wrote("volumesnapshotclasses", "create");
    tracing::info!(
        class = cloud.snapshot_class(),
        "created volume snapshot class"
    );
    Ok(())
}

/// Makes `kube-system/<name>` hold exactly `data` (and carry `labels`).
pub async fn ensure_secret(
    client: &kube::Client,
    metrics: &Metrics,
    name: &str,
    labels: BTreeMap<String, String>,
    data: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let api = Api::<Secret>::namespaced(client.clone(), "kube-system");
    let wanted: BTreeMap<String, ByteString> = data
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
        .collect();
    let post = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    match api.get_opt(name).await? {
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("kube-system".into()),
                    labels: Some(labels),
                    ..ObjectMeta::default()
                },
                type_: Some("Opaque".into()),
                data: Some(wanted),
                ..Secret::default()
            };
            api.create(&post, &secret).await?;
            metrics.wrote("secrets", "create");
            tracing::info!(secret = name, "created registration secret");
        }
        Some(mut existing) => {
            let have_labels = existing.metadata.labels.clone().unwrap_or_default();
            let labels_ok = labels.iter().all(|(k, v)| have_labels.get(k) == Some(v));
            if existing.data.as_ref() == Some(&wanted) && labels_ok {
                return Ok(());
            }
            let mut merged = have_labels;
            merged.extend(labels);
            existing.metadata.labels = Some(merged);
            existing.data = Some(wanted);
            existing.string_data = None;
            api.replace(name, &post, &existing).await?;
            metrics.wrote("secrets", "replace");
            tracing::info!(secret = name, "updated registration secret");
        }
    }
    Ok(())
}

/// Marks every node the termination handler tainted for a spot interruption.
pub async fn mark_spot_nodes(client: &kube::Client, metrics: &Metrics) -> Result<(), kube::Error> {
    let api = Api::<Node>::all(client.clone());
    for node in api.list(&ListParams::default()).await?.items {
        let Some(patch) = spot_marks::plan(&node) else {
            continue;
        };
        let name = node.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::apply(MANAGER), &Patch::Merge(&patch))
            .await?;
        metrics.wrote("nodes", "patch");
        tracing::info!(node = %name, "marked node for spot termination");
    }
    Ok(())
}

/// The conditions the module's status ConfigMap `name` holds (none when it does not exist or its
/// content is not a condition list).
pub async fn read_conditions(
    client: &kube::Client,
    name: &str,
) -> Result<Vec<Condition>, kube::Error> {
    let stored = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get_opt(name)
        .await?;
    Ok(stored
        .and_then(|cm| cm.data?.get(status::KEY).cloned())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default())
}

/// Creates or updates the module's status ConfigMap `name` to hold `conditions`.
pub async fn write_conditions(
    client: &kube::Client,
    metrics: &Metrics,
    name: &str,
    conditions: &[Condition],
) -> Result<(), kube::Error> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), "kube-system");
    let text = serde_json::to_string_pretty(conditions).unwrap_or_default();
    let data = BTreeMap::from([(status::KEY.to_string(), text)]);
    let post = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    match api.get_opt(name).await? {
        None => {
            let config_map = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("kube-system".into()),
                    ..ObjectMeta::default()
                },
                data: Some(data),
                ..ConfigMap::default()
            };
            api.create(&post, &config_map).await?;
            metrics.wrote("configmaps", "create");
        }
        Some(mut existing) => {
            existing.data = Some(data);
            api.replace(name, &post, &existing).await?;
            metrics.wrote("configmaps", "replace");
        }
    }
    Ok(())
}
