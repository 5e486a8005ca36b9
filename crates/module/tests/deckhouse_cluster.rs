//! On a Deckhouse-shaped cluster (the ModuleConfig kind served, the snapshot API served): the
//! settings come from the ModuleConfig `cloud-provider-aws` and the default class from
//! `global`'s `defaultClusterStorageClass`, over a values file that says otherwise; the
//! VolumeSnapshotClass `aws` is created once; a bad ModuleConfig changes nothing and its Event is
//! about the ModuleConfig.

mod common;

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use prometheus_client::registry::Registry;
use serde_json::json;
use stratus_module::driver::{Driver, Reason};
use stratus_module::metrics::Metrics;
use stratus_module::Cloud;
use stratus_scenarios::wait_for;
use stratus_testenv::core::cluster::wait_established;
use stratus_testenv::tools::module_crds::{install, SNAPSHOTTER};

use common::{is_default, values, Bed};

const PCC: &str = "apiVersion: deckhouse.io/v1\nkind: AWSClusterConfiguration\nprovider:\n  region: eu-central-1\n";

async fn module_config(
    admin: &kube::Client,
    name: &str,
    settings: serde_json::Value,
) -> Result<()> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "ModuleConfig"),
        "moduleconfigs",
    );
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig", "metadata": {"name": name},
        "spec": {"enabled": true, "version": 1, "settings": settings}
    }))?;
    Api::<DynamicObject>::all_with(admin.clone(), &resource)
        .patch(
            name,
            &PatchParams::apply("tests").force(),
            &Patch::Apply(&object),
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_from_module_configs_and_the_snapshot_class() -> Result<()> {
    let bed = Bed::start().await?;
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(include_str!("data/moduleconfig.crd.yaml"))?;
    Api::<CustomResourceDefinition>::all(bed.admin.clone())
        .create(&PostParams::default(), &crd)
        .await?;
    wait_established(&bed.admin, "moduleconfigs.deckhouse.io").await?;
    install(
        &bed.admin,
        SNAPSHOTTER,
        &["snapshot.storage.k8s.io_volumesnapshotclasses.yaml"],
    )
    .await?;
    bed.secret(
        "d8-provider-cluster-configuration",
        &[("cloud-provider-cluster-configuration.yaml", PCC)],
    )
    .await?;
    module_config(
        &bed.admin,
        "cloud-provider-aws",
        json!({"storageClass": {"exclude": ["sc1", "st1"]}}),
    )
    .await?;
    module_config(
        &bed.admin,
        "global",
        json!({"defaultClusterStorageClass": "gp3"}),
    )
    .await?;
    // The values file says otherwise; the ModuleConfigs win on a Deckhouse cluster.
    let file = values(bed.cluster.dir(), json!({"storageClass": {"exclude": []}}))?;
    let mut registry = Registry::default();
    let driver = Driver::new(
        bed.controller.clone(),
        Cloud::Aws,
        Some(file),
        Metrics::register(&mut registry),
    );
    assert_eq!(driver.reconcile().await, vec![]);

    let classes = bed.classes("cloud-provider-aws").await?;
    assert_eq!(classes.keys().collect::<Vec<_>>(), ["gp2", "gp3"]);
    assert!(is_default(&classes["gp3"]) && !is_default(&classes["gp2"]));

    let snapshot_resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
        "volumesnapshotclasses",
    );
    let snapshot_classes = Api::<DynamicObject>::all_with(bed.admin.clone(), &snapshot_resource);
    let aws = snapshot_classes
        .get("aws")
        .await
        .context("the VolumeSnapshotClass aws")?;
    assert_eq!(aws.data["driver"], "ebs.csi.aws.com");
    assert_eq!(aws.data["deletionPolicy"], "Delete");
    assert_eq!(driver.reconcile().await, vec![]);
    assert_eq!(
        snapshot_classes
            .list(&ListParams::default())
            .await?
            .items
            .len(),
        1
    );

    // A bad ModuleConfig: nothing changes; the Event is about the ModuleConfig.
    module_config(
        &bed.admin,
        "cloud-provider-aws",
        json!({"storageClass": {"provision": [{"name": "x", "type": "io1"}]}}),
    )
    .await?;
    let failures = driver.reconcile().await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].reason, Reason::Settings);
    assert_eq!(
        failures[0].message,
        "moduleconfig cloud-provider-aws: storageClass.provision[0].iopsPerGB: required for io1"
    );
    assert_eq!(
        bed.classes("cloud-provider-aws")
            .await?
            .keys()
            .collect::<Vec<_>>(),
        ["gp2", "gp3"]
    );
    let events = Api::<Event>::all(bed.admin.clone());
    let event = wait_for(
        "the Event about the ModuleConfig",
        Duration::from_secs(10),
        || async {
            Ok(events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .find(|e| {
                    e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("ModuleConfig")
                }))
        },
    )
    .await?;
    assert_eq!(
        event.regarding.and_then(|r| r.name).as_deref(),
        Some("cloud-provider-aws")
    );
    Ok(())
}
