//! The DVP discoverer against a parent virtualization cluster and a tenant cluster (two real
//! kube-apiservers), under the shipped RBAC on both sides (the tenant's
//! `deploy/cloud-data-discoverer/rbac.yaml`, the parent's
//! `deploy/dvp/parent-discoverer-rbac.yaml`): the document lists the parent's StorageClasses
//! (its default marked) over the stored ones, orphaned VirtualDisks are this cluster's only, a
//! second run writes nothing, a new parent StorageClass is published without waiting for the
//! period, an unreachable parent is retried then turns `/healthz` 503 until it is back, and an
//! identity the parent refuses fails at once with a clear error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use stratus_discoverer::app::dvp_backend;
use stratus_discoverer::metrics::Metrics;
use stratus_discoverer::outputs::Outputs;
use stratus_discoverer::reconciler::{Health, Reconciler, RetrySettings};
use stratus_discoverer::Discoverer;
use stratus_dvp_api::labels::CLUSTER_UUID;
use stratus_dvp_api::{VirtualDisk, VirtualDiskPvc, VirtualDiskSpec};
use stratus_runtime::backoff::Backoff;
use stratus_testenv::dvp::DvpEnv;
use stratus_testenv::Identity;

mod common;

use common::{install, metrics_text, parent_identity, pv, wait_for, ME};

const CLUSTER: &str = "c0ffee00-0000-4000-8000-00000000000a";
const OTHER: &str = "c0ffee00-0000-4000-8000-00000000000b";
async fn storage_class(parent: &kube::Client, sc: Value) -> Result<()> {
    let sc: StorageClass = serde_json::from_value(sc)?;
    Api::<StorageClass>::all(parent.clone())
        .create(&PostParams::default(), &sc)
        .await?;
    Ok(())
}

async fn disk(env: &DvpEnv, name: &str, cluster: &str) -> Result<()> {
    let mut disk = VirtualDisk::new(
        name,
        env.namespace(),
        VirtualDiskSpec {
            persistent_volume_claim: Some(VirtualDiskPvc {
                size: Some("1Gi".into()),
                storage_class_name: Some("linstor-thin-r1".into()),
            }),
            ..VirtualDiskSpec::default()
        },
    );
    disk.metadata.labels = Some(BTreeMap::from([(CLUSTER_UUID.into(), cluster.into())]));
    Api::<VirtualDisk>::namespaced(env.parent_admin().await?, env.namespace())
        .create(&PostParams::default(), &disk)
        .await?;
    Ok(())
}

async fn document(tenant: &kube::Client) -> Result<Option<Value>> {
    let Some(secret) = Api::<Secret>::namespaced(tenant.clone(), "kube-system")
        .get_opt("d8-cloud-provider-discovery-data")
        .await?
    else {
        return Ok(None);
    };
    let bytes = secret
        .data
        .and_then(|d| d.get("discovery-data.json").cloned())
        .context("discovery-data.json")?;
    Ok(Some(serde_json::from_slice(&bytes.0)?))
}

fn lookup(
    vars: &[(String, String)],
    extra: &[(&str, &str)],
) -> impl Fn(&str) -> Option<String> + Sync {
    let mut map: BTreeMap<String, String> = vars.iter().cloned().collect();
    for (k, v) in extra {
        map.insert(k.to_string(), v.to_string());
    }
    move |k| map.get(k).cloned()
}

#[tokio::test]
async fn dvp_discoverer_on_a_parent_cluster_under_shipped_rbac() -> Result<()> {
    let mut env = DvpEnv::start().await?;
    install(&env.tenant).await?;
    let tenant_admin = env.tenant.kube_client(Identity::Admin).await?;
    let parent = env.parent_admin().await?;
    storage_class(
        &parent,
        json!({"metadata": {"name": "linstor-thin-r1",
                            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": "replicated.csi.storage.deckhouse.io", "allowVolumeExpansion": true,
               "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await?;
    storage_class(
        &parent,
        json!({"metadata": {"name": "local-path"}, "provisioner": "local.csi.storage.deckhouse.io",
               "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain"}),
    )
    .await?;
    disk(&env, "pvc-used", CLUSTER).await?;
    disk(&env, "pvc-orphan", CLUSTER).await?;
    disk(&env, "pvc-theirs", OTHER).await?;
    pv(&tenant_admin, "pvc-used", "csi.dvp.deckhouse.io").await?;
    let stored = json!({"apiVersion": "deckhouse.io/v1", "kind": "DVPCloudDiscoveryData", "layout": "Standard",
                        "zones": ["default"],
                        "storageClasses": [{"name": "retired", "isEnabled": false}]});
    Api::<Secret>::namespaced(tenant_admin.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("d8-provider-cluster-configuration".into()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([(
                    "cloud-provider-discovery-data.json".into(),
                    ByteString(serde_json::to_vec(&stored)?),
                )])),
                ..Default::default()
            },
        )
        .await?;

    let vars = parent_identity(&env).await?;
    let discoverer: Arc<dyn Discoverer> =
        Arc::new(dvp_backend(&lookup(&vars, &[("CLUSTER_UUID", CLUSTER)])).await?);
    let mut registry = Registry::default();
    let health = Health::default();
    let reconciler = Arc::new(Reconciler::new(
        discoverer,
        Outputs::new(env.tenant.kube_client(ME).await?),
        Arc::new(Metrics::register(&mut registry)),
        health.clone(),
        RetrySettings {
            attempts: 2,
            backoff: Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
        },
    ));

    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert_eq!(report.writes, 1, "the discovery Secret only: {report:?}");
    assert_eq!(report.orphaned_disks, 1, "{report:?}");
    assert_eq!(
        document(&tenant_admin)
            .await?
            .context("the discovery Secret")?,
        json!({"apiVersion": "deckhouse.io/v1", "kind": "DVPCloudDiscoveryData", "layout": "Standard",
               "zones": ["default"], "storageClasses": [
            {"name": "linstor-thin-r1", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete",
             "allowVolumeExpansion": true, "isEnabled": true, "isDefault": true},
            {"name": "local-path", "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain",
             "allowVolumeExpansion": false, "isEnabled": true, "isDefault": false},
            {"name": "retired", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete",
             "allowVolumeExpansion": false, "isEnabled": false, "isDefault": false}]})
    );
    let text = metrics_text(&registry);
    assert!(
        text.contains("orphaned_disk_info{id=") && text.contains("name=\"pvc-orphan\"} 1"),
        "{text}"
    );
    assert!(
        !text.contains("pvc-theirs") && !text.contains("pvc-used"),
        "{text}"
    );

    // Deckhouse's template passes no CLUSTER_UUID: the UUID Deckhouse keeps in the tenant
    // (ConfigMap kube-system/d8-cluster-uuid) names the cluster, read under the shipped RBAC.
    let without_uuid = dvp_backend(&lookup(&vars, &[])).await?;
    let registry_b = {
        let mut registry = Registry::default();
        let metrics = Arc::new(Metrics::register(&mut registry));
        let b = Reconciler::new(
            Arc::new(without_uuid.finding_identity_with(env.tenant.kube_client(ME).await?)),
            Outputs::new(env.tenant.kube_client(ME).await?),
            metrics,
            Health::default(),
            RetrySettings {
                attempts: 1,
                backoff: Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
            },
        );
        assert_eq!(b.run_once().await.orphaned_disks, 0, "no UUID anywhere yet");
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
            tenant_admin.clone(),
            "kube-system",
        )
        .create(
            &PostParams::default(),
            &k8s_openapi::api::core::v1::ConfigMap {
                metadata: ObjectMeta {
                    name: Some("d8-cluster-uuid".into()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([("cluster-uuid".into(), CLUSTER.into())])),
                ..Default::default()
            },
        )
        .await?;
        let report = b.run_once().await;
        assert!(report.failed_steps.is_empty(), "{report:?}");
        assert_eq!(report.orphaned_disks, 1, "{report:?}");
        registry
    };
    assert!(metrics_text(&registry_b).contains("name=\"pvc-orphan\"} 1"));

    // Nothing changed: no write.
    let writes = env.tenant.kube_writes_by(ME.username())?;
    assert_eq!(reconciler.run_once().await.writes, 0);
    assert_eq!(env.tenant.kube_writes_by(ME.username())?, writes);

    // A new parent StorageClass is published without waiting for the (one-hour) period.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let looping = {
        let reconciler = reconciler.clone();
        tokio::spawn(async move {
            reconciler
                .run(Duration::from_secs(3600), async {
                    let _ = stopped.await;
                })
                .await
        })
    };
    let settled = env.tenant.kube_writes_by(ME.username())?;
    storage_class(
        &parent,
        json!({"metadata": {"name": "fast"}, "provisioner": "replicated.csi.storage.deckhouse.io"}),
    )
    .await?;
    wait_for(
        "the new StorageClass in the discovery document",
        Duration::from_secs(60),
        || {
            let tenant_admin = tenant_admin.clone();
            async move {
                let doc = document(&tenant_admin).await?.unwrap_or_default();
                Ok(doc["storageClasses"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["name"] == "fast"))
                    .then_some(()))
            }
        },
    )
    .await?;
    assert!(env.tenant.kube_writes_by(ME.username())? > settled);
    let _ = stop.send(());
    looping.await?;

    // The parent is unreachable: retried, then /healthz 503 and the last document kept; the
    // next run after it is back succeeds.
    let before = document(&tenant_admin).await?;
    env.parent.stop_apiserver();
    let report = reconciler.run_once().await;
    assert_eq!(
        report.failed_steps,
        vec!["discovery_data", "disks_meta"],
        "{report:?}"
    );
    assert!(!health.is_ok());
    assert_eq!(
        document(&tenant_admin).await?,
        before,
        "a failed run keeps the document"
    );
    env.parent.start_apiserver().await?;
    let report = reconciler.run_once().await;
    assert!(report.failed_steps.is_empty(), "{report:?}");
    assert!(health.is_ok());

    // The tenant's own parent identity may not list StorageClasses: refused at once, clearly.
    let refused: Arc<dyn Discoverer> = Arc::new(dvp_backend(&lookup(&env.env_vars(), &[])).await?);
    let err = refused
        .discovery_data(b"")
        .await
        .expect_err("the parent refuses the identity");
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("refused the credentials"), "{err}");
    assert!(err.to_string().contains("storageclasses"), "{err}");
    Ok(())
}

#[tokio::test]
async fn missing_dvp_variables_are_named_at_start() {
    let err = dvp_backend(&|_| None)
        .await
        .err()
        .expect("no variables, no backend");
    let text = err.to_string();
    assert!(text.contains("--cloud-provider=dvp"), "{text}");
    assert!(text.contains("DVP_KUBERNETES_CONFIG_BASE64"), "{text}");
    assert!(text.contains("DVP_NAMESPACE"), "{text}");
}
